"""The LuST case study's reports are functions of their committed data: regenerating them gives
the committed files byte for byte (a hand edit fails here), a changed figure in the data changes
the report, and the accountings, the pinning criteria and the tests of reports/lust_case_study/
PLAN.md compute what the plan defines."""

from __future__ import annotations

import csv
import io
import math
import shutil
from pathlib import Path

import pytest

from vmc_sim.reproduction import case_study_analysis as ca
from vmc_sim.reproduction.case_study_analysis.render import NO_CLAIMS, NO_PAPER, NO_PAPER_PIN

ROOT = Path(__file__).resolve().parents[1]
CASE = ROOT / "reports" / "lust_case_study"
DATA = ("replicates.csv", "requests.csv", "runs.json", "provenance.json")


REPORTED = sorted(p.parent.name for p in CASE.glob("*/claims.csv"))  # every replicate directory with a report


def test_the_replicate_directories_are_found():
    assert {"replicates", "replicates_kfac"} <= set(REPORTED)


@pytest.mark.parametrize("name", REPORTED)
def test_the_committed_report_is_regenerated_byte_for_byte(name):
    files = ca.render(CASE / name)
    assert set(files) == {"report.md", "summary.csv", "accounting.csv", "claims.csv"}
    for file, text in files.items():
        committed = (CASE / name / file).read_bytes()
        assert text.encode() == committed, (
            f"{name}/{file} is not what its data gives: regenerate it with "
            f"python tools/lust_case_study_replicates.py --report-only --out reports/lust_case_study/{name}"
        )


def _copy(tmp_path: Path, name: str) -> Path:
    out = tmp_path / name
    out.mkdir()
    for f in DATA:
        shutil.copy(CASE / name / f, out / f)
    return out


