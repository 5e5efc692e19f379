"""Building a co-simulation from a scenario: the mobility source, the RSUs and the run directory."""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path
from typing import Any

from mobility.rsu import Rsu
from mobility.source import MobilitySource
from mobility.sumo import SumoConfig
from mobility.sumo_outputs import describe_outputs

from .engine.cosimulation import CoSimulation
from .rundir.directory import RunDir, new_run_dir, read_manifest
from .rundir.lock import RunLock, ended_status, signals_interrupt
from .rundir.solves import unconverged_solves
from .rundir.summary import summarize
from .scenario.config import ConfigError
from .scenario.input_digests import changed_inputs, input_digests
from .scenario.inputs import building_files, check_inputs
from .scenario.mobility_section import source_fields
from .scenario.schema import Scenario
from .sources.base import OpenRequest, SourceInputError, SumoKind
from .sources.registry import SOURCES


def sumo_config(scenario: Scenario, duration: float | None = None) -> tuple[SumoConfig, dict[str, Any]]:
    """The SUMO run of a scenario whose source runs SUMO (inputs built or found in the cache) and
    its inputs; it lasts ``duration`` (default: the scenario's) from its begin."""
    m = source_fields(scenario.mobility)
    kind = SOURCES[m.source]
    if not isinstance(kind, SumoKind):
        raise ValueError(f"mobility source {m.source!r} runs no SUMO")
    return kind.sumo_config(m, scenario.duration if duration is None else duration)


def open_source(
    scenario: Scenario, trace_path: Path | None, overwrite: bool = False, outputs_dir: Path | None = None
) -> tuple[MobilitySource, list[Rsu]]:
    """The mobility source (recording to ``trace_path`` unless it replays a trace) and the RSUs it
    covers; a SUMO run writes the scenario's ``mobility.outputs`` into ``outputs_dir`` when given.
    The scenario's source kind opens it (:data:`vmc_sim.sources.registry.SOURCES`), reading only
    the fields it declares."""
    m = source_fields(scenario.mobility)
    request = OpenRequest(scenario.name, scenario.duration, trace_path, overwrite, outputs_dir)
    try:
        return SOURCES[m.source].open(m, request)
    except SourceInputError as e:
        raise ConfigError(str(e)) from None


def replays(scenario: Scenario) -> bool:
    """Whether the scenario's source replays a recorded trace (it records none of its own)."""
    return SOURCES[scenario.mobility.source].replays_trace


def replay_mobility(data: dict[str, Any], trace: str | Path) -> dict[str, Any]:
    """The mobility fields that make the scenario ``data`` (a dumped :class:`Scenario`) replay
    ``trace``: the trace source, and the building files its radio read when the traffic was
    recorded (the source's own, such as the embedded city's blocks, and ``mobility.buildings``), so
    that the replay's links see the same buildings."""
    from .scenario.config import load_model

    return {"source": "trace", "trace": str(trace), "buildings": building_files(load_model(Scenario, None, data))}


def replay_scenario(trace: str | Path, scenario_path: str | Path | None = None) -> Scenario:
    """The scenario of a recorded run, switched to replay ``trace`` without SUMO.

    Without ``scenario_path`` the scenario is read from ``manifest.json`` beside the trace, with
    the recorded run's calibrated costs pinned."""
    from .scenario.config import ConfigError, load_model
    from .scenario.schema import load_scenario

    trace = Path(trace)
    if not trace.is_file():
        raise FileNotFoundError(f"trace {trace} does not exist")
    if scenario_path is not None:
        base = load_scenario(scenario_path)
    else:
        manifest = trace.parent / "manifest.json"
        if not manifest.is_file():
            raise ConfigError(f"{trace}: no manifest.json beside the trace; give --scenario")
        if trace.name == "trace.jsonl":
            RunDir(trace.parent, create=False).verify_file("trace.jsonl")
        base = pin_calibration(manifest_scenario(manifest), read_manifest(manifest).get("calibration"))
    data = base.model_dump(mode="json")
    data["mobility"].update(replay_mobility(data, trace))
    data["mobility"]["outputs"] = []  # a replay runs no SUMO
    data["name"] = f"{base.name}-replay"
    return load_model(Scenario, None, data)


