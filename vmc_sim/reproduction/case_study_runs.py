"""Running the LuST case study's scenarios: one mobility-only pass records the traffic, then every
(dataset, setting) scenario replays it, in spawned processes when asked; the index of finished runs
a reproduction keeps, and the unfinished run a rerun continues."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..scenario.schema import Scenario


def record_trace(scenario: Scenario, path: Path) -> bool:
    """Step the scenario's live mobility source alone, as the co-simulation's mobility process
    does (from its start, one step length at a time, until the duration is over or SUMO ends),
    recording the trace at ``path``: the trace a live run of ``scenario`` records. True when SUMO
    ran, False when the trace cache held the trace."""
    from ..cosim import open_source
    from ..scenario.inputs import check_inputs

    check_inputs(scenario)
    source, _ = open_source(scenario, path)
    try:
        t = source.time
        end, step = t + scenario.duration, scenario.mobility.sumo.step_length
        while t < end and not source.finished:
            source.advance(t)
            t = t + step
    finally:
        source.close()
    cached = source.metadata.get("trace_cache") or {}
    if cached.get("hit"):
        print(
            f"mobility: replayed the cached trace {cached['key'][:12]} (SUMO did not run; same traffic, same "
            f"records); {scenario.mobility.trace_cache}",
            flush=True,
        )
    elif cached:
        print(f"mobility: SUMO recorded the trace, kept in {scenario.mobility.trace_cache} for later runs", flush=True)
    return not cached.get("hit")


def trace_job(scenario: dict[str, Any], runs: str) -> tuple[str, float, bool]:
    """Record the traffic of ``scenario`` (a JSON dict) into a new ``<name>-trace`` run directory
    under ``runs``: the trace's path, the seconds it took and whether SUMO ran (False: the trace
    cache held it, and the seconds are a copy's). The pool's other unit of work."""
    from ..rundir.directory import new_run_dir
    from ..scenario.config import load_model
    from ..scenario.schema import Scenario

    t0 = time.perf_counter()
    live = load_model(Scenario, None, scenario)
    path = new_run_dir(runs, f"{live.name}-trace") / "trace.jsonl"
    sumo_ran = record_trace(live, path)
    return str(path), time.perf_counter() - t0, sumo_ran


def run_one(
    scenario: dict[str, Any], runs: str, threads: int | None = None, resume: str | None = None
) -> tuple[str, str]:
    """Run one scenario (a JSON dict) into a new run directory under ``runs`` and plot it, or
    continue the unfinished run directory ``resume`` (run as its manifest records it); its run
    directory and Fig. 6 plot. The unit of work of the process pool."""
    from ..cosim import manifest_scenario, run_scenario
    from ..rundir.plots import plot_run
    from ..scenario.config import load_model
    from ..scenario.schema import Scenario

    if threads:
        import torch

        torch.set_num_threads(threads)
    if resume is not None:
        recorded = manifest_scenario(Path(resume) / "manifest.json")
        run = run_scenario(recorded, progress=False, run_dir=Path(resume), resume=True, say=lambda s: None)
    else:
        run = run_scenario(load_model(Scenario, None, scenario), out=runs, progress=False, say=lambda s: None)
    return str(run.path), str(plot_run(run.path))


def worker_threads(workers: int) -> int | None:
    """Torch threads for each of ``workers`` processes sharing this machine's cores (None: leave
    torch's own choice, when ``OMP_NUM_THREADS`` says it)."""
    return None if "OMP_NUM_THREADS" in os.environ else max(1, (os.cpu_count() or 1) // workers)


#: What :func:`run_staged` asks for once trace ``i`` is recorded (its path, seconds and whether SUMO
#: ran): the runs that replay it, each a scenario (JSON dict) and the unfinished run directory it
#: continues, if any.
Expand = Callable[[int, Path, float, bool], list[tuple[dict[str, Any], str | None]]]


def run_staged(
    traces: Sequence[dict[str, Any]],
    expand: Expand,
    runs: str,
    jobs: int,
    on_done: Callable[[int, int, Path, Path, float], None],
    *,
    record: Callable[[dict[str, Any], str], tuple[str, float, bool]] = trace_job,
    run: Callable[[dict[str, Any], str, int | None, str | None], tuple[str, str]] = run_one,
) -> None:
    """Record every trace of ``traces`` and make the runs that replay it, ``jobs`` at a time
    (``record`` and ``run`` do one of each: :func:`trace_job`, :func:`run_one`).

    ``expand(i, trace, seconds, sumo_ran)`` turns trace ``i``, once recorded, into its runs; ``on_done(i, j,
    run, plot, seconds)`` is called as run ``j`` of trace ``i`` finishes (in completion order, with
    the wall-clock seconds the run itself took), so a caller can record progress that survives a
    later failure. With one job everything runs here, in order;
    with more, a run whose trace is ready goes first and a trace is recorded whenever no run is
    waiting, so the traffic passes of later replicates overlap the training of earlier ones
    instead of each waiting for the last.
    """
    if jobs <= 1:
        for i, t in enumerate(traces):
            path, seconds, sumo_ran = record(t, runs)
            for j, (task, resume) in enumerate(expand(i, Path(path), seconds, sumo_ran)):
                t0 = time.perf_counter()
                path_run, plot = run(task, runs, None, resume)
                on_done(i, j, Path(path_run), Path(plot), time.perf_counter() - t0)
        return
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait

    threads = worker_threads(jobs)
    waiting_traces = list(range(len(traces)))
    waiting_runs: list[tuple[int, int, dict[str, Any], str | None]] = []
    busy: dict[Future[tuple[Any, ...]], tuple[int, int, float]] = {}  # (trace, run or -1, when it started)
    error: BaseException | None = None  # the first failure: nothing new starts, what runs is kept
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        while busy or (error is None and (waiting_traces or waiting_runs)):
            while error is None and len(busy) < jobs and (waiting_runs or waiting_traces):
                if waiting_runs:
                    i, j, task, resume = waiting_runs.pop(0)
                    busy[pool.submit(run, task, runs, threads, resume)] = (i, j, time.perf_counter())
                else:
                    i = waiting_traces.pop(0)
                    busy[pool.submit(record, traces[i], runs)] = (i, -1, time.perf_counter())
            finished, _ = wait(busy, return_when=FIRST_COMPLETED)
            for f in finished:
                i, j, started = busy.pop(f)
                try:
                    result = f.result()
                    if j < 0:
                        made = expand(i, Path(result[0]), float(result[1]), bool(result[2]))
                        waiting_runs += [(i, k, task, resume) for k, (task, resume) in enumerate(made)]
                    else:
                        on_done(i, j, Path(result[0]), Path(result[1]), time.perf_counter() - started)
                except Exception as e:  # noqa: BLE001 - re-raised once the runs in flight are kept
                    error = error or e
    if error is not None:
        raise error


def run_pool(
    tasks: list[dict[str, Any]],
    runs: str,
    jobs: int,
    on_done: Callable[[int, Path, Path], None] | None = None,
    resume: list[str | None] | None = None,
) -> list[tuple[Path, Path]]:
    """Run the scenarios (JSON dicts) in order, or ``jobs`` at once in spawned processes; their run
    directories and plots in ``tasks`` order. ``on_done(i, run, plot)`` is called as each finishes
    (in completion order), so a caller can record progress that survives a later failure;
    ``resume[i]``, when given, is an unfinished run directory task ``i`` continues."""
    done: dict[int, tuple[Path, Path]] = {}
    again = resume or [None] * len(tasks)

    def finished(i: int, run: str, plot: str) -> None:
        done[i] = (Path(run), Path(plot))
        if on_done is not None:
            on_done(i, *done[i])

    if jobs <= 1 or len(tasks) == 1:
        for i, t in enumerate(tasks):
            finished(i, *run_one(t, runs, None, again[i]))
        return [done[i] for i in range(len(tasks))]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    workers = min(jobs, len(tasks))
    threads = worker_threads(workers)
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(run_one, t, runs, threads, again[i]): i for i, t in enumerate(tasks)}
        for f in as_completed(futures):
            finished(futures[f], *f.result())
    return [done[i] for i in range(len(tasks))]


