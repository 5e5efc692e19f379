"""Every model a method released, kept for ``vmc certify``: ``released.jsonl`` names, for each record
of a request-driven method that released a model, the model's SHA-256; ``released/`` holds the
models themselves, content-addressed (one safetensors file per distinct model, so a request that
changed nothing costs one index line).

With ``coordinator.released_models: digests`` only the index is kept (the final models are in
``models.safetensors`` as always): 200 bytes a record instead of 4 bytes a parameter per distinct
model, and ``vmc certify`` then compares digests. The index is appended as records are (a killed
run loses nothing already released), is fingerprinted in the manifest at completion with the
run's other outputs, and a resume that has not yet committed writes nothing here.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # a reader of records needs no torch; the writer imports it when it writes
    import torch

from fl_core.errors import CorruptFileError

from .directory import RunDir

INDEX = "released.jsonl"
FOLDER = "released"


def model_digest(model: torch.Tensor) -> str:
    """SHA-256 of a model's values as stored (its raw bytes, in order, in its own dtype)."""
    flat = model.detach().cpu().contiguous().reshape(-1)
    import torch

    return hashlib.sha256(flat.view(torch.uint8).numpy().tobytes()).hexdigest()


def file_name(digest: str) -> str:
    """The file under ``released/`` that holds the model of SHA-256 ``digest``."""
    return f"{digest[:32]}.safetensors"


class ReleasedModels:
    """The run's released models: :meth:`put` one per record, keyed by method and the record's place
    among that method's records; ``keep`` is ``all`` or ``digests`` (``coordinator.released_models``)."""

    def __init__(self, run: RunDir, keep: str = "all") -> None:
        self.run, self.keep = run, keep
        self._known = {(e["method"], e["record"]) for e in read_index(run.path, complete_only=True)}
        self._held: list[tuple[dict[str, Any], torch.Tensor]] | None = None
        self._tail_checked = False

    def hold(self) -> None:
        """Keep new models in memory instead of writing them (a resume that may still fail)."""
        if self._held is None:
            self._held = []

    def release(self) -> None:
        """Write what was held since :meth:`hold`, and write through from now on."""
        held, self._held = self._held or [], None
        for entry, model in held:
            self._write(entry, model)

    def put(self, method: str, record: int, row: dict[str, Any], model: torch.Tensor) -> None:
        """Keep the model ``method`` released with its ``record``-th record ``row`` (once: a resume
        that recomputes a stored record's model leaves it as it is)."""
        if (method, record) in self._known:
            return
        self._known.add((method, record))
        digest = model_digest(model)
        entry = {
            "method": method,
            "record": record,
            "index": row.get("index"),
            "kind": row.get("kind"),
            "model_sha256": digest,
            "dtype": str(model.dtype).removeprefix("torch."),
            "numel": model.numel(),
            "file": file_name(digest) if self.keep == "all" else None,
        }
        if self._held is not None:
            self._held.append((entry, model.detach().clone()))
        else:
            self._write(entry, model)

    def _write(self, entry: dict[str, Any], model: torch.Tensor) -> None:
        if entry["file"] is not None:
            folder = self.run.path / FOLDER
            path = folder / entry["file"]
            if not path.is_file():
                folder.mkdir(exist_ok=True)
                tmp = path.with_name(path.name + f".tmp{os.getpid()}")
                weights = model.detach().cpu().contiguous().reshape(-1)
                from safetensors.torch import save_file

                save_file({"weights": weights}, str(tmp), metadata={"model_sha256": entry["model_sha256"]})
                os.replace(tmp, path)
        if not self._tail_checked:  # a line cut by a crash before a resume appends after it
            self.run.drop_torn_tail(INDEX, say=lambda s: None)
            self._tail_checked = True
        self.run.append_record(entry, INDEX)


def read_index(run: str | Path, complete_only: bool = False) -> list[dict[str, Any]]:
    """The entries of ``run``'s ``released.jsonl`` (none if it has none); a line that is not an entry
    is refused naming the file and line, a last line cut by a crash skipped."""
    path = Path(run) / INDEX
    if not path.is_file():
        return []
    out = []
    with open(path) as f:
        for i, line in enumerate(f, 1):
            if not line.endswith("\n"):
                break
            try:
                entry = json.loads(line)
            except json.JSONDecodeError as e:
                raise CorruptFileError(f"{path}:{i}: not a JSON line ({e.msg})") from None
            if not (isinstance(entry, dict) and isinstance(entry.get("method"), str) and "record" in entry):
                if complete_only:
                    continue
                raise CorruptFileError(f"{path}:{i}: not a released-model entry")
            out.append(entry)
    return out


def load_released(run: str | Path, entry: dict[str, Any]) -> torch.Tensor:
    """The model of ``entry``, refused (:class:`CorruptFileError`, naming the file) when its file is
    missing, unreadable or does not hold the model the index names."""
    if not entry.get("file"):
        raise CorruptFileError(f"{Path(run) / INDEX}: {entry['method']} record {entry['record']} kept its digest only")
    path = Path(run) / FOLDER / str(entry["file"])
    if not path.is_file():
        raise CorruptFileError(f"{path}: missing, but {INDEX} names it")
    try:
        from safetensors.torch import load_file

        model = load_file(str(path))["weights"]
    except Exception as e:  # a file that does not parse was changed or cut
        raise CorruptFileError(f"{path}: unreadable ({e})") from None
    if model_digest(model) != entry.get("model_sha256"):
        raise CorruptFileError(
            f"{path}: not the model {INDEX} recorded (SHA-256 {model_digest(model)[:12]}, recorded "
            f"{str(entry.get('model_sha256'))[:12]}): changed since the run"
        )
    return model