def manifest_scenario(manifest: Path) -> Scenario:
    """The scenario recorded in a run's ``manifest.json`` (a bad one is refused naming that file).
    A setting added since the run was recorded takes the value the code had then, not today's
    default: a recorded train section without ``fisher_labels`` drew its labels (``sampled``)."""
    from .scenario.config import ConfigError, load_model

    config = read_manifest(manifest)["config"]
    train = config.get("federated", {}).get("train") if isinstance(config, dict) else None
    if isinstance(train, dict) and "fisher_labels" not in train:
        train["fisher_labels"] = "sampled"
    try:
        return load_model(Scenario, None, config)
    except ConfigError as e:
        raise ConfigError(str(e).replace("<embedded default>", f"{manifest}: config")) from None


def run_scenario(
    scenario: Scenario,
    out: str | Path = "runs",
    progress: bool = True,
    run_dir: Path | None = None,
    say=print,
    resume: bool = False,
) -> RunDir:
    """Run ``scenario`` into a new run directory and return it (records are written as they come).

    Before anything runs, every file the scenario names is checked (:func:`vmc_sim.scenario.inputs.check_inputs`)
    and the data set is loaded; a run that fails before its first record removes the run
    directory it created (nothing is left behind to resume).

    With ``resume`` the run directory's existing records are kept: the run is executed again
    from the start (SUMO and every stream are seeded, contributions come from the run's
    contribution store instead of being retrained), the recomputed records are checked
    against the stored ones, and only the records past them are appended. Until the resumed
    run has re-verified every stored record and got past the recorded trace's end, it writes
    nothing into the run directory (its new trace goes to ``trace.jsonl.resume`` beside the old
    one and replaces it then), so a resume that fails leaves the directory as it was.

    One process writes a run directory: it holds the directory's lock
    (:class:`vmc_sim.rundir.lock.RunLock`) for the run's life, and a second writer is refused. SIGTERM
    and SIGHUP end the run as Ctrl-C does (``interrupted``, resumable)."""
    with signals_interrupt():
        if resume:
            assert run_dir is not None  # a resume names the run directory it continues
            return _resume(scenario, Path(run_dir), progress, say)
        return _run_new(scenario, out, progress, run_dir, say)


def _run_new(scenario: Scenario, out: str | Path, progress: bool, run_dir: Path | None, say) -> RunDir:
    """A new run into ``run_dir`` (default: a fresh directory under ``out``), holding its lock."""
    check_inputs(scenario)
    digests = input_digests(scenario)
    setup = scenario.federated.setup(scenario.seed)  # an unusable data set fails here, before SUMO starts
    created = run_dir is None
    live = not replays(scenario)
    if not live:  # a bad trace is refused before a run directory exists
        source, rsus = open_source(scenario, None)
    try:
        run = RunDir(run_dir or new_run_dir(out, scenario.name))
        lock = RunLock(run.path)
    except BaseException:
        if not live:
            source.close()
        raise
    with lock:
        try:
            if live:
                source, rsus = open_source(scenario, run.path / "trace.jsonl", outputs_dir=run.path / SUMO_OUTPUTS)
            try:
                sim = CoSimulation(scenario, source, rsus, run, setup=setup, progress=progress)
                _write_running(run, scenario, sim, source, rsus, None, digests)
                say(f"run directory: {run.path}")
                _note_dropped(source, say)
                _finish(run, sim)
            finally:
                source.close()  # SUMO completes its output files when it closes
                _list_sumo_outputs(run, scenario)
                _fingerprint_trace(run)
        except BaseException:
            if created and not (run.path / "records.jsonl").exists():
                shutil.rmtree(run.path, ignore_errors=True)  # failed before its first record: nothing to resume
            raise
        say(summarize(run))
    return run


def _note_dropped(source: MobilitySource, say) -> None:
    """Say which FCD vehicles ``mobility.fcd_invalid: drop`` left out (the manifest lists them all)."""
    fcd = source.metadata.get("fcd") or {}
    dropped = fcd.get("dropped") or {}
    if dropped:
        first = next(iter(dropped))
        say(
            f"note: {len(dropped)} vehicle(s) of {fcd['path']} left out (mobility.fcd_invalid: drop), listed under "
            f"mobility.fcd.dropped in manifest.json; {first!r}: {dropped[first]}"
        )


