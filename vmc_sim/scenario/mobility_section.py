"""A scenario's ``mobility`` section: where join/leave events come from, and SUMO's own outputs.

Sources: the embedded ``city``, your SUMO ``files``, the ``lust`` rebuild (these three run SUMO),
a recorded ``trace`` of an earlier run, or recorded SUMO ``fcd`` (floating car data, XML or CSV;
:mod:`mobility.fcd_source`; what it must obey, its speed limit, bounds and lon/lat conversion:
:mod:`mobility.fcd_rules`, set by ``fcd_max_speed``, ``fcd_geo`` and ``fcd_invalid``). ``outputs`` has a SUMO-running source write SUMO's standard outputs
into the run directory (:mod:`mobility.sumo_outputs`); a source that runs no SUMO refuses it.
"""

from __future__ import annotations

from typing import Any, Literal, cast

from pydantic import Field, field_validator, model_validator

from mobility.city import CityConfig
from mobility.coverage import CoverageConfig
from mobility.rsu import RsuConfig

from .config import Strict, check_finite, dataclass_checker

MOBILITY_DEFAULTS: dict[str, Any] = {
    "rsus": {"placement": "auto", "count": 1, "radius": 200.0},
    "coverage": {"state_interval": 5.0},
}
"""The documented defaults of the mobility section where they differ from the dataclasses' own."""

SUMO_SOURCES = ("city", "files", "lust")
"""The sources that run SUMO (the others replay what was recorded)."""

SumoOutput = Literal["fcd", "tripinfo", "summary"]

SOURCE_READS: dict[str, tuple[str, ...]] = {
    "city": ("city", "density", "sumo", "rsus", "coverage", "trace_cache", "outputs", "fcd_area"),
    "files": (
        "net_file",
        "route_files",
        "config_file",
        "density",
        "sumo",
        "rsus",
        "coverage",
        "trace_cache",
        "outputs",
        "fcd_area",
    ),
    # config_file: a LuST clone (lust.clone_dir) places its RSUs on the network the scenario's
    # config_file names (vmc_sim.cosim.open_source), not the clone's
    "lust": ("lust", "config_file", "density", "sumo", "rsus", "coverage", "trace_cache", "outputs", "fcd_area"),
    # route_files: vehicle types whose maxSpeed sets the FCD speed limit (mobility.fcd_rules)
    "fcd": (
        "fcd_file",
        "fcd_step_length",
        "net_file",
        "route_files",
        "sumo.begin",
        "rsus",
        "coverage",
        "fcd_max_speed",
        "fcd_geo",
        "fcd_invalid",
    ),
    "trace": ("trace",),
}
"""The fields of the mobility section (``mobility.`` left out; a name covers what is inside it) each
source reads to make its traffic, besides :data:`EVERY_SOURCE_READS`. The code that opens a source
reads the section through :func:`source_fields`, which refuses any other field, so this table says
what the code does: a sweep notes a grid key whose field its source does not read as without effect."""

EVERY_SOURCE_READS: tuple[str, ...] = ("source", "sumo.step_length")
"""Fields a run reads whatever its source: the engine's clock steps by ``sumo.step_length`` (a trace
or an FCD replay is sampled at those steps too)."""


class UndeclaredReadError(RuntimeError):
    """Code that opens a mobility source read a field :data:`SOURCE_READS` does not declare for it."""


def _overlaps(path: str, field: str) -> bool:
    """Whether the dotted fields ``path`` and ``field`` are the same, or one lies inside the other."""
    return path == field or path.startswith(field + ".") or field.startswith(path + ".")


def source_reads(source: str, path: str) -> bool:
    """Whether a run with mobility source ``source`` reads the mobility field ``path`` (dotted, without
    ``mobility.``), a field inside it or the section around it: only then can setting it change the run."""
    return any(_overlaps(path, f) for f in (*EVERY_SOURCE_READS, *SOURCE_READS[source]))


_METHOD_FIELDS = {"rsu_config": "rsus", "coverage_config": "coverage", "city_config": "city", "runs_sumo": "source"}
"""The section's methods and the field each one reads."""


class _SourceFields:
    """A mobility section, or a section inside it, as one source may read it."""

    def __init__(self, section: Any, source: str, prefix: str = "") -> None:
        self._section, self._source, self._prefix = section, source, prefix

    def __getattr__(self, name: str) -> Any:
        path = self._prefix + name if self._prefix else _METHOD_FIELDS.get(name, name)
        if not source_reads(self._source, path):
            raise UndeclaredReadError(
                f"mobility source {self._source!r} read mobility.{path}, which SOURCE_READS in "
                "vmc_sim/scenario/mobility_section.py does not declare for it; declare it there (a sweep tells users "
                "that a field its source does not read has no effect)"
            )
        value = getattr(self._section, name)
        declared = (*EVERY_SOURCE_READS, *SOURCE_READS[self._source])
        if isinstance(value, Strict) and not any(path == f or path.startswith(f + ".") for f in declared):
            return _SourceFields(value, self._source, path + ".")  # only some of its fields are read
        return value


