"""One request-driven method's world: its coordinator, its channels and its shared device.

A request is handled in two steps. The editor decides and computes the edit on the host (real
training, real Fisher, real solve); its report then plays out in simulated time: departing
members upload their contributions, W0 is broadcast to the clients that train (at the rate of
the worst receiver), they queue for the GPU (or train on board), upload model and Fisher, and
the coordinator solves. A transfer that cannot finish before its vehicle leaves coverage fails
and is recorded. Fallback (documented): the model released by that edit is flagged
``provisional``, since it includes a contribution that never arrived; the vehicle's departure
is already a request in the queue, and its exact removal path takes the contribution out.
A departing member uploads its contribution within ``withdrawal_grace`` seconds of leaving
coverage (the withdrawal is issued before it disconnects), at its last known position.
"""

from __future__ import annotations

import time
from typing import Any, Hashable

import simpy

from fl_core.editors import Editor, EditReport, UnsupportedRequestError
from fl_core.errors import EmptyPopulationError
from fl_core.payload import ByteKind
from fl_core.training import evaluate

from .calibration import host_columns
from .context import WorldContext
from .requests import Request, RequestKind
from .transfers import broadcast, device_job, upload

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
        self.channels = ctx.channels()
        self.device = ctx.device()
        self.eval_model = ctx.setup.model_fn()
        self.process = self.env.process(self.run())

    @property
    def busy(self) -> bool:
        """True while a request is queued or being handled."""
        target = self.process.target
        return bool(self.queue.items) or (target is not None and not isinstance(target, simpy.resources.store.StoreGet))

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
            if len(present) < min_clients:
                self.record(batch, None, self._suspended_note(present, min_clients), t_request)
                return
            self.editor = self.ctx.new_editor(self.name, self.epoch)
            report = self.editor.fit(sorted(present))
            self.suspended = False
            extra = {
                "refit": True,
                "note": f"fresh fit: {len(present)} vehicles present again (coordinator.min_clients = {min_clients})",
            }
        else:
            if len(present) < min_clients:
                self.present = present
                self.suspend(
                    batch,
                    t_request,
                    f"{len(present)} vehicle(s) would remain, fewer than coordinator.min_clients = {min_clients}",
                )
                return
            removed, added = self._net(batch)
            if not removed and not added:
                self.present = present
                self.record(batch, None, {"note": "requests cancel out"}, t_request)
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
                self.record(batch, None, {"note": f"unsupported: {e}"}, t_request)
                return
            except EmptyPopulationError as e:  # e.g. fewer clients than a fixed subset size
                self.present = present
                self.suspend(batch, t_request, str(e))
                return
            self.present = present
        host_s = time.perf_counter() - host0
        timing = yield from self.play(report)
        timing["host_edit_s"] = host_s
        timing.update(extra)
        self.record(batch, report, timing, t_request)

    def suspend(self, batch: list[Request], t_request: float, reason: str) -> None:
        """Withdraw the model: its clients' contributions go with it; wait for enough vehicles."""
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
                "triggered": True,
                "withdrawn": withdrawn,
                "population": len(self.present),
                "removed": sorted(departed, key=str),
                "added": sorted({v for r in batch for v in r.added}, key=str),
                "accuracy": None,
                "makespan_s": 0.0,
                **_no_bytes(),
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
    def play(self, report: EditReport):
        env, vehicles = self.env, self.ctx.vehicles
        t0 = env.now
        timing: dict[str, Any] = {"queue_s": 0.0, "compute_sim_s": 0.0, "transfer_s": 0.0, "failed": []}
        per_client: dict[Hashable, dict[str, int]] = {}
        broadcast_bytes = 0
        for t in report.transfers:
            if t["kind"] in UPLOAD_KINDS:
                kinds = per_client.setdefault(t["client"], {})
                kinds[t["kind"]] = kinds.get(t["kind"], 0) + t["bytes"]
            elif t["kind"] == "broadcast":
                broadcast_bytes += t["bytes"]
        trained = set(report.trained)
        procs = [
            env.process(self._withdraw(c, sum(per_client[c].values()), timing)) for c in per_client if c not in trained
        ]
        if trained:
            got = yield from broadcast(env, self.channels, vehicles, trained, broadcast_bytes, timing)
            for c in sorted(got):
                procs.append(
                    env.process(
                        self._train_upload(
                            c, sum(per_client.get(c, {}).values()), timing, self.compute_seconds(c, report)
                        )
                    )
                )
        if procs:
            yield simpy.AllOf(env, procs)
        solve = self.ctx.time.solve(report)
        timing["solve_sim_s"] = solve
        yield env.timeout(solve)
        timing["makespan_s"] = env.now - t0
        timing["provisional"] = bool(timing["failed"])
        return timing

    def _withdraw(self, client: Hashable, nbytes: int, timing: dict):
        vehicles = self.ctx.vehicles
        yield from upload(
            self.env,
            self.channels,
            vehicles,
            client,
            nbytes,
            timing,
            tag="withdrawal",
            reachable=vehicles.reachable_for_withdrawal,
        )

    def _train_upload(self, client: Hashable, nbytes: int, timing: dict, seconds: float):
        yield from device_job(self.env, self.device, seconds, timing)
        yield from upload(self.env, self.channels, self.ctx.vehicles, client, nbytes, timing)

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

    # -- records -----------------------------------------------------------------------------
    def record(self, batch: list[Request], report: EditReport | None, timing: dict, t_request: float) -> None:
        """One record of this world for the requests of ``batch``."""
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
            if self.ctx.coordinator.evaluate:
                assert self.editor.model is not None  # the editor has answered a request
                acc, loss = evaluate(self.eval_model, self.editor.model, self.ctx.test_set)
                row.update(accuracy=acc, loss=loss)
        row.update(timing)
        self.ctx.writer.emit(self.name, row)


def _no_bytes() -> dict[str, Any]:
    """The byte fields of a record that moved nothing (a withdrawal: the model is dropped, not unlearned)."""
    return {"bytes": {k.value: 0 for k in ByteKind}, "total_bytes": 0, "subset_size": 0, "trained": []}
