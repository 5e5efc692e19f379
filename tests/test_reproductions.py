"""Every reproduction script under ``tools/`` runs at its ``--quick`` size (the CI smoke test) and
its report says at that size what it claims at full size.

A script takes part when its source declares a ``--quick`` option; each run writes into a
temporary ``--out`` directory. A script may name extra smoke arguments in a module-level line
``SMOKE_ARGS = "..."`` (for example a smaller dataset), so that CI stays fast while ``--quick``
keeps its documented size. ``CLAIMS`` holds, per script, the properties its report claims, read
back from the CSV it wrote; a script without an entry fails. Every figure compared below is a
deterministic function of the seeds (bytes are serialized sizes, subsets are seeded draws), so
the tolerances only cover what is stated beside each one.
"""

from __future__ import annotations

import ast
import csv
import math
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import load_script

TOOLS = Path(__file__).resolve().parents[1] / "tools"
SCRIPTS = sorted(p for p in TOOLS.glob("*.py") if '"--quick"' in p.read_text() and "__main__" in p.read_text())
SLOW_SCRIPTS = {"table5_resnet18"}  # ResNet-18 even at 60 images: collected first (conftest.py)


def rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def by(table: list[dict[str, str]], **match: str) -> list[dict[str, str]]:
    return [r for r in table if all(r[k] == v for k, v in match.items())]


def one(table: list[dict[str, str]], **match: str) -> dict[str, str]:
    hits = by(table, **match)
    assert len(hits) == 1, (match, hits)
    return hits[0]


def fig1_fig4_rho(out: Path) -> None:
    # Fig. 1: the subset (and so the bytes of the fit) grows with rho: P = floor(rho M), M = 20
    fit = rows(out / "fig1_rho.csv")
    assert [int(r["members"]) for r in fit] == [math.floor(float(r["rho"]) * 20) for r in fit]
    mb = [float(r["MB"]) for r in fit]
    assert mb == sorted(mb) and len(set(mb)) == len(mb)
    # Fig. 4: a larger subset is triggered more often by the same requests (rho = 1: every one)
    edit = rows(out / "fig4_rho_editing.csv")
    last = edit[-1]
    assert float(last["rho"]) == 1.0 and float(last["triggered"]) == float(last["requests"])
    assert float(edit[0]["triggered"]) < float(last["triggered"])


def fig2_epochs(out: Path) -> None:
    # Fig. 2: more local epochs fit the local data better (one optimizer climbs the K ladder, so
    # the local training loss falls with K); the bytes do not depend on K
    table = rows(out / "fig2_epochs.csv")
    losses = [float(r["train_loss_local"]) for r in table]
    assert losses == sorted(losses, reverse=True) and len(set(losses)) == len(losses)
    assert len({r["MB"] for r in table}) == 1


def fig3_sequences(out: Path) -> None:
    # Fig. 3: F-SOSA-I/U move fewer bytes than Retrain on the same requests, Retrain retrains on
    # every request, F-SOSA on a subset of them
    summary = rows(out / "fig3_summary.csv")
    for task in ("IL", "UL"):
        fsosa, retrain = one(summary, task=task, method="fsosa"), one(summary, task=task, method="retrain")
        assert float(fsosa["MB_req"]) < float(retrain["MB_req"])
        assert retrain["triggered"] == retrain["requests"] and int(fsosa["triggered"]) < int(fsosa["requests"])


def lust_case_study(out: Path) -> None:
    # VI-C: F-SOSA's bytes below Retrain's; our accounting (only the changed members) below the
    # paper's (the whole subset again on every triggered request)
    # (equal to Retrain's when, as at this size with P = 2, F-SOSA triggers on every request)
    summary = rows(out / "summary.csv")
    retrain, fsosa = one(summary, method="retrain"), one(summary, method="fsosa")
    paper = one(summary, method="fsosa, paper accounting")
    assert float(fsosa["total_MB"]) < float(paper["total_MB"]) <= float(retrain["total_MB"])
    # every solve of the quick run reaches its tolerance, and the table has the column that would say otherwise
    assert fsosa["unconverged_solves"] == retrain["unconverged_solves"] == "0" and paper["unconverged_solves"] == ""
    # Retrain re-fits on every request that reaches a model (not while it is withdrawn)
    edits = [
        r for r in rows(out / "requests.csv") if r["method"] == "retrain" and r["kind"] not in ("fit", "suspended")
    ]
    assert edits and all(r["triggered"] == "1" for r in edits)
    # the paper's fluctuation: each method's own max - min accuracy over the models released after the requests
    for m in (fsosa, retrain):
        acc = [
            100 * float(r["accuracy"])
            for r in rows(out / "requests.csv")
            if r["method"] == m["method"] and r["index"] != "0" and r["accuracy"]
        ]
        assert float(m["fluctuation_pts"]) == pytest.approx(max(acc) - min(acc), abs=0.02)
    # a fresh contribution cache: the report says every contribution was trained, none loaded
    cache = re.search(
        r"digits: contribution cache: 0 of (\d+) contributions loaded \(hit rate 0 %\), 0 computed at "
        r"cached trained weights \(Fisher only\), (\d+) trained",
        (out / "report.md").read_text(),
    )
    assert cache and int(cache.group(1)) == int(cache.group(2)) > 0
    # the quick size stops at 10 requests (coordinator.max_requests): the report says what it held back
    assert re.search(
        r"After the last request, \d+ coverage events were not sent \(coordinator.max_requests\)",
        (out / "report.md").read_text(),
    )


def paper_sequence(out: Path) -> None:
    # Tables VIII-XII: cumulative bytes F-SOSA < F-SOSA with the paper's accounting < Retrain
    total = {}
    for r in rows(out / "requests.csv"):
        total[r["method"]] = int(r["cum_total_bytes"])
    assert total["fsosa"] < total["fsosa_paper"] < total["retrain"]


def seed002_fedreuse(out: Path) -> None:
    summary = rows(out / "seed002_summary.csv")
    for r in summary:
        # the modelled saving counts values and indices only; the real one adds each message's
        # safetensors header (about 100 bytes on messages of tens of kB): 0.5 points is ~10x that
        assert abs(float(r["modelled_uplink_saving"]) - float(r["real_uplink_saving"])) < 0.5, r
    fedavg, topk, reuse = (one(summary, method=m) for m in ("fedavg", "topk", "dgfedreuse"))
    assert float(fedavg["real_uplink_saving"]) == 0.0
    # Top-K at r = 0.2 sends a fifth of the values plus their indices; reuse saves more on top
    assert 60.0 < float(topk["real_uplink_saving"]) < float(reuse["real_uplink_saving"])


def seed003_pdf(out: Path) -> None:
    table = rows(out / "seed003_pdf.csv")
    retrain = one(table, method="retrain")
    assert float(retrain["comm_saving_pct"]) == 0.0
    for r in table:
        if r["method"].startswith("pdf"):
            # PDF unlearns with fewer clients and rounds than retraining from scratch
            assert float(r["comm_saving_pct"]) > 0 and int(r["unlearn_rounds"]) <= int(retrain["unlearn_rounds"])
            # and leaves the attack at chance like Retrain: 50 +- 2 null standard errors, with
            # n = 1,000+ scored samples a null s.e. is below 2 points, so +-5 points is generous
            assert abs(float(r["MIA_AUC"]) - 50.0) < 5.0


def table2(out: Path) -> None:
    # Table II: F-SOSA fuses a rho = 0.5 subset, so it moves about half of FedFisher's bytes
    table = rows(out / "table2.csv")
    fsosa, fedfisher = one(table, method="fsosa"), one(table, method="fedfisher")
    assert int(fsosa["members"]) == int(fsosa["clients"]) // 2 and fedfisher["members"] == fedfisher["clients"]
    assert float(fsosa["MB"]) < 0.6 * float(fedfisher["MB"])
    assert all(r["converged"] == "True" for r in table)


def table4_mia(out: Path) -> None:
    # Table IV: after F-SOSA-U removes a client, the loss attack is at chance on it: its mean AUC
    # lies within the report's own 2-standard-error band of the null (auc_null_2se) around 50
    fsosa = one(rows(out / "table4_mia.csv"), model="fsosa", attack="loss")
    assert abs(float(fsosa["auc"]) - 50.0) < float(fsosa["auc_null_2se"])


def table5_resnet18(out: Path) -> None:
    # Table V: the same accounting as Table II on ResNet-18 (accuracy at 60 images is chance); the
    # header says how many samples the validation set really holds (10 % of 60, not the 500 asked)
    table = rows(out / "table5_resnet18.csv")
    fsosa, fedfisher = one(table, method="fsosa"), one(table, method="fedfisher")
    assert float(fsosa["MB"]) < 0.6 * float(fedfisher["MB"])
    assert {r["validation_held"] for r in table} == {"6"}
    assert "6 training samples held out (asked for 500" in (out / "table5_resnet18.md").read_text()


def table6_scalability(out: Path) -> None:
    # Table VI: at every population F-SOSA-I/U move fewer bytes per request than Retrain
    table = rows(out / "table6.csv")
    populations = {r["population"] for r in table}
    assert len(populations) >= 2
    for r in by(table, method="fsosa"):
        assert 0 < float(r["comm_x"]) < 1, r


