"""The simulated-time verbs both kinds of world share: broadcast to clients grouped by RSU,
one uplink transfer, and one job on the shared device (or on board).

Each is a simpy generator that appends what failed to ``timing["failed"]`` and adds its
durations to ``timing`` (``transfer_s``, ``queue_s``, ``compute_sim_s``).
"""

from __future__ import annotations

from typing import Callable, Hashable, Iterable

import simpy

from .channel import RsuChannel
from .device import SharedDevice


def broadcast(
    env: simpy.Environment,
    channels: dict[str, RsuChannel],
    vehicles,
    clients: Iterable[Hashable],
    nbytes: int,
    timing: dict,
):
    """Send ``nbytes`` once per RSU to its ``clients`` still in coverage (worst receiver's rate);
    returns the set of clients that received everything."""
    by_rsu: dict[str, list[Hashable]] = {}
    for c in clients:
        by_rsu.setdefault(vehicles.rsu_of(c) or "", []).append(c)
    got: set[Hashable] = set()
    for rsu, group in sorted(by_rsu.items()):
        reach = [c for c in group if vehicles.reachable(c)]
        for c in sorted(set(group) - set(reach), key=str):  # a set's order varies with the process's hash seed
            timing["failed"].append({"client": c, "tag": "broadcast", "reason": "left_coverage"})
        if not reach or rsu not in channels:
            continue
        res = yield channels[rsu].broadcast(env, reach, nbytes, vehicles.position, vehicles.reachable, tag="broadcast")
        timing["transfer_s"] += res.end - res.start
        for c, r in res.receivers.items():
            if r.ok:
                got.add(c)
            else:
                timing["failed"].append({"client": c, "tag": "broadcast", "reason": r.reason})
    return got


def upload(
    env: simpy.Environment,
    channels: dict[str, RsuChannel],
    vehicles,
    client: Hashable,
    nbytes: int,
    timing: dict,
    tag: str = "upload",
    reachable: Callable[[Hashable], bool] | None = None,
):
    """Send ``nbytes`` from ``client`` to its RSU while ``reachable`` holds; returns success."""
    reachable = reachable or vehicles.reachable
    rsu = vehicles.rsu_of(client)
    if rsu not in channels or not reachable(client):
        timing["failed"].append({"client": client, "tag": tag, "reason": "left_coverage"})
        return False
    res = yield channels[rsu].transfer(env, client, nbytes, "uplink", vehicles.position, reachable, tag=tag)
    timing["transfer_s"] += res.end - res.start
    if not res.ok:
        timing["failed"].append({"client": client, "tag": tag, "reason": res.reason})
    return res.ok


def device_job(env: simpy.Environment, device: SharedDevice | None, seconds: float, timing: dict):
    """Run one job on the shared device (queued, possibly batched) or on an on-board unit
    (``device`` None) for ``seconds``; ``compute_sim_s`` gets the time the job held the device."""
    if seconds <= 0:
        return
    if device is not None:
        t_q = env.now
        start, end = yield device.submit(seconds)
        timing["queue_s"] += start - t_q
        timing["compute_sim_s"] += end - start
    else:
        yield env.timeout(seconds)
        timing["compute_sim_s"] += seconds
