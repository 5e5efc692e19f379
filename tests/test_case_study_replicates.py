"""``tools/lust_case_study_replicates.py --quick``: replicates differ in traffic and seeds, the
paper setting loses no contribution, every figure is a mean with its interval over the replicates,
a rerun continues from ``runs.json`` instead of starting again, and the aggregation's statistics
are those of a Student-t interval."""

from __future__ import annotations

import csv
import json
import math
import os
from pathlib import Path

import pytest
from conftest import load_script

from vmc_sim.reproduction.case_study import method_rows
from vmc_sim.reproduction.case_study_replicates import pm, summarize, verdict
from vmc_sim.reproduction.common import compute_time
from vmc_sim.rundir.directory import RunDir


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("replicates")
    os.environ.setdefault("MPLBACKEND", "Agg")
    tool = load_script("tools/lust_case_study_replicates.py")
    args = ["--quick", "--epochs", "2", "--runs", str(tmp / "runs"), "--out", str(tmp / "out")]
    args += ["--contribution-cache", str(tmp / "cache"), "--trace-cache", str(tmp / "traces")]
    assert tool.main(args) == 0
    return tool, tmp, args


def rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_replicates_see_their_own_traffic_and_seeds(quick):
    _, tmp, _ = quick
    entries = json.loads((tmp / "out" / "runs.json").read_text())
    assert sorted((e["replicate"], e["setting"]) for e in entries) == [
        (r, s) for r in range(3) for s in ("paper", "physics")
    ]
    times = {}
    for e in entries:
        manifest = RunDir(e["run"]).manifest()
        assert manifest["config"]["seed"] == manifest["config"]["seed"] // 1 == e["seed"]
        recs = [r for r in RunDir(e["run"]).records() if r["method"] == "retrain"]
        times.setdefault(e["replicate"], set()).add(tuple(r["request_time"] for r in recs))
    assert all(len(v) == 1 for v in times.values())  # both settings of a replicate: the same requests
    assert len({next(iter(v)) for v in times.values()}) == 3  # three traffic seeds: three sequences


def test_the_paper_setting_trains_on_board_and_loses_nothing(quick):
    _, tmp, _ = quick
    for e in json.loads((tmp / "out" / "runs.json").read_text()):
        config = RunDir(e["run"]).manifest()["config"]
        if e["setting"] == "paper":
            assert config["compute"]["mode"] == "onboard" and config["coordinator"]["dwell_limited"] is False
            assert all(not r.get("not_arrived") for r in RunDir(e["run"]).records())
        else:
            assert config["compute"]["mode"] == "shared_gpu" and config["coordinator"]["dwell_limited"] is True
        assert config["federated"]["shard_assignment"] == "arrival"


def test_every_figure_is_a_mean_with_its_interval(quick):
    _, tmp, _ = quick
    summary = rows(tmp / "out" / "summary.csv")
    per = rows(tmp / "out" / "replicates.csv")
    f = next(r for r in summary if r["setting"] == "physics" and r["method"] == "fsosa")
    values = [float(r["comm_saving_pct"]) for r in per if r["setting"] == "physics" and r["method"] == "fsosa"]
    assert int(f["comm_saving_pct_n"]) == len(values) == 3
    assert math.isclose(float(f["comm_saving_pct_mean"]), sum(values) / 3)
    table = rows(tmp / "out" / "paper.csv")
    assert {r["figure"] for r in table} >= {"cumulative time vs Retrain, %", "communication vs Retrain, %"}
    verdicts = {"yes", "no", "interval overlaps", "no figure"}
    for r in table:
        if r["setting"] == "physics" and r["figure"] == "cumulative time vs Retrain, %, the paper's accounting":
            assert r["within range?"].startswith("not priced") and r["ours"] == "-"  # one shared device
        else:
            assert r["within range?"].split(" (")[0] in verdicts
    report = (tmp / "out" / "report.md").read_text()
    assert "fig6_paper_digits.png" in report and (tmp / "out" / "fig6_physics_digits.png").is_file()


def test_a_rerun_continues_instead_of_starting_again(quick):
    tool, tmp, args = quick
    before = (tmp / "out" / "runs.json").read_text()
    runs = sorted((tmp / "runs").iterdir())
    assert tool.main(args) == 0
    assert (tmp / "out" / "runs.json").read_text() == before
    assert sorted((tmp / "runs").iterdir()) == runs  # nothing ran again


def test_student_t_interval_and_verdicts():
    rows_in = [{"setting": "s", "dataset": "d", "method": "fsosa", "time_saving_pct": v} for v in (-40.0, -50.0, -45.0)]
    (row,) = summarize(rows_in)
    # mean -45, sample std 5, t(0.975, 2) = 4.302653: half-width 4.302653 * 5 / sqrt(3)
    assert math.isclose(row["time_saving_pct_mean"], -45.0)
    assert math.isclose(row["time_saving_pct_ci95"], 4.302653 * 5 / math.sqrt(3), rel_tol=1e-6)
    assert pm(row, "time_saving_pct").startswith("-45.00 ± 12.42")
    assert verdict(-53.84, -36.66, -45.0, 12.4) == "yes"
    assert verdict(-25.76, -21.97, -30.0, 5.0) == "interval overlaps"
    assert verdict(-25.76, -21.97, -40.0, 5.0) == "no"
    assert verdict(0.0, 3.96, math.nan, math.nan) == "no figure"


