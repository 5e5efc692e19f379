"""``vmc export availability``: each vehicle's time in RSU coverage, in the shapes other FL tools read.

A vehicle is a client while it is in coverage. The export takes the coverage intervals of a run's
mobility trace, computed as ``vmc dwell`` computes them (:func:`mobility.dwell.coverage_visits`:
the union of the RSU cells, a visit from a join to the next leave, ``rsu`` the cell it began in), so
that a study in another framework gets the availability of the same real traffic. It reads a run
directory (its ``trace.jsonl``, or the trace a replayed run names in its manifest) or a trace file
alone. Every vehicle also gets an integer id, from 1 in order of first arrival, the same in every
format. Three formats:

``csv``
    ``client,rsu,start,end,censored,id``: one row per coverage interval, in order of start, in the
    trace's simulated seconds; ``censored`` is 1 for an interval still open when the trace ends (its
    ``end`` is the trace's end, a lower bound). From a run directory a second file,
    ``<name>.contributions.csv``, lists every contribution its records name:
    ``client,id,method,record,kind,request_time,done_time,outcome,failure,work``, ``outcome``
    ``arrived`` or ``not_arrived`` (the record's ``arrived`` / ``not_arrived``), ``failure`` the
    ``tag:reason`` of the record's ``failed`` entries for that client, ``work`` its sample-epochs
    where the record has ``client_work``. Records keep no per-client upload or compute seconds: a
    contribution was trained and uploaded between its record's ``request_time`` and ``done_time``.
    Failed withdrawals are not contributions and are left out. Both files begin with one comment
    line, ``# vmc-sim availability {...}`` (the metadata as JSON): read them with
    ``pandas.read_csv(path, comment="#")``.

``fedscale``
    FedScale's client availability trace (``--device_avail_file``), matched to the reader of
    FedScale v0.5 (``ClientMetadata.is_active`` in ``fedscale/cloud/internal/client_metadata.py``
    and ``register_client`` in ``fedscale/cloud/client_manager.py``), as JSON:
    ``{"format", "version", "meta", "client_ids": {vehicle: id}, "client_behave_trace": {id: {...}}}``.
    Per client: ``active[i]`` and ``inactive[i]`` are the start and the end of its i-th interval in
    coverage (the reader takes a client as online while ``active[i] <= t <= inactive[i]``, so
    ``inactive`` holds the starts of its offline periods), in seconds after the trace's begin
    (FedScale's clock starts at 0), sorted and alternating; ``finish_time`` is the trace's length
    (the reader takes time modulo it, so a longer FedScale run replays the traffic again);
    ``duration``, which FedScale's documentation lists without defining and its reader does not
    read, is the client's total time in coverage; ``model`` (a device name) is ``"vehicle"``.
    Times are whole numbers where the trace's are (FedScale documents them as INT). FedScale reads
    its trace file as a pickled dict keyed by integer client id, a format this project does not write:
    the conversion is the user's one step, from ``doc["client_behave_trace"]`` with integer keys. Its client manager
    gives client ``c`` the entry at position ``c mod N`` of the keys, not the entry keyed ``c``:
    to keep client ``c`` on vehicle ``c``, order the keys ``N, 1, ..., N - 1`` when converting.

``flower``
    A schedule for a Flower bridge, as JSON: ``{"format", "version", "meta", "begin", "end",
    "duration", "nodes": [{"node_id", "vehicle", "intervals": [[start, end], ...], "open_at_end"}],
    "requests": [{"time", "kind", "node_id", "vehicle"}]}``. A node is reachable within its intervals
    (the CSV's, in the trace's simulated seconds); ``requests`` are the joins (an interval's start)
    and leaves (the end of an interval not open at the end), ordered by time and, at one instant, in
    the order the trace records them (the order a run meets them). From a run directory, ``radio``
    carries the co-simulation's link outcomes: per request-driven method, every record's edit, the
    uploads that arrived and those lost (with why), the take-outs, and per node its link time
    (:mod:`vmc_sim.rundir.radio_schedule`), so that a Flower replay drops what ``vmc run`` lost.

Every output carries ``meta``: the run directory and its status, the scenario's name, the seeds,
the trace's path, SHA-256, line count and whether it is complete, the export format and the tool's
version, and from a run directory the contributions counted and the bytes of a last record cut off
by a crash (left out, as a resume drops it). What is read is verified first, and nothing is written
when it does not verify: the trace must exist and parse (a cut-off last line is refused naming the
file); a run's trace must carry the header its manifest recorded (``mobility``), and the SHA-256
and line count the manifest records under ``trace`` when it does.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fl_core.errors import CorruptFileError
from mobility.cache import file_sha256
from mobility.dwell import Visit, coverage_visits
from mobility.errors import TraceError
from mobility.events import MobilityEvent
from mobility.trace import iter_records, read_header

from .directory import RunDir, file_fingerprint, read_manifest
from .outputs import claim_file

FORMATS = ("csv", "fedscale", "flower")
EXPORT_VERSION = 1
DEFAULT_NAMES = {
    "csv": "availability.csv",
    "fedscale": "availability.fedscale.json",
    "flower": "availability.flower.json",
}
CONTRIBUTION_COLUMNS = (
    "client",
    "id",
    "method",
    "record",
    "kind",
    "request_time",
    "done_time",
    "outcome",
    "failure",
    "work",
)


@dataclass(frozen=True)
class Availability:
    """A verified trace's coverage intervals, with where they came from.

    ``visits`` are :func:`mobility.dwell.coverage_visits` of the trace (``leave`` None: still open
    at ``end``); ``ids`` numbers the vehicles from 1 in order of first arrival; ``contributions``
    holds the run's contribution rows and ``radio`` its link outcomes by method (both None for a
    trace without its run directory)."""

    meta: dict[str, Any]
    begin: float
    end: float
    visits: list[Visit]
    ids: dict[str, int]
    contributions: list[dict[str, Any]] | None
    radio: dict[str, Any] | None = None

    @property
    def duration(self) -> float:
        """Seconds of simulated time the trace covers."""
        return self.end - self.begin

    def intervals(self) -> list[tuple[str, str, float, float, bool]]:
        """``(vehicle, rsu, start, end, censored)`` per visit, an open one ending at the trace's end."""
        return [(v.vehicle, v.rsu, v.join, self.end if v.leave is None else v.leave, v.censored) for v in self.visits]