def test_a_changed_figure_in_the_data_changes_the_report(tmp_path):
    out = _copy(tmp_path, "replicates")
    (tmp_path / "replicates_kfac").mkdir()
    for f in DATA:
        shutil.copy(CASE / "replicates_kfac" / f, tmp_path / "replicates_kfac" / f)
    rows = list(csv.DictReader(io.StringIO((out / "replicates.csv").read_text())))
    for r in rows:
        if (r["setting"], r["dataset"], r["replicate"], r["method"]) == ("paper", "mnist", "0", "fsosa"):
            r["fluctuation_pts"] = "99.5"
    with open(out / "replicates.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    text = ca.render(out)["report.md"]
    assert text != (CASE / "replicates" / "report.md").read_text()
    line = next(x for x in text.splitlines() if x.startswith("| C-FLUCT | paper | mnist | diagonal |"))
    assert "99.50 / 4.97 / 9.55 / 9.76 / 2.53" in line and "1 of 5 at most 3.96" in line


def test_the_pilot_answers_the_issue_s_claims_as_the_plan_tests_them():
    found = {(c.claim, c.dataset): c for c in ca.claims(ca.load(CASE / "replicates"))}
    # "F-SOSA fluctuates less than Retrain on every dataset": paired differences all span zero
    for ds, mean in (("mnist", "-2.12 ± 4.26"), ("fashion_mnist", "-1.77 ± 3.77"), ("femnist", "-0.32 ± 1.23")):
        c = found[("C-STEADIER", ds)]
        assert c.ours.startswith(mean) and c.verdict.startswith("undecided")
    assert found[("C-STEADIER", "cifar10")].verdict.startswith("undecided")
    # the time range: 2 of 5 replicates inside on MNIST, the communication range: 3 of 5
    assert found[("C-TIME", "mnist")].agree == "2 of 5 in range"
    assert found[("C-COMM", "mnist")].agree == "3 of 5 in range"
    # "within 3.96": 2 of 5 on MNIST, 0 of 5 on Fashion-MNIST and CIFAR-10
    assert found[("C-FLUCT", "mnist")].agree.startswith("2 of 5")
    assert found[("C-FLUCT", "cifar10")].agree.startswith("0 of 5")
    # the four datasets drew one trigger pattern per replicate: one measurement, not four
    assert found[("C-DRAWS", "all")].verdict.startswith("shared") and found[("C-DRAWS", "all")].agree == "5 of 5 shared"
    # one arm only: which seed drives the spread is not tested, and the report says where the plan tests it
    assert found[("C-SPREAD", "mnist")].verdict.startswith("not tested: the arms traffic and members are not among")
    # the untriggered share needs per-record computation times the pilot's files lack
    assert found[("C-SHARE", "mnist")].verdict.startswith("awaits")


def _run(fsosa: list[tuple], retrain: list[tuple], replicate: int = 0, dataset: str = "mnist") -> list[dict]:
    """requests.csv rows of one run: (kind, triggered, subset_size, broadcast, upload per kind,
    makespan_s, compute_time_s) per record."""
    rows = []
    for method, recs in (("fsosa", fsosa), ("retrain", retrain)):
        for i, (kind, trig, p, b, u, mk, ct) in enumerate(recs):
            rows.append(
                {
                    "setting": "paper",
                    "dataset": dataset,
                    "replicate": str(replicate),
                    "method": method,
                    "index": str(i),
                    "kind": kind,
                    "triggered": "1" if trig else "0",
                    "subset_size": str(p),
                    "broadcast_bytes": str(b),
                    "model_upload_bytes": str(u),
                    "fisher_upload_bytes": str(u),
                    "control_bytes": "0",
                    "makespan_s": str(mk),
                    "compute_time_s": str(ct),
                    "request_time": str(100 + i),
                    "added": "",
                    "removed": "",
                    "population": "8",
                }
            )
    return rows


RETRAIN = [("fit", 1, 4, 10, 40, 8, 5)] + [("add", 1, 4, 10, 40, 8, 5)] * 3


def _bundle(tmp_path: Path, fsosa: list[tuple], replicates: int = 1) -> ca.Bundle:
    rows = [r for k in range(replicates) for r in _run(fsosa, RETRAIN, replicate=k)]
    return ca.Bundle(tmp_path, {"fisher": "diagonal"}, [], rows)


def test_the_accountings_charge_what_the_plan_defines(tmp_path):
    fsosa = [
        ("fit", 1, 4, 10, 40, 8, 5),  # the first fit: as Retrain's
        ("add", 1, 4, 10, 10, 1, 2),  # triggered: one client trains and uploads
        ("add", 0, 4, 0, 0, 0, 0),  # untriggered: nothing
        ("remove", 1, 4, 0, 10, 1, 1),  # triggered: a member's contribution re-sent, no broadcast
    ]
    (row,) = ca.accounting_rows(_bundle(tmp_path, fsosa))
    # Retrain: 4 x 90 bytes, 4 x 8 s makespan, 4 x 5 s computation
    assert row["C1_saving_pct"] == pytest.approx(100 * (140 / 360 - 1))
    assert row["C2_saving_pct"] == pytest.approx(100 * (270 / 360 - 1))  # a triggered request re-collects P = 4
    assert row["C2_untriggered_share_pct"] == pytest.approx(100.0)
    assert row["T1_saving_pct"] == pytest.approx(100 * (10 / 32 - 1))
    assert row["T2_saving_pct"] == pytest.approx(100 * (24 / 32 - 1))  # triggered: Retrain's makespan
    assert row["T2_untriggered_share_pct"] == pytest.approx(100.0)
    assert row["T3_saving_pct"] == pytest.approx(100 * (8 / 20 - 1))
    assert row["T3_untriggered_share_pct"] == pytest.approx(100 * 5 / 12)
    assert row["C2+T3_ratio"] == pytest.approx(60 / 25)
    assert row["triggered"] == 2 and row["triggered_pattern"] == "101" and row["payload_equal_to_retrain"] == 0


def test_the_pin_is_the_one_pairing_that_shows_the_seed_s_pattern_or_none(tmp_path):
    fsosa = [
        ("fit", 1, 4, 10, 40, 8, 5),
        ("add", 1, 4, 10, 10, 1, 2),
        ("add", 0, 4, 0, 0, 0, 0),
        ("remove", 1, 4, 0, 10, 1, 1),
    ]
    one = {p.pairing: p for p in ca.pins(ca.accounting_rows(_bundle(tmp_path, fsosa)))}
    assert one["C2+T3"].ratio is None  # one replicate is no test of (c)
    assert ca.pin_verdict(list(one.values()))[0] is None
    found = {p.pairing: p for p in ca.pins(ca.accounting_rows(_bundle(tmp_path, fsosa, replicates=2)))}
    assert found["C1+T3"].per_request_bytes is False  # F-SOSA's triggered payload is not Retrain's
    assert found["C2+T2"].time_share is False  # all of its time saving is untriggered
    assert found["C2+T1"].ratio is False  # 68.75 / 25 = 2.75, above 53.84 / 21.97
    pinned, text, complete = ca.pin_verdict(list(found.values()))
    assert pinned == "C2+T3" and complete and "only pairing" in text
    # makespans that give C2+T1 the seed's ratio too: two pairings pass, none is singled out
    fsosa[1], fsosa[3] = ("add", 1, 4, 10, 10, 3, 2), ("remove", 1, 4, 0, 10, 2, 1)
    pinned, text, _ = ca.pin_verdict(ca.pins(ca.accounting_rows(_bundle(tmp_path, fsosa, replicates=2))))
    assert pinned is None and "C2+T1, C2+T3" in text


def test_the_tests_of_the_plan():
    assert ca.range_test([-40.0, -50.0, -45.0], -53.84, -36.66) == (3, 3, "agrees")
    assert ca.range_test([-60.0, -61.0, -62.0], -53.84, -36.66) == (0, 3, "contradicted")
    assert ca.range_test([-50.0, -60.0, -57.0], -53.84, -36.66) == (1, 3, "undecided")  # mean outside, interval reaches
    assert ca.range_test([-45.0], -53.84, -36.66)[2].startswith("one replicate: no test")
    assert ca.paired_test([-1.0, -1.2, -1.1]) == (3, 3, "supported")
    assert ca.paired_test([-1.0, -2.0, -3.0])[2].startswith("undecided")  # t(2) = 4.30: the interval reaches 0
    assert ca.paired_test([1.0, 1.2, 1.1]) == (0, 3, "contradicted")
    assert ca.paired_test([-1.34, -7.90, -1.74, 1.23, -0.84])[2].startswith("undecided")  # the pilot's MNIST
    assert ca.equivalence_test([0.1, -0.2, 0.05], 1.0) == (3, 3, "equivalent")
    assert ca.equivalence_test([3.0, 4.0, 5.0], 1.0) == (0, 3, "differs")
    assert ca.equivalence_test([0.0, 2.0, -2.0], 1.0)[2] == "undecided"
    ratio, p = ca.variance_test([0.0, 10.0, 20.0, 30.0], [0.0, 1.0, 2.0, 3.0]) or (math.nan, math.nan)
    assert ratio == pytest.approx(100.0) and p < 0.01
    assert ca.variance_test([1.0], [1.0, 2.0]) is None


def test_the_seed_s_ratio_bounds_come_from_its_ranges():
    lo, hi = ca.RATIO_RANGE
    assert lo == pytest.approx(36.66 / 25.76) and hi == pytest.approx(53.84 / 21.97)
    assert ca.ratio_range("mnist") == pytest.approx((36.66 / 22.35, 53.84 / 22.35))
    assert ca.ratio_range("fashion_mnist") == pytest.approx((36.66 / 25.76, 53.84 / 25.76))  # SVHN's stand-in
    assert ca.ratio_range("digits") is None


def test_each_dataset_s_own_draws_are_counted(tmp_path):
    shared = _run([("fit", 1, 4, 10, 40, 8, 5), ("add", 1, 4, 10, 10, 1, 2)], RETRAIN[:2], dataset="mnist")
    same = _run([("fit", 1, 4, 10, 40, 8, 5), ("add", 1, 4, 10, 10, 1, 2)], RETRAIN[:2], dataset="cifar10")
    own = _run([("fit", 1, 4, 10, 40, 8, 5), ("add", 0, 4, 0, 0, 0, 0)], RETRAIN[:2], dataset="cifar10")
    c = {x.claim: x for x in ca.claims(ca.Bundle(tmp_path, {}, [], shared + same))}["C-DRAWS"]
    assert c.agree == "1 of 1 shared" and c.verdict.startswith("shared")
    c = {x.claim: x for x in ca.claims(ca.Bundle(tmp_path, {}, [], shared + own))}["C-DRAWS"]
    assert c.agree == "0 of 1 shared" and c.verdict.startswith("own draws")


def test_a_directory_without_provenance_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="provenance"):
        ca.load(tmp_path)


