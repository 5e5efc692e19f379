"""Path-loss models by name (:data:`PATH_LOSS`): the loss in dB of a link at a ground distance, in
its state (:class:`vmc_sim.radio.link_state.LinkState`: LOS, NLOSv, NLOS).

Every model receives the 2-D ground distance (clamped to ``channel.min_distance_m``), the 3-D
distance between the antennas (the 3GPP formulas are written in terms of it, ``fc`` in GHz) and
the link's state. The models of one state only ignore it:

* ``tr37885_urban_los`` (default): ``38.77 + 16.7 log10(d) + 18.2 log10(fc)``, 3GPP TR 37.885
  Table 6.2.1-1, urban LOS (also used there for NLOSv before the blockage loss).
* ``tr37885_highway_los``: ``32.4 + 20 log10(d) + 20 log10(fc)``, same table, highway LOS.
* ``tr38901_umi_los``: UMi-Street Canyon LOS of 3GPP TR 38.901 Table 7.4.1-1, for an RSU mounted
  like a small cell: ``32.4 + 21 log10(d) + 20 log10(fc)`` up to the breakpoint
  ``d'_BP = 4 h'_RSU h'_veh fc / c`` (``h' = h - 1 m``, ``c = 3e8``), then
  ``32.4 + 40 log10(d) + 20 log10(fc) - 9.5 log10(d'_BP^2 + (h_RSU - h_veh)^2)``.
* ``free_space``: Friis, ``20 log10(4 pi d f / c)``.
* ``log_distance``: free space up to ``log_distance_ref_m``, then ``10 n log10(d / d0)`` more.

The models of every state carry the standard's log-normal shadowing per state (its standard
deviation and decorrelation distance), which ``channel.shadowing_sigma_db`` and
``shadowing_decorrelation_m`` override when given:

* ``tr37885_urban``: 3GPP TR 37.885 Table 6.2.1-1, urban: LOS as ``tr37885_urban_los``; NLOSv the
  LOS loss (the vehicle's blockage loss is added by the link's state, :mod:`.blockage`); NLOS
  ``36.85 + 30 log10(d) + 18.9 log10(fc)``. Shadowing 3 dB (LOS, NLOSv), 4 dB (NLOS), decorrelated
  over 10 m (LOS) and 13 m (NLOSv, NLOS), Table 6.2.3-1 (ns-3's ``ThreeGppV2vUrbanPropagationLossModel``).
* ``tr37885_highway``: the same with highway LOS (``tr37885_highway_los``), as ns-3's
  ``ThreeGppV2vHighwayPropagationLossModel`` (which keeps the urban NLOS loss and shadowing).
* ``tr38901_umi``: TR 38.901 Table 7.4.1-1, UMi street canyon: LOS as ``tr38901_umi_los``, NLOS
  ``max(PL_LOS, 35.3 log10(d) + 22.4 + 21.3 log10(fc) - 0.3 (h_veh - 1.5))``, NLOSv the LOS loss;
  shadowing 4 dB (LOS, NLOSv) and 7.82 dB (NLOS), decorrelated over 10 m and 13 m (Table 7.6.3.1-2).

A model of your own is a :class:`PathLossModel` added with ``PATH_LOSS.add(name, model)`` (in a
module the scenario names under ``plugins``); ``channel.path_loss_model`` then names it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fl_core.registry import Registry

from .link_state import LinkState

SPEED_OF_LIGHT = 299_792_458.0
_C_3GPP = 3.0e8


def _no_check(cfg: Any) -> None:
    return None


@dataclass(frozen=True)
class PathLossModel:
    """One path-loss model: ``loss(d2d, d3d, cfg, state)`` in dB (before shadowing and any blockage
    loss), ``check(cfg)``, which raises ValueError naming a ``channel`` field the model cannot work
    with, and the standard's shadowing per state (``shadowing_db``, ``decorrelation_m``; empty for
    a model that states none)."""

    loss: Callable[[float, float, Any, LinkState], float]
    check: Callable[[Any], None] = _no_check
    shadowing_db: Mapping[LinkState, float] = field(default_factory=dict)
    decorrelation_m: Mapping[LinkState, float] = field(default_factory=dict)


def _one_state(f: Callable[[float, float, Any], float]) -> Callable[[float, float, Any, LinkState], float]:
    """A formula of one state (the idealised LOS models): the link's state is not looked at."""
    return lambda d2d, d3d, cfg, state: f(d2d, d3d, cfg)


