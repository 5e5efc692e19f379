"""The co-simulation scenario: one YAML file, validated into typed objects before anything runs.

Sections: ``mobility`` (where join/leave events come from: the embedded city, LuST, SUMO
files or a recorded trace; RSUs and coverage), ``federated`` (data, model, training, methods;
see :class:`vmc_sim.config.FederatedSection`), ``coordinator`` (when the first fit happens and
how requests are gathered), ``channel`` (:class:`vmc_sim.channel.ChannelConfig`) and
``compute`` (the shared GPU or on-board units). Sections that map to a dataclass of a lower
layer are checked by building that dataclass, so its own error (naming the field) is reported
under the section's path.
"""

from __future__ import annotations

from dataclasses import fields as dc_fields
from pathlib import Path
from typing import Any, Literal

import simpy
from pydantic import Field, field_validator, model_validator

from mobility.city import CityConfig
from mobility.coverage import CoverageConfig
from mobility.rsu import RsuConfig

from .channel import ChannelConfig
from .config import FederatedSection, Strict, TrainSection, load_model
from .device import SharedDevice


def _dataclass_checker(cls: type, section: str):
    names = {f.name for f in dc_fields(cls)}

    def check(value: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(value) - names)
        if unknown:
            raise ValueError(f"unknown field(s) {unknown}; {section} takes {sorted(names)}")
        cls(**value)  # raises ValueError naming the bad field
        return value

    return check


class SumoSection(Strict):
    backend: Literal["libsumo", "traci"] = "libsumo"
    step_length: float = Field(1.0, gt=0)
    seed: int = Field(42, ge=0)
    begin: float | None = None
    time_to_teleport: float | None = None
    extra_args: list[str] = Field(default_factory=list)


class MobilitySection(Strict):
    source: Literal["city", "files", "lust", "trace"] = "city"
    city: dict[str, Any] = Field(default_factory=dict)
    net_file: str | None = None
    route_files: list[str] = Field(default_factory=list)
    config_file: str | None = None
    lust: dict[str, Any] = Field(default_factory=dict)
    trace: str | None = None
    sumo: SumoSection = SumoSection()
    rsus: dict[str, Any] = Field(default_factory=lambda: {"placement": "auto", "count": 1, "radius": 200.0})
    coverage: dict[str, Any] = Field(default_factory=lambda: {"state_interval": 5.0})

    _city = field_validator("city")(lambda cls, v: _dataclass_checker(CityConfig, "mobility.city")(v))
    _rsus = field_validator("rsus")(lambda cls, v: _dataclass_checker(RsuConfig, "mobility.rsus")(v))
    _cov = field_validator("coverage")(lambda cls, v: _dataclass_checker(CoverageConfig, "mobility.coverage")(v))

    @model_validator(mode="after")
    def _inputs(self) -> "MobilitySection":
        if self.source == "files" and not (self.config_file or (self.net_file and self.route_files)):
            raise ValueError("source 'files' needs config_file, or net_file and route_files")
        if self.source == "trace" and not self.trace:
            raise ValueError("source 'trace' needs mobility.trace (a trace file)")
        return self

    def city_config(self) -> CityConfig:
        return CityConfig(**self.city)

    def rsu_config(self) -> RsuConfig:
        return RsuConfig(**self.rsus)

    def coverage_config(self) -> CoverageConfig:
        return CoverageConfig(**self.coverage)


class CoordinatorSection(Strict):
    warmup: float = Field(60.0, ge=0, description="simulated seconds before the first fit")
    min_clients: int = Field(4, ge=1, description="clients needed in coverage for a model: the first fit, and a "
                                                  "fresh fit after a suspension; a request that would leave fewer "
                                                  "withdraws the model (kind: suspend) and the run goes on")
    window: float = Field(0.0, ge=0, description="0: one request at a time; > 0: gather a batch over this window")
    evaluate: bool = True
    max_requests: int | None = Field(None, gt=0, description="stop after this many requests")
    withdrawal_grace: float = Field(
        30.0, ge=0, description="a departing member may still upload its contribution for this long"
    )


