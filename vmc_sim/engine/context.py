"""What a world sees of the co-simulation: a small typed context, built once by the engine.

A world (one method's coordinator, see :mod:`vmc_sim.engine.world` and :mod:`vmc_sim.engine.round_world`)
reads the vehicles, trains through the client pool, charges time through the time model, and
writes through the record writer; it builds its own channels and device from here. It never
reaches into the engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import simpy

from fl_core.clients import ClientPool
from fl_core.editors import Editor, build_editor
from fl_core.experiment import OneShotSetup
from mobility.rsu import Rsu

from ..compute.device import SharedDevice
from ..radio.air import media
from ..radio.channel import RsuChannel
from ..radio.link_budget import ChannelConfig
from ..radio.transfers import HandoverConfig, Links
from ..rundir.records import RecordWriter
from ..scenario.config import FederatedSection, RoundsSection
from ..scenario.schema import ComputeSection, CoordinatorSection
from .timing import TimeModel
from .vehicles import Surroundings, Vehicles


@dataclass(frozen=True)
class WorldContext:
    env: simpy.Environment
    vehicles: Vehicles
    pool: ClientPool
    setup: OneShotSetup
    time: TimeModel
    writer: RecordWriter
    federated: FederatedSection
    coordinator: CoordinatorSection
    compute: ComputeSection
    channel: ChannelConfig
    rsus: tuple[Rsu, ...]
    step_length: float
    end_time: float
    buildings: Any = None

    @property
    def rounds(self) -> RoundsSection:
        return self.federated.rounds

    @property
    def test_set(self) -> Any:
        return self.setup.test_set

    def channels(self) -> dict[str, RsuChannel]:
        """One world's channel of every RSU, those that share the air on one medium
        (:func:`vmc_sim.radio.air.media`). Shadowing and link states draw from the run's channel and
        link-state streams, one generator per RSU and world, so every method's world starts from the
        same draws whatever order the worlds are built in."""
        streams = self.setup.streams
        air = media(self.rsus, self.channel)
        around = Surroundings(self.vehicles, self.buildings, self.channel.blocker_height_m)
        return {
            r.id: RsuChannel(
                self.channel,
                (r.x, r.y),
                rsu_id=r.id,
                env=self.env,
                rng=streams.numpy("channel", r.id),
                state_rng=streams.numpy("link_state", r.id),
                medium=air[r.id],
                around=around,
            )
            for r in self.rsus
        }

    def links(self) -> Links:
        """One world's radio links: its channels of every RSU and the handover rule."""
        c = self.coordinator
        rule = HandoverConfig(c.handover, c.backhaul_bps, c.backhaul_latency_s, c.resume_within_s, self.step_length)
        return Links(self.env, self.channels(), self.vehicles, rule)

    def device(self) -> SharedDevice | None:
        """One world's shared accelerator (None: on-board training)."""
        c = self.compute
        return SharedDevice(self.env, c.batch_max_jobs, c.batch_overlap) if c.mode == "shared_gpu" else None

    def new_editor(self, method: str, epoch: int = 0) -> Editor:
        """A fresh editor of ``method``; model ``epoch`` > 0 (after a suspension) gets its own
        subset-sampling stream."""
        fed = self.federated
        keys = (method,) if epoch == 0 else (method, "epoch", epoch)
        return build_editor(
            method,
            self.pool,
            self.setup.streams.numpy("subset", *keys),
            fed.rule(),
            fed.projection_config(),
            rounds=fed.rounds.build(),
            options=fed.options_for(method),
        )
