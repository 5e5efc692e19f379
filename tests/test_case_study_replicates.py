"""``tools/lust_case_study_replicates.py --quick``: replicates differ in traffic and seeds (both, or
one of them with ``--vary``, each dataset its own with ``--dataset-draws own``), the paper setting
loses no contribution, every figure is a mean with its interval over the replicates, the report
comes from the data files alone, a rerun continues from ``runs.json`` instead of starting again,
and the aggregation's statistics are those of a Student-t interval."""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import os
import re
import shutil
from pathlib import Path

import pytest
from conftest import load_script

from vmc_sim.radio.link_budget import ChannelConfig
from vmc_sim.reproduction.case_study import method_rows
from vmc_sim.reproduction.case_study_design import dataset_offset
from vmc_sim.reproduction.case_study_replicates import pm, summarize
from vmc_sim.reproduction.common import compute_time
from vmc_sim.rundir.directory import RunDir
from vmc_sim.scenario.schema import load_scenario


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
    accounting = rows(tmp / "out" / "accounting.csv")
    assert {(r["setting"], r["replicate"]) for r in accounting} == {
        (s, str(r)) for s in ("paper", "physics") for r in range(3)
    }
    for r in accounting:
        if r["setting"] == "physics":  # one shared device: the seed's computation time is not priced
            assert r["T3_saving_pct"] == ""
        else:
            assert float(r["T3_saving_pct"]) < 0 and r["T3_untriggered_share_pct"] != ""
    report = (tmp / "out" / "report.md").read_text()
    assert "fig6_paper_digits.png" in report and (tmp / "out" / "fig6_physics_digits.png").is_file()


def test_the_report_needs_only_the_data_files(quick, tmp_path):
    tool, tmp, _ = quick
    out = tmp_path / "out"
    out.mkdir()
    for f in ("replicates.csv", "requests.csv", "runs.csv", "distributions.csv.gz", "runs.json", "provenance.json"):
        (out / f).write_bytes((tmp / "out" / f).read_bytes())
    runs = tmp / "runs"
    runs.rename(tmp / "runs-away")  # no run directory to read
    try:
        assert tool.main(["--report-only", "--out", str(out)]) == 0
    finally:
        (tmp / "runs-away").rename(runs)
    for f in ("report.md", "summary.csv", "accounting.csv", "claims.csv"):
        assert (out / f).read_bytes() == (tmp / "out" / f).read_bytes(), f


def test_each_request_s_computation_time_adds_up_to_the_run_s(quick):
    _, tmp, _ = quick
    totals = {
        (r["setting"], r["replicate"], r["method"]): float(r["compute_time_s"])
        for r in rows(tmp / "out" / "replicates.csv")
        if r["setting"] == "paper" and r["method"] in ("fsosa", "retrain")
    }
    sums: dict[tuple[str, str, str], float] = {}
    for r in rows(tmp / "out" / "requests.csv"):
        if r["setting"] == "paper":
            key = (r["setting"], r["replicate"], r["method"])
            sums[key] = sums.get(key, 0.0) + float(r["compute_time_s"])
    assert sums.keys() == totals.keys()
    for key, total in totals.items():
        assert sums[key] == pytest.approx(total, rel=1e-9)


def test_a_rerun_continues_instead_of_starting_again(quick):
    tool, tmp, args = quick
    before = (tmp / "out" / "runs.json").read_text()
    runs = sorted((tmp / "runs").iterdir())
    assert tool.main(args) == 0
    assert (tmp / "out" / "runs.json").read_text() == before
    assert sorted((tmp / "runs").iterdir()) == runs  # nothing ran again


def test_student_t_interval():
    rows_in = [{"setting": "s", "dataset": "d", "method": "fsosa", "time_saving_pct": v} for v in (-40.0, -50.0, -45.0)]
    (row,) = summarize(rows_in)
    # mean -45, sample std 5, t(0.975, 2) = 4.302653: half-width 4.302653 * 5 / sqrt(3)
    assert math.isclose(row["time_saving_pct_mean"], -45.0)
    assert math.isclose(row["time_saving_pct_ci95"], 4.302653 * 5 / math.sqrt(3), rel_tol=1e-6)
    assert pm(row, "time_saving_pct").startswith("-45.00 ± 12.42")


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


