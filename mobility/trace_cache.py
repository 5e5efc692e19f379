"""A content-addressed cache of recorded traces: one SUMO run for every run of the same traffic.

A live source's join/leave events and member states are a deterministic function of what SUMO
is given (the network, routes and additional files by content, the seed, the time window, the
step length, the scale and extra arguments), the SUMO version, the RSUs, the coverage settings
and this package's code. :func:`trace_key` hashes exactly those, so a run whose federated side
differs (another dataset, method, rho or Fisher) but whose traffic is the same replays the trace
an earlier run recorded instead of stepping SUMO again; a replay reproduces the live run's
records exactly (see :mod:`mobility.source`).

An entry is the trace file plus a sidecar holding its SHA-256. It is used only if the sidecar
matches, the header names the same key and the trace ended by itself (status ``closed`` or
``finished``) no earlier than the run it serves needs; anything else is a miss (a rejected entry
is counted and recorded again). Only a complete trace is stored: a run that failed or was
interrupted leaves the cache as it was.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mobility.cache import cache_root, file_sha256
from mobility.coverage import CoverageConfig
from mobility.errors import TraceError
from mobility.rsu import Rsu
from mobility.source import SumoSource, TraceSource
from mobility.sumo import SumoConfig, sumo_version
from mobility.trace import iter_records, read_header

#: Bumped when what a trace records changes in a way the source hash below would not show.
TRACE_CACHE_VERSION = 1
#: Header meta entry naming the cache key a trace was recorded under.
KEY_FIELD = "trace_key"
#: End statuses of a trace that ran its whole window (``error`` never qualifies).
_COMPLETE = ("closed", "finished")
_EPS = 1e-6


def default_root() -> Path:
    """``traces`` beside the SUMO build cache (``$VMC_CACHE/traces``, else ``~/.cache/vmc-sim/traces``)."""
    return cache_root().parent / "traces"


_DIGESTS: dict[tuple[str, int, int], str] = {}


def file_digest(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file's bytes (memoised per path, size and modification time in this process)."""
    st = os.stat(path)
    k = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
    if k not in _DIGESTS:
        _DIGESTS[k] = file_sha256(path)
    return _DIGESTS[k]


_CODE: str | None = None


def code_digest() -> str:
    """SHA-256 of this package's Python sources: any change to how traffic becomes events is a new key."""
    global _CODE
    if _CODE is None:
        root = Path(__file__).resolve().parent
        h = hashlib.sha256()
        for p in sorted(root.rglob("*.py")):
            h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
        _CODE = h.hexdigest()
    return _CODE


def _by_content(sumo: SumoConfig) -> dict[str, Any]:
    """``sumo`` as a dict whose input files are named by their content (paths are not traffic)."""
    d = {k: v for k, v in sumo.to_dict().items() if k not in ("connect_timeout", "verbose")}
    for name in ("config_file", "net_file"):
        if d.get(name):
            d[name] = file_digest(d[name])
    for name in ("route_files", "additional_files"):
        d[name] = [file_digest(p) for p in d.get(name) or []]
    d["extra_args"] = [file_digest(a) if os.path.isfile(a) else a for a in d.get("extra_args") or []]
    if sumo.config_file:
        d["config_inputs"] = _config_inputs(sumo.config_file)
    return d


def _config_inputs(config_file: str) -> dict[str, list[str]]:
    """Every file a ``.sumocfg`` names (any option value that is an existing file, resolved against
    its folder), by content, per option."""
    import xml.etree.ElementTree as ET

    base = Path(config_file).resolve().parent
    out: dict[str, list[str]] = {}
    try:
        root = ET.parse(config_file).getroot()
    except (ET.ParseError, OSError):
        return out
    for el in root.iter():
        value = el.get("value")
        if value is None:
            continue
        files = [base / v.strip() for v in value.split(",") if v.strip()]
        if files and all(f.is_file() for f in files):
            out[el.tag.rsplit("}", 1)[-1]] = [file_digest(f) for f in files]
    return out


