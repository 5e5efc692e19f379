"""Rate tables beside Shannon: IEEE 802.11p (OFDM PHY at 10 MHz, with its MAC) and 5G NR (CQI table).

Pure functions of the SNR; :func:`vmc_sim.radio.link_budget.rate_bps` picks one by ``ChannelConfig.rate_model``.

**802.11p** (IEEE Std 802.11-2016, clause 17, the OFDM PHY at 10 MHz channel spacing, as used by
802.11p / ITS-G5). The eight data rates 3 ... 27 Mb/s and their data bits per OFDM symbol are those
of Table 17-4. Each rate's SNR threshold is its *receiver minimum input sensitivity* for 10 MHz
(Table 17-18, 10 % PER) referred to the thermal noise of a 10 MHz channel seen through a 10 dB
noise figure, ``-174 + 10 log10(10e6) + 10 = -94 dBm``. The normative table was chosen over a
published simulation table because it is what every compliant receiver guarantees (so it is
conservative and reproducible), and because both the sensitivity and the noise shift by 3 dB per
halving of the spacing, so the SNR thresholds do not depend on the spacing. The resulting 9 dB for
BPSK 1/2 is about 5 dB above its AWGN requirement: the table carries an implementation margin.
The link's SNR (radio.py) already includes the configured noise figure, so it is compared directly.

The MAC turns the PHY rate into goodput (:func:`mac_efficiency`): one MSDU per channel access with
an AIFS (``AIFSN = 2``: the DIFS), a random backoff, the PPDU, a SIFS and an ACK, with the timing of
Table 17-21 at 10 MHz (slot 13 us, SIFS 32 us, preamble 32 us + SIGNAL 8 us, OFDM symbol 8 us,
CWmin 15, CWmax 1023). Contention among ``stations`` saturated stations follows Bianchi's model
(G. Bianchi, "Performance analysis of the IEEE 802.11 distributed coordination function", IEEE
JSAC 18(3), 2000), which for one station reduces to a mean backoff of CWmin/2 slots.

**NR** (3GPP TS 38.214 Table 5.2.2.1-2, the 4-bit CQI table up to 64QAM, identical to LTE's TS
36.213 Table 7.2.3-1). The CQI is the highest whose SNR threshold is met; the thresholds are the
SISO AWGN SNRs for 10 % BLER of Kawser et al., "Downlink SNR to CQI mapping for different multiple
antenna techniques in LTE", IJIEE 2(5), 2012, a mapping common in system-level simulators. It is an
approximation: real CQI reporting depends on the receiver, the channel and the HARQ target. The
rate is the CQI's spectral efficiency times the bandwidth times ``1 - OH``, with OH the overhead of
the approximate peak-rate formula of TS 38.306 clause 4.1.2 (FR1: 0.14 downlink, 0.08 uplink;
FR2: 0.18 and 0.10), for the control channels and reference signals.

**Transport.** A transfer's bytes are the application's (a model, its Fisher); each MSDU is an IP
packet that also carries the transport's headers, so every rate model delivers payload at
``(msdu - headers) / msdu`` of its MSDU rate: IPv4 20 B + TCP 20 B + the 12 B timestamp option
(RFC 7323, on by default in Linux) for ``tcp``, IPv4 20 B + UDP 8 B for ``udp``, nothing for
``none`` (the MSDU counted as payload). Over ``tcp`` the receiver returns one pure ACK (a 52-byte
IP packet) per two full segments (delayed ACK, RFC 1122 4.2.3.2 / RFC 5681 4.2). On an 802.11p
channel that ACK is a frame of its own on the same channel, with its AIFS, backoff and MAC ACK:
:func:`tcp_data_share` gives the share of channel time left to data. On NR the ACKs travel in
the opposite direction's resources, so only the headers are charged there (and for ``shannon``).
"""

from __future__ import annotations

import functools
import math

# ---------------------------------------------------------------- Shannon

#: Spectral-efficiency cap (bit/s/Hz) for the ``shannon`` model: CQI 15 of TS 38.214 Table
#: 5.2.2.1-2 (64QAM, code rate 948/1024), the peak of the ``nr`` table below, so a capped Shannon
#: link and an NR link top out at the same modulation and coding before overhead.
SHANNON_SPECTRAL_EFFICIENCY_CAP = 5.5547

