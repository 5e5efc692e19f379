"""Multi-round strategies (FedAvg, FedProx, FedAdam, Top-K, DG-FedReuse, PDF) inside the
co-simulation.

A :class:`RoundWorld` runs rounds back to back (no faster than ``rounds.interval``) once the
first fit request has been dispatched. In each round the vehicles in coverage are the available
clients; the strategy draws its participants; the global weights are broadcast per RSU at the
worst receiver's rate; each participant that received them trains on the shared GPU (or on
board) and uploads its encoded update. A participant that leaves coverage before its upload
completes is a **dropout**: its update never arrives and the round aggregates the rest
(:meth:`fl_core.rounds.RoundStrategy.finish`). Training runs for real on the host at the moment
the simulated job starts; a reused DG-FedReuse update takes no device time.

Departures as unlearning requests (``rounds.unlearn_on_departure``; strategies that can
unlearn, i.e. PDF): the departing vehicle's history is ranked and PDF's unlearning rounds run
on the host, then play out in simulated time one after another. Because they are computed before
they play, a participant that leaves during them cannot be taken out of that aggregate: the model
is withdrawn (``kind: suspend``; rounds start again from W0), unless ``coordinator.keep_unarrived``
releases it with the update named under ``kept_unarrived``. Ordinary rounds aggregate only the
updates that arrived.
Unlearning and ordinary rounds never overlap: one lock per world.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import TYPE_CHECKING, Any, Protocol, cast

import simpy

from fl_core.rounds import RoundReport, RoundStrategy, build_strategy
from fl_core.training import evaluate

from ..compute.calibration import host_columns
from ..compute.device import device_job
from ..radio.transfers import new_timing
from ..rundir.records import WithdrawalCause
from .context import WorldContext
from .requests import Request, RequestKind

if TYPE_CHECKING:
    from fl_core.rounds.pdf import UnlearnResult


class _Unlearning(Protocol):
    """A strategy that forgets clients (PDF): ``requests`` sends departures only to one with ``unlearn``."""

    def unlearn(self, targets: Iterable[Hashable], available: Iterable[Hashable] | None = None) -> UnlearnResult: ...


class RoundWorld:
    """One multi-round strategy's server, channels and device queue."""

    def __init__(self, ctx: WorldContext, name: str) -> None:
        self.ctx, self.env, self.name = ctx, ctx.env, name
        env = ctx.env
        self.section = ctx.rounds
        self.strategy: RoundStrategy = self._new_strategy()
        self.queue: simpy.Store = simpy.Store(env)
        self.lock = simpy.Resource(env, capacity=1)
        self.links = ctx.links()
        self.job_times: list[float] = []  # simulated seconds from a round's start to each participant's upload
        self.device = ctx.device()
        self.eval_model = ctx.setup.model_fn()
        self.started = env.event()
        self.rounds_done = 0
        self.participants: set[Hashable] = set()
        self.present: set[Hashable] = set()  # the vehicles the requests say are present
        self.suspended = False
        self.epoch = 0
        self.taking = env.process(self.requests())
        env.process(self.loop())

    @property
    def model(self):
        return self.strategy.weights

    @property
    def busy(self) -> bool:
        """True while a round or an unlearning request holds the world, or a request is queued or taken
        from the queue (its get triggered, not yet processed)."""
        target = self.taking.target
        taken = isinstance(target, simpy.resources.store.StoreGet) and target.triggered
        return bool(self.lock.count or self.queue.items or taken)

    def _new_strategy(self) -> RoundStrategy:
        setup = self.ctx.setup
        return build_strategy(
            self.name, setup.model_fn, setup.w0, self.ctx.pool.data_of, self.section.build(), setup.streams
        )

    # -- processes -----------------------------------------------------------------------------
    def requests(self):
        """Wait for the first fit request, then turn departures into unlearning requests.

        A departure that leaves fewer than ``coordinator.min_clients`` vehicles withdraws the model
        (``kind: suspend``; the strategy restarts from W0, ``model_epoch`` + 1); rounds open again
        once that many vehicles are present."""
        min_clients = self.ctx.coordinator.min_clients
        while True:
            req: Request = yield self.queue.get()
            if req.kind is RequestKind.FIT and not self.started.triggered:
                self.present = set(req.added)
                self.started.succeed(req.time)
                continue
            if req.kind is not RequestKind.EDIT:
                continue
            self.present = (self.present - set(req.removed)) | set(req.added)
            if self.suspended:
                if len(self.present) >= min_clients:
                    self.suspended = False
                continue
            if len(self.present) < min_clients:
                with self.lock.request() as held:
                    yield held
                    self.suspend(req, min_clients)
                continue
            if self.section.unlearn_on_departure and hasattr(self.strategy, "unlearn"):
                gone = [v for v in req.removed if v in self.participants]
                if gone:
                    yield from self.unlearn(req, gone)

    def suspend(self, req: Request, min_clients: int, reason: str | None = None, spent: dict | None = None) -> None:
        """Withdraw the model: record it and restart the strategy from W0 (a fresh fit). ``reason``:
        why, when not too few vehicles (then updates that never arrived could not be taken out);
        ``spent``: what the request cost before the withdrawal."""
        withdrawn = sorted(self.participants, key=str)
        why = reason or f"{len(self.present)} vehicle(s) present, fewer than coordinator.min_clients = {min_clients}"
        row: dict[str, Any] = {
            "method": self.name,
            "kind": "suspend",
            "cause": (WithdrawalCause.COVERAGE if reason is None else WithdrawalCause.NOT_ARRIVED).value,
            "index": self.strategy.round,
            "request": req.index,
            "request_time": req.time,
            "done_time": self.env.now,
            "latency_s": self.env.now - req.time,
            "model_epoch": self.epoch,
            "triggered": True,
            "withdrawn": withdrawn,
            "members": [],
            "removed": list(req.removed),
            "added": list(req.added),
            "population": len(self.present),
            "accuracy": None,
            "makespan_s": 0.0,
            "total_bytes": 0,
            "note": f"model withdrawn: {why}; rounds start again from W0 once enough vehicles are present",
            **(spent or {}),
        }
        self.ctx.writer.emit(self.name, row)
        self.strategy = self._new_strategy()
        self.participants = set()
        self.rounds_done = 0
        self.epoch += 1
        self.suspended = True

    def loop(self):
        """Rounds back to back while enough vehicles are in coverage, until traffic ends (a round
        open at that moment is finished); at most ``rounds.rounds`` per model (a fresh model
        after a suspension gets as many again)."""
        yield self.started
        step = self.ctx.step_length
        limit = self.section.rounds
        while self.env.now < self.ctx.end_time:
            available = sorted(self.ctx.vehicles.covered)
            if (
                self.suspended
                or len(available) < self.section.min_available
                or (limit is not None and self.rounds_done >= limit)
            ):
                yield self.env.timeout(step)
                continue
            t0 = self.env.now
            with self.lock.request() as held:
                yield held
                yield from self.one_round(sorted(self.ctx.vehicles.covered))
            self.rounds_done += 1
            rest = self.section.interval - (self.env.now - t0)
            yield self.env.timeout(max(rest, step))

    # -- one round in simulated time ---------------------------------------------------------------
    def one_round(self, available: list[Hashable]):
        t0 = self.env.now
        strategy = self.strategy
        report = strategy.begin(available)
        timing: dict[str, Any] = new_timing()
        size = {t["client"]: t["bytes"] for t in report.transfers if t["kind"] == "broadcast"}
        got = yield from self._broadcast(list(report.selected), size, timing)
        dropped = set(report.selected) - got
        procs = [self.env.process(self._train_upload(c, timing, dropped, t0)) for c in sorted(got, key=str)]
        if procs:
            yield simpy.AllOf(self.env, procs)
        report = strategy.finish(dropped)
        timing["not_arrived"] = sorted(dropped, key=str)  # selected, their update never arrived: not aggregated
        self.participants.update(report.completed)
        self._record("round", report, timing, t0)

    def _broadcast(self, clients: list[Hashable], size: dict[Hashable, int], timing: dict):
        nbytes = max((size.get(c, 0) for c in clients), default=0)
        return (yield from self.links.broadcast(clients, nbytes, timing))

    def _seconds(self, update) -> float:
        """Simulated device time of one local update (a reused DG-FedReuse update trains nothing)."""
        return self.ctx.time.local_update(
            update.num_samples * self.section.local_epochs,
            update.compute_s,
            reused=update.extra.get("path") == "reused",
        )

    def _train_upload(self, client: Hashable, timing: dict, dropped: set, t0: float):
        report = self.strategy._require_open()
        before = len(report.transfers)
        update = self.strategy.update(client)
        uplink = sum(t["bytes"] for t in report.transfers[before:] if t["kind"] != "broadcast")
        vehicles = self.ctx.vehicles
        charged = yield from device_job(
            self.env, self.device, self._seconds(update), timing, alive=lambda: vehicles.reachable(client)
        )
        if charged is None:
            timing["failed"].append({"client": client, "tag": "job", "reason": "left_coverage"})
            dropped.add(client)
        elif not (yield from self.links.upload(client, uplink, timing)):
            timing["wasted_compute_s"] += charged
            dropped.add(client)
        self.job_times.append(self.env.now - t0)

    # -- unlearning requests -------------------------------------------------------------------
    def unlearn(self, req: Request, targets: list[Hashable]):
        with self.lock.request() as held:
            yield held
            t0 = self.env.now
            # the retained candidates: vehicles in coverage that took part in this model's rounds
            available = sorted((self.ctx.vehicles.covered & self.participants) - set(targets), key=str)
            result = cast(_Unlearning, self.strategy).unlearn(targets, available=available or None)
            timing: dict[str, Any] = new_timing()
            for report in result.reports:
                size = {t["client"]: t["bytes"] for t in report.transfers if t["kind"] == "broadcast"}
                got = yield from self._broadcast(list(report.selected), size, timing)
                procs = [
                    self.env.process(self._replay_client(report, c, self._unlearn_seconds(report, c), timing))
                    for c in sorted(got, key=str)
                ]
                if procs:
                    yield simpy.AllOf(self.env, procs)
            self.participants.difference_update(targets)
            merged = _merge(result.reports, self.strategy.name, self.strategy.round)
            merged.extra["unlearn"] = {
                "targets": list(targets),
                "selected": list(result.selected),
                "retained_in_coverage": len(available),
            }
            if not available:  # nobody reachable: the strategy ranked every past participant instead
                merged.extra["unlearn"]["ranked_out_of_coverage"] = True
            kept = timing.get("kept_unarrived")
            if kept and not self.ctx.coordinator.keep_unarrived:
                timing.pop("kept_unarrived")
                timing["not_arrived"] = kept
                timing["makespan_s"] = self.env.now - t0
                why = (
                    f"{len(kept)} update(s) of the unlearning rounds never arrived ({', '.join(map(str, kept))}) and "
                    f"{self.name} cannot take them out (coordinator.keep_unarrived would release the model with them)"
                )
                self.suspend(req, self.ctx.coordinator.min_clients, why, timing)
                return
            self._record("unlearn", merged, timing, t0, request=req.index, request_time=req.time)

    def _unlearn_seconds(self, report: RoundReport, client: Hashable) -> float:
        """Device time of one participant of an unlearning round: its work (its sample-epochs, or its
        samples x the local epochs), or its share of the round's host compute (measured model)."""
        work = report.client_work.get(client)
        if work is None:
            work = len(self.ctx.pool.data_of(client)) * self.section.local_epochs
        return self.ctx.time.local_update(work, report.compute_s / max(1, len(report.completed)))

    def _replay_client(self, report: RoundReport, client: Hashable, seconds: float, timing: dict):
        uplink = sum(t["bytes"] for t in report.transfers if t["client"] == client and t["kind"] != "broadcast")
        charged = yield from device_job(self.env, self.device, seconds, timing)
        if not (yield from self.links.upload(client, uplink, timing)):
            timing["wasted_compute_s"] += charged or 0.0
            timing.setdefault("kept_unarrived", []).append(client)

    # -- records ---------------------------------------------------------------------------------
    def _record(
        self,
        kind: str,
        report: RoundReport,
        timing: dict,
        t0: float,
        request: int | None = None,
        request_time: float | None = None,
    ) -> None:
        d = host_columns(report.as_dict())
        d.pop("transfers")
        d.pop("method")
        row: dict[str, Any] = {
            "method": self.name,
            "kind": kind,
            "index": report.round,
            "request": request,
            "request_time": t0 if request_time is None else request_time,
            "done_time": self.env.now,
            "latency_s": self.env.now - t0,
            "model_epoch": self.epoch,
        }
        row.update(d)
        if self.ctx.coordinator.evaluate:
            acc, loss = evaluate(self.eval_model, self.strategy.weights, self.ctx.test_set)
            row.update(accuracy=acc, loss=loss)
        timing["makespan_s"] = self.env.now - t0
        kept = set(timing.get("kept_unarrived", ()))
        row["arrived"] = [c for c in report.completed if c not in kept]
        row["members"] = sorted(self.participants, key=str)
        row.update(timing)
        self.ctx.writer.emit(self.name, row)


def _merge(reports: list[RoundReport], name: str, round_index: int) -> RoundReport:
    """One report summing several rounds (an unlearning request's rounds)."""
    out = RoundReport(name, round_index)
    for r in reports:
        for k, v in r.bytes.items():
            out.bytes[k] += v
        for k, modelled in r.fields.items():
            out.fields[k] += modelled
        out.compute_s += r.compute_s
        for c, w in r.client_work.items():
            out.client_work[c] = out.client_work.get(c, 0) + w
        out.max_client_compute_s = max(out.max_client_compute_s, r.max_client_compute_s)
        out.wall_s += r.wall_s
        out.selected = tuple(dict.fromkeys(out.selected + r.selected))
        out.completed = tuple(dict.fromkeys(out.completed + r.completed))
    out.extra["rounds"] = len(reports)
    return out
