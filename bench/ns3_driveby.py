"""A drive-by upload: ns-3's 802.11p against the co-simulation's channel (``vmc_sim.radio.channel.RsuChannel``).

One vehicle drives past the RSU on a straight road at constant speed (RSU at the origin, road at
y = 10 m, heights 5.0 / 1.5 m) and uploads ``BYTES`` (2,600,000: a CNN model and its diagonal
Fisher in fp16) from the moment it enters the RSU's 85 m radius (x = -sqrt(85^2 - 10^2)) until
the bytes are delivered or it leaves the radius. Recorded: completion time after entering coverage,
or bytes delivered when it leaves. A fourth pass uploads ``LARGE_BYTES`` (20 MB) at the top speed,
which neither side completes within the pass: it compares bytes delivered.

ns-3: the same 802.11p setup as ``bench/ns3_wifi_link.py`` (AdhocWifiMac for OCB, 10 MHz,
ThreeGppV2vUrban with AlwaysLos and no shadowing at 5.9 GHz, 23 dBm, NF 9 dB); the vehicle moves
along an ns-2 mobility trace (``$node_(1) set X_ ...`` / ``$ns_ at t "$node_(1) setdest x y v"``,
the format SUMO's ``traceExporter.py --ns2mobility-output`` writes) read by ``Ns2MobilityHelper``.
The upload is a ``BulkSendApplication`` over TCP (MSS 1448 B + 12 B timestamps + 40 B headers =
a 1500-byte IP packet, our ``msdu_bytes``; delayed ACKs every 2 segments), counted at the RSU's
``PacketSink`` every millisecond. Three ns-3 runs per speed: TCP with ``ConstantRateWifiManager``
at 27 Mb/s (the MCS ours picks everywhere within 85 m; the comparable run), TCP with
``IdealWifiManager``, and UDP at 27 Mb/s (an ``OnOffApplication`` offering 1472-byte payloads at
20 Mb/s without end, so the channel stays saturated for the whole pass however long it is; the
upload is done when the sink has ``nbytes``: no transport ACKs, what our goodput model describes).

Ours: ``RsuChannel`` (``ChannelConfig(rate_model="ieee80211p", bandwidth_hz=10e6,
rate_cap_bps=None, update_interval=0.1)``) in a simpy Environment, ``transfer(..., "uplink", ...)``
with a position function returning (x, y, vx, vy), coverage = ground distance <= 85 m, and
``leave()`` called at the exact exit time (as the engine does at the mobility event).

    python bench/ns3_driveby.py                    # reports/channel_validation/driveby.csv
    python bench/ns3_driveby.py --speeds 13.9 --no-large --out /tmp/driveby.csv
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import cast

import simpy
from ns3_common import (
    OUT_DIR,
    RSU_HEIGHT_M,
    SEED,
    VEHICLE_HEIGHT_M,
    building_info,
    fmt,
    ip_stack,
    markdown,
    our_80211p,
    read_floats,
    udp_onoff,
    wifi_80211p,
    write_csv,
)

from vmc_sim.radio.channel import RsuChannel
from vmc_sim.radio.link_budget import ChannelConfig
from vmc_sim.radio.link_results import TransferResult

SPEEDS_MPS = (8.3, 13.9, 25.0)
BYTES = 2_600_000
LARGE_BYTES = 20_000_000  # one more pass at the top speed that cannot complete: bytes delivered in the pass
RADIUS_M = 85.0
ROAD_Y_M = 10.0
X_ENTER_M = math.sqrt(RADIUS_M**2 - ROAD_Y_M**2)  # 84.41 m: where the road crosses the 85 m circle
TOP_MCS_BPS = 27e6
TCP_SEGMENT_BYTES = 1448  # + 12 timestamp option + 20 TCP + 20 IPv4 = 1500-byte IP packet
UDP_OFFERED_BPS = 20e6  # above the 16 Mb/s the MAC carries at 27 Mb/s; the MAC queue drops the surplus at its tail
T_ENTER_S = 1.0  # ns-3 time at which the vehicle crosses into coverage and the upload starts
POLL_S = 0.001
UPDATE_INTERVAL_S = 0.1
TOLERANCE = 0.10
FIELDS = (
    "speed",
    "bytes",
    "pass_s",
    "ns3_completion_s",
    "ns3_bytes_delivered",
    "ours_completion_s",
    "ours_bytes_delivered",
    "ratio",
    "ns3_ideal_completion_s",
    "ns3_ideal_bytes_delivered",
    "ns3_udp_completion_s",
    "ns3_udp_bytes_delivered",
)


def our_config() -> ChannelConfig:
    return our_80211p(update_interval=UPDATE_INTERVAL_S)


def pass_s(speed: float) -> float:
    """Seconds the vehicle spends within the 85 m radius."""
    return 2.0 * X_ENTER_M / speed


def ours(speed: float, nbytes: int = BYTES) -> tuple[float, int]:
    """(completion time s after entering coverage or nan, bytes delivered) from our RsuChannel."""
    env = simpy.Environment()
    rsu = RsuChannel(our_config(), (0.0, 0.0), env=env)

    def position(_v):
        return (-X_ENTER_M + speed * env.now, ROAD_Y_M, speed, 0.0)

    def covered(_v):
        x, y = position(_v)[:2]
        return math.hypot(x, y) <= RADIUS_M + 1e-9

    proc = rsu.transfer(env, "v", nbytes, "uplink", position, covered)

    def leave():  # the engine calls leave() at the mobility event; polling alone would see it late
        yield env.timeout(pass_s(speed))
        rsu.leave("v")

    env.process(leave())
    env.run(until=proc)
    result = cast(TransferResult, proc.value)  # the process returns its transfer's result
    done = result.end - result.start if result.ok else math.nan
    return done, int(result.bytes_sent)


def ns2_trace(speed: float, path: Path) -> None:
    """The straight pass as an ns-2 mobility file: node 1 crosses x = -X_ENTER_M at T_ENTER_S."""
    x0 = -X_ENTER_M - speed * T_ENTER_S
    x1 = X_ENTER_M + speed * 2.0  # drives on past the far edge
    path.write_text(
        f"$node_(1) set X_ {x0:.4f}\n$node_(1) set Y_ {ROAD_Y_M:.4f}\n$node_(1) set Z_ {VEHICLE_HEIGHT_M:.4f}\n"
        f'$ns_ at 0.0 "$node_(1) setdest {x1:.4f} {ROAD_Y_M:.4f} {speed:.4f}"\n'
    )


def simulate(speed: float, manager: str, transport: str, nbytes: int = BYTES) -> tuple[float, int]:
    """(completion time s after entering coverage or nan, bytes delivered within the pass) in ns-3."""
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "driveby.ns2"
        ns2_trace(speed, trace)
        return simulate_trace(trace, 1, (T_ENTER_S, T_ENTER_S + pass_s(speed)), manager, transport, nbytes)


def simulate_trace(
    trace: Path,
    vehicle_node: int,
    window: tuple[float, float],
    manager: str,
    transport: str,
    nbytes: int,
    rsu_xy: tuple[float, float] = (0.0, 0.0),
    *,
    run: int = 1,
    states: bool = False,
    poll_s: float | None = POLL_S,
    condition: list[str] | None = None,
) -> tuple[float, int]:
    """Upload ``nbytes`` from the vehicle that the ns-2 ``trace`` moves (``$node_(vehicle_node)``, 0
    or 1; the RSU is the other node, at ``rsu_xy``) from ``window[0]`` until delivered or
    ``window[1]``: (completion time s after the start or nan, bytes the RSU received). ``run``: ns-3's
    run number (every random stream); ``states``: link states and shadowing on
    (:func:`ns3_common.wifi_80211p`); ``poll_s`` None: no completion time, only the bytes at the end;
    ``condition``: a list to which the link's state at the end is appended (``los``, ``nlosv``, ``nlos``)."""
    from ns import ns

    if vehicle_node not in (0, 1):
        raise ValueError(f"the vehicle must be ns-2 node 0 or 1, got {vehicle_node}")
    start, leave = window
    ns.RngSeedManager.SetSeed(SEED)
    ns.RngSeedManager.SetRun(run)
    ns.Config.SetDefault("ns3::TcpSocket::SegmentSize", ns.UintegerValue(TCP_SEGMENT_BYTES))
    nodes = ns.NodeContainer()
    nodes.Create(2)
    rsu_node = 1 - vehicle_node

    devices, channel, keep = wifi_80211p(ns, nodes, manager, TOP_MCS_BPS, states=states)

    rsu_mobility = ns.CreateObject[ns.ConstantPositionMobilityModel]()
    rsu_mobility.SetPosition(ns.Vector(rsu_xy[0], rsu_xy[1], RSU_HEIGHT_M))
    nodes.Get(rsu_node).AggregateObject(rsu_mobility)
    ns.Ns2MobilityHelper(str(trace)).Install()  # reads the file now; installs on the vehicle's node
    keep.append(rsu_mobility)
    if states:
        keep += building_info(ns, nodes)

    rsu_address = ip_stack(ns, nodes, devices, channel, rsu_node)

    factory = ns.TcpSocketFactory if transport == "tcp" else ns.UdpSocketFactory
    port = 9000
    sink = ns.CreateObject[ns.PacketSink]()
    sink.SetAttribute("Protocol", ns.TypeIdValue(factory.GetTypeId()))
    sink.SetAttribute("Local", ns.AddressValue(ns.InetSocketAddress(ns.Ipv4Address.GetAny(), port).ConvertTo()))
    nodes.Get(rsu_node).AddApplication(sink)
    sink.SetStartTime(ns.Seconds(0.0))
    remote = ns.AddressValue(ns.InetSocketAddress(rsu_address, port).ConvertTo())
    if transport == "tcp":
        app = ns.CreateObject[ns.BulkSendApplication]()
        app.SetAttribute("Protocol", ns.TypeIdValue(factory.GetTypeId()))
        app.SetAttribute("Remote", remote)
        app.SetAttribute("SendSize", ns.UintegerValue(TCP_SEGMENT_BYTES))
        app.SetAttribute("MaxBytes", ns.UintegerValue(nbytes))
    else:
        app = udp_onoff(ns, remote, UDP_OFFERED_BPS)
    nodes.Get(vehicle_node).AddApplication(app)
    app.SetStartTime(ns.Seconds(start))
    keep.append(app)

    poll = leave - start if poll_s is None else poll_s
    steps = int(math.ceil((leave - start) / poll))
    done, rx = math.nan, 0
    ns.Simulator.Stop(ns.Seconds(start))
    ns.Simulator.Run()
    for k in range(1, steps + 1):
        t = min(start + k * poll, leave)
        ns.Simulator.Stop(ns.Seconds(t) - ns.Simulator.Now())
        ns.Simulator.Run()
        rx = int(sink.GetTotalRx())
        if rx >= nbytes and poll_s is not None:
            done = t - start
            break
    if condition is not None:  # the condition model keeps the pair's state once drawn: this is the pass's
        vehicle = nodes.Get(vehicle_node).GetObject[ns.MobilityModel]()
        c = keep[3].GetChannelCondition(rsu_mobility, vehicle)
        condition.append("los" if c.IsLos() else "nlosv" if c.IsNlosv() else "nlos")
    ns.Simulator.Destroy()
    del keep
    return done, rx


