"""The same traffic two ways: a live SUMO run against a run driven by the FCD that SUMO wrote.

A live run of a scenario (default: the embedded city, ``vmc run``'s job) with
``mobility.outputs: [fcd]`` writes SUMO's own FCD into its run directory; the same scenario with
``mobility.source: fcd`` on that file replays it. Printed: each run's requests and wall-clock
(``--repeats`` runs each, median), whether the join/leave events and the records are identical,
and the FCD's size. Records are compared without their host-measured fields.

    python bench/fcd_vs_live.py [--duration 600] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from vmc_sim import load_scenario, run_scenario

HOST_FIELDS = ("host_s", "wall_s", "host_compute_s", "host_solve_s")


def _records(run_dir: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines() if line.strip()]
    return [{k: v for k, v in r.items() if not k.startswith("host")} for r in rows]


def _events(run_dir: Path) -> list[tuple]:
    out = []
    for line in (run_dir / "trace.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row.get("kind") in ("join", "leave"):
            out.append((row.get("time"), row.get("kind"), row.get("vehicle"), row.get("rsu")))
    return out


def _timed(data: dict[str, Any], out: Path) -> tuple[float, Path]:
    t0 = time.perf_counter()
    run = run_scenario(load_scenario(data), out=out, progress=False, say=lambda s: None)
    return time.perf_counter() - t0, run.path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=600.0, help="simulated seconds")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    base = {"duration": args.duration, "mobility": {"trace_cache": None}}
    live_s, fcd_s = [], []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        recorded = {**base, "mobility": {**base["mobility"], "outputs": ["fcd"]}}
        _, first = _timed(recorded, root / "recorded")
        fcd = first / "sumo" / "fcd.xml"
        live = {**base}
        rsus = json.loads((first / "manifest.json").read_text())["rsus"]  # the live run's RSUs, placed explicitly
        placed = {
            "placement": "explicit",
            "positions": [{"x": r["x"], "y": r["y"]} for r in rsus],
            "radius": rsus[0]["radius"],
        }
        replay = {**base, "mobility": {"source": "fcd", "fcd_file": str(fcd), "trace_cache": None, "rsus": placed}}
        runs: dict[str, Path] = {}
        for i in range(args.repeats):
            t, runs["live"] = _timed(live, root / f"live{i}")
            live_s.append(t)
            t, runs["fcd"] = _timed(replay, root / f"fcd{i}")
            fcd_s.append(t)
        same_events = _events(runs["live"]) == _events(runs["fcd"])
        same_records = _records(runs["live"]) == _records(runs["fcd"])
        requests = {k: sum(1 for r in _records(p) if r.get("method") == "fsosa") - 1 for k, p in runs.items()}
        print(f"FCD written by SUMO: {fcd.stat().st_size / 1e6:.1f} MB")
        print(f"requests: live {requests['live']}, fcd {requests['fcd']}")
        n_events = len(_events(runs["live"]))
        print(
            f"join/leave events: {n_events}, identical: {same_events}; records identical (host fields aside): {same_records}"
        )
        print(
            f"wall-clock, median of {args.repeats}: live {statistics.median(live_s):.2f} s, fcd {statistics.median(fcd_s):.2f} s"
        )
    return 0 if same_events and same_records and n_events else 1


if __name__ == "__main__":
    raise SystemExit(main())