def test_an_unfinished_run_is_continued_not_started_again(quick, tmp_path, monkeypatch, capsys):
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
    capsys.readouterr()
    assert tool.main([*args, "--status"]) == 0  # what a rerun will do, said before it does it
    said = capsys.readouterr().out
    assert "runs to make: 1, of them 1 recorded part-way" in said and f"part-way: {broken}" in said
    assert tool.main(args) == 0
    (entry,) = json.loads((tmp_path / "out" / "runs.json").read_text())
    assert entry["run"] == str(broken) and entry["resumed"]  # the same directory, continued
    assert [p for p in (tmp_path / "runs").iterdir() if "-trace-" not in p.name] == [broken]

    def sim(run):
        return [{k: v for k, v in r.items() if not k.startswith("host_")} for r in RunDir(run).records()]

    assert sim(broken) == sim(done["run"])  # as if it had never stopped


def test_femnist_keeps_its_writers_as_the_seed_does():
    tool = load_script("tools/lust_case_study_replicates.py")
    data = {"name": "n", "federated": {"dataset": "mnist", "alpha": 0.5}, "mobility": {"source": "lust"}}
    assert tool.task(data, "physics", "femnist", Path("t.jsonl"))["federated"] == {"dataset": "femnist", "alpha": None}
    assert tool.task(data, "physics", "cifar10", Path("t.jsonl"))["federated"] == {"dataset": "cifar10", "alpha": 0.5}


