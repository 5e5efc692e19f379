"""Rate models beside Shannon: 802.11p MCS + MAC efficiency, NR CQI table, capped Shannon, defaults."""

from __future__ import annotations

import itertools
import math
import re

import numpy as np
import pytest

from vmc_sim.radio.link_budget import ChannelConfig, rate_bps, snr_db
from vmc_sim.radio.rate_models import RATES
from vmc_sim.radio.rates import (
    IEEE80211P_MCS,
    IEEE80211P_SNR_THRESHOLDS,
    NR_CQI_SNR_DB,
    NR_CQI_TABLE,
    SHANNON_SPECTRAL_EFFICIENCY_CAP,
    mac_efficiency,
    nr_cqi,
    payload_fraction,
    tcp_data_share,
)

P80211 = dict(rate_model="ieee80211p", bandwidth_hz=10e6, transport="none")
SHANNON = dict(rate_model="shannon", transport="none")
NR = dict(rate_model="nr", transport="none")
DISTANCES = np.geomspace(1.0, 3000.0, 300)


def with_snr(target_db: float, direction: str, **kw) -> ChannelConfig:
    """A config whose link at 50 m has SNR ``target_db`` (the transmit power is solved for)."""
    base = ChannelConfig(tx_power_dbm_downlink=0.0, tx_power_dbm_uplink=0.0, **kw)
    p = target_db - snr_db(50.0, direction, base)
    return ChannelConfig(tx_power_dbm_downlink=p, tx_power_dbm_uplink=p, **kw)


# ---------------------------------------------------------------- 802.11p


@pytest.mark.parametrize("direction", ["downlink", "uplink"])
def test_80211p_rate_falls_with_distance_and_takes_only_mcs_goodputs(direction):
    cfg = ChannelConfig(**P80211, rate_cap_bps=None)
    allowed = {0.0} | {r * mac_efficiency(1500, r, 1) for r, _, _ in IEEE80211P_MCS}
    rates = [rate_bps(d, cfg.bandwidth_hz, direction, cfg) for d in DISTANCES]
    assert all(b <= a for a, b in itertools.pairwise(rates))
    assert set(rates) <= allowed and len(set(rates)) >= 4 and rates[-1] == 0.0
    assert rates[0] == max(allowed)


def test_80211p_thresholds_are_the_sensitivities_over_the_10mhz_noise_floor():
    noise = -174 + 10 * math.log10(10e6) + 10  # 10 dB noise figure: -94 dBm
    assert [t for _, t in IEEE80211P_SNR_THRESHOLDS] == [s - noise for _, _, s in IEEE80211P_MCS]
    assert [t for _, t in IEEE80211P_SNR_THRESHOLDS] == [9, 10, 12, 14, 17, 21, 25, 26]
    assert [r / 1e6 for r, _, _ in IEEE80211P_MCS] == [3, 4.5, 6, 9, 12, 18, 24, 27]


def test_80211p_top_mcs_goodput_from_the_standard_timing():
    """One station, 1500-byte MSDUs at 27 Mb/s, timing of IEEE 802.11-2016 Table 17-21 (10 MHz).

    DIFS = SIFS + 2 slots = 32 + 26 = 58 us; mean backoff CWmin/2 = 7.5 slots = 97.5 us; the data
    PPDU carries 16 + 8 (1500 + 26 + 4) + 6 = 12262 bits in 216-bit symbols: 57 x 8 us + 40 us of
    preamble and SIGNAL = 496 us; SIFS 32 us; the ACK (14 B at 12 Mb/s, 96-bit symbols) takes
    2 x 8 + 40 = 56 us. One MSDU per 739.5 us is 16.23 Mb/s, 60 % of the PHY rate. The range it
    must fall in: above 15 Mb/s, the goodput with EDCA's best-effort AIFS (4 slots more: 15.16 Mb/s),
    and below 17 Mb/s, which would need the access (DIFS + backoff + SIFS + ACK, 243.5 us) to shrink.
    """
    cycle = 58e-6 + 97.5e-6 + 496e-6 + 32e-6 + 56e-6
    hand = 1500 * 8 / cycle
    cfg = ChannelConfig(**P80211)
    assert rate_bps(10.0, 10e6, "uplink", cfg) == pytest.approx(hand, rel=1e-12)
    assert 27e6 * mac_efficiency(1500, 27e6, 1) == pytest.approx(hand, rel=1e-12)
    assert 1500 * 8 / (cycle + 4 * 13e-6) > 15e6 and 16e6 < hand < 17e6
    assert 27e6 * mac_efficiency(1500, 27e6, 1, aifsn=6) == pytest.approx(1500 * 8 / (cycle + 52e-6), rel=1e-12)


def test_80211p_contention_and_sharing():
    cfg = ChannelConfig(**P80211, duplex="shared")
    alone = rate_bps(20.0, 10e6, "uplink", cfg)
    three = rate_bps(20.0, 10e6 / 3, "uplink", cfg)
    assert three == pytest.approx(27e6 * mac_efficiency(1500, 27e6, 3) / 3, rel=1e-12)
    separate = ChannelConfig(**P80211)
    assert rate_bps(20.0, 10e6 / 3, "downlink", separate) == pytest.approx(alone / 3, rel=1e-12)
    effs = [mac_efficiency(1500, 27e6, n) for n in (1, 5, 10, 30)]
    assert all(b < a for a, b in itertools.pairwise(effs)) and effs[-1] > 0.3
    small = mac_efficiency(200, 27e6, 1)
    assert small < effs[0] and mac_efficiency(1500, 3e6, 1) > effs[0]
    assert rate_bps(20.0, 0.0, "uplink", cfg) == 0.0


