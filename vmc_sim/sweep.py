"""``vmc sweep``: a grid of scenarios run as separate co-simulations, gathered into one table and one plot.

A sweep file (YAML) names a base scenario and a grid::

    name: density-rho
    base: city.yaml                  # a scenario file (relative to this file), an inline mapping, or omitted
    grid:
      density: [0.5, 1.0]            # = mobility.density (SUMO's --scale: city, files and lust sources)
      rho: [0.3, 0.5]                # = federated.rho
      mobility.rsus.radius: [150, 250]
      method: [fsosa, [fsosa, retrain]]   # = federated.methods; a bare name means [name]
      seed: [0, 1]                   # the run seed; mobility.sumo.seed varies the traffic
    engine: local                    # or ray; --engine overrides
    workers: 2                       # --workers overrides

Every point of the cartesian product is validated as a full :class:`~vmc_sim.scenario.Scenario`
before anything runs, so a bad value is refused up front with the grid key, the value and the
field. Each point then runs in its own process (libsumo allows one simulation per process): a
local spawn-context process pool by default, or Ray tasks with ``engine: ray``. A point that
fails is recorded with its error and the others go on. The sweep directory
``<out>/<name>-<stamp>/`` holds one run directory per point, ``sweep.json`` (grid, points,
status; rewritten as points finish), ``results.csv`` (one row per point and method) and
``sweep.png``.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import math
import os
import platform
import re
import sys
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Literal

from pydantic import Field, ValidationError, field_validator

from .config import ConfigError, Strict, load_model
from .runs import RunDir, new_run_dir, versions
from .scenario import Scenario
from .solves import unconverged_solves

ALIASES: dict[str, str] = {
    "density": "mobility.density",
    "rho": "federated.rho",
    "radius": "mobility.rsus.radius",
    "method": "federated.methods",
    "methods": "federated.methods",
    "seed": "seed",
}
"""Convenience grid names and the scenario field each one sets."""

LIST_FIELDS = frozenset({"federated.methods"})
"""Fields that take a list: a bare string grid value ``x`` means ``[x]``."""

EXCLUSIVE: dict[str, str] = {"federated.rho": "federated.subset_size", "federated.subset_size": "federated.rho"}
"""A point that sets the key (fixed ratio or fixed P) clears the other field, unless the grid sets both."""

SOURCE_ONLY: dict[str, tuple[str, ...]] = {
    "mobility.city.": ("city",),
    "mobility.lust.": ("lust",),
    "mobility.density": ("city", "files", "lust"),
    "mobility.rsus.": ("city", "files", "lust"),
    "mobility.sumo.": ("city", "files", "lust"),
}
"""Field prefixes that only matter for some mobility sources (a trace carries its own RSUs)."""

METRICS = ("requests", "triggered", "total_MB", "sim_time_s", "mean_latency_s", "final_accuracy",
           "failed_transfers", "unconverged_solves")
FIXED_COLUMNS = ("point", "status", "method", *METRICS, "wall_s", "run_dir", "error")


class SweepSpec(Strict):
    """A sweep file: the base scenario, the grid and how to run it."""

    name: str = Field("sweep", min_length=1)
    base: str | dict[str, Any] | None = Field(
        None, description="scenario file (relative to the sweep file), inline scenario, or null = embedded default")
    grid: dict[str, list[Any]] = Field(min_length=1, description="dotted scenario field or alias -> values")
    engine: Literal["local", "ray"] = "local"
    workers: int = Field(2, gt=0, description="points run at once (local pool; Ray: CPUs of a local instance)")
    address: str | None = Field(None, description="Ray cluster to join (engine ray); null = start a local one")
    contribution_cache: bool = Field(
        True, description="points share one content-addressed contribution cache in the sweep directory, so a "
                          "vehicle another point already trained the same way is loaded, not retrained "
                          "(a point whose scenario names its own compute.contribution_cache keeps it)")
    trace_cache: bool = Field(
        True, description="points share one content-addressed trace cache in the sweep directory, so points with "
                          "the same traffic (a grid over rho, method or Fisher) run SUMO once and replay its trace "
                          "(a point whose scenario names its own mobility.trace_cache keeps it)")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9._-]+", v):
            raise ValueError("use letters, digits, '.', '_' or '-' (it names a directory)")
        return v

    @field_validator("grid")
    @classmethod
    def _grid(cls, v: dict[str, list[Any]]) -> dict[str, list[Any]]:
        seen: dict[str, str] = {}
        for key, values in v.items():
            if not values:
                raise ValueError(f"grid key {key!r} has no values")
            path = ALIASES.get(key, key)
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", path):
                raise ValueError(f"grid key {key!r} is not a dotted scenario field or one of {sorted(ALIASES)}")
            if path in seen:
                raise ValueError(f"grid keys {seen[path]!r} and {key!r} both set {path}")
            seen[path] = key
        return v

    def axes(self) -> dict[str, str]:
        """Grid key -> the dotted scenario field it sets."""
        return {key: ALIASES.get(key, key) for key in self.grid}


@dataclass(frozen=True)
class GridPoint:
    """One validated scenario of the grid and the values that made it."""

    id: str
    values: dict[str, Any]
    overrides: dict[str, Any]
    scenario: Scenario


@dataclass
class SweepResult:
    """What a sweep left: its directory, the points' status and the gathered rows."""

    path: Path
    points: list[dict[str, Any]]
    rows: list[dict[str, Any]]
    grid_columns: dict[str, str] = field(default_factory=dict)

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [p for p in self.points if p["status"] != "complete"]

    def table(self) -> str:
        return markdown_table(self.rows, self.grid_columns)


