"""Benchmark: coverage tracking on top of SUMO vs bare SUMO stepping.

One hour (``--duration``) of the LuST rush-hour scenario (``scenarios/lust_rush_hour.yaml``:
the rebuilt network, its calibrated demand, the RSUs it places) is simulated twice, each in its
own process so that each peak memory is its own:

- ``bare``: a :class:`mobility.sumo.SumoSession` stepped to the end, nothing else;
- ``coverage``: a :class:`mobility.source.SumoSource` on the same SUMO configuration, with the
  RSUs' context subscriptions, join/leave detection, state samples and the trace file written,
  advanced one step at a time as the co-simulation does.

Printed: wall seconds of each, their ratio (aim <= 1.25), the real-time factor (simulated /
wall seconds), running vehicles, events, teleports, and the peak resident memory of each process
(SUMO runs inside it through libsumo; aim < 4 GiB). Results also go to ``--out`` as JSON.

    python bench/coverage.py                 # 1 h of LuST (builds and caches LuST first)
    python bench/coverage.py --duration 300  # a quick look
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _config(scenario_path: str, duration: float):
    from mobility.rsu import place_rsus
    from vmc_sim.cosim import sumo_config
    from vmc_sim.scenario.schema import load_scenario

    sc = load_scenario(scenario_path)
    cfg, inputs = sumo_config(sc, duration)  # the scenario's run, LuST's run settings included
    rsus = place_rsus(sc.mobility.rsu_config(), inputs.get("net_file"))
    return cfg, rsus, sc.mobility.coverage_config()


def _peak_rss() -> int:
    """This process's peak resident memory in bytes: VmHWM (``ru_maxrss`` would carry the
    parent's peak across exec on Linux)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run_mode(mode: str, scenario_path: str, duration: float) -> dict:
    """Simulate ``duration`` seconds in ``mode`` (bare | coverage) in this process."""
    from mobility.source import SumoSource
    from mobility.sumo import SumoSession

    cfg, rsus, coverage = _config(scenario_path, duration)
    t_end = (cfg.begin or 0.0) + duration
    running_max, events, steps = 0, 0, 0
    t0 = time.perf_counter()
    if mode == "bare":
        with SumoSession(cfg) as s:
            while s.time < t_end - 1e-9 and not s.finished:
                s.step()
                steps += 1
                running_max = max(running_max, s.running_count())
            teleports = s.teleports
    else:
        with tempfile.TemporaryDirectory() as tmp:
            src = SumoSource(cfg, rsus, coverage, trace=Path(tmp) / "trace.jsonl")
            try:
                t = src.time
                while t < t_end - 1e-9 and not src.finished:
                    t += cfg.step_length
                    events += len(src.advance(t))
                    steps += 1
                    running_max = max(running_max, src.session.running_count())
                teleports = src.teleports
            finally:
                src.close()
    wall = time.perf_counter() - t0
    peak = _peak_rss()
    return {
        "mode": mode,
        "simulated_s": steps * cfg.step_length,
        "wall_s": wall,
        "rtf": steps * cfg.step_length / wall,
        "max_running": running_max,
        "events": events,
        "teleports": teleports,
        "peak_rss_bytes": peak,
        "rsus": len(rsus),
        "membership": coverage.membership,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", default=str(ROOT / "scenarios" / "lust_rush_hour.yaml"))
    p.add_argument("--duration", type=float, default=3600.0, help="simulated seconds")
    p.add_argument("--mode", choices=["bare", "coverage"], help="run one mode here (used internally)")
    p.add_argument("--out", default=str(ROOT / "bench" / "out" / "coverage.json"))
    args = p.parse_args(argv)
    if args.mode:
        print(json.dumps(run_mode(args.mode, args.scenario, args.duration)))
        return 0
    _config(args.scenario, args.duration)  # build and cache LuST once, outside the timed runs
    results = {}
    for mode in ("bare", "coverage"):
        proc = subprocess.run(
            [sys.executable, __file__, "--mode", mode, "--scenario", args.scenario, "--duration", str(args.duration)],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        if proc.returncode != 0:
            print(proc.stderr[-3000:], file=sys.stderr)
            return proc.returncode
        results[mode] = json.loads(proc.stdout.strip().splitlines()[-1])
    bare, cov = results["bare"], results["coverage"]
    summary = {"ratio": cov["wall_s"] / bare["wall_s"], **results}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(summary, indent=2))
    print("| run | simulated s | wall s | real-time factor | max running | events | teleports | peak RSS MiB |")
    print("|---|---|---|---|---|---|---|---|")
    for r in (bare, cov):
        print(
            f"| {r['mode']} | {r['simulated_s']:.0f} | {r['wall_s']:.1f} | {r['rtf']:.1f} | {r['max_running']} | "
            f"{r['events']} | {r['teleports']} | {r['peak_rss_bytes'] / 2**20:.0f} |"
        )
    print(
        f"\ncoverage / bare wall time: {summary['ratio']:.3f} (aim <= 1.25); RSUs {cov['rsus']}, "
        f"membership {cov['membership']}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