def test_80211p_needs_10mhz_and_a_valid_msdu():
    with pytest.raises(ValueError, match="channel.bandwidth_hz must be 10000000 for rate_model ieee80211p"):
        ChannelConfig(rate_model="ieee80211p", bandwidth_hz=20e6)
    for bad in (0, 2305, 1500.0, True):
        with pytest.raises(ValueError, match="channel.msdu_bytes"):
            ChannelConfig(**P80211, msdu_bytes=bad)
    with pytest.raises(ValueError, match="stations"):
        mac_efficiency(1500, 27e6, 0)


# ---------------------------------------------------------------- NR


@pytest.mark.parametrize(("direction", "overhead"), [("downlink", 0.14), ("uplink", 0.08)])
def test_nr_rate_is_cqi_efficiency_times_bandwidth_times_overhead(direction, overhead):
    edges = [*NR_CQI_SNR_DB, 40.0]
    for (cqi, _, code_rate, eff), lo, hi in zip(NR_CQI_TABLE, edges, edges[1:], strict=False):
        snr = 0.5 * (lo + hi)
        cfg = with_snr(snr, direction, **NR, rate_cap_bps=None)
        assert snr_db(50.0, direction, cfg) == pytest.approx(snr) and nr_cqi(snr) == cqi
        assert rate_bps(50.0, 20e6, direction, cfg) == pytest.approx(eff * 20e6 * (1 - overhead), rel=1e-12)
        assert rate_bps(50.0, 5e6, direction, cfg) == pytest.approx(eff * 5e6 * (1 - overhead), rel=1e-12)
        qm = {"QPSK": 2, "16QAM": 4, "64QAM": 6}[NR_CQI_TABLE[cqi - 1][1]]
        assert eff == pytest.approx(qm * code_rate / 1024, abs=5e-5)
    below = with_snr(NR_CQI_SNR_DB[0] - 0.1, direction, **NR)
    assert rate_bps(50.0, 20e6, direction, below) == 0.0


def test_nr_rate_falls_with_distance_and_fr2_takes_its_overhead():
    cfg = ChannelConfig(**NR, rate_cap_bps=None)
    rates = [rate_bps(d, 20e6, "downlink", cfg) for d in DISTANCES]
    assert all(b <= a for a, b in itertools.pairwise(rates)) and rates[0] == pytest.approx(5.5547 * 20e6 * 0.86)
    mmw = ChannelConfig(**NR, rate_cap_bps=None, carrier_ghz=28.0)
    assert rate_bps(5.0, 20e6, "downlink", mmw) == pytest.approx(5.5547 * 20e6 * 0.82)


# ---------------------------------------------------------------- Shannon


def test_capped_shannon_saturates_at_the_cap():
    cfg = ChannelConfig(**SHANNON, rate_cap_bps=None)
    assert cfg.spectral_efficiency_cap == SHANNON_SPECTRAL_EFFICIENCY_CAP  # Shannon is capped unless told otherwise
    plain = ChannelConfig(**SHANNON, rate_cap_bps=None, spectral_efficiency_cap=None, tx_power_dbm_downlink=-20.0)
    capped_far = ChannelConfig(**SHANNON, rate_cap_bps=None, tx_power_dbm_downlink=-20.0)
    rates = [rate_bps(d, 20e6, "downlink", cfg) for d in DISTANCES]
    assert max(rates) == SHANNON_SPECTRAL_EFFICIENCY_CAP * 20e6 and rates[0] == max(rates)
    assert all(b <= a for a, b in itertools.pairwise(rates))
    low = [d for d in DISTANCES if rate_bps(d, 20e6, "downlink", plain) < SHANNON_SPECTRAL_EFFICIENCY_CAP * 20e6]
    assert low and all(rate_bps(d, 20e6, "downlink", capped_far) == rate_bps(d, 20e6, "downlink", plain) for d in low)
    assert NR_CQI_TABLE[-1][3] == SHANNON_SPECTRAL_EFFICIENCY_CAP


def test_default_channel_is_80211p_over_tcp():
    """The default RSU link: 802.11p at 10 MHz, TCP's headers and ACK airtime, no flat cap.

    At 50 m the SNR is far above the 27 Mb/s threshold: one MSDU per 739.5 us of channel time
    (16.23 Mb/s), of which TCP's returning ACKs leave 0.822 and its 52 header bytes 1448/1500:
    12.91 Mb/s of payload (ns-3's TCP in the drive-by: 13.37). Far out the rate falls by MCS.
    """
    cfg = ChannelConfig()
    assert (cfg.rate_model, cfg.bandwidth_hz, cfg.rate_cap_bps, cfg.transport) == ("ieee80211p", 10e6, None, "tcp")
    near = rate_bps(50.0, cfg.bandwidth_hz, "uplink", cfg)
    assert near == pytest.approx(12.911e6, rel=1e-3)
    msdus = rate_bps(50.0, 10e6, "uplink", ChannelConfig(**P80211))
    assert near == pytest.approx(msdus * tcp_data_share(1500, 27e6, 1) * payload_fraction(1500, "tcp"), rel=1e-12)
    rates = [rate_bps(d, cfg.bandwidth_hz, "uplink", cfg) for d in (10.0, 50.0, 100.0, 200.0, 500.0)]
    assert rates[0] == near and all(b <= a for a, b in itertools.pairwise(rates)) and 0 < rates[-1] < near


def test_unknown_rate_model_is_refused_naming_the_allowed_values():
    assert set(RATES.names()) == {"shannon", "ieee80211p", "nr"}
    with pytest.raises(
        ValueError,
        match=re.escape("channel.rate_model: unknown rate model 'lte'; known rate models: ieee80211p, nr, shannon"),
    ):
        ChannelConfig(rate_model="lte")
