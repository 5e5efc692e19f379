"""One writer per sweep directory, a new sweep that writes only into a directory of its own, and an
interrupted sweep that says what it saved and the command that resumes it."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_cosim import files_of
from test_run_lock import hold_lock
from test_sweep import read_csv, tiny_base, tiny_trace

import vmc_sim.sweep.execution as execution
from vmc_sim.cli import main
from vmc_sim.rundir.directory import writer_alive
from vmc_sim.sweep.point import run_point

ROOT = Path(__file__).resolve().parents[1]


def sweep_file(tmp: Path, rhos=(0.3, 0.5)) -> Path:
    """A sweep of the tiny recorded trace over ``rho``, one point at a time."""
    path = tmp / "sweep.yaml"
    base = tiny_base(tiny_trace(tmp / "trace.jsonl"))
    path.write_text(json.dumps({"name": "s", "base": base, "grid": {"rho": list(rhos)}, "workers": 1}))
    return path


def in_this_process(stop_after: int | None = None):
    """A stand-in for the local engine that runs each point here (no process to spawn), and with
    ``stop_after`` is interrupted as Ctrl-C would after that many points."""

    def run(tasks, workers, done):
        for i, task in enumerate(tasks):
            if i == stop_after:
                raise KeyboardInterrupt
            done(run_point(task))

    return run


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def interrupted(tmp_path, monkeypatch, capsys):
    """A sweep of two points interrupted after the first; its directory and what the command said."""
    monkeypatch.setattr(execution, "run_local", in_this_process(stop_after=1))
    code = main(["sweep", str(sweep_file(tmp_path)), "--out", str(tmp_path / "runs")])
    monkeypatch.undo()
    (path,) = (tmp_path / "runs").iterdir()
    return code, path, capsys.readouterr()


def test_an_interrupted_sweep_says_what_it_saved_and_the_command_that_resumes_it(interrupted, capsys):
    code, path, printed = interrupted
    assert code == 130
    assert printed.err == (
        f"vmc: sweep interrupted: 1 of 2 points complete, saved in {path} (sweep.json, results.csv); "
        f"continue with: vmc sweep --resume {path}\n"
    )
    manifest = json.loads((path / "sweep.json").read_text())
    assert manifest["status"] == "interrupted: KeyboardInterrupt"
    assert manifest["hint"] == f"continue with: vmc sweep --resume {path}"
    assert [p["status"] for p in manifest["points"]] == ["complete", "pending"]
    assert [r["status"] for r in read_csv(path / "results.csv")] == ["complete", "not run"]
    assert writer_alive(path) is None  # the lock went with the sweep
    first = files_of(path / manifest["points"][0]["id"])
    assert main(["sweep", "--resume", str(path)]) == 0
    assert "resuming" in capsys.readouterr().out
    manifest = json.loads((path / "sweep.json").read_text())
    assert manifest["status"] == "complete" and [p["status"] for p in manifest["points"]] == ["complete"] * 2
    assert "hint" not in manifest
    assert files_of(path / manifest["points"][0]["id"]) == first  # kept as it was, not run again


def test_an_empty_interrupt_still_says_interrupted(monkeypatch, capsys):
    import vmc_sim.cli as cli

    def interrupt(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_status", interrupt)
    assert main(["status", "anywhere"]) == 130
    assert capsys.readouterr().err == "vmc: interrupted\n"


def test_a_second_resume_on_a_live_sweep_is_refused_and_writes_nothing(interrupted, capsys):
    _, path, _ = interrupted
    child = hold_lock(path)  # the sweep's first resume, still running
    try:
        before = files_of(path)
        state = {name: digest(path / name) for name in ("sweep.json", "results.csv")}
        assert main(["sweep", "--resume", str(path)]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"pid {child.pid}" in err
        assert "another process is writing this sweep" in err and "nothing was changed" in err
        assert {name: digest(path / name) for name in state} == state
        assert files_of(path) == before
        with pytest.raises(Exception, match=f"pid {child.pid}"):
            execution.resume_sweep(path, say=lambda s: None)
        assert files_of(path) == before
    finally:
        child.kill()
        child.wait()


def test_a_new_sweep_writes_only_into_a_directory_of_its_own(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(execution, "run_local", in_this_process())
    sweep = sweep_file(tmp_path, rhos=(0.3,))
    out = tmp_path / "runs"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert main(["sweep", str(sweep), "--out", str(out)]) == 0
    mine = [p for p in out.iterdir() if p.is_dir()]
    assert len(mine) == 1 and (out / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in out.iterdir()) == sorted(["notes.txt", mine[0].name])
    capsys.readouterr()
    run = tmp_path / "a-run"
    run.mkdir()
    (run / "manifest.json").write_text("{}")
    for other, what in ((mine[0], "a sweep directory"), (run, "a run directory")):
        before = files_of(other)
        assert main(["sweep", str(sweep), "--out", str(other)]) == 2
        err = capsys.readouterr().err
        assert f"out: {other} is {what}" in err and "--resume" in err
        assert files_of(other) == before


@pytest.mark.slow
@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_a_signal_interrupts_a_sweep_which_says_so_and_resumes(how, tmp_path):
    """Ctrl-C at a terminal reaches the sweep and its points' processes; SIGTERM reaches the sweep
    alone, which passes it on to the points running."""
    sweep = sweep_file(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "vmc_sim.cli", "sweep", str(sweep), "--out", str(tmp_path / "runs")],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a process group of its own, as a terminal gives a command
    )
    deadline = time.monotonic() + 180
    while True:
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr
        state = list((tmp_path / "runs").glob("*/sweep.json"))
        if state and any(p["status"] == "complete" for p in json.loads(state[0].read_text())["points"]):
            break
        time.sleep(0.05)
    path = state[0].parent
    assert writer_alive(path)["pid"] == proc.pid  # type: ignore[index]
    if how == "ctrl-c":
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=180)
    last = err.strip().splitlines()[-1]
    points = json.loads((path / "sweep.json").read_text())["points"]
    done = sum(p["status"] == "complete" for p in points)
    assert proc.returncode == 130 and done < 2, err
    assert last.startswith("vmc: sweep interrupted") and ("SIGTERM" in last) == (how == "sigterm"), err
    assert last.endswith(
        f": {done} of 2 points complete, saved in {path} (sweep.json, results.csv); "
        f"continue with: vmc sweep --resume {path}"
    ), err
    assert writer_alive(path) is None
    assert main(["sweep", "--resume", str(path)]) == 0
    assert [r["status"] for r in read_csv(path / "results.csv")] == ["complete"] * 2


def test_the_interrupt_a_signal_raises_keeps_its_signal_when_copied_from_its_arguments():
    import pickle

    from vmc_sim.rundir.lock import EndedBySignal

    e = EndedBySignal("SIGTERM")
    for copy in (type(e)(*e.args), pickle.loads(pickle.dumps(e))):  # simpy re-raises a copy made so
        assert str(copy) == "ended by SIGTERM" and copy.signum == signal.SIGTERM
