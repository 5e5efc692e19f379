"""The discrete-event co-simulation: mobility drives requests, coordinators edit, the channel
and the shared GPU charge their time.

One simpy environment holds:

- the **mobility process**, which advances the source (live SUMO or a trace) step by step,
  keeps every covered vehicle's position, and turns join/leave events into requests;
- one **world per method** (F-SOSA, Retrain, ...): a coordinator process with its own request
  queue, its own RSU channels and its own GPU queue, so that every method sees the identical
  request sequence without competing for resources with the others.

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

import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable

import simpy

from fl_core.clients import ClientPool
from fl_core.fisher import layer_specs
from fl_core.cache import ContributionCache
from fl_core.store import ContributionStore
from fl_core.editors import Editor, EditReport, UnsupportedRequestError, build_editor
from fl_core.errors import EmptyPopulationError
from fl_core.experiment import OneShotSetup
from fl_core.rng import derive_seed
from fl_core.training import LocalTrainer, evaluate, key_settings
from mobility.events import MobilityEvent
from mobility.rsu import Rsu
from mobility.source import MobilitySource

from .calibration import Calibration, calibrated, host_columns, pinned
from .channel import ChannelConfig, RsuChannel
from .rounds import RoundWorld
from .transfers import broadcast, device_job, upload
from .runs import RunDir
from .scenario import Scenario

UPLOAD_KINDS = ("model_upload", "fisher_upload")


@dataclass
class Request:
    index: int
    time: float
    kind: str  # fit | edit
    removed: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)


class Vehicles:
    """Where every vehicle is and whether it may still talk to its RSU."""

    def __init__(self, grace: float) -> None:
        self.grace = grace
        self.state: dict[str, tuple[float, float, float, str]] = {}  # x, y, speed, rsu
        self.covered: set[str] = set()
        self.departed_at: dict[str, float] = {}
        self.now = 0.0

    def apply(self, events: list[MobilityEvent], members) -> None:
        for e in events:
            if e.kind == "join":
                self.covered.add(e.vehicle)
                self.departed_at.pop(e.vehicle, None)
            else:
                self.covered.discard(e.vehicle)
                self.departed_at[e.vehicle] = e.time
            self.state[e.vehicle] = (e.x, e.y, e.speed, e.rsu)
        for m in members:
            self.state[m.vehicle] = (m.x, m.y, m.speed, m.rsu)

    def rsu_of(self, v: str) -> str | None:
        s = self.state.get(v)
        return s[3] if s else None

    def position(self, v: str) -> tuple[float, float] | None:
        s = self.state.get(v)
        return None if s is None else (s[0], s[1])

    def reachable(self, v: str) -> bool:
        return v in self.covered

    def reachable_for_withdrawal(self, v: str) -> bool:
        if v in self.covered:
            return True
        t = self.departed_at.get(v)
        return t is not None and self.now - t <= self.grace


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

    def __init__(self, env: simpy.Environment, name: str, editor: Editor, sim: "CoSimulation") -> None:
        self.env, self.name, self.editor, self.sim = env, name, editor, sim
        self.present: set[str] = set()  # the vehicles this world's requests say are present
        self.suspended = False
        self.epoch = 0
        self.queue: simpy.Store = simpy.Store(env)
        self.channels = sim.rsu_channels(env)
        self.device = sim.scenario.compute.device(env)
        self.eval_model = sim.setup.model_fn()
        self.process = env.process(self.run())

    # -- coordinator loop --------------------------------------------------------------------
    def run(self):
        window = self.sim.scenario.coordinator.window
        while True:
            req: Request = yield self.queue.get()
            batch = [req]
            if req.kind == "edit" and window > 0:
                yield self.env.timeout(window)
                while self.queue.items and self.queue.items[0].kind == "edit":
                    batch.append((yield self.queue.get()))
            yield from self.handle(batch)

    def handle(self, batch: list[Request]):
        t_request = batch[0].time
        host0 = time.perf_counter()
        min_clients = self.sim.scenario.coordinator.min_clients
        present = set(self.present)
        for r in batch:
            present = (present - set(r.removed)) | set(r.added)
        extra: dict[str, Any] = {}
        if batch[0].kind == "fit":
            self.present = set(batch[0].added)
            report = self.editor.fit(batch[0].added)
        elif self.suspended:
            self.present = present
            if len(present) < min_clients:
                self.sim.record(self, batch, None, self._suspended_note(present, min_clients), t_request)
                return
            self.editor = self.sim.new_editor(self.name, self.epoch)
            report = self.editor.fit(sorted(present))
            self.suspended = False
            extra = {"refit": True, "note": f"fresh fit: {len(present)} vehicles present again "
                                             f"(coordinator.min_clients = {min_clients})"}
        else:
            if len(present) < min_clients:
                self.present = present
                self.suspend(batch, t_request, f"{len(present)} vehicle(s) would remain, fewer than "
                                                f"coordinator.min_clients = {min_clients}")
                return
            removed, added = self._net(batch)
            if not removed and not added:
                self.present = present
                self.sim.record(self, batch, None, {"note": "requests cancel out"}, t_request)
                return
            kind = "remove" if (len(removed) == 1 and not added) else "add" if (len(added) == 1 and not removed) else "batch"
            try:
                report = self.editor.batch(removed, added, kind=kind)
            except UnsupportedRequestError as e:  # e.g. fine-tuning cannot remove: recorded, state unchanged
                self.present = present
                self.sim.record(self, batch, None, {"note": f"unsupported: {e}"}, t_request)
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
        self.sim.record(self, batch, report, timing, t_request)

    def suspend(self, batch: list[Request], t_request: float, reason: str) -> None:
        """Withdraw the model: its clients' contributions go with it; wait for enough vehicles."""
        withdrawn = sorted(self.editor.clients, key=str)
        departed = {v for r in batch for v in r.removed}
        for c in departed:
            self.sim.pool.forget(c)
        self.epoch += 1
        self.suspended = True
        self.editor = self.sim.new_editor(self.name, self.epoch)  # unfitted until the fresh fit
        self.sim.record(self, batch, None, {
            "kind": "suspend", "triggered": True, "withdrawn": withdrawn, "population": len(self.present),
            "removed": sorted(departed, key=str), "added": sorted({v for r in batch for v in r.added}, key=str),
            "accuracy": None, "makespan_s": 0.0, **_no_bytes(),
            "note": f"model withdrawn: {reason}; a fresh fit follows once enough vehicles are present",
        }, t_request)

    def _suspended_note(self, present: set, min_clients: int) -> dict[str, Any]:
        return {"kind": "suspended", "triggered": False, "population": len(present), "accuracy": None,
                "makespan_s": 0.0, **_no_bytes(),
                "note": f"model withdrawn: {len(present)} vehicle(s) present, coordinator.min_clients = {min_clients}"}

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
        env, vehicles = self.env, self.sim.vehicles
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
        procs = [env.process(self._withdraw(c, sum(per_client[c].values()), timing)) for c in per_client if c not in trained]
        if trained:
            got = yield from broadcast(env, self.channels, vehicles, trained, broadcast_bytes, timing)
            for c in sorted(got):
                procs.append(env.process(self._train_upload(c, sum(per_client.get(c, {}).values()), timing,
                                                            self.sim.compute_seconds(c, report))))
        if procs:
            yield simpy.AllOf(env, procs)
        solve = self.sim.solve_seconds(report)
        timing["solve_sim_s"] = solve
        yield env.timeout(solve)
        timing["makespan_s"] = env.now - t0
        timing["provisional"] = bool(timing["failed"])
        return timing

    def _withdraw(self, client: str, nbytes: int, timing: dict):
        vehicles = self.sim.vehicles
        yield from upload(self.env, self.channels, vehicles, client, nbytes, timing, tag="withdrawal",
                          reachable=vehicles.reachable_for_withdrawal)

    def _train_upload(self, client: str, nbytes: int, timing: dict, seconds: float):
        yield from device_job(self.env, self.device, seconds, timing)
        yield from upload(self.env, self.channels, self.sim.vehicles, client, nbytes, timing)