def source_fields(section: MobilitySection) -> MobilitySection:
    """``section`` as its source may read it: a field :data:`SOURCE_READS` does not declare for the
    source raises :class:`UndeclaredReadError` when read, so the table cannot drift from the code."""
    return cast("MobilitySection", _SourceFields(section, section.source))


class SumoSection(Strict):
    backend: Literal["libsumo", "traci"] = "libsumo"
    step_length: float = Field(1.0, gt=0)
    seed: int = Field(42, ge=0)
    begin: float | None = None
    time_to_teleport: float | None = None
    extra_args: list[str] = Field(default_factory=list)


class MobilitySection(Strict):
    source: Literal["city", "files", "lust", "trace", "fcd"] = "city"
    city: dict[str, Any] = Field(default_factory=dict)
    net_file: str | None = None
    route_files: list[str] = Field(default_factory=list)
    config_file: str | None = None
    lust: dict[str, Any] = Field(default_factory=dict)
    trace: str | None = None
    fcd_file: str | None = None
    fcd_step_length: float | None = Field(None, gt=0)
    fcd_max_speed: float | None = Field(None, gt=0)
    fcd_geo: bool = False
    fcd_invalid: Literal["refuse", "drop"] = "refuse"
    density: float = Field(1.0, gt=0, description="demand factor for city, files and lust (SUMO's --scale)")
    sumo: SumoSection = SumoSection()
    rsus: dict[str, Any] = Field(default_factory=lambda: dict(MOBILITY_DEFAULTS["rsus"]))
    coverage: dict[str, Any] = Field(default_factory=lambda: dict(MOBILITY_DEFAULTS["coverage"]))
    trace_cache: str | None = Field(
        None,
        description="directory of the content-addressed trace cache (mobility.trace_cache): a live run whose "
        "traffic was recorded before (same SUMO inputs by content, seed, window, RSUs, coverage, SUMO "
        "and mobility code) replays that trace instead of running SUMO, with identical records; "
        "null = off (vmc sweep and tools/lust_case_study.py turn it on); unused by a run with outputs and by "
        "source fcd",
    )
    outputs: list[SumoOutput] = Field(default_factory=list)
    fcd_area: Literal["all", "coverage"] = "all"

    _city = field_validator("city")(lambda cls, v: dataclass_checker(CityConfig, "mobility.city")(v))
    _rsus = field_validator("rsus")(lambda cls, v: dataclass_checker(RsuConfig, "mobility.rsus")(v))
    _cov = field_validator("coverage")(lambda cls, v: dataclass_checker(CoverageConfig, "mobility.coverage")(v))

    @field_validator("lust")
    @classmethod
    def _lust_finite(cls, v: dict[str, Any]) -> dict[str, Any]:
        """Refuse a NaN or infinite LuST option now; the rest is checked when the rebuild runs."""
        check_finite(v, numeric_strings=False)
        return v

    @model_validator(mode="after")
    def _inputs(self) -> MobilitySection:
        if self.source == "files" and not (self.config_file or (self.net_file and self.route_files)):
            raise ValueError("source 'files' needs config_file, or net_file and route_files")
        if self.source == "trace" and not self.trace:
            raise ValueError("source 'trace' needs mobility.trace (a trace file)")
        if self.source == "fcd" and not self.fcd_file:
            raise ValueError("source 'fcd' needs mobility.fcd_file (SUMO's --fcd-output, XML or .csv)")
        if self.source == "fcd" and self.fcd_geo and not self.net_file:
            raise ValueError(
                "mobility.fcd_geo: true converts lon/lat to network x/y with the network's projection: give "
                "mobility.net_file (the network the FCD was recorded on)"
            )
        if self.outputs and self.source not in SUMO_SOURCES:
            raise ValueError(
                f"mobility.outputs {self.outputs}: source {self.source!r} runs no SUMO, so there are no SUMO "
                f"outputs to write; remove mobility.outputs, or use a source that runs SUMO ({', '.join(SUMO_SOURCES)})"
            )
        if len(set(self.outputs)) != len(self.outputs):
            raise ValueError(f"mobility.outputs names an output twice: {self.outputs}")
        return self

    @property
    def runs_sumo(self) -> bool:
        """True for the sources that run SUMO (city, files, lust)."""
        return self.source in SUMO_SOURCES

    def city_config(self) -> CityConfig:
        return CityConfig(**self.city)

    def rsu_config(self) -> RsuConfig:
        return RsuConfig(**self.rsus)

    def coverage_config(self) -> CoverageConfig:
        return CoverageConfig(**self.coverage)
