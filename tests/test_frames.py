"""Runs and sweeps as pandas DataFrames (``vmc_sim.open_run``, ``vmc_sim.open_sweep``): the frames
hold what the files hold, each file verified first; a sweep writes ``results.parquet`` beside
``results.csv``; without pandas the error names the extra that installs it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from test_export import two_method_replay
from test_sweep import tiny_base, tiny_trace

import vmc_sim
from fl_core.errors import CorruptFileError
from mobility.trace import read_trace
from vmc_sim.rundir.directory import RunDir
from vmc_sim.rundir.export import load_availability

pd = pytest.importorskip("pandas")


@pytest.fixture(scope="module")
def replay_run(tmp_path_factory) -> Path:
    """A replay of a written trace with state samples (no SUMO), uploads slow enough to fail."""
    return two_method_replay(tmp_path_factory.mktemp("replay"))


def test_a_run_as_dataframes_holds_its_files(replay_run):
    run = vmc_sim.open_run(replay_run)
    records = list(RunDir(replay_run, create=False).records())
    assert len(run.records) == len(records) and run.records["method"].tolist() == [r["method"] for r in records]
    assert run.records["members"].tolist() == [r["members"] for r in records]  # lists stay lists
    trace = read_trace(load_availability(replay_run).meta["trace"]["path"], with_states=True)
    events = run.trace[run.trace["type"] == "event"]
    assert len(events) == len(trace.events) and set(events["kind"]) == {"join", "leave"}
    assert len(run.trace) == len(trace.events) + sum(len(m) for _, m in trace.states)
    assert run.trace["time"].is_monotonic_increasing
    rows = load_availability(replay_run).contributions
    assert run.contributions.to_dict("records") == pd.DataFrame(rows).to_dict("records")
    assert set(run.contributions["outcome"]) == {"arrived", "not_arrived"}
    assert sorted(run.totals["method"]) == ["fsosa", "retrain"] and run.status == "complete"


def test_a_changed_record_file_is_refused_naming_it(replay_run, tmp_path):
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(replay_run, copy)
    lines = (copy / "records.jsonl").read_text().splitlines(keepends=True)
    (copy / "records.jsonl").write_text("".join(lines[:-1]))
    run = vmc_sim.open_run(copy)
    with pytest.raises(CorruptFileError, match="records.jsonl"):
        run.records  # noqa: B018


def test_without_pandas_the_error_names_the_extra(replay_run, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r"vmc-sim\[pandas\]"):
        vmc_sim.open_run(replay_run)


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory) -> Path:
    """A sweep over rho with two replicates on a written trace (no SUMO)."""
    tmp = tmp_path_factory.mktemp("sweep")
    spec = vmc_sim.SweepSpec.model_validate(
        {
            "name": "frames",
            "base": tiny_base(tiny_trace(tmp / "trace.jsonl")),
            "grid": {"rho": [0.5]},
            "replicates": 2,
            "replicate_sets": ["seed"],
        }
    )
    return vmc_sim.run_sweep(spec, tmp / "out", workers=2, say=lambda s: None).path


@pytest.mark.slow
def test_a_sweep_as_dataframes_and_as_parquet(sweep_dir):
    pytest.importorskip("pyarrow")
    sweep = vmc_sim.open_sweep(sweep_dir)
    csv = pd.read_csv(sweep_dir / "results.csv")
    assert sweep.results.equals(csv) and sorted(sweep.results["replicate"]) == [0, 1]
    assert set(sweep.results["status"]) == {"complete"} and len(sweep.summary) == 1
    parquet = pd.read_parquet(sweep_dir / "results.parquet")
    assert parquet.shape == csv.shape and parquet["total_MB"].tolist() == csv["total_MB"].tolist()
    tables = json.loads((sweep_dir / "sweep.json").read_text())["tables"]
    assert set(tables) == {"results.csv", "summary.csv", "results.parquet"}
    run = sweep.run(sweep.manifest["points"][0]["id"])
    assert run.status == "complete" and len(run.records) > 0
    with pytest.raises(KeyError, match="not a run of the sweep"):
        sweep.run("nope")


@pytest.mark.slow
def test_a_changed_sweep_table_is_refused_naming_it(sweep_dir, tmp_path):
    import shutil

    copy = tmp_path / "sweep"
    shutil.copytree(sweep_dir, copy)
    with open(copy / "results.csv", "a") as f:
        f.write("x\n")
    with pytest.raises(CorruptFileError, match="results.csv"):
        vmc_sim.open_sweep(copy).results  # noqa: B018
    assert vmc_sim.open_sweep(copy).summary is not None  # the tables that verify are read
