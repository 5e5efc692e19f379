"""Self-describing run directories: manifest, per-request records, models and checkpoints.

A run directory holds ``manifest.json`` (configuration, seeds, versions, host), one JSON line
per request in ``records.jsonl`` (flushed as written, so a crash loses nothing already
recorded), and tensors as safetensors. Nothing is pickled.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from fl_core.errors import CorruptFileError

from ..compute.host import cpu_model
from .lock import describe_status, writer_alive
from .outputs import claim_parent

__all__ = ["RunDir", "describe_status", "new_run_dir", "read_manifest", "versions", "writer_alive"]


def versions() -> dict[str, str]:
    """Versions of the packages that decide a run's numbers."""
    import torch  # here: a reader of run directories needs no torch

    out = {"python": sys.version.split()[0], "torch": torch.__version__}
    for name in ("numpy", "simpy", "safetensors", "libsumo", "traci", "sumolib"):
        try:
            mod = __import__(name)
            out[name] = str(getattr(mod, "__version__", "unknown"))
        except Exception:  # an optional package that is absent is simply not listed
            continue
    from fl_core import __version__

    out["vmc_sim"] = __version__
    return out


def new_run_dir(base: str | Path, name: str) -> Path:
    """A fresh directory ``base/<name>-<UTC timestamp>`` (suffixed if it exists), made by this call:
    two processes starting in the same second never get the same one. ``base`` is refused inside
    another run or sweep directory (:func:`vmc_sim.rundir.outputs.claim_parent`)."""
    claim_parent(base)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    Path(base).mkdir(parents=True, exist_ok=True)
    k = 0
    while True:
        path = Path(base) / (f"{name}-{stamp}" if k == 0 else f"{name}-{stamp}-{k}")
        try:
            path.mkdir()
            return path
        except FileExistsError:
            k += 1


def read_manifest(path: Path) -> dict[str, Any]:
    """``manifest.json`` at ``path``, refused naming the file if it is missing, cut or not an object."""
    if not path.is_file():
        raise FileNotFoundError(f"{path.parent}: not a run directory (no manifest.json)")
    try:
        manifest = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CorruptFileError(f"{path}: not valid JSON ({e}); the file is cut or damaged") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("config"), dict):
        raise CorruptFileError(f"{path}: not a run manifest (no 'config' object)")
    return manifest


def file_fingerprint(path: str | Path) -> dict[str, Any]:
    """SHA-256, newline count and size of a file, read in one streamed pass (a missing file is the
    empty one): what manifests keep to tell a file from a cut or changed copy."""
    h, lines, size = hashlib.sha256(), 0, 0
    if Path(path).is_file():
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
                lines += block.count(b"\n")
                size += len(block)
    return {"sha256": h.hexdigest(), "lines": lines, "bytes": size}


MODELS_FILE = "models.safetensors"
"""A run's final models, one tensor per method (``<method>.weights``)."""
AUDIT_FILE = "audit.json"
"""What ``vmc audit`` writes into a run it reads."""
CERTIFICATE_FILE = "certificate.json"
"""What ``vmc certify`` writes into a run it reads."""
CERTIFY_TOLERANCE = 1e-5
"""``vmc certify``'s default: the largest absolute difference per value between a released model and
its fresh fit that passes."""
FINGERPRINTED = {
    "records.jsonl": "records_file",
    MODELS_FILE: "models_file",
    "trace.jsonl": "trace_file",
    "released.jsonl": "released_file",
    "contributions/index.json": "contributions_file",
}
"""A completed run's files whose fingerprint its manifest keeps, under these keys (the released
models' index and the contribution store's index vouch for the files they name by SHA-256)."""


