"""SUMO's floating car data (``--fcd-output``) read as a stream of position samples.

Two forms, as SUMO writes them (gzipped when the name ends in ``.gz``):

* XML, root ``<fcd-export>``: one ``<timestep time="t">`` per sample holding a
  ``<vehicle id x y speed .../>`` per vehicle (persons and containers are skipped).
* CSV, when the output name ends in ``.csv``: a header naming at least ``timestep_time``,
  ``vehicle_id``, ``vehicle_x``, ``vehicle_y`` and ``vehicle_speed`` (``;`` between columns), one
  row per vehicle and time step, and a row with the time alone for an empty step.

Positions are network coordinates (SUMO's default), so that they meet the RSUs placed on the
network; lon/lat (``--fcd-output.geo``) is converted with the network's projection when the rules
say so (:mod:`mobility.fcd_rules`). :func:`inspect_fcd` streams a file once, refusing (as
:class:`FcdError`, naming the file and what is wrong) a missing file, one that is not FCD, no
vehicle at all, a vehicle without ``x``, ``y`` or ``speed`` (named as missing: a speed is not
derived from positions, which would give an average over the step where SUMO records the speed at
its end), a time or coordinate that is not a finite number, times that do not increase, a vehicle
twice in one step, a CSV without the columns above, and a vehicle that breaks the rules of
:class:`mobility.fcd_rules.FcdRules` (moving faster than any vehicle can, off the network, or
lon/lat taken for metres); it returns what the file holds, the vehicles the rules dropped, and its
SHA-256. :func:`iter_samples` streams the samples again for a replay (converted, dropped vehicles
left out); neither ever holds more than one time step of a multi-gigabyte file (XML through
``iterparse``, elements cleared as read).

:class:`FcdPositions` gives the vehicles' states at any time: a sample's own states at its time,
and between two consecutive samples ``period`` or less apart (``period``: the file's smallest
step between samples) the vehicles present in both, each moved linearly from one sample to the
next (position and speed). A vehicle moving at most ``v_max`` between two samples ``dt`` apart
lies within ``v_max * dt / 2`` of its interpolated position (the bound is reached at mid-interval:
it is within ``v_max * s`` of the earlier sample's position after ``s`` seconds and within
``v_max * (dt - s)`` of the later one's), plus the width of a lane change in between (SUMO moves a
vehicle to the next lane in one step). A vehicle in only one of the two samples (it entered or
left the network in between) is present at its own sample only, so its appearance or departure is
seen at most ``dt`` from when it happened. A longer gap (SUMO leaves empty steps out with
``--fcd-output.skip-empty``) holds nobody.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import math
import os
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np

from mobility.errors import FcdError
from mobility.fcd_rules import FcdRules, RuleCheck

Sample = tuple[float, list[str], np.ndarray]
"""One time step of FCD: (time in s, vehicle ids, array of their (x, y, speed), one row each)."""

CSV_COLUMNS = ("timestep_time", "vehicle_id", "vehicle_x", "vehicle_y", "vehicle_speed")
_FIELDS = ("x", "y", "speed")
_EPS = 1e-6
_EMPTY = np.zeros((0, 3))


@dataclass(frozen=True)
class FcdSummary:
    """What an FCD file holds (time steps, their span and period, vehicles) and its digest."""

    path: str
    format: str
    sha256: str
    bytes: int
    samples: int
    first: float
    last: float
    period: float | None
    vehicles: int
    max_speed: float
    rules: dict[str, Any] = field(default_factory=dict)
    dropped: dict[str, str] = field(default_factory=dict)
    """The vehicles left out under ``FcdRules.drop``, each with the rule it broke."""

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (trace headers, manifests)."""
        return asdict(self)


def fcd_format(path: str | os.PathLike[str]) -> str:
    """``csv`` when the name ends in ``.csv`` (or ``.csv.gz``), as SUMO decides it, else ``xml``."""
    name = Path(path).name.lower()
    return "csv" if name.endswith(".csv") or name.endswith(".csv.gz") else "xml"


