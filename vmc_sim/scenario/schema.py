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
    evaluate: bool = True
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


class CalibrationCosts(Strict):
    """Pinned costs of the calibrated time model (see :mod:`vmc_sim.compute.calibration`)."""

    train_s_per_sample_epoch: float = Field(gt=0, description="local training: s per sample per epoch")
    fisher_s_per_sample: float = Field(ge=0, description="Fisher pass: s per sample")
    solve_s_per_unit: float = Field(ge=0, description="coordinator solve: s per (1 + operator products)")


class CustomProfile(Strict):
    """A device of the user's own (:mod:`vmc_sim.compute.hardware`): charged at ``flops_per_s`` as given."""

    name: str = Field(min_length=1)
    flops_per_s: float = Field(gt=0)
    source: str = Field(min_length=1)
    description: str = ""

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
    mode: Literal["shared_gpu", "onboard"] = "shared_gpu"
    time_model: TimeModelKind = Field(
        TimeModelKind.PROFILE,
        description="profile: each job's FLOPs over the simulated device's FLOP/s (the same on every host); "
        "calibrated: per-sample costs measured on this host once per process after a warm-up "
        "(deterministic); measured: each job's host time; device: the fixed model below",
    )
    profile: ProfileSpec = None
    coordinator_profile: ProfileSpec = None
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
    name: str = "default-city"
    seed: int = Field(0, ge=0)
    duration: float = Field(600.0, gt=0, description="simulated seconds of traffic after mobility begins")
    mobility: MobilitySection = MobilitySection()
    federated: FederatedSection = FederatedSection.model_validate(SCENARIO_DEFAULTS["federated"])
    coordinator: CoordinatorSection = CoordinatorSection()
    channel: dict[str, Any] = Field(default_factory=dict)
    compute: ComputeSection = ComputeSection()

    _channel = field_validator("channel")(lambda cls, v: dataclass_checker(ChannelConfig, "channel")(v))

    @model_validator(mode="before")
    @classmethod
    def _documented_defaults(cls, data: Any) -> Any:
        return with_documented_defaults(data) if isinstance(data, dict) else data

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


