"""One summary code path: ``vmc run``'s table and a sweep's row give the same names and counts,
the first fit counted as a request, withdrawals shown, and the final accuracy of the model that
exists (``withdrawn`` when none does)."""

from __future__ import annotations

import math

from test_cosim import scenario

from mobility.events import MobilityEvent
from mobility.trace import write_trace
from vmc_sim.cosim import run_scenario
from vmc_sim.rundir.summary import TOTALS, method_totals, summarize
from vmc_sim.sweep.tables import METRICS, markdown_table
from vmc_sim.sweep.tables import method_totals as row_totals


def emptying_trace(tmp_path):
    """Four vehicles, one arrival, then two departures: coverage ends below min_clients (4)."""
    events = [MobilityEvent(float(i), "join", f"v{i}", "rsu0", 20.0 * i, 0.0, 5.0) for i in range(4)]
    events += [
        MobilityEvent(30.0, "join", "n0", "rsu0", 50.0, 0.0, 5.0),
        MobilityEvent(50.0, "leave", "v0", "rsu0", 290.0, 0.0, 9.0),
        MobilityEvent(70.0, "leave", "v1", "rsu0", 290.0, 0.0, 9.0),
    ]
    meta = {
        "source": "test",
        "clock": {"begin": 0.0, "step_length": 1.0},
        "rsus": [{"id": "rsu0", "x": 0.0, "y": 0.0, "radius": 300.0}],
        "coverage": {},
    }
    return write_trace(tmp_path / "trace.jsonl", events, meta, end_time=100.0)


def test_run_table_and_sweep_row_agree_and_say_withdrawn(tmp_path):
    run = run_scenario(scenario(emptying_trace(tmp_path)), out=tmp_path / "runs", progress=False, say=lambda s: None)
    records = list(run.records())
    totals = method_totals(records)
    assert METRICS == TOTALS
    rows = {r["method"]: r for r in row_totals(run)}
    for m, t in totals.items():
        assert {k: rows[m][k] for k in TOTALS if not isinstance(t[k], float) or not math.isnan(t[k])} == {
            k: t[k] for k in TOTALS if not isinstance(t[k], float) or not math.isnan(t[k])
        }
        mine = [r for r in records if r["method"] == m]
        assert t["requests"] == 4 == len(mine)  # the first fit and three edits
        assert t["withdrawn"] == 1 and math.isnan(t["final_accuracy"])  # the last departure withdrew it
    text = summarize(run)
    table = next(line for line in text.splitlines() if line.startswith("fsosa"))
    assert table.split()[1] == "4" and table.split()[-1] == "withdrawn" and table.split()[-2] == "1"
    sweep = markdown_table(
        [{"point": "p0", "method": m, "status": "complete", **r} for m, r in rows.items()], grid_columns={}
    )
    assert "| withdrawn |" in sweep and sweep.splitlines()[0].count("withdrawn") == 1
