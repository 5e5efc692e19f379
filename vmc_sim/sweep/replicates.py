"""A replicated sweep's runs: every grid point once per replicate seed, that seed written into the
scenario seeds ``replicate_sets`` names (the run seed and the traffic seeds by default)."""

from __future__ import annotations

import json
from dataclasses import replace

from pydantic import ValidationError

from ..scenario.config import ConfigError
from ..scenario.schema import Scenario
from .spec import GridPoint, SweepSpec, error_lines, set_path


def replicate_runs(spec: SweepSpec, points: list[GridPoint], where: str = "sweep") -> list[GridPoint]:
    """One run per (point, replicate seed), point by point, seeds in the spec's order.

    Without replicates the points are returned as they are. With one seed, each point runs once
    with that seed and keeps its own id (``replicate`` stays None, so results look as without
    replicates); with several, each run's ``replicate`` is its seed and its id ends ``-rep<seed>``.
    Raises :class:`ConfigError` naming the point and the field if a seeded scenario is invalid."""
    seeds = spec.replicate_seeds()
    if not seeds:
        return points
    fields = spec.replicate_fields()
    runs: list[GridPoint] = []
    for point in points:
        data = point.scenario.model_dump(mode="json")
        for seed in seeds:
            seeded = json.loads(json.dumps(data))
            for path in fields:
                set_path(seeded, path, seed, "replicates")
            try:
                scenario = Scenario.model_validate(seeded)
            except ValidationError as e:
                raise ConfigError(
                    "\n".join(
                        f"{where}: replicates: seed {seed} at grid point {point.id}: {loc}: {msg}"
                        for loc, msg in error_lines(e)
                    )
                ) from None
            runs.append(replace(point, scenario=scenario, replicate=seed if len(seeds) > 1 else None))
    return runs
