"""Running a sweep's runs (its points, or each point once per replicate), each in its own process
(a local process pool or Ray tasks), and writing ``sweep.json`` as they finish."""

from __future__ import annotations

import json
import math
import os
import shlex
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..rundir.directory import RunDir, new_run_dir, versions
from ..rundir.lock import RunLock, signals_interrupt
from ..scenario.config import ConfigError, load_model
from .aggregate import summarize_replicates, summary_table, write_summary_csv
from .frames import seal_tables
from .local_engine import run_local
from .replicates import replicate_runs
from .spec import GridPoint, SweepSpec, expand, inert_axes
from .tables import (
    format_cell,
    gather_rows,
    grid_columns_of,
    markdown_table,
    method_totals,
    plot_sweep,
    write_csv,
)


@dataclass
class SweepResult:
    """What a sweep left: its directory, the runs' status (one entry per point, or per point and
    replicate), the gathered rows and, with several replicates, their aggregate per point and method."""

    path: Path
    points: list[dict[str, Any]]
    rows: list[dict[str, Any]]
    grid_columns: dict[str, str] = field(default_factory=dict)
    summary: list[dict[str, Any]] = field(default_factory=list)

    @property
    def failed(self) -> list[dict[str, Any]]:
        """The entries of runs that did not complete."""
        return [p for p in self.points if p["status"] != "complete"]

    def table(self) -> str:
        """The Markdown table the sweep prints: per run, or the aggregate over the replicates."""
        if self.summary:
            return summary_table(self.summary, self.grid_columns)
        return markdown_table(self.rows, self.grid_columns)


def pin_calibrations(
    points: list[GridPoint], say: Callable[[str], None] = print
) -> tuple[list[GridPoint], list[dict[str, Any]]]:
    """Calibrate once here, per distinct training setup, and pin the costs into every point that
    uses the calibrated time model without pinned costs: every point of the sweep is then charged
    the same costs per unit of work (its points run in separate processes)."""
    from ..compute.calibration import calibrated, calibration_key
    from ..cosim import pin_calibration

    done: dict[str, Any] = {}
    out = []
    for p in points:
        sc = p.scenario
        if not sc.compute.measures_costs:
            out.append(p)
            continue
        key = calibration_key(sc.federated)
        if key not in done:
            done[key] = calibrated(sc.federated, sc.federated.setup(sc.seed))
            c = done[key]
            say(
                f"calibrated {sc.federated.model}/{sc.federated.dataset}: {c.train_s_per_sample_epoch:.3g} s per "
                f"sample-epoch, {c.fisher_s_per_sample:.3g} s per Fisher sample, {c.solve_s_per_unit:.3g} s per solve unit"
            )
        out.append(replace(p, scenario=pin_calibration(sc, done[key].as_dict())))
    return out, [{"key": json.loads(k), **c.as_dict()} for k, c in done.items()]


def new_sweep_dir(out: str | Path, name: str) -> Path:
    """A new directory ``<out>/<name>-<stamp>`` made by this call; refused when ``out`` is itself a
    sweep or run directory, which a new sweep must not write into."""
    base = Path(out)
    for marker, what in (("sweep.json", "a sweep directory"), ("manifest.json", "a run directory")):
        if (base / marker).is_file():
            resume = "vmc sweep --resume" if marker == "sweep.json" else "vmc run --resume"
            raise ConfigError(
                f"out: {base} is {what}; a new sweep makes a directory of its own under --out and writes "
                f"nothing into another's (to continue that one: {resume} {shlex.quote(str(base))})"
            )
    return new_run_dir(base, name).resolve()