def test_the_committed_overview_is_regenerated_byte_for_byte():
    from vmc_sim.reproduction.case_study_analysis.overview import command_names, render_overview

    committed = (CASE / "overview.md").read_text()
    names = command_names(committed)
    assert any((CASE / n / "claims.csv").is_file() for n in names)  # the others are said to await their runs
    assert render_overview(CASE, names) == committed, (
        "reports/lust_case_study/overview.md is not what its sources give: regenerate it with "
        f"python tools/lust_case_study_overview.py {' '.join(names)}"
    )


def test_the_overview_takes_every_row_from_its_sources_and_lists_what_awaits(tmp_path):
    """A changed verdict in a source's claims.csv shows in the overview; a named directory without
    claims is listed as awaiting its runs; paths instead of names are refused."""
    from conftest import load_script

    from vmc_sim.reproduction.case_study_analysis.overview import NO_PAPER_ROW, render_overview

    shutil.copytree(CASE / "replicates", tmp_path / "replicates")
    (tmp_path / "PLAN.md").write_text("plan")
    claims = tmp_path / "replicates" / "claims.csv"
    claims.write_text(claims.read_text().replace("-24.42 ± 3.07 (n=5),-20.34", "-99.00 ± 3.07 (n=5),-20.34", 1))
    text = render_overview(tmp_path, ["replicates", "plan_kfac"])
    line = next(x for x in text.splitlines() if x.startswith("| C-COMM | mnist | diagonal |"))
    assert "-99.00 ± 3.07 (n=5)" in line and "[`replicates`](replicates/report.md)" in line
    assert "- Awaiting their runs (no `claims.csv` yet): `plan_kfac/`." in text
    shutil.copytree(CASE / "replicates", tmp_path / "physics_alone")  # claims, none of the paper setting
    (tmp_path / "physics_alone" / "claims.csv").write_text("\n")
    text = render_overview(tmp_path, ["replicates", "physics_alone"])
    source = next(x for x in text.splitlines() if x.startswith("- [`physics_alone/`]"))
    assert source.endswith("No claim tested, so no row above: " + NO_PAPER_ROW)
    assert "physics_alone`](" not in text.split("Sources:")[0]
    tool = load_script("tools/lust_case_study_overview.py")
    with pytest.raises(SystemExit):
        tool.main(["--root", str(tmp_path), "../replicates"])
    assert not (tmp_path / "overview.md").exists()
    assert tool.main(["--root", str(tmp_path), "replicates"]) == 0
    assert (tmp_path / "overview.md").read_text() == render_overview(tmp_path, ["replicates"])


