"""``case_study_runs.run_staged``: every trace is recorded once and each run starts once its trace
is there; with two jobs the traces of later replicates overlap earlier runs, and a failure starts
nothing new, keeps the runs in flight and is raised once they are kept."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from vmc_sim.reproduction.case_study_runs import run_staged


def fake_record(scenario: dict[str, Any], runs: str) -> tuple[str, float, bool]:
    """A traffic pass: sleeps as long as the scenario says, then names its trace (SUMO ran unless
    the scenario says ``cached``)."""
    time.sleep(scenario.get("sleep", 0.0))
    (Path(runs) / f"{scenario['name']}.trace").write_text(scenario["name"])
    return str(Path(runs) / f"{scenario['name']}.trace"), scenario.get("sleep", 0.0), not scenario.get("cached")


def fake_run(task: dict[str, Any], runs: str, threads: int | None, resume: str | None) -> tuple[str, str]:
    """A run: fails when told to, else sleeps and leaves a file saying it ran."""
    if task.get("fail"):
        raise RuntimeError(f"{task['name']} failed (injected)")
    time.sleep(task.get("sleep", 0.0))
    (Path(runs) / f"{task['name']}.ran").write_text(task["trace"])
    return task["name"], f"{task['name']}.png"


def staged(tmp_path: Path, traces: list[dict[str, Any]], runs_of: dict[int, list[dict[str, Any]]], jobs: int):
    done: list[tuple[int, int, str]] = []
    expanded: list[int] = []

    def expand(i: int, trace: Path, seconds: float, sumo_ran: bool) -> list[tuple[dict[str, Any], str | None]]:
        assert trace.read_text() == traces[i]["name"]  # recorded before its runs are asked for
        assert sumo_ran is not traces[i].get("cached", False)
        expanded.append(i)
        return [({**t, "trace": str(trace)}, None) for t in runs_of[i]]

    def on_done(i: int, j: int, run: Path, plot: Path, seconds: float) -> None:
        assert seconds >= 0.0
        done.append((i, j, str(run)))

    error = None
    try:
        run_staged(traces, expand, str(tmp_path), jobs, on_done, record=fake_record, run=fake_run)
    except RuntimeError as e:
        error = e
    return done, expanded, error


@pytest.mark.parametrize("jobs", [1, 2])
def test_every_trace_once_and_every_run_after_its_trace(tmp_path, jobs):
    traces = [{"name": "t0"}, {"name": "t1", "sleep": 0.2, "cached": True}]
    runs_of = {0: [{"name": "a"}, {"name": "b"}], 1: [{"name": "c"}]}
    done, expanded, error = staged(tmp_path, traces, runs_of, jobs)
    assert error is None and sorted(expanded) == [0, 1]
    assert sorted(done) == [(0, 0, "a"), (0, 1, "b"), (1, 0, "c")]
    assert {p.name: p.read_text() for p in tmp_path.glob("*.ran")} == {
        "a.ran": str(tmp_path / "t0.trace"),
        "b.ran": str(tmp_path / "t0.trace"),
        "c.ran": str(tmp_path / "t1.trace"),
    }


def test_a_failure_starts_nothing_new_and_keeps_the_run_in_flight(tmp_path):
    # trace t0 first; its slow run "a" and failing run "f" fill both jobs once t1 is in; "c" never starts
    traces = [{"name": "t0"}, {"name": "t1", "sleep": 0.5}]
    runs_of = {0: [{"name": "a", "sleep": 2.0}], 1: [{"name": "f", "fail": True}, {"name": "c"}]}
    done, expanded, error = staged(tmp_path, traces, runs_of, 2)
    assert error is not None and "f failed" in str(error)
    assert done == [(0, 0, "a")]  # in flight when f failed: finished and recorded before the error is raised
    assert not (tmp_path / "c.ran").exists()