def load_sweep(path: str | Path) -> tuple[SweepSpec, Path]:
    """Validate a sweep file; returns it and the directory its relative ``base`` is read from."""
    return load_model(SweepSpec, path), Path(path).resolve().parent


def _error_lines(err: ValidationError) -> list[tuple[str, str]]:
    return [(".".join(str(p) for p in e["loc"]) or "<top>", e["msg"]) for e in err.errors()]


def base_scenario(spec: SweepSpec, base_dir: str | Path | None = None, where: str = "sweep") -> Scenario:
    """The sweep's base scenario: a file (relative to ``base_dir``), an inline mapping, or the default."""
    if isinstance(spec.base, str):
        path = Path(spec.base)
        if not path.is_absolute() and base_dir is not None:
            path = Path(base_dir) / path
        if not path.is_file():
            raise ConfigError(f"{where}: base: scenario file {path} does not exist")
        return load_model(Scenario, path)
    try:
        return Scenario.model_validate(spec.base or {})
    except ValidationError as e:
        raise ConfigError("\n".join(f"{where}: base.{loc}: {msg}" for loc, msg in _error_lines(e))) from None


def _set_path(data: dict[str, Any], path: str, value: Any, key: str) -> None:
    node = data
    parts = path.split(".")
    for i, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"grid key {key!r}: {'.'.join(parts[:i + 1])} is not a mapping, so {path} cannot be set")
        node = child
    node[parts[-1]] = value