@pytest.fixture(scope="module")
def arms(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("arms")
    os.environ.setdefault("MPLBACKEND", "Agg")
    tool = load_script("tools/lust_case_study_replicates.py")
    args = ["--quick", "--epochs", "2", "--replicates", "2", "--settings", "paper"]
    args += ["--vary", "traffic", "members", "both", "--dataset-draws", "own"]
    args += ["--runs", str(tmp / "runs"), "--out", str(tmp / "out")]
    args += ["--contribution-cache", str(tmp / "cache"), "--trace-cache", str(tmp / "traces")]
    assert tool.main(args) == 0
    return tool, tmp


def test_each_arm_moves_its_own_seed_and_a_shared_run_is_made_once(arms):
    tool, tmp = arms
    entries = json.loads((tmp / "out" / "runs.json").read_text())
    seeds = {(e["arm"], e["replicate"]): (e["seed"], e["sumo_seed"]) for e in entries}
    own = dataset_offset("digits")
    assert seeds == {
        ("traffic", 0): (own, 42),
        ("traffic", 1): (own, 43),  # the traffic moves, the member draw stays
        ("members", 0): (own, 42),
        ("members", 1): (own + 1, 42),  # the member draw moves, the traffic stays
        ("both", 0): (own, 42),
        ("both", 1): (own + 1, 43),
    }
    assert all(e["dataset_draws"] == "own" for e in entries)
    by = {(e["arm"], e["replicate"]): e["run"] for e in entries}
    assert by[("traffic", 0)] == by[("members", 0)] == by[("both", 0)]  # one run, recorded under each arm
    assert len(set(by.values())) == 4
    for name in ("replicates.csv", "requests.csv", "runs.csv"):
        got = {(r["arm"], int(r["replicate"]), int(r["seed"]), int(r["sumo_seed"])) for r in rows(tmp / "out" / name)}
        assert got == {(a, r, *s) for (a, r), s in seeds.items()}, name
    requests = {}
    for e in entries:  # the traffic seed decides the requests; the member draw does not
        recs = [r for r in RunDir(e["run"]).records() if r["method"] == "retrain"]
        requests[(e["arm"], e["replicate"])] = tuple(r["request_time"] for r in recs)
    assert requests[("members", 1)] == requests[("members", 0)] != requests[("traffic", 1)]


def test_the_arms_reach_the_report(arms):
    _, tmp = arms
    claims = rows(tmp / "out" / "claims.csv")
    spread = [c for c in claims if c["claim"] == "C-SPREAD"]
    assert spread and all(c["arm"] == "traffic vs members" for c in spread)
    assert all("awaits" not in c["verdict"] for c in spread)
    # replicate 0 is one run in both arms; the F-test's samples are not independent, and it says so
    assert all(c["ours"].endswith("; 1 run(s) in both arms") for c in spread)
    report = (tmp / "out" / "report.md").read_text()
    assert "arm traffic" in report and "arm members" in report


def test_every_dataset_draws_its_own_run_seed_on_the_same_traffic():
    tool = load_script("tools/lust_case_study_replicates.py")
    data = {"name": "n", "seed": 7, "federated": {"dataset": "mnist", "alpha": 0.5}, "mobility": {"source": "lust"}}
    trace = Path("t.jsonl")
    own = {d: tool.task(data, "paper", d, trace, own_draws=True) for d in ("mnist", "cifar10", "femnist")}
    assert len({t["seed"] for t in own.values()}) == 3
    assert all(t["seed"] == 7 + dataset_offset(d) for d, t in own.items())
    # LuST has no building footprints: the replay's radio has none either
    assert all(t["mobility"] == {"source": "trace", "trace": "t.jsonl", "buildings": []} for t in own.values())
    shared = {tool.task(data, "paper", d, trace)["seed"] for d in ("mnist", "cifar10", "femnist")}
    assert shared == {7}
    assert dataset_offset("mnist") % 1000 == 0 and dataset_offset("mnist") >= 1000
    with pytest.raises(ValueError, match="unknown arm"):
        tool.replicate({"seed": 0, "name": "n", "mobility": {"sumo": {"seed": 42}}}, 1, "sumo")


def test_a_replay_keeps_the_buildings_its_traffic_was_recorded_with():
    """The embedded city's blocks decide NLOS on its radio: a replicate replaying its traffic
    carries them, or the replay's links would all be in line of sight."""
    pytest.importorskip("sumo")
    from vmc_sim.scenario.inputs import building_files

    tool = load_script("tools/lust_case_study_replicates.py")
    city = load_scenario(None)
    buildings = building_files(city)
    assert len(buildings) == 1  # the city's blocks
    task = tool.task(city.model_dump(mode="json"), "physics", "digits", Path("t.jsonl"))
    assert task["mobility"] == {"source": "trace", "trace": "t.jsonl", "buildings": buildings}


def test_two_jobs_overlap_the_traffic_passes_and_change_no_record(arms, tmp_path):
    """``--jobs 2`` records each traffic seed's trace once, in the pool beside the runs, and
    gives every (arm, replicate) the run and the records ``--jobs 1`` gave it."""
    tool, tmp = arms
    args = ["--quick", "--epochs", "2", "--replicates", "2", "--settings", "paper", "--jobs", "2"]
    args += ["--vary", "traffic", "members", "both", "--dataset-draws", "own"]
    args += ["--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "out")]
    args += ["--contribution-cache", str(tmp_path / "cache"), "--trace-cache", str(tmp_path / "traces")]
    assert tool.main(args) == 0

    def by_arm(out: Path) -> dict[tuple[str, int], tuple[int, int, str]]:
        return {(e["arm"], e["replicate"]): (e["seed"], e["sumo_seed"], e["run"]) for e in json.loads(out.read_text())}

    one, two = by_arm(tmp / "out" / "runs.json"), by_arm(tmp_path / "out" / "runs.json")
    assert one.keys() == two.keys()
    assert len({run for *_, run in two.values()}) == 4  # the run three arms share is made once here too
    traces = [p for p in (tmp_path / "runs").iterdir() if "-trace-" in p.name]
    assert len(traces) == 2  # one pass per traffic seed (42 and 43), not one per replicate

    def sim(run: str) -> list[dict[str, object]]:
        return [{k: v for k, v in r.items() if not k.startswith("host_")} for r in RunDir(run).records()]

    for k, (seed, sumo_seed, run) in one.items():
        assert two[k][:2] == (seed, sumo_seed)
        assert sim(two[k][2]) == sim(run), k


def test_the_physics_setting_runs_on_the_city_radio_and_the_paper_setting_on_the_scenario_s_link():
    tool = load_script("tools/lust_case_study_replicates.py")
    link = {"path_loss_model": "tr37885_urban_los", "shared_air": False}
    data = {"name": "n", "seed": 0, "channel": link, "federated": {"dataset": "mnist"}, "mobility": {"source": "lust"}}
    physics = tool.task(data, "physics", "mnist", Path("t.jsonl"))
    assert physics["channel"] == {}  # every field its default: the city's radio
    city = ChannelConfig(**physics["channel"])
    assert (city.path_loss_model, city.link_state_model, city.shared_air) == ("tr37885_urban", "city", True)
    for setting in ("paper", "paper_cpu"):
        assert tool.task(data, setting, "mnist", Path("t.jsonl"))["channel"] == link


def test_a_second_process_on_the_same_replicate_directory_is_refused(quick, tmp_path, capsys):
    """Two invocations on one ``--out`` would each rewrite runs.json over the other's runs."""
    from vmc_sim.rundir.lock import RunLock

    tool, tmp, _ = quick
    out = tmp_path / "out"
    out.mkdir()
    for name in ("runs.json", "provenance.json", "replicates.csv", "requests.csv", "runs.csv"):
        shutil.copy(tmp / "out" / name, out / name)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with RunLock(out, what="replicate directory"), pytest.raises(SystemExit) as e:
        tool.main(["--report-only", "--out", str(out)])
    assert e.value.code == 2
    assert "another process is writing this replicate directory" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.name != ".lock"} == before
    assert tool.main(["--report-only", "--out", str(out)]) == 0  # the lock let go: the report is written


def test_runs_or_out_inside_a_finished_run_is_refused_before_anything_is_made(quick, tmp_path, capsys):
    tool, tmp, _ = quick
    run = Path(json.loads((tmp / "out" / "runs.json").read_text())[0]["run"])
    before = sorted((p.relative_to(run), p.stat().st_mtime_ns) for p in run.rglob("*"))
    for runs, out in ((run, tmp_path / "out"), (tmp_path / "runs", run / "report")):
        with pytest.raises(SystemExit) as e:
            tool.main(["--quick", "--replicates", "1", "--runs", str(runs), "--out", str(out)])
        assert e.value.code == 2 and "does not own" in capsys.readouterr().err
    assert not (tmp_path / "out").exists() and not (tmp_path / "runs").exists()
    assert sorted((p.relative_to(run), p.stat().st_mtime_ns) for p in run.rglob("*")) == before


def test_the_report_states_each_run_s_own_wall_clock(arms):
    """Runs made side by side: the report gives each run's own seconds, not the time since its trace."""
    _, tmp = arms
    entries = json.loads((tmp / "out" / "runs.json").read_text())
    assert all(e["run_s"] > 0 for e in entries)
    line = next(x for x in (tmp / "out" / "report.md").read_text().splitlines() if x.startswith("- Wall-clock"))
    assert not any(e["resumed"] for e in entries)
    assert line.startswith(
        f"- Wall-clock (`runs.json`): {len({e['run'] for e in entries})} runs made in one go, each median "
    )
    # each entry names the code it was made with, and the report counts them per commit
    commits = {e["commit"] for e in entries}
    assert len(commits) == 1 and all(commits)
    text = (tmp / "out" / "report.md").read_text()
    assert f"- The code of the runs (`runs.json`, entries per commit): {commits.pop()} {len(entries)}." in text
    # a fresh trace cache: SUMO recorded each traffic seed's trace once, and each is one pass
    assert all(e["trace_recorded"] for e in entries)
    assert "; 2 SUMO passes of the traffic it replays" in line


def test_a_trace_the_cache_held_is_no_sumo_pass_in_the_report(arms, tmp_path):
    """Copying a cached trace takes seconds; the report must not call that a traffic pass."""
    tool, tmp = arms
    out = tmp_path / "out"
    shutil.copytree(tmp / "out", out)
    entries = json.loads((out / "runs.json").read_text())
    for e in entries:
        e["trace_recorded"] = False
    (out / "runs.json").write_text(json.dumps(entries))
    assert tool.main(["--report-only", "--out", str(out)]) == 0
    line = next(x for x in (out / "report.md").read_text().splitlines() if x.startswith("- Wall-clock"))
    assert "SUMO passes" not in line and "do not record" not in line
    assert f"; {len(entries)} entries replayed a trace the cache held (no SUMO pass)" in line
    for e in entries:
        del e["trace_recorded"]  # entries written before the record said
    (out / "runs.json").write_text(json.dumps(entries))
    assert tool.main(["--report-only", "--out", str(out)]) == 0
    line = next(x for x in (out / "report.md").read_text().splitlines() if x.startswith("- Wall-clock"))
    assert "SUMO passes" not in line
    assert f"{len(entries)} entries do not record whether SUMO or the trace cache gave their traffic" in line


def test_the_physics_request_queue_comes_from_the_records(quick):
    """Each physics run's wait (the world's clock behind the request) is latency - makespan of its records."""
    _, tmp, _ = quick
    reqs = [r for r in rows(tmp / "out" / "requests.csv") if r["setting"] == "physics"]
    assert reqs and all(r["latency_s"] != "" and float(r["latency_s"]) >= float(r["makespan_s"]) - 1e-9 for r in reqs)
    report = (tmp / "out" / "report.md").read_text()
    assert "The request queue: each request is answered in turn" in report
    runs = {(r["replicate"], r["method"]) for r in reqs}
    table = report.split("The request queue: each request is answered in turn", 1)[1].split("\n\n")[1]
    assert len(table.splitlines()) == 2 + len(runs)
    worst = max(float(r["latency_s"]) - float(r["makespan_s"]) for r in reqs)
    assert f"| {worst:.1f} |" in table


def test_the_dwell_and_job_distributions_are_committed_as_data(quick):
    """distributions.csv.gz holds every visit's dwell and every job's time, the values runs.csv summarises."""
    from mobility.dwell import dwell_summary

    _, tmp, _ = quick
    spread = list(
        csv.DictReader(io.StringIO(gzip.decompress((tmp / "out" / "distributions.csv.gz").read_bytes()).decode()))
    )
    for run in rows(tmp / "out" / "runs.csv"):
        mine = [
            r
            for r in spread
            if (r["setting"], r["dataset"], r["replicate"]) == (run["setting"], run["dataset"], run["replicate"])
        ]
        dwell = [float(r["s"]) for r in mine if r["what"] == "dwell"]
        assert dwell and dwell_summary(dwell)["median"] == pytest.approx(float(run["dwell_median_s"]))
        assert len(dwell) == int(run["dwell_visits"])
        for method in ("fsosa", "retrain"):
            jobs = [float(r["s"]) for r in mine if r["what"] == f"job {method}"]
            if jobs:
                assert dwell_summary(jobs)["median"] == pytest.approx(float(run[f"{method}_job_median_s"]))
    assert "`distributions.csv.gz`" in (tmp / "out" / "report.md").read_text()


def test_the_per_run_table_rounds_what_runs_csv_holds_in_full(arms):
    """runs.csv keeps every digit; the report shows decimals to two places and shares in per cent."""
    _, tmp = arms
    lines = (tmp / "out" / "report.md").read_text().splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("Per run (`runs.csv`"))
    header = [c.strip() for c in lines[start + 2].strip("|").split("|")]
    table = lines[start + 4 : next(i for i in range(start + 4, len(lines)) if not lines[i].startswith("| "))]
    cells = [[c.strip() for c in x.strip("|").split("|")] for x in table]
    assert len(cells) == len(rows(tmp / "out" / "runs.csv"))
    for row in cells:
        for column, cell in zip(header, row, strict=True):
            if column.endswith("_longer_than_median_dwell") and cell != "-":
                assert re.fullmatch(r"\d+\.\d %", cell), (column, cell)
            else:
                assert not re.fullmatch(r"-?\d+\.\d{3,}", cell), (column, cell)