def run(cases: list[tuple[float, int]]) -> list[dict]:
    rows = []
    for v, nbytes in cases:
        ns3_done, ns3_rx = simulate(v, "constant", "tcp", nbytes)
        ideal_done, ideal_rx = simulate(v, "ideal", "tcp", nbytes)
        udp_done, udp_rx = simulate(v, "constant", "udp", nbytes)
        our_done, our_rx = ours(v, nbytes)
        if math.isnan(ns3_done) or math.isnan(our_done):
            ratio = ns3_rx / our_rx if our_rx else math.nan  # bytes delivered within the pass
        else:
            ratio = ns3_done / our_done
        rows.append(
            {
                "speed": v,
                "bytes": nbytes,
                "pass_s": pass_s(v),
                "ns3_completion_s": ns3_done,
                "ns3_bytes_delivered": ns3_rx,
                "ours_completion_s": our_done,
                "ours_bytes_delivered": our_rx,
                "ratio": ratio,
                "ns3_ideal_completion_s": ideal_done,
                "ns3_ideal_bytes_delivered": ideal_rx,
                "ns3_udp_completion_s": udp_done,
                "ns3_udp_bytes_delivered": udp_rx,
            }
        )
    return rows


def read_csv(path: Path) -> list[dict]:
    return read_floats(path)


def table(rows: list[dict]) -> str:
    return markdown(rows, FIELDS, ("speed", "bytes"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--speeds", type=float, nargs="+", default=list(SPEEDS_MPS), help="vehicle speeds (m/s)")
    ap.add_argument("--bytes", type=int, default=BYTES, help="upload size (B)")
    ap.add_argument("--no-large", action="store_true", help=f"skip the {LARGE_BYTES:,} B pass at the top speed")
    ap.add_argument("--out", type=Path, default=OUT_DIR / "driveby.csv")
    args = ap.parse_args(argv)
    cases = [(v, args.bytes) for v in args.speeds]
    if not args.no_large:
        cases.append((max(args.speeds), LARGE_BYTES))

    t0 = time.perf_counter()
    from ns import ns  # noqa: F401  (timed here)

    print(f"ns-3 imported in {time.perf_counter() - t0:.1f} s")
    rows = run(cases)
    write_csv(args.out, FIELDS, ([fmt(r[k]) for k in FIELDS] for r in rows))
    print(table(rows))
    worst = max(abs(r["ratio"] - 1.0) for r in rows)
    ok = worst <= TOLERANCE
    print(f"largest |ns-3 / ours - 1| = {worst:.3f} ({'within' if ok else 'OVER'} {TOLERANCE:.2f}); wrote {args.out}")
    print(f"wall {time.perf_counter() - t0:.1f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