def _locate(source: Path) -> tuple[Path, Path | None, dict[str, Any] | None]:
    """(trace, run directory or None, its manifest or None) for a run directory or a trace file."""
    if source.is_dir():
        manifest = read_manifest(source / "manifest.json")
        trace = source / "trace.jsonl"
        if trace.is_file():
            RunDir(source, create=False).verify_file("trace.jsonl")
            return trace, source, manifest
        mobility = manifest["config"].get("mobility") or {}
        from ..scenario.input_digests import changed_inputs  # here: the parser and a run's own trace need neither
        from ..sources.registry import SOURCES

        kind = SOURCES.get(str(mobility.get("source")))
        replayed = mobility.get("trace") if kind is not None and kind.replays_trace else None
        if isinstance(replayed, str) and Path(replayed).is_file():
            changed = changed_inputs(
                {k: v for k, v in (manifest.get("inputs") or {}).items() if k == replayed},
                {replayed: file_sha256(replayed)},
            )
            if changed:
                raise CorruptFileError(f"{source}: the trace it replayed changed since the run: {changed[0]}")
            return Path(replayed), source, manifest
        if isinstance(replayed, str):
            raise FileNotFoundError(f"{source}: no trace.jsonl, and the trace the run replayed ({replayed}) is gone")
        raise FileNotFoundError(f"{source}: no trace.jsonl: the run recorded no traffic to export")
    if not source.is_file():
        raise FileNotFoundError(f"{source}: no such run directory or trace file")
    if source.name == "trace.jsonl" and (source.parent / "manifest.json").is_file():
        RunDir(source.parent, create=False).verify_file("trace.jsonl")
        return source, source.parent, read_manifest(source.parent / "manifest.json")
    return source, None, None


def _read_events(trace: Path) -> tuple[list[MobilityEvent], float | None, dict[str, Any] | None]:
    """(events, time of the last record, end record) of a trace, validated line by line."""
    events: list[MobilityEvent] = []
    last: float | None = None
    end: dict[str, Any] | None = None
    for _, rec in iter_records(trace):
        last = float(rec["time"])
        if rec["type"] == "event":
            events.append(MobilityEvent.from_dict({k: v for k, v in rec.items() if k != "type"}))
        elif rec["type"] == "end":
            end = rec
    return events, last, end


