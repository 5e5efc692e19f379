"""``source: lust``: the LuST scenario of Luxembourg (``mobility.lust``): rebuilt from its OSM
topology and published demand (cached by content), or a clone of the full scenario, run in SUMO."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from .base import SumoKind


class LustKind(SumoKind):
    name = "lust"
    reads: ClassVar[tuple[str, ...]] = ("lust", *SumoKind.reads)
    cache_section = "lust"

    def sumo_inputs(self, m: Any) -> dict[str, Any]:
        """LuST's files, and its run settings with the scenario's ``extra_args`` and
        ``time_to_teleport`` on top (the same the demand was calibrated with)."""
        from mobility import lust

        s = m.sumo
        return lust.sumo_inputs(
            m.lust, backend=s.backend, extra_args=list(s.extra_args), time_to_teleport=s.time_to_teleport
        )

    def begin(self, m: Any) -> float | None:
        """The rebuilt demand starts before its window (a warm-up); a clone's own config decides."""
        if m.sumo.begin is not None:
            return m.sumo.begin
        from mobility.lust import lust_begin

        return lust_begin(m.lust)

    def shipping(self, m: Any, placeholder: str) -> tuple[Path, dict[str, Any]] | None:
        """A rebuild's sources (the node builds LuST from the same content: the same traffic)."""
        if "clone_dir" in m.lust:
            return None
        from mobility.lust.demand import _config_from

        source_dir = _config_from(dict(m.lust)).resolve_osm().parent
        return source_dir, {"lust": {**m.lust, "osm_file": None, "source_dir": placeholder}}
