"""A sweep file validated into a grid of scenarios: the spec, its axes, and the points it expands to."""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Literal

from pydantic import Field, ValidationError, field_validator

from ..config import ConfigError, Strict, load_model
from ..scenario import Scenario

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


SOURCE_ONLY: dict[str, tuple[str, ...]] = {
    "mobility.city.": ("city",),
    "mobility.lust.": ("lust",),
    "mobility.density": ("city", "files", "lust"),
    "mobility.rsus.": ("city", "files", "lust"),
    "mobility.sumo.": ("city", "files", "lust"),
}
"""Field prefixes that only matter for some mobility sources (a trace carries its own RSUs)."""


class SweepSpec(Strict):
    """A sweep file: the base scenario, the grid and how to run it."""

    name: str = Field("sweep", min_length=1)
    base: str | dict[str, Any] | None = Field(
        None, description="scenario file (relative to the sweep file), inline scenario, or null = embedded default"
    )
    grid: dict[str, list[Any]] = Field(min_length=1, description="dotted scenario field or alias -> values")
    engine: Literal["local", "ray"] = "local"
    workers: int = Field(2, gt=0, description="points run at once (local pool; Ray: CPUs of a local instance)")
    address: str | None = Field(None, description="Ray cluster to join (engine ray); null = start a local one")
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

    def axes(self) -> dict[str, str]:
        """Grid key -> the dotted scenario field it sets."""
        return {key: ALIASES.get(key, key) for key in self.grid}


@dataclass(frozen=True)
class GridPoint:
    """One validated scenario of the grid and the values that made it."""

    id: str
    values: dict[str, Any]
    overrides: dict[str, Any]
    scenario: Scenario


def load_sweep(path: str | Path) -> tuple[SweepSpec, Path]:
    """Validate a sweep file; returns it and the directory its relative ``base`` is read from."""
    return load_model(SweepSpec, path), Path(path).resolve().parent


def _error_lines(err: ValidationError) -> list[tuple[str, str]]:
    return [(".".join(str(p) for p in e["loc"]) or "<top>", e["msg"]) for e in err.errors()]


def base_scenario(spec: SweepSpec, base_dir: str | Path | None = None, where: str = "sweep") -> Scenario:
    """The sweep's base scenario: a file (relative to ``base_dir``), an inline mapping, or the default."""
    if isinstance(spec.base, str):
        path = Path(spec.base)
        if not path.is_absolute() and base_dir is not None:
            path = Path(base_dir) / path
        if not path.is_file():
            raise ConfigError(f"{where}: base: scenario file {path} does not exist")
        return load_model(Scenario, path)
    try:
        return Scenario.model_validate(spec.base or {})
    except ValidationError as e:
        raise ConfigError("\n".join(f"{where}: base.{loc}: {msg}" for loc, msg in _error_lines(e))) from None


def _set_path(data: dict[str, Any], path: str, value: Any, key: str) -> None:
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
    """Every point of the grid (cartesian product, last key fastest) as a validated scenario.

    Raises :class:`ConfigError` before anything runs if any point is invalid, naming the point,
    the grid key and value responsible, and the field."""
    base = base_scenario(spec, base_dir, where)
    base_data = base.model_dump(mode="json")
    axes = spec.axes()
    keys = list(spec.grid)
    points: list[GridPoint] = []
    errors: dict[tuple[str, str, str], list[str]] = {}
    for index, combo in enumerate(itertools.product(*(spec.grid[k] for k in keys))):
        values = dict(zip(keys, combo))
        overrides = {axes[k]: ([v] if axes[k] in LIST_FIELDS and isinstance(v, str) else v) for k, v in values.items()}
        data = json.loads(json.dumps(base_data))
        for key, value in values.items():
            _set_path(data, axes[key], overrides[axes[key]], key)
        for path, other in EXCLUSIVE.items():
            if overrides.get(path) is not None and other not in overrides:
                _set_path(data, other, None, path)
        if "name" not in overrides:
            data["name"] = f"{spec.name}-{index:03d}"
        pid = _point_id(index, values)
        try:
            scenario = Scenario.model_validate(data)
        except ValidationError as e:
            for loc, msg in _error_lines(e):
                culprits = [
                    k for k in keys if axes[k] == loc or axes[k].startswith(loc + ".") or loc.startswith(axes[k] + ".")
                ]
                blame = (
                    "; ".join(f"grid key {k!r} = {json.dumps(values[k])}" for k in culprits)
                    or f"point {point_label(values)}"
                )
                errors.setdefault((blame, loc, msg), []).append(pid)
            continue
        points.append(GridPoint(pid, values, overrides, scenario))
    if errors:
        raise ConfigError(
            "\n".join(
                f"{where}: {blame}: {loc}: {msg} (grid point {ids[0]}{f' and {len(ids) - 1} more' if ids[1:] else ''})"
                for (blame, loc, msg), ids in errors.items()
            )
        )
    return points


def inert_axes(spec: SweepSpec, points: Iterable[GridPoint]) -> list[str]:
    """Grid keys that cannot change a point's result because of its mobility source."""
    notes = []
    for key, path in spec.axes().items():
        for prefix, sources in SOURCE_ONLY.items():
            if not path.startswith(prefix):
                continue
            used = sorted({p.scenario.mobility.source for p in points} - set(sources))
            if used:
                notes.append(f"grid key {key!r} ({path}) has no effect with mobility source {used}")
    return notes
