"""The co-simulation's link outcomes for a Flower schedule: what every request-driven method's
coordinator did in ``vmc run``, record by record, and which uploads the radio delivered.

A coverage schedule says when vehicles are present, not what their links carry: replayed on its
own, every upload arrives. This section of the ``flower`` export (``radio``) carries, per method
of the run and per record in order, the edit the coordinator made (a fit on ``clients``, or the
net ``removed`` and ``added`` of its requests), the trainees whose uploads arrived and those that
did not (``lost``: client -> ``tag:reason`` of its failure, the record's ``failed`` entry), and the
take-outs that removed the lost ones (``removed``, with the clients ``departed`` that the
coordinator knew to have left). A replay that follows these steps (:mod:`vmc_sim.flower.radio`)
makes the edits the co-simulation made, drops the replies it lost, and so releases its models.
``members`` (what each released model holds) lets the replay check that it went the same way.

Link times: per vehicle, ``link_s`` is the median over its uploads that arrived of the seconds from
their request to the record's completion (records keep no per-upload seconds, so this is the
request's time until every upload of it arrived and the model was solved: an upper bound on the
vehicle's own). Vehicles with no upload that arrived get ``default_link_s``, the median of all.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from .directory import RunDir

EDIT_KINDS = ("add", "remove", "batch")
"""Record kinds whose edit applied a net change of clients."""


def _lost(record: dict[str, Any]) -> dict[str, str]:
    """Trainee -> ``tag:reason`` of why its upload never arrived (``not_arrived`` with its failure)."""
    why: dict[str, str] = {}
    for f in record.get("failed") or []:
        if isinstance(f, dict) and f.get("tag") != "withdrawal":
            why.setdefault(str(f.get("client")), f"{f.get('tag')}:{f.get('reason')}")
    return {str(c): why.get(str(c), "unknown:unknown") for c in record.get("not_arrived") or []}


def radio_step(position: int, record: dict[str, Any]) -> dict[str, Any]:
    """One record of a request-driven method as a step of the radio replay."""
    kind = str(record.get("kind"))
    step: dict[str, Any] = {
        "record": position,
        "request": record.get("index"),
        "time": record.get("request_time"),
        "done": record.get("done_time"),
        "kind": kind,
        "model_epoch": int(record.get("model_epoch") or 0),
        "members": sorted(map(str, record.get("members") or [])),
    }
    if kind == "fit":
        step["clients"] = list(map(str, record.get("added") or []))
        step["refit"] = bool(record.get("refit"))
    elif kind in EDIT_KINDS:
        step["removed"] = list(map(str, record.get("removed") or []))
        step["added"] = list(map(str, record.get("added") or []))
    elif kind == "suspend":
        step["cause"] = record.get("cause")
        step["trained"] = list(map(str, record.get("trained") or []))
    step["arrived"] = sorted(map(str, record.get("arrived") or []))
    step["lost"] = _lost(record)
    step["take_outs"] = [
        {
            "removed": list(map(str, p.get("removed") or [])),
            "departed": list(map(str, p.get("departed") or [])),
            "trained": list(map(str, p.get("trained") or [])),
        }
        for p in record.get("take_outs") or []
    ]
    return step


def link_times(steps: list[dict[str, Any]]) -> tuple[dict[str, float], float | None]:
    """Per vehicle the median seconds from a request to its record's completion over its uploads
    that arrived, and the median over all of them (None when no upload arrived)."""
    per: dict[str, list[float]] = {}
    for s in steps:
        if s["time"] is None or s["done"] is None:
            continue
        for c in s["arrived"]:
            per.setdefault(c, []).append(float(s["done"]) - float(s["time"]))
    every = [x for xs in per.values() for x in xs]
    return {c: statistics.median(xs) for c, xs in sorted(per.items())}, (statistics.median(every) if every else None)


def radio_section(run: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """The ``radio`` section of a run directory's Flower schedule: per request-driven method
    (``federated.methods`` of the run's scenario) its steps and its link times."""
    federated = ((manifest.get("config") or {}).get("federated")) or {}
    methods = [str(m) for m in federated.get("methods") or []]
    by_method: dict[str, list[dict[str, Any]]] = {m: [] for m in methods}
    for r in RunDir(run, create=False).records():
        rows = by_method.get(str(r.get("method")))
        if rows is not None:
            rows.append(radio_step(len(rows), r))
    out: dict[str, Any] = {}
    for m, steps in by_method.items():
        links, default = link_times(steps)
        out[m] = {"steps": steps, "link_s": links, "default_link_s": default}
    return {"run": run.name, "run_status": manifest.get("status"), "methods": out}