def _check_against_manifest(
    trace: Path, header: dict[str, Any], digest: dict[str, Any], run: Path, manifest: dict
) -> None:
    """Refuse a trace that is not the one the run's manifest describes."""
    where = run / "manifest.json"
    recorded = manifest.get("mobility")
    if isinstance(recorded, dict):
        for key, value in header.items():
            if recorded.get(key) != value:
                raise TraceError(
                    f"{trace}: header field {key!r} differs from {where} (mobility.{key}): not this run's trace"
                )
    sealed = manifest.get("trace")
    if isinstance(sealed, dict):
        for key in ("sha256", "lines"):
            if key in sealed and sealed[key] != digest[key]:
                raise TraceError(
                    f"{trace}: {key} is {digest[key]}, {where} records {sealed[key]}: the trace changed since the run"
                )


def _contributions(run: Path, ids: dict[str, int]) -> list[dict[str, Any]]:
    """One row per contribution the run's records name, by client id, then time and method."""
    rows = []
    for r in RunDir(run, create=False).records():
        failures: dict[str, list[str]] = {}
        for f in r.get("failed") or []:
            if isinstance(f, dict) and f.get("tag") != "withdrawal":
                failures.setdefault(str(f.get("client")), []).append(f"{f.get('tag')}:{f.get('reason')}")
        work = r.get("client_work") or {}
        for outcome in ("arrived", "not_arrived"):
            for c in r.get(outcome) or []:
                client = str(c)
                rows.append(
                    {
                        "client": client,
                        "id": ids.get(client),
                        "method": r["method"],
                        "record": r.get("index"),
                        "kind": r.get("kind"),
                        "request_time": r.get("request_time"),
                        "done_time": r.get("done_time"),
                        "outcome": outcome,
                        "failure": ";".join(failures.get(client, [])),
                        "work": work.get(client) if isinstance(work, dict) else None,
                    }
                )
    big = len(ids) + 1
    rows.sort(key=lambda row: (row["id"] or big, row["client"], row["request_time"] or 0.0, row["method"]))
    return rows


def load_availability(source: str | os.PathLike[str]) -> Availability:
    """Read and verify a run directory's (or a trace file's) coverage intervals and provenance.

    Raises FileNotFoundError for a missing run, trace or manifest, TraceError naming the file for
    a damaged trace or one that does not match its manifest, CorruptFileError for damaged records."""
    src = Path(source)
    trace, run, manifest = _locate(src)
    header = read_header(trace)
    events, last, end_record = _read_events(trace)
    digest = file_fingerprint(trace)
    if run is not None and manifest is not None:
        _check_against_manifest(trace, header, digest, run, manifest)
    clock = header.get("clock")
    begin = float((clock.get("begin") if isinstance(clock, dict) else None) or 0.0)
    end = float(end_record["time"]) if end_record is not None else (last if last is not None else begin)
    visits = coverage_visits(events)
    ids: dict[str, int] = {}
    for v in visits:
        ids.setdefault(v.vehicle, len(ids) + 1)
    from fl_core import __version__

    config = (manifest or {}).get("config") or {}
    meta: dict[str, Any] = {
        "tool": {"name": "vmc-sim", "version": __version__},
        "export_version": EXPORT_VERSION,
        "source": str(src),
        "run": None if run is None else run.name,
        "run_status": None if manifest is None else manifest.get("status"),
        "scenario": config.get("name", header.get("scenario")),
        "seeds": manifest.get("seeds") if manifest is not None else {"sumo": header.get("seed")},
        "trace": {
            "path": str(trace),
            **{k: digest[k] for k in ("sha256", "lines")},
            "complete": end_record is not None,
            "status": None if end_record is None else end_record.get("status"),
        },
        "membership": (header.get("coverage") or {}).get("membership", "union"),
        "rsus": [r.get("id") for r in header.get("rsus") or [] if isinstance(r, dict)],
        "begin": begin,
        "end": end,
    }
    contributions = radio = None
    if run is not None and manifest is not None:
        from .radio_schedule import radio_section

        radio = radio_section(run, manifest)
    if run is not None:
        contributions = _contributions(run, ids)
        meta["records"] = {
            "contributions": len(contributions),
            "torn_tail_bytes": RunDir(run, create=False).torn_tail(),
        }
    return Availability(meta, begin, end, visits, ids, contributions, radio)


def _num(x: float) -> int | float:
    """A time as a whole number where it is one (FedScale documents INT), else as it is."""
    return int(x) if float(x).is_integer() else float(x)


