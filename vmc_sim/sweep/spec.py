"""A sweep file validated into a grid of scenarios: the spec, its axes, and the points it expands to."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, StrictInt, ValidationError, ValidationInfo, field_validator

from ..scenario.config import ConfigError, Strict, load_model
from ..scenario.inputs import check_inputs, resolve_paths
from ..scenario.mobility_section import source_reads
from ..scenario.schema import Scenario, load_scenario

ALIASES: dict[str, str] = {
    "density": "mobility.density",
    "rho": "federated.rho",
    "radius": "mobility.rsus.radius",
    "method": "federated.methods",
    "methods": "federated.methods",
    "seed": "seed",
}
"""Convenience grid names and the scenario field each one sets."""


LIST_FIELDS = frozenset({"federated.methods"})
"""Fields that take a list: a bare string grid value ``x`` means ``[x]``."""


EXCLUSIVE: dict[str, str] = {"federated.rho": "federated.subset_size", "federated.subset_size": "federated.rho"}
"""A point that sets the key (fixed ratio or fixed P) clears the other field, unless the grid sets both."""


REPLICATE_SETS: dict[str, tuple[str, ...]] = {
    "seed": ("seed",),
    "traffic": ("mobility.sumo.seed", "mobility.city.seed"),
    "mobility.sumo.seed": ("mobility.sumo.seed",),
    "mobility.city.seed": ("mobility.city.seed",),
    "mobility.rsus.seed": ("mobility.rsus.seed",),
}
"""Names ``replicate_sets`` takes and the scenario seeds each one sets to the replicate's seed:
``seed`` the run seed, ``traffic`` SUMO's seed and the embedded city's demand seed."""

ReplicateSet = Literal["seed", "traffic", "mobility.sumo.seed", "mobility.city.seed", "mobility.rsus.seed"]

DEFAULT_REPLICATE_SETS: tuple[ReplicateSet, ...] = ("seed", "traffic")

MAX_SEED = 2**31
"""Replicate seeds lie in [0, 2^31): every seed field they set accepts them (SUMO's and the city's)."""


class SweepSpec(Strict):
    """A sweep file: the base scenario, the grid and how to run it."""

    name: str = Field("sweep", min_length=1)
    base: str | dict[str, Any] | None = Field(
        None, description="scenario file (relative to the sweep file), inline scenario, or null = embedded default"
    )
    grid: dict[str, list[Any]] = Field(min_length=1, description="dotted scenario field or alias -> values")
    replicate_sets: list[ReplicateSet] = Field(
        default_factory=lambda: list(DEFAULT_REPLICATE_SETS),
        min_length=1,
        description="which scenario seeds each replicate sets to its seed: seed (the run seed), traffic "
        "(mobility.sumo.seed and mobility.city.seed), or one of those fields, or mobility.rsus.seed",
    )
    replicates: StrictInt | list[StrictInt] | None = Field(
        None,
        description="seeds every grid point runs with, each its own run, aggregated per point in summary.csv: "
        "a list of seeds, or n = seeds 0..n-1; null = one run per point with the scenario's seeds",
    )
    engine: Literal["local", "ray"] = "local"
    workers: int = Field(2, gt=0, description="points run at once (local pool; Ray: CPUs of a local instance)")
    address: str | None = Field(None, description="Ray cluster to join (engine ray); null = start a local one")
    shared_dir: bool = Field(
        False,
        description="engine ray: every node mounts the sweep directory at the same path (checked on every node "
        "at start); false: each point's inputs, dataset and results travel through Ray, nothing shared",
    )
    retries: int = Field(2, ge=0, description="engine ray: runs of a point whose worker or node died, each recorded")
    contribution_cache: bool = Field(
        True,
        description="points share one content-addressed contribution cache in the sweep directory, so a "
        "vehicle another point already trained the same way is loaded, not retrained "
        "(a point whose scenario names its own compute.contribution_cache keeps it)",
    )
    trace_cache: bool = Field(
        True,
        description="points share one content-addressed trace cache in the sweep directory, so points with "
        "the same traffic (a grid over rho, method or Fisher) run SUMO once and replay its trace "
        "(a point whose scenario names its own mobility.trace_cache keeps it)",
    )

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9._-]+", v):
            raise ValueError("use letters, digits, '.', '_' or '-' (it names a directory)")
        return v

    @field_validator("grid")
    @classmethod
    def _grid(cls, v: dict[str, list[Any]]) -> dict[str, list[Any]]:
        seen: dict[str, str] = {}
        for key, values in v.items():
            if not values:
                raise ValueError(f"grid key {key!r} has no values")
            path = ALIASES.get(key, key)
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", path):
                raise ValueError(f"grid key {key!r} is not a dotted scenario field or one of {sorted(ALIASES)}")
            if path in seen:
                raise ValueError(f"grid keys {seen[path]!r} and {key!r} both set {path}")
            seen[path] = key
        return v

    @field_validator("replicate_sets")
    @classmethod
    def _replicate_sets(cls, v: list[str]) -> list[str]:
        seen: dict[str, str] = {}
        for name in v:
            for path in REPLICATE_SETS[name]:
                if path in seen:
                    raise ValueError(f"{seen[path]!r} and {name!r} both set {path}")
                seen[path] = name
        return v

    @field_validator("replicates", mode="before")
    @classmethod
    def _replicates_type(cls, v: Any) -> Any:
        def integer(x: Any) -> bool:
            return isinstance(x, int) and not isinstance(x, bool)

        if v is None or integer(v) or (isinstance(v, list) and all(integer(x) for x in v)):
            return v
        raise ValueError(f"give a count n (seeds 0..n-1) or a list of integer seeds, got {v!r}")

    @field_validator("replicates")
    @classmethod
    def _replicates(cls, v: int | list[int] | None, info: ValidationInfo) -> int | list[int] | None:
        if v is None:
            return v
        if isinstance(v, int):
            if not 1 <= v <= MAX_SEED:
                raise ValueError(f"a count of replicates must be between 1 and 2^31, got {v}")
        else:
            if not v:
                raise ValueError("give at least one seed (or a count n for seeds 0..n-1)")
            bad = [s for s in v if not 0 <= s < MAX_SEED]
            if bad:
                raise ValueError(f"seeds must lie in [0, 2^31), got {bad}")
            repeated = sorted({s for s in v if v.count(s) > 1})
            if repeated:
                raise ValueError(f"seed(s) {repeated} given more than once")
        grid, sets = info.data.get("grid") or {}, info.data.get("replicate_sets") or []
        for key in grid:
            axis = ALIASES.get(key, key)
            for name in sets:
                for path in REPLICATE_SETS[name]:
                    if path == axis or path.startswith(axis + "."):
                        raise ValueError(
                            f"grid key {key!r} sets {path}, which every replicate sets too "
                            f"(replicate_sets: {name!r}); drop the grid key, or leave {name!r} out of replicate_sets"
                        )
        return v

    def axes(self) -> dict[str, str]:
        """Grid key -> the dotted scenario field it sets."""
        return {key: ALIASES.get(key, key) for key in self.grid}

    def replicate_seeds(self) -> list[int]:
        """The replicates' seeds in run order; empty when the sweep has none."""
        if self.replicates is None:
            return []
        return list(range(self.replicates)) if isinstance(self.replicates, int) else list(self.replicates)

    def replicate_fields(self) -> list[str]:
        """The dotted scenario fields each replicate sets to its seed."""
        return [path for name in self.replicate_sets for path in REPLICATE_SETS[name]]


