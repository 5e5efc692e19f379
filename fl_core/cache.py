"""A content-addressed contribution cache, shared by runs and sweep points.

A contribution is a deterministic function of what trained it: the client's data, the model
architecture and W0, the training settings, the seeds of its training and Fisher streams, where
it is computed (:func:`runs_on`: the device type and the CPU thread count, which change float
sums in their last bits) and the trainer's code version
(:data:`fl_core.training.TRAINER_VERSION`). The cache keys a contribution by the SHA-256 of
exactly those, so a run or sweep point that would train the
same client the same way loads the identical tensors instead of training again (a density
sweep meets the same vehicles, with the same shards and seeds, at every point).

Each entry is a one-contribution :class:`fl_core.store.ContributionStore` directory plus a
sidecar holding the SHA-256 of its file; an entry whose file does not match is not used: the
contribution is trained again, the entry rewritten, and the rejection counted.

A client's trained weights depend on fewer things than its contribution: not on the Fisher's
kind, batch or labels nor on the upload's dtype (:data:`fl_core.training.WEIGHT_FIELDS`). The
cache keeps them too (float32, ``weights/``, keyed by :meth:`ContributionCache.weights_key`), so a
run that differs from an earlier one only in those (the case study with K-FAC after the diagonal
one, a sweep over ``train.fisher``) computes each client's Fisher at the stored weights instead of
training it again; the contribution is the same, tensor for tensor, as training afresh gives.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import weakref
from collections.abc import Callable, Hashable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from .cache_peer import CachePeer, current_peer, read_files, write_files
from .contribution import Contribution
from .data import ArrayDataset
from .devices import resolve_device
from .errors import CorruptFileError
from .fisher import layer_specs
from .store import ContributionStore
from .training import TRAINER_VERSION, LocalTrainer, Trained, key_settings, weight_settings

#: Settings that enter the key as what they resolve to (:func:`runs_on`), or not at all.
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
    weights_reused: int = 0  # misses whose trained weights were cached: only the Fisher computed

    @property
    def hit_rate(self) -> float:
        asked = self.hits + self.misses
        return self.hits / asked if asked else 0.0

    def as_dict(self) -> dict:
        return {**asdict(self), "hit_rate": round(self.hit_rate, 4)}


def default_root() -> Path:
    """``$VMC_CACHE/contributions``, else ``~/.cache/vmc-sim/contributions``."""
    env = os.environ.get("VMC_CACHE")
    return (Path(env).expanduser() if env else Path.home() / ".cache" / "vmc-sim") / "contributions"


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def runs_on(trainer: LocalTrainer) -> dict:
    """Where ``trainer`` computes, as far as it changes the result: the device type and, on the
    CPU, torch's intra-op thread count now (the count training runs with). Float sums split over
    another number of threads, or done on a GPU, differ in their last bits, so a cache filled by a
    two-thread run must not serve a one-thread run what that run would not have computed itself."""
    device = resolve_device(trainer.config.device)
    return {"device": device.type, **({"threads": torch.get_num_threads()} if device.type == "cpu" else {})}


class ContributionCache:
    """Contributions under ``root``, addressed by :meth:`key`."""

    def __init__(self, root: str | Path, peer: CachePeer | None = None) -> None:
        self.root = Path(root)
        self.peer = peer or current_peer()  # another machine's copy (fl_core.cache_peer), if any
        self.stats = CacheStats()
        self._model_keys: dict[tuple[int, bool, str], tuple[weakref.ref, str]] = {}

    def _model_key(self, trainer: LocalTrainer, weights_only: bool = False) -> str:
        """Architecture, W0, settings, where it runs and code version (one hash per trainer, kind
        and :func:`runs_on`); with ``weights_only`` the settings are those the trained weights
        depend on."""
        on = runs_on(trainer)
        memo = (id(trainer), weights_only, json.dumps(on, sort_keys=True))
        known = self._model_keys.get(memo)
        if known is None or known[0]() is not trainer:  # ids are reused once a trainer is freed
            model = trainer.model_fn()
            settings = weight_settings(trainer.config) if weights_only else key_settings(trainer.config, _NOT_IN_KEY)
            head = json.dumps(
                {
                    "version": TRAINER_VERSION,
                    "model": type(model).__name__,
                    "shapes": [[n, list(p.shape)] for n, p in model.named_parameters()],
                    ("weights" if weights_only else "train"): settings,
                    "runs_on": on,
                },
                sort_keys=True,
                default=str,
            )
            h = hashlib.sha256(head.encode())
            h.update(trainer.w0.detach().cpu().contiguous().numpy().tobytes())
            known = self._model_keys[memo] = (weakref.ref(trainer), h.hexdigest())
        return known[1]

    def _client_key(self, head: str, seeds: list, data: ArrayDataset) -> str:
        h = hashlib.sha256(head.encode())
        h.update(json.dumps(seeds).encode())
        h.update(data.x.detach().cpu().contiguous().numpy().tobytes())
        h.update(data.y.detach().cpu().contiguous().numpy().tobytes())
        return h.hexdigest()

    def key(self, trainer: LocalTrainer, client: Hashable, data: ArrayDataset) -> str:
        """SHA-256 of everything ``client``'s contribution depends on."""
        seeds = [trainer.streams.seed("train", client), trainer.streams.seed("fisher", client)]
        return self._client_key(self._model_key(trainer), seeds, data)

    def weights_key(self, trainer: LocalTrainer, client: Hashable, data: ArrayDataset) -> str:
        """SHA-256 of everything ``client``'s trained weights depend on (no Fisher or upload setting)."""
        seeds = [trainer.streams.seed("train", client)]
        return self._client_key(self._model_key(trainer, weights_only=True), seeds, data)

    def contribution(
        self, trainer: LocalTrainer, client: Hashable, data: ArrayDataset, train: Callable[[], Trained]
    ) -> Contribution:
        """``client``'s contribution: loaded if cached, else computed at its cached trained
        weights, else from ``train()`` (the pool's training, counted there); what is computed is
        written for the next run."""
        key = self.key(trainer, client, data)
        wkey = self.weights_key(trainer, client, data)
        names = self._entry_names(key, wkey)
        if self.peer is not None:
            write_files(self.root, self.peer.fetch([n for n in names if not (self.root / n).exists()]))
        found = self.get(key, trainer, client)
        if found is not None:
            return found
        trained = self._trained(wkey, trainer)
        if trained is None:
            trained = train()
            self._write_weights(wkey, trained)
        else:
            self.stats.weights_reused += 1
        contribution = trainer.contribute(client, data, trained)
        self.put(key, trainer, contribution)
        if self.peer is not None:
            self.peer.push(read_files(self.root, names))
        return contribution

    def _entry_names(self, key: str, wkey: str) -> list[str]:
        """The files of the entries under ``key`` and ``wkey``, relative to the root."""
        weights = self._weights_file(wkey).relative_to(self.root).as_posix()
        return [f"{key[:2]}/{key}", f"{key[:2]}/{key}.sha256", weights, weights[: -len(".safetensors")] + ".json"]

    def _weights_file(self, key: str) -> Path:
        return self.root / "weights" / key[:2] / f"{key}.safetensors"

    def _trained(self, key: str, trainer: LocalTrainer) -> Trained | None:
        """The trained weights under ``key`` if the entry verifies (its digest, key and size),
        else None (a damaged entry counts as rejected)."""
        file = self._weights_file(key)
        sidecar = file.with_suffix(".json")
        if not (file.is_file() and sidecar.is_file()):
            return None
        try:
            side = json.loads(sidecar.read_text())
            if side["sha256"] == _sha256_file(file):
                with safe_open(str(file), "pt") as f:
                    meta, weights = f.metadata() or {}, f.get_tensor("weights")
                if meta.get("key") == key and weights.dtype == torch.float32 and weights.numel() == trainer.w0.numel():
                    return Trained(weights, float(side["train_s"]))
        except (OSError, ValueError, KeyError, TypeError, SafetensorError):
            pass
        self.stats.rejected += 1
        return None

    def _write_weights(self, key: str, trained: Trained) -> None:
        """Write ``trained`` under ``key``: the file (the same bytes whoever trains it) and then
        its sidecar (digest, training seconds), each renamed into place, so a reader never
        trusts a half-written entry and processes writing at once agree."""
        file = self._weights_file(key)
        file.parent.mkdir(parents=True, exist_ok=True)
        tmp = file.with_name(f".{file.name}.tmp{os.getpid()}")
        save_file({"weights": trained.weights.contiguous()}, str(tmp), metadata={"key": key})
        side = {"sha256": _sha256_file(tmp), "train_s": trained.train_s}
        os.replace(tmp, file)
        tmp = file.with_name(f".{key}.json.tmp{os.getpid()}")
        tmp.write_text(json.dumps(side))
        os.replace(tmp, file.with_suffix(".json"))

    def _entry(self, key: str, trainer: LocalTrainer, directory: Path | None = None) -> ContributionStore:
        return ContributionStore(
            directory or self.root / key[:2] / key, key, trainer.config.fisher, layer_specs(trainer.model_fn())
        )

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