def test_the_overview_is_never_written_into_a_run_directory(tmp_path, capsys):
    from conftest import load_script

    from vmc_sim.rundir.outputs import RUN_MARKER

    run = tmp_path / "run"  # a run directory this command does not own
    run.mkdir()
    (run / RUN_MARKER).write_text("{}")
    shutil.copytree(CASE / "replicates", run / "replicates")
    before = sorted((p.relative_to(run), p.stat().st_mtime_ns) for p in run.rglob("*"))
    tool = load_script("tools/lust_case_study_overview.py")
    with pytest.raises(SystemExit) as e:
        tool.main(["--root", str(run), "replicates"])
    assert e.value.code == 2 and "does not own" in capsys.readouterr().err
    assert sorted((p.relative_to(run), p.stat().st_mtime_ns) for p in run.rglob("*")) == before


def test_beside_names_the_other_fisher_and_one_without_data_is_said_to_await(tmp_path, capsys):
    """``--beside`` keeps the other Fisher's directories in provenance.json; one not made yet is
    named in the report as awaiting its runs instead of failing it or being left out silently."""
    from conftest import load_script

    tool = load_script("tools/lust_case_study_replicates.py")
    out = _copy(tmp_path, "replicates")
    assert tool.main(["--report-only", "--out", str(out), "--beside", str(tmp_path / "plan_other")]) == 0
    assert ca.load(out).provenance["beside"] == ["../plan_other"]
    text = (out / "report.md").read_text()
    assert (
        "Named beside it but without data yet (awaiting its runs, so left out here and below): `../plan_other`." in text
    )
    assert "| kfac |" not in text  # the K-FAC rows came from the directory beside, now not named
    _copy(tmp_path, "replicates_kfac")
    assert tool.main(["--report-only", "--out", str(out), "--beside", str(tmp_path / "replicates_kfac")]) == 0
    assert (out / "report.md").read_bytes() == (CASE / "replicates" / "report.md").read_bytes()
    with pytest.raises(SystemExit) as e:
        tool.main(["--report-only", "--out", str(out), "--beside", str(out)])
    assert e.value.code == 2 and "--beside names OUT itself" in capsys.readouterr().err