def _fingerprint_trace(run: RunDir) -> None:
    """Fingerprint the trace a completed run recorded (complete once its source is closed)."""
    if not (run.path / "manifest.json").is_file():
        return
    manifest = run.manifest()
    if manifest.get("status") == "complete" and (run.path / "trace.jsonl").is_file():
        run.fingerprint_outputs(manifest, ("trace.jsonl",))
        run._atomic_json("manifest.json", manifest)


SUMO_OUTPUTS = "sumo"
"""The run directory's folder of SUMO's own outputs (``mobility.outputs``)."""


def _list_sumo_outputs(run: RunDir, scenario: Scenario) -> None:
    """Add each SUMO output file of the run, with its SHA-256 and size, to the manifest as ``sumo_outputs``."""
    outputs = scenario.mobility.outputs
    if not outputs or not (run.path / "manifest.json").is_file():
        return
    manifest = run.manifest()
    manifest["sumo_outputs"] = describe_outputs(run.path / SUMO_OUTPUTS, outputs, run.path)
    run._atomic_json("manifest.json", manifest)


def pin_calibration(scenario: Scenario, calibration: dict | None) -> Scenario:
    """``scenario`` with the calibrated costs of ``calibration`` (a manifest's entry) pinned, so a
    resumed or replayed run charges exactly what the original did."""
    if not calibration or not scenario.compute.measures_costs:
        return scenario
    from .scenario.config import load_model

    data = scenario.model_dump(mode="json")
    data["compute"]["calibration"] = {
        k: calibration[k] for k in ("train_s_per_sample_epoch", "fisher_s_per_sample", "solve_s_per_unit")
    }
    return load_model(Scenario, None, data)


def _write_running(
    run: RunDir,
    scenario: Scenario,
    sim: CoSimulation,
    source: MobilitySource,
    rsus: list[Rsu],
    resumed_after: dict[str, int] | None,
    inputs: dict[str, str],
    previous: dict | None = None,
) -> None:
    """Write the manifest of a run that is going: everything it runs on, ``inputs`` (each input
    file's SHA-256, for a resume to compare) and status ``running``."""
    seeds = sim.setup.streams.manifest()
    seeds["sumo"] = scenario.mobility.sumo.seed
    run.write_manifest(
        scenario.model_dump(mode="json"),
        seeds,
        previous,
        kind="cosim",
        status="running",
        calibration=sim.calibration.as_dict() if sim.calibration else None,
        time_model=sim.time.describe(),
        channel=scenario.channel_config().to_dict(),  # resolved: the defaults a run used, should they change
        mobility=source.metadata,
        rsus=[r.to_dict() for r in rsus],
        resumed_after=resumed_after,
        inputs=inputs,
        client_shards=sim.shards.manifest(),
    )


def _finish(run: RunDir, sim: CoSimulation) -> None:
    """Run ``sim`` and record how it ended in the manifest (failed runs say how to resume)."""
    try:
        summary = sim.run()
    except BaseException as e:
        if not sim.committed:
            raise
        manifest = run.manifest()
        interrupted = isinstance(e, KeyboardInterrupt)
        how = f"interrupted ({e})" if interrupted and str(e) else "interrupted"  # which signal, if not Ctrl-C
        manifest.update(
            status="interrupted" if interrupted else "failed",
            error=how if interrupted else f"{type(e).__name__}: {e}",
            records=run.record_count(),
            client_shards=sim.shards.manifest(),
            hint=f"continue with: vmc run --resume {run.path}",
        )
        run._atomic_json("manifest.json", manifest)
        if interrupted:
            raise KeyboardInterrupt(f"{how}; {manifest['hint']}") from None
        raise
    summary["records"] = run.record_count()  # the whole run's, those before a resume included
    manifest = run.manifest()
    manifest.update(
        status="complete",
        summary=summary,
        client_shards=sim.shards.manifest(),
        unconverged_solves=unconverged_solves(run.records()) or None,
    )
    # readers verify against them
    run.fingerprint_outputs(
        manifest, ("records.jsonl", "models.safetensors", "released.jsonl", "contributions/index.json")
    )
    if sim.store.recomputed:
        manifest["contributions_recomputed"] = sim.store.recomputed
    run._atomic_json("manifest.json", manifest)


