"""Building a co-simulation from a scenario: the mobility source, the RSUs and the run directory."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from mobility.city import build_city
from mobility.rsu import Rsu, place_rsus
from mobility.source import MobilitySource, SumoSource, TraceSource
from mobility.sumo import SumoConfig

from .engine import CoSimulation
from .inputs import check_inputs, sumocfg_inputs
from .solves import unconverged_solves, warning_lines
from .runs import RunDir, new_run_dir
from .scenario import Scenario


def _sumo_files(scenario: Scenario) -> dict[str, Any]:
    m = scenario.mobility
    if m.source == "city":
        files = build_city(m.city_config())
        return {"net_file": str(files.net_file), "route_files": [str(files.route_file)]}
    if m.source == "lust":
        from mobility import lust

        return lust.sumo_inputs(m.lust)
    return {"config_file": m.config_file, "net_file": m.net_file, "route_files": list(m.route_files)}


def open_source(scenario: Scenario, trace_path: Path | None, overwrite: bool = False) -> tuple[MobilitySource, list[Rsu]]:
    """The mobility source (recording to ``trace_path`` when live) and the RSUs it covers."""
    m = scenario.mobility
    if m.source == "trace":
        src = TraceSource(m.trace)
        return src, [Rsu.from_dict(r) for r in src.metadata.get("rsus", [])]
    inputs = _sumo_files(scenario)
    net = inputs.get("net_file") or (sumocfg_inputs(m.config_file)["net_file"] if m.config_file else None)
    rsus = place_rsus(m.rsu_config(), net)
    s = m.sumo
    begin = s.begin
    if begin is None and m.source == "lust":
        from mobility.lust import lust_begin

        begin = lust_begin(m.lust)  # the rebuilt LuST demand starts before its window (warm-up)
    sumo = SumoConfig(
        backend=s.backend, step_length=s.step_length, seed=s.seed, begin=begin,
        end=(begin or 0.0) + scenario.duration + s.step_length, time_to_teleport=s.time_to_teleport,
        extra_args=list(s.extra_args), **{k: v for k, v in inputs.items() if v},
    )
    src = SumoSource(sumo, rsus, m.coverage_config(), trace=trace_path, overwrite_trace=overwrite,
                     metadata={"scenario": scenario.name})
    return src, rsus


def replay_scenario(trace: str | Path, scenario_path: str | Path | None = None) -> Scenario:
    """The scenario of a recorded run, switched to replay ``trace`` without SUMO.

    Without ``scenario_path`` the scenario is read from ``manifest.json`` beside the trace, with
    the recorded run's calibrated costs pinned."""
    import json

    from .config import ConfigError, load_model
    from .scenario import load_scenario

    trace = Path(trace)
    if not trace.is_file():
        raise FileNotFoundError(f"trace {trace} does not exist")
    if scenario_path is not None:
        base = load_scenario(scenario_path)
    else:
        manifest = trace.parent / "manifest.json"
        if not manifest.is_file():
            raise ConfigError(f"{trace}: no manifest.json beside the trace; give --scenario")
        recorded = json.loads(manifest.read_text())
        base = pin_calibration(load_model(Scenario, None, recorded["config"]), recorded.get("calibration"))
    data = base.model_dump(mode="json")
    data["mobility"]["source"] = "trace"
    data["mobility"]["trace"] = str(trace)
    data["name"] = f"{base.name}-replay"
    return load_model(Scenario, None, data)


def run_scenario(scenario: Scenario, out: str | Path = "runs", progress: bool = True, run_dir: Path | None = None,
                 say=print, resume: bool = False) -> RunDir:
    """Run ``scenario`` into a new run directory and return it (records are written as they come).

    Before anything runs, every file the scenario names is checked (:func:`vmc_sim.inputs.check_inputs`)
    and the data set is loaded; a run that fails before its first record removes the run
    directory it created (nothing is left behind to resume).

    With ``resume`` the run directory's existing records are kept: the run is executed again
    from the start (SUMO and every stream are seeded, contributions come from the run's
    contribution store instead of being retrained), the recomputed records are checked
    against the stored ones, and only the records past them are appended."""
    check_inputs(scenario)
    setup = scenario.federated.setup(scenario.seed)  # an unusable data set fails here, before SUMO starts
    created = run_dir is None
    run = RunDir(run_dir or new_run_dir(out, scenario.name))
    try:
        return _run(scenario, run, setup, progress, say, resume)
    except BaseException:
        if created and not (run.path / "records.jsonl").exists():
            shutil.rmtree(run.path, ignore_errors=True)
        raise


