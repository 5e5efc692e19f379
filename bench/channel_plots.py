"""Plots of the channel comparisons, ours against ns-3, from the committed CSVs (no ns-3 needed).

Reads ``reports/channel_validation/{pathloss,link,contention,driveby,driveby_sumo}.csv`` and
writes one figure per comparison beside them: ``pathloss.png`` (dB against distance, both 3GPP
models), ``link.png`` (one vehicle's goodput against distance), ``contention.png`` (total and
per-vehicle goodput against the number of vehicles), ``driveby.png`` (ns-3 / ours for every
drive-by upload, straight and SUMO passes, TCP and UDP, with the 10 % target band).

    python bench/channel_plots.py [--dir reports/channel_validation]
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from ns3_common import OUT_DIR, read_floats  # noqa: E402


def _read_rows(path: Path) -> list[dict[str, str]]:
    import csv

    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def pathloss(d: Path) -> Path:
    rows = _read_rows(d / "pathloss.csv")
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for model in dict.fromkeys(r["model"] for r in rows):
        pts = [(float(r["distance"]), float(r["ns3_db"]), float(r["ours_db"])) for r in rows if r["model"] == model]
        xs = [p[0] for p in pts]
        ax.plot(xs, [p[1] for p in pts], "o", mfc="none", label=f"ns-3 {model}")
        ax.plot(xs, [p[2] for p in pts], "-", label=f"ours {model}")
    ax.set(xscale="log", xlabel="ground distance (m)", ylabel="path loss (dB)", title="TR 37.885 LOS path loss")
    ax.legend(fontsize=7)
    return _save(fig, d / "pathloss.png")


def link(d: Path) -> Path:
    rows = read_floats(d / "link.csv")
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    xs = [r["distance"] for r in rows]
    ax.plot(xs, [r["ns3_goodput_mbps"] for r in rows], "o", mfc="none", label="ns-3, at our MCS")
    ax.plot(xs, [r["ns3_ideal_mbps"] for r in rows], "x", label="ns-3, IdealWifiManager")
    ax.plot(xs, [r["ours_mbps"] for r in rows], "-", label="ours (ieee80211p, whole MSDUs)")
    ax.set(xlabel="distance (m)", ylabel="goodput (Mb/s)", title="One 802.11p link, saturating UDP")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7)
    return _save(fig, d / "link.png")


def contention(d: Path) -> Path:
    rows = read_floats(d / "contention.csv")
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    n = [r["N"] for r in rows]
    ax.plot(n, [r["ns3_total_mbps"] for r in rows], "o", mfc="none", label="ns-3 total")
    ax.plot(n, [r["ours_total_mbps"] for r in rows], "-", label="ours total")
    ax.errorbar(
        n,
        [r["ns3_per_vehicle_mbps"] for r in rows],
        yerr=[
            [r["ns3_per_vehicle_mbps"] - r["ns3_min_vehicle_mbps"] for r in rows],
            [r["ns3_max_vehicle_mbps"] - r["ns3_per_vehicle_mbps"] for r in rows],
        ],
        fmt="s",
        mfc="none",
        capsize=3,
        label="ns-3 per vehicle (min-max)",
    )
    ax.plot(n, [r["ours_per_vehicle_mbps"] for r in rows], "--", label="ours per vehicle")
    ax.set(xscale="log", xlabel="vehicles uploading at once (50 m)", ylabel="goodput (Mb/s)")
    ax.set_xticks(n, [f"{int(x)}" for x in n])
    ax.set_title("Contention at 27 Mb/s")
    ax.legend(fontsize=7)
    return _save(fig, d / "contention.png")


def driveby(d: Path) -> Path:
    """ns-3 / ours per upload; the straight passes compare ns-3's TCP and UDP with ours over TCP and
    UDP (ours rescaled from the committed whole-MSDU column by ``transport``'s rate ratio)."""
    from vmc_sim.radio.link_budget import ChannelConfig, rate_bps

    def rate(t: str) -> float:
        cfg = ChannelConfig(rate_model="ieee80211p", bandwidth_hz=10e6, rate_cap_bps=None, transport=t)
        return rate_bps(50.0, 10e6, "uplink", cfg)

    labels: list[str] = []
    tcp: list[float] = []
    udp: list[float] = []
    for r in read_floats(d / "driveby.csv"):
        scales = {t: rate("none") / rate(t) for t in ("tcp", "udp")}
        for t, col, out in (("tcp", "ns3", tcp), ("udp", "ns3_udp", udp)):
            if math.isnan(r["ours_completion_s"]):
                out.append(r[f"{col}_bytes_delivered"] / (r["ours_bytes_delivered"] / scales[t]))
            else:
                out.append(r[f"{col}_completion_s"] / (r["ours_completion_s"] * scales[t]))
        labels.append(f"straight {r['speed']:g} m/s\n{r['bytes'] / 1e6:g} MB")
    for r in read_floats(d / "driveby_sumo.csv"):
        tcp.append(r["ratio_tcp"])
        udp.append(r["ratio_udp"])
        labels.append(f"SUMO seed {int(r['seed'])}\n{r['bytes'] / 1e6:g} MB")
    fig, ax = plt.subplots(figsize=(8.5, 3.6))
    xs = range(len(labels))
    ax.axhspan(0.9, 1.1, color="0.9", label="10 % target")
    ax.plot([x - 0.1 for x in xs], tcp, "o", label="TCP: ns-3 / ours (transport tcp)")
    ax.plot([x + 0.1 for x in xs], udp, "s", mfc="none", label="UDP: ns-3 / ours (transport udp)")
    ax.axhline(1.0, color="k", lw=0.6)
    ax.set_xticks(list(xs), labels, fontsize=6)
    ax.set(ylabel="ns-3 / ours", title="Drive-by uploads: completion time, or bytes delivered in the pass")
    ax.set_ylim(0.85, 1.15)
    ax.legend(fontsize=7, loc="lower left")
    return _save(fig, d / "driveby.png")


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=120, metadata={"Software": None})
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=OUT_DIR)
    args = ap.parse_args(argv)
    for draw in (pathloss, link, contention, driveby):
        print(f"wrote {draw(args.dir)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
