"""What a mobility source is to the co-simulation: a kind of traffic, found by name.

A kind (one file each, registered in :data:`vmc_sim.sources.registry.SOURCES`) says

- which fields of the scenario's mobility section it reads (:attr:`SourceKind.reads`): the section
  shows it no other (:func:`vmc_sim.scenario.mobility_section.source_fields`), and a sweep calls
  every other field without effect;
- what it needs given (:meth:`SourceKind.require`, at validation) and how its input files are
  checked before the run (:meth:`SourceKind.check`);
- which files are its inputs (:meth:`SourceKind.input_files`: digested for a resume, shipped to a
  cluster's nodes) and, where known before the run, the network its RSUs stand on;
- how it opens: the :class:`mobility.source.MobilitySource` it steps and the RSUs it covers. A live
  source records the trace a replay reads (:class:`OpenRequest`).

:class:`SumoKind` is the template of the kinds that run SUMO: a kind gives its SUMO inputs, and the
run, the trace cache and SUMO's own outputs are handled here, once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from mobility.cache import entry_of
from mobility.region_cut import CutTiming, RegionCut, build_cut, cached_cut
from mobility.rsu import Rsu, place_rsus, reaches
from mobility.source import MobilitySource, SumoSource
from mobility.sumo import SumoConfig
from mobility.sumo_files import SumoFileError, check_sumo_file, net_bounds, sumocfg_inputs
from mobility.sumo_outputs import with_outputs
from mobility.trace_cache import CachedTraceSource, RecordingSumoSource, TraceCache, trace_key

Bounds = tuple[float, float, float, float]


class SourceInputError(ValueError):
    """An input of a mobility source is missing or wrong; the message names the mobility field."""


@dataclass(frozen=True)
class OpenRequest:
    """How a run opens its source: the scenario's name and duration, where a live source records its
    trace (None: it records none), whether it may replace that file, and where SUMO writes its own
    outputs (None: it writes none)."""

    scenario: str
    duration: float
    trace: Path | None = None
    overwrite: bool = False
    outputs_dir: Path | None = None


class SourceKind:
    """One kind of mobility source (the module docstring). ``m`` is always the scenario's mobility
    section as this kind may read it."""

    name: ClassVar[str]
    reads: ClassVar[tuple[str, ...]] = ()
    """Mobility fields read (``mobility.`` left out; a name covers what is inside it), besides
    ``source`` and ``sumo.step_length``, which every run reads (the engine's clock steps by it)."""
    runs_sumo: ClassVar[bool] = False
    replays_trace: ClassVar[bool] = False
    """True for a source that replays a recorded trace (it records none)."""

    def require(self, m: Any) -> None:
        """Raise ValueError naming what the section lacks for this kind (no file is read)."""

    def check(self, m: Any) -> None:
        """Raise :class:`SourceInputError` for an input file that is missing or wrong."""

    def input_files(self, m: Any) -> list[str]:
        """Every input file of this kind's traffic (generated inputs are not listed)."""
        return []

    def network(self, m: Any) -> tuple[Bounds, str] | None:
        """The bounds of the network the RSUs stand on and what it is, where known before the run."""
        return None

    def geo_network(self, m: Any) -> str | None:
        """The network file whose lon/lat bounds lon/lat RSUs are checked against, if any."""
        return None

    def network_file(self, m: Any) -> str | None:
        """The SUMO network the traffic moves on, where the source knows it without running SUMO (a
        map of a run draws it; a generated one is built or found in its cache); None: unknown."""
        return None

    def buildings(self, m: Any) -> list[str]:
        """Building-footprint files the source brings besides the scenario's ``mobility.buildings``."""
        return []

    def shipping(self, m: Any, placeholder: str) -> tuple[Path, dict[str, Any]] | None:
        """A directory a cluster node needs besides the input files (shipped under ``placeholder``)
        and the mobility fields that point the node's scenario at it; None when there is none."""
        return None

    def built(self, m: Any, duration: float) -> tuple[list[Path], dict[str, Any]]:
        """Cache entries (:mod:`mobility.cache`) a run of ``duration`` s reads that were built on this
        machine, built here now where that is cheaper than on every node (a cluster ships them once
        and a node uses them instead of building its own), and what changes in the node's mobility
        section so that it looks in its own cache (``{section: {field: value}}``)."""
        return [], {}

    def open(self, m: Any, request: OpenRequest) -> tuple[MobilitySource, list[Rsu]]:
        """The source and the RSUs it covers."""
        raise NotImplementedError(f"mobility source {self.name!r} cannot be opened")


def check_file(field: str, path: str, sumo: bool = False) -> None:
    """Refuse, naming ``mobility.<field>``, a missing file or one of another kind (and, with ``sumo``,
    one whose name SUMO cannot take)."""
    try:
        check_sumo_file(field.split("[")[0], path, sumo=sumo)
    except SumoFileError as e:
        raise SourceInputError(f"mobility.{field}: {e}") from None


def file_network(net: str | None) -> tuple[Bounds, str] | None:
    """The bounds of the SUMO network ``net`` (None if unknown)."""
    if not net or not Path(net).is_file():
        return None
    bounds = net_bounds(net)
    return (bounds, f"the network {net}") if bounds else None


def check_placed_rsus(rsus: list[Rsu], net_file: str | Path | None) -> None:
    """Refuse an RSU, however it was placed, whose coverage reaches no part of the network it stands
    on: checked once the network is known, before any traffic runs."""
    bounds = net_bounds(net_file) if net_file and Path(net_file).is_file() else None
    if bounds is None:
        return
    for rsu in rsus:
        if not reaches(rsu, bounds):
            xmin, ymin, xmax, ymax = bounds
            raise SourceInputError(
                f"mobility.rsus: RSU {rsu.id!r} at ({rsu.x:g}, {rsu.y:g}) lies outside the bounds of the network "
                f"{net_file} (x {xmin:g}..{xmax:g}, y {ymin:g}..{ymax:g} m) by more than its radius of "
                f"{rsu.radius:g} m; no vehicle can reach it"
            )


def cut_scenario_dir(sumo: SumoConfig, rsus: list[Rsu], cut: RegionCut) -> Path:
    """The cache entry of the cut around ``rsus`` (built if it is not yet)."""
    try:
        return build_cut(sumo, rsus, cut).directory
    except ValueError as e:
        raise SourceInputError(f"mobility.region: {e}") from None


def cut_scenario(sumo: SumoConfig, rsus: list[Rsu], cut: RegionCut) -> tuple[SumoConfig, dict[str, Any]]:
    """The run of the cut around ``rsus`` instead of ``sumo``'s whole network, and what the trace's
    header says of it (built once per traffic, :mod:`mobility.region_cut`)."""
    try:
        built = build_cut(sumo, rsus, cut)
    except ValueError as e:
        raise SourceInputError(f"mobility.region: {e}") from None
    made = built.manifest
    return built.sumo, {
        **cut.to_dict(),
        "key": made.get("key"),
        "bounds": made.get("bounds"),
        "edges": made.get("edges"),
        "vehicles": made.get("vehicles"),
        "reference_wall_s": (made.get("reference") or {}).get("wall_s"),
    }


class SumoKind(SourceKind):
    """A source that runs SUMO on inputs the kind gives (:meth:`sumo_inputs`); the run, the trace
    cache (``trace_cache``) and SUMO's own outputs (``outputs``) are handled here."""

    runs_sumo = True
    reads: ClassVar[tuple[str, ...]] = (
        "density",
        "sumo",
        "rsus",
        "coverage",
        "region",
        "trace_cache",
        "outputs",
        "fcd_area",
    )

    cache_section: ClassVar[str | None] = None
    """The mobility section whose ``cache_dir`` says where the kind's builds live (a path of this
    machine: a node's scenario drops it and uses its own cache)."""

    def sumo_inputs(self, m: Any) -> dict[str, Any]:
        """SUMO's inputs (``net_file``, ``route_files``, ``config_file``; ``extra_args`` to replace
        the scenario's), built or found in a cache."""
        raise NotImplementedError

    def built(self, m: Any, duration: float) -> tuple[list[Path], dict[str, Any]]:
        """The builds SUMO's inputs come from (built here if they are not yet) and the region's cut:
        built here when it is timed by free flow (seconds, the same for every seed), shipped when
        found when it is timed by exit times (its reference run is per traffic: a node makes its
        own)."""
        sumo, inputs = self.sumo_config(m, duration)
        files = [inputs.get("net_file"), inputs.get("config_file"), *inputs.get("route_files", [])]
        files += inputs.get("additional_files", [])
        entries = [e for e in (entry_of(f) for f in files if f) if e is not None]
        cut = m.region_cut()
        if cut is not None:
            net = sumo.net_file
            rsus = place_rsus(m.rsu_config(), net)
            if cut.timing is CutTiming.FREE_FLOW:
                entries.append(cut_scenario_dir(sumo, rsus, cut))
            else:
                found = cached_cut(sumo, rsus, cut)
                entries += [found] if found is not None else []
        section = self.cache_section
        patch = {section: {"cache_dir": None}} if section and getattr(m, section).get("cache_dir") else {}
        return list(dict.fromkeys(entries)), patch

    def begin(self, m: Any) -> float | None:
        """SUMO's begin time (``mobility.sumo.begin`` by default)."""
        return m.sumo.begin

    def sumo_config(self, m: Any, duration: float) -> tuple[SumoConfig, dict[str, Any]]:
        """The SUMO run of ``duration`` simulated seconds from its begin, and its inputs.
        ``mobility.density`` becomes SUMO's ``--scale``."""
        inputs = self.sumo_inputs(m)
        s, begin = m.sumo, self.begin(m)
        extra = inputs.pop("extra_args", None)
        sumo = SumoConfig(
            backend=s.backend,
            step_length=s.step_length,
            seed=s.seed,
            begin=begin,
            end=(begin or 0.0) + duration + s.step_length,
            time_to_teleport=s.time_to_teleport,
            scale=m.density,
            extra_args=list(s.extra_args) if extra is None else extra,
            **{k: v for k, v in inputs.items() if v},
        )
        return sumo, inputs

    def open(self, m: Any, request: OpenRequest) -> tuple[MobilitySource, list[Rsu]]:
        sumo, inputs = self.sumo_config(m, request.duration)
        config = inputs.get("config_file")
        net = inputs.get("net_file") or (sumocfg_inputs(config)["net_file"] if config else None)
        rsus = place_rsus(m.rsu_config(), net)
        check_placed_rsus(rsus, net)
        meta: dict[str, Any] = {"scenario": request.scenario, "density": m.density}
        cut = m.region_cut()
        if cut is not None:
            sumo, meta["region"] = cut_scenario(sumo, rsus, cut)
        trace, overwrite = request.trace, request.overwrite
        if m.outputs and request.outputs_dir is not None:  # SUMO must run to write them: no trace cache
            sumo = with_outputs(sumo, m.outputs, request.outputs_dir, rsus=rsus, fcd_area=m.fcd_area)
        elif m.trace_cache and trace is not None:
            cache = TraceCache(m.trace_cache)
            key = trace_key(sumo, rsus, m.coverage_config())
            needed = float(sumo.begin or 0.0) + request.duration - sumo.step_length  # the last step a run reaches
            if cache.copy_to(key, needed, Path(trace), overwrite=overwrite):
                return CachedTraceSource(trace, key), rsus
            recording = RecordingSumoSource(
                sumo,
                rsus,
                m.coverage_config(),
                cache=cache,
                key=key,
                needed_end=needed,
                trace=trace,
                overwrite_trace=overwrite,
                metadata=meta,
            )
            return recording, rsus
        return SumoSource(sumo, rsus, m.coverage_config(), trace=trace, overwrite_trace=overwrite, metadata=meta), rsus
