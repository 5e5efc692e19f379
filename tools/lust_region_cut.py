"""A region cut of LuST checked against the whole city (reports/lust_region_cut/).

For each traffic seed the whole city runs once per region scenario (the five-RSU region,
scenarios/lust_region.yaml, and the case study's single RSU, scenarios/lust_case_study.yaml),
recording the trace a live run records; the region's run also writes every vehicle's driven route
with exit times, the reference a cut timed by exit times starts from (both scenarios drive the
same traffic: the same SUMO inputs, seed and window, checked). Then every cut variant (timing,
buffer, speed factor) is built around each region's RSUs and stepped alone, recording its trace,
and the traces are compared over the study window (:mod:`mobility.region_check`): joins and
leaves per minute, dwell median and p90 and KS distance, vehicles in coverage. ``--figures``
replays the whole city's and one variant's traces through each scenario as written (training,
radio, the edge GPU), seed by seed, for the case study's figures: requests, and F-SOSA's and
Retrain's simulated time and bytes.

Everything lands in ``--work`` (traces, cuts, runs; reused when complete, so the command can be
stopped and run again) and the tables in ``--out``; the report is generated from those tables
(:mod:`vmc_sim.reproduction.region_cut_report`).

    python tools/lust_region_cut.py --work /tmp/region_cut                  # coverage, every variant
    python tools/lust_region_cut.py --work /tmp/region_cut --figures exit_times-b150
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from mobility.coverage import CoverageConfig
from mobility.region_check import CoverageFigures, coverage_figures
from mobility.region_cut import EXIT_TIME_OPTIONS, CutTiming, RegionCut, build_cut
from mobility.rsu import Rsu, place_rsus
from mobility.source import SumoSource
from mobility.sumo_config import SumoConfig, merge_args
from mobility.trace import read_trace
from vmc_sim.reproduction import region_cut_report as rr
from vmc_sim.reproduction import report
from vmc_sim.rundir.outputs import OutputRefused
from vmc_sim.scenario.mobility_section import source_fields
from vmc_sim.scenario.schema import Scenario, load_scenario
from vmc_sim.sources.base import SumoKind
from vmc_sim.sources.registry import SOURCES

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = {"region": ROOT / "scenarios" / "lust_region.yaml", "single": ROOT / "scenarios" / "lust_case_study.yaml"}
"""The regions checked: the five-RSU region and the case study's single RSU."""
SEEDS = (42, 43, 44, 45, 46)
WINDOW = (27000.0, 30600.0)
"""The study window: 07:30-08:30, the half hour before the first fit at 08:00 and the half hour of
requests and transfers after it."""
VARIANTS = (
    "exit_times-b0",
    "exit_times-b150",
    "exit_times-b400",
    "exit_times-b1000",
    "exit_times-b2000",
    "free_flow-b400-f1",
    "free_flow-b1000-f1",
    "free_flow-b1000-f0.42",
)
"""Cuts tried: ``<timing>-b<buffer m>[-f<speed factor>]`` (0.42: 1 / the build's trip-time ratio at 08:00, 2.4)."""


def variant_cut(name: str) -> RegionCut:
    """The cut a variant name stands for (``exit_times-b150``, ``free_flow-b1000-f0.42``)."""
    timing, *rest = name.split("-")
    opts = {p[0]: float(p[1:]) for p in rest}
    return RegionCut(buffer=opts["b"], timing=CutTiming(timing), speed_factor=opts.get("f", 1.0))


@dataclasses.dataclass(frozen=True)
class Opened:
    """A scenario at one traffic seed, as its live run would open it."""

    scenario: Scenario
    sumo: SumoConfig
    rsus: list[Rsu]
    coverage: CoverageConfig


def open_scenario(name: str, seed: int) -> Opened:
    data = yaml.safe_load(SCENARIOS[name].read_text())
    data["mobility"]["sumo"]["seed"] = seed
    data["seed"] = seed - SEEDS[0]  # the run seed of replicate r (tools/lust_case_study_replicates.py)
    sc = load_scenario(data)
    m = source_fields(sc.mobility)
    kind = SOURCES[m.source]
    assert isinstance(kind, SumoKind), f"{SCENARIOS[name]} runs no SUMO"
    sumo, _ = kind.sumo_config(m, sc.duration)
    return Opened(sc, sumo, place_rsus(m.rsu_config(), sumo.net_file), m.coverage_config())


