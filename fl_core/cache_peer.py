"""A contribution cache shared by machines with no common disk: each keeps its own copy
(:class:`fl_core.cache.ContributionCache`), fetches an entry it lacks from a peer before training,
and sends the peer every entry it computes, so a client trained on one machine is not trained again
on another. The peer keeps the files under a root of its own (:class:`CacheKeeper`); whatever
carries the calls (a Ray actor in ``vmc sweep``) is the caller's. Fetched entries are verified
exactly as local ones (digest sidecars), so a damaged copy is a miss, never trusted."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol


class CachePeer(Protocol):
    """Where entries are fetched from and sent to: files by path relative to the cache root."""

    def fetch(self, names: list[str]) -> dict[str, bytes]: ...

    def push(self, files: dict[str, bytes]) -> None: ...


_PEER: CachePeer | None = None


def set_peer(peer: CachePeer | None) -> None:
    """The peer every contribution cache opened in this process uses (None: none)."""
    global _PEER
    _PEER = peer


def current_peer() -> CachePeer | None:
    return _PEER


def _sidecars_last(name: str) -> tuple[bool, str]:
    """Write order: an entry's data first, the sidecar that vouches for it last."""
    return (name.endswith((".sha256", ".json")), name)


def read_files(root: Path, names: list[str]) -> dict[str, bytes]:
    """The files under ``root`` named by ``names`` (a directory: every file in it)."""
    out: dict[str, bytes] = {}
    for name in names:
        p = root / name
        if p.is_dir():
            out.update({f.relative_to(root).as_posix(): f.read_bytes() for f in sorted(p.rglob("*")) if f.is_file()})
        elif p.is_file():
            out[name] = p.read_bytes()
    return out


def write_files(root: Path, files: dict[str, bytes]) -> None:
    """Write ``files`` under ``root``, each renamed into place, sidecars last, never over a file
    already there (an entry is the same bytes whoever computed it)."""
    for name in sorted(files, key=_sidecars_last):
        target = root / name
        if target.exists() or name.startswith(("/", "..")) or ".." in Path(name).parts:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp{os.getpid()}")
        tmp.write_bytes(files[name])
        os.replace(tmp, target)


class CacheKeeper:
    """The peer's side: entries kept under ``root``."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def fetch(self, names: list[str]) -> dict[str, bytes]:
        return read_files(self.root, names)

    def push(self, files: dict[str, bytes]) -> None:
        write_files(self.root, files)
