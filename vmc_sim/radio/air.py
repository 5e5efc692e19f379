"""Which RSUs share the air: the contention domains of one world's channels.

RSUs on one channel (``channel.rsu_channels``, 0 by default) whose cells lie within carrier-sense
range of each other form one domain (transitively): a transmitter at the edge of one cell is heard
above ``carrier_sense_dbm`` at the edge of the other, at the LOS path loss without shadowing, so
802.11's carrier sense makes their transfers take turns. Every domain is one
:class:`vmc_sim.radio.medium.Medium`, whose transfers share the air (processor sharing across the
domain's RSUs). With ``shared_air: false`` every RSU has a medium of its own.

Approximation: transmissions of two domains (cells further apart than the carrier-sense range)
do not interfere here; at that distance each is received below ``carrier_sense_dbm`` at the other.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .link_budget import ChannelConfig, path_loss_db
from .link_state import LinkState
from .medium import Medium


def carrier_sense_range_m(cfg: ChannelConfig) -> float:
    """The ground distance (m) at which a vehicle's transmission is received at ``carrier_sense_dbm``
    (LOS path loss, no shadowing, antenna gains included)."""
    p_tx = max(cfg.tx_power_dbm_uplink, cfg.tx_power_dbm_downlink) + cfg.antenna_gain_db

    def heard(d: float) -> bool:
        return p_tx - path_loss_db(d, cfg, LinkState.LOS) >= cfg.carrier_sense_dbm

    lo, hi = cfg.min_distance_m, 1e6
    if not heard(lo):
        return 0.0
    if heard(hi):
        return hi
    for _ in range(100):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if heard(mid) else (lo, mid)
    return lo


def media(rsus: Sequence[Any], cfg: ChannelConfig) -> dict[str, Medium]:
    """Each RSU's medium (``rsus``: objects with ``id``, ``x``, ``y``, ``radius``)."""
    ids = [r.id for r in rsus]
    parent = {i: i for i in ids}

    def root(i: str) -> str:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    if cfg.shared_air:
        reach = carrier_sense_range_m(cfg)
        for a_i, a in enumerate(rsus):
            for b in rsus[a_i + 1 :]:
                same = cfg.rsu_channels.get(a.id, 0) == cfg.rsu_channels.get(b.id, 0)
                gap = math.hypot(a.x - b.x, a.y - b.y) - a.radius - b.radius
                if same and gap <= reach:
                    parent[root(a.id)] = root(b.id)
    domains: dict[str, Medium] = {}
    out: dict[str, Medium] = {}
    for i in ids:
        key = root(i)
        if key not in domains:
            members = sorted(j for j in ids if root(j) == key)
            domains[key] = Medium(cfg, "+".join(members))
        out[i] = domains[key]
    return out
