"""``source: files``: your own SUMO network and routes (``net_file`` and ``route_files``, or a
``config_file`` naming them), run in SUMO."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from mobility.sumo_files import sumocfg_additionals, sumocfg_inputs

from .base import Bounds, SourceInputError, SumoKind, check_file, file_network


class FilesKind(SumoKind):
    name = "files"
    reads: ClassVar[tuple[str, ...]] = ("net_file", "route_files", "config_file", *SumoKind.reads)

    def require(self, m: Any) -> None:
        if not (m.config_file or (m.net_file and m.route_files)):
            raise ValueError("source 'files' needs config_file, or net_file and route_files")

    def sumo_inputs(self, m: Any) -> dict[str, Any]:
        return {"config_file": m.config_file, "net_file": m.net_file, "route_files": list(m.route_files)}

    def _net(self, m: Any) -> str | None:
        """The network the RSUs stand on: ``net_file``, else the one ``config_file`` names."""
        if m.net_file:
            return m.net_file
        return sumocfg_inputs(m.config_file)["net_file"] if m.config_file else None

    def network(self, m: Any) -> tuple[Bounds, str] | None:
        return file_network(self._net(m))

    def geo_network(self, m: Any) -> str | None:
        return self._net(m)

    def network_file(self, m: Any) -> str | None:
        return self._net(m)

    def input_files(self, m: Any) -> list[str]:
        files = [m.config_file, m.net_file, *m.route_files]
        if m.config_file:
            named = sumocfg_inputs(m.config_file)
            files += [named["net_file"], *named["route_files"], *sumocfg_additionals(m.config_file)]
        return [f for f in files if f]

    def check(self, m: Any) -> None:
        if m.config_file:
            check_file("config_file", m.config_file, sumo=True)
            named = sumocfg_inputs(m.config_file)
            if not m.net_file:
                if not named["net_file"]:
                    if m.rsu_config().placement == "auto":
                        raise SourceInputError(
                            f"mobility.config_file: {m.config_file} names no net-file, and "
                            "mobility.rsus.placement 'auto' needs the network: give mobility.net_file"
                        )
                elif not Path(named["net_file"]).is_file():
                    raise SourceInputError(
                        f"mobility.config_file: the net-file it names does not exist: {named['net_file']}"
                    )
            for r in named["route_files"]:
                if not Path(r).is_file():
                    raise SourceInputError(f"mobility.config_file: a route file it names does not exist: {r}")
        if m.net_file:
            check_file("net_file", m.net_file, sumo=True)
        for i, r in enumerate(m.route_files):
            check_file(f"route_files[{i}]", r, sumo=True)
