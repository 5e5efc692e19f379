"""One request-driven method's world: its coordinator, its channels and its shared device.

A request is handled in two steps. The editor decides and computes the edit on the host (real
training, real Fisher, real solve); its report then plays out in simulated time: departing
members upload their contributions, W0 is broadcast to the clients that train (at the rate of
the worst receiver), they queue for the GPU (or train on board), upload model and Fisher, and
the coordinator solves.

**A model holds only what arrived.** A contribution whose upload fails (its vehicle left the
region, a broadcast never reached it) is taken out before the model is released, by the
method's own removal path (F-SOSA's exact removal, Retrain's retraining without it, ...), and
that take-out plays out in simulated time too (replacement members train and upload; they may
fail in turn, and are taken out in turn). Only the final solve is charged: the coordinator
solves once it knows what arrived. A method that cannot remove a client withdraws the model
(``kind: suspend``), unless ``coordinator.keep_unarrived`` is set: then the model keeps the
unarrived contributions and the record names them under ``kept_unarrived``. Every record's
``members`` are the clients whose contributions the released model holds. Exactness: a trainee
that left mid-upload is taken out at once, a newcomer that was not drawn stays a client until its
departure request is processed (it finds the other already gone); once the departures known at a
take-out are processed, F-SOSA's subset is uniform over the remaining clients, as Retrain's
(``tests/test_arrival.py``, chi-square). In between, the two differ in whether the departed
newcomer is still counted, not in what the model holds.

**Failed work costs what it cost.** Device time of a job whose upload then failed is charged
(``wasted_compute_s``), airtime and bytes of failed transfers up to their failure likewise
(``failed_transfer_s``, ``bytes_sent`` vs ``bytes_delivered``); a queued job whose vehicle
has left before the device reaches it is dropped unrun.

A departing member uploads its contribution within ``withdrawal_grace`` seconds of leaving
coverage (the withdrawal is issued before it disconnects), at its last known position.
"""

from __future__ import annotations

import time
from collections.abc import Hashable
from typing import Any

import simpy
import torch

from fl_core.editors import Editor, EditReport, UnsupportedRequestError
from fl_core.errors import EmptyPopulationError
from fl_core.payload import ByteKind
from fl_core.training import evaluate

from ..compute.calibration import host_columns
from ..compute.device import device_job
from ..radio.transfers import COST_KEYS, new_timing
from ..rundir.records import WithdrawalCause
from .context import WorldContext
from .requests import Request, RequestKind

UPLOAD_KINDS = ("model_upload", "fisher_upload")


