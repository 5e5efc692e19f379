"""The default job (`vmc run`, the embedded city) in this checkout against another commit, side
by side: each run is a fresh process that times its own import of the CLI and the run itself
(the launcher and interpreter exit, whose noise on a shared machine is as large as the effects
measured, are left out), alternating before, after, before, ... Prints a table and the ratio of
the medians, and whether the run imported ``torch._dynamo``.

Warm caches are assumed (the city build and the calibration: run `vmc run` once first), and the
records of both versions are compared field for field, the host-measured ``host_*`` columns
aside: a speed-up that changed a record is reported as such.

    python bench/vmc_run.py --before 5b1972c --repeats 3
    python bench/vmc_run.py --trace-cache --repeats 5   # this checkout: SUMO vs a warm trace cache

``--trace-cache`` compares this checkout with itself: the default job as it is (SUMO steps the
city) against the same job with ``mobility.trace_cache`` set and warm (one untimed run records the
trace first), so the other runs replay it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import worktree

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import json, sys, time
t0 = time.perf_counter()
from vmc_sim.cli import main
t1 = time.perf_counter()
try:
    main(["run", *sys.argv[2:], "--quiet", "--out", sys.argv[1]])
except SystemExit:
    pass
t2 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "run_s": t2 - t1, "total_s": t2 - t0,
                  "dynamo": "torch._dynamo" in sys.modules}))
"""


def once(checkout: Path, out: Path, scenario: Path | None = None) -> dict:
    env = dict(os.environ, PYTHONPATH=str(checkout))
    env.pop("VMC_RECALIBRATE", None)
    extra = [str(scenario)] if scenario else []
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(out), *extra],
        env=env,
        cwd=str(checkout),
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def records(out: Path) -> list[dict]:
    (path,) = out.glob("*/records.jsonl")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [{k: v for k, v in r.items() if not k.startswith("host_")} for r in rows]


def report(times: dict[str, list[dict]], labels: dict[str, str], same: bool) -> None:
    """Print the table, the ratio of the median totals and whether the records agree."""
    first, second = labels
    print("| version | import s | run s | total s | torch._dynamo imported |\n|---|---|---|---|---|")
    for name, label in labels.items():
        t = times[name]

        def cell(k: str, t: list[dict] = t) -> str:
            return " / ".join(f"{x[k]:.2f}" for x in t)

        print(
            f"| {name} ({label}) | {cell('import_s')} | {cell('run_s')} | {cell('total_s')} | "
            f"{'yes' if any(x['dynamo'] for x in t) else 'no'} |"
        )
    med = {n: statistics.median(x["total_s"] for x in t) for n, t in times.items()}
    print(
        f"\nmedian total: {first} {med[first]:.2f} s, {second} {med[second]:.2f} s, "
        f"ratio {med[first] / med[second]:.2f}x; records {'identical' if same else 'DIFFER'} (host_* aside)"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", help="the commit to compare this checkout with")
    p.add_argument("--trace-cache", action="store_true", help="compare SUMO with a warm trace cache, this checkout")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    if bool(args.before) == args.trace_cache:
        p.error("give --before COMMIT or --trace-cache")
    if args.trace_cache:
        names, labels = ("sumo", "replay"), {"sumo": "SUMO steps the city", "replay": "warm trace cache"}
    else:
        names, labels = ("before", "after"), {"before": args.before, "after": "this checkout"}
    times: dict[str, list[dict]] = {n: [] for n in names}
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        if args.trace_cache:
            scenario = tmp / "cached.yaml"
            scenario.write_text(f"mobility: {{trace_cache: {tmp / 'traces'}}}\n")
            runs = {"sumo": (ROOT, None), "replay": (ROOT, scenario)}
            once(ROOT, tmp / "record", scenario)  # records the trace (untimed)
        else:
            runs = {"before": (stack.enter_context(worktree.checkout(ROOT, args.before)), None), "after": (ROOT, None)}
        outs = {}
        for i in range(args.repeats):
            for name in names:
                outs[name] = tmp / f"{name}{i}"
                checkout, scenario_file = runs[name]
                times[name].append(once(checkout, outs[name], scenario_file))
        same = records(outs[names[0]]) == records(outs[names[1]])
    report(times, labels, same)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
