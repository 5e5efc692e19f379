"""Path-loss models by name (:data:`PATH_LOSS`): the loss in dB of a link at a ground distance.

Every model receives the 2-D ground distance (clamped to ``channel.min_distance_m``) and the 3-D
distance between the antennas (the 3GPP formulas are written in terms of it), ``fc`` in GHz:

* ``tr37885_urban_los`` (default): ``38.77 + 16.7 log10(d) + 18.2 log10(fc)``, 3GPP TR 37.885
  Table 6.2.1-1, urban LOS (also used there for NLOSv before the blockage loss).
* ``tr37885_highway_los``: ``32.4 + 20 log10(d) + 20 log10(fc)``, same table, highway LOS.
* ``tr38901_umi_los``: UMi-Street Canyon LOS of 3GPP TR 38.901 Table 7.4.1-1, for an RSU mounted
  like a small cell: ``32.4 + 21 log10(d) + 20 log10(fc)`` up to the breakpoint
  ``d'_BP = 4 h'_RSU h'_veh fc / c`` (``h' = h - 1 m``, ``c = 3e8``), then
  ``32.4 + 40 log10(d) + 20 log10(fc) - 9.5 log10(d'_BP^2 + (h_RSU - h_veh)^2)``.
* ``free_space``: Friis, ``20 log10(4 pi d f / c)``.
* ``log_distance``: free space up to ``log_distance_ref_m``, then ``10 n log10(d / d0)`` more.

A model of your own is a :class:`PathLossModel` added with ``PATH_LOSS.add(name, model)`` (in a
module the scenario names under ``plugins``); ``channel.path_loss_model`` then names it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fl_core.registry import Registry

SPEED_OF_LIGHT = 299_792_458.0
_C_3GPP = 3.0e8


def _no_check(cfg: Any) -> None:
    return None


@dataclass(frozen=True)
class PathLossModel:
    """One path-loss model: ``loss(d2d, d3d, cfg)`` in dB, and ``check(cfg)``, which raises ValueError
    naming a ``channel`` field the model cannot work with."""

    loss: Callable[[float, float, Any], float]
    check: Callable[[Any], None] = _no_check


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


PATH_LOSS: Registry[PathLossModel] = Registry(
    "path-loss model",
    {
        "tr37885_urban_los": PathLossModel(_urban_los),
        "tr37885_highway_los": PathLossModel(_highway_los),
        "tr38901_umi_los": PathLossModel(_umi_los, _umi_heights),
        "free_space": PathLossModel(lambda d2d, d3d, cfg: fspl_db(d3d, cfg.carrier_ghz)),
        "log_distance": PathLossModel(_log_distance),
    },
)
