"""A Flower availability schedule replayed against an F-SOSA editor, and the records it leaves.

The replay follows ``vmc run``'s coordinator on the schedule's requests: the first fit takes the
vehicles present once ``coordinator.warmup`` seconds have passed and at least
``coordinator.min_clients`` are present; then every join is an ``add`` and every leave a
``remove``, one request at a time; a request that would leave fewer than ``min_clients`` withdraws
the model (``suspend``), and a fresh fit (its own subset stream, as ``vmc run``'s) follows once
enough vehicles are present again. Coverage alone has no channel: every upload arrives. A schedule
exported from a run directory also carries the run's link outcomes (``radio``): it is then
replayed on them (:mod:`vmc_sim.flower.radio`), the uploads ``vmc run`` lost lost here too.

The same replay runs against a pool that trains in this process (:func:`direct_run`) or one that
asks Flower nodes (:mod:`vmc_sim.flower.apps`), so the two release the same models.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from fl_core.clients import ClientPool
from fl_core.editors import Editor, build_editor
from fl_core.editors.fsosa import FSOSAEditor
from fl_core.errors import EmptyPopulationError
from fl_core.experiment import OneShotSetup
from fl_core.payload import ByteKind
from fl_core.training import LocalTrainer

from ..scenario.schema import Scenario
from ..scenario.shards import vehicle_shard
from .radio import Outcomes, RadioPool, radio_plan, radio_replay
from .radio import record_row as _row
from .schedule import SCHEDULE_FORMAT, Schedule, parse_schedule, read_schedule, schedule_document

__all__ = [
    "SCHEDULE_FORMAT",
    "Schedule",
    "collect",
    "direct_pool",
    "direct_run",
    "editor_factory",
    "parse_schedule",
    "read_run",
    "read_schedule",
    "replay",
    "run_head",
    "schedule_document",
    "uploads",
    "write_run",
]

RECORDS = "records.json"
MODELS = "models.safetensors"


def editor_factory(scenario: Scenario, pool: ClientPool, method: str = "fsosa") -> Callable[[int], Editor]:
    """Fresh editors of ``method`` over ``pool`` as ``vmc run`` builds them (model ``epoch`` > 0, after
    a suspension, gets its own subset stream). Only the F-SOSA family edits by messages here."""
    fed = scenario.federated
    streams = pool.trainer.streams

    def new(epoch: int) -> Editor:
        keys = (method,) if epoch == 0 else (method, "epoch", epoch)
        editor = build_editor(
            method,
            pool,
            streams.numpy("subset", *keys),
            fed.rule(),
            fed.projection_config(),
            options=fed.options_for(method),
        )
        if not isinstance(editor, FSOSAEditor):
            raise ValueError(f"method {method!r} is not of the F-SOSA family (fsosa, fedfisher, fedavg)")
        return editor

    return new


def replay(
    schedule: Schedule, new_editor: Callable[[int], Editor], warmup: float, min_clients: int
) -> Iterator[tuple[dict[str, Any], torch.Tensor | None]]:
    """Drive editors through ``schedule``; yield each request's record and the released model
    (None while the model is withdrawn). Requests before the first fit yield nothing."""
    present: set[str] = set()
    editor: Editor | None = None
    epoch, index = 0, 0
    fit_at = schedule.begin + warmup

    def fit(t: float, refit: bool) -> tuple[dict, torch.Tensor | None]:
        nonlocal editor, index
        editor = new_editor(epoch)
        report = editor.fit(sorted(present))
        row = _row(index, t, "fit", editor, report, added=sorted(present), population=len(present), model_epoch=epoch)
        if refit:
            row["refit"] = True
        index += 1
        return row, editor.model

    pending = list(schedule.requests)
    i = 0
    while i < len(pending):
        t = pending[i][0]
        if editor is None and epoch == 0 and fit_at < t and len(present) >= min_clients:
            yield fit(fit_at, refit=False)
            continue
        _, kind, vehicle = pending[i]
        i += 1
        if editor is None and epoch == 0:
            (present.add if kind == "join" else present.discard)(vehicle)
            if t >= fit_at and len(present) >= min_clients and (i == len(pending) or pending[i][0] > t):
                yield fit(t, refit=False)
            continue
        if editor is None:  # withdrawn: wait for enough vehicles
            (present.add if kind == "join" else present.discard)(vehicle)
            if len(present) >= min_clients:
                yield fit(t, refit=True)
            else:
                yield _row(index, t, "suspended", None, None, population=len(present), model_epoch=epoch), None
                index += 1
            continue
        after = present | {vehicle} if kind == "join" else present - {vehicle}
        clients = editor.clients
        if (kind == "join" and vehicle in clients) or (kind == "leave" and vehicle not in clients):
            present = after
            yield _row(index, t, "none", editor, None, population=len(present), model_epoch=epoch), editor.model
            index += 1
            continue
        edit = "add" if kind == "join" else "remove"
        removed, added = ([], [vehicle]) if kind == "join" else ([vehicle], [])
        report = None
        if len(after) >= min_clients:
            try:
                report = editor.batch(removed, added, kind=edit)
            except EmptyPopulationError:
                report = None
        present = after
        if report is None:
            row = _row(index, t, "suspend", None, None, population=len(present), model_epoch=epoch)
            row.update(removed=removed, added=added, withdrawn=sorted(map(str, clients)))
            editor, epoch, index = None, epoch + 1, index + 1
            yield row, None
            continue
        row = _row(index, t, edit, editor, report, removed=removed, added=added, population=len(present))
        row["model_epoch"] = epoch
        index += 1
        yield row, editor.model


def direct_pool(setup: OneShotSetup, seed: int) -> ClientPool:
    """Every vehicle trains in this process on the shard ``vmc run`` gives it (no store, no cache)."""
    shards = setup.client_data
    trainer = LocalTrainer(setup.model_fn, setup.w0, setup.train, setup.streams)
    return ClientPool(trainer, lambda v: shards[vehicle_shard(seed, v, len(shards))], validator=setup.validator())


def write_run(out: Path, head: dict[str, Any], records: list[dict], models: dict[int, torch.Tensor]) -> Path:
    """``records.json`` (the head and every record) and ``models.safetensors`` (the model released
    after request ``i`` as ``model.i``), written through temporaries so neither is half written."""
    out.mkdir(parents=True, exist_ok=True)
    tensors = {f"model.{i}": m.detach().cpu().contiguous() for i, m in models.items()}
    tmp = out / (MODELS + ".tmp")
    save_file(tensors, str(tmp))
    os.replace(tmp, out / MODELS)
    text = json.dumps({**head, "records": records}, indent=1, allow_nan=False, default=str) + "\n"
    tmp = out / (RECORDS + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, out / RECORDS)
    return out


def read_run(out: str | os.PathLike[str]) -> tuple[dict[str, Any], dict[int, torch.Tensor]]:
    """A directory written by :func:`write_run`: its records document and models by request index."""
    path = Path(out)
    doc = json.loads((path / RECORDS).read_text(encoding="utf-8"))
    models = {int(k.split(".", 1)[1]): v for k, v in load_file(str(path / MODELS)).items()}
    return doc, models


def run_head(scenario: Scenario, schedule: Schedule, method: str, runner: str) -> dict[str, Any]:
    """What a records file says about itself: scenario, seed, method, schedule and who ran it."""
    return {
        "format": "vmc-sim-flower-records",
        "runner": runner,
        "scenario": scenario.name,
        "seed": scenario.seed,
        "method": method,
        "nodes": len(schedule.vehicles),
        "schedule": schedule.meta.get("trace"),
        "radio": None if schedule.radio is None else schedule.radio.get("run"),
        "status": "running",
    }


def collect(
    rows: Iterator[tuple[dict[str, Any], torch.Tensor | None]],
    after_each: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[list[dict], dict[int, torch.Tensor]]:
    """Every record and released model of a replay; ``after_each`` may add to each record."""
    records: list[dict] = []
    models: dict[int, torch.Tensor] = {}
    for row, model in rows:
        if after_each is not None:
            after_each(row)
        records.append(row)
        if model is not None:
            models[row["index"]] = model.detach().clone()
    return records, models


def direct_run(scenario: Scenario, schedule: Schedule, out: Path, method: str = "fsosa") -> Path:
    """Replay ``schedule`` with fl_core's editor training every client in this process (on the
    run's radio when the schedule carries it)."""
    t0 = time.perf_counter()
    setup = scenario.federated.setup(scenario.seed)
    if schedule.radio is not None:
        plan, outcomes = radio_plan(schedule, method), Outcomes()
        shards, seed = setup.client_data, scenario.seed
        trainer = LocalTrainer(setup.model_fn, setup.w0, setup.train, setup.streams)
        radio_pool = RadioPool(
            trainer, lambda v: shards[vehicle_shard(seed, v, len(shards))], outcomes, validator=setup.validator()
        )
        rows = radio_replay(plan, editor_factory(scenario, radio_pool, method), radio_pool, outcomes)
    else:
        pool = direct_pool(setup, scenario.seed)
        c = scenario.coordinator
        rows = replay(schedule, editor_factory(scenario, pool, method), c.warmup, c.min_clients)
    records, models = collect(rows)
    head = run_head(scenario, schedule, method, "direct")
    head.update(status="complete", wall_s=time.perf_counter() - t0)
    return write_run(out, head, records, models)


def uploads(records: list[dict]) -> list[int]:
    """Model plus Fisher upload bytes per record, as the editor charged them."""
    return [r["bytes"][ByteKind.MODEL_UPLOAD.value] + r["bytes"][ByteKind.FISHER_UPLOAD.value] for r in records]
