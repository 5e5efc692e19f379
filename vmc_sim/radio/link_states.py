"""Link-state models by name (:data:`LINK_STATES`): which state a vehicle-RSU link is in, at every
update of its rate (:class:`vmc_sim.radio.link_state.LinkState`: LOS, NLOSv, NLOS).

* ``city`` (default): NLOS where a building stands on the line between the antennas (the
  scenario's building footprints), NLOSv where another vehicle does (from the co-simulation's own
  positions: a blocker is a disc of ``blocker_radius_m`` that blocks where it stands higher than the
  line between the antennas at that point), LOS otherwise. A scenario without buildings has them
  stood in by TR 38.901's UMi street-canyon LOS probability (Table 7.4.2-1,
  ``P = min(18/d, 1) (1 - e^{-d/36}) + e^{-d/36}``), the model of a street-level small cell: a link
  is NLOS with probability ``1 - P`` (our choice: TR 37.885 decides NLOS by the buildings of its
  urban grid layout, which a scenario without buildings does not have). The run summary names it.
* ``tr37885_urban`` and ``tr37885_highway``: TR 37.885 Table 6.2-1 as ns-3's
  ``ThreeGppV2vUrbanChannelConditionModel`` and ``...HighwayChannelConditionModel`` implement it:
  NLOS where buildings block (none without buildings), else LOS with probability
  ``min(1, 1.05 e^{-0.0114 d})`` (urban; highway ``min(1, 2.1013e-6 d^2 - 0.002 d + 1.0193)`` up to
  475 m, ``max(0, 0.54 - 0.001 (d - 475))`` beyond) and NLOSv otherwise, the blocker a type-3
  vehicle (3 m) with probability ``truck_share``, else 1.6 m.
* ``tr38901_umi``: NLOS where buildings block, else LOS with TR 38.901's UMi probability above.
* ``los``: every link is LOS (the idealised channel).

A drawn state is kept consistent while the vehicle moves: each link carries a standard normal
``g`` that decorrelates over the distance the vehicle moves (``g <- r g + sqrt(1 - r^2) n``,
``r = exp(-moved / D)``, as its shadowing does), and the link is in the probability's state while
``Phi(g)`` is below it; so the state has the table's probability at every distance and changes
where the vehicle moved far enough (``D``: ``building_decorrelation_m`` for buildings stood in by a
probability, 50 m by default, as TR 38.901's spatially consistent LOS state for UMi;
``state_decorrelation_m`` for the vehicle split, 10 m). ns-3 draws a link's state once and keeps
it (its update period is 0 by default); only the marginal probability is compared with it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from fl_core.registry import Registry

from .link_state import LinkState

TRUCK_HEIGHT_M = 3.0  # TR 37.885 vehicle type 3; ns-3's blocker height for it
CAR_HEIGHT_M = 1.6  # TR 37.885 vehicle types 1 and 2 (ns-3's blocker height)


class Buildings(Protocol):
    """What the radio needs of a map's buildings: whether one stands on a 2-D segment, and the walls
    and metres inside that segment crosses (:class:`mobility.buildings.Buildings`)."""

    def blocks(self, x1: float, y1: float, x2: float, y2: float) -> bool: ...

    def crossing(self, x1: float, y1: float, x2: float, y2: float) -> Any: ...


class Surroundings(Protocol):
    """What a link sees around it: the buildings (None: the scenario has none) and the other
    vehicles near a point, as ``(id, x, y, height)``."""

    buildings: Buildings | None

    def vehicles_near(self, x: float, y: float, radius: float) -> Sequence[tuple[Any, float, float, float]]: ...


@dataclass
class StateMemory:
    """What a link remembers between updates to keep its state consistent while it moves."""

    g_building: float | None = None
    g_vehicle: float | None = None
    truck: float | None = None


@dataclass(frozen=True)
class Link:
    """One link at one update: the RSU's and the vehicle's ground positions, the antenna heights,
    how far the vehicle moved since the link's previous update (None: its first), and its vehicle."""

    rsu: tuple[float, float]
    pos: tuple[float, float]
    rsu_height_m: float
    vehicle_height_m: float
    moved: float | None
    vehicle: Any = None

    @property
    def d2d(self) -> float:
        return math.hypot(self.pos[0] - self.rsu[0], self.pos[1] - self.rsu[1])