@dataclass(frozen=True)
class GridPoint:
    """One validated scenario of the grid and the values that made it; with ``replicate`` set, one
    replicate of that point (its scenario carries the replicate's seeds)."""

    id: str
    values: dict[str, Any]
    overrides: dict[str, Any]
    scenario: Scenario
    replicate: int | None = None

    @property
    def run_id(self) -> str:
        """Names the run and its directory: the point's id, with the replicate's seed when there is one."""
        return self.id if self.replicate is None else f"{self.id}-rep{self.replicate}"


def load_sweep(path: str | Path) -> tuple[SweepSpec, Path]:
    """Validate a sweep file; returns it and the directory its relative ``base`` is read from."""
    return load_model(SweepSpec, path, what="sweep file"), Path(path).resolve().parent


def error_lines(err: ValidationError) -> list[tuple[str, str]]:
    """A validation error as (dotted field, message) pairs."""
    return [(".".join(str(p) for p in e["loc"]) or "<top>", e["msg"]) for e in err.errors()]


def base_scenario(spec: SweepSpec, base_dir: str | Path | None = None, where: str = "sweep") -> Scenario:
    """The sweep's base scenario as ``vmc run`` reads it: a file (relative to ``base_dir``; its own
    relative paths read relative to it), an inline mapping (its relative paths read relative to
    ``base_dir``, the sweep file's directory), or the default."""
    if isinstance(spec.base, str):
        path = Path(spec.base)
        if not path.is_absolute() and base_dir is not None:
            path = Path(base_dir) / path
        if not path.is_file():
            raise ConfigError(f"{where}: base: scenario file {path} does not exist")
        return load_scenario(path)
    try:
        scenario = Scenario.model_validate(spec.base or {})
        return Scenario.model_validate(resolve_paths(scenario.model_dump(mode="json"), _directory(base_dir)))
    except ValidationError as e:
        raise ConfigError("\n".join(f"{where}: base.{loc}: {msg}" for loc, msg in error_lines(e))) from None


