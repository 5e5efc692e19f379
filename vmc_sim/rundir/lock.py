"""One writer per run directory, and runs that end on SIGTERM or SIGHUP as they do on Ctrl-C.

The writer holds an exclusive ``flock`` on ``.lock`` inside the run directory for the run's
whole life; the file holds the writer's pid, host and start time as JSON, so a refused second
writer can name it. The operating system drops the lock when the process ends, even on
``kill -9``: a lock file left behind by a dead writer blocks nothing. The file is emptied when
the writer lets go, so a finished run directory does not change when it is opened again.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import signal
import socket
import threading
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from types import FrameType
from typing import Any

LOCK_NAME = ".lock"
"""The lock file inside a run directory."""


class RunLockedError(RuntimeError):
    """Another live process writes the run directory; nothing was changed."""


def _holder_text(holder: dict[str, Any]) -> str:
    """``pid N on HOST since T`` for a lock holder (what of it is known)."""
    parts = [f"pid {holder.get('pid', '?')}"]
    if holder.get("host"):
        parts.append(f"on {holder['host']}")
    if holder.get("since"):
        parts.append(f"since {holder['since']}")
    return " ".join(parts)


def _read_holder(fd: int) -> dict[str, Any]:
    """The holder JSON in an open lock file ({} if it is empty or unreadable)."""
    try:
        data = os.pread(fd, 4096, 0)
        holder = json.loads(data) if data.strip() else {}
    except (OSError, ValueError):
        return {}
    return holder if isinstance(holder, dict) else {}


class RunLock:
    """The exclusive lock of one run directory, held until :meth:`release` (or the process ends)."""

    def __init__(self, path: str | Path, what: str = "run") -> None:
        """Take the lock of run directory ``path`` at once, or raise :class:`RunLockedError`
        naming the process that holds it (without waiting: a second writer is a mistake);
        ``what`` names the directory in that message (a ``run``, a ``sweep``)."""
        self.path = Path(path) / LOCK_NAME
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = _read_holder(self._fd)
            os.close(self._fd)
            self._fd = None
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            raise RunLockedError(
                f"{Path(path)}: another process is writing this {what} ({_holder_text(holder)}); "
                "refused, nothing was changed"
            ) from None
        self.holder = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, json.dumps(self.holder).encode(), 0)

    def release(self) -> None:
        """Empty the lock file and let go (a run directory removed meanwhile is fine)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)  # closing the only descriptor drops the flock

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def writer_alive(path: str | Path) -> dict[str, Any] | None:
    """The live writer of run directory ``path`` (pid, host, since), or None if no process holds
    its lock (the run is finished, or its writer is gone: killed, crashed or interrupted)."""
    lock = Path(path) / LOCK_NAME
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            return _read_holder(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def describe_status(path: str | Path, status: str | None) -> str:
    """A run's status as a reader should take it: ``running (pid N ...)`` while its writer lives;
    otherwise the recorded status, and for a run that still says ``running`` that its writer is gone."""
    holder = writer_alive(path)
    if holder is not None:
        return f"running ({_holder_text(holder)})"
    return ended_status(status)


def ended_status(status: str | None) -> str:
    """A recorded status when no process writes the run any more (a ``running`` one was killed)."""
    if status == "running":
        return "running when its writer was killed, the writer is gone"
    if status in ("interrupted", "failed"):
        return f"{status}, the writer is gone"
    return str(status)


ENDING_SIGNALS = ("SIGTERM", "SIGHUP")
"""Signals that end a run the way Ctrl-C does: recorded as interrupted, resumable."""


class EndedBySignal(KeyboardInterrupt):
    """The interrupt SIGTERM or SIGHUP raises (its one argument is the signal's name, so a copy made
    from its arguments is the same): unlike Ctrl-C at a terminal, the signal reached this process
    alone, so a process with children of its own passes :attr:`signum` on to them."""

    def __str__(self) -> str:
        return f"ended by {self.args[0]}"

    @property
    def signum(self) -> int:
        """The signal's number."""
        return int(signal.Signals[self.args[0]])


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise EndedBySignal(signal.Signals(signum).name)


@contextlib.contextmanager
def signals_interrupt() -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP raise KeyboardInterrupt (as SIGINT does); the handlers
    before are put back after, since the library may run inside a larger Python program. Outside
    the main thread (where handlers cannot be set) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for name in ENDING_SIGNALS:
        sig = getattr(signal, name, None)
        if sig is not None:
            previous[sig] = signal.signal(sig, _interrupt)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