def _comment(meta: dict[str, Any]) -> str:
    return "# vmc-sim availability " + json.dumps(meta, separators=(",", ":"), allow_nan=False) + "\n"


def availability_csv(av: Availability) -> str:
    """The ``csv`` format's interval file (metadata comment line, header, one row per interval)."""
    buf = io.StringIO()
    buf.write(_comment({**av.meta, "format": "csv", "time": "simulated seconds of the trace"}))
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["client", "rsu", "start", "end", "censored", "id"])
    for vehicle, rsu, start, end, censored in av.intervals():
        w.writerow([vehicle, rsu, _num(start), _num(end), int(censored), av.ids[vehicle]])
    return buf.getvalue()


def contributions_csv(av: Availability) -> str:
    """The ``csv`` format's contribution file (empty of rows when the run recorded none)."""
    buf = io.StringIO()
    buf.write(_comment({**av.meta, "format": "csv-contributions", "time": "simulated seconds of the run"}))
    w = csv.DictWriter(buf, fieldnames=CONTRIBUTION_COLUMNS, lineterminator="\n")
    w.writeheader()
    for row in av.contributions or []:
        w.writerow({k: "" if row[k] is None else row[k] for k in CONTRIBUTION_COLUMNS})
    return buf.getvalue()


def fedscale_trace(av: Availability) -> dict[str, Any]:
    """The ``fedscale`` document: FedScale v0.5's per-client availability fields, with the id map."""
    per: dict[str, list[tuple[float, float]]] = {}
    for vehicle, _, start, end, _ in av.intervals():
        per.setdefault(vehicle, []).append((start - av.begin, end - av.begin))
    traces = {
        str(av.ids[v]): {
            "duration": _num(sum(e - s for s, e in spans)),
            "inactive": [_num(e) for _, e in spans],
            "finish_time": _num(av.duration),
            "active": [_num(s) for s, _ in spans],
            "model": "vehicle",
        }
        for v, spans in sorted(per.items(), key=lambda kv: av.ids[kv[0]])
    }
    meta = {**av.meta, "format": "fedscale", "time": "seconds after the trace's begin (meta.begin)"}
    return {
        "format": "vmc-sim-availability-fedscale",
        "version": EXPORT_VERSION,
        "meta": meta,
        "client_ids": dict(av.ids),
        "client_behave_trace": traces,
    }


def flower_schedule(av: Availability) -> dict[str, Any]:
    """The ``flower`` document: per node its reachable intervals, and the join/leave requests in order."""
    nodes: dict[str, dict[str, Any]] = {
        v: {"node_id": i, "vehicle": v, "intervals": [], "open_at_end": False} for v, i in av.ids.items()
    }
    requests = []
    for (vehicle, _, start, end, censored), visit in zip(av.intervals(), av.visits, strict=True):
        node = nodes[vehicle]
        node["intervals"].append([start, end])
        node["open_at_end"] = censored
        requests.append((start, visit.join_seq, node["node_id"], "join", vehicle))
        if visit.leave_seq is not None:  # a closed visit (not censored)
            requests.append((end, visit.leave_seq, node["node_id"], "leave", vehicle))
    requests.sort(key=lambda r: r[:2])  # by time, then in the trace's order, as a run meets them
    meta = {**av.meta, "format": "flower", "time": "simulated seconds of the trace"}
    doc = {
        "format": "vmc-sim-availability-flower",
        "version": EXPORT_VERSION,
        "meta": meta,
        "begin": av.begin,
        "end": av.end,
        "duration": av.duration,
        "nodes": sorted(nodes.values(), key=lambda n: n["node_id"]),
        "requests": [{"time": t, "kind": k, "node_id": n, "vehicle": v} for t, _, n, k, v in requests],
    }
    if av.radio is not None:
        doc["radio"] = av.radio
    return doc


def _outputs(av: Availability, fmt: str, out: Path) -> dict[Path, str]:
    """Every file of ``fmt`` and its text, by path."""
    if fmt == "csv":
        files = {out: availability_csv(av)}
        if av.contributions is not None:
            stem = out.name[: -len(out.suffix)] if out.suffix else out.name
            files[out.with_name(f"{stem}.contributions.csv")] = contributions_csv(av)
        return files
    doc = fedscale_trace(av) if fmt == "fedscale" else flower_schedule(av)
    return {out: json.dumps(doc, indent=1, allow_nan=False) + "\n"}


