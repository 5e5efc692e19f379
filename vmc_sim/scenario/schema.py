"""The co-simulation scenario: one YAML file, validated into typed objects before anything runs.

Sections: ``mobility`` (where join/leave events come from: the embedded city, LuST, SUMO files,
a recorded trace or SUMO FCD; RSUs, coverage, SUMO's outputs; :mod:`vmc_sim.scenario.mobility_section`), ``federated`` (data, model, training, methods;
see :class:`vmc_sim.scenario.config.FederatedSection`), ``coordinator`` (when the first fit happens and
how requests are gathered), ``channel`` (:class:`vmc_sim.radio.link_budget.ChannelConfig`) and
``compute`` (the shared GPU or on-board units). Sections that map to a dataclass of a lower
layer are checked by building that dataclass, so its own error (naming the field) is reported
under the section's path.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from ..compute.hardware import EDGE_DEFAULT, ONBOARD_DEFAULT, PROFILES, DeviceProfile, profile_of
from ..radio.link_budget import ChannelConfig
from .config import (
    FederatedSection,
    Strict,
    dataclass_checker,
    load_model,
)
from .mobility_section import MOBILITY_DEFAULTS, MobilitySection
from .plugins import import_plugins

SCENARIO_DEFAULTS: dict[str, Any] = {
    "federated": {
        "dataset": "digits",
        "num_clients": 16,
        "alpha": 0.5,
        "model": "mlp",
        "rho": 0.5,
        "methods": ["fsosa", "retrain"],
        "train": {"epochs": 20, "lr": 0.05, "batch_size": 32, "fisher": "diagonal"},
    },
    "mobility": MOBILITY_DEFAULTS,
}
"""The documented defaults of a scenario where they differ from a section's own defaults (the
embedded default scenario: digits on a small MLP, 20 local epochs, a diagonal Fisher, one RSU of
200 m). A scenario file is read as these defaults with the file's keys laid over them, mapping
by mapping: ``federated: {rho: 0.3}`` changes rho and keeps every other documented default.
Lists are replaced, not merged. Giving ``federated.subset_size`` (fixed P) drops the default
``rho``."""


def overlay(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` laid over ``base``: mappings merged key by key, anything else replaced."""
    out = dict(base)
    for k, v in over.items():
        out[k] = overlay(base[k], v) if isinstance(v, dict) and isinstance(base.get(k), dict) else v
    return out


def with_documented_defaults(data: dict[str, Any]) -> dict[str, Any]:
    """A scenario mapping completed with :data:`SCENARIO_DEFAULTS`."""
    out = overlay(SCENARIO_DEFAULTS, data)
    fed = data.get("federated")
    if isinstance(fed, dict) and fed.get("subset_size") is not None and "rho" not in fed:
        out["federated"] = {**out["federated"], "rho": None}
    return out


class CoordinatorSection(Strict):
    warmup: float = Field(60.0, ge=0, description="simulated seconds before the first fit")
    min_clients: int = Field(
        4,
        ge=1,
        description="clients needed in coverage for a model: the first fit, and a "
        "fresh fit after a suspension; a request that would leave fewer "
        "withdraws the model (kind: suspend) and the run goes on",
    )
    window: float = Field(0.0, ge=0, description="0: one request at a time; > 0: gather a batch over this window")
    evaluate: bool = Field(True, description="record test accuracy and loss after every request")
    max_requests: int | None = Field(None, gt=0, description="stop after this many requests")
    withdrawal_grace: float = Field(
        30.0, ge=0, description="a departing member may still upload its contribution for this long"
    )
    dwell_limited: bool = Field(
        True,
        description="false: the paper's idealisation: a client that left coverage still finishes its jobs "
        "and transfers, its link held where it left (each departure's withdrawal issued before it "
        "disconnects); true: work ends when the vehicle leaves",
    )
    handover: bool = Field(
        True,
        description="a transfer continues through the next RSU of the region the vehicle is attached to "
        "(false: it stays on the RSU it started on while the vehicle is in the region)",
    )
    backhaul_bps: float = Field(1e9, gt=0, description="handover: rate of the backhaul between RSUs, bit/s")
    backhaul_latency_s: float = Field(0.002, ge=0, description="handover: one-way latency of the backhaul, s")
    resume_within_s: float = Field(
        0.0,
        ge=0,
        description="store and forward: a vehicle that leaves every RSU mid-transfer resumes it when back "
        "in coverage within this many seconds (0: the transfer fails when it leaves)",
    )
    drain_s: float = Field(
        1800.0,
        gt=0,
        description="simulated seconds past the end of traffic in which the coordinators finish what is queued "
        "and in flight, the vehicles held where traffic left them; then the traffic is over: every vehicle is "
        "out of reach, what is still in flight fails (charged what it spent) and the run ends",
    )
    keep_unarrived: bool = Field(
        False,
        description="fallback for methods that cannot remove a client: release a model that still holds "
        "contributions whose upload failed, named in the record's 'kept_unarrived' (false: the model is "
        "withdrawn instead)",
    )
    released_models: Literal["all", "digests"] = Field(
        "all",
        description="what the run keeps of every model a method releases, for vmc certify: all (each model "
        "in released/, identical ones once: 4 bytes a parameter per distinct model) or digests (only each "
        "model's SHA-256 in released.jsonl, the final models in models.safetensors; vmc certify then proves "
        "equality by digest instead of measuring a difference)",
    )


