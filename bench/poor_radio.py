"""The default city under a poor radio, beside the default channel: each run's wall-clock (the
whole ``vmc run`` process, and the part past the end of traffic), its simulated end, and per method
its failed transfers by reason and its withdrawals by cause.

The poor radio is the default city's scenario with only its channel changed, a choice any
networking user may make (log-distance path loss with exponent 3.5, 4 dB shadowing): links cannot
hold at the edge of the 200 m cell. ``--before COMMIT`` also runs it at another commit, killed
after ``--timeout`` seconds (the records it wrote by then are counted).

    python bench/poor_radio.py
    python bench/poor_radio.py --before 3a5d000 --timeout 300
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import worktree

ROOT = Path(__file__).resolve().parents[1]
POOR = "channel: {path_loss_model: log_distance, path_loss_exponent: 3.5, shadowing_sigma_db: 4.0}\n"


def run(checkout: Path, out: Path, scenario: Path | None, timeout: float | None) -> dict:
    """One ``vmc run`` in a fresh process; its wall-clock, exit status, and what it recorded."""
    env = dict(os.environ, PYTHONPATH=str(checkout))
    cmd = [sys.executable, "-m", "vmc_sim.cli", "run", *([str(scenario)] if scenario else []), "--quiet"]
    t0 = time.perf_counter()
    try:
        done = subprocess.run(
            [*cmd, "--out", str(out)], env=env, cwd=str(checkout), capture_output=True, timeout=timeout
        )
        rc: int | str = done.returncode
    except subprocess.TimeoutExpired:
        rc = f"killed after {timeout:.0f} s"
    wall = time.perf_counter() - t0
    (run_dir,) = out.glob("*/") or (None,)
    rows = []
    summary: dict = {}
    if run_dir is not None:
        lines = (run_dir / "records.jsonl").read_text().splitlines() if (run_dir / "records.jsonl").exists() else []
        rows = [json.loads(x) for x in lines if x.strip()]
        with contextlib.suppress(OSError, ValueError):
            summary = json.loads((run_dir / "manifest.json").read_text()).get("summary") or {}
    return {"rc": rc, "wall_s": wall, "rows": [r for r in rows if "method" in r], "summary": summary}


def describe(name: str, r: dict) -> list[str]:
    s, rows = r["summary"], r["rows"]
    drain = s.get("drain") or {}
    last = max((x["request_time"] for x in rows), default=float("nan"))
    lines = [
        f"### {name}",
        "",
        f"exit {r['rc']}; wall-clock {r['wall_s']:.1f} s (process); {len(rows)} records, the last request at "
        f"{last:.1f} s; simulated end {s.get('sim_end', float('nan')):.1f} s; past the end of traffic "
        f"{drain.get('s', float('nan')):.1f} simulated s in {drain.get('wall_s', float('nan')):.2f} wall s"
        + (f"; traffic cut: {drain['traffic_cut']}" if drain.get("traffic_cut") else ""),
        "",
        "| method | records | failed transfers by reason | withdrawals by cause | sim time s (sum of makespans) |",
        "|---|---|---|---|---|",
    ]
    for m in dict.fromkeys(x["method"] for x in rows):
        mine = [x for x in rows if x["method"] == m]
        failed = Counter(f"{f['tag']} {f['reason']}" for x in mine for f in x.get("failed") or [])
        causes = Counter(x.get("cause", "?") for x in mine if x.get("kind") == "suspend")
        lines.append(
            f"| {m} | {len(mine)} | {', '.join(f'{k}: {v}' for k, v in sorted(failed.items())) or 'none'} | "
            f"{', '.join(f'{k}: {v}' for k, v in sorted(causes.items())) or 'none'} | "
            f"{sum(x.get('makespan_s', 0.0) for x in mine):.1f} |"
        )
    return lines + [""]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", help="also run the poor radio at this commit")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds before the --before run is killed")
    args = p.parse_args(argv)
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        poor = tmp / "poor.yaml"
        poor.write_text(POOR)
        out = ["## The default city: default channel and a poor radio", ""]
        out += describe("default channel", run(ROOT, tmp / "default", None, None))
        out += describe("poor radio", run(ROOT, tmp / "poor", poor, None))
        if args.before:
            before = stack.enter_context(worktree.checkout(ROOT, args.before))
            out += describe(f"poor radio at {args.before}", run(before, tmp / "before", poor, args.timeout))
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
