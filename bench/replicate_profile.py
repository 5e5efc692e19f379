"""Where a cold replicate's wall-clock goes: one ``vmc run`` of a scenario under cProfile, its time
split among SUMO stepping, local training, Fisher, merge solves, evaluation, writing the run
directory and the rest, with training's rate against this CPU's peak.

A cold replicate trains every contribution anew (a fresh run directory, no contribution cache).
Each category is the cumulative time of its entry point (they do not nest in one another), the
rest is the run's wall-clock less their sum. Training's rate is the CNN's FLOPs per sample-epoch
(counted by torch, as the profile time model counts them) times the sample-epochs trained, over
the training time; the peak is a float32 matrix product on the same number of threads.

    python bench/replicate_profile.py --scenario scenarios/lust_region.yaml --region '{"buffer": 2000}'
    python bench/replicate_profile.py                       # the default city
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

CATEGORIES: dict[str, tuple[tuple[str, str], ...]] = {
    "SUMO stepping": (("mobility/source.py", "advance"),),
    "local training": (("fl_core/training.py", "train"),),
    "Fisher": (("fl_core/fisher/__init__.py", "compute_fisher"),),
    "merge solves": (("fl_core/projection.py", "project"),),
    "evaluation": (("fl_core/training.py", "evaluate"),),
    "writing the run directory": (
        ("vmc_sim/rundir/records.py", "_write"),
        ("vmc_sim/rundir/directory.py", "save_tensors"),
    ),
}
"""Each category's entry points: (file suffix, function name); cumulative time, counted once."""


def categories(stats: pstats.Stats) -> dict[str, float]:
    out = dict.fromkeys(CATEGORIES, 0.0)
    for (file, _line, func), (_cc, _nc, _tt, ct, callers) in stats.stats.items():  # type: ignore[attr-defined]
        for name, entries in CATEGORIES.items():
            entered = any(file.endswith(f) and func == fn for f, fn in entries)
            # the time entered from outside the entry point itself (recursion counted once)
            if entered and not any(c[2] == func and c[0] == file for c in callers):
                out[name] += ct
    return out


def peak_gflops(threads: int) -> float:
    """float32 matrix products on ``threads`` threads: this CPU's attainable peak (GFLOP/s)."""
    import torch

    torch.set_num_threads(threads)
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    for _ in range(3):
        a @ b
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < 2.0:
        a @ b
        n += 1
    return 2 * 1024**3 * n / (time.perf_counter() - t0) / 1e9


def main(argv: list[str] | None = None) -> int:
    from throughput import scenario_data

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scenario", default=str(ROOT / "scenarios" / "city.yaml"))
    p.add_argument("--region", help="mobility.region as JSON")
    p.add_argument("--out", help="also write the figures as JSON here")
    a = p.parse_args(argv)
    data = scenario_data(a.scenario, a.region)
    data.setdefault("compute", {})["contribution_cache"] = None

    from fl_core.flops import model_flops
    from fl_core.training import LocalTrainer
    from vmc_sim.cosim import run_scenario
    from vmc_sim.rundir.summary import method_totals
    from vmc_sim.scenario.schema import load_scenario

    scenario = load_scenario(data)
    seen: dict[str, Any] = {"sample_epochs": 0, "train_s": 0.0, "flops": None}
    original = LocalTrainer.train

    def counted(self: LocalTrainer, client: Any, data: Any) -> Any:  # the host's training, counted
        trained = original(self, client, data)
        seen["sample_epochs"] += len(data) * self.config.epochs
        seen["train_s"] += trained.train_s
        if seen["flops"] is None:
            classes = int(data.y.max()) + 1 if len(data) else 10
            seen["flops"] = model_flops(id(self.model_fn), self.model_fn, tuple(data.x.shape[1:]), classes).train
        return trained

    LocalTrainer.train = counted  # type: ignore[method-assign]
    profiler = cProfile.Profile()
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        profiler.enable()
        run = run_scenario(scenario, out=d, progress=False, say=lambda s: None)
        profiler.disable()
        wall = time.perf_counter() - t0
        records = list(run.records())
    stats = pstats.Stats(profiler)
    spent = categories(stats)
    spent["the rest"] = max(0.0, wall - sum(spent.values()))
    totals = method_totals(records)
    threads = scenario.federated.train.threads or 1
    peak = peak_gflops(threads)
    rate = seen["flops"] * seen["sample_epochs"] / seen["train_s"] / 1e9 if seen["train_s"] else None
    print(f"{Path(a.scenario).name}{' region ' + a.region if a.region else ''}: {wall:.1f} s wall, cProfile on")
    print("| where | s | share |\n|---|---|---|")
    for k, v in spent.items():
        print(f"| {k} | {v:.1f} | {100 * v / wall:.1f} % |")
    print(f"requests answered: {sum(t['requests'] for t in totals.values())}")
    print(f"peak: {peak:.1f} GFLOP/s on {threads} thread(s)")
    if rate is not None:
        print(f"training: {rate:.1f} GFLOP/s ({100 * rate / peak:.0f} % of the peak)")
    else:
        print("training: nothing trained on this host (every contribution came from a store)")
    if a.out:
        Path(a.out).write_text(json.dumps({"wall_s": wall, "spent": spent, "peak_gflops": peak, "train_gflops": rate}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