def test_the_top_table_is_the_arm_that_varies_both_seeds():
    """With three arms the headline table shows arm both, one row per claim; the others are further down."""
    from vmc_sim.reproduction.case_study_analysis.render import headline_rows

    rows = [{"claim": c, "arm": a} for c in ("C-COMM", "C-TIME") for a in ("both", "members", "traffic")]
    top, note = headline_rows(rows)
    assert top == [{"claim": "C-COMM", "arm": "both"}, {"claim": "C-TIME", "arm": "both"}]
    assert "the arms that vary one of them (members, traffic)" in note
    only = [r for r in rows if r["arm"] == "both"]
    assert headline_rows(only) == (only, "")  # one arm: as it is, nothing said
    traffic = [r for r in rows if r["arm"] != "both"]
    assert headline_rows(traffic) == (traffic, "")  # no arm both: every row, with its arm in claims.csv


def test_status_says_what_is_recorded_and_what_is_left_and_changes_nothing(arms, capsys):
    tool, tmp = arms
    args = ["--quick", "--epochs", "2", "--settings", "paper", "--vary", "traffic", "members", "both"]
    args += ["--dataset-draws", "own", "--runs", str(tmp / "runs"), "--out", str(tmp / "out")]
    args += ["--contribution-cache", str(tmp / "cache"), "--trace-cache", str(tmp / "traces")]
    before = sorted((p.relative_to(tmp), p.stat().st_mtime_ns) for p in tmp.rglob("*"))
    capsys.readouterr()
    assert tool.main([*args, "--replicates", "2", "--status"]) == 0
    out = capsys.readouterr().out
    assert "6 of 6 (arm, replicate, setting, dataset) entries recorded" in out
    assert "runs to make: 0, of them 0 recorded part-way" in out
    assert tool.main([*args, "--replicates", "3", "--status"]) == 0
    out = capsys.readouterr().out
    # a third replicate in each arm: three runs (no two arms share r = 2), on traffic seeds 42 and 44
    assert "6 of 9 (arm, replicate, setting, dataset) entries recorded" in out
    assert "runs to make: 3, of them 0 recorded part-way" in out
    assert "traffic seeds they replay (SUMO unless the trace cache holds them): 42, 44" in out
    assert sorted((p.relative_to(tmp), p.stat().st_mtime_ns) for p in tmp.rglob("*")) == before