def _no_bytes() -> dict[str, Any]:
    """The byte fields of a record that moved nothing (a withdrawal: the model is dropped, not unlearned)."""
    from fl_core.payload import ByteKind

    return {"bytes": {k.value: 0 for k in ByteKind}, "total_bytes": 0, "subset_size": 0, "trained": []}


def progress_line(row: dict[str, Any]) -> str:
    """One line per record for a log (``vmc run`` with its output piped)."""
    kind = row.get("kind") or row.get("note", "")
    parts = [f"[t={row.get('done_time', 0.0):.0f} s] {row.get('method')} #{row.get('index')} {kind}"]
    if row.get("triggered") is not None:
        parts.append("triggered" if row.get("triggered") else "no change")
    solve = row.get("solve")
    if isinstance(solve, dict) and not solve.get("converged", True):
        parts.append(f"solve stopped before its tolerance (residual {solve.get('residual', float('nan')):.1e})")
    if row.get("accuracy") is not None:
        parts.append(f"acc {100 * row['accuracy']:.2f} %")
    if row.get("host_edit_s") is not None:
        parts.append(f"host {row['host_edit_s']:.2f} s")
    return ", ".join(parts)


def vehicle_shard(seed: int, vehicle: Hashable, num_shards: int) -> int:
    """The data shard vehicle ``vehicle`` holds: a hash of (run seed, vehicle id), never of arrival order."""
    return derive_seed(seed, "shard", vehicle) % num_shards


