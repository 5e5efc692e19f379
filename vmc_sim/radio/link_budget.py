"""The V2I link budget: path loss, noise, SNR and the rate of one transfer at a distance.

Link budget (all in dB)::

    SNR = P_tx + G_ant - PL(d) - S - N,    N = N0 + 10 log10(B) + NF

with ``P_tx`` the transmitter's power (RSU on the downlink, vehicle on the uplink), ``G_ant`` the
sum of both antenna gains, ``PL`` the path loss below, ``S`` an optional log-normal shadowing term,
``N0`` the thermal noise density (-174 dBm/Hz), ``B`` the channel bandwidth and ``NF`` the
receiver noise figure. The rate of one transfer that holds ``share`` Hz of the channel (processor
sharing: ``share = B / n`` with ``n`` transfers active on it) is ``channel.rate_model``'s
(:data:`vmc_sim.radio.rate_models.RATES`: ``ieee80211p`` by default, ``shannon``, ``nr``, or one
of your own); ``PL`` is ``channel.path_loss_model``'s (:data:`vmc_sim.radio.path_loss.PATH_LOSS`:
``tr37885_urban_los`` by default, ``tr37885_highway_los``, ``tr38901_umi_los``, ``free_space``,
``log_distance``, or one of your own), at the 3-D distance computed from the ground distance
(clamped to ``min_distance_m``) and the two antenna heights.

Every model then delivers application payload at ``(msdu_bytes - headers) / msdu_bytes`` of that
rate (the transport's IP and TCP/UDP headers, :func:`vmc_sim.radio.rates.payload_fraction`;
``transport: none`` counts the whole MSDU) and is capped at ``rate_cap_bps`` (none by default); a
link below the lowest MCS or CQI gets 0: it is in outage, and :mod:`vmc_sim.radio.channel` fails a
transfer that stays in outage for ``outage_timeout_s``. The tables and their sources are in
:mod:`vmc_sim.radio.rates`.

The default is 802.11p over TCP (``rate_model: ieee80211p``, ``bandwidth_hz: 10e6``,
``rate_cap_bps: null``, ``transport: tcp``): what vehicular researchers model for an RSU link
(ITS-G5 / DSRC at 5.9 GHz, at most 16 Mb/s after the MAC), moving models the way federated
frameworks do (over TCP); both halves are checked against ns-3 in ``reports/channel_validation/``.

The defaults (RSU antenna 5 m, vehicle antenna 1.5 m, noise figure 9 dB, 5.9 GHz) follow the
3GPP V2X evaluation assumptions (TR 36.885 / TR 37.885). The 3GPP formulas are stated for
distances of a few metres and more; every model clamps the ground distance to ``min_distance_m``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from fl_core.registry import UnknownNameError

from .link_state import LinkState
from .link_states import LINK_STATES
from .path_loss import PATH_LOSS
from .rate_models import RATES
from .rates import (
    IEEE80211P_BANDWIDTH_HZ,
    MAX_MSDU_BYTES,
    SHANNON_SPECTRAL_EFFICIENCY_CAP,
    TRANSPORT_HEADER_BYTES,
    TRANSPORTS,
    payload_fraction,
)

DIRECTIONS = ("downlink", "uplink")
DUPLEX_MODES = ("separate", "shared")
BUILDING_LOSSES = ("nlos", "obstacle")

Position = tuple[float, float]
PositionFn = Callable[[Hashable], "tuple[float, ...] | None"]
CoverageFn = Callable[[Hashable], bool]


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) and math.isfinite(v)


def is_positive(v: Any) -> bool:
    return is_number(v) and v > 0


@dataclass
class ChannelConfig:
    """Radio parameters of every RSU's channel (filled from the scenario's ``channel`` section)."""

    path_loss_model: str = field(
        default="tr37885_urban",
        metadata={
            "doc": "a path-loss model of vmc_sim.radio.path_loss.PATH_LOSS: tr37885_urban (TR 37.885 urban, per link "
            "state), tr37885_highway, tr38901_umi (UMi street canyon), or a LOS-only one: tr37885_urban_los, "
            "tr37885_highway_los, tr38901_umi_los, free_space, log_distance"
        },
    )
    link_state_model: str | None = field(
        default=None,
        metadata={
            "doc": "a link-state model of vmc_sim.radio.link_states.LINK_STATES: city (NLOS by buildings or their "
            "stand-in, NLOSv by the vehicles on the line), tr37885_urban, tr37885_highway, tr38901_umi, or los "
            "(every link LOS: the idealised channel); null: city with a path-loss model of every state, los with "
            "one of LOS only"
        },
    )
    carrier_ghz: float = field(default=5.9, metadata={"doc": "carrier frequency, GHz (5.9: the ITS band)"})
    tx_power_dbm_downlink: float = field(default=23.0, metadata={"doc": "the RSU's transmit power, dBm"})
    tx_power_dbm_uplink: float = field(default=23.0, metadata={"doc": "a vehicle's transmit power, dBm"})
    antenna_gain_db: float = field(default=0.0, metadata={"doc": "the sum of both antennas' gains, dB"})
    rsu_height_m: float = field(default=5.0, metadata={"doc": "the RSU antenna's height, m (3GPP V2X evaluation: 5)"})
    vehicle_height_m: float = field(
        default=1.5, metadata={"doc": "a vehicle antenna's height, m (3GPP V2X evaluation: 1.5)"}
    )
    noise_figure_db: float = field(default=9.0, metadata={"doc": "the receiver's noise figure, dB"})
    noise_density_dbm_hz: float = field(default=-174.0, metadata={"doc": "the thermal noise density, dBm/Hz"})
    bandwidth_hz: float = field(
        default=IEEE80211P_BANDWIDTH_HZ, metadata={"doc": "each channel's bandwidth, Hz (ieee80211p: 10 MHz only)"}
    )
    duplex: str = field(
        default="separate",
        metadata={"doc": "separate (a channel per direction) or shared (one channel for both directions)"},
    )
    rate_model: str = field(
        default="ieee80211p",
        metadata={
            "doc": "shannon (capped Shannon over the share), ieee80211p (802.11p MCS by SNR x MAC efficiency; 10 MHz), nr (TS 38.214 CQI table x TS 38.306 overhead); tables and sources in vmc_sim/radio/rates.py"
        },
    )
    rate_cap_bps: float | None = field(
        default=None, metadata={"doc": "a cap on any transfer's rate, bit/s (null: none)"}
    )
    spectral_efficiency_cap: float | None = field(
        default=SHANNON_SPECTRAL_EFFICIENCY_CAP,
        metadata={"doc": "shannon: the largest spectral efficiency, bit/s/Hz (null: uncapped)"},
    )
    msdu_bytes: int = field(
        default=1500,
        metadata={"doc": "IP packet per frame: the MAC efficiency of ieee80211p, the header share of transport"},
    )
    transport: str = field(
        default="tcp",
        metadata={
            "doc": "tcp (IP/TCP headers; on ieee80211p one TCP ACK frame per two segments), udp (IP/UDP headers) or none (the whole MSDU is payload)"
        },
    )
    path_loss_exponent: float = field(
        default=2.7, metadata={"doc": "log_distance: the path-loss exponent beyond log_distance_ref_m"}
    )
    log_distance_ref_m: float = field(
        default=1.0, metadata={"doc": "log_distance: the reference distance up to which the loss is free space, m"}
    )
    shadowing_sigma_db: float | None = field(
        default=None,
        metadata={
            "doc": "log-normal shadowing's standard deviation, dB, for every link state (null: the path-loss "
            "model's per state, e.g. 3 dB LOS and NLOSv, 4 dB NLOS for tr37885_urban; 0: none)"
        },
    )
    shadowing_decorrelation_m: float | None = field(
        default=None,
        metadata={
            "doc": "the distance over which a link's shadowing decorrelates, m (null: the path-loss model's per "
            "state, else 10 m)"
        },
    )
    state_decorrelation_m: float = field(
        default=10.0,
        metadata={"doc": "tr37885 link states: the distance over which a link's LOS/NLOSv draw decorrelates, m"},
    )
    building_decorrelation_m: float = field(
        default=50.0,
        metadata={
            "doc": "the distance over which a link's NLOS draw decorrelates where buildings are stood in by a "
            "probability, m (TR 38.901's spatially consistent LOS state, UMi: 50 m)"
        },
    )
    truck_share: float = field(
        default=0.0,
        metadata={"doc": "tr37885 link states: the share of NLOSv blockers that are trucks (3 m; else 1.6 m)"},
    )
    blocker_radius_m: float = field(
        default=0.9,
        metadata={"doc": "city link states: a blocking vehicle is a disc of this radius around its position, m"},
    )
    blocker_height_m: float = field(
        default=1.6,
        metadata={"doc": "city link states: a blocking vehicle's height where its type does not say, m"},
    )
    building_loss: str = field(
        default="nlos",
        metadata={
            "doc": "how a link a building blocks is priced: nlos (the path-loss model's NLOS formula) or obstacle "
            "(LOS path loss plus 9 dB per wall crossed and 0.4 dB per metre inside: Sommer et al.'s obstacle "
            "model, as Veins uses it)"
        },
    )
    shared_air: bool = field(
        default=True,
        metadata={
            "doc": "RSUs on one channel whose cells lie within carrier-sense range of each other share the air "
            "(false: each RSU has a channel of its own)"
        },
    )
    carrier_sense_dbm: float = field(
        default=-85.0,
        metadata={
            "doc": "shared_air: two cells share the air where a transmitter at one's edge is received above "
            "this at the other's edge (LOS, no shadowing), dBm"
        },
    )
    rsu_channels: dict[str, int] = field(
        default_factory=dict,
        metadata={
            "doc": "shared_air: the channel number of each RSU by id (RSUs not named: 0); RSUs on "
            "different channels never share the air"
        },
    )
    update_interval: float = field(
        default=1.0, metadata={"doc": "simulated seconds between recomputations of every active transfer's rate"}
    )
    min_distance_m: float = field(
        default=1.0,
        metadata={"doc": "ground distances are clamped to at least this, m (the 3GPP formulas hold from a few metres)"},
    )
    outage_timeout_s: float = field(
        default=3.0,
        metadata={
            "doc": "seconds a transfer may stay in outage (its link below the lowest MCS or CQI: no progress) before it fails with reason outage; a broadcast drops a receiver in outage at once and sends it the rest by unicast (3 s: TCP's initial 1 s retransmission timeout, RFC 6298, doubled once)"
        },
    )

    def __post_init__(self) -> None:
        if (
            self.link_state_model is None
            and isinstance(self.path_loss_model, str)
            and self.path_loss_model in PATH_LOSS
        ):
            self.link_state_model = "city" if PATH_LOSS[self.path_loss_model].shadowing_db else "los"
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the first bad field."""
        for name, registry in (
            ("path_loss_model", PATH_LOSS),
            ("rate_model", RATES),
            ("link_state_model", LINK_STATES),
        ):
            try:
                registry.canonical(getattr(self, name))
            except (UnknownNameError, TypeError) as e:
                raise ValueError(f"channel.{name}: {e}") from None
        if self.duplex not in DUPLEX_MODES:
            raise ValueError(f"channel.duplex must be one of {DUPLEX_MODES}, got {self.duplex!r}")
        if self.transport not in TRANSPORTS:
            raise ValueError(f"channel.transport must be one of {TRANSPORTS}, got {self.transport!r}")
        msdu = self.msdu_bytes
        least = TRANSPORT_HEADER_BYTES[self.transport] + 1
        if isinstance(msdu, bool) or not isinstance(msdu, (int, np.integer)) or not least <= msdu <= MAX_MSDU_BYTES:
            raise ValueError(
                f"channel.msdu_bytes must be an integer in {least}..{MAX_MSDU_BYTES} "
                f"(transport {self.transport}), got {msdu!r}"
            )
        for name in (
            "tx_power_dbm_downlink",
            "tx_power_dbm_uplink",
            "antenna_gain_db",
            "noise_figure_db",
            "noise_density_dbm_hz",
        ):
            if not is_number(getattr(self, name)):
                raise ValueError(f"channel.{name} must be a finite number (dB), got {getattr(self, name)!r}")
        for name in (
            "carrier_ghz",
            "rsu_height_m",
            "vehicle_height_m",
            "bandwidth_hz",
            "path_loss_exponent",
            "log_distance_ref_m",
            "update_interval",
            "min_distance_m",
        ):
            if not is_positive(getattr(self, name)):
                raise ValueError(f"channel.{name} must be a positive number, got {getattr(self, name)!r}")
        for name in ("rate_cap_bps", "spectral_efficiency_cap"):
            v = getattr(self, name)
            if v is not None and not is_positive(v):
                raise ValueError(f"channel.{name} must be a positive number or null, got {v!r}")
        if not is_number(self.outage_timeout_s) or self.outage_timeout_s < 0:
            raise ValueError(f"channel.outage_timeout_s must be a non-negative number, got {self.outage_timeout_s!r}")
        sigma = self.shadowing_sigma_db
        if sigma is not None and (not is_number(sigma) or sigma < 0):
            raise ValueError(f"channel.shadowing_sigma_db must be a non-negative number or null, got {sigma!r}")
        decorrelation = self.shadowing_decorrelation_m
        if decorrelation is not None and not is_positive(decorrelation):
            raise ValueError(
                f"channel.shadowing_decorrelation_m must be a positive number or null, got {decorrelation!r}"
            )
        for name in ("state_decorrelation_m", "building_decorrelation_m", "blocker_radius_m", "blocker_height_m"):
            if not is_positive(getattr(self, name)):
                raise ValueError(f"channel.{name} must be a positive number, got {getattr(self, name)!r}")
        if self.building_loss not in BUILDING_LOSSES:
            raise ValueError(f"channel.building_loss must be one of {BUILDING_LOSSES}, got {self.building_loss!r}")
        if not is_number(self.truck_share) or not 0 <= self.truck_share <= 1:
            raise ValueError(f"channel.truck_share must lie in [0, 1], got {self.truck_share!r}")
        if not is_number(self.carrier_sense_dbm):
            raise ValueError(f"channel.carrier_sense_dbm must be a finite number (dBm), got {self.carrier_sense_dbm!r}")
        if not isinstance(self.rsu_channels, dict) or not all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) for k, v in self.rsu_channels.items()
        ):
            raise ValueError(f"channel.rsu_channels must map RSU ids to channel numbers, got {self.rsu_channels!r}")
        if self.link_state_model != "los" and not PATH_LOSS[self.path_loss_model].shadowing_db:
            raise ValueError(
                f"channel.path_loss_model {self.path_loss_model!r} has a formula for LOS only, so link states other "
                f"than LOS cannot be priced: give a path-loss model of every state (tr37885_urban, "
                f"tr37885_highway, tr38901_umi) or link_state_model: los (channel.link_state_model is "
                f"{self.link_state_model!r})"
            )
        PATH_LOSS[self.path_loss_model].check(self)
        RATES[self.rate_model].check(self)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (run manifests)."""
        return asdict(self)


def check_direction(direction: str) -> None:
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")


def path_loss_db(distance_m: float, cfg: ChannelConfig, state: LinkState = LinkState.LOS) -> float:
    """Path loss (dB) at ground distance ``distance_m`` from the RSU in link state ``state``, for
    ``cfg.path_loss_model`` (before shadowing and any vehicle's blockage loss).

    The ground distance is clamped to ``cfg.min_distance_m`` and turned into a 3-D distance with
    the antenna heights, since the 3GPP formulas are written in terms of the 3-D distance.
    """
    d2d = max(float(distance_m), cfg.min_distance_m)
    d3d = math.hypot(d2d, cfg.rsu_height_m - cfg.vehicle_height_m)
    return PATH_LOSS[cfg.path_loss_model].loss(d2d, d3d, cfg, state)


def noise_dbm(cfg: ChannelConfig) -> float:
    """Noise power (dBm) over the whole channel: thermal density + bandwidth + noise figure."""
    return cfg.noise_density_dbm_hz + 10.0 * math.log10(cfg.bandwidth_hz) + cfg.noise_figure_db


def snr_db(
    distance_m: float,
    direction: str,
    cfg: ChannelConfig,
    shadowing_db: float = 0.0,
    state: LinkState = LinkState.LOS,
) -> float:
    """SNR (dB) over the full channel at ground distance ``distance_m`` in link state ``state``;
    ``shadowing_db`` adds loss (shadowing, and a vehicle's blockage loss)."""
    check_direction(direction)
    p_tx = cfg.tx_power_dbm_downlink if direction == "downlink" else cfg.tx_power_dbm_uplink
    return p_tx + cfg.antenna_gain_db - path_loss_db(distance_m, cfg, state) - shadowing_db - noise_dbm(cfg)


def rate_bps(
    distance_m: float,
    share_hz: float,
    direction: str,
    cfg: ChannelConfig,
    shadowing_db: float = 0.0,
    state: LinkState = LinkState.LOS,
) -> float:
    """Rate (bit/s) of a transfer holding ``share_hz`` of the channel under ``cfg.rate_model``, capped,
    on a link in state ``state`` with ``shadowing_db`` of extra loss."""
    if not is_number(share_hz) or share_hz < 0:
        raise ValueError(f"share_hz must be a non-negative number, got {share_hz!r}")
    snr = snr_db(distance_m, direction, cfg, shadowing_db, state)
    rate = RATES[cfg.rate_model].rate(snr, share_hz, direction, cfg)
    rate *= payload_fraction(int(cfg.msdu_bytes), cfg.transport)
    if cfg.rate_cap_bps is not None:
        rate = min(rate, cfg.rate_cap_bps)
    return rate
