"""The report's sections on what the runs did physically: per run traffic, dwell and job times, the
physics setting's outcome per replicate, and its request queue; generated from the data files."""

from __future__ import annotations

import math
from typing import Any

from .. import report
from .claims import method_table
from .data import Bundle, num, order


def runs_section(bundle: Bundle) -> list[str]:
    if not bundle.runs:
        return [
            "Dwell in coverage, job times, teleports and coverage events held back: not in this directory's files; "
            "they await the runs of the plan (`runs.csv`).",
            "",
        ]
    cols = [c for c in bundle.runs[0] if c not in ("run",)]
    every = (
        " Every visit's dwell and every job's time behind these quantiles: `distributions.csv.gz`."
        if (bundle.path / "distributions.csv.gz").is_file()
        else ""
    )
    rows = [{c: _cell(c, v) for c, v in r.items()} for r in bundle.runs]
    return [f"Per run (`runs.csv`, from each run's manifest):{every}", "", report.md_table(rows, cols), ""]


def _cell(column: str, value: Any) -> str:
    """A ``runs.csv`` cell as the report shows it: shares in per cent, other decimals to two places,
    counts, seeds and names as written."""
    x = num(value)
    if x is None or not any(ch in str(value) for ch in ".eE"):
        return "-" if value in (None, "") else str(value)
    if column.endswith("_longer_than_median_dwell"):
        return f"{100 * x:.1f} %"
    return f"{x:.2f}"


def physics_section(bundle: Bundle) -> list[str]:
    rows = []
    for key, m in sorted(method_table(bundle).items(), key=lambda kv: order(kv[0])):
        if key[0] != "physics":
            continue
        f, r = m.get("fsosa", {}), m.get("retrain", {})
        rows.append(
            {
                "dataset": key[1],
                "fisher": key[2],
                "arm": key[3],
                "replicate": key[4],
                "F-SOSA / Retrain models released": f"{f.get('models', '-')} / {r.get('models', '-')}",
                "withdrawn": f"{f.get('withdrawn', '-')} / {r.get('withdrawn', '-')}",
                "contributions never arrived": f"{f.get('not_arrived', '-')} / {r.get('not_arrived', '-')}",
                "take-outs": f"{f.get('take_outs', '-')} / {r.get('take_outs', '-')}",
                "final accuracy": f"{_f2(f.get('final_acc'))} / {_f2(r.get('final_acc'))}",
                "T1 saving": _f2(f.get("time_saving_pct")),
                "C1 saving": _f2(f.get("comm_saving_pct")),
            }
        )
    if not rows:
        return ["No physics runs in this directory."]
    return [
        "One edge GPU shared by the clients' jobs, transfers that end when the vehicle leaves the region. The seed's "
        "claims are not tested here (its case study loses no contribution); per replicate, F-SOSA / Retrain "
        "(`replicates.csv`; final accuracy `-` where the model was withdrawn at the end):",
        "",
        report.md_table(rows, list(rows[0])),
        "",
        *_outcomes(bundle),
        *_queue(bundle),
    ]


def _outcomes(bundle: Bundle) -> list[str]:
    """The physics table counted per dataset, Fisher and arm: runs that end with a model, runs that
    released none, and runs whose median job outlasted the median vehicle's stay in coverage."""
    groups: dict[tuple[Any, ...], dict[str, list[dict[str, Any]]]] = {}
    for key, m in method_table(bundle).items():
        if key[0] == "physics":
            g = groups.setdefault(key[1:4], {})
            for method in ("fsosa", "retrain"):
                g.setdefault(method, []).append(m.get(method, {}))
    lines = []
    for (dataset, fisher, arm), g in sorted(groups.items(), key=lambda kv: order(("physics", *kv[0]))):
        n = len(g["fsosa"])
        end = [sum(1 for x in g[m] if num(x.get("final_acc")) is not None) for m in ("fsosa", "retrain")]
        none = [sum(1 for x in g[m] if num(x.get("models")) == 0) for m in ("fsosa", "retrain")]
        runs = [r for r in bundle.runs if bundle.key(r)[:4] == ("physics", dataset, fisher, arm)]
        long = [
            sum(1 for r in runs if (num(r.get(f"{m}_job_median_s")) or 0) > (num(r.get("dwell_median_s")) or math.inf))
            for m in ("fsosa", "retrain")
        ]
        first = [
            sum(
                1
                for r in bundle.requests
                if bundle.key(r)[:4] == ("physics", dataset, fisher, arm)
                and r["method"] == m
                and r.get("index") == "0"
                and r.get("kind") == "suspend"
                and (r.get("not_arrived") or "").strip()
            )
            for m in ("fsosa", "retrain")
        ]
        lines.append(
            f"- {dataset} ({fisher}, arm {arm}), {n} replicate(s): the run ends with a released model in "
            f"{end[0]} (F-SOSA) and {end[1]} (Retrain); it released no model at all in {none[0]} and {none[1]}; "
            f"the first fit was withdrawn with contributions that never arrived in {first[0]} and {first[1]} "
            "(`requests.csv`)"
            + (
                f"; the median job outlasted the median stay in coverage in {long[0]} and {long[1]} of "
                f"{len(runs)} run(s) (`runs.csv`)."
                if runs
                else "."
            )
        )
    return [*lines, ""] if lines else []


def _queue(bundle: Bundle) -> list[str]:
    """How far the world's clock ran behind the requests of the physics runs: a request is answered
    in turn, so one that comes while the last is being answered waits (``latency_s`` minus
    ``makespan_s``), and what it sees of the population is the world's state when its turn comes."""
    rows: dict[tuple[Any, ...], list[tuple[float, float]]] = {}
    for r in bundle.requests:
        if r["setting"] != "physics" or num(r.get("latency_s")) is None or num(r.get("makespan_s")) is None:
            continue
        key = (r["dataset"], r.get("fisher") or "", r.get("arm") or "", int(r["replicate"]), r["method"])
        rows.setdefault(key, []).append((float(r["latency_s"]), float(r["latency_s"]) - float(r["makespan_s"])))
    if not rows:
        return [
            "The request queue (the world's clock against each request's time): not in this directory's files; it "
            "awaits the runs of the plan (`requests.csv` with `latency_s`).",
        ]
    table = []
    for (dataset, fisher, arm, rep, method), vals in sorted(rows.items()):
        waits = sorted(w for _, w in vals)
        table.append(
            {
                "dataset": dataset,
                "fisher": fisher,
                "arm": arm,
                "replicate": rep,
                "method": method,
                "requests": len(vals),
                "waited (> 1 s)": sum(1 for w in waits if w > 1.0),
                "wait median (s)": f"{waits[len(waits) // 2]:.1f}",
                "wait max (s)": f"{waits[-1]:.1f}",
                "latency max (s)": f"{max(lat for lat, _ in vals):.1f}",
            }
        )
    return [
        "The request queue: each request is answered in turn, so one that comes while an earlier one is being "
        "answered waits (the world's clock behind the request's time: `latency_s` - `makespan_s` in "
        "`requests.csv`), and the population it records is counted when its turn comes (docs/cosimulation.md):",
        "",
        report.md_table(table, list(table[0])),
    ]


def _f2(v: Any) -> str:
    x = num(v)
    return "-" if x is None else f"{x:.2f}"