def test_the_setup_names_the_radio_each_setting_ran_on_and_is_refreshed_with_the_data(quick):
    """The physics setting's scenario names no channel (the default, the city's radio): the setup
    note reads the resolved channel from each setting's manifest, and is rewritten with the data
    files while the directory's other notes are kept."""
    from vmc_sim.reproduction.case_study_replicates import radio_text

    tool, tmp, args = quick
    entries = json.loads((tmp / "out" / "runs.json").read_text())
    manifests = {e["setting"]: RunDir(e["run"], create=False).manifest() for e in entries}
    assert manifests["physics"]["config"].get("channel") in (None, {})
    assert radio_text(manifests["physics"]) == "path loss tr37885_urban, link states city, the RSUs sharing one channel"
    prov_path = tmp / "out" / "provenance.json"
    prov = json.loads(prov_path.read_text())
    stale = "Setup from the runs' manifests: an older text"
    prov["notes"] = [stale, "A note of the directory's own."]
    prov_path.write_text(json.dumps(prov))
    assert tool.main(args) == 0
    notes = json.loads(prov_path.read_text())["notes"]
    assert stale not in notes and notes[1:] == ["A note of the directory's own."]
    for setting, manifest in manifests.items():
        assert f"{setting}: {radio_text(manifest)}" in notes[0]
    assert radio_text({"config": {"channel": {"shared_air": False}}}).startswith("not recorded")