class CalibrationCosts(Strict):
    """Pinned costs of the calibrated time model (see :mod:`vmc_sim.compute.calibration`)."""

    train_s_per_sample_epoch: float = Field(gt=0, description="local training: s per sample per epoch")
    fisher_s_per_sample: float = Field(ge=0, description="Fisher pass: s per sample")
    solve_s_per_unit: float = Field(ge=0, description="coordinator solve: s per (1 + operator products)")


class CustomProfile(Strict):
    """A device of the user's own (:mod:`vmc_sim.compute.hardware`): charged at ``flops_per_s`` as given."""

    name: str = Field(
        min_length=1, description="a custom device's name (not a built-in one's), recorded in the manifest"
    )
    flops_per_s: float = Field(
        gt=0,
        description="its sustained FP32 FLOP/s, charged as given (a peak times the utilisation your models reach on it)",
    )
    source: str = Field(
        min_length=1, description="where the figure comes from (a datasheet, a measurement), recorded in the manifest"
    )
    description: str = Field("", description="what the device is")

    @field_validator("name")
    @classmethod
    def _own_name(cls, v: str) -> str:
        if v in PROFILES:
            raise ValueError(f"{v!r} is a built-in device profile; give a custom profile another name")
        return v


ProfileSpec = str | CustomProfile | None


def _known_profile(v: ProfileSpec) -> ProfileSpec:
    if isinstance(v, str):
        PROFILES.canonical(v)  # raises naming the known profiles
    return v


class TimeModelKind(str, Enum):
    """How a job's simulated seconds are found (:mod:`vmc_sim.engine.timing`)."""

    PROFILE = "profile"
    CALIBRATED = "calibrated"
    MEASURED = "measured"
    DEVICE = "device"


class ComputeSection(Strict):
    mode: Literal["shared_gpu", "onboard"] = Field(
        "shared_gpu",
        description="shared_gpu: each method's jobs queue for one device; onboard: every vehicle trains on its own unit",
    )
    time_model: TimeModelKind = Field(
        TimeModelKind.PROFILE,
        description="profile: each job's FLOPs over the simulated device's FLOP/s (the same on every host); "
        "calibrated: per-sample costs measured on this host once per process after a warm-up "
        "(deterministic); measured: each job's host time; device: the fixed model below",
    )
    profile: ProfileSpec = Field(
        None,
        description=f"profile time model: the device the clients' jobs run on, a built-in profile's name (table at the end) or a custom one (below); null: {ONBOARD_DEFAULT} for mode onboard, {EDGE_DEFAULT} for shared_gpu",
    )
    coordinator_profile: ProfileSpec = Field(
        None,
        description=f"profile time model: the device the coordinator's solves run on, a name or a custom profile as for profile; null: {EDGE_DEFAULT}",
    )
    calibration: CalibrationCosts | None = Field(
        None,
        description="calibrated only: pin the costs (e.g. from a manifest's 'calibration'); null = measure "
        "them; ignored by the other time models",
    )
    seconds_per_sample_epoch: float = Field(2.3e-4, gt=0, description="device model: s per sample per epoch")
    fisher_factor: float = Field(1.0, ge=0, description="device model: Fisher pass cost in epochs")
    seconds_per_solve_iteration: float = Field(1e-3, ge=0, description="device model: coordinator CG iteration")
    batch_max_jobs: int = Field(1, ge=1, description="shared_gpu: queued jobs run together, at most this many")
    batch_overlap: float = Field(
        0.0, ge=0, le=1, description="shared_gpu: 0 = a batch costs its jobs' sum, 1 = its longest"
    )
    contribution_cache: str | None = Field(
        None,
        description="directory of the content-addressed contribution cache shared by runs and sweep points "
        "(fl_core.cache): a contribution trained the same way before is loaded, not trained, and "
        "charged the same simulated compute; one trained before with other Fisher or upload "
        "settings gets only its Fisher computed; null = off (vmc sweep turns it on)",
    )

    _profiles = field_validator("profile", "coordinator_profile")(lambda cls, v: _known_profile(v))

    def client_profile(self) -> DeviceProfile:
        """The device the clients' jobs run on (null: by ``mode``, :mod:`vmc_sim.compute.hardware`)."""
        default = ONBOARD_DEFAULT if self.mode == "onboard" else EDGE_DEFAULT
        return profile_of(_spec(self.profile), default)

    def solver_profile(self) -> DeviceProfile:
        """The device the coordinator's solve runs on (null: the edge-server GPU)."""
        return profile_of(_spec(self.coordinator_profile), EDGE_DEFAULT)

    @property
    def measures_costs(self) -> bool:
        """True when the calibrated time model has no pinned costs: they are measured on this host."""
        return self.time_model is TimeModelKind.CALIBRATED and self.calibration is None


