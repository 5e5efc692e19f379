"""What each Fisher costs F-SOSA in the case study's runs, from ``requests.csv``: the Fisher bytes
its clients uploaded, their computation and the coordinator's solves, both in the simulated
hardware's seconds, per run. Simulated, so the same on any host; the host's own wall-clock per run
is the report's "Wall-clock" line."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import report
from .data import Bundle, num, order
from .stats import mean_ci

#: (requests.csv column, the figure per run, its scale): summed over a run's F-SOSA records.
FIGURES = (
    ("fisher_upload_bytes", "Fisher uploads, MB", 1e-6),
    ("compute_sim_s", "clients' computation, s", 1.0),
    ("solve_sim_s", "coordinator's solves, s", 1.0),
)


def cost_rows(bundles: Sequence[Bundle]) -> list[dict[str, Any]]:
    """Per (setting, dataset, Fisher, arm) of ``bundles``: each figure of :data:`FIGURES` as the
    mean of its per-run sums with the 95 % interval; ``-`` where the files lack the column."""
    runs: dict[tuple[str, str, str, str], dict[int, dict[str, float | None]]] = {}
    for b in bundles:
        for r in b.requests:
            if r.get("method") != "fsosa":
                continue
            setting, dataset, fisher, arm, replicate = b.key(r)
            run = runs.setdefault((setting, dataset, fisher, arm), {}).setdefault(
                replicate, dict.fromkeys((c for c, _, _ in FIGURES), None)
            )
            for column, _, scale in FIGURES:
                v = num(r.get(column))
                if v is not None:
                    run[column] = (run[column] or 0.0) + v * scale
    out = []
    for key, by_rep in sorted(runs.items(), key=lambda kv: order(kv[0])):
        setting, dataset, fisher, arm = key
        row: dict[str, Any] = {"setting": setting, "dataset": dataset, "fisher": fisher, "arm": arm}
        for column, label, _ in FIGURES:
            row[label] = mean_ci([by_rep[k][column] for k in sorted(by_rep)])
        out.append(row)
    return out


def cost_section(bundles: Sequence[Bundle]) -> list[str]:
    """The report's lines: the table of :func:`cost_rows`, or why there is none."""
    rows = cost_rows(bundles)
    if not rows:
        return []
    cols = ["setting", "dataset", "fisher", "arm", *(label for _, label, _ in FIGURES)]
    return [
        "What each Fisher costs F-SOSA, per run (sums over its records in `requests.csv`, mean ± 95 % (n)): the "
        "Fisher bytes its clients uploaded, and in the simulated hardware's seconds their computation (training "
        "and the Fisher) and the coordinator's solves; `-` where the files do not hold the figure.",
        "",
        report.md_table(rows, cols),
        "",
    ]