def _run(scenario: Scenario, run: RunDir, setup, progress: bool, say, resume: bool) -> RunDir:
    existing: dict[str, list[dict]] = {}
    if resume:
        for r in run.records():
            existing.setdefault(r["method"], []).append(r)
        scenario = pin_calibration(scenario, run.manifest().get("calibration"))
    live = scenario.mobility.source != "trace"
    source, rsus = open_source(scenario, run.path / "trace.jsonl" if live else None, overwrite=resume)
    try:
        sim = CoSimulation(scenario, source, rsus, run, setup=setup, progress=progress, existing=existing)
        seeds = sim.setup.streams.manifest()
        seeds["sumo"] = scenario.mobility.sumo.seed
        run.write_manifest(scenario.model_dump(mode="json"), seeds, kind="cosim", status="running",
                           calibration=sim.calibration.as_dict() if sim.calibration else None,
                           mobility=source.metadata, rsus=[r.to_dict() for r in rsus],
                           resumed_after={m: len(v) for m, v in existing.items()} if resume else None)
        say(f"run directory: {run.path}")
        try:
            summary = sim.run()
        except Exception as e:
            manifest = run.manifest()
            manifest.update(status="failed", error=f"{type(e).__name__}: {e}", records=sim.records,
                            hint=f"continue with: vmc run --resume {run.path}")
            run._atomic_json("manifest.json", manifest)
            raise
        manifest = run.manifest()
        manifest.update(status="complete", summary=summary,
                        unconverged_solves=unconverged_solves(run.records()) or None)
        run._atomic_json("manifest.json", manifest)
    finally:
        source.close()
    say(summarize(run))
    return run


def pin_calibration(scenario: Scenario, calibration: dict | None) -> Scenario:
    """``scenario`` with the calibrated costs of ``calibration`` (a manifest's entry) pinned, so a
    resumed or replayed run charges exactly what the original did."""
    if not calibration or scenario.compute.time_model != "calibrated" or scenario.compute.calibration is not None:
        return scenario
    from .config import load_model

    data = scenario.model_dump(mode="json")
    data["compute"]["calibration"] = {k: calibration[k] for k in
                                      ("train_s_per_sample_epoch", "fisher_s_per_sample", "solve_s_per_unit")}
    return load_model(Scenario, None, data)


def summarize(run: RunDir) -> str:
    """Totals per method: requests, triggered edits, bytes, simulated compute and latency, accuracy."""
    totals: dict[str, dict[str, float]] = {}
    for r in run.records():
        t = totals.setdefault(r["method"], {"n": 0, "trig": 0, "MB": 0.0, "latency": 0.0, "compute": 0.0,
                                             "acc": float("nan"), "failed": 0, "suspended": 0})
        t["n"] += 1
        t["trig"] += int(bool(r.get("triggered")))
        t["MB"] += r.get("total_bytes", 0) / 1e6
        t["latency"] += r.get("latency_s", 0.0)
        t["compute"] += r.get("compute_sim_s", 0.0)
        t["failed"] += len(r.get("failed", []))
        t["suspended"] += int(r.get("kind") == "suspend")
        if "accuracy" in r:
            t["acc"] = float("nan") if r["accuracy"] is None else r["accuracy"]
    lines = ["", f"{'method':<10} {'requests':>8} {'triggered':>9} {'MB':>10} {'sim compute s':>13} "
                 f"{'sum latency s':>13} {'failed':>6} {'final acc %':>11}"]
    for m, t in totals.items():
        lines.append(f"{m:<10} {t['n']:>8} {t['trig']:>9} {t['MB']:>10.2f} {t['compute']:>13.1f} "
                     f"{t['latency']:>13.1f} {t['failed']:>6} {100 * t['acc']:>11.2f}")
    for m, t in totals.items():
        if t["suspended"]:
            end = "; it was withdrawn at the end (final acc nan)" if t["acc"] != t["acc"] else ""
            lines.append(f"note: {m}: the model was withdrawn {t['suspended']} time(s) when coverage fell below "
                         f"coordinator.min_clients (records of kind 'suspend'){end}")
    try:
        manifest = run.manifest()
    except (OSError, ValueError):
        manifest = {}
    cache = (manifest.get("summary") or {}).get("contribution_cache")
    if cache:
        lines.append(f"contribution cache: {cache['hits']} of {cache['hits'] + cache['misses']} contributions loaded "
                     f"(hit rate {100 * cache['hit_rate']:.0f} %), {cache['misses']} trained; {cache['path']}")
    try:
        tol = float(manifest["config"]["federated"]["projection"]["tol"])
    except (KeyError, TypeError, ValueError):
        tol = float("nan")
    lines += warning_lines(unconverged_solves(run.records()), tol)
    return "\n".join(lines)