def test_a_directory_of_the_physics_setting_alone_tests_no_claim_and_says_so(tmp_path):
    """The pilot's physics runs alone: no claim of the seed is tested, no empty table stands in the
    report for a result, and the outcome per replicate is counted from replicates.csv."""
    out = _copy(tmp_path, "replicates")
    for name in ("replicates.csv", "requests.csv"):
        rows = [r for r in csv.DictReader(io.StringIO((out / name).read_text())) if r["setting"] == "physics"]
        with open(out / name, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    files = ca.render(out)
    text = files["report.md"]
    assert files["claims.csv"].strip() == ""
    for said in (NO_PAPER, NO_PAPER_PIN, NO_CLAIMS):
        assert said in text
    lines = text.splitlines()
    for i, line in enumerate(lines[:-1]):  # every table has a row below its header and rule
        if line.startswith("|---"):
            assert lines[i + 1].startswith("|"), f"an empty table under {lines[i - 1]!r}"
    replicates = list(csv.DictReader(io.StringIO((out / "replicates.csv").read_text())))
    mnist = [r for r in replicates if r["dataset"] == "mnist"]
    ends = [
        sum(1 for r in mnist if r["method"] == m and r["final_acc"] not in ("", None)) for m in ("fsosa", "retrain")
    ]
    none = [sum(1 for r in mnist if r["method"] == m and float(r["models"]) == 0) for m in ("fsosa", "retrain")]
    requests = list(csv.DictReader(io.StringIO((out / "requests.csv").read_text())))
    first = [
        sum(
            1
            for r in requests
            if (r["dataset"], r["method"], r["index"], r["kind"]) == ("mnist", m, "0", "suspend") and r["not_arrived"]
        )
        for m in ("fsosa", "retrain")
    ]
    assert first[1] > 0  # the pilot's physics runs withdrew first fits
    assert (
        f"- mnist (diagonal, arm both), 5 replicate(s): the run ends with a released model in {ends[0]} (F-SOSA) "
        f"and {ends[1]} (Retrain); it released no model at all in {none[0]} and {none[1]}; the first fit was "
        f"withdrawn with contributions that never arrived in {first[0]} and {first[1]} (`requests.csv`)." in text
    )


def test_each_fisher_s_cost_is_summed_per_run_from_the_records(tmp_path):
    """The cost table sums F-SOSA's records of each run (never Retrain's) and gives the mean over
    the runs with its interval; a column the files lack is said, not zero."""
    from vmc_sim.reproduction.case_study_analysis.fisher_cost import cost_rows

    rows = []
    for k, (mb, solve) in enumerate(((1.0, 2.0), (3.0, 4.0))):
        for r in _run([("fit", 1, 4, 10, 0, 8, 5)] * 2, RETRAIN, replicate=k):
            r["fisher_upload_bytes"] = str(mb * 1e6 / 2) if r["method"] == "fsosa" else "9e9"
            r["solve_sim_s"] = str(solve / 2) if r["method"] == "fsosa" else "999"
            rows.append(r)
    (row,) = cost_rows([ca.Bundle(tmp_path, {"fisher": "kfac"}, [], rows)])
    assert (row["setting"], row["dataset"], row["fisher"], row["arm"]) == ("paper", "mnist", "kfac", "both")
    assert row["Fisher uploads, MB"] == ca.mean_ci([1.0, 3.0]) == "2.00 ± 12.71 (n=2)"
    assert row["coordinator's solves, s"] == ca.mean_ci([2.0, 4.0])
    assert row["clients' computation, s"] == "-"