def store_fingerprint(scenario: Scenario) -> str:
    """The key of a run's contribution store: what a client's contribution depends on (the run seed
    and the federated configuration)."""
    import hashlib
    import json

    fed = scenario.federated.model_dump(mode="json")
    fed.pop("methods", None)
    fed.pop("projection", None)
    fed["train"] = key_settings(scenario.federated.train.build())  # runs recorded before a setting keep their key
    return hashlib.sha256(json.dumps([scenario.seed, fed], sort_keys=True).encode()).hexdigest()


class CoSimulation:
    """Couples a mobility source to one world per method and records every request."""

    def __init__(
        self, scenario: Scenario, source: MobilitySource, rsus: list[Rsu], run: RunDir,
        setup: OneShotSetup | None = None, progress: bool = True,
        on_record: Callable[[dict], None] | None = None,
        existing: dict[str, list[dict]] | None = None,
        commit_after: float | None = None,
        on_commit: Callable[[], None] | None = None,
    ) -> None:
        self.scenario, self.source, self.rsus, self.run_dir = scenario, source, rsus, run
        self.progress, self.on_record = progress, on_record
        self.progress_lines = progress and not sys.stderr.isatty()  # piped: a line per record, not a bar
        fed = scenario.federated
        self.setup = setup or fed.setup(scenario.seed)
        self.channel_cfg: ChannelConfig = scenario.channel_config()
        shards = self.setup.client_data
        n = len(shards)
        self.shard_of = lambda v: vehicle_shard(scenario.seed, v, n)
        trainer = LocalTrainer(self.setup.model_fn, self.setup.w0, self.setup.train, self.setup.streams)
        store = ContributionStore(
            run.path / "contributions", store_fingerprint(scenario), self.setup.train.fisher,
            layer_specs(self.setup.model_fn()),
        )
        cache_dir = scenario.compute.contribution_cache
        self.cache = ContributionCache(cache_dir) if cache_dir else None
        # the server's held-out validation set selects the merge's damping, as in the one-shot tables
        self.pool = ClientPool(trainer, lambda v: shards[self.shard_of(v)], store=store, cache=self.cache,
                               validator=self.setup.validator())
        self.existing = existing or {}
        self.calibration: Calibration | None = None
        if scenario.compute.time_model == "calibrated":
            c = scenario.compute.calibration
            self.calibration = pinned(c) if c is not None else calibrated(fed, self.setup)
        self._written: dict[str, int] = {}
        # a resume holds every write back (records, contributions; the caller's trace and
        # manifest) until it has re-verified the recorded run and got past ``commit_after``
        self.commit_after = commit_after
        self._on_commit = on_commit
        self._held: list[dict[str, Any]] | None = [] if commit_after is not None else None
        if self._held is not None:
            store.hold()
        self.vehicles = Vehicles(scenario.coordinator.withdrawal_grace)
        self.env = simpy.Environment(initial_time=source.time)
        self.end_time = source.time + scenario.duration
        self.worlds = [World(self.env, m, self.new_editor(m), self) for m in fed.methods]
        self.round_worlds = [RoundWorld(self.env, m, self) for m in fed.strategies]
        self._pending: list[tuple[str, dict[str, Any]]] = []
        self.requests = 0
        self.not_dispatched = 0  # coverage events after coordinator.max_requests was reached
        self.traffic_ended: dict[str, Any] | None = None  # set when the source ran out before the scenario's end
        self.records = 0
        self._test = self.setup.test_set

    def rsu_channels(self, env: simpy.Environment) -> dict[str, RsuChannel]:
        """One world's channel of every RSU. Shadowing draws from the run's channel stream, one
        generator per RSU and world, so every method's world starts from the same draws whatever
        order the worlds are built in."""
        return {r.id: RsuChannel(self.channel_cfg, (r.x, r.y), rsu_id=r.id, env=env,
                                 rng=self.setup.streams.numpy("channel", r.id)) for r in self.rsus}

    def new_editor(self, method: str, epoch: int = 0) -> Editor:
        """A fresh editor of ``method``; model ``epoch`` > 0 (after a suspension) gets its own
        subset-sampling stream."""
        fed = self.scenario.federated
        keys = (method,) if epoch == 0 else (method, "epoch", epoch)
        return build_editor(method, self.pool, self.setup.streams.numpy("subset", *keys), fed.rule(),
                            fed.projection_config(), rounds=fed.rounds.build())

    def compute_seconds(self, client: str, report: EditReport | None = None) -> float:
        """Simulated duration of one client's training (+ Fisher) job for ``report``.

        calibrated: the calibrated costs times the client's work (its sample-epochs in
        ``client_work`` for the multi-round editors, else its samples x the configured epochs
        plus one Fisher pass); measured: what the editor measured for it (``client_compute_s``),
        else the pool's contribution's measured time; device: the device model."""
        c = self.scenario.compute
        if c.time_model == "calibrated":
            cal = self.calibration
            if report is not None and client in report.client_work:
                return cal.train_s_per_sample_epoch * report.client_work[client]
            n = len(self.pool.data_of(client))
            return cal.client_seconds(n, self.setup.train.epochs, fisher=self.setup.train.fisher.value != "none")
        if c.time_model == "measured":
            if report is not None and client in report.client_compute_s:
                return report.client_compute_s[client]
            return self.pool.train(client).compute_s
        n = len(self.pool.data_of(client))
        return c.seconds_per_sample_epoch * n * (self.setup.train.epochs + c.fisher_factor)

    def solve_seconds(self, report: EditReport) -> float:
        """Simulated duration of the coordinator's solve (calibrated, measured, or the device
        model). A request without a Fisher solve (multi-round server steps, an untriggered
        edit) costs nothing under the calibrated model."""
        c = self.scenario.compute
        if c.time_model == "calibrated":
            return 0.0 if report.solve is None else self.calibration.solve_seconds(report.solve.products)
        if c.time_model == "measured" or report.solve is None:
            return report.solve_s
        return c.seconds_per_solve_iteration * max(1, report.solve.iterations)

    def dispatch(self, req: Request) -> None:
        for w in [*self.worlds, *self.round_worlds]:
            w.queue.put(req)

    def mobility(self):
        sc, src = self.scenario, self.source
        end = src.time + sc.duration
        step = sc.mobility.sumo.step_length
        fitted = False
        bar = None
        if self.progress:
            from tqdm import tqdm

            bar = tqdm(total=int(sc.duration), unit="sim s", desc=sc.name, leave=False, disable=None, mininterval=1.0)
        try:
            while self.env.now < end and not src.finished:
                events = src.advance(self.env.now)
                self.vehicles.now = self.env.now
                self.vehicles.apply(events, src.members())
                if not fitted:
                    if self.env.now - (end - sc.duration) >= sc.coordinator.warmup and \
                            len(self.vehicles.covered) >= sc.coordinator.min_clients:
                        fitted = True
                        self.dispatch(Request(0, self.env.now, "fit", added=sorted(self.vehicles.covered)))
                        self.requests = 1
                else:
                    for i, e in enumerate(events):
                        if sc.coordinator.max_requests and self.requests >= sc.coordinator.max_requests:
                            self.not_dispatched += len(events) - i
                            break
                        req = Request(self.requests, e.time, "edit",
                                      removed=[e.vehicle] if e.kind == "leave" else [],
                                      added=[e.vehicle] if e.kind == "join" else [])
                        self.dispatch(req)
                        self.requests += 1
                if bar is not None:
                    bar.n = int(self.env.now - (end - sc.duration))
                    bar.refresh()
                self._maybe_commit()
                yield self.env.timeout(step)
            if src.finished and end - src.time > step + 1e-9:
                ended = getattr(src, "end_record", None)
                self.traffic_ended = {"at": src.time, "scenario_end": end,
                                      "trace_status": None if ended is None else ended.get("status"),
                                      "trace_message": None if ended is None else ended.get("message"),
                                      "trace_complete": getattr(src, "complete", None)}
        finally:
            if bar is not None:
                bar.close()

    def record(self, world: World, batch: list[Request], report: EditReport | None, timing: dict, t_request: float) -> None:
        row: dict[str, Any] = {
            "method": world.name,
            "index": batch[0].index,
            "requests": [r.index for r in batch],
            "request_time": t_request,
            "done_time": self.env.now,
            "latency_s": self.env.now - t_request,
            "model_epoch": world.epoch,
        }
        if report is not None:
            d = host_columns(report.as_dict())
            d.pop("transfers")
            d.pop("method")
            row.update(d)
            if self.scenario.coordinator.evaluate:
                acc, loss = evaluate(world.eval_model, world.editor.model, self._test)
                row.update(accuracy=acc, loss=loss)
        row.update(timing)
        self.emit(world.name, row)

    @property
    def test_set(self):
        return self._test

    def emit(self, method: str, row: dict[str, Any]) -> None:
        """Queue one record of ``method``; records are written in simulated-time order, those of one
        instant by method name (so the file's row order does not depend on the methods' order)."""
        if self._pending and self._pending[0][1].get("done_time") != row.get("done_time"):
            self.flush()
        self._pending.append((method, row))

    def flush(self) -> None:
        """Write every queued record (the rows of one simulated instant)."""
        pending, self._pending = sorted(self._pending, key=lambda mr: mr[0]), []
        for method, row in pending:
            self._write(method, row)

    def _write(self, method: str, row: dict[str, Any]) -> None:
        """Append one record of ``method`` (on resume: check it against the one on disk instead)."""
        k = self._written.get(method, 0)
        self._written[method] = k + 1
        old = self.existing.get(method, [])
        if k < len(old):
            for key in ("index", "kind", "triggered", "left", "joined"):
                if old[k].get(key) != row.get(key):
                    raise RuntimeError(
                        f"resume diverged from the recorded run: {method} record {k} has {key}="
                        f"{old[k].get(key)!r} on disk and {row.get(key)!r} now"
                    )
            return
        if self._held is not None:
            self._held.append(row)
        else:
            self.run_dir.append_record(row)
        self.records += 1
        if self.progress_lines:
            print(progress_line(row), file=sys.stderr, flush=True)
        if self.on_record:
            self.on_record(row)

    @property
    def committed(self) -> bool:
        """False while a resume still holds its writes back (the run directory is untouched)."""
        return self._held is None

    def _maybe_commit(self, final: bool = False) -> None:
        """On resume: once every recorded row is re-verified and simulated time is past
        ``commit_after`` (or the run is over), write what was held back."""
        if self._held is None:
            return
        short = {m: (self._written.get(m, 0), len(v)) for m, v in self.existing.items() if self._written.get(m, 0) < len(v)}
        if short:
            if final:
                m, (got, want) = next(iter(short.items()))
                raise RuntimeError(f"resume diverged from the recorded run: {m} produced {got} records, {want} are on disk")
            return
        if not final and self.env.now <= self.commit_after:
            return
        if self._on_commit is not None:
            self._on_commit()
        self.pool.store.release()
        rows, self._held = self._held, None
        for row in rows:
            self.run_dir.append_record(row)

    def run(self) -> dict[str, Any]:
        """Run until the scenario's duration is over and every queued request is handled."""
        t0 = time.perf_counter()
        self.env.process(self.mobility())
        try:
            self.env.run(until=self.source.time + self.scenario.duration)
            self._drain()
        finally:
            self.flush()
        self._maybe_commit(final=True)
        self.save_models()
        summary = {"requests": self.requests, "records": self.records, "wall_s": time.perf_counter() - t0,
                   "sim_end": self.env.now, "trainings": self.pool.trainings,
                   "validation_held": len(self.setup.validation_set)}
        if self.setup.partition_repair:
            summary["partition_repaired"] = self.setup.partition_repair
        if self.traffic_ended is not None:
            summary["traffic_ended_early"] = self.traffic_ended
        teleports = getattr(self.source, "teleports", None)
        if teleports is None:  # a replay: the count its recorder wrote
            teleports = (getattr(self.source, "end_record", None) or {}).get("teleports")
        if teleports:
            summary["teleports"] = teleports
        if self.scenario.coordinator.max_requests:
            summary["max_requests"] = {"cap": self.scenario.coordinator.max_requests,
                                       "reached": self.requests >= self.scenario.coordinator.max_requests,
                                       "events_not_dispatched": self.not_dispatched}
        if self.cache is not None:
            summary["contribution_cache"] = {"path": str(self.cache.root), **self.cache.stats.as_dict()}
        return summary

    def save_models(self) -> None:
        """Every method's final model as ``models.safetensors`` (``<method>.weights``), for ``vmc audit``."""
        models = {f"{w.name}.weights": w.editor.model for w in self.worlds if w.editor.model is not None}
        models.update({f"{w.name}.weights": w.model for w in self.round_worlds})
        if models:
            self.run_dir.save_tensors("models.safetensors", models)

    def _drain(self) -> None:
        """Let the coordinators finish the requests still queued when traffic ends."""
        for _ in range(10_000):
            if not (any(w.queue.items for w in self.worlds) or self._busy()
                    or any(w.lock.count or w.queue.items for w in self.round_worlds)):
                return
            self.env.run(until=self.env.now + 3600.0)
        raise RuntimeError("coordinators still busy after 10,000 simulated hours past the end of traffic")

    def _busy(self) -> bool:
        return any(w.process.target is not None and not isinstance(w.process.target, simpy.resources.store.StoreGet)
                   for w in self.worlds)