def trace_key(sumo: SumoConfig, rsus: Sequence[Rsu], coverage: CoverageConfig) -> str:
    """SHA-256 of everything a live source's trace depends on (a scenario's demand factor is
    SUMO's ``scale``, inside ``sumo``)."""
    parts = {
        "version": TRACE_CACHE_VERSION,
        "code": code_digest(),
        "sumo_version": sumo_version(),
        "sumo": _by_content(sumo),
        "rsus": [r.to_dict() for r in rsus],
        "coverage": coverage.to_dict(),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


@dataclass
class TraceCacheStats:
    """What a cache did in this process."""

    hits: int = 0
    misses: int = 0
    rejected: int = 0
    stored: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


_PEER: Any = None


def set_peer(peer: Any) -> None:
    """Another machine's copy of the trace cache every :class:`TraceCache` of this process uses:
    an object with ``fetch(names) -> {name: bytes}`` and ``push({name: bytes})``, names relative to
    the cache root (None: none). A fetched entry is verified as a local one."""
    global _PEER
    _PEER = peer


class TraceCache:
    """Traces under ``root``, addressed by :func:`trace_key`; with a peer (:func:`set_peer`) an
    entry missing here is fetched from it first, and every entry stored here is sent to it."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.stats = TraceCacheStats()
        self.peer = _PEER

    def _names(self, key: str) -> list[str]:
        return [f"{key[:2]}/{key}.jsonl", f"{key[:2]}/{key}.sha256"]  # the sidecar last

    def _fetch(self, key: str) -> None:
        """Bring ``key``'s entry from the peer when this copy lacks it (data first, sidecar last)."""
        if self.peer is None or all((self.root / n).is_file() for n in self._names(key)):
            return
        files = self.peer.fetch(self._names(key))
        for name in self._names(key):
            if name in files:
                target = self.root / name
                target.parent.mkdir(parents=True, exist_ok=True)
                tmp = target.with_name(f".{target.name}.fetch{os.getpid()}")
                tmp.write_bytes(files[name])
                os.replace(tmp, target)

    def _paths(self, key: str) -> tuple[Path, Path]:
        d = self.root / key[:2]
        return d / f"{key}.jsonl", d / f"{key}.sha256"

    def lookup(self, key: str, needed_end: float) -> Path | None:
        """The verified entry of ``key`` covering simulated time up to ``needed_end``, or None
        (a miss; an entry that is there but fails a check is counted as rejected)."""
        self._fetch(key)
        path, _ = self._paths(key)
        return path if self._check(path, key, needed_end) else None

    def _check(self, candidate: Path, key: str, needed_end: float) -> bool:
        """Whether ``candidate`` (the entry or a copy of it) verifies against ``key``'s sidecar, names
        ``key`` in its header and covers ``needed_end``; counts the hit, miss or rejection."""
        _, sidecar = self._paths(key)
        if not candidate.is_file() or not sidecar.is_file():
            self.stats.misses += 1
            return False
        try:
            ok = (
                sidecar.read_text().strip() == file_sha256(candidate)
                and read_header(candidate).get(KEY_FIELD) == key
                and complete_through(candidate, needed_end)
            )
        except (OSError, TraceError, ValueError):
            ok = False
        if ok:
            self.stats.hits += 1
        else:
            self.stats.rejected += 1
            self.stats.misses += 1
        return ok

    def copy_to(self, key: str, needed_end: float, dest: Path, overwrite: bool = False) -> bool:
        """Copy the entry of ``key`` to ``dest`` (the run's own trace) if the copy verifies; False
        (``dest`` untouched) on a miss."""
        self._fetch(key)
        path, sidecar = self._paths(key)
        if not path.is_file() or not sidecar.is_file():
            self.stats.misses += 1
            return False
        dest = Path(dest)
        if dest.exists() and not overwrite:
            raise FileExistsError(f"trace file {dest} already exists (pass overwrite=True to replace it)")
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(dest.name + ".copying")
        try:
            shutil.copyfile(path, tmp)
            if not self._check(tmp, key, needed_end):
                return False
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)
        return True

    def store(self, key: str, trace: Path, needed_end: float) -> bool:
        """Keep a copy of the complete ``trace`` recorded under ``key`` (atomically: a reader sees
        the old entry or the new one); False, storing nothing, if it is not complete."""
        if not complete_through(trace, needed_end) or read_header(trace).get(KEY_FIELD) != key:
            return False
        path, sidecar = self._paths(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{key[:12]}-", suffix=".tmp")
        os.close(fd)
        try:
            shutil.copyfile(trace, tmp)
            digest = file_sha256(tmp)
            side_tmp = Path(tmp + ".sha256")
            side_tmp.write_text(digest + "\n")
            os.replace(tmp, path)
            os.replace(side_tmp, sidecar)
        finally:
            Path(tmp).unlink(missing_ok=True)
            Path(tmp + ".sha256").unlink(missing_ok=True)
        self.stats.stored += 1
        if self.peer is not None:
            self.peer.push({n: (self.root / n).read_bytes() for n in self._names(key)})
        return True


def complete_through(trace: Path, needed_end: float) -> bool:
    """Whether ``trace`` ended by itself (``closed`` or ``finished``) and, unless SUMO finished
    early, not before ``needed_end``."""
    end = None
    for _, rec in iter_records(trace):
        if rec["type"] == "end":
            end = rec
    if end is None or end.get("status") not in _COMPLETE:
        return False
    return end["status"] == "finished" or float(end["time"]) >= needed_end - _EPS


class CachedTraceSource(TraceSource):
    """The replay of a cached trace, saying so in its metadata (and so in the run's manifest)."""

    def __init__(self, path: str | os.PathLike[str], key: str) -> None:
        super().__init__(path)
        self._meta = {**self._meta, "trace_cache": {"key": key, "hit": True}}


class RecordingSumoSource(SumoSource):
    """A live source whose trace goes into ``cache`` under ``key`` once it is closed complete."""

    def __init__(
        self,
        sumo: SumoConfig,
        rsus: Sequence[Rsu],
        coverage: CoverageConfig | None,
        *,
        cache: TraceCache,
        key: str,
        needed_end: float,
        trace: str | os.PathLike[str],
        overwrite_trace: bool = False,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(
            sumo,
            rsus,
            coverage,
            trace=trace,
            overwrite_trace=overwrite_trace,
            metadata={**(metadata or {}), KEY_FIELD: key},
        )
        self._cache, self._key, self._needed_end = cache, key, needed_end
        # rejected: an entry was there but did not verify (it is recorded again, not used)
        self._meta = {**self._meta, "trace_cache": {"key": key, "hit": False, "rejected": cache.stats.rejected > 0}}

    def close(self) -> None:
        path = self.trace_path
        super().close()
        if path is not None and self._error is None:
            try:
                self._cache.store(self._key, path, self._needed_end)
            except OSError as e:  # the run and its own trace are complete; only the cache misses out
                warnings.warn(
                    f"trace cache {self._cache.root}: could not keep this run's trace ({e}); "
                    "the run is unaffected, the next run of this traffic steps SUMO again",
                    stacklevel=2,
                )
