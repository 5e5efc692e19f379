"""The shared accelerator in simulated time: client jobs queue for it, and queued jobs may run
together as one batch.

Every job (one client's local training + Fisher) has a duration, measured on the host or given
by the device model. The device serves its queue in arrival order. When it frees, it takes up to
``max_jobs`` waiting jobs as one batch; a batch of durations s_1..s_n keeps the device busy for

    max(s) + (1 - overlap) * (sum(s) - max(s))

and every job of the batch finishes when the batch does. ``overlap`` says how much of the
device a single small job leaves idle: 0 is no gain (the batch costs what the jobs cost one after
another), 1 is perfect packing (the batch costs its longest job). With ``max_jobs`` 1 the device
is a plain FIFO queue, one job at a time. This is a model of the simulated time only: the host
still computes the jobs one after another, which does not change their results.

:func:`device_job` is the verb a world uses: one job on the shared device, or on an on-board unit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import simpy


def batch_seconds(durations: list[float], overlap: float) -> float:
    """Simulated seconds a batch of jobs with these durations occupies the device."""
    if not durations:
        return 0.0
    longest = max(durations)
    return longest + (1.0 - overlap) * (sum(durations) - longest)


@dataclass
class _Job:
    seconds: float
    done: simpy.Event
    alive: Callable[[], bool] | None = None


class SharedDevice:
    """One accelerator: FIFO queue of jobs, served in batches of at most ``max_jobs``."""

    def __init__(self, env: simpy.Environment, max_jobs: int = 1, overlap: float = 0.0) -> None:
        if max_jobs < 1:
            raise ValueError(f"max_jobs must be at least 1, got {max_jobs}")
        if not 0.0 <= overlap <= 1.0:
            raise ValueError(f"overlap must be in [0, 1], got {overlap}")
        self.env, self.max_jobs, self.overlap = env, max_jobs, overlap
        self._waiting: list[_Job] = []
        self._serving = False
        self.batches: list[int] = []  # size of every batch served, in order

    def submit(self, seconds: float, alive: Callable[[], bool] | None = None) -> simpy.Event:
        """Queue a job; the returned event fires at its batch's end with (start, end), or with None
        when ``alive()`` is false as the device reaches the job (dropped unrun)."""
        job = _Job(seconds, self.env.event(), alive)
        self._waiting.append(job)
        if not self._serving:
            self._serving = True
            self.env.process(self._serve())
        return job.done

    def _serve(self):
        env = self.env
        while self._waiting:
            yield env.timeout(0)  # let every job submitted at this instant join the batch
            for j in [j for j in self._waiting if j.alive is not None and not j.alive()]:
                self._waiting.remove(j)
                j.done.succeed(None)
            if not self._waiting:
                break
            batch, self._waiting = self._waiting[: self.max_jobs], self._waiting[self.max_jobs :]
            start = env.now
            self.batches.append(len(batch))
            yield env.timeout(batch_seconds([j.seconds for j in batch], self.overlap))
            for j in batch:
                j.done.succeed((start, env.now))
        self._serving = False


def device_job(
    env: simpy.Environment,
    device: SharedDevice | None,
    seconds: float,
    timing: dict,
    alive: Callable[[], bool] | None = None,
):
    """Run one job on the shared device (queued, possibly batched) or on an on-board unit
    (``device`` None) for ``seconds``; ``compute_sim_s`` gets the time the job held the device.
    A queued job whose ``alive()`` is false when the device reaches it is dropped unrun (its vehicle
    has left: the coordinator does not train for it). Returns the seconds charged (None: dropped)."""
    if seconds <= 0:
        return 0.0
    if device is not None:
        t_q = env.now
        span = yield device.submit(seconds, alive)
        timing["queue_s"] += (env.now if span is None else span[0]) - t_q
        if span is None:
            return None
        start, end = span
        timing["compute_sim_s"] += end - start
        return end - start
    yield env.timeout(seconds)
    timing["compute_sim_s"] += seconds
    return seconds
