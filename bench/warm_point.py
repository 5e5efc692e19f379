"""A sweep point whose contributions are already stored: the same scenario replayed twice on one
recorded trace with one fresh contribution store, the first run cold (every vehicle trained here),
the second warm (every contribution loaded), as a sweep's later points or a second setting of the
same traffic find it. Prints both wall-clocks and whether the records are identical (host-measured
``host_*`` columns aside): the store must change nothing but the time.

    python bench/warm_point.py --trace WHOLE_CITY_TRACE                       # the LuST region, MNIST
    python bench/warm_point.py --trace T --scenario scenarios/city.yaml

A trace of the LuST region is what ``tools/lust_region_cut.py`` keeps under
``WORK/whole/region-<seed>/trace.jsonl`` or any run of ``scenarios/lust_region.yaml`` records.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def records(run: Any) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if not k.startswith("host_")} for r in run.records()]


def main(argv: list[str] | None = None) -> int:
    from vmc_sim.cosim import replay_scenario, run_scenario
    from vmc_sim.scenario.config import load_model
    from vmc_sim.scenario.schema import Scenario

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trace", required=True, type=Path, help="a recorded trace of the scenario's traffic")
    p.add_argument("--scenario", default=str(ROOT / "scenarios" / "lust_region.yaml"))
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="vmc-warm-") as d:
        data = replay_scenario(a.trace, a.scenario).model_dump(mode="json")
        data["compute"]["contribution_cache"] = str(Path(d) / "contributions")
        scenario = load_model(Scenario, None, data)
        walls, seen, caches = {}, [], {}
        for side in ("cold", "warm"):
            t0 = time.perf_counter()
            run = run_scenario(scenario, out=Path(d) / side, progress=False, say=lambda s: None)
            walls[side] = time.perf_counter() - t0
            seen.append(records(run))
            cache = run.manifest()["summary"]["contribution_cache"]
            caches[side] = {"hits": cache["hits"], "misses": cache["misses"]}
            print(
                f"{side}: {walls[side]:.1f} s, {len(seen[-1])} records, {cache['hits']} contributions loaded, "
                f"{cache['misses']} trained",
                flush=True,
            )
    same = seen[0] == seen[1]
    print(f"records identical: {'yes' if same else 'no'}; warm / cold = {walls['warm'] / walls['cold']:.3f}")
    print(
        json.dumps({"scenario": a.scenario, "trace": str(a.trace), "wall_s": walls, "identical": same, "cache": caches})
    )
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
