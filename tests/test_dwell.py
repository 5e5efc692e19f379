"""Dwell times in coverage: visits from join/leave events, their summary, and the job warning."""

from __future__ import annotations

from pathlib import Path

import pytest

from mobility.dwell import (
    cell_visits,
    coverage_visits,
    dwell_summary,
    dwell_warning,
    events_dwell,
    percentiles,
    share_longer_than_dwell,
    trace_dwell,
    trace_path,
)
from mobility.events import MobilityEvent
from mobility.trace import write_trace

ROOT = Path(__file__).resolve().parents[1]
LUST_TRACE = ROOT / "reports" / "lust_case_study" / "trace.jsonl"


def ev(t: float, kind: str, v: str, rsu: str = "r0") -> MobilityEvent:
    return MobilityEvent(t, kind, v, rsu, 0.0, 0.0, 1.0)  # type: ignore[arg-type]


# v1 comes twice (10 s, then 4 s), v2 stays 18 s and comes back until the end (censored)
EVENTS = [
    ev(0, "join", "v1"),
    ev(5, "join", "v2"),
    ev(10, "leave", "v1"),
    ev(20, "join", "v1"),
    ev(23, "leave", "v2"),
    ev(24, "leave", "v1"),
    ev(30, "join", "v2"),
]


def test_every_visit_is_one_dwell_and_an_open_one_is_censored():
    visits = coverage_visits(EVENTS)
    assert [(v.vehicle, v.join, v.leave) for v in visits] == [
        ("v1", 0.0, 10.0),
        ("v2", 5.0, 23.0),
        ("v1", 20.0, 24.0),
        ("v2", 30.0, None),
    ]
    s = events_dwell(EVENTS)["coverage"]
    assert s == {
        "count": 3,
        "median": 10.0,
        "p10": pytest.approx(5.2),
        "p90": pytest.approx(16.4),
        "mean": pytest.approx(32 / 3),
        "censored": 1,
        "vehicles": 2,
    }


def test_a_hand_over_between_cells_stays_in_the_union():
    per_rsu = [ev(0, "join", "v", "a"), ev(10, "leave", "v", "a"), ev(10, "join", "v", "b"), ev(25, "leave", "v", "b")]
    [union] = coverage_visits(per_rsu)
    assert (union.join, union.leave, union.rsu) == (0.0, 25.0, "a")
    d = events_dwell(per_rsu)
    assert d["coverage"]["median"] == 25.0
    assert {k: s["median"] for k, s in d["cells"].items()} == {"a": 10.0, "b": 15.0}
    overlapping = [
        ev(0, "join", "v", "a"),
        ev(5, "join", "v", "b"),
        ev(8, "leave", "v", "a"),
        ev(20, "leave", "v", "b"),
    ]
    assert [(v.join, v.leave) for v in coverage_visits(overlapping)] == [(0.0, 20.0)]
    silent = [ev(0, "join", "v", "a"), ev(30, "leave", "v", "b")]  # union membership: hand-over not recorded
    assert events_dwell(silent)["cells"] is None
    with pytest.raises(ValueError, match="per-RSU membership is not recorded"):
        cell_visits(silent)
    with pytest.raises(ValueError, match="without a join"):
        coverage_visits([ev(1, "leave", "v")])


def test_percentiles_and_summary_of_nothing_are_none():
    assert percentiles([]) == [None, None, None]
    assert dwell_summary([]) == {"count": 0, "median": None, "p10": None, "p90": None, "mean": None}
    assert percentiles([3.0], (0, 50, 100)) == [3.0, 3.0, 3.0]
    assert percentiles([4, 1, 3, 2], (0, 50, 100)) == [1.0, 2.5, 4.0]
    with pytest.raises(ValueError, match="percentile"):
        percentiles([1.0], (101,))


