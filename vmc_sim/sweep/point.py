"""One sweep point run in this process: its scenario into its run directory, the outcome as a
result (a failure is a result, never an exception), and its per-method totals."""

from __future__ import annotations

import math
import os
import platform
import time
from pathlib import Path
from typing import Any

from ..rundir.directory import RunDir
from ..scenario.config import load_model
from ..scenario.schema import Scenario
from .tables import method_totals


def run_point(task: dict[str, Any]) -> dict[str, Any]:
    """Run one grid point in this (fresh) process; never raises, so a failure is a result."""
    from ..cosim import run_scenario

    t0 = time.perf_counter()
    if task.get("cwd") and os.path.isdir(task["cwd"]):
        os.chdir(task["cwd"])  # Ray workers start elsewhere; relative scenario paths mean the driver's
    run_dir = Path(task["run_dir"])
    status, error = "complete", None
    try:
        scenario = load_model(Scenario, None, task["scenario"])
        run_scenario(scenario, progress=False, run_dir=run_dir, say=lambda s: None)
    except Exception as e:  # a failed point is recorded, the sweep goes on
        status, error = "failed", f"{type(e).__name__}: {e}"
    rows: list[dict[str, Any]] = []
    cache = traced = None
    if run_dir.is_dir():
        try:
            rows = method_totals(RunDir(run_dir))
            recorded = RunDir(run_dir).manifest()
            cache = (recorded.get("summary") or {}).get("contribution_cache")
            traced = (recorded.get("mobility") or {}).get("trace_cache")
        except (OSError, ValueError) as e:
            error = f"{error}; records unreadable: {e}" if error else f"records unreadable: {e}"
            status = "failed"
    return {
        "id": task["id"],
        "status": status,
        "error": error,
        "rows": rows,
        "wall_s": time.perf_counter() - t0,
        "host": platform.node(),
        "cache": cache,
        "trace_replayed": None if traced is None else bool(traced.get("hit")),
    }


def failure(task: dict[str, Any], exc: BaseException) -> dict[str, Any]:
    return {
        "id": task["id"],
        "status": "failed",
        "error": f"{type(exc).__name__}: {exc}",
        "rows": [],
        "wall_s": math.nan,
        "host": None,
    }
