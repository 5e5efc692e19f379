"""Check our 802.11p rate model (``rate_model = "ieee80211p"``) against ns-3's wifi module at 10 MHz.

Two modes, each writing a CSV and printing a table:

``link``: one vehicle -> RSU saturating UDP flow, goodput against ground distance. ns-3 sends at
the MCS our model picks at that distance (``ConstantRateWifiManager``, so the comparison checks the
MAC/PHY overhead model and whether ns-3's error model holds the link at that MCS); a second ns-3
run with ``IdealWifiManager`` (SNR-based, picks the fastest MCS whose BER meets 1e-6 under ns-3's
AWGN error model) is written beside it to show where ns-3's own thresholds would differ from ours.

``contention``: N vehicles on a circle of 50 m around the RSU (all in range of each other), each a
saturating UDP upload at the top MCS (27 Mb/s constant rate); per-vehicle and total goodput,
against ours with each vehicle holding ``bandwidth / N`` (``rate_bps(50, 10e6 / N, ...)``).

ns-3 (the ``ns3`` wheel, import name ``ns``) setup: ``WIFI_STANDARD_80211p`` (10 MHz, channel 172
at 5.86 GHz; the propagation loss is evaluated at 5.9 GHz as ours), ``YansWifiPhy`` with
TxPower 23 dBm, RxNoiseFigure 9 dB and the default ``TableBasedErrorRateModel``;
``ThreeGppV2vUrbanPropagationLossModel`` with ``AlwaysLosChannelConditionModel`` and shadowing
off; RSU at height 5.0 m, vehicles at 1.5 m. The wheel has no ``wave`` module (no OCB MAC), so
``AdhocWifiMac`` without QoS stands for OCB: no association, no beacons needed, DCF access with
AIFSN 2 (the DIFS), CWmin 15, CWmax 1023, normal ACK, as our model assumes (``aifsn = 2``). UDP
payload 1472 B, i.e. a 1500-byte IP packet = our ``msdu_bytes``; goodput counts UDP payload
received by the RSU's ``PacketSink`` after a warm-up.

    python bench/ns3_wifi_link.py link                       # reports/channel_validation/link.csv
    python bench/ns3_wifi_link.py contention                 # reports/channel_validation/contention.csv
    python bench/ns3_wifi_link.py link --distances 100 --out /tmp/link.csv
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

from ns3_common import (
    BANDWIDTH_HZ,
    OUT_DIR,
    RSU_HEIGHT_M,
    SEED,
    VEHICLE_HEIGHT_M,
    fmt,
    ip_stack,
    markdown,
    our_80211p,
    read_floats,
    udp_onoff,
    wifi_80211p,
    write_csv,
)

from vmc_sim.radio.link_budget import rate_bps, snr_db
from vmc_sim.radio.rates import ieee80211p_rate

DISTANCES_M = (10, 50, 100, 200, 300, 400, 500)
STATIONS = (1, 2, 4, 8, 16)
CONTENTION_DISTANCE_M = 50.0
OFFERED_BPS = 40e6  # above the 27 Mb/s PHY rate: every sender's queue stays full
WARMUP_S = 1.0
MEASURE_S = 3.0
LINK_TOLERANCE = 0.10
CONTENTION_TOLERANCE = 0.15
LINK_FIELDS: tuple[str, ...] = (
    "distance",
    "snr_db",
    "mcs_mbps",
    "ns3_goodput_mbps",
    "ours_mbps",
    "ratio",
    "ns3_ideal_mbps",
)
CONTENTION_FIELDS: tuple[str, ...] = (
    "N",
    "ns3_total_mbps",
    "ns3_per_vehicle_mbps",
    "ns3_min_vehicle_mbps",
    "ns3_max_vehicle_mbps",
    "ours_total_mbps",
    "ours_per_vehicle_mbps",
    "ratio",
)


def ours_mbps(distance_m: float, stations: int = 1) -> float:
    """Our per-vehicle uplink rate (Mb/s) with ``stations`` vehicles sharing the 10 MHz channel."""
    return rate_bps(distance_m, BANDWIDTH_HZ / stations, "uplink", our_80211p()) / 1e6


def our_mcs_bps(distance_m: float) -> float:
    return ieee80211p_rate(snr_db(distance_m, "uplink", our_80211p()))


def udp_upload(
    ns: Any, nodes: Any, sender: int, receiver: int, remote: Any, port: int, start_s: float, keep: list
) -> Any:
    """A saturated UDP upload (``OFFERED_BPS`` in ``UDP_PAYLOAD_BYTES`` packets) from node ``sender``
    to a packet sink on node ``receiver`` listening on ``port`` (``remote``: its socket address as
    the sender reaches it), starting at ``start_s``; the sink."""
    sink = ns.CreateObject[ns.PacketSink]()
    sink.SetAttribute("Protocol", ns.TypeIdValue(ns.UdpSocketFactory.GetTypeId()))
    sink.SetAttribute("Local", ns.AddressValue(ns.InetSocketAddress(ns.Ipv4Address.GetAny(), port).ConvertTo()))
    nodes.Get(receiver).AddApplication(sink)
    sink.SetStartTime(ns.Seconds(0.0))
    app = udp_onoff(ns, ns.AddressValue(remote.ConvertTo()), OFFERED_BPS)
    nodes.Get(sender).AddApplication(app)
    app.SetStartTime(ns.Seconds(start_s))
    keep.append(app)
    return sink


def goodputs_mbps(ns: Any, sinks: list) -> list[float]:
    """Run the simulation through ``WARMUP_S``, then ``MEASURE_S`` more; each sink's goodput over
    the second part (Mb/s). Destroys the simulation."""
    ns.Simulator.Stop(ns.Seconds(WARMUP_S))
    ns.Simulator.Run()
    before = [s.GetTotalRx() for s in sinks]
    ns.Simulator.Stop(ns.Seconds(MEASURE_S))
    ns.Simulator.Run()
    after = [s.GetTotalRx() for s in sinks]
    ns.Simulator.Destroy()
    return [8.0 * (a - b) / MEASURE_S / 1e6 for a, b in zip(after, before, strict=True)]


def simulate(vehicles_xy: list[tuple[float, float]], manager: str, data_rate_bps: float | None = None) -> list[float]:
    """Goodput (Mb/s) of each vehicle's saturating UDP upload to the RSU at the origin (ns-3)."""
    from ns import ns

    ns.RngSeedManager.SetSeed(SEED)
    ns.RngSeedManager.SetRun(1)
    n = len(vehicles_xy)
    nodes = ns.NodeContainer()
    nodes.Create(1 + n)  # node 0: the RSU

    devices, channel, keep = wifi_80211p(ns, nodes, manager, data_rate_bps)

    positions = [(0.0, 0.0, RSU_HEIGHT_M)] + [(x, y, VEHICLE_HEIGHT_M) for x, y in vehicles_xy]
    for i, (x, y, z) in enumerate(positions):
        mobility = ns.CreateObject[ns.ConstantPositionMobilityModel]()
        mobility.SetPosition(ns.Vector(x, y, z))
        nodes.Get(i).AggregateObject(mobility)
        keep.append(mobility)

    rsu_address = ip_stack(ns, nodes, devices, channel)

    sinks = [
        udp_upload(ns, nodes, 1 + i, 0, ns.InetSocketAddress(rsu_address, 9000 + i), 9000 + i, 0.1 + 0.01 * i, keep)
        for i in range(n)
    ]
    return goodputs_mbps(ns, sinks)


