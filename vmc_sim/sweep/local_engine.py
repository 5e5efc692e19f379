"""Running a sweep's points on this machine: each in a fresh spawned process (libsumo allows one
simulation per process), ``workers`` at a time."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from multiprocessing.connection import Connection
from typing import Any

from ..rundir.lock import EndedBySignal
from .point import failure, run_point

Done = Callable[[dict[str, Any]], None]


def _serve(task: dict[str, Any], sender: Connection) -> None:
    """In the point's own process: run it and send the result back (nothing, if interrupted)."""
    try:
        sender.send(run_point(task))
    except KeyboardInterrupt:  # its run directory says 'interrupted'; the sweep says the rest
        pass
    finally:
        sender.close()


def run_local(tasks: list[dict[str, Any]], workers: int, done: Done) -> None:
    """Each point in a fresh spawned process, ``workers`` at a time: a process that dies takes down
    only its own point (recorded failed, with its exit code). An interrupt starts no further point;
    one by SIGTERM or SIGHUP, which reached this process alone, is passed on to the points running
    (Ctrl-C at a terminal reaches them itself), so each records itself interrupted and ends."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    running: dict[str, int] = {}  # point -> the pid of its process

    def one(task: dict[str, Any]) -> dict[str, Any]:
        receiver, sender = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_serve, args=(task, sender), name=f"vmc-sweep-{task['id']}")
        proc.start()
        sender.close()
        if proc.pid is not None:
            running[task["id"]] = proc.pid
        try:
            return receiver.recv()
        except EOFError:  # the process ended without a result: SUMO crashed, out of memory, a signal
            proc.join()
            return failure(
                task, RuntimeError(f"the point's process ended without a result (exit code {proc.exitcode})")
            )
        finally:
            running.pop(task["id"], None)
            receiver.close()
            proc.join()

    with ThreadPoolExecutor(max_workers=workers) as threads:
        try:
            for future in as_completed([threads.submit(one, t) for t in tasks]):
                done(future.result())
        except BaseException as e:
            threads.shutdown(wait=False, cancel_futures=True)  # start no further point
            if isinstance(e, EndedBySignal):
                for pid in list(running.values()):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, e.signum)
            raise
