"""Check our 3GPP TR 37.885 V2V path loss (``vmc_sim.radio.link_budget.path_loss_db``) against ns-3's.

ns-3 (the ``ns3`` wheel, ``pip install -e .[ns3]``; import name ``ns``) has the same Table 6.2.1-1
formulas in ``ThreeGppV2vUrbanPropagationLossModel`` and ``ThreeGppV2vHighwayPropagationLossModel``.
Each is set up with an ``AlwaysLosChannelConditionModel`` (LOS forced), ``ShadowingEnabled``
false and ``Frequency`` 5.9e9 Hz; the RSU node stands at (0, 0, 5.0 m), the vehicle node at
(d, 0, 1.5 m), and ns-3's loss is ``-CalcRxPower(0 dBm, rsu, vehicle)``. ns-3 takes the 3-D
distance between the two nodes, ``sqrt(d^2 + 3.5^2)``; ours is called with the ground (2-D)
distance ``d`` and the same heights, and turns it into the same 3-D distance itself, so both sides
see the same geometry.

Written to ``--out`` (CSV: distance, model, ns3_db, ours_db, diff_db with diff = ours - ns-3,
``distance`` the ground distance in metres) and printed as a table.

    python bench/ns3_pathloss.py                              # the committed CSV
    python bench/ns3_pathloss.py --distances 10 300 --out /tmp/pl.csv
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

from ns3_common import CARRIER_HZ, OUT_DIR, RSU_HEIGHT_M, VEHICLE_HEIGHT_M, write_csv

from vmc_sim.radio.link_budget import ChannelConfig, path_loss_db

DISTANCES_M = (5, 10, 20, 50, 100, 150, 200, 300, 400, 500)
TOLERANCE_DB = 0.01
DEFAULT_OUT = OUT_DIR / "pathloss.csv"
FIELDS = ("distance", "model", "ns3_db", "ours_db", "diff_db")

# our path_loss_model -> ns-3 TypeId name
NS3_MODELS = {
    "tr37885_urban_los": "ThreeGppV2vUrbanPropagationLossModel",
    "tr37885_highway_los": "ThreeGppV2vHighwayPropagationLossModel",
}


def our_config(model: str) -> ChannelConfig:
    """The channel the comparison uses: carrier and antenna heights as in ChannelConfig's defaults."""
    return ChannelConfig(
        path_loss_model=model,
        carrier_ghz=CARRIER_HZ / 1e9,
        rsu_height_m=RSU_HEIGHT_M,
        vehicle_height_m=VEHICLE_HEIGHT_M,
    )


def ours_db(model: str, distance_m: float) -> float:
    return path_loss_db(distance_m, our_config(model))


def ns3_db(model: str, distances_m: list[float]) -> list[float]:
    """ns-3's path loss (dB) for ``model`` at each ground distance (imports ns-3: about 7-14 s)."""
    from ns import ns

    loss_model = ns.CreateObject[getattr(ns, NS3_MODELS[model])]()
    loss_model.SetAttribute("Frequency", ns.DoubleValue(CARRIER_HZ))
    loss_model.SetAttribute("ShadowingEnabled", ns.BooleanValue(False))
    loss_model.SetAttribute(
        "ChannelConditionModel", ns.PointerValue(ns.CreateObject[ns.AlwaysLosChannelConditionModel]())
    )

    def node(x: float, z: float):
        mobility = ns.CreateObject[ns.ConstantPositionMobilityModel]()
        mobility.SetPosition(ns.Vector(x, 0.0, z))
        return mobility

    rsu = node(0.0, RSU_HEIGHT_M)
    return [-loss_model.CalcRxPower(0.0, rsu, node(float(d), VEHICLE_HEIGHT_M)) for d in distances_m]


def ns3_version() -> str:
    from importlib.metadata import version

    return version("ns3")


def compare(distances_m: list[float]) -> list[dict]:
    rows = []
    for model in NS3_MODELS:
        for d, theirs in zip(distances_m, ns3_db(model, distances_m), strict=True):
            mine = ours_db(model, d)
            rows.append({"distance": d, "model": model, "ns3_db": theirs, "ours_db": mine, "diff_db": mine - theirs})
    return rows


def read_csv(path: Path) -> list[dict]:
    with path.open(newline="") as f:
        return [
            {"distance": float(r["distance"]), "model": r["model"], **{k: float(r[k]) for k in FIELDS[2:]}}
            for r in csv.DictReader(f)
        ]


def table(rows: list[dict]) -> str:
    lines = ["| distance (m) | model | ns-3 (dB) | ours (dB) | ours - ns-3 (dB) |", "|---:|---|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r['distance']:g} | {r['model']} | {r['ns3_db']:.4f} | {r['ours_db']:.4f} | {r['diff_db']:+.2e} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--distances", type=float, nargs="+", default=list(DISTANCES_M), help="ground distances (m)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    from ns import ns  # noqa: F401  (timed here; ns3_db imports it again for free)

    print(f"ns-3 {ns3_version()} imported in {time.perf_counter() - t0:.1f} s")
    rows = compare(args.distances)
    cells = ([f"{r['distance']:g}", r["model"], *(f"{r[k]:.6f}" for k in FIELDS[2:])] for r in rows)
    write_csv(args.out, FIELDS, cells)
    print(table(rows))
    worst = max(abs(r["diff_db"]) for r in rows)
    ok = worst <= TOLERANCE_DB
    print(f"largest |ours - ns-3| = {worst:.3g} dB ({'within' if ok else 'OVER'} {TOLERANCE_DB} dB); wrote {args.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
