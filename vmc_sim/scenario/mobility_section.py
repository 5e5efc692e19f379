"""A scenario's ``mobility`` section: where join/leave events come from, and SUMO's own outputs.

``source`` names a kind of :data:`vmc_sim.sources.registry.SOURCES`: the embedded ``city``, your
SUMO ``files``, the ``lust`` rebuild (these three run SUMO), a recorded ``trace`` of an earlier run,
recorded SUMO ``fcd`` (floating car data), or one of your own. Each kind reads only the fields it
declares (:func:`source_fields` enforces it). ``outputs`` has a SUMO-running source write SUMO's
standard outputs into the run directory (:mod:`mobility.sumo_outputs`); a source that runs no SUMO
refuses it.
"""

from __future__ import annotations

from typing import Any, Literal, cast

from pydantic import Field, field_validator, model_validator

from mobility.city import CityConfig
from mobility.coverage import CoverageConfig
from mobility.region_cut import CutTiming, RegionCut
from mobility.rsu import RsuConfig

from ..sources.registry import SOURCES
from .config import Strict, check_finite, dataclass_checker

MOBILITY_DEFAULTS: dict[str, Any] = {
    "rsus": {"placement": "auto", "count": 1, "radius": 200.0},
    "coverage": {"state_interval": 5.0},
}
"""The documented defaults of the mobility section where they differ from the dataclasses' own."""

SumoOutput = Literal["fcd", "tripinfo", "summary"]

EVERY_SOURCE_READS: tuple[str, ...] = ("source", "sumo.step_length", "buildings")
"""Fields a run reads whatever its source: the engine's clock steps by ``sumo.step_length`` (a trace
or an FCD replay is sampled at those steps too); the radio reads the ``buildings``."""


def _declared(source: str) -> tuple[str, ...]:
    """The fields source ``source`` reads (its kind's :attr:`vmc_sim.sources.base.SourceKind.reads`)."""
    return (*EVERY_SOURCE_READS, *SOURCES[source].reads)


class UndeclaredReadError(RuntimeError):
    """Code that opens a mobility source read a field its kind does not declare it reads."""


def _overlaps(path: str, field: str) -> bool:
    """Whether the dotted fields ``path`` and ``field`` are the same, or one lies inside the other."""
    return path == field or path.startswith(field + ".") or field.startswith(path + ".")


def source_reads(source: str, path: str) -> bool:
    """Whether a run with mobility source ``source`` reads the mobility field ``path`` (dotted, without
    ``mobility.``), a field inside it or the section around it: only then can setting it change the run."""
    return any(_overlaps(path, f) for f in _declared(source))


_METHOD_FIELDS = {
    "rsu_config": "rsus",
    "coverage_config": "coverage",
    "city_config": "city",
    "region_cut": "region",
    "runs_sumo": "source",
}
"""The section's methods and the field each one reads."""


class _SourceFields:
    """A mobility section, or a section inside it, as one source may read it."""

    def __init__(self, section: Any, source: str, prefix: str = "") -> None:
        self._section, self._source, self._prefix = section, source, prefix

    def __getattr__(self, name: str) -> Any:
        path = self._prefix + name if self._prefix else _METHOD_FIELDS.get(name, name)
        if not source_reads(self._source, path):
            raise UndeclaredReadError(
                f"mobility source {self._source!r} read mobility.{path}, which its kind does not declare in "
                "its reads (vmc_sim/sources/); declare it there (a sweep tells users that a field its source does "
                "not read has no effect)"
            )
        value = getattr(self._section, name)
        declared = _declared(self._source)
        if isinstance(value, Strict) and not any(path == f or path.startswith(f + ".") for f in declared):
            return _SourceFields(value, self._source, path + ".")  # only some of its fields are read
        return value


def source_fields(section: MobilitySection) -> MobilitySection:
    """``section`` as its source may read it: a field its kind does not declare it reads raises
    :class:`UndeclaredReadError` when read, so the declaration cannot drift from the code."""
    return cast("MobilitySection", _SourceFields(section, section.source))