def _advance(g: float | None, moved: float | None, decorrelation_m: float, rng: np.random.Generator) -> float:
    """A standard normal that decorrelates over the distance moved (a fresh draw the first time)."""
    if g is None or moved is None:
        return float(rng.standard_normal())
    if moved <= 0:
        return g
    r = math.exp(-moved / decorrelation_m)
    return r * g + math.sqrt(1.0 - r * r) * float(rng.standard_normal())


def _phi(g: float) -> float:
    return 0.5 * (1.0 + math.erf(g / math.sqrt(2.0)))


def p_los_v2v_urban(d: float) -> float:
    """TR 37.885 Table 6.2-1, urban: P(LOS) among the links no building blocks."""
    return min(1.0, 1.05 * math.exp(-0.0114 * d))


def p_los_v2v_highway(d: float) -> float:
    """TR 37.885 Table 6.2-1, highway: P(LOS) among the links no building blocks."""
    if d <= 475.0:
        return min(1.0, 2.1013e-6 * d * d - 0.002 * d + 1.0193)
    return max(0.0, 0.54 - 0.001 * (d - 475.0))


def p_los_umi(d: float) -> float:
    """TR 38.901 Table 7.4.2-1, UMi street canyon: P(LOS) at 2-D distance ``d`` (m)."""
    if d <= 18.0:
        return 1.0
    return 18.0 / d + math.exp(-d / 36.0) * (1.0 - 18.0 / d)


@dataclass(frozen=True)
class LinkStateModel:
    """One link-state model: ``decide(link, memory, around, cfg, rng)`` returns the state and, for
    NLOSv, the blocker's height (m); ``stand_in`` names what stands in for buildings when a
    scenario has none (None: nothing)."""

    decide: Callable[[Link, StateMemory, Surroundings | None, Any, np.random.Generator], tuple[LinkState, float | None]]
    stand_in: str | None = None


def _building_nlos(
    link: Link,
    mem: StateMemory,
    around: Surroundings | None,
    cfg: Any,
    rng: np.random.Generator,
    p_los_stand_in: Callable[[float], float] | None,
) -> bool:
    """NLOS by the buildings, or by the stand-in probability when there are none."""
    if around is not None and around.buildings is not None:
        return around.buildings.blocks(link.rsu[0], link.rsu[1], link.pos[0], link.pos[1])
    if p_los_stand_in is None:
        return False
    mem.g_building = _advance(mem.g_building, link.moved, cfg.building_decorrelation_m, rng)
    return _phi(mem.g_building) >= p_los_stand_in(link.d2d)


def _table(p_los: Callable[[float], float]):
    def decide(link: Link, mem: StateMemory, around: Surroundings | None, cfg: Any, rng: np.random.Generator):
        if _building_nlos(link, mem, around, cfg, rng, None):
            return LinkState.NLOS, None
        mem.g_vehicle = _advance(mem.g_vehicle, link.moved, cfg.state_decorrelation_m, rng)
        if _phi(mem.g_vehicle) < p_los(link.d2d):
            return LinkState.LOS, None
        if mem.truck is None:
            mem.truck = float(rng.random())  # the blocker's type, kept for the link (as its state)
        return LinkState.NLOSV, TRUCK_HEIGHT_M if mem.truck < cfg.truck_share else CAR_HEIGHT_M

    return decide


def _umi(link: Link, mem: StateMemory, around: Surroundings | None, cfg: Any, rng: np.random.Generator):
    nlos = _building_nlos(link, mem, around, cfg, rng, p_los_umi)
    return (LinkState.NLOS if nlos else LinkState.LOS), None