def run_sweep(
    spec: SweepSpec,
    out: str | Path = "runs",
    *,
    base_dir: str | Path | None = None,
    engine: str | None = None,
    workers: int | None = None,
    address: str | None = None,
    say: Callable[[str], None] = print,
    where: str = "sweep",
    resume: str | Path | None = None,
) -> SweepResult:
    """Validate every point and check its input files (:func:`.spec.expand`), run each (once per
    replicate seed when the spec has replicates; ``engine``/``workers``/``address`` override the
    file), and write ``sweep.json``, ``results.csv``
    (one row per run and method), with several replicates ``summary.csv`` (their aggregate per
    point and method), and ``sweep.png`` into a new sweep directory under ``out`` (never into a
    sweep or run directory ``out`` names).

    One process writes a sweep directory: it holds the directory's lock
    (:class:`vmc_sim.rundir.lock.RunLock`) from before its first write to its end, so a second sweep
    or resume on it is refused, naming the holder, and writes nothing. SIGTERM and SIGHUP end a
    sweep as Ctrl-C does, and an interrupted sweep raises :class:`KeyboardInterrupt` saying how
    many points completed, where, and the command that resumes it."""
    engine = spec.engine if engine is None else engine
    workers = spec.workers if workers is None else workers
    address = spec.address if address is None else address
    if engine not in ("local", "ray"):
        raise ConfigError(f"engine: {engine!r} is not 'local' or 'ray'")
    if workers < 1:
        raise ConfigError(f"workers: {workers} must be at least 1")
    if resume is not None and not (Path(resume) / "sweep.json").is_file():
        raise ConfigError(f"{resume}: not a sweep directory (no sweep.json)")
    held = [RunLock(resume, what="sweep")] if resume is not None else []  # before reading what it keeps
    try:
        with signals_interrupt():
            return _sweep(spec, out, held, base_dir, engine, workers, address, say, where, resume)
    finally:
        for lock in held:
            lock.release()