class _Hashing(io.RawIOBase):
    """A readable file that feeds every byte it hands out into a SHA-256."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        self.sha256 = hashlib.sha256()
        self.bytes = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        n = self._raw.readinto(b)  # type: ignore[attr-defined]
        if n:
            self.sha256.update(memoryview(b)[:n])
            self.bytes += n
        return n or 0

    def drain(self) -> None:
        """Read (and hash) whatever the parser left unread."""
        while chunk := self._raw.read(1 << 20):
            self.sha256.update(chunk)
            self.bytes += len(chunk)

    def close(self) -> None:
        self._raw.close()
        super().close()


def _number(text: str | None, path: Path, what: str, missing: str | None = None) -> float:
    if missing is not None and (text is None or not text.strip()):
        raise FcdError(f"{path}: {missing}")
    try:
        value = float(text) if text is not None else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise FcdError(f"{path}: {what} is not a finite number: {text!r}")
    return value


def _step(path: Path, t: float, text: str, last: float) -> None:
    if t == last:
        raise FcdError(f"{path}: time {text} appears in two time steps")
    if t < last:
        raise FcdError(f"{path}: times are not sorted: time step {text} comes after {last:g}")


def _sample(path: Path, t: float, text: str, ids: list[str], rows: list[tuple[float, float, float]]) -> Sample:
    if not rows:
        return t, ids, _EMPTY
    states = np.array(rows, dtype=float)
    if not np.isfinite(states).all():
        i, k = np.argwhere(~np.isfinite(states))[0]
        raise FcdError(f"{path}: time step {text}: vehicle {ids[i]!r}'s {_FIELDS[k]} is not a finite number")
    if len(set(ids)) != len(ids):
        twice = sorted({v for v in ids if ids.count(v) > 1})
        raise FcdError(f"{path}: vehicle {twice[0]!r} appears twice in time step {text}")
    return t, ids, states


def _xml_samples(stream: IO[bytes], path: Path) -> Iterator[Sample]:
    events = ET.iterparse(stream, events=("start", "end"))
    try:
        _, root = next(events)
    except ET.ParseError as exc:
        raise FcdError(f"{path}: not an XML file ({exc})") from None
    if root.tag != "fcd-export":
        raise FcdError(f"{path}: not SUMO FCD: its root element is <{root.tag}>, not <fcd-export>")
    last = -math.inf
    try:
        for kind, elem in events:
            if kind != "end" or elem.tag != "timestep":
                continue
            text = elem.get("time", "")
            t = _number(elem.get("time"), path, "a time step's time", "a time step without a `time` attribute")
            _step(path, t, text, last)
            last = t
            ids: list[str] = []
            rows: list[tuple[float, float, float]] = []
            for v in elem:
                if v.tag != "vehicle":
                    continue
                get = v.get
                ids.append(get("id") or "")
                try:
                    rows.append((float(get("x")), float(get("y")), float(get("speed"))))
                except (TypeError, ValueError):
                    for k in _FIELDS:
                        _number(
                            get(k), path, f"time step {text}: vehicle {ids[-1]!r}'s {k}", _missing(text, ids[-1], k)
                        )
            if "" in ids:
                raise FcdError(f"{path}: time step {text}: a vehicle without an id")
            root.clear()
            yield _sample(path, t, text, ids, rows)
    except ET.ParseError as exc:
        raise FcdError(f"{path}: malformed XML ({exc})") from None


def _missing(time: str, vehicle: str, name: str) -> str:
    hint = " (SUMO leaves it out when --fcd-output.attributes does not list it)" if name == "speed" else ""
    return f"time step {time}: vehicle {vehicle!r} has no `{name}` attribute{hint}; a replay needs x, y and speed"


def _csv_samples(stream: IO[bytes], path: Path) -> Iterator[Sample]:
    text = io.TextIOWrapper(stream, encoding="utf-8", newline="")
    try:
        yield from _csv_rows(text, path)
    finally:
        text.detach()  # the caller closes the file (after hashing what is left of it)


def _csv_rows(text: io.TextIOWrapper, path: Path) -> Iterator[Sample]:
    first = text.readline()
    delimiter = next((d for d in (";", ",", "\t") if d in first), ";")
    header = next(csv.reader([first], delimiter=delimiter), [])
    missing = [c for c in CSV_COLUMNS if c not in header]
    if missing:
        raise FcdError(
            f"{path}: a CSV without the column(s) {missing} (it has {header[:12]}); SUMO writes them with "
            "--fcd-output NAME.csv"
        )
    it, iv, ix, iy, isp = (header.index(c) for c in CSV_COLUMNS)
    last, cur_text = -math.inf, ""
    ids: list[str] = []
    rows: list[tuple[float, float, float]] = []
    for line, row in enumerate(csv.reader(text, delimiter=delimiter), 2):
        if not row:
            continue
        cell = row[it] if it < len(row) else ""
        t = _number(cell, path, f"line {line}: timestep_time")
        if t != last:
            if t < last:
                raise FcdError(f"{path}: times are not sorted: line {line} has time {cell} after {last:g}")
            if ids or math.isfinite(last):
                yield _sample(path, last, cur_text, ids, rows)
            last, cur_text, ids, rows = t, cell, [], []
        vid = row[iv] if iv < len(row) else ""
        if not vid:
            continue  # an empty step, or a person's row
        ids.append(vid)
        try:
            rows.append((float(row[ix]), float(row[iy]), float(row[isp])))
        except (IndexError, ValueError):
            for i, c in zip((ix, iy, isp), CSV_COLUMNS[2:], strict=True):
                why = "an empty cell" if i < len(row) else "the row ends before it"
                lacking = f"line {line}: time step {cell}: vehicle {vid!r} has no {c} ({why})"
                _number(row[i] if i < len(row) else None, path, f"line {line}: {c}", lacking)
    if math.isfinite(last):
        yield _sample(path, last, cur_text, ids, rows)


def _open(path: Path) -> tuple[IO[bytes], _Hashing]:
    if not path.is_file():
        raise FcdError(f"FCD file {path} does not exist")
    hashing = _Hashing(open(path, "rb"))  # noqa: SIM115  closed by _stream, which reads it to the end
    stream: IO[bytes] = io.BufferedReader(hashing, 1 << 20)
    if path.name.lower().endswith(".gz"):
        stream = gzip.GzipFile(fileobj=stream)  # type: ignore[assignment]
    return stream, hashing


def _stream(path: Path, rules: FcdRules) -> Iterator[tuple[Sample, _Hashing]]:
    stream, hashing = _open(path)
    parse = _csv_samples if fcd_format(path) == "csv" else _xml_samples
    try:
        for t, ids, states in parse(stream, path):
            yield (t, ids, rules.positions(path, t, ids, states)), hashing
        hashing.drain()
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise FcdError(f"{path}: cannot be read ({exc})") from None
    finally:
        stream.close()
        hashing.close()  # a GzipFile leaves the file it reads open


def iter_samples(
    path: str | os.PathLike[str], rules: FcdRules | None = None, drop: Iterable[str] = ()
) -> Iterator[Sample]:
    """The file's time steps in order, one at a time, positions as ``rules`` convert them (default
    :class:`FcdRules`), without the vehicles of ``drop`` (those :func:`inspect_fcd` dropped)."""
    dropped = set(drop)
    for (t, ids, states), _ in _stream(Path(path), rules or FcdRules()):
        if dropped and dropped.intersection(ids):
            keep = [i for i, v in enumerate(ids) if v not in dropped]
            ids, states = [ids[i] for i in keep], states[keep] if keep else _EMPTY
        yield t, ids, states


_SUMMARIES: dict[tuple[str, int, int, FcdRules], FcdSummary] = {}


def inspect_fcd(path: str | os.PathLike[str], rules: FcdRules | None = None) -> FcdSummary:
    """Check a whole FCD file (see the module docstring) against ``rules`` (default
    :class:`FcdRules`) and say what it holds; memoised per path, size, modification time and
    rules in this process, so a check before a run costs one pass."""
    p = Path(path)
    if not p.is_file():
        raise FcdError(f"FCD file {p} does not exist")
    rules = rules or FcdRules()
    st = p.stat()
    key = (os.path.realpath(p), st.st_size, st.st_mtime_ns, rules)
    if key in _SUMMARIES:
        return _SUMMARIES[key]
    samples, first, last, period, speed = 0, math.nan, math.nan, math.inf, 0.0
    vehicles: set[str] = set()
    hashing = None
    check = RuleCheck(p, rules)
    for (t, ids, states), hashing in _stream(p, rules):  # noqa: B007  the file's digest is read after the loop
        check.feed(t, ids, states)
        if samples:
            period = min(period, t - last)
        else:
            first = t
        samples, last = samples + 1, t
        vehicles.update(ids)
        if len(ids):
            speed = max(speed, float(states[:, 2].max()))
    if not samples:
        raise FcdError(f"{p}: no time steps (an empty FCD file)")
    if not vehicles:
        raise FcdError(f"{p}: no vehicle in any of its {samples} time steps")
    assert hashing is not None  # set by the first sample
    dropped = check.finish(len(vehicles))
    summary = FcdSummary(
        path=str(p),
        format=fcd_format(p),
        sha256=hashing.sha256.hexdigest(),
        bytes=st.st_size,
        samples=samples,
        first=first,
        last=last,
        period=period if math.isfinite(period) else None,
        vehicles=len(vehicles),
        max_speed=speed,
        rules=rules.to_dict(),
        dropped=dropped,
    )
    _SUMMARIES[key] = summary
    return summary


class FcdPositions:
    """Vehicle states at non-decreasing times from a stream of samples (rule and error bound: the
    module docstring); ``period`` is the longest gap interpolated across (None: none is)."""

    def __init__(self, samples: Iterator[Sample], period: float | None) -> None:
        self._samples = samples
        self._gap = (period or 0.0) + _EPS
        self._prev: Sample | None = None
        self._next: Sample | None = next(samples, None)
        self._pair: tuple[list[str], np.ndarray, np.ndarray] | None = None
        self._time = -math.inf

    def at(self, t: float) -> tuple[list[str], np.ndarray]:
        """The ids of the vehicles present at time ``t`` and their (x, y, speed), one row each."""
        if t < self._time - _EPS:
            raise ValueError(f"FCD positions are read forwards: {t} after {self._time}")
        self._time = t
        while self._next is not None and self._next[0] <= t + _EPS:
            self._prev, self._next, self._pair = self._next, next(self._samples, None), None
        prev, nxt = self._prev, self._next
        if prev is None:
            return [], _EMPTY
        if abs(prev[0] - t) <= _EPS:
            return prev[1], prev[2]
        if nxt is None or nxt[0] - prev[0] > self._gap:
            return [], _EMPTY
        if self._pair is None:
            later = {v: i for i, v in enumerate(nxt[1])}
            both = [(i, later[v]) for i, v in enumerate(prev[1]) if v in later]
            ia = np.array([i for i, _ in both], dtype=int)
            ib = np.array([j for _, j in both], dtype=int)
            self._pair = [prev[1][i] for i in ia], prev[2][ia], nxt[2][ib]
        ids, a, b = self._pair
        w = (t - prev[0]) / (nxt[0] - prev[0])
        return ids, a + w * (b - a)

    def close(self) -> None:
        """Stop reading the file."""
        close = getattr(self._samples, "close", None)
        if close is not None:
            close()