class SumoSection(Strict):
    backend: Literal["libsumo", "traci"] = Field(
        "libsumo", description="libsumo (in process) or traci (a SUMO child process)"
    )
    step_length: float = Field(
        1.0, gt=0, description="simulated seconds per SUMO step (source fcd: per step of its clock)"
    )
    seed: int = Field(42, ge=0, description="SUMO's random seed")
    begin: float | None = Field(
        None,
        description="SUMO begin time in seconds (null: 0, or the LuST window's start; source fcd: the first sample's time)",
    )
    time_to_teleport: float | None = Field(None, description="SUMO --time-to-teleport (null: SUMO's default)")
    extra_args: list[str] = Field(default_factory=list, description="more SUMO command-line options")


class RegionSection(Strict):
    """``mobility.region``: SUMO steps only a cut of the network around the RSUs (:mod:`mobility.region_cut`)."""

    buffer: float = Field(
        ...,
        ge=0,
        description="metres the cut reaches beyond the box around every RSU's coverage circle",
    )
    timing: Literal["exit_times", "free_flow"] = Field(
        "exit_times",
        description="exit_times: a vehicle enters the cut when it reached the region in one bare-SUMO run of the "
        "whole network (made once per traffic and cached with the cut); free_flow: when it would at the "
        "edges' speed limits times speed_factor (no reference run; congestion outside the cut is lost)",
    )
    speed_factor: float = Field(
        1.0, gt=0, description="timing free_flow: the factor on the speed limits that times a vehicle's way in"
    )

    def cut(self) -> RegionCut:
        return RegionCut(buffer=self.buffer, timing=CutTiming(self.timing), speed_factor=self.speed_factor)


class MobilitySection(Strict):
    source: str = Field(
        "city",
        description="city (embedded grid), files (your SUMO network), lust (the LuST rebuild), trace (a recorded run), fcd (SUMO floating car data: coverage and events computed from its positions as a live run's)",
    )
    city: dict[str, Any] = Field(default_factory=dict)
    net_file: str | None = Field(
        None,
        description="source files: a SUMO network (<net>), relative to the scenario file; source fcd: optional, the network the FCD was recorded on (needed by rsus.placement auto, lon/lat positions and fcd_geo; a position more than 50 m outside its bounds is refused)",
    )
    route_files: list[str] = Field(
        default_factory=list,
        description="source files: route files (<routes>) for net_file; source fcd: optional route or additional files whose <vType> maxSpeed (or vClass default) can raise the default fcd_max_speed",
    )
    config_file: str | None = Field(
        None, description="source files: a .sumocfg (instead of, or besides, net_file and route_files)"
    )
    lust: dict[str, Any] = Field(default_factory=dict)
    trace: str | None = Field(None, description="source trace: a trace.jsonl of an earlier run")
    fcd_file: str | None = Field(
        None,
        description="source fcd: SUMO's --fcd-output (XML, or CSV when the name ends in .csv; .gz allowed), network x/y (lon/lat with fcd_geo), relative to the scenario file; checked whole before the run (a vehicle without x, y or speed, or breaking physics: fcd_max_speed, fcd_invalid, is refused). The clock steps by sumo.step_length from sumo.begin (null: the first sample); between samples further apart than a step positions are linear, within v_max * dt / 2 of the true ones for samples dt apart (mobility/fcd.py)",
    )
    fcd_step_length: float | None = Field(
        None,
        gt=0,
        description="source fcd: the SUMO step length the FCD was recorded with (SUMO stamps a sample with the time its step began: a live run sees it at that time + this); null = sumo.step_length",
    )
    fcd_max_speed: float | None = Field(
        None,
        gt=0,
        description="source fcd: m/s a vehicle may move between two samples (+ 5 m for a lane change); faster is a jump the replay would draw through every cell in between. null = 1.5 x the fastest vehicle type (SUMO's default car, 55.56 m/s, or a faster <vType> of route_files): 83.34 m/s",
    )
    fcd_geo: bool = Field(
        False,
        description="source fcd: true = positions are lon/lat (SUMO's --fcd-output.geo), converted to network x/y with net_file's projection (sumolib, pyproj); false = network x/y, and a file that looks like lon/lat is refused",
    )
    fcd_invalid: Literal["refuse", "drop"] = Field(
        "refuse",
        description="source fcd: refuse (the run, naming the vehicle, time and file) or drop (leave out every vehicle that breaks fcd_max_speed or the network's bounds, listed under mobility.fcd.dropped in manifest.json and in a note from vmc run)",
    )
    density: float = Field(1.0, gt=0, description="demand factor for city, files and lust (SUMO's --scale)")
    sumo: SumoSection = SumoSection()
    rsus: dict[str, Any] = Field(default_factory=lambda: dict(MOBILITY_DEFAULTS["rsus"]))
    coverage: dict[str, Any] = Field(default_factory=lambda: dict(MOBILITY_DEFAULTS["coverage"]))
    buildings: list[str] = Field(
        default_factory=list,
        description="SUMO polygon files (what polyconvert writes from OSM) whose building footprints block the "
        "radio's line of sight (NLOS), relative to the scenario file; the embedded city makes its own "
        "(city.building_setback); none: the link states stand a probability in for them",
    )
    region: RegionSection | None = Field(
        None,
        description="city, files, lust: SUMO steps only the network within region.buffer metres of the RSUs' "
        "coverage, the routes cut to it (mobility/region_cut.py; checked against the whole city in "
        "reports/lust_region_cut/); null = the whole network",
    )
    trace_cache: str | None = Field(
        None,
        description="directory of the content-addressed trace cache (mobility.trace_cache): a live run whose "
        "traffic was recorded before (same SUMO inputs by content, seed, window, RSUs, coverage, SUMO "
        "and mobility code) replays that trace instead of running SUMO, with identical records; "
        "null = off (vmc sweep and tools/lust_case_study.py turn it on); unused by a run with outputs and by "
        "source fcd",
    )
    outputs: list[SumoOutput] = Field(
        default_factory=list,
        description="SUMO's own outputs a run of city, files or lust writes into the run directory: fcd (sumo/fcd.xml), tripinfo (sumo/tripinfo.xml), summary (sumo/summary.xml); each is listed with its SHA-256 and size under sumo_outputs in manifest.json; refused for trace and fcd (no SUMO runs); [] = none",
    )
    fcd_area: Literal["all", "coverage"] = Field(
        "all",
        description="outputs fcd: all (every vehicle) or coverage (SUMO itself keeps the vehicles touching an RSU's coverage circle, given as a 64-gon around it in sumo/coverage.poly.xml: a superset by up to a vehicle length; V2V-relayed members further out are not kept)",
    )

    _city = field_validator("city")(lambda cls, v: dataclass_checker(CityConfig, "mobility.city")(v))
    _rsus = field_validator("rsus")(lambda cls, v: dataclass_checker(RsuConfig, "mobility.rsus")(v))
    _cov = field_validator("coverage")(lambda cls, v: dataclass_checker(CoverageConfig, "mobility.coverage")(v))

    @field_validator("lust")
    @classmethod
    def _lust_finite(cls, v: dict[str, Any]) -> dict[str, Any]:
        """Refuse a NaN or infinite LuST option now; the rest is checked when the rebuild runs."""
        check_finite(v, numeric_strings=False)
        return v

    @field_validator("source")
    @classmethod
    def _known_source(cls, v: str) -> str:
        return SOURCES.canonical(v)  # an unknown one is refused naming the sources there are

    @model_validator(mode="after")
    def _inputs(self) -> MobilitySection:
        kind = SOURCES[self.source]
        kind.require(source_fields(self))
        if self.outputs and not kind.runs_sumo:
            sumo = ", ".join(n for n, k in SOURCES.items() if k.runs_sumo)
            raise ValueError(
                f"mobility.outputs {self.outputs}: source {self.source!r} runs no SUMO, so there are no SUMO "
                f"outputs to write; remove mobility.outputs, or use a source that runs SUMO ({sumo})"
            )
        if len(set(self.outputs)) != len(self.outputs):
            raise ValueError(f"mobility.outputs names an output twice: {self.outputs}")
        return self

    @property
    def runs_sumo(self) -> bool:
        """True for the sources that run SUMO (the others replay what was recorded)."""
        return SOURCES[self.source].runs_sumo

    def city_config(self) -> CityConfig:
        return CityConfig(**self.city)

    def rsu_config(self) -> RsuConfig:
        return RsuConfig(**self.rsus)

    def region_cut(self) -> RegionCut | None:
        """The cut SUMO steps instead of the whole network (None: the whole network)."""
        return None if self.region is None else self.region.cut()

    def coverage_config(self) -> CoverageConfig:
        return CoverageConfig(**self.coverage)
