"""A real SUMO pass by the RSU: ns-3's 802.11p upload against the co-simulation's channel, over TCP and UDP.

The vehicle's trajectory is ``bench/sumo_pass.py``'s: SUMO drives it through a signalised
junction of a netgenerate grid, where the RSU stands, stopping at the red light inside coverage;
SUMO's FCD goes through ``traceExporter.py`` to an ns-2 mobility file that ns-3's
``Ns2MobilityHelper`` reads (the vehicle is ``$node_(0)``, the RSU node 1). The upload starts
when the vehicle (in ns-3's timing, ``sumo_pass.coverage_interval``) enters the 85 m radius and
ends when its bytes are delivered or it leaves. Two uploads: ``BYTES`` (2,600,000 B, a CNN model
and its diagonal Fisher in fp16; completion time) and ``LARGE_BYTES`` (120 MB, more than the pass
carries; bytes delivered in the pass). One pass per seed (``SEEDS``): the seed moves the background
traffic, so the queue ahead, the stop and the dwell differ between passes.

ns-3: ``bench/ns3_driveby.py``'s set-up (802.11p at 10 MHz, ``ConstantRateWifiManager`` at
27 Mb/s, the MCS ours picks everywhere within 85 m), a TCP ``BulkSendApplication`` and a UDP
``OnOffApplication`` offered at 20 Mb/s, counted at the RSU's ``PacketSink`` every millisecond.

Ours: ``RsuChannel`` with ``rate_model: ieee80211p`` at 10 MHz, no rate cap, ``update_interval``
0.1 s and ``transport: tcp`` (``udp`` for the UDP comparison), the vehicle at
``sumo_pass.position_at``, ``leave()`` at the exit time. Target: ns-3 / ours within 10 %.

    python bench/ns3_sumo_driveby.py          # reports/channel_validation/driveby_sumo.csv
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
from ns3_common import OUT_DIR, fmt, markdown, our_80211p, read_floats, write_csv
from ns3_driveby import RADIUS_M, TOLERANCE, UPDATE_INTERVAL_S, simulate_trace
from sumo_pass import SumoPass, coverage_interval, make_pass, position_at

from vmc_sim.radio.channel import RsuChannel
from vmc_sim.radio.link_results import TransferResult

BYTES = 2_600_000
LARGE_BYTES = 120_000_000
SEEDS = (1, 2, 3)
TRANSPORTS = ("tcp", "udp")
FIELDS = (
    "seed",
    "bytes",
    "entry_s",
    "exit_s",
    "ns3_tcp_completion_s",
    "ns3_tcp_bytes_delivered",
    "ours_tcp_completion_s",
    "ours_tcp_bytes_delivered",
    "ratio_tcp",
    "ns3_udp_completion_s",
    "ns3_udp_bytes_delivered",
    "ours_udp_completion_s",
    "ours_udp_bytes_delivered",
    "ratio_udp",
)


def window(p: SumoPass) -> tuple[float, float]:
    """(entry, exit) in ns-3 time of the pass's 85 m coverage; ValueError if it never enters."""
    cov = coverage_interval(p, RADIUS_M)
    if cov is None:
        raise ValueError(f"the SUMO pass never comes within {RADIUS_M} m of the RSU at {p.rsu_xy}")
    return cov


def ours(p: SumoPass, nbytes: int, transport: str) -> tuple[float, int]:
    """(completion time s after entry or nan, bytes delivered) from our RsuChannel on the pass."""
    entry, exit_ = window(p)
    env = simpy.Environment(initial_time=entry)
    rsu = RsuChannel(our_80211p(update_interval=UPDATE_INTERVAL_S, transport=transport), p.rsu_xy, env=env)

    def position(_v):
        pos = position_at(p, env.now)
        if pos is None:
            raise RuntimeError(f"the pass has no position at t = {env.now} s")
        return pos

    def covered(_v):
        x, y = position(_v)[:2]
        return math.hypot(x - p.rsu_xy[0], y - p.rsu_xy[1]) <= RADIUS_M + 1e-9

    proc = rsu.transfer(env, "v", nbytes, "uplink", position, covered)

    def leave():
        yield env.timeout(exit_ - entry)
        rsu.leave("v")

    env.process(leave())
    env.run(until=proc)
    result = cast(TransferResult, proc.value)  # the process returns its transfer's result
    done = result.end - result.start if result.ok else math.nan
    return done, int(result.bytes_sent)


def ratio(ns3: tuple[float, int], our: tuple[float, int]) -> float:
    """ns-3 / ours: completion times when both complete, else bytes delivered in the pass."""
    if math.isnan(ns3[0]) or math.isnan(our[0]):
        return ns3[1] / our[1] if our[1] else math.nan
    return ns3[0] / our[0]


def run(p: SumoPass, sizes: list[int], seed: int) -> list[dict]:
    if p.ns2_node_index != 0:
        raise ValueError(f"the ns-2 file moves $node_({p.ns2_node_index}); this comparison needs the vehicle as node 0")
    entry, exit_ = window(p)
    rows = []
    for nbytes in sizes:
        row: dict = {"seed": seed, "bytes": nbytes, "entry_s": entry, "exit_s": exit_}
        for transport in TRANSPORTS:
            ns3 = simulate_trace(p.ns2_path, 0, (entry, exit_), "constant", transport, nbytes, p.rsu_xy)
            our = ours(p, nbytes, transport)
            row[f"ns3_{transport}_completion_s"], row[f"ns3_{transport}_bytes_delivered"] = ns3
            row[f"ours_{transport}_completion_s"], row[f"ours_{transport}_bytes_delivered"] = our
            row[f"ratio_{transport}"] = ratio(ns3, our)
        rows.append(row)
    return rows


def read_csv(path: Path) -> list[dict]:
    return read_floats(path)


def table(rows: list[dict]) -> str:
    return markdown(rows, FIELDS, ("seed", "bytes"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS), help="SUMO's and the background's seeds")
    ap.add_argument("--bytes", type=int, nargs="+", default=[BYTES, LARGE_BYTES], help="upload sizes (B)")
    ap.add_argument("--out", type=Path, default=OUT_DIR / "driveby_sumo.csv")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    from ns import ns  # noqa: F401  (timed here)

    print(f"ns-3 imported in {time.perf_counter() - t0:.1f} s")
    rows = []
    for seed in args.seeds:
        with tempfile.TemporaryDirectory() as tmp:
            p = make_pass(Path(tmp), seed=seed)
            entry, exit_ = window(p)
            print(
                f"seed {seed}, SUMO {p.sumo_version}: coverage {entry:.3f} .. {exit_:.3f} s (dwell {exit_ - entry:.3f} s)"
            )
            rows += run(p, args.bytes, seed)
    write_csv(args.out, FIELDS, ([fmt(r[k]) for k in FIELDS] for r in rows))
    print(table(rows))
    worst = max(abs(r[f"ratio_{t}"] - 1.0) for r in rows for t in TRANSPORTS)
    ok = worst <= TOLERANCE
    print(f"largest |ns-3 / ours - 1| = {worst:.3f} ({'within' if ok else 'OVER'} {TOLERANCE:.2f}); wrote {args.out}")
    print(f"wall {time.perf_counter() - t0:.1f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
