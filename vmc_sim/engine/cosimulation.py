"""The discrete-event co-simulation: mobility drives requests, one world per method answers them.

One simpy environment holds:

- the **mobility process** (here), which advances the source (live SUMO or a trace) step by step,
  keeps every covered vehicle's position (:class:`vmc_sim.engine.vehicles.Vehicles`), and turns
  join/leave events into requests (:class:`vmc_sim.engine.requests.Request`) dispatched to every world;
- one **world per method**: a request-driven editor (:class:`vmc_sim.engine.world.World`: F-SOSA,
  Retrain, ...) or a multi-round strategy (:class:`vmc_sim.engine.round_world.RoundWorld`), each with its
  own request queue, RSU channels and device queue, so that every method sees the identical request
  sequence without competing for resources with the others.

Worlds see the run through a :class:`vmc_sim.engine.context.WorldContext`: the vehicles, the client
pool, the time model (:mod:`vmc_sim.engine.timing`, built once here) and the record writer
(:mod:`vmc_sim.rundir.records`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import simpy

from fl_core.experiment import OneShotSetup
from mobility.buildings import Buildings
from mobility.dwell import dwell_summary, dwell_warning, share_longer_than_dwell
from mobility.rsu import Rsu
from mobility.source import MobilitySource

from ..radio.link_states import LINK_STATES
from ..rundir.directory import RunDir
from ..rundir.records import RecordWriter
from ..rundir.released import ReleasedModels
from ..scenario.inputs import building_files
from ..scenario.mobility_section import source_fields
from ..scenario.schema import Scenario
from ..scenario.shards import ShardAssignment
from .clients import run_store, vehicle_pool
from .context import WorldContext
from .requests import Request, RequestKind
from .round_world import RoundWorld
from .timing import time_model
from .vehicles import Vehicles
from .world import World

AFTER_CUT_S = 3600.0  # once no vehicle is reachable only running jobs and solves remain: far less than this


class CoSimulation:
    """Couples a mobility source to one world per method and records every request."""

    def __init__(
        self,
        scenario: Scenario,
        source: MobilitySource,
        rsus: list[Rsu],
        run: RunDir,
        setup: OneShotSetup | None = None,
        progress: bool = True,
        on_record: Callable[[dict], None] | None = None,
        existing: dict[str, list[dict]] | None = None,
        commit_after: float | None = None,
        on_commit: Callable[[], None] | None = None,
    ) -> None:
        self.scenario, self.source, self.rsus, self.run_dir = scenario, source, rsus, run
        self.progress = progress
        fed = scenario.federated
        self.setup = setup or fed.setup(scenario.seed)
        self.store = run_store(scenario, self.setup, run)
        self.shards = ShardAssignment(fed.shard_assignment.value, scenario.seed, len(self.setup.client_data))
        self.pool = vehicle_pool(scenario, self.setup, self.store, self.shards)
        self.time = time_model(scenario, self.setup)
        # a resume holds every write back (records, contributions; the caller's trace and
        # manifest) until it has re-verified the recorded run and got past ``commit_after``
        self.writer = RecordWriter(
            run,
            self.store,
            progress_lines=progress and not sys.stderr.isatty(),
            on_record=on_record,
            existing=existing,
            commit_after=commit_after,
            on_commit=on_commit,
            released=ReleasedModels(run, scenario.coordinator.released_models),
        )
        self.vehicles = Vehicles(scenario.coordinator.withdrawal_grace, scenario.coordinator.dwell_limited)
        self.env = simpy.Environment(initial_time=source.time)
        self.end_time = source.time + scenario.duration
        files = building_files(scenario)
        self.buildings = Buildings.from_poly_files(*files) if files else None
        ctx = WorldContext(
            env=self.env,
            vehicles=self.vehicles,
            pool=self.pool,
            setup=self.setup,
            time=self.time,
            writer=self.writer,
            federated=fed,
            coordinator=scenario.coordinator,
            compute=scenario.compute,
            channel=scenario.channel_config(),
            rsus=tuple(rsus),
            step_length=source_fields(scenario.mobility).sumo.step_length,
            end_time=self.end_time,
            buildings=self.buildings,
        )
        self.worlds = [World(ctx, m) for m in fed.methods]
        self.round_worlds = [RoundWorld(ctx, m) for m in fed.strategies]
        self.requests = 0
        self.not_dispatched = 0  # coverage events after coordinator.max_requests was reached
        self.traffic_ended: dict[str, Any] | None = None  # set when the source ran out before the scenario's end
        self.drained: dict[str, Any] = {}  # how long the coordinators took past the end of traffic

    @property
    def calibration(self):
        """The calibrated time model's costs (None for the other time models)."""
        return self.time.calibration

    @property
    def cache(self):
        return self.pool.cache

    @property
    def records(self) -> int:
        return self.writer.records

    @property
    def committed(self) -> bool:
        """False while a resume still holds its writes back (the run directory is untouched)."""
        return self.writer.committed

    @property
    def all_worlds(self) -> list[World | RoundWorld]:
        """Every method's world: the request-driven editors', then the multi-round strategies'."""
        return [*self.worlds, *self.round_worlds]

    def dispatch(self, req: Request) -> None:
        self.shards.assign(req.added)  # before any method sees it: one mapping for all
        for w in self.all_worlds:
            w.queue.put(req)

    def mobility(self):
        sc, src = self.scenario, self.source
        end = src.time + sc.duration
        step = source_fields(sc.mobility).sumo.step_length
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
                    if (
                        self.env.now - (end - sc.duration) >= sc.coordinator.warmup
                        and len(self.vehicles.covered) >= sc.coordinator.min_clients
                    ):
                        fitted = True
                        self.dispatch(Request(0, self.env.now, RequestKind.FIT, added=sorted(self.vehicles.covered)))
                        self.requests = 1
                else:
                    for i, e in enumerate(events):
                        if sc.coordinator.max_requests and self.requests >= sc.coordinator.max_requests:
                            self.not_dispatched += len(events) - i
                            break
                        req = Request(
                            self.requests,
                            e.time,
                            RequestKind.EDIT,
                            removed=[e.vehicle] if e.kind == "leave" else [],
                            added=[e.vehicle] if e.kind == "join" else [],
                        )
                        self.dispatch(req)
                        self.requests += 1
                if bar is not None:
                    bar.n = int(self.env.now - (end - sc.duration))
                    bar.refresh()
                self.writer.maybe_commit(self.env.now)
                yield self.env.timeout(step)
            if src.finished and end - src.time > step + 1e-9:
                ended = getattr(src, "end_record", None)
                self.traffic_ended = {
                    "at": src.time,
                    "scenario_end": end,
                    "trace_status": None if ended is None else ended.get("status"),
                    "trace_message": None if ended is None else ended.get("message"),
                    "trace_complete": getattr(src, "complete", None),
                }
        finally:
            if bar is not None:
                bar.close()

    def run(self) -> dict[str, Any]:
        """Run until the scenario's duration is over and every queued request is handled."""
        t0 = time.perf_counter()
        self.env.process(self.mobility())
        try:
            self.env.run(until=self.source.time + self.scenario.duration)
            self._drain()
        finally:
            self.writer.flush()
        self.writer.maybe_commit(self.env.now, final=True)
        self.save_models()
        summary: dict[str, Any] = {
            "requests": self.requests,
            "records": self.records,
            "wall_s": time.perf_counter() - t0,
            "sim_end": self.env.now,
            "trainings": self.store.trained_count(),  # the whole run's, attempts before a resume included
            "trainings_this_attempt": self.pool.trainings,
            "validation_held": len(self.setup.validation_set),
        }
        summary.update(self.dwell_and_jobs())
        if self.setup.partition_repair:
            summary["partition_repaired"] = self.setup.partition_repair
        if self.traffic_ended is not None:
            summary["traffic_ended_early"] = self.traffic_ended
        summary["drain"] = self.drained
        summary["radio"] = self.radio_summary()
        teleports = getattr(self.source, "teleports", None)
        if teleports is None:  # a replay: the count its recorder wrote
            teleports = (getattr(self.source, "end_record", None) or {}).get("teleports")
        if teleports:
            summary["teleports"] = teleports
        if self.scenario.coordinator.max_requests:
            summary["max_requests"] = {
                "cap": self.scenario.coordinator.max_requests,
                "reached": self.requests >= self.scenario.coordinator.max_requests,
                "events_not_dispatched": self.not_dispatched,
            }
        if self.cache is not None:
            summary["contribution_cache"] = {"path": str(self.cache.root), **self.cache.stats.as_dict()}
        return summary

    def radio_summary(self) -> dict[str, Any]:
        """What the radio was: its link-state model, the buildings it read (or what stood in for
        them), which RSUs shared the air, and per method the share of the time links carrying a
        transfer spent in each state."""
        channel = self.scenario.channel_config()
        model = LINK_STATES[channel.link_state_model or "los"]
        share: dict[str, dict[str, float]] = {}
        domains: set[str] = set()
        for w in self.all_worlds:
            seconds: dict[str, float] = {}
            for ch in w.links.channels.values():
                domains.add(ch.medium.name)
                for state, t in ch.state_time.items():
                    seconds[state] = seconds.get(state, 0.0) + t
            total = sum(seconds.values())
            share[w.name] = {k: v / total for k, v in sorted(seconds.items())} if total > 0 else {}
        return {
            "link_state_model": channel.link_state_model,
            "path_loss_model": channel.path_loss_model,
            "buildings": None if self.buildings is None else len(self.buildings),
            "stand_in": model.stand_in if self.buildings is None else None,
            "shared_air": sorted(domains),
            "state_share": share,
        }

    def dwell_and_jobs(self) -> dict[str, Any]:
        """How long vehicles stayed in coverage against how long each method's jobs took (from the
        request, queueing behind earlier ones included, to the upload or its failure; a round's from the
        round's start), with a warning for a method whose jobs mostly outlast a dwell."""
        dwell = {**dwell_summary(self.vehicles.dwells), "censored": len(self.vehicles.joined_at)}
        jobs: dict[str, Any] = {}
        warnings: dict[str, str] = {}
        for w in self.all_worlds:
            jobs[w.name] = {**dwell_summary(w.job_times), "longer_than_median_dwell": None}
            jobs[w.name]["longer_than_median_dwell"] = share_longer_than_dwell(w.job_times, dwell)
            jobs[w.name]["values"] = sorted(float(x) for x in w.job_times)  # the distribution, for analyses
            text = dwell_warning(w.job_times, dwell)
            if text:
                warnings[w.name] = text
        dwell["values"] = sorted(float(x) for x in self.vehicles.dwells)
        return {"dwell_s": dwell, "job_s": jobs, **({"dwell_warnings": warnings} if warnings else {})}

    def save_models(self) -> None:
        """Every method's final model as ``models.safetensors`` (``<method>.weights``), for ``vmc audit``."""
        models = {f"{w.name}.weights": w.editor.model for w in self.worlds if w.editor.model is not None}
        models.update({f"{w.name}.weights": w.model for w in self.round_worlds})
        if models:
            self.run_dir.save_tensors("models.safetensors", models)

    def _drain(self) -> None:
        """Let the coordinators finish the requests still queued when traffic ends, the vehicles held
        where it left them, for at most ``coordinator.drain_s``; then end the traffic (no vehicle is
        reachable), so that what is still in flight fails, and finish. Bounded either way: after the
        end of traffic a transfer ends within its channel's outage timeout, a take-out ends with each
        pass removing a client, and no new request comes."""
        t0 = time.perf_counter()
        self.drained = {"s": 0.0, "wall_s": 0.0, "traffic_cut": None}
        try:
            if not self._run_while_busy(self.env.now + self.scenario.coordinator.drain_s):
                self.drained["traffic_cut"] = {
                    "after_s": self.env.now - self.end_time,
                    "busy": [w.name for w in self.all_worlds if w.busy],
                    "covered": len(self.vehicles.end_traffic()),
                }
                for w in self.all_worlds:
                    w.links.end_traffic()
                if not self._run_while_busy(self.env.now + AFTER_CUT_S):
                    raise RuntimeError(
                        f"coordinators of {', '.join(w.name for w in self.all_worlds if w.busy)} still busy "
                        f"{self.env.now - self.end_time:.0f} simulated seconds past the end of traffic, with no "
                        "vehicle reachable"
                    )
            self.drained["s"] = self.env.now - self.end_time
        finally:
            self.drained["wall_s"] = time.perf_counter() - t0

    def _run_while_busy(self, limit: float) -> bool:
        """Process events, one at a time, until no coordinator is busy (True) or ``limit`` (False)."""
        env = self.env
        while self._busy():
            if env.peek() > limit:
                env.run(until=limit)
                return False
            env.step()
        return True

    def _busy(self) -> bool:
        return any(w.busy for w in self.all_worlds)
