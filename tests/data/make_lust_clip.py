"""Writes ``tests/data/lust_clip/``: a 2.6 x 2.7 km clip of the LuST OSM south of the city centre
(a motorway junction with ramps, 30-odd traffic lights, one pair of lights that ``--tls.join``
joins), LuST's vehicle types and its licence. The unit tests build their small LuST from it.

    python tests/data/make_lust_clip.py [LUST_DIR]
"""

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

from mobility.lust.config import LUST_OSM_NAME, LUST_VTYPES_NAME, default_lust_dir  # noqa: E402
from mobility.lust.network import clip_osm  # noqa: E402

LON, LAT, HALF = 6.130, 49.590, 0.012
BBOX = (LON - 1.5 * HALF, LAT - HALF, LON + 1.5 * HALF, LAT + HALF)

if __name__ == "__main__":
    src = Path(sys.argv[1]) if len(sys.argv) > 1 else default_lust_dir()
    if src is None:
        raise SystemExit("give the LuST folder (lust.legacy.scenario.osm.gz, vtypes.add.xml)")
    out = Path(__file__).resolve().parent / "lust_clip"
    out.mkdir(exist_ok=True)
    print(clip_osm(src / LUST_OSM_NAME, out / LUST_OSM_NAME, BBOX))
    for name in (LUST_VTYPES_NAME, "LICENSE.md"):
        shutil.copyfile(src / name, out / name)
