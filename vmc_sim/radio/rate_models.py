"""Rate models by name (:data:`RATES`): the rate of one transfer from its SNR and its share of the
channel (processor sharing: ``share = B / n`` with ``n`` transfers active on it).

* ``ieee80211p`` (default): ``(share / B) * R(SNR) * mac_efficiency(msdu_bytes, R(SNR), stations)``,
  with ``R`` the fastest 802.11p data rate whose SNR threshold is met (10 MHz channels only). The
  contending ``stations`` are the ``n`` transfers on the channel, except on a downlink channel of
  its own (``duplex: separate``), where the RSU is the only sender. Over ``transport: tcp`` it is
  multiplied by :func:`vmc_sim.radio.rates.tcp_data_share`, the channel time the returning TCP ACKs
  leave.
* ``shannon``: ``share * min(log2(1 + SNR), spectral_efficiency_cap)``; the cap defaults to
  :data:`vmc_sim.radio.rates.SHANNON_SPECTRAL_EFFICIENCY_CAP` (``null`` lifts it).
* ``nr``: ``share * SE(CQI(SNR)) * (1 - OH)``, the 5G NR CQI table with TS 38.306's overhead.

A link below the lowest MCS or CQI gets 0 (an outage). The link budget then applies the payload
share of the transport's headers and ``rate_cap_bps``. A model of your own is a :class:`RateModel`
added with ``RATES.add(name, model)`` (in a module the scenario names under ``plugins``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fl_core.registry import Registry

from .rates import IEEE80211P_BANDWIDTH_HZ, ieee80211p_rate, mac_efficiency, nr_spectral_efficiency, tcp_data_share


def _no_check(cfg: Any) -> None:
    return None


@dataclass(frozen=True)
class RateModel:
    """One rate model: ``rate(snr_db, share_hz, direction, cfg)`` in bit/s (before the transport's
    headers and the cap), and ``check(cfg)``, which raises ValueError naming a field it cannot take."""

    rate: Callable[[float, float, str, Any], float]
    check: Callable[[Any], None] = _no_check


def _ieee80211p(snr: float, share_hz: float, direction: str, cfg: Any) -> float:
    phy = ieee80211p_rate(snr)
    if phy == 0.0 or share_hz == 0:
        return 0.0
    alone = cfg.duplex == "separate" and direction == "downlink"
    stations = 1 if alone else max(1, round(cfg.bandwidth_hz / share_hz))
    msdu = int(cfg.msdu_bytes)
    rate = share_hz / cfg.bandwidth_hz * phy * mac_efficiency(msdu, phy, stations)
    if cfg.transport == "tcp":
        rate *= tcp_data_share(msdu, phy, stations)
    return rate


def _ieee80211p_band(cfg: Any) -> None:
    if cfg.bandwidth_hz != IEEE80211P_BANDWIDTH_HZ:
        raise ValueError(
            f"channel.bandwidth_hz must be {IEEE80211P_BANDWIDTH_HZ:.0f} for rate_model ieee80211p "
            f"(the 10 MHz OFDM PHY), got {cfg.bandwidth_hz!r}"
        )


def _shannon(snr: float, share_hz: float, direction: str, cfg: Any) -> float:
    se = math.log2(1.0 + 10.0 ** (snr / 10.0))
    if cfg.spectral_efficiency_cap is not None:
        se = min(se, cfg.spectral_efficiency_cap)
    return share_hz * se


RATES: Registry[RateModel] = Registry(
    "rate model",
    {
        "shannon": RateModel(_shannon),
        "ieee80211p": RateModel(_ieee80211p, _ieee80211p_band),
        "nr": RateModel(
            lambda snr, share, direction, cfg: share * nr_spectral_efficiency(snr, direction, cfg.carrier_ghz)
        ),
    },
)