class World:
    """One method's coordinator, channels and shared device (None: on-board training).

    Suspension: when a request would leave fewer than ``coordinator.min_clients`` vehicles (or
    the editor finds it would leave no client), the model is withdrawn instead (unlearning a
    model down to nothing means withdrawing it): the request is recorded as ``kind: suspend``
    with the withdrawn clients, and the world waits. Requests while suspended are recorded as
    ``kind: suspended``; once ``min_clients`` vehicles are present again, a fresh editor fits
    them (``kind: fit``, ``refit: true``) and the run goes on. ``model_epoch`` in every record
    counts the models: 0 for the first, +1 after each suspension.
    """

    def __init__(self, ctx: WorldContext, name: str) -> None:
        self.ctx, self.env, self.name = ctx, ctx.env, name
        self.editor: Editor = ctx.new_editor(name)
        self.present: set[str] = set()  # the vehicles this world's requests say are present
        self.suspended = False
        self.epoch = 0
        self.queue: simpy.Store = simpy.Store(self.env)
        self.links = ctx.links()
        self.job_times: list[float] = []  # from a request to each of its trainees' upload (or failure), in s
        self.asked_at = 0.0  # when the request being handled was made
        self.device = ctx.device()
        self.eval_model = ctx.setup.model_fn()
        self._last_evaluation: tuple[Any, float, float] | None = None  # (model, accuracy, loss)
        self.process = self.env.process(self.run())

    @property
    def busy(self) -> bool:
        """True while a request is queued, taken from the queue (its get triggered, not yet processed)
        or being handled."""
        target = self.process.target
        waiting = isinstance(target, simpy.resources.store.StoreGet) and not target.triggered
        return bool(self.queue.items) or (target is not None and not waiting)

    # -- coordinator loop --------------------------------------------------------------------
    def run(self):
        window = self.ctx.coordinator.window
        while True:
            req: Request = yield self.queue.get()
            batch = [req]
            if req.kind is RequestKind.EDIT and window > 0:
                yield self.env.timeout(window)
                while self.queue.items and self.queue.items[0].kind is RequestKind.EDIT:
                    batch.append((yield self.queue.get()))
            yield from self.handle(batch)

    def handle(self, batch: list[Request]):
        t_request = batch[0].time
        host0 = time.perf_counter()
        min_clients = self.ctx.coordinator.min_clients
        present = set(self.present)
        for r in batch:
            present = (present - set(r.removed)) | set(r.added)
        extra: dict[str, Any] = {}
        if batch[0].kind is RequestKind.FIT:
            self.present = set(batch[0].added)
            report = self.editor.fit(batch[0].added)
        elif self.suspended:
            self.present = present
            here = present - self.known_departed()
            if len(here) < min_clients:
                self.record(batch, None, self._suspended_note(here, min_clients), t_request)
                return
            self.editor = self.ctx.new_editor(self.name, self.epoch)
            report = self.editor.fit(sorted(here, key=str))
            self.suspended = False
            extra = {
                "refit": True,
                "note": f"fresh fit: {len(here)} vehicles present again (coordinator.min_clients = {min_clients})",
            }
        else:
            if len(present) < min_clients:
                self.present = present
                self.suspend(
                    batch,
                    t_request,
                    WithdrawalCause.COVERAGE,
                    f"{len(present)} vehicle(s) would remain, fewer than coordinator.min_clients = {min_clients}",
                )
                return
            removed, added = self._net(batch)
            if not removed and not added:
                self.present = present
                self.record(batch, None, {"kind": "none", "triggered": False, "note": "requests cancel out"}, t_request)
                return
            kind = (
                "remove"
                if (len(removed) == 1 and not added)
                else "add"
                if (len(added) == 1 and not removed)
                else "batch"
            )
            try:
                report = self.editor.batch(removed, added, kind=kind)
            except UnsupportedRequestError as e:  # e.g. fine-tuning cannot remove: recorded, state unchanged
                self.present = present
                self.record(
                    batch, None, {"kind": "unsupported", "triggered": False, "note": f"unsupported: {e}"}, t_request
                )
                return
            except EmptyPopulationError as e:  # e.g. fewer clients than a fixed subset size
                self.present = present
                self.suspend(batch, t_request, WithdrawalCause.POPULATION, str(e))
                return
            self.present = present
        host_s = time.perf_counter() - host0
        t_play, self.asked_at = self.env.now, t_request
        timing = yield from self.play(report)
        outcome = yield from self.take_out(timing)
        timing["makespan_s"] = self.env.now - t_play
        if isinstance(outcome, tuple):  # what was tried before the model was withdrawn stays on record
            tried = report.total_bytes + sum(p["bytes"] for p in timing["take_outs"])
            timing.update(trained=list(report.trained), bytes=dict(report.bytes), total_bytes=tried)
            cause, reason = outcome
            self.suspend(batch, t_request, cause, reason, timing)
            return
        timing["host_edit_s"] = host_s + outcome.pop("host_s", 0.0)
        timing.update(extra)
        self.record(batch, report, timing, t_request, outcome)

    def take_out(self, timing: dict):
        """Take the contributions that never arrived out of the model, by the editor's removal path,
        playing each take-out in simulated time, until the model holds only what arrived.
        Returns what the take-outs did (merged into the record), or the cause and reason to withdraw
        the model. Each pass takes at least one client out, so the take-outs end."""
        lost = [c for c in timing["not_arrived"] if c in self.editor.clients]
        passes: list[dict[str, Any]] = []
        host_s = 0.0
        timing["take_outs"] = passes
        while lost:
            gone = sorted((self.known_departed() & self.editor.clients) - set(lost), key=str)
            taken = [*lost, *gone]
            if len(self.editor.clients) - len(taken) < self.ctx.coordinator.min_clients:
                return WithdrawalCause.NOT_ARRIVED, (
                    f"{len(lost)} contribution(s) never arrived ({_named(lost)}); without them and the "
                    f"{len(gone)} client(s) known to have left, fewer than coordinator.min_clients = "
                    f"{self.ctx.coordinator.min_clients} clients remain"
                )
            host0 = time.perf_counter()
            try:
                report = self.editor.batch(taken, [], kind="remove" if len(taken) == 1 else "batch")
            except UnsupportedRequestError:
                if not self.ctx.coordinator.keep_unarrived:
                    return WithdrawalCause.NOT_ARRIVED, (
                        f"{self.name} cannot remove the contribution(s) that never arrived ({_named(lost)}) "
                        "(coordinator.keep_unarrived would release the model with them)"
                    )
                timing["kept_unarrived"] = sorted(lost, key=str)
                break
            except EmptyPopulationError as e:
                return WithdrawalCause.POPULATION, str(e)
            host_s += time.perf_counter() - host0
            again = yield from self.play(report, skip=set(lost))
            _add_costs(timing, again)
            passes.append(
                {
                    "removed": sorted(lost, key=str),
                    "departed": gone,
                    "trained": list(report.trained),
                    "bytes": report.total_bytes,
                    "solve": _solve_fields(report),
                }
            )
            lost = [c for c in again["not_arrived"] if c in self.editor.clients]
        return {"take_outs": passes, "host_s": host_s, "population": len(self.editor.clients)}

    def known_departed(self) -> set[Hashable]:
        """Clients known to have left: out of coverage, with a departure waiting in this world's queue.
        A take-out removes them with the contributions that never arrived, so that the next
        retraining does not ask them to train (their departure requests then find them gone)."""
        vehicles = self.ctx.vehicles
        return {v for r in self.queue.items for v in r.removed if not vehicles.reachable(v)}

    def suspend(
        self, batch: list[Request], t_request: float, cause: WithdrawalCause, reason: str, spent: dict | None = None
    ) -> None:
        """Withdraw the model: its clients' contributions go with it; wait for enough vehicles.
        ``cause`` and ``reason`` say why; ``spent``: what the
        request cost in simulated time before the model was withdrawn."""
        withdrawn = sorted(self.editor.clients, key=str)
        departed = {v for r in batch for v in r.removed}
        for c in departed:
            self.ctx.pool.forget(c)
        self.epoch += 1
        self.suspended = True
        self.editor = self.ctx.new_editor(self.name, self.epoch)  # unfitted until the fresh fit
        self.record(
            batch,
            None,
            {
                "kind": "suspend",
                "cause": cause.value,
                "triggered": True,
                "withdrawn": withdrawn,
                "population": len(self.present),
                "removed": sorted(departed, key=str),
                "added": sorted({v for r in batch for v in r.added}, key=str),
                "accuracy": None,
                "makespan_s": 0.0,
                **_no_bytes(),
                **(spent or {}),
                "members": [],
                "note": f"model withdrawn: {reason}; a fresh fit follows once enough vehicles are present",
            },
            t_request,
        )

    def _suspended_note(self, present: set, min_clients: int) -> dict[str, Any]:
        return {
            "kind": "suspended",
            "triggered": False,
            "population": len(present),
            "accuracy": None,
            "makespan_s": 0.0,
            **_no_bytes(),
            "members": [],
            "note": f"model withdrawn: {len(present)} vehicle(s) present, coordinator.min_clients = {min_clients}",
        }

    def _net(self, batch: list[Request]) -> tuple[list[str], list[str]]:
        clients = set(self.editor.clients)
        removed: list[str] = []
        added: list[str] = []
        for r in batch:
            for v in r.removed:
                if v in added:
                    added.remove(v)
                elif v in clients and v not in removed:
                    removed.append(v)
            for v in r.added:
                if v in removed:
                    removed.remove(v)
                elif v not in clients and v not in added:
                    added.append(v)
        return removed, added

    # -- playing a report out in simulated time ----------------------------------------------
    def play(self, report: EditReport, skip: set[Hashable] | frozenset = frozenset()):
        """Play ``report``'s transfers and jobs; ``skip``: clients whose contributions are being
        taken out (never arrived), who send nothing. ``not_arrived`` lists the trainees whose
        contributions did not reach the coordinator; the solve is charged only when all did."""
        env = self.env
        t0 = env.now
        timing = new_timing()
        per_client: dict[Hashable, int] = {}
        broadcast_bytes = 0
        for t in report.transfers:
            if t["kind"] in UPLOAD_KINDS:
                per_client[t["client"]] = per_client.get(t["client"], 0) + t["bytes"]
            elif t["kind"] == "broadcast":
                broadcast_bytes += t["bytes"]
        trained = [c for c in report.trained if c not in skip]
        arrived: set[Hashable] = set()
        procs = [
            env.process(self._withdraw(c, n, timing))
            for c, n in per_client.items()
            if c not in report.trained and c not in skip
        ]
        if trained:
            got = yield from self.links.broadcast(trained, broadcast_bytes, timing)
            for c in sorted(got, key=str):
                seconds = self.compute_seconds(c, report)
                procs.append(env.process(self._train_upload(c, per_client.get(c, 0), timing, seconds, arrived)))
        if procs:
            yield simpy.AllOf(env, procs)
        timing["arrived"] = [c for c in trained if c in arrived]
        timing["not_arrived"] = [c for c in trained if c not in arrived]
        solve = 0.0 if timing["not_arrived"] else self.ctx.time.solve(report)
        timing["solve_sim_s"] = solve
        yield env.timeout(solve)
        timing["makespan_s"] = env.now - t0
        return timing

    def _withdraw(self, client: Hashable, nbytes: int, timing: dict):
        vehicles = self.ctx.vehicles
        yield from self.links.upload(
            client, nbytes, timing, tag="withdrawal", reachable=vehicles.reachable_for_withdrawal
        )

    def _train_upload(self, client: Hashable, nbytes: int, timing: dict, seconds: float, arrived: set):
        vehicles = self.ctx.vehicles
        charged = yield from device_job(
            self.env, self.device, seconds, timing, alive=lambda: vehicles.reachable(client)
        )
        if charged is None:
            timing["failed"].append({"client": client, "tag": "job", "reason": "left_coverage"})
        elif (yield from self.links.upload(client, nbytes, timing)):
            arrived.add(client)
        else:
            timing["wasted_compute_s"] += charged
        self.job_times.append(self.env.now - self.asked_at)  # queueing behind earlier requests included

    def compute_seconds(self, client: Hashable, report: EditReport) -> float:
        """Simulated duration of one client's training (+ Fisher) job for ``report``: its
        sample-epochs in ``client_work`` for the multi-round editors, else its samples x the
        configured epochs plus one Fisher pass; the host's measurement for the measured model."""
        pool = self.ctx.pool

        def host_s() -> float:
            if client in report.client_compute_s:
                return report.client_compute_s[client]
            return pool.train(client).compute_s

        return self.ctx.time.contribution(len(pool.data_of(client)), report.client_work.get(client), host_s)

    def evaluated(self, model: Any) -> tuple[float, float]:
        """Test accuracy and loss of ``model``; the previous record's when the model has not changed
        since (a request that triggered nothing), without evaluating it again."""
        last = self._last_evaluation
        if last is not None and last[0].shape == model.shape and torch.equal(last[0], model):
            return last[1], last[2]
        acc, loss = evaluate(self.eval_model, model, self.ctx.test_set)
        self._last_evaluation = (model.detach().clone(), acc, loss)
        return acc, loss

    # -- records -----------------------------------------------------------------------------
    def record(
        self,
        batch: list[Request],
        report: EditReport | None,
        timing: dict,
        t_request: float,
        outcome: dict | None = None,
    ) -> None:
        """One record of this world for the requests of ``batch`` (``outcome``: the take-outs of
        contributions that never arrived, whose bytes and population the record adds)."""
        now = self.env.now
        row: dict[str, Any] = {
            "method": self.name,
            "index": batch[0].index,
            "requests": [r.index for r in batch],
            "request_time": t_request,
            "done_time": now,
            "latency_s": now - t_request,
            "model_epoch": self.epoch,
        }
        if report is not None:
            d = host_columns(report.as_dict())
            d.pop("transfers")
            d.pop("method")
            row.update(d)
            if outcome is not None:
                row["population"] = outcome["population"]
                row["total_bytes"] += sum(p["bytes"] for p in outcome["take_outs"])
            if self.ctx.coordinator.evaluate:
                assert self.editor.model is not None  # the editor has answered a request
                acc, loss = self.evaluated(self.editor.model)
                row.update(accuracy=acc, loss=loss)
        if report is None:  # nothing was asked of anyone (the timing of a withdrawal says otherwise)
            row.update(
                removed=sorted({v for r in batch for v in r.removed}, key=str),
                added=sorted({v for r in batch for v in r.added}, key=str),
                bytes={k.value: 0 for k in ByteKind},
                total_bytes=0,
            )
        row["members"] = sorted(getattr(self.editor, "members", self.editor.clients), key=str)
        row.update(timing)
        self.ctx.writer.emit(self.name, row, self.editor.model if report is not None else None)


def _add_costs(into: dict, more: dict) -> None:
    """Add one take-out's costs to its request's (failures and contributions that never arrived appended)."""
    for k in ("queue_s", "compute_sim_s", "solve_sim_s", "wasted_compute_s", *COST_KEYS):
        into[k] += more[k]
    into["failed"].extend(more["failed"])
    into["arrived"].extend(more["arrived"])
    into["not_arrived"].extend(more["not_arrived"])


def _solve_fields(report: EditReport) -> dict[str, Any] | None:
    """A take-out's solve without its host-measured seconds (records hold simulated fields only)."""
    if report.solve is None:
        return None
    d = report.solve.as_dict()
    d.pop("seconds", None)
    return d


def _named(clients: list) -> str:
    shown = ", ".join(map(str, clients[:5]))
    return shown + (f" and {len(clients) - 5} more" if len(clients) > 5 else "")


def _no_bytes() -> dict[str, Any]:
    """The byte fields of a record that moved nothing (a withdrawal: the model is dropped, not unlearned)."""
    return {"bytes": {k.value: 0 for k in ByteKind}, "total_bytes": 0, "subset_size": 0, "trained": []}
