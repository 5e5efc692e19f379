"""The LuST case study's analysis as ``reports/lust_case_study/PLAN.md`` fixes it, computed from the
files a replicate directory keeps and nothing else: ``replicates.csv`` (one row per run and
method), ``requests.csv`` (one row per record), ``runs.csv`` (traffic, dwell and job times per run,
where the runs wrote one), ``runs.json`` (the runs' wall-clock) and ``provenance.json`` (when, where,
from which commit and by which command the runs were made). :func:`render` turns them into the
report's files, so the committed report is a function of the committed data and a test
regenerates it byte for byte; a figure the plan needs that the files do not hold is said to
await the runs of the plan, never filled in.

The accountings (PLAN.md, "Accountings"), per run, F-SOSA against Retrain on the same requests:

- C1, payload bytes: each record's ``bytes`` (broadcast, model upload, Fisher upload, control).
- C2, re-collected bytes: a triggered F-SOSA record charged a broadcast and the whole subset's
  uploads (``subset_size`` x the first fit's per-client upload), as seed 000's Tables VIII-XII.
- T1, makespan: each record's ``makespan_s`` (request to release, in simulated time).
- T2, re-collected makespan: a triggered F-SOSA record charged Retrain's ``makespan_s``.
- T3, computation time (Appendix B-D): the slowest trained client plus the solve
  (``common.compute_time``), from ``compute_time_s`` per record or the run's total.

The package's modules: :mod:`.data` (seed 000's figures, reading the files, the accountings),
:mod:`.stats` (the tests), :mod:`.claims` (what the report says), :mod:`.render` (the report).
"""

from __future__ import annotations

from .claims import CLAIMS, Claim, Pin, claims, method_table, paired_rows, pin_verdict, pins, traffic_rows
from .data import (
    COMM,
    PAIRINGS,
    RATIO_RANGE,
    TIME,
    Bundle,
    Run,
    accounting_rows,
    load,
    ratio_range,
    runs_of,
)
from .render import render, write
from .stats import equivalence_test, finite, mean_ci, paired_test, range_test, variance_test

__all__ = [
    "CLAIMS",
    "COMM",
    "PAIRINGS",
    "RATIO_RANGE",
    "TIME",
    "Bundle",
    "Claim",
    "Pin",
    "Run",
    "accounting_rows",
    "claims",
    "equivalence_test",
    "finite",
    "load",
    "mean_ci",
    "method_table",
    "paired_rows",
    "paired_test",
    "pin_verdict",
    "pins",
    "range_test",
    "ratio_range",
    "render",
    "runs_of",
    "traffic_rows",
    "variance_test",
    "write",
]