class RunDir:
    """A run directory; ``create=False`` opens an existing one (a missing path is an error, not
    a new empty directory)."""

    def __init__(self, path: str | Path, create: bool = True) -> None:
        self.path = Path(path)
        if not create:
            if not self.path.is_dir():
                raise FileNotFoundError(f"{self.path}: no such run directory")
            return
        self.path.mkdir(parents=True, exist_ok=True)

    def write_manifest(
        self, config: dict[str, Any], seeds: dict[str, Any], previous: dict[str, Any] | None = None, **extra: Any
    ) -> None:
        """Write the manifest: configuration, seeds, package versions and host, with ``extra``.

        ``previous`` (a resume: the manifest the run had) keeps when and where the run began and
        with which versions, and adds this resume to its ``resumes`` list with how the attempt
        before it ended, so nothing a resume writes hides the run's origin or its failures."""
        now = {
            "at": datetime.now(timezone.utc).isoformat(),
            "versions": versions(),
            "host": {
                "machine": platform.machine(),
                "processor": platform.processor(),
                "cpu": cpu_model(),
                "cpus": os.cpu_count(),
                "cuda": _cuda(),
            },
        }
        manifest = {
            "created": now["at"],
            "config": config,
            "seeds": seeds,
            "versions": now["versions"],
            "host": now["host"],
            **extra,
        }
        if previous is not None:
            manifest.update({k: previous[k] for k in ("created", "versions", "host") if k in previous})
            manifest["resumes"] = [
                *previous.get("resumes", []),
                {
                    **now,
                    "after": extra.get("resumed_after"),
                    "ended": {k: previous[k] for k in ("status", "error") if k in previous},
                },
            ]
        self._atomic_json("manifest.json", manifest)

    def manifest(self) -> dict[str, Any]:
        """The run's manifest (an unreadable one is a :class:`CorruptFileError` naming the file)."""
        return read_manifest(self.path / "manifest.json")

    def append_record(self, record: dict[str, Any], name: str = "records.jsonl") -> None:
        """Append one record. It reaches the operating system at once (a killed process loses
        nothing); it is synced to disk with the next manifest write, not one fsync per record."""
        with open(self.path / name, "a") as f:
            f.write(json.dumps(record, default=_jsonable) + "\n")

    def records(self, name: str = "records.jsonl") -> Iterator[dict[str, Any]]:
        """The complete records (a last line cut without its newline by a crash is skipped). Of a
        run that completed, ``records.jsonl`` must be the file its manifest fingerprinted: a cut or
        changed one is refused naming it (:meth:`verify_records`)."""
        path = self.path / name
        if not path.exists():
            return
        if name == "records.jsonl":
            self.verify_records()
        with open(path) as f:
            for i, line in enumerate(f, 1):
                if not line.endswith("\n"):
                    return
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as e:
                    raise CorruptFileError(f"{path}:{i}: not a JSON record ({e.msg})") from None
                if not isinstance(record, dict) or not isinstance(record.get("method"), str):
                    raise CorruptFileError(f"{path}:{i}: not a run record (an object with a 'method')")
                yield record

    def verify_records(self) -> None:
        """Refuse (:class:`CorruptFileError`, naming the file) a completed run's ``records.jsonl``
        that differs from the SHA-256 and line count its manifest recorded at completion; runs
        still going, ended early or recorded without a fingerprint are read as they are."""
        self.verify_file("records.jsonl")

    def verify_file(self, name: str) -> None:
        """Refuse (:class:`CorruptFileError`, naming it) a file of a completed run (``records.jsonl``,
        ``models.safetensors``, ``trace.jsonl``, ...) that is not the one its manifest fingerprinted at
        completion (:data:`FINGERPRINTED`); a run still going, ended early or recorded without a
        fingerprint of it is read as it is."""
        manifest_path = self.path / "manifest.json"
        if not manifest_path.is_file():
            return
        manifest = read_manifest(manifest_path)
        expected = manifest.get(FINGERPRINTED[name])
        if manifest.get("status") != "complete" or not isinstance(expected, dict):
            return
        found = file_fingerprint(self.path / name)
        if found != expected:
            missing = not (self.path / name).is_file()
            raise CorruptFileError(
                f"{self.path / name}: "
                + (
                    "missing, but the run completed with it"
                    if missing
                    else f"not the file this run completed with ({found['lines']} lines, sha256 "
                    f"{found['sha256'][:12]}; the manifest recorded {expected.get('lines')} lines, sha256 "
                    f"{str(expected.get('sha256'))[:12]}): cut or changed since"
                )
            )

    def fingerprint_outputs(self, manifest: dict[str, Any], names: tuple[str, ...] = tuple(FINGERPRINTED)) -> None:
        """Put the fingerprint of each file of ``names`` (of :data:`FINGERPRINTED`) that exists into
        ``manifest`` (at completion, for readers to verify)."""
        for name in names:
            if (self.path / name).is_file():
                manifest[FINGERPRINTED[name]] = file_fingerprint(self.path / name)

    def record_count(self, name: str = "records.jsonl") -> int:
        """How many complete records ``name`` holds (the whole run's, across resumes)."""
        return sum(1 for _ in self.records(name))

    def torn_tail(self, name: str = "records.jsonl") -> int:
        """Bytes of an incomplete last line (a crash while it was written), 0 if none."""
        path = self.path / name
        if not path.is_file():
            return 0
        data = path.read_bytes()
        return len(data) - (data.rfind(b"\n") + 1)

    def drop_torn_tail(self, name: str = "records.jsonl", say=print) -> None:
        """Cut an incomplete last line off ``name`` (every complete record is kept), saying so."""
        torn = self.torn_tail(name)
        if torn:
            path = self.path / name
            with open(path, "r+b") as f:
                f.truncate(path.stat().st_size - torn)
            say(f"{path}: dropped an incomplete last line ({torn} bytes, cut while being written)")

    def save_tensors(self, name: str, tensors: dict[str, Any], metadata: dict[str, str] | None = None) -> Path:
        path = self.path / name
        tmp = path.with_suffix(path.suffix + ".tmp")
        from safetensors.torch import save_file

        save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, str(tmp), metadata=metadata)
        os.replace(tmp, path)
        return path

    def _atomic_json(self, name: str, obj: Any) -> None:
        """Replace ``name`` atomically, after syncing the record files it describes."""
        for records in self.path.glob("*.jsonl"):
            with open(records, "rb") as f:
                os.fsync(f.fileno())
        tmp = self.path / (name + ".tmp")
        with open(tmp, "w") as f:
            f.write(json.dumps(obj, indent=2, default=_jsonable))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path / name)


def _jsonable(o: Any) -> Any:
    if hasattr(o, "item"):
        return o.item()
    if hasattr(o, "value"):
        return o.value
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    return str(o)


def _cuda() -> bool:
    """Whether this host has CUDA (torch imported only here and when tensors are written)."""
    import torch

    return bool(torch.cuda.is_available())