def fspl_db(d3d: float, carrier_ghz: float) -> float:
    """Free-space path loss (Friis) at 3-D distance ``d3d`` metres."""
    return 20.0 * math.log10(4.0 * math.pi * d3d * carrier_ghz * 1e9 / SPEED_OF_LIGHT)


def _urban_los(d2d: float, d3d: float, cfg: Any) -> float:
    return 38.77 + 16.7 * math.log10(d3d) + 18.2 * math.log10(cfg.carrier_ghz)


def _highway_los(d2d: float, d3d: float, cfg: Any) -> float:
    return 32.4 + 20.0 * math.log10(d3d) + 20.0 * math.log10(cfg.carrier_ghz)


def _umi_los(d2d: float, d3d: float, cfg: Any) -> float:
    fc = cfg.carrier_ghz
    d_bp = 4.0 * (cfg.rsu_height_m - 1.0) * (cfg.vehicle_height_m - 1.0) * fc * 1e9 / _C_3GPP
    if d2d <= d_bp:
        return 32.4 + 21.0 * math.log10(d3d) + 20.0 * math.log10(fc)
    dh = cfg.rsu_height_m - cfg.vehicle_height_m
    return 32.4 + 40.0 * math.log10(d3d) + 20.0 * math.log10(fc) - 9.5 * math.log10(d_bp**2 + dh**2)


def _umi_heights(cfg: Any) -> None:
    for name in ("rsu_height_m", "vehicle_height_m"):
        if getattr(cfg, name) <= 1.0:
            raise ValueError(
                f"channel.{name} must exceed 1 m for tr38901_umi_los (effective height h - 1 m), got {getattr(cfg, name)!r}"
            )


def _log_distance(d2d: float, d3d: float, cfg: Any) -> float:
    d0 = cfg.log_distance_ref_m
    if d3d <= d0:
        return fspl_db(d3d, cfg.carrier_ghz)
    return fspl_db(d0, cfg.carrier_ghz) + 10.0 * cfg.path_loss_exponent * math.log10(d3d / d0)


def _urban_nlos(d2d: float, d3d: float, cfg: Any) -> float:
    return 36.85 + 30.0 * math.log10(d3d) + 18.9 * math.log10(cfg.carrier_ghz)


def _umi_nlos(d2d: float, d3d: float, cfg: Any) -> float:
    fc = cfg.carrier_ghz
    nlos = 35.3 * math.log10(d3d) + 22.4 + 21.3 * math.log10(fc) - 0.3 * (cfg.vehicle_height_m - 1.5)
    return max(_umi_los(d2d, d3d, cfg), nlos)


def _by_state(
    los: Callable[[float, float, Any], float], nlos: Callable[[float, float, Any], float]
) -> Callable[[float, float, Any, LinkState], float]:
    """LOS and NLOSv by ``los`` (a vehicle's blockage loss is added apart), NLOS by ``nlos``."""
    return lambda d2d, d3d, cfg, state: nlos(d2d, d3d, cfg) if state is LinkState.NLOS else los(d2d, d3d, cfg)


_V2V_SIGMA = {LinkState.LOS: 3.0, LinkState.NLOSV: 3.0, LinkState.NLOS: 4.0}
_V2V_DECORRELATION = {LinkState.LOS: 10.0, LinkState.NLOSV: 13.0, LinkState.NLOS: 13.0}

PATH_LOSS: Registry[PathLossModel] = Registry(
    "path-loss model",
    {
        "tr37885_urban": PathLossModel(_by_state(_urban_los, _urban_nlos), _no_check, _V2V_SIGMA, _V2V_DECORRELATION),
        "tr37885_highway": PathLossModel(
            _by_state(_highway_los, _urban_nlos), _no_check, _V2V_SIGMA, _V2V_DECORRELATION
        ),
        "tr38901_umi": PathLossModel(
            _by_state(_umi_los, _umi_nlos),
            _umi_heights,
            {LinkState.LOS: 4.0, LinkState.NLOSV: 4.0, LinkState.NLOS: 7.82},
            {LinkState.LOS: 10.0, LinkState.NLOSV: 10.0, LinkState.NLOS: 13.0},
        ),
        "tr37885_urban_los": PathLossModel(_one_state(_urban_los)),
        "tr37885_highway_los": PathLossModel(_one_state(_highway_los)),
        "tr38901_umi_los": PathLossModel(_one_state(_umi_los), _umi_heights),
        "free_space": PathLossModel(_one_state(lambda d2d, d3d, cfg: fspl_db(d3d, cfg.carrier_ghz))),
        "log_distance": PathLossModel(_one_state(_log_distance)),
    },
)
