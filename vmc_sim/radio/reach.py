"""How far a link still carries data: the ground distance at which the median link in each state
still holds the lowest MCS (or CQI) of the rate model, alone on its channel.

The median link has no shadowing (its law's median is 0 dB) and, NLOSv, the median of a vehicle's
blockage loss (:func:`vmc_sim.radio.link_states.median_blockage_loss_db`, a blocker of
``blocker_height_m``). Beyond this distance half of such links are in outage. A map of a run draws
it around every RSU (:mod:`vmc_sim.rundir.maps`)."""

from __future__ import annotations

import math

from .link_budget import ChannelConfig, check_direction, rate_bps
from .link_state import LinkState
from .link_states import median_blockage_loss_db

FARTHEST_M = 100_000.0
"""The search stops here: a link that still carries data this far is reported as reaching it."""


def link_states(cfg: ChannelConfig) -> list[LinkState]:
    """The states a link can take under ``cfg``: LOS alone for the idealised channel
    (``link_state_model: los``), else LOS, NLOSv and NLOS."""
    return [LinkState.LOS] if cfg.link_state_model == "los" else list(LinkState)


def median_rate_bps(distance_m: float, state: LinkState, cfg: ChannelConfig, direction: str = "uplink") -> float:
    """The rate (bit/s) of the median link in ``state`` at ``distance_m`` (ground), alone on its channel."""
    extra = 0.0
    if state is LinkState.NLOSV:
        d3d = math.hypot(max(distance_m, cfg.min_distance_m), cfg.rsu_height_m - cfg.vehicle_height_m)
        extra = median_blockage_loss_db(cfg.blocker_height_m, d3d, cfg)
    return rate_bps(distance_m, cfg.bandwidth_hz, direction, cfg, extra, state)


def median_reach_m(state: LinkState, cfg: ChannelConfig, direction: str = "uplink", tolerance_m: float = 0.1) -> float:
    """The largest ground distance (m, to ``tolerance_m``) at which the median link in ``state``
    still holds the lowest MCS (a rate above 0); 0 when it holds it nowhere. The rate falls with the
    distance, so the edge is found by bisection."""
    check_direction(direction)
    near = cfg.min_distance_m
    if median_rate_bps(near, state, cfg, direction) <= 0.0:
        return 0.0
    far = max(2.0 * near, 1.0)
    while median_rate_bps(far, state, cfg, direction) > 0.0:
        if far >= FARTHEST_M:
            return FARTHEST_M
        near, far = far, min(2.0 * far, FARTHEST_M)
    while far - near > tolerance_m:
        mid = (near + far) / 2.0
        if median_rate_bps(mid, state, cfg, direction) > 0.0:
            near = mid
        else:
            far = mid
    return near