def _sweep(
    spec: SweepSpec,
    out: str | Path,
    held: list[RunLock],
    base_dir: str | Path | None,
    engine: str,
    workers: int,
    address: str | None,
    say: Callable[[str], None],
    where: str,
    resume: str | Path | None,
) -> SweepResult:
    """:func:`run_sweep` once its arguments are checked; a new sweep directory's lock goes into ``held``."""
    grid = expand(spec, base_dir, where)
    for note in inert_axes(spec, grid):
        say(f"note: {note}")
    points = replicate_runs(spec, grid, where)
    seeds = spec.replicate_seeds()
    replicated = len(seeds) > 1
    unit = "runs" if replicated else "points"
    points, calibrations = pin_calibrations(points, say)
    if resume is not None:
        path = Path(resume).resolve()
    else:
        path = new_sweep_dir(out, spec.name)
        held.append(RunLock(path, what="sweep"))
    if spec.contribution_cache:
        points = [_with_cache(p, path / "contribution_cache") for p in points]
    if spec.trace_cache:
        points = [_with_trace_cache(p, path / "trace_cache") for p in points]
    run_dirs = {p.run_id: path / p.run_id for p in points}
    columns = grid_columns_of(spec)
    results: dict[str, dict[str, Any]] = {}
    manifest: dict[str, Any] = {
        "name": spec.name,
        "created": datetime.now(timezone.utc).isoformat(),
        "status": "running",
        "engine": engine,
        "workers": workers,
        "address": address,
        "spec": spec.model_dump(mode="json", exclude=None if seeds else {"replicates", "replicate_sets"}),
        "axes": spec.axes(),
        "versions": versions(),
        "results": "results.csv",
        "plot": None,
        "calibrations": calibrations,
        "points": [],
    }
    manifest["base_dir"] = None if base_dir is None else str(Path(base_dir).resolve())
    earlier = _earlier(path, run_dirs, say) if resume is not None else {}
    results.update(earlier)
    if resume is not None:
        before = json.loads((path / "sweep.json").read_text())
        manifest["created"] = before.get("created", manifest["created"])
        manifest["resumes"] = [
            *before.get("resumes", []),
            {"at": datetime.now(timezone.utc).isoformat(), "kept": len(earlier)},
        ]
    if seeds:
        manifest["replicates"] = {"seeds": seeds, "sets": list(spec.replicate_sets), "fields": spec.replicate_fields()}
        manifest["summary"] = "summary.csv" if replicated else None

    def write_state() -> None:
        manifest["points"] = [
            {
                "id": p.run_id,
                **({"point": p.id, "replicate": p.replicate} if replicated else {}),
                "values": p.values,
                "overrides": p.overrides,
                "run_dir": str(run_dirs[p.run_id]),
                **{
                    k: results.get(p.run_id, {}).get(k)
                    for k in ("status", "error", "wall_s", "host", "cache", "trace_replayed", "attempts")
                },
            }
            for p in points
        ]
        manifest["contribution_cache"] = cache_totals(results.values())
        for entry in manifest["points"]:
            entry["status"] = entry["status"] or "pending"
        rows = gather_rows(spec, points, results, run_dirs)
        write_csv(path / "results.csv", rows, columns, replicated)
        if replicated:
            write_summary_csv(path / "summary.csv", summarize_replicates(rows, columns), columns)
        manifest["tables"] = seal_tables(path)  # results.parquet too, and every table's fingerprint
        tmp = path / "sweep.json.tmp"
        tmp.write_text(json.dumps(_json_safe(manifest), indent=2))
        os.replace(tmp, path / "sweep.json")

    def finished(result: dict[str, Any]) -> None:
        results[result["id"]] = result
        tail = f": {result['error']}" if result["error"] else ""
        wall = format_cell(result["wall_s"], ".1f")
        c = result.get("cache")
        hits = f", {c['hits']}/{c['hits'] + c['misses']} contributions from the cache" if c else ""
        say(f"[{len(results)}/{len(points)}] {result['id']}: {result['status']} ({wall} s{hits}){tail}")
        write_state()

    write_state()
    size = (
        f"{len(grid)} points x {len(seeds)} replicates = {len(points)} runs" if replicated else f"{len(points)} points"
    )
    say(f"sweep directory: {path} ({size}, engine {engine}, {workers} workers)")
    tasks: list[dict[str, Any]] = [
        {
            "id": p.run_id,
            "scenario": p.scenario.model_dump(mode="json"),
            "run_dir": str(run_dirs[p.run_id]),
            "cwd": os.getcwd(),
            "sweep_id": path.name,
        }
        for p in points
        if p.run_id not in earlier
    ]
    for p in points:  # a point that did not complete runs again from nothing (the same records)
        if p.run_id not in earlier:
            shutil.rmtree(run_dirs[p.run_id], ignore_errors=True)
    if resume is not None:
        say(f"resuming {path}: {len(earlier)} {unit} complete and verified, {len(tasks)} to run")
    try:
        if engine == "ray":
            from .ray_engine import run_ray

            run_ray(
                tasks,
                workers,
                address,
                finished,
                shared_dir=spec.shared_dir,
                sweep_dir=path,
                retries=spec.retries,
                say=say,
            )
        else:
            run_local(tasks, workers, finished)
        manifest["status"] = (
            "complete" if all(r["status"] == "complete" for r in results.values()) else "complete_with_failures"
        )
    except KeyboardInterrupt as e:  # Ctrl-C, SIGTERM, SIGHUP: say what is saved and how to go on
        manifest["status"] = f"interrupted: {e}" if str(e) else "interrupted: KeyboardInterrupt"
        manifest["hint"] = f"continue with: vmc sweep --resume {shlex.quote(str(path))}"
        done = sum(r["status"] == "complete" for r in results.values())
        raise KeyboardInterrupt(
            f"sweep interrupted{f' ({e})' if str(e) else ''}: {done} of {len(points)} {unit} complete, saved in "
            f"{path} (sweep.json, results.csv); {manifest['hint']}"
        ) from None
    except BaseException as e:
        manifest["status"] = f"interrupted: {type(e).__name__}"
        raise
    finally:
        rows = gather_rows(spec, points, results, run_dirs)
        if manifest["status"] != "running":
            plot = plot_sweep(
                rows,
                columns[next(iter(spec.grid))],
                path / "sweep.png",
                averaged=len(spec.grid) > 1,
                replicated=replicated,
            )
            manifest["plot"] = plot.name if plot else None
        write_state()
    result = SweepResult(
        path, manifest["points"], rows, columns, summarize_replicates(rows, columns) if replicated else []
    )
    say(result.table())
    totals = manifest.get("contribution_cache")
    if totals:
        say(
            f"contribution cache: {totals['hits']} of {totals['asked']} contributions loaded instead of trained "
            f"(hit rate {100 * totals['hit_rate']:.0f} %), {totals['weights_reused']} computed at trained weights "
            f"another point kept (Fisher only)"
            + (
                f", {totals['rejected']} entries did not verify (not used; computed again)"
                if totals["rejected"]
                else ""
            )
            + f"; {path / 'contribution_cache'}"
        )
    short = [
        f"{r['point']}{_replicate_tag(r)} {r['method']} ({r['unconverged_solves']})"
        for r in rows
        if isinstance(r.get("unconverged_solves"), int) and r["unconverged_solves"] > 0
    ]
    if short:
        say(
            f"warning: solves stopped before their tolerance in {len(short)} {unit[:-1]}-method pair(s): {', '.join(short[:8])}"
            f"{', ...' if len(short) > 8 else ''} (results.csv column unconverged_solves; each run's summary names "
            f"the requests)"
        )
    replayed = [p for p in manifest["points"] if p.get("trace_replayed")]
    if replayed:
        say(
            f"trace cache: {len(replayed)} of {len(points)} {unit} replayed the traffic another {unit[:-1]} recorded "
            f"instead of running SUMO; {path / 'trace_cache'}"
        )
    say(
        f"results: {path / 'results.csv'}"
        + (f" and {path / 'results.parquet'}" if (path / "results.parquet").is_file() else "")
        + (f", summary: {path / 'summary.csv'}" if replicated else "")
        + (f", plot: {path / 'sweep.png'}" if manifest["plot"] else "")
    )
    return result