def test_the_warning_comes_only_when_most_jobs_outlast_the_median_dwell():
    jobs = [1.0] * 13 + [42.6] * 87
    assert share_longer_than_dwell(jobs, {"median": 8.5}) == pytest.approx(0.87)
    assert dwell_warning(jobs, {"median": 8.5}) == (
        "warning: 87 % of jobs (median 42.6 s) take longer than the median dwell in coverage (8.5 s): most "
        "contributions cannot finish before their vehicle leaves; shorten jobs (compute.profile, "
        "federated.train.epochs) or enlarge coverage (mobility.rsus.radius, a region of several RSUs)"
    )
    assert dwell_warning(jobs, 8.5) == dwell_warning(jobs, {"median": 8.5})
    assert dwell_warning([1.0, 20.0], 8.5) is None  # half, not most
    assert dwell_warning([1.0, 2.0, 3.0], 8.5) is None
    assert dwell_warning([], 8.5) is None and share_longer_than_dwell([], 8.5) is None
    assert dwell_warning([50.0], {"median": None}) is None


def test_the_lust_case_study_trace_dwells_about_eight_seconds():
    d = trace_dwell(LUST_TRACE)
    s = d["coverage"]
    assert s["median"] == pytest.approx(8.0) and 8.0 <= s["median"] <= 9.0
    assert (s["count"], s["censored"], s["vehicles"]) == (3049, 16, 3033)
    assert (s["p10"], s["p90"]) == (pytest.approx(3.0), pytest.approx(17.0))
    assert s["mean"] == pytest.approx(18.76, abs=0.01)
    assert d["membership"] == "union" and [r["id"] for r in d["rsus"]] == ["rsu0"]
    assert d["cells"] == {"rsu0": s}  # one RSU: its cell is the coverage


def test_vmc_dwell_reads_a_trace_a_run_directory_or_a_scenario(tmp_path, capsys):
    from vmc_sim.cli import main

    run = tmp_path / "run"
    write_trace(run / "trace.jsonl", EVENTS, {"coverage": {"membership": "per_rsu"}, "rsus": [{"id": "r0"}]})
    scenario = tmp_path / "s.yaml"
    scenario.write_text("mobility:\n  source: trace\n  trace: run/trace.jsonl\n")
    assert trace_path(run) == trace_path(scenario) == run / "trace.jsonl"
    assert main(["dwell", str(run)]) == 0
    out = capsys.readouterr().out
    assert "3 visits of 2 vehicles: median 10.0 s, p10 5.2 s, p90 16.4 s, mean 10.7 s; 1 censored" in out
    assert main(["lust", "dwell", "--scenario", str(scenario)]) == 0
    assert capsys.readouterr().out == out
    lust = tmp_path / "lust.yaml"
    lust.write_text("mobility:\n  source: lust\n")
    assert main(["dwell", str(lust)]) == 1
    assert "has no trace (mobility.source is 'lust')" in capsys.readouterr().err


def test_the_dwell_of_a_region_from_sampled_positions():
    """``vmc lust report --region``: union of cells, one sample a second; visits open at the first
    or the last sample are censored."""
    from types import SimpleNamespace

    import numpy as np

    from mobility.dwell import positions_dwell

    cells = [SimpleNamespace(x=0.0, y=0.0, radius=10.0), SimpleNamespace(x=15.0, y=0.0, radius=10.0)]
    track = {  # vehicle -> x at t = 0..9 (y = 0); the cells cover x in [-10, 25]
        "a": [-20, -12, -5, 5, 15, 24, 30, 40, 50, 60],  # in at t 2-5 (crosses both cells): 4 s
        "b": [0, 1, 2, 30, 40, 50, 60, 70, 80, 90],  # in from the first sample: censored
        "c": [90, 80, 70, 60, 50, 40, 30, 20, 10, 0],  # joins at t 7, still in at the end: censored
        "d": [-30, -30, -5, -30, -30, 0, 0, -30, -30, -30],  # two visits: 1 s and 2 s
    }
    positions = {
        float(t): (list(track), np.array([[track[v][t], 0.0] for v in track], dtype=np.float32)) for t in range(10)
    }
    found = positions_dwell(positions, cells)
    assert found["count"] == 3 and found["censored"] == 2 and found["vehicles"] == 3
    assert found["median"] == 2.0 and found["mean"] == (4 + 1 + 2) / 3
    assert found["window"] == [0.0, 9.0]
