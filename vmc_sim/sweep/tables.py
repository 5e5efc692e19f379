"""What a sweep reports: per-method totals of each run, ``results.csv``, the Markdown table and ``sweep.png``."""

from __future__ import annotations

import csv
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from ..rundir.directory import RunDir
from ..rundir.summary import TOTALS
from ..rundir.summary import method_totals as summary_totals
from .spec import GridPoint, SweepSpec
from .stats import FEW, interval

METRICS = TOTALS
"""A row's figures: those ``vmc run`` prints (:func:`vmc_sim.rundir.summary.method_totals`), same names and counts."""


FIXED_COLUMNS = ("point", "status", "method", *METRICS, "wall_s", "run_dir", "error")


def method_totals(run: RunDir) -> list[dict[str, Any]]:
    """Per method of a run directory: the totals ``vmc run`` prints for it (one code path)."""
    return list(summary_totals(run.records()).values())


def grid_columns_of(spec: SweepSpec) -> dict[str, str]:
    return {k: (f"grid.{k}" if k in FIXED_COLUMNS else k) for k in spec.grid}


def csv_cell(value: Any) -> Any:
    """A CSV cell: lists and mappings as JSON, a missing number (None, NaN) empty."""
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    if isinstance(value, float) and math.isnan(value):
        return ""
    return "" if value is None else value


def gather_rows(
    spec: SweepSpec, points: list[GridPoint], results: dict[str, dict[str, Any]], run_dirs: dict[str, Path]
) -> list[dict[str, Any]]:
    """One row per (run, method): a point's run, or with several replicates each replicate's run
    (its seed in ``replicate``); a run that recorded nothing gets one empty row per method.
    ``results`` and ``run_dirs`` are keyed by :attr:`GridPoint.run_id`."""
    columns = grid_columns_of(spec)
    rows = []
    for p in points:
        res = results.get(p.run_id, {"status": "not run", "error": None, "rows": [], "wall_s": math.nan})
        order = p.scenario.federated.methods
        per_method = sorted(
            res["rows"] or [{"method": m} for m in order],
            key=lambda r: order.index(r["method"]) if r["method"] in order else len(order),
        )
        for r in per_method:
            row: dict[str, Any] = {"point": p.id, "status": res["status"]}
            row.update({columns[k]: v for k, v in p.values.items()})
            if p.replicate is not None:
                row["replicate"] = p.replicate
            row["method"] = r["method"]
            row.update({m: r.get(m, math.nan) for m in METRICS})
            row.update(wall_s=res["wall_s"], run_dir=str(run_dirs[p.run_id]), error=res["error"])
            rows.append(row)
    return rows


def write_csv(path: Path, rows: list[dict[str, Any]], grid_columns: dict[str, str], replicated: bool = False) -> None:
    """``results.csv``: lists as JSON, missing numbers as empty cells; ``replicated`` adds the
    ``replicate`` column (the run's seed) after the grid's."""
    header = [
        "point",
        "status",
        *grid_columns.values(),
        *(["replicate"] if replicated else []),
        "method",
        *METRICS,
        "wall_s",
        "run_dir",
        "error",
    ]
    write_rows(path, rows, header)