class CalibrationCosts(Strict):
    """Pinned costs of the calibrated time model (see :mod:`vmc_sim.calibration`)."""

    train_s_per_sample_epoch: float = Field(gt=0, description="local training: s per sample per epoch")
    fisher_s_per_sample: float = Field(ge=0, description="Fisher pass: s per sample")
    solve_s_per_unit: float = Field(ge=0, description="coordinator solve: s per (1 + operator products)")


class ComputeSection(Strict):
    mode: Literal["shared_gpu", "onboard"] = "shared_gpu"
    time_model: Literal["calibrated", "measured", "device"] = Field(
        "calibrated", description="calibrated: per-sample costs measured once per process after a warm-up "
                                  "(deterministic); measured: each job's host time; device: the fixed model below")
    calibration: CalibrationCosts | None = Field(
        None, description="calibrated: pin the costs (e.g. from a manifest's 'calibration'); null = measure them")
    seconds_per_sample_epoch: float = Field(2.3e-4, gt=0, description="device model: s per sample per epoch")
    fisher_factor: float = Field(1.0, ge=0, description="device model: Fisher pass cost in epochs")
    seconds_per_solve_iteration: float = Field(1e-3, ge=0, description="device model: coordinator CG iteration")
    batch_max_jobs: int = Field(1, ge=1, description="shared_gpu: queued jobs run together, at most this many")
    batch_overlap: float = Field(0.0, ge=0, le=1, description="shared_gpu: 0 = a batch costs its jobs' sum, 1 = its longest")
    contribution_cache: str | None = Field(
        None, description="directory of the content-addressed contribution cache shared by runs and sweep points "
                          "(fl_core.cache): a contribution trained the same way before is loaded, not trained, and "
                          "charged the same simulated compute; null = off (vmc sweep turns it on)")

    def device(self, env: simpy.Environment) -> SharedDevice | None:
        """The shared accelerator of one world, or None when every vehicle trains on board."""
        if self.mode != "shared_gpu":
            return None
        return SharedDevice(env, self.batch_max_jobs, self.batch_overlap)


class Scenario(Strict):
    name: str = "default-city"
    seed: int = Field(0, ge=0)
    duration: float = Field(600.0, gt=0, description="simulated seconds of traffic after mobility begins")
    mobility: MobilitySection = MobilitySection()
    federated: FederatedSection = FederatedSection(
        dataset="digits", num_clients=16, alpha=0.5, model="mlp", rho=0.5, methods=["fsosa", "retrain"],
        train=TrainSection(epochs=20, lr=0.05, batch_size=32, fisher="diagonal"),
    )
    coordinator: CoordinatorSection = CoordinatorSection()
    channel: dict[str, Any] = Field(default_factory=dict)
    compute: ComputeSection = ComputeSection()

    _channel = field_validator("channel")(lambda cls, v: _dataclass_checker(ChannelConfig, "channel")(v))

    def channel_config(self) -> ChannelConfig:
        return ChannelConfig(**self.channel)


def load_scenario(path: str | Path | None) -> Scenario:
    """Validate a scenario file (None: the embedded default); its relative file paths are read
    relative to the file's directory (:func:`vmc_sim.inputs.resolve_paths`)."""
    scenario = load_model(Scenario, path)
    if path is None:
        return scenario
    from .inputs import resolve_paths

    data = resolve_paths(scenario.model_dump(mode="json"), Path(path).resolve().parent)
    return _validate(data, path)


def _validate(data: dict[str, Any], path: str | Path) -> Scenario:
    from pydantic import ValidationError

    from .config import ConfigError, format_errors

    try:
        return Scenario.model_validate(data)
    except ValidationError as e:
        raise ConfigError(format_errors(e, str(path), Scenario)) from None
