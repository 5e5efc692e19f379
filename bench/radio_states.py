"""What the radio gives at a distance: the rate of one uplink transfer alone on its channel (802.11p
over TCP) against the ground distance, per link state, and as a distribution over the links the
default radio draws (their state and shadowing), at 10, 50, 85, 100, 200 and 500 m.

Two ways the default decides a link's state are shown, because they differ most: the city's
radio where the scenario has no buildings (the TR 38.901 UMi probability stands in for them;
NLOSv needs a vehicle on the line, which a lone link has not), and TR 37.885's urban V2V table
(LOS or NLOSv, ``link_state_model: tr37885_urban``). Writes ``docs/radio_states.png``,
``docs/radio_states.csv`` and ``docs/radio_states.md`` (the table, generated) and prints it.

    python bench/radio_states.py            # 20,000 links per distance, about 10 s
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

import numpy as np

from vmc_sim.radio.link_budget import ChannelConfig, rate_bps
from vmc_sim.radio.link_state import LinkState
from vmc_sim.radio.link_states import LINK_STATES, Link, StateMemory, blockage_loss_db
from vmc_sim.radio.path_loss import PATH_LOSS

ROOT = Path(__file__).resolve().parents[1]
DISTANCES = (10.0, 50.0, 85.0, 100.0, 200.0, 500.0)
MODELS = {"city (no buildings: UMi stand-in)": "city", "tr37885_urban (V2V table)": "tr37885_urban"}


def one_link(cfg: ChannelConfig, d: float, rng: np.random.Generator) -> tuple[float, LinkState]:
    """The rate (bit/s) of a fresh link at ``d`` m: its state, blockage and shadowing drawn."""
    model = LINK_STATES[cfg.link_state_model or "los"]
    state, blocker = model.decide(
        Link((0.0, 0.0), (d, 0.0), cfg.rsu_height_m, cfg.vehicle_height_m, None), StateMemory(), None, cfg, rng
    )
    extra = 0.0
    if state is LinkState.NLOSV:
        assert blocker is not None
        extra += blockage_loss_db(blocker, float(np.hypot(d, cfg.rsu_height_m - cfg.vehicle_height_m)), cfg, rng)
    sigma = PATH_LOSS[cfg.path_loss_model].shadowing_db.get(state, 0.0)
    extra += float(rng.normal(0.0, sigma)) if sigma > 0 else 0.0
    return rate_bps(d, cfg.bandwidth_hz, "uplink", cfg, extra, state), state


def distribution(n: int, seed: int) -> list[dict]:
    rows = []
    for label, name in MODELS.items():
        cfg = ChannelConfig(link_state_model=name)
        rng = np.random.default_rng(seed)
        for d in DISTANCES:
            draws = [one_link(cfg, d, rng) for _ in range(n)]
            rates = np.array([r for r, _ in draws]) / 1e6
            states = [s for _, s in draws]
            rows.append(
                {
                    "model": label,
                    "distance_m": d,
                    "p10_mbps": float(np.percentile(rates, 10)),
                    "median_mbps": float(np.median(rates)),
                    "p90_mbps": float(np.percentile(rates, 90)),
                    "outage_share": float(np.mean(rates == 0.0)),
                    **{f"{s.value}_share": states.count(s) / n for s in LinkState},
                }
            )
    return rows


def plot(path: Path, rows: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cfg = ChannelConfig()
    d = np.geomspace(5.0, 600.0, 300)
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2))
    for state, style in ((LinkState.LOS, "-"), (LinkState.NLOSV, "--"), (LinkState.NLOS, ":")):
        extra = 5.0 if state is LinkState.NLOSV else 0.0  # a car between the antennas: mean blockage 5 dB
        left.plot(
            d,
            [rate_bps(x, cfg.bandwidth_hz, "uplink", cfg, extra, state) / 1e6 for x in d],
            style,
            label=state.value.upper() if state is not LinkState.NLOSV else "NLOSv (+5 dB mean blockage)",
        )
    left.set(
        xscale="log", xlabel="ground distance (m)", ylabel="rate alone (Mb/s)", title="TR 37.885 urban, no shadowing"
    )
    left.legend()
    for label in MODELS:
        mine = [r for r in rows if r["model"] == label]
        xs = [r["distance_m"] for r in mine]
        line = right.plot(xs, [r["median_mbps"] for r in mine], "o-", label=f"{label}: median")[0]
        right.fill_between(
            xs, [r["p10_mbps"] for r in mine], [r["p90_mbps"] for r in mine], color=line.get_color(), alpha=0.2
        )
    right.set(
        xscale="log",
        xlabel="ground distance (m)",
        ylabel="rate alone (Mb/s)",
        title="the default radio's links: median, p10-p90",
    )
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--links", type=int, default=20000, help="links drawn per distance and model")
    p.add_argument("--seed", type=int, default=20261207)
    p.add_argument("--out", type=Path, default=ROOT / "docs")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    rows = distribution(args.links, args.seed)
    with open(args.out / "radio_states.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    plot(args.out / "radio_states.png", rows)
    lines = [
        "# The default radio's links at a distance",
        "",
        f"Generated by `python bench/radio_states.py` ({args.links:,} links per distance and model, seed "
        f"{args.seed}): one uplink transfer alone on its channel, 802.11p over TCP, TR 37.885 urban path "
        "loss of the link's state, its shadowing (and an NLOSv link's blockage loss) drawn. See "
        "[channel.md](channel.md).",
        "",
        "![rate against distance per link state](radio_states.png)",
        "",
        "| model | distance (m) | p10 Mb/s | median Mb/s | p90 Mb/s | outage | LOS | NLOSv | NLOS |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['distance_m']:g} | {r['p10_mbps']:.2f} | {r['median_mbps']:.2f} | {r['p90_mbps']:.2f} | "
            f"{100 * r['outage_share']:.1f} % | {100 * r['los_share']:.1f} % | {100 * r['nlosv_share']:.1f} % | "
            f"{100 * r['nlos_share']:.1f} % |"
        )
    (args.out / "radio_states.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"\nwrote {args.out / 'radio_states.csv'} and .png in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
