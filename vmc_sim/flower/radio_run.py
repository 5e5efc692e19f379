"""The co-simulation run that gives a Flower schedule its traffic and its radio.

``vmc flower SCENARIO`` without ``--schedule`` runs the scenario once as ``vmc run`` does (its
traffic live, or replayed from a trace, or from the trace cache where ``mobility.trace_cache``
asks for it), with only the F-SOSA family method that Flower replays (each method's world is
independent of the others: its records are those of the full run), into ``OUT/cosim/``; the
schedule exported from that run directory (``OUT/schedule.json``) carries the coverage and every
upload's outcome. Needs no Flower.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..cosim import run_scenario
from ..rundir.export import flower_schedule, load_availability
from ..scenario.config import load_model
from ..scenario.schema import Scenario

COSIM = "cosim"
SCHEDULE = "schedule.json"


def cosim_scenario(scenario: Scenario, method: str) -> Scenario:
    """``scenario`` with ``method`` its only method and no multi-round strategy."""
    data = scenario.model_dump(mode="json")
    data["federated"]["methods"] = [method]
    data["federated"]["strategies"] = []
    return load_model(Scenario, None, data)


def write_schedule(doc: dict[str, Any], out: Path) -> Path:
    """``doc`` as ``out/schedule.json`` (through a temporary, never half written)."""
    path = out / SCHEDULE
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def radio_schedule(
    scenario: Scenario, out: Path, method: str = "fsosa", say: Callable[[str], None] = print
) -> tuple[dict[str, Any], Path]:
    """Run ``scenario``'s co-simulation with ``method`` into ``out/cosim`` and return the schedule
    document exported from it, with its run directory."""
    run = run_scenario(cosim_scenario(scenario, method), out=out / COSIM, progress=False, say=lambda s: None)
    manifest = run.manifest()
    if manifest.get("status") != "complete":
        raise RuntimeError(f"{run.path}: the co-simulation ended {manifest.get('status')}: {manifest.get('error')}")
    say(f"co-simulation: {run.path} ({run.record_count()} records)")
    return flower_schedule(load_availability(run.path)), run.path