def _earlier(path: Path, run_dirs: dict[str, Path], say: Callable[[str], None]) -> dict[str, dict[str, Any]]:
    """The results of the points a sweep being resumed completed, each verified (its run directory
    complete, its records, models and trace those its manifest fingerprinted); a point that does
    not verify is left out, to run again, and said."""
    from fl_core.errors import CorruptFileError

    state = path / "sweep.json"
    if not state.is_file():
        raise ConfigError(f"{path}: not a sweep directory (no sweep.json)")
    kept: dict[str, dict[str, Any]] = {}
    for entry in json.loads(state.read_text()).get("points", []):
        rid = entry.get("id")
        if entry.get("status") != "complete" or rid not in run_dirs:
            continue
        run = RunDir(run_dirs[rid], create=False) if run_dirs[rid].is_dir() else None
        try:
            if run is None or run.manifest().get("status") != "complete":
                raise CorruptFileError(f"{run_dirs[rid]}: no complete run")
            for name in ("records.jsonl", "models.safetensors", "trace.jsonl"):
                run.verify_file(name)
            rows = method_totals(run)
        except (CorruptFileError, OSError, ValueError) as e:
            say(f"{rid}: recorded complete but does not verify ({e}); it runs again")
            continue
        keys = ("wall_s", "host", "cache", "trace_replayed", "attempts")
        kept[rid] = {"id": rid, "status": "complete", "error": None, "rows": rows, **{k: entry.get(k) for k in keys}}
    return kept


def resume_sweep(
    sweep_dir: str | Path,
    *,
    engine: str | None = None,
    workers: int | None = None,
    address: str | None = None,
    say: Callable[[str], None] = print,
) -> SweepResult:
    """Run the points of the sweep in ``sweep_dir`` that did not complete (or do not verify), with
    the spec its ``sweep.json`` recorded; the points that completed are kept as they are."""
    path = Path(sweep_dir)
    state = path / "sweep.json"
    if not state.is_file():
        raise ConfigError(f"{path}: not a sweep directory (no sweep.json)")
    recorded = json.loads(state.read_text())
    spec = load_model(SweepSpec, None, recorded["spec"], str(state))
    return run_sweep(
        spec,
        path.parent,
        base_dir=recorded.get("base_dir"),
        engine=engine or recorded.get("engine"),
        workers=workers,
        address=address,
        say=say,
        where=str(state),
        resume=path,
    )


def _replicate_tag(row: dict[str, Any]) -> str:
    return f" rep{row['replicate']}" if "replicate" in row else ""


def _with_cache(point: GridPoint, directory: Path) -> GridPoint:
    """``point`` with the sweep's shared contribution cache, unless its scenario names one."""
    compute = point.scenario.compute
    if compute.contribution_cache is not None:
        return point
    scenario = point.scenario.model_copy(
        update={"compute": compute.model_copy(update={"contribution_cache": str(directory)})}
    )
    return replace(point, scenario=scenario)


def _with_trace_cache(point: GridPoint, directory: Path) -> GridPoint:
    """``point`` with the sweep's shared trace cache, unless its source runs no SUMO or it names its own cache."""
    mobility = point.scenario.mobility
    if not mobility.runs_sumo or mobility.trace_cache is not None:
        return point
    scenario = point.scenario.model_copy(
        update={"mobility": mobility.model_copy(update={"trace_cache": str(directory)})}
    )
    return replace(point, scenario=scenario)


def cache_totals(results: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """The points' cache use summed: hits, asked, trained, computed at cached trained weights
    (``weights_reused``: Fisher only) and the hit rate; None if unused."""
    used = [r["cache"] for r in results if r.get("cache")]
    if not used:
        return None
    hits, misses = sum(c["hits"] for c in used), sum(c["misses"] for c in used)
    reused = sum(c.get("weights_reused", 0) for c in used)
    return {
        "hits": hits,
        "asked": hits + misses,
        "trained": misses - reused,
        "weights_reused": reused,
        "rejected": sum(c.get("rejected", 0) for c in used),
        "hit_rate": round(hits / max(1, hits + misses), 4),
    }


def _json_safe(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj
