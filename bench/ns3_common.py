"""What the ns-3 comparisons of the channel share: the link budget both sides use, our 802.11p
channel configured to it, ns-3's 802.11p devices and IP stack built the same way for every
scenario, and the CSV files they write (``reports/channel_validation/``).

ns-3 side (``bench/ns3_wifi_link.py`` says why): ``WIFI_STANDARD_80211p`` at 10 MHz,
``YansWifiPhy`` with 23 dBm and a 9 dB noise figure, ``ThreeGppV2vUrbanPropagationLossModel`` at
5.9 GHz with ``AlwaysLosChannelConditionModel`` and no shadowing, ``AdhocWifiMac`` without QoS for
OCB; fixed random streams and static ARP entries, so that a point gives the same figure alone or
in a sweep. With ``states`` the loss model decides each link's state instead
(``ThreeGppV2vUrbanChannelConditionModel``, no buildings: LOS or NLOSv by TR 37.885's table, drawn
once per pair of nodes) and adds its log-normal shadowing; every node's mobility model then needs a
``MobilityBuildingInfo`` (:func:`building_info`).
"""

from __future__ import annotations

import csv
import datetime
import os
import platform
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from vmc_sim.radio.link_budget import ChannelConfig

ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "reports" / "channel_validation"
REPORT = OUT_DIR / "report.md"

BANDWIDTH_HZ = 10e6
CARRIER_HZ = 5.9e9
TX_POWER_DBM = 23.0
NOISE_FIGURE_DB = 9.0
RSU_HEIGHT_M = 5.0
VEHICLE_HEIGHT_M = 1.5
SEED = 1


def our_80211p(**extra: Any) -> ChannelConfig:
    """Our ``ieee80211p`` channel with the comparisons' link budget (no rate cap), counting MSDU
    bytes (``transport: none``) unless ``extra`` names a transport."""
    extra.setdefault("transport", "none")
    extra.setdefault("path_loss_model", "tr37885_urban_los")  # ns-3 side: LOS forced, no shadowing
    return ChannelConfig(
        rate_model="ieee80211p",
        bandwidth_hz=BANDWIDTH_HZ,
        rate_cap_bps=None,
        carrier_ghz=CARRIER_HZ / 1e9,
        tx_power_dbm_uplink=TX_POWER_DBM,
        noise_figure_db=NOISE_FIGURE_DB,
        rsu_height_m=RSU_HEIGHT_M,
        vehicle_height_m=VEHICLE_HEIGHT_M,
        **extra,
    )


def ns3_mode(rate_bps: float) -> str:
    """ns-3's WifiMode name of an 802.11p (OFDM, 10 MHz) data rate."""
    return f"OfdmRate{rate_bps / 1e6:g}MbpsBW10MHz".replace(".", "_")


def wifi_80211p(
    ns: Any, nodes: Any, manager: str, data_rate_bps: float | None = None, *, states: bool = False
) -> tuple[Any, Any, list]:
    """802.11p devices on ``nodes`` sharing one channel: (devices, channel, objects to keep alive, the
    fourth of them the channel condition model).
    ``manager``: ``constant`` (every frame at ``data_rate_bps``) or ``ideal`` (ns-3's SNR-based choice).
    ``states``: TR 37.885's V2V urban link states and shadowing instead of LOS forced without shadowing."""
    loss = ns.CreateObject[ns.ThreeGppV2vUrbanPropagationLossModel]()
    loss.SetAttribute("Frequency", ns.DoubleValue(CARRIER_HZ))
    loss.SetAttribute("ShadowingEnabled", ns.BooleanValue(states))
    if states:
        condition = ns.CreateObject[ns.ThreeGppV2vUrbanChannelConditionModel]()
        condition.AssignStreams(30_000)
    else:
        condition = ns.CreateObject[ns.AlwaysLosChannelConditionModel]()
    loss.SetAttribute("ChannelConditionModel", ns.PointerValue(condition))
    channel = ns.CreateObject[ns.YansWifiChannel]()
    channel.SetPropagationLossModel(loss)
    channel.SetPropagationDelayModel(ns.CreateObject[ns.ConstantSpeedPropagationDelayModel]())

    phy = ns.YansWifiPhyHelper()
    phy.SetChannel(channel)
    phy.Set("TxPowerStart", ns.DoubleValue(TX_POWER_DBM))
    phy.Set("TxPowerEnd", ns.DoubleValue(TX_POWER_DBM))
    phy.Set("RxNoiseFigure", ns.DoubleValue(NOISE_FIGURE_DB))

    wifi = ns.WifiHelper()
    wifi.SetStandard(ns.WIFI_STANDARD_80211p)
    if manager == "constant":
        assert data_rate_bps is not None, "a constant rate needs its data rate"
        wifi.SetRemoteStationManager(
            "ns3::ConstantRateWifiManager", "DataMode", ns.StringValue(ns3_mode(data_rate_bps))
        )
    else:
        wifi.SetRemoteStationManager("ns3::IdealWifiManager")
    mac = ns.WifiMacHelper()
    mac.SetType("ns3::AdhocWifiMac")  # OCB stand-in: no association, DCF (no QoS)
    devices = wifi.Install(phy, mac, nodes)
    return devices, channel, [devices, channel, loss, condition]


