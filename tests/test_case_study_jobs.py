"""``tools/lust_case_study.py --jobs 2`` changes no record: the quick case study with two datasets,
run one after another (the first live on SUMO, the second replaying its trace) and side by side
(a mobility-only pass records the trace, both replay it in two processes), gives the same
records, field for field except the host-measured ``host_*`` columns, the same trace and the
same summary and per-request tables.

Both runs share one ``VMC_CACHE`` of their own: the first measures the time model's costs and
caches them, the second reads them, as two runs on one machine do; the script pins them into
every dataset's scenario, so the processes of ``--jobs 2`` charge them too. Neither uses the
contribution cache: both must train every vehicle themselves, for two local epochs (what is
compared is equality, which does not depend on K; the scenario's 20 made this the suite's
slowest test).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import load_script

ROOT = Path(__file__).resolve().parents[1]
DATASETS = ("digits", "femnist")  # the built-in set and the smallest offline one (LEAF's sample)


def run_case_study(jobs: int, tmp: Path, cache: Path, *extra: str, tag: str = "") -> tuple[Path, Path]:
    out, runs = tmp / f"out{jobs}{tag}", tmp / f"runs{jobs}{tag}"
    env = {k: v for k, v in os.environ.items() if k != "VMC_RECALIBRATE"}
    env.update(OMP_NUM_THREADS="1", MPLBACKEND="Agg", VMC_CACHE=str(cache))
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "lust_case_study.py"),
            "--quick",
            "--datasets",
            *DATASETS,
            "--jobs",
            str(jobs),
            "--epochs",
            "2",
            "--out",
            str(out),
            "--runs",
            str(runs),
            "--no-contribution-cache",
            *extra,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return out, runs


def records(runs: Path, dataset: str) -> list[dict]:
    (path,) = runs.glob(f"lust-case-study-{dataset}-quick-2*/records.jsonl")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [{k: v for k, v in r.items() if not k.startswith("host_")} for r in rows]


@pytest.mark.slow
def test_jobs_two_gives_the_records_of_jobs_one(tmp_path: Path):
    if not (ROOT.parent / "shared" / "data" / "femnist_leaf").is_dir():
        pytest.skip("the offline FEMNIST copy (../shared/data/femnist_leaf) is not here")
    cache = tmp_path / "cache"
    serial_out, serial_runs = run_case_study(1, tmp_path, cache)
    parallel_out, parallel_runs = run_case_study(2, tmp_path, cache)
    assert len(list(parallel_runs.glob("*-trace-*/trace.jsonl"))) == 1  # the mobility-only pass
    for d in DATASETS:
        serial, parallel = records(serial_runs, d), records(parallel_runs, d)
        assert serial and len(serial) == len(parallel), d
        for a, b in zip(serial, parallel, strict=True):
            assert a == b, (d, {k: (a.get(k), b.get(k)) for k in a.keys() | b.keys() if a.get(k) != b.get(k)})
    for name in ("trace.jsonl", "summary.csv", "requests.csv"):
        assert (serial_out / name).read_text() == (parallel_out / name).read_text(), name
    # --trace: a trace recorded elsewhere (here the serial run's, copied away) replayed by both datasets, no SUMO
    kept = tmp_path / "recorded.jsonl"
    kept.write_bytes((serial_out / "trace.jsonl").read_bytes())
    replay_out, replay_runs = run_case_study(2, tmp_path, cache, "--trace", str(kept), tag="replay")
    assert not list(replay_runs.glob("*-trace-*"))  # no mobility pass
    for d in DATASETS:
        assert records(replay_runs, d) == records(serial_runs, d), d
    for name in ("trace.jsonl", "summary.csv", "requests.csv"):
        assert (serial_out / name).read_text() == (replay_out / name).read_text(), name
    assert f"Traffic replayed from `{kept}`" in (replay_out / "report.md").read_text()


def test_a_bad_trace_is_refused_before_anything_runs(tmp_path: Path, capsys, monkeypatch):
    lust_case_study = load_script("tools/lust_case_study.py")

    bad = tmp_path / "t.jsonl"
    bad.write_text('{"type": "header", "format": "vmc-sim-mobility-trace", "version": 1, "meta": {}}\n{"type": "ev')
    for trace, says in ((tmp_path / "missing.jsonl", "does not exist"), (bad, "truncated")):
        with pytest.raises(SystemExit) as e:
            lust_case_study.main(
                ["--quick", "--trace", str(trace), "--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "out")]
            )
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert "--trace" in err and says in err and str(trace) in err, err
    assert not (tmp_path / "runs").exists() and not (tmp_path / "out").exists()


def test_costs_pinned_for_one_dataset_are_not_charged_to_another_shape(tmp_path, monkeypatch):
    """The scenario's pinned costs price its own dataset and any of the same image shape and class
    count; a dataset of another shape is calibrated instead of silently charged them."""
    import argparse
    from types import SimpleNamespace

    import yaml

    import fl_core.data

    lust_case_study = load_script("tools/lust_case_study.py")

    shapes = {"mnist": ((1, 28, 28), 10), "fashion_mnist": ((1, 28, 28), 10), "cifar10": ((3, 32, 32), 10)}
    monkeypatch.setattr(
        fl_core.data,
        "load_train_test",
        lambda name, root=None: (SimpleNamespace(input_shape=shapes[name][0], num_classes=shapes[name][1]), None),
    )
    costs = {"train_s_per_sample_epoch": 1e-4, "fisher_s_per_sample": 1e-3, "solve_s_per_unit": 1e-3}
    path = tmp_path / "cs.yaml"
    path.write_text(yaml.safe_dump({"federated": {"dataset": "mnist"}, "compute": {"calibration": costs}}))
    args = argparse.Namespace(quick=False, scenario=str(path), epochs=None)
    for dataset, kept in (("mnist", True), ("fashion_mnist", True), ("cifar10", False)):
        sc = lust_case_study.scenario_for(args, dataset, None)
        assert (sc.compute.calibration is not None) == kept, dataset
        if kept:
            assert sc.compute.calibration.model_dump() == costs


def test_the_report_calls_its_wall_clock_cold_only_when_nothing_came_from_the_cache(monkeypatch):
    lust_case_study = load_script("tools/lust_case_study.py")

    cold = {"hits": 0, "misses": 30, "hit_rate": 0.0, "weights_reused": 0, "path": "/c"}
    assert lust_case_study.cache_lines({}) == []
    lines = lust_case_study.cache_lines({"mnist": cold, "fashion_mnist": cold})
    assert "is a cold run's" in lines[1] and "not a cold" not in lines[1]
    assert lines[2].startswith("- mnist: contribution cache: 0 of 30") and len(lines) == 4
    for warm in ({**cold, "hits": 3, "misses": 27, "hit_rate": 0.1}, {**cold, "weights_reused": 2}):
        assert "not a cold run's" in lust_case_study.cache_lines({"mnist": cold, "fashion_mnist": warm})[1]