class ResumeError(RuntimeError):
    """A resume failed before it changed anything: the run directory is as it was."""


def _resume(scenario: Scenario, path: Path, progress: bool, say) -> RunDir:
    """Continue the run in ``path`` holding its lock; a complete run, or one whose input files
    changed since it began, is left as it is."""
    run = RunDir(path, create=False)
    with RunLock(run.path):
        previous = run.manifest()
        if previous.get("status") == "complete":
            say(f"{run.path}: already complete ({run.record_count()} records); nothing to resume")
            return run
        check_inputs(scenario)
        digests = input_digests(scenario)
        changed = changed_inputs(previous.get("inputs"), digests)
        if changed:
            raise ResumeError(
                f"{run.path}: an input file changed since the run began: {'; '.join(changed)}; "
                "resume refused, nothing was changed"
            )
        return _resume_locked(scenario, run, previous, digests, progress, say)


def _resume_locked(
    scenario: Scenario, run: RunDir, previous: dict, digests: dict[str, str], progress: bool, say
) -> RunDir:
    """The resume itself (the caller holds the run's lock and checked its inputs)."""
    scenario = pin_calibration(scenario, previous.get("calibration"))
    if run.torn_tail():
        say(
            f"{run.path / 'records.jsonl'}: its last line is incomplete (cut while being written); "
            "it is dropped when the resumed run writes, every complete record is kept"
        )
    existing: dict[str, list[dict]] = {}
    for r in run.records():
        existing.setdefault(r["method"], []).append(r)
    live = not replays(scenario)
    trace, staged = run.path / "trace.jsonl", run.path / "trace.jsonl.resume"
    outputs, staged_outputs = run.path / SUMO_OUTPUTS, run.path / (SUMO_OUTPUTS + ".resume")
    shutil.rmtree(staged_outputs, ignore_errors=True)
    source, rsus = open_source(scenario, staged if live else None, overwrite=True, outputs_dir=staged_outputs)
    sim: CoSimulation | None = None

    def commit() -> None:
        if live:
            os.replace(staged, trace)
        run.drop_torn_tail()
        assert sim is not None  # commit is called while sim runs
        after = {m: len(v) for m, v in existing.items()}
        _write_running(run, scenario, sim, source, rsus, after, digests, previous)

    try:
        sim = CoSimulation(
            scenario,
            source,
            rsus,
            run,
            progress=progress,
            existing=existing,
            commit_after=_last_time(trace) if live else -math.inf,
            on_commit=commit,
        )
        was = ended_status(previous.get("status"))
        say(f"run directory: {run.path} ({was}; resuming after {sum(map(len, existing.values()))} records)")
        _note_dropped(source, say)
        _finish(run, sim)
    except Exception as e:
        if sim is not None and sim.committed:
            raise
        raise ResumeError(f"{e} (resume abandoned: {run.path} is unchanged)") from e
    finally:
        source.close()
        _fingerprint_trace(run)
        if sim is None or not sim.committed:
            staged.unlink(missing_ok=True)
            shutil.rmtree(staged_outputs, ignore_errors=True)
        elif staged_outputs.is_dir():  # SUMO wrote them anew from the start: they replace the old ones
            shutil.rmtree(outputs, ignore_errors=True)
            os.replace(staged_outputs, outputs)
            _list_sumo_outputs(run, scenario)
    say(summarize(run))
    return run


def _last_time(trace: Path) -> float:
    """Time of the last complete record of a trace (-inf if there is none)."""
    last = -math.inf
    if not trace.is_file():
        return last
    with open(trace, encoding="utf-8") as f:
        for line in f:
            if not line.endswith("\n"):
                break
            try:
                t = json.loads(line).get("time")
            except (json.JSONDecodeError, AttributeError):
                continue
            if isinstance(t, (int, float)):
                last = max(last, float(t))
    return last