def traffic(sumo: SumoConfig) -> dict[str, Any]:
    """What decides the traffic of a SUMO run (its outputs aside)."""
    d = sumo.to_dict()
    return {
        k: d[k] for k in ("net_file", "route_files", "additional_files", "seed", "begin", "end", "scale", "extra_args")
    }


def step(source: SumoSource, duration: float, step_length: float) -> None:
    """Step a live source as the co-simulation's mobility process does (case_study_runs.record_trace)."""
    try:
        t = source.time
        end = t + duration
        while t < end and not source.finished:
            source.advance(t)
            t = t + step_length
    finally:
        source.close()


def complete(trace: Path) -> bool:
    try:
        return trace.is_file() and read_trace(trace).complete
    except (OSError, ValueError):  # unreadable or malformed (TraceError is a ValueError): record it again
        return False


def record(sumo: SumoConfig, o: Opened, out: Path, extra: list[str]) -> float:
    """Record ``o``'s trace with ``sumo`` into ``out/trace.jsonl`` (SUMO's ``extra`` options added); wall s."""
    out.mkdir(parents=True, exist_ok=True)
    run = dataclasses.replace(sumo, extra_args=merge_args(sumo.extra_args, extra)) if extra else sumo
    t0 = time.perf_counter()
    source = SumoSource(run, o.rsus, o.coverage, trace=out / "trace.jsonl", overwrite_trace=True)
    step(source, o.scenario.duration, sumo.step_length)
    wall = time.perf_counter() - t0
    (out / "time.json").write_text(json.dumps({"wall_s": wall}))
    return wall


def whole(work: Path, name: str, seed: int) -> Path:
    """The whole city's trace of region ``name`` at ``seed`` (and, for the five-RSU region, the
    reference routes), recorded unless already complete."""
    o = open_scenario(name, seed)
    out = work / "whole" / f"{name}-{seed}"
    if name != "region" and traffic(o.sumo) != traffic(open_scenario("region", seed).sumo):
        raise SystemExit(f"{SCENARIOS[name]} does not drive the traffic of {SCENARIOS['region']}: no shared reference")
    if not complete(out / "trace.jsonl") or (name == "region" and not (out / "vehroutes.xml").is_file()):
        extra = ["--vehroute-output", str(out / "vehroutes.xml"), *EXIT_TIME_OPTIONS] if name == "region" else []
        print(f"whole city, {name}, seed {seed}: recording", flush=True)
        record(o.sumo, o, out, extra)
    return out / "trace.jsonl"


def cut(work: Path, variant: str, name: str, seed: int) -> Path:
    """The trace of ``variant``'s cut of region ``name`` at ``seed``, recorded unless complete."""
    o = open_scenario(name, seed)
    spec = variant_cut(variant)
    out = work / "cut" / variant / f"{name}-{seed}"
    if complete(out / "trace.jsonl"):
        return out / "trace.jsonl"
    reference = work / "whole" / f"region-{seed}" / "vehroutes.xml" if spec.timing is CutTiming.EXIT_TIMES else None
    t0 = time.perf_counter()
    built = build_cut(o.sumo, o.rsus, spec, root=work / "cache", reference=reference)
    made = time.perf_counter() - t0
    print(f"cut {variant}, {name}, seed {seed}: {built.manifest.get('vehicles')} vehicles, recording", flush=True)
    wall = record(built.sumo, o, out, [])
    (out / "time.json").write_text(json.dumps({"wall_s": wall, "build_s": made, "cut": built.manifest}))
    return out / "trace.jsonl"


def figures_of(trace: Path, o: Opened) -> CoverageFigures:
    return coverage_figures(read_trace(trace).events, *WINDOW)