# ---------------------------------------------------------------- IEEE 802.11p, 10 MHz

#: Channel spacing (Hz) of the 802.11p OFDM PHY this model describes.
IEEE80211P_BANDWIDTH_HZ = 10e6
#: Noise figure (dB) with which the minimum sensitivities are referred to an SNR.
IEEE80211P_REFERENCE_NF_DB = 10.0

#: (data rate bit/s, modulation and coding, minimum sensitivity dBm at 10 MHz): IEEE 802.11-2016
#: Table 17-4 (rates) and Table 17-18 (minimum sensitivity, 10 MHz column, PER < 10 %).
IEEE80211P_MCS: tuple[tuple[float, str, float], ...] = (
    (3.0e6, "BPSK 1/2", -85.0),
    (4.5e6, "BPSK 3/4", -84.0),
    (6.0e6, "QPSK 1/2", -82.0),
    (9.0e6, "QPSK 3/4", -80.0),
    (12.0e6, "16-QAM 1/2", -77.0),
    (18.0e6, "16-QAM 3/4", -73.0),
    (24.0e6, "64-QAM 2/3", -69.0),
    (27.0e6, "64-QAM 3/4", -68.0),
)
_REFERENCE_NOISE_DBM = -174.0 + 10.0 * math.log10(IEEE80211P_BANDWIDTH_HZ) + IEEE80211P_REFERENCE_NF_DB
#: (data rate bit/s, minimum SNR dB): the sensitivities above minus the -94 dBm reference noise.
IEEE80211P_SNR_THRESHOLDS: tuple[tuple[float, float], ...] = tuple(
    (rate, sens - _REFERENCE_NOISE_DBM) for rate, _, sens in IEEE80211P_MCS
)
#: Mandatory rates at 10 MHz (clause 17): an ACK goes at the highest one not above the data rate.
IEEE80211P_MANDATORY_RATES = (3.0e6, 6.0e6, 12.0e6)

# Timing at 10 MHz spacing, IEEE 802.11-2016 Table 17-21 (seconds).
SLOT_S = 13e-6
SIFS_S = 32e-6
PREAMBLE_S = 32e-6  # PLCP preamble (short + long training)
SIGNAL_S = 8e-6  # SIGNAL field, one OFDM symbol
SYMBOL_S = 8e-6
CW_MIN = 15
CW_MAX = 1023
SERVICE_BITS = 16  # PPDU SERVICE field (17.3.5.2)
TAIL_BITS = 6  # convolutional-code tail (17.3.5.3)
#: QoS data MAC header (26 B, used in OCB mode with EDCA) + FCS (4 B), IEEE 802.11-2016 9.3.2.1.
MAC_OVERHEAD_BYTES = 30
ACK_BYTES = 14  # ACK frame: frame control, duration, RA, FCS (9.3.1.4)
MAX_MSDU_BYTES = 2304


def ieee80211p_rate(snr_db: float) -> float:
    """PHY data rate (bit/s) of the fastest 802.11p MCS whose SNR threshold ``snr_db`` meets; 0 below all."""
    best = 0.0
    for rate, threshold in IEEE80211P_SNR_THRESHOLDS:
        if snr_db >= threshold:
            best = rate
    return best


def ppdu_time_s(psdu_bytes: int, rate_bps: float) -> float:
    """Airtime of one PPDU: preamble, SIGNAL and whole OFDM symbols (TXTIME of IEEE 802.11-2016 17.4.3)."""
    bits_per_symbol = rate_bps * SYMBOL_S
    data_bits = SERVICE_BITS + 8 * psdu_bytes + TAIL_BITS
    return PREAMBLE_S + SIGNAL_S + SYMBOL_S * math.ceil(data_bits / bits_per_symbol - 1e-9)