def _slug(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        text = "+".join(_slug(v) for v in value)
    elif isinstance(value, float) and value.is_integer():
        text = str(int(value)) if abs(value) < 1e15 else str(value)
    else:
        text = str(value)
    return re.sub(r"[^A-Za-z0-9.+-]+", "_", text).strip("_")[:24] or "x"


def _point_id(index: int, values: dict[str, Any]) -> str:
    label = "-".join(f"{key.split('.')[-1]}{_slug(v)}" for key, v in values.items())
    return f"p{index:03d}-{label}"[:96]


def _label(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={json.dumps(v)}" for k, v in values.items())


def expand(spec: SweepSpec, base_dir: str | Path | None = None, where: str = "sweep") -> list[GridPoint]:
    """Every point of the grid (cartesian product, last key fastest) as a validated scenario.

    Raises :class:`ConfigError` before anything runs if any point is invalid, naming the point,
    the grid key and value responsible, and the field."""
    base = base_scenario(spec, base_dir, where)
    base_data = base.model_dump(mode="json")
    axes = spec.axes()
    keys = list(spec.grid)
    points: list[GridPoint] = []
    errors: dict[tuple[str, str, str], list[str]] = {}
    for index, combo in enumerate(itertools.product(*(spec.grid[k] for k in keys))):
        values = dict(zip(keys, combo))
        overrides = {axes[k]: ([v] if axes[k] in LIST_FIELDS and isinstance(v, str) else v)
                     for k, v in values.items()}
        data = json.loads(json.dumps(base_data))
        for key, value in values.items():
            _set_path(data, axes[key], overrides[axes[key]], key)
        for path, other in EXCLUSIVE.items():
            if overrides.get(path) is not None and other not in overrides:
                _set_path(data, other, None, path)
        if "name" not in overrides:
            data["name"] = f"{spec.name}-{index:03d}"
        pid = _point_id(index, values)
        try:
            scenario = Scenario.model_validate(data)
        except ValidationError as e:
            for loc, msg in _error_lines(e):
                culprits = [k for k in keys if axes[k] == loc or axes[k].startswith(loc + ".")
                            or loc.startswith(axes[k] + ".")]
                blame = "; ".join(f"grid key {k!r} = {json.dumps(values[k])}" for k in culprits) \
                    or f"point {_label(values)}"
                errors.setdefault((blame, loc, msg), []).append(pid)
            continue
        points.append(GridPoint(pid, values, overrides, scenario))
    if errors:
        raise ConfigError("\n".join(
            f"{where}: {blame}: {loc}: {msg} (grid point {ids[0]}{f' and {len(ids) - 1} more' if ids[1:] else ''})"
            for (blame, loc, msg), ids in errors.items()))
    return points


def inert_axes(spec: SweepSpec, points: Iterable[GridPoint]) -> list[str]:
    """Grid keys that cannot change a point's result because of its mobility source."""
    notes = []
    for key, path in spec.axes().items():
        for prefix, sources in SOURCE_ONLY.items():
            if not path.startswith(prefix):
                continue
            used = sorted({p.scenario.mobility.source for p in points} - set(sources))
            if used:
                notes.append(f"grid key {key!r} ({path}) has no effect with mobility source {used}")
    return notes


def pin_calibrations(points: list[GridPoint], say: Callable[[str], None] = print
                     ) -> tuple[list[GridPoint], list[dict[str, Any]]]:
    """Calibrate once here, per distinct training setup, and pin the costs into every point that
    uses the calibrated time model without pinned costs: every point of the sweep is then charged
    the same costs per unit of work (its points run in separate processes)."""
    from .calibration import calibrated, calibration_key
    from .cosim import pin_calibration

    done: dict[str, Any] = {}
    out = []
    for p in points:
        sc = p.scenario
        if sc.compute.time_model != "calibrated" or sc.compute.calibration is not None:
            out.append(p)
            continue
        key = calibration_key(sc.federated)
        if key not in done:
            done[key] = calibrated(sc.federated, sc.federated.setup(sc.seed))
            c = done[key]
            say(f"calibrated {sc.federated.model}/{sc.federated.dataset}: {c.train_s_per_sample_epoch:.3g} s per "
                f"sample-epoch, {c.fisher_s_per_sample:.3g} s per Fisher sample, {c.solve_s_per_unit:.3g} s per solve unit")
        out.append(replace(p, scenario=pin_calibration(sc, done[key].as_dict())))
    return out, [{"key": json.loads(k), **c.as_dict()} for k, c in done.items()]


def method_totals(run: RunDir) -> list[dict[str, Any]]:
    """Per method of a run directory: requests (the first fit excluded; a fresh fit after a
    withdrawal counts, as do the withdrawals) and how many
    triggered a change; over every record (fit included, like ``summarize`` and Fig. 6): MB,
    simulated time (sum of ``makespan_s``) and failed transfers; mean latency of the editing
    requests, the last recorded accuracy, and how many solves stopped before their tolerance."""
    totals: dict[str, dict[str, Any]] = {}
    latencies: dict[str, list[float]] = {}
    records = list(run.records())
    for r in records:
        if "method" not in r:
            continue
        m = r["method"]
        t = totals.setdefault(m, {"method": m, "requests": 0, "triggered": 0, "total_MB": 0.0, "sim_time_s": 0.0,
                                  "mean_latency_s": math.nan, "final_accuracy": math.nan, "failed_transfers": 0})
        if r.get("kind") != "fit" or r.get("refit"):  # a fresh fit after a withdrawal answers a request
            t["requests"] += len(r.get("requests") or [r.get("index")])
            t["triggered"] += int(bool(r.get("triggered")))
            latencies.setdefault(m, []).append(float(r.get("latency_s", 0.0)))
        t["total_MB"] += r.get("total_bytes", 0) / 1e6
        t["sim_time_s"] += r.get("makespan_s", 0.0)
        t["failed_transfers"] += len(r.get("failed") or [])
        if r.get("accuracy") is not None:
            t["final_accuracy"] = r["accuracy"]
    for m, lat in latencies.items():
        totals[m]["mean_latency_s"] = sum(lat) / len(lat)
    short = unconverged_solves(records)
    for m, t in totals.items():
        t["unconverged_solves"] = short.get(m, {}).get("unconverged", 0)
    return list(totals.values())


def _run_point(task: dict[str, Any]) -> dict[str, Any]:
    """Run one grid point in this (fresh) process; never raises, so a failure is a result."""
    from .cosim import run_scenario

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
    return {"id": task["id"], "status": status, "error": error, "rows": rows,
            "wall_s": time.perf_counter() - t0, "host": platform.node(), "cache": cache,
            "trace_replayed": None if traced is None else bool(traced.get("hit"))}


def _failure(task: dict[str, Any], exc: BaseException) -> dict[str, Any]:
    return {"id": task["id"], "status": "failed", "error": f"{type(exc).__name__}: {exc}", "rows": [],
            "wall_s": math.nan, "host": None}


Done = Callable[[dict[str, Any]], None]


def _run_local(tasks: list[dict[str, Any]], workers: int, done: Done) -> None:
    """One spawned single-worker process pool per point, ``workers`` at a time: a fresh process for
    every simulation, and a process that dies takes down only its own point."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")

    def one(task: dict[str, Any]) -> dict[str, Any]:
        with ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
            try:
                return pool.submit(_run_point, task).result()
            except Exception as e:  # BrokenProcessPool: the process died (SUMO crash, out of memory)
                return _failure(task, e)

    with ThreadPoolExecutor(max_workers=workers) as threads:
        try:
            for future in as_completed([threads.submit(one, t) for t in tasks]):
                done(future.result())
        except BaseException:
            threads.shutdown(wait=False, cancel_futures=True)  # Ctrl-C: start no further point
            raise


def _run_ray(tasks: list[dict[str, Any]], workers: int, address: str | None, done: Done) -> None:
    """Each point a Ray task on one CPU, in a worker process used for that point only."""
    try:
        import ray
    except ImportError:
        raise ConfigError("engine 'ray' needs Ray: install the project's 'ray' extra") from None
    import logging

    started = not ray.is_initialized()
    if started:
        options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                   "logging_level": logging.WARNING}
        if address:
            ray.init(address=address, **options)
        else:
            ray.init(num_cpus=workers, **options)
    try:
        remote = ray.remote(num_cpus=1, max_calls=1)(_run_point)
        refs = {remote.remote(t): t for t in tasks}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            try:
                result = ray.get(ready[0])
            except Exception as e:  # the worker died or the task could not be scheduled
                result = _failure(refs[ready[0]], e)
            done(result)
    finally:
        if started:
            ray.shutdown()


def _grid_columns(spec: SweepSpec) -> dict[str, str]:
    return {k: (f"grid.{k}" if k in FIXED_COLUMNS else k) for k in spec.grid}


def _cell(value: Any) -> Any:
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    if isinstance(value, float) and math.isnan(value):
        return ""
    return "" if value is None else value


def gather_rows(spec: SweepSpec, points: list[GridPoint], results: dict[str, dict[str, Any]],
                run_dirs: dict[str, Path]) -> list[dict[str, Any]]:
    """One row per (point, method); a point that recorded nothing gets one empty row per method."""
    columns = _grid_columns(spec)
    rows = []
    for p in points:
        res = results.get(p.id, {"status": "not run", "error": None, "rows": [], "wall_s": math.nan})
        order = p.scenario.federated.methods
        per_method = sorted(res["rows"] or [{"method": m} for m in order],
                            key=lambda r: order.index(r["method"]) if r["method"] in order else len(order))
        for r in per_method:
            row: dict[str, Any] = {"point": p.id, "status": res["status"]}
            row.update({columns[k]: v for k, v in p.values.items()})
            row["method"] = r["method"]
            row.update({m: r.get(m, math.nan) for m in METRICS})
            row.update(wall_s=res["wall_s"], run_dir=str(run_dirs[p.id]), error=res["error"])
            rows.append(row)
    return rows


def write_csv(path: Path, rows: list[dict[str, Any]], grid_columns: dict[str, str]) -> None:
    """``results.csv``: lists as JSON, missing numbers as empty cells."""
    header = ["point", "status", *grid_columns.values(), "method", *METRICS, "wall_s", "run_dir", "error"]
    tmp = path.with_suffix(".csv.tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=header)
        w.writeheader()
        for r in rows:
            w.writerow({k: _cell(r.get(k)) for k in header})
    os.replace(tmp, path)


def _fmt(value: Any, spec: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return format(value, spec)


def markdown_table(rows: list[dict[str, Any]], grid_columns: dict[str, str]) -> str:
    """The gathered rows as a markdown table (the run directories are in ``results.csv``)."""
    head = ["point", *grid_columns.values(), "method", "status", "requests", "triggered", "MB", "sim time s",
            "mean latency s", "final acc %", "failed transfers"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for r in rows:
        acc = r.get("final_accuracy")
        cells = [r["point"], *(json.dumps(r[c]) if isinstance(r[c], list) else str(r[c])
                               for c in grid_columns.values()),
                 r["method"], r["status"], _fmt(r.get("requests"), "d"), _fmt(r.get("triggered"), "d"),
                 _fmt(r.get("total_MB"), ".3f"), _fmt(r.get("sim_time_s"), ".2f"),
                 _fmt(r.get("mean_latency_s"), ".3f"),
                 _fmt(None if acc is None else 100 * acc, ".2f"), _fmt(r.get("failed_transfers"), "d")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_sweep(rows: list[dict[str, Any]], x_key: str, out: Path, averaged: bool = False) -> Path | None:
    """``sweep.png``: cumulative MB, simulated time and final accuracy per method against the
    first grid axis (``averaged``: the mean over the other axes); None when no point completed."""
    done = [r for r in rows if r["status"] == "complete"]
    if not done:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(dict.fromkeys(_xlabel(r[x_key]) for r in rows))
    numeric = all(isinstance(r[x_key], (int, float)) and not isinstance(r[x_key], bool) for r in rows)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    panels = (("total_MB", "Cumulative communication", "MB", 1.0),
              ("sim_time_s", "Cumulative edit time (simulated)", "seconds", 1.0),
              ("final_accuracy", "Final test accuracy", "accuracy %", 100.0))

    def x_of(r: dict[str, Any]) -> Any:
        return r[x_key] if numeric else labels.index(_xlabel(r[x_key]))

    for method in dict.fromkeys(r["method"] for r in done):
        mine = [r for r in done if r["method"] == method]
        xs = sorted({x_of(r) for r in mine})
        for ax, (metric, _, _, scale) in zip(axes, panels):
            ys = []
            for x in xs:
                vals = [r[metric] for r in mine if x_of(r) == x and not math.isnan(r[metric])]
                ys.append(scale * sum(vals) / len(vals) if vals else math.nan)
            ax.plot(xs, ys, marker="o", label=method)
    for ax, (_, title, ylabel, _) in zip(axes, panels):
        ax.set_title(title)
        ax.set_xlabel(x_key + (" (mean over the other axes)" if averaged else ""))
        ax.set_ylabel(ylabel)
        if not numeric:
            ax.set_xticks(range(len(labels)), [_short(lab) for lab in labels], rotation=20)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def _xlabel(value: Any) -> str:
    return json.dumps(value) if isinstance(value, (list, dict)) else str(value)


def _short(text: str) -> str:
    return text if len(text) <= 24 else f"{text[:10]}...{text[-11:]}"


def run_sweep(spec: SweepSpec, out: str | Path = "runs", *, base_dir: str | Path | None = None,
              engine: str | None = None, workers: int | None = None, address: str | None = None,
              say: Callable[[str], None] = print, where: str = "sweep") -> SweepResult:
    """Validate every point, run them (``engine``/``workers``/``address`` override the file), and
    write ``sweep.json``, ``results.csv`` and ``sweep.png`` into a new sweep directory."""
    engine = spec.engine if engine is None else engine
    workers = spec.workers if workers is None else workers
    address = spec.address if address is None else address
    if engine not in ("local", "ray"):
        raise ConfigError(f"engine: {engine!r} is not 'local' or 'ray'")
    if workers < 1:
        raise ConfigError(f"workers: {workers} must be at least 1")
    points = expand(spec, base_dir, where)
    for note in inert_axes(spec, points):
        say(f"note: {note}")
    points, calibrations = pin_calibrations(points, say)
    path = new_run_dir(out, spec.name).resolve()
    if spec.contribution_cache:
        points = [_with_cache(p, path / "contribution_cache") for p in points]
    if spec.trace_cache:
        points = [_with_trace_cache(p, path / "trace_cache") for p in points]
    run_dirs = {p.id: path / p.id for p in points}
    columns = _grid_columns(spec)
    results: dict[str, dict[str, Any]] = {}
    manifest: dict[str, Any] = {
        "name": spec.name, "created": datetime.now(timezone.utc).isoformat(), "status": "running",
        "engine": engine, "workers": workers, "address": address, "spec": spec.model_dump(mode="json"),
        "axes": spec.axes(), "versions": versions(), "results": "results.csv", "plot": None,
        "calibrations": calibrations, "points": [],
    }

    def write_state() -> None:
        manifest["points"] = [
            {"id": p.id, "values": p.values, "overrides": p.overrides, "run_dir": str(run_dirs[p.id]),
             **{k: results.get(p.id, {}).get(k) for k in ("status", "error", "wall_s", "host", "cache", "trace_replayed")}}
            for p in points]
        manifest["contribution_cache"] = cache_totals(results.values())
        for entry in manifest["points"]:
            entry["status"] = entry["status"] or "pending"
        tmp = path / "sweep.json.tmp"
        tmp.write_text(json.dumps(_json_safe(manifest), indent=2))
        os.replace(tmp, path / "sweep.json")
        write_csv(path / "results.csv", gather_rows(spec, points, results, run_dirs), columns)

    def finished(result: dict[str, Any]) -> None:
        results[result["id"]] = result
        tail = f": {result['error']}" if result["error"] else ""
        wall = _fmt(result["wall_s"], ".1f")
        c = result.get("cache")
        hits = f", {c['hits']}/{c['hits'] + c['misses']} contributions from the cache" if c else ""
        say(f"[{len(results)}/{len(points)}] {result['id']}: {result['status']} ({wall} s{hits}){tail}")
        write_state()

    write_state()
    say(f"sweep directory: {path} ({len(points)} points, engine {engine}, {workers} workers)")
    tasks = [{"id": p.id, "scenario": p.scenario.model_dump(mode="json"), "run_dir": str(run_dirs[p.id]),
              "cwd": os.getcwd()} for p in points]
    try:
        if engine == "ray":
            _run_ray(tasks, workers, address, finished)
        else:
            _run_local(tasks, workers, finished)
        manifest["status"] = "complete" if all(r["status"] == "complete" for r in results.values()) \
            else "complete_with_failures"
    except BaseException as e:
        manifest["status"] = f"interrupted: {type(e).__name__}"
        raise
    finally:
        rows = gather_rows(spec, points, results, run_dirs)
        if manifest["status"] != "running":
            plot = plot_sweep(rows, columns[next(iter(spec.grid))], path / "sweep.png", averaged=len(spec.grid) > 1)
            manifest["plot"] = plot.name if plot else None
        write_state()
    result = SweepResult(path, manifest["points"], rows, columns)
    say(result.table())
    totals = manifest.get("contribution_cache")
    if totals:
        say(f"contribution cache: {totals['hits']} of {totals['asked']} contributions loaded instead of trained "
            f"(hit rate {100 * totals['hit_rate']:.0f} %), {totals['weights_reused']} computed at trained weights "
            f"another point kept (Fisher only)"
            + (f", {totals['rejected']} entries did not verify (not used; computed again)" if totals["rejected"] else "")
            + f"; {path / 'contribution_cache'}")
    short = [f"{r['point']} {r['method']} ({r['unconverged_solves']})" for r in rows
             if isinstance(r.get("unconverged_solves"), int) and r["unconverged_solves"] > 0]
    if short:
        say(f"warning: solves stopped before their tolerance in {len(short)} point-method pair(s): {', '.join(short[:8])}"
            f"{', ...' if len(short) > 8 else ''} (results.csv column unconverged_solves; each run's summary names "
            f"the requests)")
    replayed = [p for p in manifest["points"] if p.get("trace_replayed")]
    if replayed:
        say(f"trace cache: {len(replayed)} of {len(points)} points replayed the traffic another point recorded "
            f"instead of running SUMO; {path / 'trace_cache'}")
    say(f"results: {path / 'results.csv'}" + (f", plot: {path / 'sweep.png'}" if manifest["plot"] else ""))
    return result


def _with_cache(point: GridPoint, directory: Path) -> GridPoint:
    """``point`` with the sweep's shared contribution cache, unless its scenario names one."""
    compute = point.scenario.compute
    if compute.contribution_cache is not None:
        return point
    scenario = point.scenario.model_copy(
        update={"compute": compute.model_copy(update={"contribution_cache": str(directory)})})
    return replace(point, scenario=scenario)


def _with_trace_cache(point: GridPoint, directory: Path) -> GridPoint:
    """``point`` with the sweep's shared trace cache, unless it replays a trace or names its own cache."""
    mobility = point.scenario.mobility
    if mobility.source == "trace" or mobility.trace_cache is not None:
        return point
    scenario = point.scenario.model_copy(
        update={"mobility": mobility.model_copy(update={"trace_cache": str(directory)})})
    return replace(point, scenario=scenario)


def cache_totals(results: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """The points' cache use summed: hits, asked, trained, computed at cached trained weights
    (``weights_reused``: Fisher only) and the hit rate; None if unused."""
    used = [r["cache"] for r in results if r.get("cache")]
    if not used:
        return None
    hits, misses = sum(c["hits"] for c in used), sum(c["misses"] for c in used)
    reused = sum(c.get("weights_reused", 0) for c in used)
    return {"hits": hits, "asked": hits + misses, "trained": misses - reused, "weights_reused": reused,
            "rejected": sum(c.get("rejected", 0) for c in used), "hit_rate": round(hits / max(1, hits + misses), 4)}


def _json_safe(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj


def _cli(args: argparse.Namespace) -> int:
    spec, base_dir = load_sweep(args.sweep)
    if args.dry_run:
        points = expand(spec, base_dir, where=args.sweep)
        for note in inert_axes(spec, points):
            print(f"note: {note}")
        for p in points:
            print(f"{p.id}: {_label(p.values)}")
        print(f"{len(points)} points, all valid")
        return 0
    result = run_sweep(spec, args.out, base_dir=base_dir, engine=args.engine, workers=args.workers,
                       address=args.address, where=args.sweep)
    if result.failed:
        print(f"vmc: {len(result.failed)} of {len(result.points)} points failed (see {result.path / 'sweep.json'})",
              file=sys.stderr)
        return 1
    return 0


def add_sweep_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register ``vmc sweep SWEEP [--out] [--engine] [--workers] [--address] [--dry-run]``."""
    p = subparsers.add_parser("sweep", help="run a grid of scenarios (density, rho, radius, method, seed) "
                                            "locally or on Ray, then gather one table and one plot")
    p.add_argument("sweep", help="sweep YAML: name, base (scenario file or mapping), grid (field -> values)")
    p.add_argument("--out", default="runs", help="where the sweep directory is created")
    p.add_argument("--engine", choices=("local", "ray"), help="local process pool or Ray (default: the file's, local)")
    p.add_argument("--workers", type=int, help="points run at once; Ray: CPUs of a local instance (default 2)")
    p.add_argument("--address", help="Ray cluster address to join instead of starting a local instance")
    p.add_argument("--dry-run", action="store_true", help="validate and list the points, run nothing")
    p.set_defaults(func=_cli)
