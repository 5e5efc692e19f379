"""A content-addressed contribution cache, shared by runs and sweep points.

A contribution is a deterministic function of what trained it: the client's data, the model
architecture and W0, the training settings, the seeds of its training and Fisher streams and
the trainer's code version (:data:`fl_core.training.TRAINER_VERSION`). The cache keys a
contribution by the SHA-256 of exactly those, so a run or sweep point that would train the
same client the same way loads the identical tensors instead of training again (a density
sweep meets the same vehicles, with the same shards and seeds, at every point).

Each entry is a one-contribution :class:`fl_core.store.ContributionStore` directory plus a
sidecar holding the SHA-256 of its file; an entry whose file does not match is not used: the
contribution is trained again, the entry rewritten, and the rejection counted.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import weakref
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Hashable

from .contribution import Contribution
from .data import ArrayDataset
from .errors import CorruptFileError
from .fisher import layer_specs
from .store import ContributionStore
from .training import TRAINER_VERSION, LocalTrainer, key_settings

#: Training settings that change where or how fast a contribution is computed, not what it is.
_NOT_IN_KEY = ("device", "threads", "fisher_rank")  # the cache keeps whole factors
#: The client label entries are stored under (an entry serves whichever client asks with its key).
_LABEL = "cached"


@dataclass
class CacheStats:
    """How a pool used the cache: ``hits`` loaded, ``misses`` trained and written, ``rejected``
    entries found but not matching their digest (trained again)."""

    hits: int = 0
    misses: int = 0
    rejected: int = 0

    @property
    def hit_rate(self) -> float:
        asked = self.hits + self.misses
        return self.hits / asked if asked else 0.0

    def as_dict(self) -> dict:
        return {**asdict(self), "hit_rate": round(self.hit_rate, 4)}


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class ContributionCache:
    """Contributions under ``root``, addressed by :meth:`key`."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.stats = CacheStats()
        self._model_keys: dict[int, tuple[weakref.ref, str]] = {}

    def _model_key(self, trainer: LocalTrainer) -> str:
        """Architecture, W0, settings and code version (one hash per trainer)."""
        known = self._model_keys.get(id(trainer))
        if known is None or known[0]() is not trainer:  # ids are reused once a trainer is freed
            model = trainer.model_fn()
            settings = key_settings(trainer.config, _NOT_IN_KEY)
            head = json.dumps({
                "version": TRAINER_VERSION, "model": type(model).__name__,
                "shapes": [[n, list(p.shape)] for n, p in model.named_parameters()], "train": settings,
            }, sort_keys=True, default=str)
            h = hashlib.sha256(head.encode())
            h.update(trainer.w0.detach().cpu().contiguous().numpy().tobytes())
            known = self._model_keys[id(trainer)] = (weakref.ref(trainer), h.hexdigest())
        return known[1]

    def key(self, trainer: LocalTrainer, client: Hashable, data: ArrayDataset) -> str:
        """SHA-256 of everything ``client``'s contribution depends on."""
        h = hashlib.sha256(self._model_key(trainer).encode())
        seeds = [trainer.streams.seed("train", client), trainer.streams.seed("fisher", client)]
        h.update(json.dumps(seeds).encode())
        h.update(data.x.detach().cpu().contiguous().numpy().tobytes())
        h.update(data.y.detach().cpu().contiguous().numpy().tobytes())
        return h.hexdigest()

    def _entry(self, key: str, trainer: LocalTrainer, directory: Path | None = None) -> ContributionStore:
        return ContributionStore(directory or self.root / key[:2] / key, key, trainer.config.fisher,
                                 layer_specs(trainer.model_fn()))

    def _sidecar(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.sha256"

    def get(self, key: str, trainer: LocalTrainer, client: Hashable) -> Contribution | None:
        """The cached contribution (relabelled as ``client``), or None (a miss is counted). An
        entry that does not verify (its file against the sidecar and its own index, or one that
        cannot be read) is rejected, never trusted: the caller trains again."""
        found, c = self._verified(key, trainer)
        if c is not None:
            self.stats.hits += 1
            return replace(c, client=client)
        if found:
            self.stats.rejected += 1
        self.stats.misses += 1
        return None

    def _verified(self, key: str, trainer: LocalTrainer) -> tuple[bool, Contribution | None]:
        """(whether an entry is there, its contribution if it verifies, else None)."""
        entry = self._entry(key, trainer)
        files = sorted(entry.directory.glob("*.safetensors"))
        sidecar = self._sidecar(key)
        if len(files) != 1 or not sidecar.is_file():
            return False, None
        try:
            if sidecar.read_text().strip() != _sha256_file(files[0]):
                return True, None
            return True, entry.get(_LABEL)
        except (CorruptFileError, OSError, ValueError):
            return True, None

    def put(self, key: str, trainer: LocalTrainer, contribution: Contribution) -> None:
        """Write ``contribution`` under ``key``. The entry is written in a directory of this
        process's own and renamed into place, the sidecar last, so that processes that train the
        same client at once (sweep points side by side) never see each other's half-written
        files: the first rename wins and the others discard theirs."""
        final = self.root / key[:2] / key
        final.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{key[:16]}-", dir=final.parent))
        try:
            self._entry(key, trainer, staging).put(replace(contribution, client=_LABEL))
            (file,) = staging.glob("*.safetensors")
            digest = _sha256_file(file)
            sidecar = self._sidecar(key)
            if final.is_dir():
                if self._verified(key, trainer)[1] is not None:
                    return  # another process wrote this entry meanwhile
                sidecar.unlink(missing_ok=True)
                shutil.rmtree(final, ignore_errors=True)  # a stale or damaged entry: replaced
            try:
                os.rename(staging, final)
            except OSError:
                return  # another process renamed its entry into place first
            tmp = sidecar.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(digest)
            os.replace(tmp, sidecar)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