def _spec(v: ProfileSpec) -> str | dict[str, Any] | None:
    return v.model_dump() if isinstance(v, CustomProfile) else v


class Scenario(Strict):
    name: str = Field("default-city", description="names the run directory (<out>/<name>-<UTC stamp>)")
    seed: int = Field(0, ge=0, description="the run seed: data partition, W0, subset sampling, local training")
    duration: float = Field(600.0, gt=0, description="simulated seconds of traffic after mobility begins")
    mobility: MobilitySection = MobilitySection()
    federated: FederatedSection = FederatedSection.model_validate(SCENARIO_DEFAULTS["federated"])
    coordinator: CoordinatorSection = CoordinatorSection()
    channel: dict[str, Any] = Field(default_factory=dict)
    compute: ComputeSection = ComputeSection()
    plugins: list[str] = Field(
        default_factory=list,
        description="modules of your own (on the Python path) imported before the rest of the scenario is read: "
        "what they register (a mobility source, a radio model, an editor, ...) can then be named here",
    )

    _channel = field_validator("channel")(lambda cls, v: dataclass_checker(ChannelConfig, "channel")(v))

    @model_validator(mode="before")
    @classmethod
    def _documented_defaults(cls, data: Any) -> Any:
        if isinstance(data, dict):
            import_plugins(data.get("plugins"))  # before any name they register is looked up
            return with_documented_defaults(data)
        return data

    def channel_config(self) -> ChannelConfig:
        return ChannelConfig(**self.channel)

    def resolved(self) -> dict[str, Any]:
        """Every key with the value a run uses: the mapping sections a lower layer reads
        (``mobility.city``, ``.lust``, ``.rsus``, ``.coverage`` and ``channel``) filled in with that
        layer's defaults. What ``--print-config`` prints; it loads back as the same scenario."""
        import json
        from dataclasses import asdict

        from mobility.lust import LustConfig

        data = self.model_dump(mode="json")
        m, mob = data["mobility"], self.mobility
        parts = (("city", mob.city_config()), ("lust", LustConfig(**mob.lust)), ("rsus", mob.rsu_config()))
        for key, config in (*parts, ("coverage", mob.coverage_config())):
            m[key] = asdict(config)
        data["channel"] = self.channel_config().to_dict()
        return json.loads(json.dumps(data))  # tuples as lists, as YAML and JSON keep them


def load_scenario(path: str | Path | Mapping[str, Any] | None) -> Scenario:
    """Validate a scenario file (None: the embedded default; a mapping: the sections given, laid over
    the documented defaults as a file's are); a file's relative paths are read relative to its
    directory (:func:`vmc_sim.scenario.inputs.resolve_paths`)."""
    if isinstance(path, Mapping):
        return load_model(Scenario, None, dict(path))
    scenario = load_model(Scenario, path, what="scenario file")
    if path is None:
        return scenario
    from .inputs import check_rsu_bounds, resolve_paths

    data = resolve_paths(scenario.model_dump(mode="json"), Path(path).resolve().parent)
    scenario = _validate(data, path)
    check_rsu_bounds(scenario, str(path))
    return scenario


def _validate(data: dict[str, Any], path: str | Path) -> Scenario:
    from pydantic import ValidationError

    from .config import ConfigError, format_errors

    try:
        return Scenario.model_validate(data)
    except ValidationError as e:
        raise ConfigError(format_errors(e, str(path), Scenario)) from None