def coverage_rows(work: Path, variants: list[str], seeds: list[int], regions: list[str]) -> list[dict[str, Any]]:
    rows = []
    for name in regions:
        for seed in seeds:
            o = open_scenario(name, seed)
            for variant in ["whole", *variants]:
                trace = whole(work, name, seed) if variant == "whole" else cut(work, variant, name, seed)
                f = figures_of(trace, o)
                timing = json.loads((trace.parent / "time.json").read_text())
                rows.append(
                    {
                        "region": name,
                        "variant": variant,
                        "seed": seed,
                        "joins_per_min": round(f.joins_per_min, 4),
                        "leaves_per_min": round(f.leaves_per_min, 4),
                        "visits": len(f.dwell),
                        "censored": f.censored,
                        "dwell": " ".join(f"{d:g}" for d in f.dwell),
                        "occupancy": " ".join(f"{x:.4f}" for x in f.occupancy),
                        "parts": parts_in_coverage(trace),
                        "wall_s": round(timing["wall_s"], 1),
                        "build_s": round(timing.get("build_s", 0.0), 1),
                    }
                )
    return rows


def parts_in_coverage(trace: Path) -> int:
    """Vehicles in coverage that the cut split into parts (a route that leaves the cut and comes
    back enters again as ``<id>_part<k>``; k >= 1 counted): a new vehicle to the co-simulation."""
    return len(
        {e.vehicle for e in read_trace(trace).events if "_part" in e.vehicle and not e.vehicle.endswith("_part0")}
    )


def figure_rows(work: Path, variant: str, seeds: list[int], regions: list[str]) -> list[dict[str, Any]]:
    """The case study's figures from each scenario replaying the whole city's and the cut's traces."""
    from vmc_sim.cosim import replay_scenario, run_scenario
    from vmc_sim.rundir.summary import method_totals
    from vmc_sim.scenario.config import load_model

    rows = []
    for name in regions:
        path = SCENARIOS[name]
        for seed in seeds:
            o = open_scenario(name, seed)
            for side in ("whole", variant):
                trace = work / ("whole" if side == "whole" else f"cut/{variant}") / f"{name}-{seed}" / "trace.jsonl"
                runs = work / "runs" / f"{name}-{seed}-{side}"
                done = runs / "totals.json"
                if not done.is_file():
                    sc = replay_scenario(trace, path)
                    data = sc.model_dump(mode="json")
                    data["seed"] = o.scenario.seed
                    data["compute"]["contribution_cache"] = str(work / "contributions")
                    sc = load_model(Scenario, None, data)
                    print(f"figures: {name}, seed {seed}, {side}", flush=True)
                    run = run_scenario(sc, out=runs, progress=False, say=lambda s: None)
                    totals = list(method_totals(run.records()).values())
                    done.write_text(json.dumps({"run": str(run.path), "totals": totals}, default=str))
                for t in json.loads(done.read_text())["totals"]:
                    rows.append({"region": name, "seed": seed, "side": "whole" if side == "whole" else "cut", **t})
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--work", required=True, help="where traces, cuts and runs are kept (reused when complete)")
    p.add_argument("--out", default=str(ROOT / "reports" / "lust_region_cut"))
    p.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    p.add_argument("--variants", nargs="+", default=list(VARIANTS))
    p.add_argument(
        "--regions",
        nargs="+",
        choices=list(SCENARIOS),
        default=list(SCENARIOS),
        help="the regions checked (default: both)",
    )
    p.add_argument("--figures", metavar="VARIANT", help="also replay the case study on this variant's cut")
    a = p.parse_args(argv)
    try:  # neither inside a run or sweep directory
        work, out = report.out_dir(a.work), report.out_dir(a.out)
    except OutputRefused as e:
        p.error(str(e))
    command = "python tools/lust_region_cut.py " + " ".join(sys.argv[1:] if argv is None else argv)
    rows = coverage_rows(work, a.variants, a.seeds, a.regions)
    report.write_csv(out / "coverage.csv", rows)
    made = {"made": report.provenance(), "command": command, "machine": report.machine(), "window": list(WINDOW)}
    if a.figures:
        report.write_csv(out / "figures.csv", figure_rows(work, a.figures, a.seeds, a.regions))
        made["figures_variant"] = a.figures
    elif (out / "made.json").is_file():
        made["figures_variant"] = json.loads((out / "made.json").read_text()).get("figures_variant")
    report.replace_text(out / "made.json", json.dumps(made, indent=1) + "\n")
    report.replace_text(out / "report.md", rr.render(out))
    print(f"written {out / 'report.md'}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main())