def test_the_seeds_accounting_of_time_waits_for_the_slowest_client():
    # seed 000, Appendix B-D: clients of a request train side by side, so a request costs its
    # slowest trained client plus the solve; a request that trains nobody costs its solve alone
    samples = {"'a'": 100, "'b'": 300, "'c'": 200}
    records = [
        {"index": 0, "trained": ["a", "b", "c"], "compute_sim_s": 6.0, "solve_sim_s": 0.5},  # 0.01 s a sample
        {"index": 1, "trained": ["c"], "compute_sim_s": 2.0, "solve_sim_s": 0.5},
        {"index": 2, "trained": [], "compute_sim_s": 0.0, "solve_sim_s": 0.5},
        {"index": 3, "trained": [], "compute_sim_s": 0.0},  # untriggered: nothing at all
    ]
    assert math.isclose(compute_time(records, samples), 3.0 + 0.5 + 2.0 + 0.5 + 0.5)
    # jobs that were not charged one cost per sample queued on a shared device: no such accounting
    queued = [*records[:1], {"index": 1, "trained": ["c"], "compute_sim_s": 5.0, "solve_sim_s": 0.5}]
    assert compute_time(queued, samples) is None
    assert compute_time([{**records[1], "failed": ["c"]}], samples) is None
    assert compute_time([{**records[1], "trained": ["z"]}], samples) is None  # a client the store lacks


def test_the_paper_accounting_prices_time_on_board_only(quick):
    _, tmp, _ = quick
    for e in json.loads((tmp / "out" / "runs.json").read_text()):
        rows_ = {r["method"]: r for r in method_rows(RunDir(e["run"]), e["dataset"])}
        paper = rows_.get("fsosa, paper accounting")
        if paper is None:  # every F-SOSA model withdrawn: nothing to price
            continue
        if e["setting"] == "paper":  # on-board units: each request waits for its slowest trained client
            f, r = rows_["fsosa"]["compute_time_s"], rows_["retrain"]["compute_time_s"]
            assert paper["time_saving_pct"] == pytest.approx(100 * (f / r - 1))
            assert paper["time_s"] == f
        else:  # one shared edge device queues the jobs: the seed's accounting does not apply
            assert paper["time_saving_pct"] is None and rows_["fsosa"]["compute_time_s"] is None


def test_an_unfinished_run_is_continued_not_started_again(quick, tmp_path, monkeypatch):
    import vmc_sim.cosim as cosim
    from mobility.errors import SumoError

    tool, tmp, _ = quick
    done = next(
        e
        for e in json.loads((tmp / "out" / "runs.json").read_text())
        if e["replicate"] == 0 and e["setting"] == "paper"
    )
    requests = [r["request_time"] for r in RunDir(done["run"]).records() if r["method"] == "retrain"]
    dies_at = requests[len(requests) // 2]

    class Dies:
        def __init__(self, inner):
            self.inner = inner

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def advance(self, until):
            if until >= dies_at:
                raise SumoError(f"SUMO died at t={until} (injected)")
            return self.inner.advance(until)

    original = cosim.open_source

    def dying(scenario, path, *a, **k):  # the run's replay dies; the traffic pass (a path) does not
        source, rsus = original(scenario, path, *a, **k)
        return (source if path is not None else Dies(source)), rsus

    args = ["--quick", "--epochs", "2", "--replicates", "1", "--settings", "paper"]
    args += ["--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "out")]
    args += ["--contribution-cache", str(tmp / "cache"), "--trace-cache", str(tmp / "traces")]
    monkeypatch.setattr(cosim, "open_source", dying)
    with pytest.raises(SumoError):
        tool.main(args)
    monkeypatch.setattr(cosim, "open_source", original)
    (broken,) = [p for p in (tmp_path / "runs").iterdir() if "-trace-" not in p.name]
    kept = list(RunDir(broken).records())
    assert RunDir(broken).manifest()["status"] == "failed" and 0 < len(kept) < len(list(RunDir(done["run"]).records()))
    assert tool.main(args) == 0
    (entry,) = json.loads((tmp_path / "out" / "runs.json").read_text())
    assert entry["run"] == str(broken)  # the same directory, continued
    assert [p for p in (tmp_path / "runs").iterdir() if "-trace-" not in p.name] == [broken]

    def sim(run):
        return [{k: v for k, v in r.items() if not k.startswith("host_")} for r in RunDir(run).records()]

    assert sim(broken) == sim(done["run"])  # as if it had never stopped


def test_femnist_keeps_its_writers_as_the_seed_does():
    tool = load_script("tools/lust_case_study_replicates.py")
    data = {"name": "n", "federated": {"dataset": "mnist", "alpha": 0.5}, "mobility": {"source": "lust"}}
    assert tool.task(data, "physics", "femnist", Path("t.jsonl"))["federated"] == {"dataset": "femnist", "alpha": None}
    assert tool.task(data, "physics", "cifar10", Path("t.jsonl"))["federated"] == {"dataset": "cifar10", "alpha": 0.5}
