"""The V2I link budget: path loss, noise, SNR and the rate of one transfer at a distance.

Link budget (all in dB)::

    SNR = P_tx + G_ant - PL(d) - S - N,    N = N0 + 10 log10(B) + NF

with ``P_tx`` the transmitter's power (RSU on the downlink, vehicle on the uplink), ``G_ant`` the
sum of both antenna gains, ``PL`` the path loss below, ``S`` an optional log-normal shadowing term,
``N0`` the thermal noise density (-174 dBm/Hz), ``B`` the channel bandwidth and ``NF`` the
receiver noise figure. The rate of one transfer that holds ``share`` Hz of the channel (processor
sharing: ``share = B / n`` with ``n`` transfers active on it) depends on ``rate_model``:

* ``ieee80211p`` (default): ``(share / B) * R(SNR) * mac_efficiency(msdu_bytes, R(SNR), stations)``,
  with ``R`` the fastest 802.11p data rate whose SNR threshold is met (10 MHz channels only). The
  contending ``stations`` are the ``n`` transfers on the channel, except on a downlink channel of
  its own (``duplex: separate``), where the RSU is the only sender. Over ``transport: tcp`` it is
  multiplied by :func:`vmc_sim.radio.rates.tcp_data_share`, the channel time the returning TCP ACKs leave.
* ``shannon``: ``share * min(log2(1 + SNR), spectral_efficiency_cap)``; the cap defaults to
  :data:`vmc_sim.radio.rates.SHANNON_SPECTRAL_EFFICIENCY_CAP` (``null`` lifts it).
* ``nr``: ``share * SE(CQI(SNR)) * (1 - OH)``, the 5G NR CQI table with TS 38.306's overhead.

Every model then delivers application payload at ``(msdu_bytes - headers) / msdu_bytes`` of that
rate (the transport's IP and TCP/UDP headers, :func:`vmc_sim.radio.rates.payload_fraction`; ``transport:
none`` counts the whole MSDU) and is capped at ``rate_cap_bps`` (none by default); a link below the
lowest MCS or CQI gets 0: it is in outage, and :mod:`vmc_sim.radio.channel` fails a transfer that stays in
outage for ``outage_timeout_s``. The tables and their sources are in :mod:`vmc_sim.radio.rates`.

The default is 802.11p over TCP (``rate_model: ieee80211p``, ``bandwidth_hz: 10e6``,
``rate_cap_bps: null``, ``transport: tcp``): what vehicular researchers model for an RSU link
(ITS-G5 / DSRC at 5.9 GHz, at most 16 Mb/s after the MAC), moving models the way federated
frameworks do (over TCP); both halves are checked against ns-3 in ``reports/channel_validation/``.

Path-loss models (``d`` is the 3-D distance in metres, computed from the 2-D ground distance and
the two antenna heights; ``fc`` in GHz):

* ``tr37885_urban_los`` (default): ``38.77 + 16.7 log10(d) + 18.2 log10(fc)``, 3GPP TR 37.885
  Table 6.2.1-1, urban LOS (also used there for NLOSv before the blockage loss).
* ``tr37885_highway_los``: ``32.4 + 20 log10(d) + 20 log10(fc)``, same table, highway LOS.
* ``tr38901_umi_los``: UMi-Street Canyon LOS of 3GPP TR 38.901 Table 7.4.1-1, for an RSU mounted
  like a small cell: ``32.4 + 21 log10(d) + 20 log10(fc)`` up to the breakpoint
  ``d'_BP = 4 h'_RSU h'_veh fc / c`` (``h' = h - 1 m``, ``c = 3e8``), then
  ``32.4 + 40 log10(d) + 20 log10(fc) - 9.5 log10(d'_BP^2 + (h_RSU - h_veh)^2)``.
* ``free_space``: Friis, ``20 log10(4 pi d f / c)``.
* ``log_distance``: free space up to ``log_distance_ref_m``, then ``10 n log10(d / d0)`` more.

The defaults (RSU antenna 5 m, vehicle antenna 1.5 m, noise figure 9 dB, 5.9 GHz) follow the
3GPP V2X evaluation assumptions (TR 36.885 / TR 37.885). The 3GPP formulas are stated for
distances of a few metres and more; every model clamps the ground distance to ``min_distance_m``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .rates import (
    IEEE80211P_BANDWIDTH_HZ,
    MAX_MSDU_BYTES,
    SHANNON_SPECTRAL_EFFICIENCY_CAP,
    TRANSPORT_HEADER_BYTES,
    TRANSPORTS,
    ieee80211p_rate,
    mac_efficiency,
    nr_spectral_efficiency,
    payload_fraction,
    tcp_data_share,
)

PATH_LOSS_MODELS = ("tr37885_urban_los", "tr37885_highway_los", "tr38901_umi_los", "free_space", "log_distance")
DIRECTIONS = ("downlink", "uplink")
DUPLEX_MODES = ("separate", "shared")
RATE_MODELS = ("shannon", "ieee80211p", "nr")

SPEED_OF_LIGHT = 299_792_458.0
_C_3GPP = 3.0e8

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

    path_loss_model: str = "tr37885_urban_los"
    carrier_ghz: float = 5.9
    tx_power_dbm_downlink: float = 23.0
    tx_power_dbm_uplink: float = 23.0
    antenna_gain_db: float = 0.0
    rsu_height_m: float = 5.0
    vehicle_height_m: float = 1.5
    noise_figure_db: float = 9.0
    noise_density_dbm_hz: float = -174.0
    bandwidth_hz: float = IEEE80211P_BANDWIDTH_HZ
    duplex: str = "separate"
    rate_model: str = "ieee80211p"
    rate_cap_bps: float | None = None
    spectral_efficiency_cap: float | None = SHANNON_SPECTRAL_EFFICIENCY_CAP
    msdu_bytes: int = 1500
    transport: str = "tcp"
    path_loss_exponent: float = 2.7
    log_distance_ref_m: float = 1.0
    shadowing_sigma_db: float = 0.0
    shadowing_decorrelation_m: float = 10.0
    update_interval: float = 1.0
    min_distance_m: float = 1.0
    outage_timeout_s: float = 3.0

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the first bad field."""
        if self.path_loss_model not in PATH_LOSS_MODELS:
            raise ValueError(f"channel.path_loss_model must be one of {PATH_LOSS_MODELS}, got {self.path_loss_model!r}")
        if self.duplex not in DUPLEX_MODES:
            raise ValueError(f"channel.duplex must be one of {DUPLEX_MODES}, got {self.duplex!r}")
        if self.rate_model not in RATE_MODELS:
            raise ValueError(f"channel.rate_model must be one of {RATE_MODELS}, got {self.rate_model!r}")
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
            "shadowing_decorrelation_m",
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
        if not is_number(self.shadowing_sigma_db) or self.shadowing_sigma_db < 0:
            raise ValueError(
                f"channel.shadowing_sigma_db must be a non-negative number, got {self.shadowing_sigma_db!r}"
            )
        if self.path_loss_model == "tr38901_umi_los":
            for name in ("rsu_height_m", "vehicle_height_m"):
                if getattr(self, name) <= 1.0:
                    raise ValueError(
                        f"channel.{name} must exceed 1 m for tr38901_umi_los "
                        f"(effective height h - 1 m), got {getattr(self, name)!r}"
                    )
        if self.rate_model == "ieee80211p" and self.bandwidth_hz != IEEE80211P_BANDWIDTH_HZ:
            raise ValueError(
                f"channel.bandwidth_hz must be {IEEE80211P_BANDWIDTH_HZ:.0f} for rate_model ieee80211p "
                f"(the 10 MHz OFDM PHY), got {self.bandwidth_hz!r}"
            )

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (run manifests)."""
        return asdict(self)


def check_direction(direction: str) -> None:
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")


def _fspl_db(d3d: float, carrier_ghz: float) -> float:
    return 20.0 * math.log10(4.0 * math.pi * d3d * carrier_ghz * 1e9 / SPEED_OF_LIGHT)


def path_loss_db(distance_m: float, cfg: ChannelConfig) -> float:
    """Path loss (dB) at ground distance ``distance_m`` from the RSU, for ``cfg.path_loss_model``.

    The ground distance is clamped to ``cfg.min_distance_m`` and turned into a 3-D distance with
    the antenna heights, since the 3GPP formulas are written in terms of the 3-D distance.
    """
    d2d = max(float(distance_m), cfg.min_distance_m)
    dh = cfg.rsu_height_m - cfg.vehicle_height_m
    d3d = math.hypot(d2d, dh)
    fc = cfg.carrier_ghz
    model = cfg.path_loss_model
    if model == "tr37885_urban_los":
        return 38.77 + 16.7 * math.log10(d3d) + 18.2 * math.log10(fc)
    if model == "tr37885_highway_los":
        return 32.4 + 20.0 * math.log10(d3d) + 20.0 * math.log10(fc)
    if model == "tr38901_umi_los":
        d_bp = 4.0 * (cfg.rsu_height_m - 1.0) * (cfg.vehicle_height_m - 1.0) * fc * 1e9 / _C_3GPP
        if d2d <= d_bp:
            return 32.4 + 21.0 * math.log10(d3d) + 20.0 * math.log10(fc)
        return 32.4 + 40.0 * math.log10(d3d) + 20.0 * math.log10(fc) - 9.5 * math.log10(d_bp**2 + dh**2)
    if model == "free_space":
        return _fspl_db(d3d, fc)
    d0 = cfg.log_distance_ref_m
    if d3d <= d0:
        return _fspl_db(d3d, fc)
    return _fspl_db(d0, fc) + 10.0 * cfg.path_loss_exponent * math.log10(d3d / d0)


def noise_dbm(cfg: ChannelConfig) -> float:
    """Noise power (dBm) over the whole channel: thermal density + bandwidth + noise figure."""
    return cfg.noise_density_dbm_hz + 10.0 * math.log10(cfg.bandwidth_hz) + cfg.noise_figure_db


def snr_db(distance_m: float, direction: str, cfg: ChannelConfig, shadowing_db: float = 0.0) -> float:
    """SNR (dB) over the full channel at ground distance ``distance_m``; ``shadowing_db`` adds loss."""
    check_direction(direction)
    p_tx = cfg.tx_power_dbm_downlink if direction == "downlink" else cfg.tx_power_dbm_uplink
    return p_tx + cfg.antenna_gain_db - path_loss_db(distance_m, cfg) - shadowing_db - noise_dbm(cfg)


def rate_bps(
    distance_m: float, share_hz: float, direction: str, cfg: ChannelConfig, shadowing_db: float = 0.0
) -> float:
    """Rate (bit/s) of a transfer holding ``share_hz`` of the channel under ``cfg.rate_model``, capped."""
    if not is_number(share_hz) or share_hz < 0:
        raise ValueError(f"share_hz must be a non-negative number, got {share_hz!r}")
    snr = snr_db(distance_m, direction, cfg, shadowing_db)
    if cfg.rate_model == "ieee80211p":
        phy = ieee80211p_rate(snr)
        if phy == 0.0 or share_hz == 0:
            return 0.0
        alone = cfg.duplex == "separate" and direction == "downlink"
        stations = 1 if alone else max(1, round(cfg.bandwidth_hz / share_hz))
        msdu = int(cfg.msdu_bytes)
        rate = share_hz / cfg.bandwidth_hz * phy * mac_efficiency(msdu, phy, stations)
        if cfg.transport == "tcp":
            rate *= tcp_data_share(msdu, phy, stations)
    elif cfg.rate_model == "nr":
        rate = share_hz * nr_spectral_efficiency(snr, direction, cfg.carrier_ghz)
    else:
        se = math.log2(1.0 + 10.0 ** (snr / 10.0))
        if cfg.spectral_efficiency_cap is not None:
            se = min(se, cfg.spectral_efficiency_cap)
        rate = share_hz * se
    rate *= payload_fraction(int(cfg.msdu_bytes), cfg.transport)
    if cfg.rate_cap_bps is not None:
        rate = min(rate, cfg.rate_cap_bps)
    return rate
