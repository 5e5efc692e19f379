"""Where a command may write: the one rule every writer follows.

A command writes only into a directory it creates, or into a run (or sweep) directory whose lock
it holds; never into another run or sweep, never onto a run's own files (its manifest, records,
models, released models, trace, contributions, SUMO outputs, lock), and never onto an existing file without
``--force``. A run directory is known by its ``manifest.json``, a sweep directory by its
``sweep.json``; a path inside one belongs to the nearest. Refusals are :class:`OutputRefused`: one
line naming the path and what to do instead, raised before anything is written. OS errors met
while writing are put in plain words naming the path (:func:`os_error_text`).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .lock import RunLock, RunLockedError

RUN_MARKER = "manifest.json"
SWEEP_MARKER = "sweep.json"
OWN_FILES = frozenset(
    {
        "manifest.json",
        "records.jsonl",
        "models.safetensors",
        "released.jsonl",
        "released",
        "trace.jsonl",
        "contributions",
        "sumo",
        ".lock",
        "sweep.json",
        "results.csv",
        "results.parquet",
    }
)
"""The names at the top of a run or sweep directory that only the run (or sweep) itself writes."""


class OutputRefused(ValueError):
    """A command was asked to write where it may not; nothing was written."""


def owner(path: str | os.PathLike[str]) -> tuple[str, Path] | None:
    """The run or sweep directory that ``path`` (a file or directory, existing or not) lies in, as
    ``("run" | "sweep", directory)``, or None."""
    p = Path(os.path.abspath(path))
    for d in (p, *p.parents):
        if (d / SWEEP_MARKER).is_file():
            return "sweep", d
        if (d / RUN_MARKER).is_file():
            return "run", d
    return None


def _check_owner(path: Path, held: Path | None, what: str) -> None:
    found = owner(path)
    if found is None:
        return
    kind, d = found
    if held is None or Path(os.path.abspath(held)) != d:
        where = f"the {kind} directory" if Path(os.path.abspath(path)) == d else f"inside the {kind} directory {d},"
        raise OutputRefused(
            f"{path}: {where} which this command does not own; {what} elsewhere "
            "(no command writes into another's run or sweep)"
        )
    rel = Path(os.path.abspath(path)).relative_to(d)
    if rel.parts and rel.parts[0] in OWN_FILES:
        raise OutputRefused(f"{path}: one of the {kind}'s own files; refused, nothing was changed")


def _check_parents(path: Path) -> None:
    """Refuse, in plain words, a target whose parents cannot hold it (a file on the way, read-only)."""
    for d in (path.parent, *path.parent.parents):
        if d.exists():
            if not d.is_dir():
                raise OutputRefused(f"{path}: {d} is a file, not a directory")
            if not os.access(d, os.W_OK | os.X_OK):
                raise OutputRefused(f"{path}: {d} is not writable (read-only or permission denied)")
            return


def claim_file(
    path: str | os.PathLike[str], *, force: bool = False, held: str | os.PathLike[str] | None = None
) -> Path:
    """``path`` as a file this command may write: not inside a run or sweep it does not hold the lock
    of (``held``), not one of a run's own files, not an existing file unless ``force``, not a
    directory. Raises :class:`OutputRefused` naming the path; writes nothing."""
    p = Path(path)
    if p.is_dir():
        raise OutputRefused(f"{p}: is a directory; give a file name")
    _check_owner(p, None if held is None else Path(held), "write it")
    if p.exists() and not force:
        raise OutputRefused(f"{p}: exists; give --force to replace it")
    _check_parents(p)
    return p


def claim_dir(path: str | os.PathLike[str], *, force: bool = False) -> Path:
    """``path`` created as a directory this command owns: refused inside (or as) a run or sweep
    directory, where a file stands, or where a non-empty directory stands (unless ``force``)."""
    p = Path(path)
    _check_owner(p, None, "write")
    if p.exists() and not p.is_dir():
        raise OutputRefused(f"{p}: is a file, not a directory")
    if p.is_dir() and any(p.iterdir()) and not force:
        raise OutputRefused(f"{p}: exists and is not empty; give a new directory, or --force to write into it")
    _check_parents(p / "x")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutputRefused(os_error_text(e, p)) from None
    return p


def claim_parent(path: str | os.PathLike[str]) -> Path:
    """``path`` as the directory under which a command creates a new directory of its own (``vmc run
    --out``): refused inside a run or sweep, or where a file stands."""
    p = Path(path)
    _check_owner(p, None, "write")
    if p.exists() and not p.is_dir():
        raise OutputRefused(f"{p}: is a file, not a directory")
    _check_parents(p / "x")
    return p


@contextmanager
def run_output(
    run: str | os.PathLike[str], name: str, out: str | os.PathLike[str] | None = None, force: bool = False
) -> Iterator[Path]:
    """Where a reader of a run (``vmc plot``, ``vmc audit``) writes what it derives: ``out`` when
    given (claimed as any file), else ``RUN/name`` under the run's lock, held while the caller
    writes (refused while the run's writer lives: give ``--out``). ``name`` is the reader's own file,
    which it may replace; never one of the run's own files."""
    if out is not None:
        yield claim_file(out, force=force)
        return
    try:
        lock = RunLock(Path(run))
    except RunLockedError as e:
        raise OutputRefused(f"{e}; give --out to write {name} elsewhere") from None
    except OSError as e:
        raise OutputRefused(f"{os_error_text(e, run)}; give --out to write {name} elsewhere") from None
    with lock:
        yield claim_file(Path(run) / name, force=True, held=run)


_WORDS = {
    errno.ENOTDIR: "a part of the path is a file, not a directory",
    errno.EISDIR: "is a directory",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "over the disk quota",
    errno.ENOENT: "no such file or directory",
    errno.EEXIST: "exists already",
    errno.ENAMETOOLONG: "the name is too long",
}


def os_error_text(e: OSError, path: str | os.PathLike[str] | None = None) -> str:
    """``PATH: what went wrong`` in plain words, for an OS error met reading or writing ``path``."""
    where = path if path is not None else (e.filename if e.filename is not None else "")
    words = _WORDS.get(e.errno or 0, e.strerror or str(e))
    return f"{where}: {words}" if where != "" else words
