"""Throughput in the field's units: simulated vehicle-seconds per wall-second and requests per
wall-second, each scenario beside bare SUMO on the same (sub-)scenario.

For each scenario three runs, one after another on this machine:

- **bare SUMO**: the ``sumo`` binary on exactly the SUMO inputs and settings the scenario's run
  uses (the cut's, for a scenario with ``mobility.region``), over the same window, no TraCI, with
  ``--duration-log.statistics``: its vehicle updates (SUMO's UPS times its duration) are the
  scenario's vehicle-steps, and vehicle-seconds are those times the step length;
- **mobility pass**: the co-simulation's mobility process alone (libsumo, coverage, the trace
  written), as ``vmc run`` steps it: pass / bare is the coupling's own overhead; run twice, the
  second time in the same process, which leaves out the one-off start-up (lazy imports, the
  scenario's checks, reading the network to place the RSUs);
- **full run** (unless ``--pass-only``): ``vmc run`` of the scenario, training and all, with a
  fresh contribution store: requests answered per wall-second.

    python bench/throughput.py                                   # the default city
    python bench/throughput.py --scenario scenarios/lust_region.yaml --region '{"buffer": 2000}'
    python bench/throughput.py --scenario scenarios/lust_region.yaml --pass-only
    python bench/throughput.py --scenario scenarios/lust_region.yaml --pass-only --duration 1800 --once
    python bench/throughput.py --scenario scenarios/lust_region.yaml --region '{"buffer": 400}' --pass-only \
        --duration 3600 --profile 15                             # and where the pass's time goes

Vehicle-seconds per wall-second are the same vehicle-seconds (bare SUMO's count) over each run's
wall-clock. Prints one table row per run; the figures go into bench/RESULTS.md by hand with the
command and the machine.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]


def scenario_data(path: str, region: str | None) -> dict[str, Any]:
    data = yaml.safe_load(Path(path).read_text())
    data.setdefault("mobility", {})
    for key in ("net_file", "route_files", "config_file"):  # relative to the scenario file
        v = data["mobility"].get(key)
        if isinstance(v, str):
            data["mobility"][key] = str((Path(path).parent / v).resolve())
        elif isinstance(v, list):
            data["mobility"][key] = [str((Path(path).parent / p).resolve()) for p in v]
    if region is not None:
        data["mobility"]["region"] = json.loads(region)
    data["mobility"]["trace_cache"] = None
    return data


def sumo_run(data: dict[str, Any]) -> tuple[Any, float]:
    """The SUMO run the scenario's co-simulation steps (the cut's with a region) and its duration."""
    from mobility.rsu import place_rsus
    from vmc_sim.scenario.mobility_section import source_fields
    from vmc_sim.scenario.schema import load_scenario
    from vmc_sim.sources.base import SumoKind, cut_scenario
    from vmc_sim.sources.registry import SOURCES

    sc = load_scenario(data)
    m = source_fields(sc.mobility)
    kind = SOURCES[m.source]
    assert isinstance(kind, SumoKind), "a scenario that runs SUMO"
    sumo, inputs = kind.sumo_config(m, sc.duration)
    cut = m.region_cut()
    if cut is not None:
        net = inputs.get("net_file")
        sumo, _ = cut_scenario(sumo, place_rsus(m.rsu_config(), net), cut)
    return sumo, sc.duration


def bare(sumo: Any, duration: float) -> dict[str, Any]:
    """Bare SUMO over the co-simulation's window: wall-clock and vehicle-seconds."""
    from mobility.sumo_config import merge_args
    from mobility.sumo_install import run_command, sumo_binary

    begin = float(sumo.begin or 0.0)
    end = begin + duration
    args = merge_args(
        sumo.arguments(), ["--end", f"{end:g}", "--duration-log.disable", "false", "--duration-log.statistics", "true"]
    )
    t0 = time.perf_counter()
    out = run_command([str(sumo_binary("sumo")), *args], what="bare sumo").stdout
    wall = time.perf_counter() - t0
    ups = float(re.search(r"UPS:\s*([0-9.]+)", out).group(1))  # type: ignore[union-attr]
    dur = float(re.search(r"Duration:\s*([0-9.]+)\s*s", out).group(1))  # type: ignore[union-attr]
    return {"wall_s": wall, "vehicle_s": ups * dur * float(sumo.step_length), "sumo_duration_s": dur}


def mobility_pass(data: dict[str, Any]) -> float:
    from vmc_sim.reproduction.case_study_runs import record_trace
    from vmc_sim.scenario.schema import load_scenario

    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        record_trace(load_scenario(data), Path(d) / "trace.jsonl")
        return time.perf_counter() - t0


def full_run(data: dict[str, Any]) -> tuple[float, int]:
    from vmc_sim.cosim import run_scenario
    from vmc_sim.rundir.summary import method_totals
    from vmc_sim.scenario.schema import load_scenario

    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        run = run_scenario(load_scenario(data), out=d, progress=False, say=lambda s: None)
        wall = time.perf_counter() - t0
        requests = sum(t["requests"] for t in method_totals(run.records()).values())
    return wall, requests


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scenario", default=str(ROOT / "scenarios" / "city.yaml"))
    p.add_argument("--region", help="mobility.region as JSON (e.g. '{\"buffer\": 2000}')")
    p.add_argument("--pass-only", action="store_true", help="no full run (training) after the mobility pass")
    p.add_argument("--duration", type=float, help="simulate this many seconds from the scenario's start instead")
    p.add_argument("--once", action="store_true", help="one mobility pass, not a second one in the same process")
    p.add_argument(
        "--profile", type=int, metavar="N", help="after the table, one more pass under cProfile: its N costliest calls"
    )
    a = p.parse_args(argv)
    data = scenario_data(a.scenario, a.region)
    if a.duration is not None:
        data["duration"] = a.duration
    sumo, duration = sumo_run(data)
    b = bare(sumo, duration)
    rows: list[tuple[str, float, int | None]] = [("bare SUMO", b["wall_s"], None)]
    rows.append(("mobility pass", mobility_pass(data), None))
    # the same pass again in this process: what the coupling costs per step, without the one-off
    # start-up (lazy imports, the scenario's checks, reading the network for the RSUs)
    if not a.once:
        rows.append(("mobility pass, again in the process", mobility_pass(data), None))
    if not a.pass_only:
        full_wall, answered = full_run(data)
        rows.append(("full run", full_wall, answered))
    name = Path(a.scenario).name + (f" region {a.region}" if a.region else "")
    print(f"{name}: {b['vehicle_s']:.0f} vehicle-seconds over {duration:g} s simulated")
    print("| run | wall s | vehicle-s per wall-s | x bare SUMO | requests | requests per wall-s |")
    print("|---|---|---|---|---|---|")
    for what, wall, requests in rows:
        per = f"{requests / wall:.3f}" if requests else "-"
        print(
            f"| {what} | {wall:.1f} | {b['vehicle_s'] / wall:.0f} | {wall / b['wall_s']:.2f} | "
            f"{requests if requests is not None else '-'} | {per} |"
        )
    print(json.dumps({"scenario": name, "bare": b, "runs": rows}))
    if a.profile:  # where the coupling's time goes beyond bare SUMO's step (cProfile slows Python, not libsumo)
        import cProfile
        import pstats

        prof = cProfile.Profile()
        wall = prof.runcall(mobility_pass, data)
        print(f"mobility pass under cProfile: {wall:.1f} s (bare SUMO {b['wall_s']:.1f} s)")
        pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(a.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
