"""F-SOSA on Flower against the same replay without Flower, on real traffic from a ``vmc run``.

``vmc run``'s job (the embedded city) for ``--duration`` simulated seconds records its traffic;
its availability becomes a Flower schedule (``vmc_sim.rundir.export.flower_schedule``), which
``vmc_sim.flower.apps.run_flower`` replays with one Flower node per vehicle and
``vmc_sim.flower.replay.direct_run`` replays in one process. Printed: nodes and requests, whether
every released model is equal tensor for tensor and the upload bytes are equal, whether the
records' kinds, members and bytes equal ``vmc run``'s F-SOSA records on that traffic, and each
replay's wall-clock.

    python bench/flower_vs_direct.py [--duration 120]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from vmc_sim import load_scenario, run_scenario
from vmc_sim.flower.replay import direct_run, parse_schedule, read_run, uploads
from vmc_sim.rundir.export import flower_schedule, load_availability


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=120.0, help="simulated seconds of traffic")
    args = ap.parse_args(argv)
    from vmc_sim.flower.apps import run_flower

    data = {"duration": args.duration, "federated": {"methods": ["fsosa"]}, "mobility": {"trace_cache": None}}
    sc = load_scenario(data)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        live = run_scenario(sc, out=root / "runs", progress=False, say=lambda s: None)
        schedule = parse_schedule(flower_schedule(load_availability(live.path / "trace.jsonl")))
        t0 = time.perf_counter()
        direct, d_models = read_run(direct_run(sc, schedule, root / "direct"))
        t_direct = time.perf_counter() - t0
        t0 = time.perf_counter()
        flower, f_models = read_run(run_flower(sc, schedule, root / "flower"))
        t_flower = time.perf_counter() - t0
        cosim = [r for r in live.records() if r.get("method") == "fsosa"]
    same_models = sorted(f_models) == sorted(d_models) and all(torch.equal(f_models[i], m) for i, m in d_models.items())
    same_bytes = uploads(flower["records"]) == uploads(direct["records"])
    keys = ("kind", "members", "bytes")
    same_as_run = [{k: r[k] for k in keys} for r in flower["records"]] == [{k: r[k] for k in keys} for r in cosim]
    print(f"status: flower {flower['status']}, direct {direct['status']}")
    print(f"nodes: {len(schedule.vehicles)}, records: {len(direct['records'])}, released models: {len(d_models)}")
    print(f"models equal tensor for tensor: {same_models}; upload bytes equal: {same_bytes}")
    print(f"kinds, members and bytes equal to vmc run's F-SOSA records: {same_as_run} ({len(cosim)} records)")
    print(f"wall-clock: direct {t_direct:.2f} s, flower {t_flower:.2f} s (Ray start-up included)")
    return 0 if same_models and same_bytes and flower["status"] == "complete" else 1


if __name__ == "__main__":
    raise SystemExit(main())
