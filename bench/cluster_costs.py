"""What a LuST sweep point costs on a Ray cluster without a shared disk, and what a 60-point sweep
would take on 1, 4, 16 and 64 machines of this size.

Measured here: the bytes a point sends (its scenario's inputs: LuST's sources, the dataset), the
builds the driver ships once (the LuST network and demand, and a region cut), and, from a finished
case study (``--index``: the ``runs.json`` that ``tools/lust_case_study_replicates.py`` writes),
what a point brings back (its run directory) and how long the driver takes to land and verify it,
the SUMO pass and the run of one point; without ``--index`` those come from ``--sumo-s``,
``--run-s``, ``--back-mb`` and ``--land-s``. The projection starts from a driver that has built
LuST (once, before the sweep) and ships the build through the object store to each other machine
(its bytes over ``--gbps``, the driver's link, one machine after another), runs ``cores`` points at
once per machine, lands results one at a time on the driver, and says which of these bounds the
wall-clock; beside it, the same sweep when every other machine builds LuST itself (``--build-s``,
measured in bench/RESULTS.md "LuST rebuild"), as before the builds were shipped.

With ``--warm-s`` the points share one contribution store (a local sweep's cache, a cluster's
store on the driver): only the first wave trains its vehicles (``--run-s``), every later point
finds the contributions of the shards it hands out stored (the k-th client holds shard k, trained
from the same W0 at every density) and costs its SUMO pass and ``--warm-s``
(``bench/warm_point.py`` measures it).

    python bench/cluster_costs.py --index OUT/runs.json
    python bench/cluster_costs.py --sumo-s 1015 --run-s 961
    python bench/cluster_costs.py --warm-s 48
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any


def point_costs(index: Path) -> dict[str, float]:
    """Median SUMO pass and median cold run (the paper setting's: it trains every vehicle) of the
    finished case study's points, and the run directory of one of them."""
    entries = json.loads(index.read_text())
    sumo = [e["trace_s"] for e in entries if e["trace_s"] > 60]  # a pass SUMO ran, not a cache hit
    runs: dict[int, list[float]] = {}
    for e in sorted(entries, key=lambda e: e["finished_after_s"]):
        runs.setdefault(e["replicate"], []).append(e["finished_after_s"])
    first = [v[0] for v in runs.values() if v]  # the first run of each replicate to finish: a cold one
    return {"sumo_s": median(sumo) if sumo else math.nan, "run_s": median(first), "run_dir": entries[0]["run"]}


def shipped_bytes(scenario: Path, dataset: str) -> int:
    """Bytes a point of ``scenario`` on ``dataset`` sends to its node (inputs and dataset)."""
    from vmc_sim.scenario.config import load_model
    from vmc_sim.scenario.schema import Scenario, load_scenario
    from vmc_sim.sweep.shipping import ship_scenario

    data = load_scenario(scenario).model_dump(mode="json")
    data["federated"]["dataset"] = dataset
    _, inputs, ds, _ = ship_scenario(load_model(Scenario, None, data))
    return inputs.size + (ds[1].size if ds else 0)


def built_bytes(scenario: Path) -> int:
    """Bytes of the builds the driver ships once for ``scenario`` (built here first if need be)."""
    from vmc_sim.scenario.schema import load_scenario
    from vmc_sim.sweep.shipping import ship_scenario

    _, _, _, built = ship_scenario(load_scenario(scenario))
    return sum(bundle.size for _, bundle in built)


def landing(run_dir: Path) -> tuple[int, float]:
    """Bytes of a finished point's run directory and the seconds the driver takes to land and
    verify them (best of three)."""
    from vmc_sim.sweep.shipping import land, pack_dir

    bundle = pack_dir(run_dir)
    best = math.inf
    for _ in range(3):
        work = Path(tempfile.mkdtemp(prefix="vmc-land-"))
        try:
            t0 = time.perf_counter()
            land({"id": "p", "files": bundle}, work / "p")
            best = min(best, time.perf_counter() - t0)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return bundle.size, best


def projection(points: int, cores: int, nodes: int, costs: dict[str, Any], shipped: bool = True) -> dict[str, Any]:
    """Wall-clock of ``points`` on ``nodes`` machines, and what bounds it: the driver's LuST build
    shipped to the others (``shipped``), or built by every other machine (the driver, one of the
    machines, has it in both: built once before the sweep, ``vmc lust build``)."""
    per_point = costs["sumo_s"] + costs["run_s"]
    waves = math.ceil(points / (cores * nodes))
    warm = costs.get("warm_s")
    compute = waves * per_point if warm is None else per_point + (waves - 1) * (costs["sumo_s"] + warm)
    if shipped:  # the driver's build, sent to the other machines one after another over its link
        build = (nodes - 1) * costs["built_B"] * 8 / (costs["gbps"] * 1e9)
    else:
        build = costs["build_s"] if nodes > 1 else 0.0  # every other machine builds its own
    driver = points * costs["land_s"]
    wall = build + max(compute, driver)
    bound = "the points (cores)" if waves > 1 else "one point's own length"
    if driver > compute:
        bound = "the driver landing results"
    return {
        "machines": nodes,
        "waves": waves,
        "wall_h": wall / 3600,
        "bound": bound,
        "build_share": build / wall,
        "driver_share": driver / wall,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--index", type=Path, help="runs.json of a finished case study")
    p.add_argument("--sumo-s", type=float, default=1015.0, help="without --index: a point's SUMO pass (s)")
    p.add_argument("--run-s", type=float, default=961.0, help="without --index: a point's cold run (s)")
    p.add_argument("--back-mb", type=float, default=85.2, help="without --index: a point's run directory (MB)")
    p.add_argument("--land-s", type=float, default=0.28, help="without --index: landing and verifying it (s)")
    p.add_argument("--warm-s", type=float, default=None, help="a later point's run with its contributions stored (s)")
    p.add_argument("--gbps", type=float, default=1.0, help="the driver's link (Gb/s)")
    p.add_argument("--scenario", type=Path, default=Path(__file__).resolve().parents[1] / "scenarios/lust_region.yaml")
    p.add_argument("--dataset", default="mnist")
    p.add_argument("--build-s", type=float, default=1739.0, help="a cold LuST build on one machine (RESULTS.md)")
    p.add_argument("--points", type=int, default=60)
    p.add_argument("--cores", type=int, default=2)
    args = p.parse_args(argv)
    if args.index is not None:
        costs: dict[str, Any] = point_costs(args.index)
        if not Path(costs["run_dir"]).is_dir():
            p.error(
                f"--index: the run directory {costs['run_dir']} it names is gone; give --back-mb and --land-s "
                "(measured before) without --index"
            )
        costs["back_B"], costs["land_s"] = landing(Path(costs["run_dir"]))
    else:
        costs = {"sumo_s": args.sumo_s, "run_s": args.run_s, "back_B": args.back_mb * 1e6, "land_s": args.land_s}
    costs["sent_B"] = shipped_bytes(args.scenario, args.dataset)
    costs["built_B"] = built_bytes(args.scenario)
    costs["build_s"], costs["gbps"], costs["warm_s"] = args.build_s, args.gbps, args.warm_s
    print(
        f"per point: SUMO pass {costs['sumo_s']:.0f} s, run {costs['run_s']:.0f} s (cold), sent "
        f"{costs['sent_B'] / 1e6:.1f} MB, brought back {costs['back_B'] / 1e6:.1f} MB, landed and verified in "
        f"{costs['land_s']:.2f} s; LuST built once ({costs['build_s']:.0f} s) and shipped: "
        f"{costs['built_B'] / 1e6:.1f} MB a machine at {costs['gbps']:g} Gb/s"
        + (
            ""
            if args.warm_s is None
            else f"; points after the first wave find their contributions stored: run {args.warm_s:.0f} s"
        )
    )
    print(
        "| machines | waves | wall-clock h | bound by | build and shipping share | driver share | every machine builds: h |"
    )
    print("|---|---|---|---|---|---|---|")
    for n in (1, 4, 16, 64):
        r = projection(args.points, args.cores, n, costs)
        each = projection(args.points, args.cores, n, costs, shipped=False)
        print(
            f"| {n} | {r['waves']} | {r['wall_h']:.1f} | {r['bound']} | {100 * r['build_share']:.0f} % | "
            f"{100 * r['driver_share']:.1f} % | {each['wall_h']:.1f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