def run_link(distances_m: list[float]) -> list[dict]:
    rows = []
    for d in distances_m:
        mcs = our_mcs_bps(d)
        ns3 = simulate([(d, 0.0)], "constant", mcs)[0] if mcs > 0 else 0.0
        ideal = simulate([(d, 0.0)], "ideal")[0]
        ours = ours_mbps(d)
        rows.append(
            {
                "distance": float(d),
                "snr_db": snr_db(d, "uplink", our_80211p()),
                "mcs_mbps": mcs / 1e6,
                "ns3_goodput_mbps": ns3,
                "ours_mbps": ours,
                "ratio": ns3 / ours if ours > 0 else math.nan,
                "ns3_ideal_mbps": ideal,
            }
        )
    return rows


def circle(n: int, radius_m: float) -> list[tuple[float, float]]:
    return [(radius_m * math.cos(2 * math.pi * k / n), radius_m * math.sin(2 * math.pi * k / n)) for k in range(n)]


def run_contention(stations: list[int]) -> list[dict]:
    top = our_mcs_bps(CONTENTION_DISTANCE_M)
    rows = []
    for n in stations:
        per = simulate(circle(n, CONTENTION_DISTANCE_M), "constant", top)
        ours = ours_mbps(CONTENTION_DISTANCE_M, n)
        total = sum(per)
        rows.append(
            {
                "N": n,
                "ns3_total_mbps": total,
                "ns3_per_vehicle_mbps": total / n,
                "ns3_min_vehicle_mbps": min(per),
                "ns3_max_vehicle_mbps": max(per),
                "ours_total_mbps": n * ours,
                "ours_per_vehicle_mbps": ours,
                "ratio": total / (n * ours),
            }
        )
    return rows


def read_csv(path: Path) -> list[dict]:
    return read_floats(path)


def table(rows: list[dict], fields: tuple[str, ...]) -> str:
    return markdown(rows, fields, ("distance", "N"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("link", "contention"))
    ap.add_argument("--distances", type=float, nargs="+", default=list(DISTANCES_M), help="link: ground distances (m)")
    ap.add_argument("--stations", type=int, nargs="+", default=list(STATIONS), help="contention: vehicle counts")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    from ns import ns  # noqa: F401  (timed here)

    print(f"ns-3 imported in {time.perf_counter() - t0:.1f} s")
    if args.mode == "link":
        rows, fields, tol = run_link(args.distances), LINK_FIELDS, LINK_TOLERANCE
    else:
        rows, fields, tol = run_contention(args.stations), CONTENTION_FIELDS, CONTENTION_TOLERANCE
    out = args.out or OUT_DIR / f"{args.mode}.csv"
    write_csv(out, fields, ([fmt(r[k]) for k in fields] for r in rows))
    print(table(rows, fields))
    held = [r["ratio"] for r in rows if not math.isnan(r["ratio"])]
    worst = max(abs(x - 1.0) for x in held)
    ok = worst <= tol
    print(f"largest |ns-3 / ours - 1| = {worst:.3f} ({'within' if ok else 'OVER'} {tol:.2f}); wrote {out}")
    print(f"wall {time.perf_counter() - t0:.1f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