MEANINGS: dict[str, str] = {
    "name": "names the run directory (<out>/<name>-<UTC stamp>)",
    "seed": "the run seed: data partition, W0, subset sampling, local training",
    "mobility.source": "city (embedded grid), files (your SUMO network), lust (the LuST rebuild), trace (a recorded "
    "run), fcd (SUMO floating car data: coverage and events computed from its positions as a live run's)",
    "mobility.net_file": "source files: a SUMO network (<net>), relative to the scenario file; source fcd: "
    "optional, the network the FCD was recorded on (needed by rsus.placement auto, lon/lat positions and fcd_geo; "
    "a position more than 50 m outside its bounds is refused)",
    "mobility.fcd_file": "source fcd: SUMO's --fcd-output (XML, or CSV when the name ends in .csv; .gz allowed), "
    "network x/y (lon/lat with fcd_geo), relative to the scenario file; checked whole before the run (a vehicle "
    "without x, y or speed, or breaking physics: fcd_max_speed, fcd_invalid, is refused). The clock steps by "
    "sumo.step_length from sumo.begin (null: the first sample); between samples further apart than a step "
    "positions are linear, within v_max * dt / 2 of the true ones for samples dt apart (mobility/fcd.py)",
    "mobility.route_files": "source files: route files (<routes>) for net_file; source fcd: optional route or "
    "additional files whose <vType> maxSpeed (or vClass default) can raise the default fcd_max_speed",
    "mobility.config_file": "source files: a .sumocfg (instead of, or besides, net_file and route_files)",
    "mobility.fcd_step_length": "source fcd: the SUMO step length the FCD was recorded with (SUMO stamps a sample "
    "with the time its step began: a live run sees it at that time + this); null = sumo.step_length",
    "mobility.fcd_max_speed": "source fcd: m/s a vehicle may move between two samples (+ 5 m for a lane change); "
    "faster is a jump the replay would draw through every cell in between. null = 1.5 x the fastest vehicle type "
    "(SUMO's default car, 55.56 m/s, or a faster <vType> of route_files): 83.34 m/s",
    "mobility.fcd_geo": "source fcd: true = positions are lon/lat (SUMO's --fcd-output.geo), converted to network "
    "x/y with net_file's projection (sumolib, pyproj); false = network x/y, and a file that looks like lon/lat is "
    "refused",
    "mobility.fcd_invalid": "source fcd: refuse (the run, naming the vehicle, time and file) or drop (leave out every "
    "vehicle that breaks fcd_max_speed or the network's bounds, listed under mobility.fcd.dropped in manifest.json "
    "and in a note from vmc run)",
    "mobility.trace": "source trace: a trace.jsonl of an earlier run",
    "mobility.outputs": "SUMO's own outputs a run of city, files or lust writes into the run directory: fcd "
    "(sumo/fcd.xml), tripinfo (sumo/tripinfo.xml), summary (sumo/summary.xml); each is listed with its SHA-256 "
    "and size under sumo_outputs in manifest.json; refused for trace and fcd (no SUMO runs); [] = none",
    "mobility.fcd_area": "outputs fcd: all (every vehicle) or coverage (SUMO itself keeps the vehicles touching an "
    "RSU's coverage circle, given as a 64-gon around it in sumo/coverage.poly.xml: a superset by up to a "
    "vehicle length; V2V-relayed members further out are not kept)",
    "mobility.sumo.backend": "libsumo (in process) or traci (a SUMO child process)",
    "mobility.sumo.step_length": "simulated seconds per SUMO step (source fcd: per step of its clock)",
    "mobility.sumo.seed": "SUMO's random seed",
    "mobility.sumo.begin": "SUMO begin time in seconds (null: 0, or the LuST window's start; source fcd: the first "
    "sample's time)",
    "mobility.sumo.time_to_teleport": "SUMO --time-to-teleport (null: SUMO's default)",
    "mobility.sumo.extra_args": "more SUMO command-line options",
    "mobility.city.junctions_x": "grid junctions along x",
    "mobility.city.junctions_y": "grid junctions along y",
    "mobility.city.spacing": "metres between junctions",
    "mobility.city.lanes": "lanes per direction",
    "mobility.city.max_speed": "m/s",
    "mobility.city.traffic_lights": "signalised junctions",
    "mobility.city.period": "seconds between departures (randomTrips period)",
    "mobility.city.demand_scale": "departures x this factor ('density' in sweeps)",
    "mobility.city.duration": "seconds of generated demand",
    "mobility.city.min_distance": "metres, shortest trip",
    "mobility.city.fringe_factor": "preference for trips starting at the fringe",
    "mobility.city.seed": "seed of the generated demand",
    "mobility.rsus.placement": "auto (road-graph centrality) or explicit (positions)",
    "mobility.rsus.positions": "explicit: [{id, x, y, radius}] in network metres, or {lon, lat}",
    "mobility.rsus.count": "auto: how many RSUs",
    "mobility.rsus.region": "auto: [xmin, ymin, xmax, ymax] to place in",
    "mobility.rsus.polygon": "auto: [[x, y], ...] of 3+ vertices (network metres) to place in, instead of region",
    "mobility.rsus.central_fraction": "auto: share of the network's central region considered",
    "mobility.rsus.min_spacing": "auto: metres between RSUs (null: twice the radius)",
    "mobility.rsus.radius": "metres of coverage",
    "mobility.rsus.centrality_samples": "auto: sampled sources for centrality",
    "mobility.rsus.seed": "auto: sampling seed",
    "mobility.rsus.id_prefix": "RSU ids are <prefix><k>",
    "mobility.coverage.membership": "union: a vehicle in any RSU's range is covered",
    "mobility.coverage.v2v_range": "metres of V2V relaying (null: none)",
    "mobility.coverage.v2v_max_hops": "V2V hops",
    "mobility.coverage.precision": "decimals kept for positions and speeds",
    "mobility.coverage.state_interval": "simulated seconds between recorded member positions",
    "federated.dataset": "digits (built in), mnist, fashion_mnist, femnist, cifar10, cifar100, svhn, emnist[-split]",
    "federated.data_root": "where dataset files are (null: $VMC_DATA, ../shared/data, torchvision folders)",
    "federated.model": "mlp (one hidden layer of 32), cnn (the paper's), resnet18",
    "federated.max_train_samples": "a random slice of the training set (null: all)",
    "federated.max_test_samples": "the first N test images (null: all)",
    "federated.train.epochs": "local epochs K",
    "federated.train.lr": "local SGD learning rate",
    "federated.train.batch_size": "local mini-batch",
    "federated.train.augment": "none or crop_flip (random crop of the 4-pixel padded image + horizontal flip)",
    "federated.train.fisher": "diagonal, kfac, full or none",
    "federated.train.fisher_batch": "samples per Fisher batch",
    "federated.train.fisher_labels": "sampled or expected (labels the true Fisher averages over)",
    "federated.train.upload_dtype": "float32, float16 or bfloat16",
    "federated.train.device": "cpu, cuda or auto",
    "federated.projection.method": "auto (closed form for diagonal, else CG on F), closed_form, cg_f, cg_f2, adam",
    "federated.projection.tol": "relative residual at which a CG solve stops",
    "federated.projection.max_iter": "CG iterations at most (a solve stopped here is reported)",
    "federated.projection.precondition": "precondition CG on F (per layer)",
    "federated.projection.preconditioner": "kronecker (default) or eigen_diagonal (EKFAC-style; measured slower)",
    "federated.projection.warm_start": "start CG from the previous solve",
    "federated.projection.fast_products": "float32 K-FAC products, finished in float64",
    "federated.projection.curvature_floor": "curvature below this is zero",
    "federated.rounds.clients_per_round": "participants drawn per round",
    "federated.rounds.local_epochs": "epochs per round",
    "federated.rounds.lr": "local learning rate",
    "federated.rounds.batch_size": "local mini-batch",
    "federated.rounds.momentum": "local SGD momentum",
    "federated.rounds.server_lr": "server step size",
    "federated.rounds.weighted": "aggregate weighted by sample count",
    "coordinator.evaluate": "record test accuracy and loss after every request",
    "channel.rate_model": "shannon (capped Shannon over the share), ieee80211p (802.11p MCS by SNR x MAC efficiency; "
    "10 MHz), nr (TS 38.214 CQI table x TS 38.306 overhead); tables and sources in vmc_sim/radio/rates.py",
    "channel.msdu_bytes": "IP packet per frame: the MAC efficiency of ieee80211p, the header share of transport",
    "channel.outage_timeout_s": "seconds a transfer may stay in outage (its link below the lowest MCS or CQI: no "
    "progress) before it fails with reason outage; a broadcast drops a receiver in outage at once and sends it the "
    "rest by unicast (3 s: TCP's initial 1 s retransmission timeout, RFC 6298, doubled once)",
    "channel.transport": "tcp (IP/TCP headers; on ieee80211p one TCP ACK frame per two segments), udp (IP/UDP "
    "headers) or none (the whole MSDU is payload)",
    "compute.mode": "shared_gpu: each method's jobs queue for one device; onboard: every vehicle trains on its own unit",
    "compute.profile": "profile time model: the device the clients' jobs run on, a built-in profile's name (table "
    f"at the end) or a custom one (below); null: {ONBOARD_DEFAULT} for mode onboard, {EDGE_DEFAULT} for shared_gpu",
    "compute.coordinator_profile": "profile time model: the device the coordinator's solves run on, a name or a "
    f"custom profile as for profile; null: {EDGE_DEFAULT}",
    "compute.profile.name": "a custom device's name (not a built-in one's), recorded in the manifest",
    "compute.profile.flops_per_s": "its sustained FP32 FLOP/s, charged as given (a peak times the utilisation "
    "your models reach on it)",
    "compute.profile.source": "where the figure comes from (a datasheet, a measurement), recorded in the manifest",
    "compute.profile.description": "what the device is",
}
