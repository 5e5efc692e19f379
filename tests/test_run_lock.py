"""One writer per run directory, SIGTERM ending a run as Ctrl-C does, inputs pinned by digest, and
resumes of finished runs that change nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from test_cosim import DiesAt, files_of, scenario, sim_records, trace_file

from vmc_sim.cli import main
from vmc_sim.cosim import ResumeError, run_scenario
from vmc_sim.rundir.directory import RunDir, writer_alive
from vmc_sim.rundir.lock import RunLock, RunLockedError, describe_status, signals_interrupt
from vmc_sim.rundir.summary import summarize
from vmc_sim.scenario.input_digests import input_files

ROOT = Path(__file__).resolve().parents[1]


def quiet(_: str) -> None:
    """A ``say`` that prints nothing."""


@pytest.fixture
def broken_run(tmp_path, monkeypatch):
    """A run on a recorded trace whose mobility failed at t = 60 (resumable), and its scenario."""
    import vmc_sim.cosim as cosim

    sc = scenario(trace_file(tmp_path))
    original = cosim.open_source
    monkeypatch.setattr(cosim, "open_source", lambda *a, **k: (lambda s, r: (DiesAt(s, 60.0), r))(*original(*a, **k)))
    with pytest.raises(Exception, match="SUMO died"):
        run_scenario(sc, out=tmp_path / "broken", progress=False, say=quiet)
    monkeypatch.setattr(cosim, "open_source", original)
    return sc, next((tmp_path / "broken").iterdir())


def hold_lock(path: Path) -> subprocess.Popen:
    """A child process that takes ``path``'s lock, says so, and holds it until killed."""
    code = (
        "import sys, time\nfrom vmc_sim.rundir.lock import RunLock\n"
        f"lock = RunLock({str(path)!r})\nprint('locked', flush=True)\ntime.sleep(120)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "locked"
    return child


def test_a_second_writer_on_a_live_run_is_refused_naming_the_pid(broken_run, capsys):
    sc, path = broken_run
    assert writer_alive(path) is None  # the lock file the failed run left blocks nothing
    child = hold_lock(path)
    try:
        before = files_of(path)
        holder = writer_alive(path)
        assert holder is not None and holder["pid"] == child.pid
        assert describe_status(path, "running").startswith(f"running (pid {child.pid} on ")
        assert main(["run", "--resume", str(path), "--quiet"]) == 1
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and f"pid {child.pid}" in err and "another process is writing" in err
        with pytest.raises(RunLockedError, match=f"pid {child.pid}"):
            run_scenario(sc, progress=False, say=quiet, run_dir=path)
        assert files_of(path) == before
    finally:
        child.kill()
        child.wait()
    assert writer_alive(path) is None  # killed: the operating system dropped its lock
    assert describe_status(path, "interrupted") == "interrupted, the writer is gone"
    with RunLock(path):
        pass


def test_an_edited_trace_is_refused_naming_it_and_the_whole_run_is_counted(broken_run, tmp_path):
    sc, path = broken_run
    trace = Path(sc.mobility.trace)
    original = trace.read_bytes()
    trace.write_bytes(trace_file(tmp_path / "other", arrivals=3).read_bytes())  # the same file, other traffic
    before = files_of(path)
    with pytest.raises(ResumeError, match=rf"{trace} \(sha256 \w{{12}} when the run began, \w{{12}} now\)"):
        run_scenario(sc, progress=False, say=quiet, run_dir=path, resume=True)
    assert files_of(path) == before
    trace.write_bytes(original)
    run = run_scenario(sc, progress=False, say=quiet, run_dir=path, resume=True)
    manifest = run.manifest()
    assert manifest["status"] == "complete" and manifest["inputs"] == {str(trace): manifest["inputs"][str(trace)]}
    assert manifest["summary"]["records"] == run.record_count() > sum(manifest["resumes"][0]["after"].values())


def test_resuming_a_complete_run_changes_nothing_and_says_so(tmp_path, capsys):
    run = run_scenario(scenario(trace_file(tmp_path)), out=tmp_path / "r", progress=False, say=quiet)
    before = files_of(run.path)
    assert main(["run", "--resume", str(run.path), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "already complete" in out and f"{run.record_count()} records" in out
    assert files_of(run.path) == before


def test_sigterm_interrupts_a_run_and_resume_completes_it(tmp_path):
    sc = scenario(trace_file(tmp_path, n_initial=12, arrivals=20, departures=10), duration=350.0)
    (tmp_path / "sc.yaml").write_text(yaml.safe_dump(sc.model_dump(mode="json")))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vmc_sim.cli",
            "run",
            str(tmp_path / "sc.yaml"),
            "--out",
            str(tmp_path / "t"),
            "--quiet",
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while (
        not list((tmp_path / "t").glob("*/records.jsonl"))
        or not next((tmp_path / "t").glob("*/records.jsonl")).stat().st_size
    ):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr
        time.sleep(0.02)
    path = next((tmp_path / "t").iterdir())
    assert writer_alive(path)["pid"] == proc.pid  # type: ignore[index]
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "SIGTERM" in err and "--resume" in err, err
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and writer_alive(path) is None
    assert "note: this run is interrupted, the writer is gone: the figures cover its" in summarize(RunDir(path))
    run = run_scenario(sc, progress=False, say=quiet, run_dir=path, resume=True)
    full = run_scenario(sc, out=tmp_path / "full", progress=False, say=quiet)
    assert sim_records(run) == sim_records(full)
    assert run.manifest()["summary"]["records"] == full.manifest()["summary"]["records"]
    # whole-run counts: every vehicle trained once over both attempts, as in the run never stopped
    assert run.manifest()["summary"]["trainings"] == full.manifest()["summary"]["trainings"]
    assert run.manifest()["summary"]["trainings_this_attempt"] < full.manifest()["summary"]["trainings"]
    assert run.manifest()["resumes"][0]["ended"]["status"] == "interrupted"
    assert "note: this run is" not in summarize(run)  # complete: no partial-run note


def test_sigterm_and_sighup_raise_keyboard_interrupt_and_handlers_come_back():
    def mine(signum, frame):
        raise AssertionError("the handler from before must not run inside")

    old = signal.signal(signal.SIGTERM, mine)
    try:
        with pytest.raises(KeyboardInterrupt, match="SIGTERM"), signals_interrupt():  # noqa: PT012  the signal may land in the sleep
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, old)


def test_every_named_input_file_is_listed(tmp_path):
    for name in ("net.xml", "a.rou.xml", "b.rou.xml", "add.xml"):
        (tmp_path / name).write_text("<x/>")
    cfg = tmp_path / "run.sumocfg"
    cfg.write_text(
        '<configuration><input><net-file value="net.xml"/><route-files value="a.rou.xml"/>'
        '<additional-files value="add.xml"/></input></configuration>'
    )
    sc = scenario(
        tmp_path / "t.jsonl",
        mobility={"source": "files", "config_file": str(cfg), "route_files": [str(tmp_path / "b.rou.xml")]},
    )
    assert {Path(f).name for f in input_files(sc)} == {"run.sumocfg", "net.xml", "a.rou.xml", "b.rou.xml", "add.xml"}


def test_vmc_status_tells_a_live_writer_from_a_gone_one(broken_run, capsys):
    _, path = broken_run
    assert main(["status", str(path)]) == 0
    out = capsys.readouterr().out
    records = sum(1 for _ in (path / "records.jsonl").open())
    assert "failed, the writer is gone" in out and f"records: {records}" in out and "--resume" in out
    child = hold_lock(path)
    try:
        assert main(["status", str(path)]) == 0
        assert f"running (pid {child.pid} on " in capsys.readouterr().out
    finally:
        child.kill()
        child.wait()
    assert main(["status", str(path / "nowhere")]) == 2
    assert "no such run directory" in capsys.readouterr().err