def test_each_run_says_how_it_came_by_its_contributions(arms):
    """runs.csv counts each run's contributions trained, computed at cached weights and taken whole
    from the cache, as its manifest's contribution cache says; the wall-clock line adds them up, so
    a run that trained nothing is not read as a cheap one."""
    _, tmp = arms
    entries = json.loads((tmp / "out" / "runs.json").read_text())
    table = rows(tmp / "out" / "runs.csv")
    assert len(table) == len(entries)
    for e, r in zip(entries, table, strict=True):
        cache = RunDir(e["run"], create=False).manifest()["summary"]["contribution_cache"]
        assert int(r["contributions_trained"]) == cache["misses"] - cache["weights_reused"]
        assert int(r["contributions_fisher_only"]) == cache["weights_reused"]
        assert int(r["contributions_cached"]) == cache["hits"]
    # the arms share the run of replicate 0 and the members' draws: some contributions come from the cache
    assert sum(int(r["contributions_cached"]) for r in table) > 0
    line = next(x for x in (tmp / "out" / "report.md").read_text().splitlines() if x.startswith("- Wall-clock"))
    unique = {e["run"]: r for e, r in zip(entries, table, strict=True)}  # a shared run counted once
    trained = sum(int(r["contributions_trained"]) for r in unique.values())
    cached = sum(int(r["contributions_cached"]) for r in unique.values())
    assert f"those runs trained {trained:,} contributions" in line and f"took {cached:,} whole from it" in line