def read_index(path: Path) -> list[dict[str, Any]]:
    """The finished runs recorded in ``path`` whose run directories still hold a complete run."""
    if not path.is_file():
        return []
    entries = json.loads(path.read_text(encoding="utf-8"))
    kept = []
    for e in entries:
        manifest = Path(e["run"]) / "manifest.json"
        if manifest.is_file() and json.loads(manifest.read_text()).get("status") == "complete":
            kept.append(e)
        else:
            print(f"{path}: {e['run']} is not a complete run any more; it runs again", file=sys.stderr)
    return kept


def unfinished(runs: Path, scenario: dict[str, Any]) -> str | None:
    """The newest run directory under ``runs`` that an earlier invocation started for
    ``scenario`` and did not finish (interrupted, killed, or failed after its first record), to
    be resumed rather than started again; the traffic it replays may sit in an older trace
    directory (the same traffic: the replicate's SUMO inputs and seeds are in its name and config)."""
    from ..cosim import manifest_scenario
    from ..rundir.directory import read_manifest, writer_alive
    from ..scenario.config import load_model
    from ..scenario.schema import Scenario

    want = {**load_model(Scenario, None, scenario).model_dump(mode="json"), "mobility": None}
    for path in sorted(runs.glob(f"{scenario['name']}-*"), reverse=True):
        manifest = path / "manifest.json"
        if not manifest.is_file() or not (path / "records.jsonl").is_file():
            continue
        m = read_manifest(manifest)
        if m.get("status") == "complete" or writer_alive(path):
            continue
        recorded = manifest_scenario(manifest).model_dump(mode="json")
        if recorded["mobility"]["source"] == "trace" and {**recorded, "mobility": None} == want:
            return str(path)
    return None