def _write_all(files: dict[Path, str]) -> None:
    """Write every file through a temporary beside it; on failure none is left half written."""
    staged: list[tuple[Path, Path]] = []
    try:
        for path, text in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".tmp")
            staged.append((tmp, path))
            tmp.write_text(text, encoding="utf-8")
        for tmp, path in staged:
            os.replace(tmp, path)
    finally:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)


def write_availability(
    av: Availability, fmt: str, out: str | os.PathLike[str] | None = None, force: bool = False
) -> list[Path]:
    """Write ``av`` as ``fmt`` to ``out`` (a file; an existing directory, or a path ending in ``/``, for
    the default name in it; default: that name in the working directory). Every file is claimed first
    (:func:`vmc_sim.rundir.outputs.claim_file`: never inside a run or sweep, never onto an existing file
    unless ``force``), so a refusal writes nothing. Returns the files written."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown availability format {fmt!r} (one of {', '.join(FORMATS)})")
    target = Path(out) if out is not None else Path(DEFAULT_NAMES[fmt])
    if target.is_dir() or str(out).endswith(("/", os.sep)):
        target = target / DEFAULT_NAMES[fmt]
    files = _outputs(av, fmt, target)
    for path in files:
        claim_file(path, force=force)
    _write_all(files)
    return list(files)


def export_availability(
    source: str | os.PathLike[str], fmt: str = "csv", out: str | os.PathLike[str] | None = None, force: bool = False
) -> list[Path]:
    """Verify ``source`` (:func:`load_availability`), then write it (:func:`write_availability`)."""
    return write_availability(load_availability(source), fmt, out, force)


def _command(args: argparse.Namespace) -> int:
    av = load_availability(args.source)
    for path in write_availability(av, args.format, args.out, args.force):
        print(f"wrote {path}")
    open_at_end = sum(v.censored for v in av.visits)
    trace = av.meta["trace"]
    print(
        f"{len(av.ids)} vehicles, {len(av.visits)} coverage intervals ({open_at_end} open at the end), "
        f"{av.begin:g}-{av.end:g} s of {trace['path']} (sha256 {trace['sha256'][:12]}"
        + ("" if trace["complete"] else ", no end record: the recording was cut")
        + ")"
        + ("" if av.contributions is None else f"; {len(av.contributions)} contributions")
    )
    return 0


EXAMPLES = """\
formats:
  csv       client,rsu,start,end,censored,id per coverage interval (simulated s), and from a run
            directory NAME.contributions.csv: every contribution, arrived or not, with its record
  fedscale  FedScale's client_behave_trace fields (active, inactive, finish_time, duration) per
            integer client id, as JSON, with the vehicle -> id map (times from the trace's begin)
  flower    per node (id, vehicle) its reachable [start, end] intervals, the duration, and the
            join/leave requests in order, as JSON; from a run directory also the radio's outcomes
            (each record's edit, the uploads lost, the take-outs, per node its link time)
Every file carries the run, scenario, seeds, trace SHA-256 and tool version (CSV: a '#' first line).

examples:
  vmc export availability runs/<run>
  vmc export availability reports/lust_case_study/trace.jsonl --format fedscale --out lust.fedscale.json
"""


def add_export_parser(sub: Any) -> None:
    """``vmc export availability RUN --format csv|fedscale|flower [--out PATH]``."""
    p = sub.add_parser("export", help="write a run's data in the formats other tools read")
    what = p.add_subparsers(dest="what", required=True)
    a = what.add_parser(
        "availability",
        help="each vehicle's time in coverage, for FedScale, Flower or a CSV",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Write each vehicle's coverage intervals (as vmc dwell computes them) from a run directory "
        "or a trace file, verified first (nothing is written when the trace or the run does not verify).",
        epilog=EXAMPLES,
    )
    a.add_argument("source", metavar="RUN", help="a run directory, or a trace file (trace.jsonl)")
    a.add_argument("--format", choices=FORMATS, default="csv", help="output format (default: csv)")
    a.add_argument(
        "--out",
        metavar="PATH",
        help="output file, or a directory for the default name (default: availability.csv, "
        "availability.fedscale.json or availability.flower.json in the working directory); never inside a "
        "run or sweep directory",
    )
    a.add_argument("--force", action="store_true", help="replace output files that exist")
    a.set_defaults(func=_command)
