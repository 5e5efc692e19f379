"""Contributions on disk (safetensors + JSON metadata), so that a resumed run does not retrain.

A contribution is a deterministic function of (run seed, client id, config), so a stored one
is exactly what recomputing would give; its measured compute time is stored with it and
charged again when it is used.

Every file's SHA-256 and metadata go into ``index.json`` when it is written and are checked
when it is read: a file that differs (tampered, truncated) is a :class:`CorruptFileError`
naming the file and the client, never used. A file the index does not list (a crash between
the two writes, or a store from before the index) is recomputed, and that is recorded in
:attr:`ContributionStore.recomputed`.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Hashable
from pathlib import Path
from typing import Protocol

from safetensors.torch import load, save_file

from .contribution import Contribution
from .errors import CorruptFileError
from .fisher import FisherKind, FisherRep, LayerSpec
from .fisher.diagonal import DiagonalFisher
from .fisher.full import FullFisher
from .fisher.kfac import KFACFisher


class ContributionStore:
    """A directory of contributions for one (seed, config); ``fingerprint`` guards against mixing."""

    def __init__(self, directory: str | Path, fingerprint: str, fisher: FisherKind, specs: list[LayerSpec]) -> None:
        self.directory = Path(directory)  # created by the first write
        self.fingerprint = fingerprint
        self.fisher = FisherKind(fisher)
        self.specs = specs
        self._held: dict[Path, tuple[dict, dict]] | None = None  # path -> (tensors, metadata) while held
        self._index: dict[str, dict] | None = None
        self.recomputed: dict[str, str] = {}  # client repr -> why its stored file was not used

    @property
    def index_path(self) -> Path:
        return self.directory / "index.json"

    def index(self) -> dict[str, dict]:
        """File name -> {client, sha256, meta} of every contribution written."""
        if self._index is None:
            self._index = {}
            if self.index_path.is_file():
                try:
                    self._index = json.loads(self.index_path.read_text())
                except (json.JSONDecodeError, UnicodeDecodeError) as e:
                    raise CorruptFileError(f"{self.index_path}: not a valid contribution index ({e})") from None
                if not isinstance(self._index, dict):
                    raise CorruptFileError(f"{self.index_path}: not a valid contribution index (not an object)")
        return self._index

    def hold(self) -> None:
        """Keep new contributions in memory instead of writing them (a resume that may still fail)."""
        if self._held is None:
            self._held = {}

    def release(self) -> None:
        """Write the contributions held since :meth:`hold` and write through from now on."""
        held, self._held = self._held or {}, None
        for path, (tensors, meta) in held.items():
            self._write(path, tensors, meta, save_index=False)
        if held:
            self._save_index()

    def _path(self, client: Hashable) -> Path:
        key = hashlib.sha256(repr(client).encode()).hexdigest()[:24]
        return self.directory / f"{key}.safetensors"

    def get(self, client: Hashable) -> Contribution | None:
        path = self._path(client)
        if self._held is not None and path in self._held:
            tensors, meta = self._held[path]
            return self._build(client, tensors, meta)
        if not path.exists():
            return None
        entry = self.index().get(path.name)
        if entry is None:
            self.recomputed[repr(client)] = f"{path.name} is not in {self.index_path.name}"
            return None
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() != entry.get("sha256"):
            raise CorruptFileError(
                f"{path}: the stored contribution of client {client!r} does not match the digest recorded "
                f"when it was written (tampered or truncated)"
            )
        try:
            tensors = load(data)
        except Exception as e:  # a file that hashes right but does not parse was written wrong
            raise CorruptFileError(f"{path}: contribution of client {client!r} is unreadable ({e})") from None
        meta = entry["meta"]
        if meta["fingerprint"] != self.fingerprint or meta["client"] != repr(client):
            self.recomputed[repr(client)] = f"{path.name} was computed for another " + (
                "configuration" if meta["fingerprint"] != self.fingerprint else "client"
            )
            return None
        return self._build(client, tensors, meta)

    def file_digest(self, client: Hashable) -> str | None:
        """The SHA-256 recorded in the index for ``client``'s stored file (None: not stored); what
        :meth:`get` checks the file against."""
        entry = self.index().get(self._path(client).name)
        return None if entry is None else entry.get("sha256")

    def _build(self, client: Hashable, tensors: dict, meta: dict) -> Contribution:
        fisher_t = {k[len("fisher.") :]: v for k, v in tensors.items() if k.startswith("fisher.")}
        fisher: FisherRep | None = None
        if self.fisher is FisherKind.DIAGONAL:
            fisher = DiagonalFisher.from_tensors(fisher_t)
        elif self.fisher is FisherKind.FULL:
            fisher = FullFisher.from_tensors(fisher_t)
        elif self.fisher is FisherKind.KFAC:
            fisher = KFACFisher.from_tensors(fisher_t, KFACFisher(self.specs, []))
        return Contribution(
            client,
            tensors["weights"],
            fisher,
            meta["num_samples"],
            meta["compute_s"],
            meta["train_s"],
            meta["fisher_s"],
        )

    def put(self, c: Contribution, trained: bool = False) -> None:
        """Keep ``c`` (``trained``: this run trained it, rather than loading it from a shared cache)."""
        tensors = {"weights": c.weights}
        if c.fisher is not None:
            tensors.update({f"fisher.{k}": v for k, v in c.fisher.tensors().items()})
        meta = {
            "fingerprint": self.fingerprint,
            "client": repr(c.client),
            "num_samples": c.num_samples,
            "compute_s": c.compute_s,
            "train_s": c.train_s,
            "fisher_s": c.fisher_s,
            "trained": trained,
        }
        path = self._path(c.client)
        tensors = {k: v.contiguous() for k, v in tensors.items()}
        if self._held is not None:
            self._held[path] = (tensors, meta)
        else:
            self._write(path, tensors, meta)

    def trained_count(self) -> int:
        """How many contributions this store's run trained itself, over every attempt (a resume
        loads those trained before it from here, so its own count misses them)."""
        metas = [e["meta"] for e in self.index().values() if e.get("meta", {}).get("fingerprint") == self.fingerprint]
        metas += [meta for _, meta in (self._held or {}).values()]
        return sum(bool(m.get("trained")) for m in metas)

    def _write(self, path: Path, tensors: dict, meta: dict, save_index: bool = True) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        save_file(tensors, str(tmp), metadata={"vmc": json.dumps(meta)})
        digest = hashlib.sha256(tmp.read_bytes()).hexdigest()
        os.replace(tmp, path)
        self.index()[path.name] = {"client": meta["client"], "sha256": digest, "meta": meta}
        if save_index:
            self._save_index()

    def _save_index(self) -> None:
        tmp = self.index_path.with_suffix(f".tmp{os.getpid()}")
        # one line: the C encoder (indenting falls back to Python's, 4 ms a write at 100 entries)
        tmp.write_text(json.dumps(self.index(), sort_keys=True))
        os.replace(tmp, self.index_path)


class ContributionSource(Protocol):
    """What a :class:`fl_core.clients.ClientPool` keeps its clients' contributions in."""

    def get(self, client: Hashable, /) -> Contribution | None: ...

    def put(self, contribution: Contribution, /, trained: bool = False) -> None: ...


class MemoryStore:
    """Contributions kept in memory for one process: the ``ClientPool`` store protocol (``get``/``put``)
    without a disk, for scripts that share contributions between per-method pools and persist nothing."""

    def __init__(self) -> None:
        self._items: dict[Hashable, Contribution] = {}

    def get(self, client: Hashable) -> Contribution | None:
        return self._items.get(client)

    def put(self, contribution: Contribution, trained: bool = False) -> None:
        self._items[contribution.client] = contribution

    def __len__(self) -> int:
        return len(self._items)