def lust_case_study_replicates(out: Path) -> None:
    # every headline figure a mean over the replicates with its interval, in both settings
    summary = rows(out / "summary.csv")
    for setting in ("paper", "physics"):
        fsosa = one(summary, setting=setting, method="fsosa")
        assert fsosa["replicates"] == fsosa["comm_saving_pct_n"] == "3" and fsosa["comm_saving_pct_ci95"] != ""
    # the paper's setting loses nothing: every contribution arrives
    assert float(one(summary, setting="paper", method="fsosa")["not_arrived_mean"]) == 0.0
    assert float(one(summary, setting="paper", method="retrain")["not_arrived_mean"]) == 0.0
    # every accounting of reports/lust_case_study/PLAN.md on every run of both settings; the seed's
    # computation time (T3) only where clients train side by side on board
    accounting = rows(out / "accounting.csv")
    assert {(r["setting"], r["replicate"]) for r in accounting} == {
        (s, str(r)) for s in ("paper", "physics") for r in range(3)
    }
    assert all(r["T3_saving_pct"] != "" for r in accounting if r["setting"] == "paper")
    assert all(r["T3_saving_pct"] == "" for r in accounting if r["setting"] == "physics")
    # digits is none of the seed's datasets: of the plan's claims only the design's remain, and one
    # arm cannot say which seed drives the spread
    claims = rows(out / "claims.csv")
    assert {c["claim"] for c in claims} == {"C-SPREAD"}
    assert all(c["verdict"].startswith("not tested: the arms traffic and members are not among") for c in claims)


CLAIMS = {
    f.__name__: f
    for f in (
        fig1_fig4_rho,
        fig2_epochs,
        fig3_sequences,
        lust_case_study,
        lust_case_study_replicates,
        paper_sequence,
        seed002_fedreuse,
        seed003_pdf,
        table2,
        table4_mia,
        table5_resnet18,
        table6_scalability,
    )
}


def test_there_are_reproductions():
    assert {"table2.py", "paper_sequence.py"} <= {p.name for p in SCRIPTS}


def smoke_argv(script: Path, out: Path) -> list[str]:
    """``--quick``, the script's SMOKE_ARGS, and every output directory under ``out``'s parent
    (a script that writes run directories, ``--runs``, would otherwise leave them in the checkout,
    and its caches, ``--trace-cache`` and ``--contribution-cache``, in the user's home)."""
    source = script.read_text()
    smoke = smoke_args(source)
    dirs = [
        arg
        for name in ("runs", "trace-cache", "contribution-cache")
        if f'"--{name}"' in source
        for arg in (f"--{name}", str(out.parent / name))
    ]  # never the user's ~/.cache
    return ["--quick", "--out", str(out), *dirs, *shlex.split(smoke)]


def smoke_args(source: str) -> str:
    """The script's ``SMOKE_ARGS`` string (read from its syntax tree, however it is wrapped)."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["SMOKE_ARGS"]:
            value = ast.literal_eval(node.value)
            assert isinstance(value, str), f"SMOKE_ARGS must be a string, got {value!r}"
            return value
    return ""


def test_every_scripts_smoke_args_reach_its_smoke_run():
    """The arguments a script declares for its smoke run are the ones the smoke run gets."""
    for script in SCRIPTS:
        declared = getattr(load_script(f"tools/{script.name}"), "SMOKE_ARGS", "")
        assert smoke_args(script.read_text()) == declared, script.name


@pytest.mark.parametrize(
    "script", [pytest.param(p, id=p.stem, marks=[pytest.mark.slow] if p.stem in SLOW_SCRIPTS else []) for p in SCRIPTS]
)
def test_quick_size_runs_and_shows_its_claims(script: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # In this process (each script's main(argv), with sys.argv as the command line would set it):
    # a subprocess per script paid ~3 s of CPU importing torch again, 11 times a suite.
    # torch's thread count is a process setting some scripts change; it is put back afterwards.
    import torch

    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.chdir(TOOLS.parent)
    out = tmp_path / "out"
    argv = smoke_argv(script, out)
    monkeypatch.setattr(sys, "argv", [str(script), *argv])
    threads = torch.get_num_threads()
    try:
        code = load_script(f"tools/{script.name}").main(argv)
    finally:
        torch.set_num_threads(threads)
    assert code == 0, f"{script.name} exited {code}"
    assert any(out.glob("*.md")), "no markdown report"
    for md in out.glob("*.md"):  # every report says when and from which commit it was made
        assert re.search(r"^Made: \d{4}-\d{2}-\d{2}, commit ", md.read_text(), re.M), md.name
    CLAIMS[script.stem](out)


def test_a_script_runs_from_the_command_line(tmp_path: Path):
    """The scripts are run as ``python tools/NAME.py``: one of them, end to end in its own process."""
    script = TOOLS / "fig2_epochs.py"
    env = dict(os.environ, OMP_NUM_THREADS="1", MPLBACKEND="Agg")
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(script), *smoke_argv(script, out)],
        cwd=TOOLS.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    fig2_epochs(out)
    assert "python tools/fig2_epochs.py --quick" in (out / "fig2.md").read_text()


def test_a_failing_method_fails_its_script(tmp_path, monkeypatch):
    fig3_sequences = load_script("tools/fig3_sequences.py")
    from vmc_sim.reproduction import sequences

    real = sequences.run_sequence

    def broken(task, method, *args, **kwargs):
        if method == "retrain":
            raise RuntimeError("injected")
        return real(task, method, *args, **kwargs)

    monkeypatch.setattr(sequences, "run_sequence", broken)
    assert (
        fig3_sequences.main(
            ["--quick", "--out", str(tmp_path), "--il-methods", "fsosa", "retrain", "--ul-methods", "fsosa"]
        )
        == 1
    )