@functools.lru_cache(maxsize=4096)  # pure, and asked again at every rate update
def _bianchi_tau(stations: int) -> float:
    """Per-slot transmission probability of a saturated station (Bianchi 2000, eqs. 7 and 9).

    ``tau = 2 / (W + 1 + p W sum_{k<m} (2p)^k)`` with ``W = CWmin + 1``, ``m`` backoff stages
    (``2^m W = CWmax + 1``) and collision probability ``p = 1 - (1 - tau)^(n-1)``, solved by
    bisection on ``p`` (60 halvings: deterministic and exact to float precision).
    """
    w = CW_MIN + 1
    m = round(math.log2((CW_MAX + 1) / w))

    def tau(p: float) -> float:
        return 2.0 / (w + 1 + p * w * sum((2.0 * p) ** k for k in range(m)))

    if stations == 1:
        return tau(0.0)
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if mid - (1.0 - (1.0 - tau(mid)) ** (stations - 1)) < 0:
            lo = mid
        else:
            hi = mid
    return tau(0.5 * (lo + hi))


@functools.lru_cache(maxsize=4096)  # pure, and asked again at every rate update
def mac_efficiency(payload_bytes: int, rate_bps: float, stations: int = 1, *, aifsn: int = 2) -> float:
    """Fraction of the PHY rate ``rate_bps`` that carries MSDU payload (goodput / PHY rate).

    Bianchi's saturation throughput for basic access, with ``stations`` stations all sending
    ``payload_bytes`` MSDUs at ``rate_bps``::

        S = Ps Ptr L / ((1 - Ptr) slot + Ptr Ps Ts + Ptr (1 - Ps) Tc)
        Ts = AIFS + T(data) + SIFS + T(ACK),   Tc = AIFS + T(data),   AIFS = SIFS + aifsn slot

    with ``Ptr = 1 - (1 - tau)^n`` and ``Ps = n tau (1 - tau)^(n-1) / Ptr``. For one station this is
    ``L / (AIFS + CWmin/2 slot + T(data) + SIFS + T(ACK))``. ``aifsn = 2`` gives the DIFS; EDCA's
    best-effort class in OCB mode uses 6. Propagation delay, retry limits and EIFS are neglected.
    """
    if isinstance(payload_bytes, bool) or not isinstance(payload_bytes, int) or not payload_bytes > 0:
        raise ValueError(f"payload_bytes must be a positive integer, got {payload_bytes!r}")
    if not rate_bps > 0:
        raise ValueError(f"rate_bps must be positive, got {rate_bps!r}")
    if isinstance(stations, bool) or not isinstance(stations, int) or stations < 1:
        raise ValueError(f"stations must be a positive integer, got {stations!r}")
    ack_rate = max((r for r in IEEE80211P_MANDATORY_RATES if r <= rate_bps), default=IEEE80211P_MANDATORY_RATES[0])
    aifs = SIFS_S + aifsn * SLOT_S
    t_data = ppdu_time_s(payload_bytes + MAC_OVERHEAD_BYTES, rate_bps)
    t_success = aifs + t_data + SIFS_S + ppdu_time_s(ACK_BYTES, ack_rate)
    t_collision = aifs + t_data
    tau = _bianchi_tau(stations)
    p_tr = 1.0 - (1.0 - tau) ** stations
    p_s = stations * tau * (1.0 - tau) ** (stations - 1) / p_tr
    mean_slot = (1.0 - p_tr) * SLOT_S + p_tr * p_s * t_success + p_tr * (1.0 - p_s) * t_collision
    goodput = p_s * p_tr * 8.0 * payload_bytes / mean_slot
    return goodput / rate_bps


# ---------------------------------------------------------------- transport

#: Transport protocols a transfer can run over.
TRANSPORTS = ("tcp", "udp", "none")
#: IP and transport header bytes per packet: IPv4 20 + TCP 20 + timestamps 12, IPv4 20 + UDP 8.
TRANSPORT_HEADER_BYTES = {"tcp": 52, "udp": 28, "none": 0}
#: A pure TCP ACK: IPv4 20 + TCP 20 + timestamps 12, no payload.
TCP_ACK_PACKET_BYTES = 52
#: Full-sized segments per delayed ACK (RFC 1122 4.2.3.2, RFC 5681 4.2).
TCP_SEGMENTS_PER_ACK = 2


def payload_fraction(msdu_bytes: int, transport: str) -> float:
    """Share of each ``msdu_bytes`` IP packet that is application payload over ``transport``."""
    if transport not in TRANSPORTS:
        raise ValueError(f"transport must be one of {TRANSPORTS}, got {transport!r}")
    header = TRANSPORT_HEADER_BYTES[transport]
    if msdu_bytes <= header:
        raise ValueError(f"msdu_bytes must exceed the {header} header bytes of {transport}, got {msdu_bytes!r}")
    return (msdu_bytes - header) / msdu_bytes


