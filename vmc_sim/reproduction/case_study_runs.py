"""Running the LuST case study's scenarios: one mobility-only pass records the traffic, then every
(dataset, setting) scenario replays it, in spawned processes when asked."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..scenario.schema import Scenario


def record_trace(scenario: Scenario, path: Path) -> Path:
    """Step the scenario's live mobility source alone, as the co-simulation's mobility process
    does (from its start, one step length at a time, until the duration is over or SUMO ends),
    recording the trace at ``path``: the trace a live run of ``scenario`` records."""
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
    return path


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
    threads = None if "OMP_NUM_THREADS" in os.environ else max(1, (os.cpu_count() or 1) // workers)
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(run_one, t, runs, threads, again[i]): i for i, t in enumerate(tasks)}
        for f in as_completed(futures):
            finished(futures[f], *f.result())
    return [done[i] for i in range(len(tasks))]
