"""F-SOSA replayed on the co-simulation's radio: the edits ``vmc run`` made, the replies it lost.

A schedule exported from a run directory carries the run's link outcomes (its ``radio`` section,
:mod:`vmc_sim.rundir.radio_schedule`). :func:`radio_replay` follows one method's records step by
step: the fit on the clients the coordinator fitted, each edit's net change, and for every
trainee whose upload the radio lost, a reply that never arrives: the pool raises
:class:`fl_core.errors.UploadLostError`, the editor keeps the client as a member without a
contribution, and the take-out that ``vmc run`` made removes it (F-SOSA's exact removal, with the
clients the coordinator knew to have left), so the released model holds only what arrived.
Withdrawals, and the requests while the model is withdrawn, are the run's. The subset draws are
those of ``vmc run``; the statistics never hold a lost upload instead of adding and subtracting
it, so the models equal ``vmc run``'s to float tolerance (the last bits of the float64 sums, or the
CG tolerance of an iterative merge). Every step checks that the replay went the way the run went
(the same uploads lost, the same members), and refuses a schedule that is not of this scenario.

Needs no Flower: the same replay drives a pool that trains in this process (:class:`RadioPool`)
or one that asks Flower nodes (:class:`vmc_sim.flower.apps.GridPool`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from fl_core.clients import ClientPool
from fl_core.contribution import Contribution
from fl_core.editors import Editor, EditReport
from fl_core.errors import UploadLostError
from fl_core.payload import ByteKind

from .schedule import Schedule

EDIT_KINDS = ("add", "remove", "batch")
NEVER_REACHED = ("broadcast", "job")
"""Failure tags of a trainee that never trained: W0 never reached it, or its job was dropped unrun
(the node is not asked). Any other failure (an upload cut off) lost a reply the node computed."""


def record_row(index: int, t: float, kind: str, editor: Editor | None, report: EditReport | None, **extra: Any) -> dict:
    """A replay's record: what was asked, what it changed, what it cost, the members after it."""
    row: dict[str, Any] = {"index": index, "time": t, "kind": kind, **extra}
    if report is not None:
        row.update(
            triggered=report.triggered,
            subset_size=report.subset_size,
            trained=sorted(map(str, report.trained)),
            left=sorted(map(str, report.left)),
            joined=sorted(map(str, report.joined)),
            bytes={k.value: int(report.bytes.get(k.value, 0)) for k in ByteKind},
            total_bytes=int(report.total_bytes),
        )
    else:
        row.update(triggered=False, bytes={k.value: 0 for k in ByteKind}, total_bytes=0)
    row["members"] = sorted(map(str, getattr(editor, "members", set()) if editor is not None else set()))
    return row


class ScheduleMismatchError(ValueError):
    """The replay did not go the way the schedule's run went: not this scenario's schedule."""


@dataclass(frozen=True)
class RadioPlan:
    """One method's steps from a schedule's ``radio`` section, and its per-node link times."""

    method: str
    steps: list[dict[str, Any]]
    link_s: dict[str, float]
    default_link_s: float | None
    run: str | None


def radio_plan(schedule: Schedule, method: str) -> RadioPlan:
    """The steps of ``method`` in ``schedule``'s radio section (refused naming what is missing)."""
    if schedule.radio is None:
        raise ValueError("the schedule carries no radio outcomes (export it from a run directory)")
    methods = schedule.radio.get("methods") or {}
    if method not in methods:
        raise ValueError(
            f"the schedule carries no radio outcomes of method {method!r} (it has {', '.join(methods) or 'none'})"
        )
    m = methods[method]
    default = m.get("default_link_s")
    return RadioPlan(
        method,
        list(m.get("steps") or []),
        {str(k): float(v) for k, v in (m.get("link_s") or {}).items()},
        None if default is None else float(default),
        schedule.radio.get("run"),
    )


@dataclass
class Outcomes:
    """The radio's verdict on the uploads of the step being replayed: trainee -> ``tag:reason``."""

    lost: dict[str, str] = field(default_factory=dict)

    def why_lost(self, client: Hashable) -> str | None:
        """Why ``client``'s upload never arrives in this step (None: it arrives)."""
        return self.lost.get(str(client))