def _directory(base_dir: str | Path | None) -> Path:
    """The directory a sweep file's relative paths are read from (the working directory without one)."""
    return Path.cwd() if base_dir is None else Path(base_dir)


def set_path(data: dict[str, Any], path: str, value: Any, key: str) -> None:
    """Set the dotted field ``path`` of a scenario mapping; ``key`` (what asked for it) names the error."""
    node = data
    parts = path.split(".")
    for i, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"grid key {key!r}: {'.'.join(parts[: i + 1])} is not a mapping, so {path} cannot be set")
        node = child
    node[parts[-1]] = value


def _slug(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        text = "+".join(_slug(v) for v in value)
    elif isinstance(value, float) and value.is_integer():
        text = str(int(value)) if abs(value) < 1e15 else str(value)
    else:
        text = str(value)
    return re.sub(r"[^A-Za-z0-9.+-]+", "_", text).strip("_")[:24] or "x"


def _point_id(index: int, values: dict[str, Any]) -> str:
    label = "-".join(f"{key.split('.')[-1]}{_slug(v)}" for key, v in values.items())
    return f"p{index:03d}-{label}"[:96]


def point_label(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={json.dumps(v)}" for k, v in values.items())


def expand(spec: SweepSpec, base_dir: str | Path | None = None, where: str = "sweep") -> list[GridPoint]:
    """Every point of the grid (cartesian product, last key fastest) as a validated scenario, built as
    ``vmc run`` builds one: the base's relative paths read relative to the file that names them, a
    grid value's relative to the sweep file (``base_dir``), and every point's files checked
    (:func:`vmc_sim.scenario.inputs.check_inputs`).

    Raises :class:`ConfigError` before anything runs if any point is invalid, naming the point,
    the grid key and value responsible, and the field (and, for an input, the file)."""
    base = base_scenario(spec, base_dir, where)
    base_data = base.model_dump(mode="json")
    axes = spec.axes()
    keys = list(spec.grid)
    points: list[GridPoint] = []
    errors: dict[tuple[str, str, str], list[str]] = {}
    checked: dict[str, str | None] = {}
    refused: dict[str, list[str]] = {}
    for index, combo in enumerate(itertools.product(*(spec.grid[k] for k in keys))):
        values = dict(zip(keys, combo, strict=True))
        overrides = {axes[k]: ([v] if axes[k] in LIST_FIELDS and isinstance(v, str) else v) for k, v in values.items()}
        data = json.loads(json.dumps(base_data))
        for key in values:
            set_path(data, axes[key], overrides[axes[key]], key)
        for path, other in EXCLUSIVE.items():
            if overrides.get(path) is not None and other not in overrides:
                set_path(data, other, None, path)
        if "name" not in overrides:
            data["name"] = f"{spec.name}-{index:03d}"
        pid = _point_id(index, values)
        try:
            scenario = Scenario.model_validate(resolve_paths(data, _directory(base_dir)))
        except ValidationError as e:
            for loc, msg in error_lines(e):
                culprits = [
                    k for k in keys if axes[k] == loc or axes[k].startswith(loc + ".") or loc.startswith(axes[k] + ".")
                ]
                blame = (
                    "; ".join(f"grid key {k!r} = {json.dumps(values[k])}" for k in culprits)
                    or f"point {point_label(values)}"
                )
                errors.setdefault((blame, loc, msg), []).append(pid)
            continue
        problem = _input_problem(scenario, checked, f"{where}: grid point {pid} ({point_label(values)})")
        if problem is not None:
            refused.setdefault(problem, []).append(pid)
            continue
        points.append(GridPoint(pid, values, overrides, scenario))
    lines = [
        f"{where}: {blame}: {loc}: {msg} (grid point {ids[0]}{f' and {len(ids) - 1} more' if ids[1:] else ''})"
        for (blame, loc, msg), ids in errors.items()
    ]
    lines += [
        f"{problem}{f' (and {len(ids) - 1} more grid points)' if ids[1:] else ''}" for problem, ids in refused.items()
    ]
    if lines:
        raise ConfigError("\n".join(lines))
    return points


def _input_problem(scenario: Scenario, checked: dict[str, str | None], where: str) -> str | None:
    """What :func:`vmc_sim.scenario.inputs.check_inputs` refuses in ``scenario``'s files, or None; checked once per
    distinct mobility section (``checked`` remembers the answers, named by the first point that gave them)."""
    key = json.dumps(scenario.mobility.model_dump(mode="json"), sort_keys=True)
    if key not in checked:
        try:
            check_inputs(scenario, where)
            checked[key] = None
        except ConfigError as e:
            checked[key] = str(e)
    return checked[key]


def _inert_sources(path: str, used: Iterable[str]) -> list[str]:
    """The mobility sources in ``used`` that do not read the scenario field ``path`` (dotted), so
    setting it cannot change their runs (:data:`vmc_sim.scenario.mobility_section.SOURCE_READS`)."""
    if not path.startswith("mobility."):
        return []
    field = path[len("mobility.") :]
    return sorted(src for src in set(used) if not source_reads(src, field))


def inert_axes(spec: SweepSpec, points: Iterable[GridPoint]) -> list[str]:
    """Grid keys, and ``replicate_sets`` entries of a replicated sweep, that cannot change a point's
    result because its mobility source does not read the field they set: made from what each source
    declares it reads (:data:`vmc_sim.scenario.mobility_section.SOURCE_READS`, which the code opening a source
    is held to), not from a list of their own."""
    used: set[str] = {p.scenario.mobility.source for p in points}
    notes = []
    for key, path in spec.axes().items():
        unused = _inert_sources(path, used)
        if unused:
            notes.append(f"grid key {key!r} ({path}) has no effect with mobility source {unused}: it does not read it")
    if spec.replicates is not None:
        for name in spec.replicate_sets:
            paths = REPLICATE_SETS[name]
            unused = sorted(set.intersection(*(set(_inert_sources(path, used)) for path in paths)))
            if unused:
                notes.append(
                    f"replicate_sets {name!r} ({', '.join(paths)}) has no effect with mobility source {unused}: "
                    "it reads none of them"
                )
    return notes
