"""tools/paper_sequence.py: the paper's 31-request sequence as a trace, the Table VIII
transcription, and an end-to-end smoke run (digits + MLP, seconds) writing the CSV and report."""

from __future__ import annotations

import csv
import itertools
from pathlib import Path

import pytest
from conftest import load_script

from mobility.trace import read_trace
from vmc_sim.reproduction import paper_sequence as paper

ROOT = Path(__file__).resolve().parents[1]


ps = load_script("tools/paper_sequence.py")


def test_sequence_parses_to_16_arrivals_and_15_departures():
    seq = paper.parse_sequence()
    assert len(seq) == 31
    assert sum(k == "join" for k, _ in seq) == 16 and sum(k == "leave" for k, _ in seq) == 15
    assert seq[:6] == [("join", "12"), ("join", "13"), ("join", "14"), ("join", "15"), ("join", "16"), ("leave", "3")]
    assert seq[-1] == ("leave", "19")
    # every arrival is a new vehicle 12..27, every departure someone present
    assert sorted(int(v) for k, v in seq if k == "join") == list(range(12, 28))
    with pytest.raises(ValueError, match="not present"):
        paper.parse_sequence("12+ 30-")
    with pytest.raises(ValueError, match="already present"):
        paper.parse_sequence("3+")


def test_trace_has_12_initial_joins_then_the_31_requests(tmp_path):
    path = ps.write_paper_trace(tmp_path / "trace.jsonl", spacing=60.0)
    trace = read_trace(path)
    ev = trace.events
    assert len(ev) == 12 + 31
    assert [(e.kind, e.vehicle, e.time) for e in ev[:12]] == [("join", str(i), float(i)) for i in range(12)]
    assert [(e.kind, e.vehicle) for e in ev[12:]] == paper.parse_sequence()
    times = [e.time for e in ev[12:]]
    assert times[0] == paper.fit_time() + 60.0 and all(b - a == 60.0 for a, b in itertools.pairwise(times))
    assert sum(e.kind == "join" for e in ev) == 28 and sum(e.kind == "leave" for e in ev) == 15
    assert {e.vehicle for e in ev} == {str(i) for i in range(28)}
    rsu = trace.meta["rsus"][0]
    assert all(e.rsu == rsu["id"] and (e.x**2 + e.y**2) ** 0.5 < rsu["radius"] / 2 for e in ev)
    assert trace.complete and trace.end["time"] > times[-1]


def test_table_viii_transcription_adds_up_to_the_papers_totals():
    rows = paper.paper_mnist()
    assert len(rows) == 32
    totals = paper.PAPER_TOTALS["MNIST"]
    for j, kind in enumerate(("broadcast", "model_upload", "fisher_upload", "total")):
        for side in (0, 1):  # F-SOSA-I/U, Retrain; entries are rounded to 0.01 MB
            assert sum(r[kind][side] for r in rows) == pytest.approx(totals[j][side], abs=0.1)
    for r in rows:
        assert r["broadcast"][0] + r["model_upload"][0] + r["fisher_upload"][0] == pytest.approx(
            r["total"][0], abs=0.011
        )
        assert r["total"][0] in (0.0, r["total"][1])  # the paper's F-SOSA re-collects the subset when triggered
    pattern = "".join("T" if r["triggered"] else "." for r in rows)
    assert pattern == paper.PAPER_TRIGGERS["MNIST"]
    # the Retrain uploads imply P_t = floor(M(t) / 2) along the sequence
    m, sizes = 12, [6]
    for kind, _ in paper.parse_sequence():
        m += 1 if kind == "join" else -1
        sizes.append(m // 2)
    assert [r["subset_size"] for r in rows] == sizes
    # every request that changes P_t must trigger, in all five of the paper's tables
    forced, expected = paper.expected_triggers()
    assert sum(forced) == 16 and 16 < expected < 31
    for pat in paper.PAPER_TRIGGERS.values():
        assert all(pat[i] == "T" for i, f in enumerate(forced, 1) if f)


def test_quick_run_end_to_end_writes_csv_and_report(tmp_path):
    out = tmp_path / "out"
    assert ps.main(["--quick", "--dataset", "digits", "--model", "mlp", "--out", str(out)]) == 0
    with open(out / "requests.csv") as f:
        rows = list(csv.DictReader(f))
    by = {}
    for r in rows:
        by.setdefault(r["method"], []).append(r)
    assert set(by) == {"fsosa", "retrain", "fsosa_paper"}
    for m, rs in by.items():
        assert len(rs) == 32, m
        assert [r["request"] for r in rs] == ["initial fit"] + paper.SEQUENCE.split()
        assert [int(r["subset_size"]) for r in rs] == [int(r["paper_mnist_subset_size"]) for r in rs]
    total = {m: sum(int(r["total_bytes"]) for r in rs) for m, rs in by.items()}
    assert total["fsosa"] < total["fsosa_paper"] <= total["retrain"]
    assert all(r["triggered"] == "1" for r in by["retrain"])
    for a, b in zip(by["fsosa"], by["fsosa_paper"], strict=True):
        assert a["triggered"] == b["triggered"]
        assert (int(b["total_bytes"]) == int(b["control_bytes"])) == (b["triggered"] == "0")
    assert all(r["failed_transfers"] == "0" for m in ("fsosa", "retrain") for r in by[m])
    report = (out / "report.md").read_text()
    assert "Size: **quick" in report and "329.61" in report and "424.48" in report