def write_rows(path: Path, rows: list[dict[str, Any]], header: list[str]) -> None:
    """Write ``rows`` under ``header`` as CSV (lists as JSON, missing numbers empty), through a
    temporary file so a reader never sees half a table."""
    tmp = path.with_suffix(".csv.tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=header)
        w.writeheader()
        for r in rows:
            w.writerow({k: csv_cell(r.get(k)) for k in header})
    os.replace(tmp, path)


def format_cell(value: Any, spec: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return format(value, spec)


FIGURE_HEADS = (
    "requests",
    "triggered",
    "MB",
    "sim time s",
    "sim compute s",
    "mean latency s",
    "failed",
    "withdrawn",
    "final acc %",
)
"""The figures both sweep tables show, in order (one run's value, or the mean over replicates)."""


def table_head(grid_columns: dict[str, str], state: str) -> list[str]:
    """The header of a sweep table: point, grid columns, method, ``state``, then the figures."""
    return ["point", *grid_columns.values(), "method", state, *FIGURE_HEADS]


def markdown_table(rows: list[dict[str, Any]], grid_columns: dict[str, str]) -> str:
    """The gathered rows as a markdown table (the run directories are in ``results.csv``)."""
    head = table_head(grid_columns, "status")
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for r in rows:
        acc = r.get("final_accuracy")
        gone = isinstance(acc, float) and math.isnan(acc) and (r.get("withdrawn") or 0) > 0
        cells = [
            r["point"],
            *(json.dumps(r[c]) if isinstance(r[c], list) else str(r[c]) for c in grid_columns.values()),
            r["method"],
            r["status"],
            format_cell(r.get("requests"), "d"),
            format_cell(r.get("triggered"), "d"),
            format_cell(r.get("total_MB"), ".3f"),
            format_cell(r.get("sim_time_s"), ".2f"),
            format_cell(r.get("sim_compute_s"), ".2f"),
            format_cell(r.get("mean_latency_s"), ".3f"),
            format_cell(r.get("failed_transfers"), "d"),
            format_cell(r.get("withdrawn"), "d"),
            "withdrawn" if gone else format_cell(None if acc is None else 100 * acc, ".2f"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_sweep(
    rows: list[dict[str, Any]], x_key: str, out: Path, averaged: bool = False, replicated: bool = False
) -> Path | None:
    """``sweep.png``: cumulative MB, simulated time and final accuracy per method against the
    first grid axis (``averaged``: the mean over the other axes); None when no point completed.

    ``replicated`` (rows carry ``replicate``): each replicate's figures are averaged over the other
    axes first, the line is their mean over the replicates and a band its 95 % confidence
    interval, since the replicates are the independent draws. A band is clipped to what its figure
    can take (accuracy 0-100 %, MB and seconds from 0), and the title says so, and says n where a
    band rests on fewer than :data:`~vmc_sim.sweep.stats.FEW` replicates."""
    done = [r for r in rows if r["status"] == "complete"]
    if not done:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(dict.fromkeys(_xlabel(r[x_key]) for r in rows))
    numeric = all(isinstance(r[x_key], (int, float)) and not isinstance(r[x_key], bool) for r in rows)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    panels = (
        ("total_MB", "Cumulative communication", "MB", 1.0, (0.0, math.inf)),
        ("sim_time_s", "Cumulative edit time (simulated)", "seconds", 1.0, (0.0, math.inf)),
        ("final_accuracy", "Final test accuracy", "accuracy %", 100.0, (0.0, 100.0)),
    )
    fewest = math.inf  # the fewest replicates any band rests on

    def x_of(r: dict[str, Any]) -> Any:
        return r[x_key] if numeric else labels.index(_xlabel(r[x_key]))

    for method in dict.fromkeys(r["method"] for r in done):
        mine = [r for r in done if r["method"] == method]
        xs = sorted({x_of(r) for r in mine})
        for ax, (metric, _, _, scale, (lo, hi)) in zip(axes, panels, strict=True):
            ys, low, high = [], [], []
            for x in xs:
                at = [r for r in mine if x_of(r) == x]
                if replicated:
                    per_replicate: dict[Any, list[Any]] = {}
                    for r in at:
                        per_replicate.setdefault(r["replicate"], []).append(r[metric])
                    iv = interval(interval(v).mean for v in per_replicate.values())
                    ys.append(scale * iv.mean)
                    low.append(float(np.clip(scale * (iv.mean - iv.ci), lo, hi)))  # NaN stays NaN
                    high.append(float(np.clip(scale * (iv.mean + iv.ci), lo, hi)))
                    fewest = min(fewest, iv.n) if iv.n else fewest
                    continue
                vals = [r[metric] for r in at if not math.isnan(r[metric])]
                ys.append(scale * sum(vals) / len(vals) if vals else math.nan)
            (line,) = ax.plot(xs, ys, marker="o", label=method)
            if replicated:
                ax.fill_between(xs, low, high, color=line.get_color(), alpha=0.2, linewidth=0)
    for ax, (_, title, ylabel, _, _) in zip(axes, panels, strict=True):
        ax.set_title(title)
        ax.set_xlabel(x_key + (" (mean over the other axes)" if averaged else ""))
        ax.set_ylabel(ylabel)
        if not numeric:
            ax.set_xticks(range(len(labels)), [_short(lab) for lab in labels], rotation=20)
        ax.grid(alpha=0.3)
        ax.legend()
    if replicated:
        count = len({r["replicate"] for r in done})
        few = f"; a band over n={fewest} replicates (fewer than {FEW}) is very wide" if fewest < FEW else ""
        fig.suptitle(
            f"mean over {count} replicates, band: 95 % confidence interval, clipped to the figure's range "
            f"(accuracy 0-100 %, MB and seconds from 0){few}"
        )
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def _xlabel(value: Any) -> str:
    return json.dumps(value) if isinstance(value, (list, dict)) else str(value)


def _short(text: str) -> str:
    return text if len(text) <= 24 else f"{text[:10]}...{text[-11:]}"
