"""A replicated sweep's aggregate: per point and method, each figure's mean, sample standard
deviation, confidence half-width and count over the replicates that completed (``summary.csv``
and the Markdown table the sweep prints)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from .stats import interval
from .tables import METRICS, format_cell, table_head, write_rows

FIGURES = (*METRICS, "wall_s")
"""The per-run numeric figures of ``results.csv`` that are aggregated."""

STATS = ("mean", "std", "ci95", "n")
"""The columns of each figure in ``summary.csv``: ``<figure>_<stat>``."""


def summarize_replicates(rows: list[dict[str, Any]], grid_columns: dict[str, str]) -> list[dict[str, Any]]:
    """One row per (point, method), in the order of ``rows`` (one per replicate run and method):
    the grid values, ``runs`` (replicates at the point), ``complete`` (those that completed) and,
    for each figure, its :func:`~vmc_sim.sweep.stats.interval` over the completed replicates
    (a run that failed is left out: its records stop early)."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["point"], r["method"]), []).append(r)
    out = []
    for (point, method), group in groups.items():
        done = [r for r in group if r["status"] == "complete"]
        row: dict[str, Any] = {"point": point}
        row.update({c: group[0][c] for c in grid_columns.values()})
        row.update(method=method, runs=len(group), complete=len(done))
        for figure in FIGURES:
            iv = interval(r.get(figure) for r in done)
            row.update(
                {f"{figure}_mean": iv.mean, f"{figure}_std": iv.std, f"{figure}_ci95": iv.ci, f"{figure}_n": iv.n}
            )
        out.append(row)
    return out


def summary_header(grid_columns: dict[str, str]) -> list[str]:
    """The columns of ``summary.csv``."""
    return [
        "point",
        *grid_columns.values(),
        "method",
        "runs",
        "complete",
        *(f"{figure}_{stat}" for figure in FIGURES for stat in STATS),
    ]


def write_summary_csv(path: Path, summary: list[dict[str, Any]], grid_columns: dict[str, str]) -> None:
    """``summary.csv``: lists as JSON, missing numbers (no spread below two replicates) as empty cells."""
    write_rows(path, summary, summary_header(grid_columns))


def _pm(row: dict[str, Any], figure: str, spec: str, scale: float = 1.0) -> str:
    """``mean ± half-width`` (the mean alone below two replicates)."""
    mean, half = row[f"{figure}_mean"], row[f"{figure}_ci95"]
    if math.isnan(mean):
        return "-"
    text = format_cell(scale * mean, spec)
    return text if math.isnan(half) else f"{text} ± {format_cell(scale * half, spec)}"


def summary_table(summary: list[dict[str, Any]], grid_columns: dict[str, str]) -> str:
    """The aggregate as a Markdown table: each figure's mean ± 95 % half-width over the replicates."""
    head = table_head(grid_columns, "complete")
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for r in summary:
        cells = [
            r["point"],
            *(json.dumps(r[c]) if isinstance(r[c], list) else str(r[c]) for c in grid_columns.values()),
            r["method"],
            f"{r['complete']}/{r['runs']}",
            _pm(r, "requests", ".1f"),
            _pm(r, "triggered", ".1f"),
            _pm(r, "total_MB", ".3f"),
            _pm(r, "sim_time_s", ".2f"),
            _pm(r, "sim_compute_s", ".2f"),
            _pm(r, "mean_latency_s", ".3f"),
            _pm(r, "failed_transfers", ".1f"),
            _pm(r, "withdrawn", ".1f"),
            _pm(r, "final_accuracy", ".2f", 100.0),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("mean ± half-width of the 95 % Student-t interval over the completed replicates (complete/runs)")
    return "\n".join(lines)