def building_info(ns: Any, nodes: Any) -> list:
    """Give every node's mobility model a ``MobilityBuildingInfo`` (the V2V condition models ask it
    whether a building stands between two nodes; there are none here); the objects to keep alive."""
    keep = []
    for i in range(nodes.GetN()):
        info = ns.CreateObject[ns.MobilityBuildingInfo]()
        nodes.Get(i).GetObject[ns.MobilityModel]().AggregateObject(info)
        keep.append(info)
    return keep


def ip_stack(ns: Any, nodes: Any, devices: Any, channel: Any, rsu_index: int = 0) -> Any:
    """Install IPv4 on ``nodes`` with fixed random streams and static ARP entries; the RSU's (node
    ``rsu_index``'s) address. Fixed streams: a point gives the same result alone or after others in one
    process; static ARP: with many saturated senders a lost ARP exchange can starve a vehicle."""
    return ip_interfaces(ns, nodes, devices, channel).GetAddress(rsu_index)


def ip_interfaces(ns: Any, nodes: Any, devices: Any, channel: Any) -> Any:
    """:func:`ip_stack`, returning every node's interface (``GetAddress(i)``: node ``i``'s address)."""
    internet = ns.InternetStackHelper()
    internet.Install(nodes)
    ns.WifiHelper.AssignStreams(devices, 0)
    internet.AssignStreams(nodes, 10_000)
    channel.AssignStreams(20_000)
    addresses = ns.Ipv4AddressHelper(ns.Ipv4Address("10.1.0.0"), ns.Ipv4Mask("255.255.0.0")).Assign(devices)
    ns.NeighborCacheHelper().PopulateNeighborCache()
    return addresses


def fmt(value: Any) -> str:
    """A CSV cell: integers whole, other numbers to four decimals."""
    return f"{value:d}" if isinstance(value, int) else f"{value:.4f}"


#: UDP payload of a saturating source's packets: + 8 UDP + 20 IPv4 = a 1500-byte MSDU (ours: msdu_bytes = 1500).
UDP_PAYLOAD_BYTES = 1472


def udp_onoff(ns: Any, remote: Any, offered_bps: float) -> Any:
    """A UDP source that sends without pause: ``offered_bps`` in ``UDP_PAYLOAD_BYTES`` packets to
    ``remote`` (an ``AddressValue``); the caller adds it to its node and starts it."""
    app = ns.CreateObject[ns.OnOffApplication]()
    app.SetAttribute("Protocol", ns.TypeIdValue(ns.UdpSocketFactory.GetTypeId()))
    app.SetAttribute("Remote", remote)
    app.SetAttribute("OnTime", ns.StringValue("ns3::ConstantRandomVariable[Constant=1]"))
    app.SetAttribute("OffTime", ns.StringValue("ns3::ConstantRandomVariable[Constant=0]"))
    app.SetAttribute("DataRate", ns.StringValue(f"{offered_bps:.0f}bps"))
    app.SetAttribute("PacketSize", ns.UintegerValue(UDP_PAYLOAD_BYTES))
    return app


def write_csv(path: Path, fields: Iterable[str], rows: Iterable[Iterable[str]]) -> None:
    """Write the header ``fields`` and the already formatted ``rows`` (replacing the bench's own CSV;
    refused inside a run or sweep directory, :func:`vmc_sim.rundir.outputs.claim_file`)."""
    from vmc_sim.rundir.outputs import claim_file

    claim_file(path, force=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(list(fields))
        w.writerows(list(r) for r in rows)


def markdown(rows: list[dict], fields: Iterable[str], whole: Iterable[str]) -> str:
    """``rows`` as a Markdown table: the ``whole`` columns (and any byte count) as they are, the
    rest to three decimals."""
    fields, whole = tuple(fields), set(whole)
    lines = ["| " + " | ".join(fields) + " |", "|" + "---:|" * len(fields)]
    for r in rows:
        cells = [f"{r[k]:g}" if k in whole or "bytes" in k else f"{r[k]:.3f}" for k in fields]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def read_floats(path: Path) -> list[dict]:
    """A CSV whose every cell is a number, as dicts of floats."""
    with path.open(newline="") as f:
        return [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]


def update_report(path: Path, heading: str, text: str) -> None:
    """Replace the section under ``heading`` in the report (up to the next top-level heading), or
    append it: each script regenerates its own section and leaves the others alone."""
    old = path.read_text() if path.exists() else ""
    start = old.find(heading)
    if start < 0:
        path.write_text(old.rstrip("\n") + "\n\n" + text)
        return
    nxt = old.find("\n# ", start + len(heading))
    rest = "" if nxt < 0 else old[nxt:]
    path.write_text(old[:start] + text.rstrip("\n") + ("\n" + rest if rest else "\n"))


def provenance() -> str:
    """The date, machine and ns-3 wheel a generated section states."""
    from importlib.metadata import version

    return (
        f"Date: {datetime.date.today().isoformat()}. Machine: {os.cpu_count()}-core {platform.machine()}, "
        f"Python {platform.python_version()}; ns-3: the `ns3` wheel {version('ns3')}"
    )