def blocker_height(link: Link, around: Surroundings | None, radius: float) -> float | None:
    """The height of the tallest other vehicle standing on the line between the antennas (a disc of
    ``radius`` m that reaches above the line at its nearest point), or None."""
    if around is None:
        return None
    (x1, y1), (x2, y2) = link.pos, link.rsu
    dx, dy = x2 - x1, y2 - y1
    length2 = dx * dx + dy * dy
    if length2 <= 0:
        return None
    mid = ((x1 + x2) / 2.0, (y1 + y2) / 2.0)
    tallest = None
    for vid, bx, by, height in around.vehicles_near(mid[0], mid[1], math.sqrt(length2) / 2.0 + radius):
        if vid == link.vehicle:
            continue
        t = max(0.0, min(1.0, ((bx - x1) * dx + (by - y1) * dy) / length2))
        if math.hypot(x1 + t * dx - bx, y1 + t * dy - by) > radius:
            continue
        line = link.vehicle_height_m + t * (link.rsu_height_m - link.vehicle_height_m)
        if height > line and (tallest is None or height > tallest):
            tallest = height
    return tallest


def _city(link: Link, mem: StateMemory, around: Surroundings | None, cfg: Any, rng: np.random.Generator):
    if _building_nlos(link, mem, around, cfg, rng, p_los_umi):
        return LinkState.NLOS, None
    height = blocker_height(link, around, cfg.blocker_radius_m)
    return (LinkState.LOS, None) if height is None else (LinkState.NLOSV, height)


LINK_STATES: Registry[LinkStateModel] = Registry(
    "link-state model",
    {
        "city": LinkStateModel(_city, stand_in="TR 38.901 UMi street canyon LOS probability"),
        "tr37885_urban": LinkStateModel(_table(p_los_v2v_urban)),
        "tr37885_highway": LinkStateModel(_table(p_los_v2v_highway)),
        "tr38901_umi": LinkStateModel(_umi, stand_in="TR 38.901 UMi street canyon LOS probability"),
        "los": LinkStateModel(lambda link, mem, around, cfg, rng: (LinkState.LOS, None)),
    },
)


def blockage_loss_db(blocker_m: float, d3d: float, cfg: Any, rng: np.random.Generator) -> float:
    """A vehicle's blockage loss of an NLOSv link (TR 37.885 6.2.1, as ns-3 applies it): 0 dB when
    both antennas stand above the blocker; else ``max(0, X)`` with X log-normal of mean ``mu`` and
    standard deviation ``sigma`` dB: ``mu = 9 + max(0, 15 log10(d) - 41)``, ``sigma = 4.5`` when the
    blocker stands above both antennas, ``mu = 5 + max(0, 15 log10(d) - 41)``, ``sigma = 4`` otherwise.
    (The standard states the mean and deviation of X; the log-normal's parameters follow from them in
    ln units, as ns-3 computes them since 3.34: measured against ns-3 3.44 in
    reports/channel_validation/. Before 3.34 ns-3 took log10 units, a mean near 2 dB instead of 5.)"""
    law = _blockage_law(blocker_m, d3d, cfg)
    if law is None:
        return 0.0
    mu, s2 = law
    return max(0.0, float(rng.lognormal(math.log(mu) - s2 / 2.0, math.sqrt(s2))))


def median_blockage_loss_db(blocker_m: float, d3d: float, cfg: Any) -> float:
    """The median of :func:`blockage_loss_db`'s law (the loss of the median NLOSv link)."""
    law = _blockage_law(blocker_m, d3d, cfg)
    return 0.0 if law is None else math.exp(math.log(law[0]) - law[1] / 2.0)


def _blockage_law(blocker_m: float, d3d: float, cfg: Any) -> tuple[float, float] | None:
    """The blockage loss's mean ``mu`` (dB) and the variance of its logarithm; None: no loss."""
    low, high = sorted((cfg.rsu_height_m, cfg.vehicle_height_m))
    if low > blocker_m:
        return None
    extra = max(0.0, 15.0 * math.log10(d3d) - 41.0)
    mu, sigma = (9.0 + extra, 4.5) if high < blocker_m else (5.0 + extra, 4.0)
    return mu, math.log(1.0 + (sigma / mu) ** 2)
