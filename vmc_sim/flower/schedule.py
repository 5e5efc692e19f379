"""A Flower availability schedule: the vehicles, their joins and leaves, and (exported from a run
directory) the run's link outcomes; read and checked.

The ``flower`` document of ``vmc export availability`` (:mod:`vmc_sim.rundir.export`): ``nodes``
(node id from 1, vehicle), ``requests`` (time, join or leave, vehicle) and, from a run directory,
``radio`` (:mod:`vmc_sim.rundir.radio_schedule`). Needs no Flower.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEDULE_FORMAT = "vmc-sim-availability-flower"


@dataclass(frozen=True)
class Schedule:
    """The vehicles (by Flower node id, from 1) and their join/leave requests in order."""

    vehicles: dict[int, str]
    requests: list[tuple[float, str, str]]  # (time, "join" | "leave", vehicle)
    begin: float
    end: float
    meta: dict[str, Any]
    radio: dict[str, Any] | None = None  # the run's link outcomes by method (vmc_sim.rundir.radio_schedule)


def parse_schedule(doc: dict[str, Any], where: str = "schedule") -> Schedule:
    """A :class:`Schedule` from the ``flower`` export document, refusing one that is not."""
    if not isinstance(doc, dict) or doc.get("format") != SCHEDULE_FORMAT:
        raise ValueError(f"{where}: not a vmc-sim Flower schedule (format must be {SCHEDULE_FORMAT!r})")
    try:
        vehicles = {int(n["node_id"]): str(n["vehicle"]) for n in doc["nodes"]}
        requests = [(float(r["time"]), str(r["kind"]), str(r["vehicle"])) for r in doc["requests"]]
        begin, end = float(doc["begin"]), float(doc["end"])
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{where}: malformed Flower schedule ({e!r})") from None
    if sorted(vehicles) != list(range(1, len(vehicles) + 1)):
        raise ValueError(f"{where}: node ids must be 1..{len(vehicles)}")
    known = set(vehicles.values())
    for t, kind, v in requests:
        if kind not in ("join", "leave") or v not in known:
            raise ValueError(f"{where}: request at {t} ({kind!r}, {v!r}) names no known node or kind")
    radio = doc.get("radio")
    if radio is not None:
        _check_radio(radio, known, where)
    return Schedule(vehicles, requests, begin, end, dict(doc.get("meta") or {}), radio)


STEP_KEYS = ("record", "request", "time", "kind", "model_epoch", "members", "lost", "take_outs")


def _check_radio(radio: Any, known: set[str], where: str) -> None:
    """Refuse a ``radio`` section that is not a method -> steps map naming the schedule's vehicles."""
    methods = radio.get("methods") if isinstance(radio, dict) else None
    if not isinstance(methods, dict):
        raise ValueError(f"{where}: radio.methods must map each method to its steps")
    for m, section in methods.items():
        steps = section.get("steps") if isinstance(section, dict) else None
        if not isinstance(steps, list):
            raise ValueError(f"{where}: radio.methods.{m}.steps must be a list")
        for i, step in enumerate(steps):
            missing = [k for k in STEP_KEYS if not isinstance(step, dict) or k not in step]
            if missing:
                raise ValueError(f"{where}: radio.methods.{m}.steps[{i}] lacks {', '.join(missing)}")
            named = {*step["lost"], *step["members"], *step.get("clients", []), *step.get("added", [])}
            unknown = sorted(named - known)
            if unknown:
                raise ValueError(f"{where}: radio.methods.{m}.steps[{i}] names vehicles with no node: {unknown[:5]}")


def schedule_document(source: str | os.PathLike[str]) -> dict[str, Any]:
    """The ``flower`` schedule document of a JSON file, or exported from a run directory or trace
    (with the run's radio)."""
    path = Path(source)
    if path.is_file() and path.suffix == ".json":
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"{path}: not valid JSON ({e})") from None
        return doc if isinstance(doc, dict) else {}
    from ..rundir.export import flower_schedule, load_availability

    return flower_schedule(load_availability(path))


def read_schedule(source: str | os.PathLike[str]) -> Schedule:
    """The schedule in a ``--format flower`` JSON file, or exported from a run directory or trace."""
    return parse_schedule(schedule_document(source), str(source))