def never_reached(why: str) -> bool:
    """Whether a loss of ``why`` (``tag:reason``) means the node never trained."""
    return why.split(":", 1)[0] in NEVER_REACHED


class RadioPool(ClientPool):
    """A pool training in this process whose trainees' uploads the radio may lose (``outcomes``)."""

    def __init__(self, trainer: Any, data: Any, outcomes: Outcomes, validator: Any = None) -> None:
        super().__init__(trainer, data, validator=validator)
        self.outcomes = outcomes

    def train(self, client: Hashable) -> Contribution:
        """The client's contribution, or :class:`UploadLostError` where the radio lost it."""
        why = self.outcomes.why_lost(client)
        if why is not None:
            raise UploadLostError(client, why)
        return super().train(client)


def _mismatch(step: dict[str, Any], what: str) -> ScheduleMismatchError:
    return ScheduleMismatchError(
        f"radio step {step['record']} ({step['kind']} at t={step['time']}): {what}; "
        "the schedule is not of this scenario (its seed, data or federated settings differ)"
    )


def _take_outs(editor: Editor, step: dict[str, Any]) -> list[dict[str, Any]]:
    """The take-outs of ``step``: each removes the uploads lost so far (and the clients the
    coordinator knew had left), as ``vmc run`` did."""
    passes = []
    unarrived: set[Hashable] = getattr(editor, "unarrived", set())
    for p in step["take_outs"]:
        if {str(c) for c in unarrived} != set(p["removed"]):
            raise _mismatch(step, f"lost {sorted(map(str, unarrived))}, the run took out {p['removed']}")
        taken = [*p["removed"], *p["departed"]]
        report = editor.batch(taken, [], kind="remove" if len(taken) == 1 else "batch")
        passes.append(
            {
                "removed": p["removed"],
                "departed": p["departed"],
                "trained": sorted(map(str, report.trained)),
                "left": sorted(map(str, report.left)),
                "joined": sorted(map(str, report.joined)),
                "total_bytes": int(report.total_bytes),
            }
        )
    if unarrived:
        raise _mismatch(step, f"uploads of {sorted(map(str, unarrived))} lost, and the run took none out")
    return passes


def radio_replay(
    plan: RadioPlan, new_editor: Callable[[int], Editor], pool: ClientPool, outcomes: Outcomes
) -> Iterator[tuple[dict[str, Any], torch.Tensor | None]]:
    """Follow ``plan``'s steps with editors from ``new_editor`` over ``pool`` (whose trainees'
    uploads ``outcomes`` may lose); yield each step's record and the model it releases (None
    while the model is withdrawn)."""
    editor: Editor | None = None
    for step in plan.steps:
        outcomes.lost = dict(step["lost"])
        kind = step["kind"]
        report, passes = None, []
        extra: dict[str, Any] = {}
        if kind == "fit":
            editor = new_editor(int(step["model_epoch"]))
            report = editor.fit(step["clients"])
            passes = _take_outs(editor, step)
            extra = {"refit": True} if step.get("refit") else {}
        elif kind in EDIT_KINDS:
            if editor is None:
                raise _mismatch(step, "an edit while the model is withdrawn")
            report = editor.batch(step["removed"], step["added"], kind=kind)
            passes = _take_outs(editor, step)
        elif kind == "suspend":
            if step.get("cause") == "not_arrived":  # what was asked before the model was withdrawn
                for c in [*step["trained"], *(c for p in step["take_outs"] for c in p["trained"])]:
                    with contextlib.suppress(UploadLostError):
                        pool.train(c)
            extra = {"cause": step.get("cause")}
            editor = None
        live = editor if kind not in ("suspend", "suspended") else None
        row = record_row(step["record"], step["time"], kind, live, report, request=step["request"], **extra)
        row.update(model_epoch=step["model_epoch"], lost=dict(step["lost"]), take_outs=passes)
        row["total_bytes"] += sum(p["total_bytes"] for p in passes)
        if row["members"] != step["members"]:
            raise _mismatch(step, f"members {row['members']}, the run's {step['members']}")
        yield row, (live.model if live is not None else None)
