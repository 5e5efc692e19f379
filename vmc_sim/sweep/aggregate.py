"""A replicated sweep's aggregate: per point and method, each figure's mean, sample standard
deviation, confidence half-width and count over the replicates that completed (``summary.csv``
and the Markdown table the sweep prints)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from .stats import CONFIDENCE, FEW, interval, t_quantile
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
    """``mean ± half-width`` (the mean alone below two replicates), with ``(n=k)`` beside it below
    :data:`~vmc_sim.sweep.stats.FEW` replicates, where the interval is very wide or missing."""
    mean, half, n = row[f"{figure}_mean"], row[f"{figure}_ci95"], row[f"{figure}_n"]
    if math.isnan(mean):
        return "-"
    text = format_cell(scale * mean, spec)
    if not math.isnan(half):
        text = f"{text} ± {format_cell(scale * half, spec)}"
    return f"{text} (n={n})" if n < FEW else text


SHOWN = (
    ("requests", ".1f", 1.0),
    ("triggered", ".1f", 1.0),
    ("total_MB", ".3f", 1.0),
    ("sim_time_s", ".2f", 1.0),
    ("sim_compute_s", ".2f", 1.0),
    ("mean_latency_s", ".3f", 1.0),
    ("failed_transfers", ".1f", 1.0),
    ("withdrawn", ".1f", 1.0),
    ("final_accuracy", ".2f", 100.0),
)
"""The figures the printed table shows (in the order of :data:`~vmc_sim.sweep.tables.FIGURE_HEADS`),
each with its format and scale."""


def summary_table(summary: list[dict[str, Any]], grid_columns: dict[str, str]) -> str:
    """The aggregate as a Markdown table: each figure's mean ± 95 % half-width over the replicates,
    the count beside those over fewer than :data:`~vmc_sim.sweep.stats.FEW`, and a caption."""
    head = table_head(grid_columns, "complete")
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for r in summary:
        cells = [
            r["point"],
            *(json.dumps(r[c]) if isinstance(r[c], list) else str(r[c]) for c in grid_columns.values()),
            r["method"],
            f"{r['complete']}/{r['runs']}",
            *(_pm(r, figure, spec, scale) for figure, spec, scale in SHOWN),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("mean ± half-width of the 95 % Student-t interval over the completed replicates (complete/runs)")
    few = {r[f"{figure}_n"] for r in summary for figure, _, _ in SHOWN if 0 < r[f"{figure}_n"] < FEW}
    if 2 in few:
        lines.append(
            f"(n=2): an interval over only 2 replicates has 1 degree of freedom (t = {t_quantile(0.5 + CONFIDENCE / 2, 1):.1f}), "
            f"so it is very wide and says little; {FEW} or more replicates give a usable one"
        )
    if 1 in few:
        lines.append("(n=1): the figure of a single replicate, no interval")
    return "\n".join(lines)