@functools.lru_cache(maxsize=4096)  # pure, and asked again at every rate update
def tcp_data_share(msdu_bytes: int, rate_bps: float, stations: int = 1, *, aifsn: int = 2) -> float:
    """Share of 802.11p channel time that carries data frames when TCP ACKs come back on the channel.

    Per ``TCP_SEGMENTS_PER_ACK`` data frames the receiver sends one ACK frame, each frame costing its
    mean channel time at the contention of ``stations`` senders (:func:`mac_efficiency`)::

        share = T(msdu) / (T(msdu) + T(ack) / TCP_SEGMENTS_PER_ACK),   T(L) = 8 L / (rate mac_efficiency(L))

    For one sender at 27 Mb/s this is 0.822: the ACK's AIFS, backoff and MAC ACK cost almost as
    much as its 72 us of data, so the ACK stream takes 18 % of the channel.
    """

    def channel_time(size: int) -> float:
        return 8.0 * size / (rate_bps * mac_efficiency(size, rate_bps, stations, aifsn=aifsn))

    data = channel_time(msdu_bytes)
    return data / (data + channel_time(TCP_ACK_PACKET_BYTES) / TCP_SEGMENTS_PER_ACK)


# ---------------------------------------------------------------- 5G NR

#: (CQI, modulation, code rate x 1024, spectral efficiency bit/s/Hz): 3GPP TS 38.214 Table 5.2.2.1-2.
NR_CQI_TABLE: tuple[tuple[int, str, int, float], ...] = (
    (1, "QPSK", 78, 0.1523),
    (2, "QPSK", 120, 0.2344),
    (3, "QPSK", 193, 0.3770),
    (4, "QPSK", 308, 0.6016),
    (5, "QPSK", 449, 0.8770),
    (6, "QPSK", 602, 1.1758),
    (7, "16QAM", 378, 1.4766),
    (8, "16QAM", 490, 1.9141),
    (9, "16QAM", 616, 2.4063),
    (10, "64QAM", 466, 2.7305),
    (11, "64QAM", 567, 3.3223),
    (12, "64QAM", 666, 3.9023),
    (13, "64QAM", 772, 4.5234),
    (14, "64QAM", 873, 5.1152),
    (15, "64QAM", 948, 5.5547),
)
#: Lowest SNR (dB) of CQI 1 ... 15 for 10 % BLER, SISO AWGN (Kawser et al. 2012, see above).
NR_CQI_SNR_DB: tuple[float, ...] = (-6.7, -4.7, -2.3, 0.2, 2.4, 4.3, 5.9, 8.1, 10.3, 11.7, 14.1, 16.3, 18.7, 21.0, 22.7)
#: Overhead OH of TS 38.306 clause 4.1.2, by (frequency range, direction).
NR_OVERHEAD = {("FR1", "downlink"): 0.14, ("FR1", "uplink"): 0.08, ("FR2", "downlink"): 0.18, ("FR2", "uplink"): 0.10}
#: Upper edge of FR1 (GHz), TS 38.104 Table 5.1-1; carriers above it take FR2's overhead.
FR1_MAX_GHZ = 7.125


def nr_cqi(snr_db: float) -> int:
    """CQI (0 = out of range) whose 10 %-BLER SNR threshold ``snr_db`` meets."""
    cqi = 0
    for index, threshold in enumerate(NR_CQI_SNR_DB, start=1):
        if snr_db >= threshold:
            cqi = index
    return cqi


def nr_overhead(direction: str, carrier_ghz: float) -> float:
    """TS 38.306 overhead fraction for ``direction`` at ``carrier_ghz``."""
    return NR_OVERHEAD[("FR1" if carrier_ghz <= FR1_MAX_GHZ else "FR2", direction)]


def nr_spectral_efficiency(snr_db: float, direction: str, carrier_ghz: float) -> float:
    """Net spectral efficiency (bit/s/Hz): the CQI's efficiency times ``1 - OH``; 0 out of range."""
    cqi = nr_cqi(snr_db)
    if cqi == 0:
        return 0.0
    return NR_CQI_TABLE[cqi - 1][3] * (1.0 - nr_overhead(direction, carrier_ghz))
