"""A Flower availability schedule replayed against an F-SOSA editor, and the records it leaves.

The replay follows ``vmc run``'s coordinator on the schedule's requests: the first fit takes the
vehicles present once ``coordinator.warmup`` seconds have passed and at least
``coordinator.min_clients`` are present; then every join is an ``add`` and every leave a
``remove``, one request at a time; a request that would leave fewer than ``min_clients`` withdraws
the model (``suspend``), and a fresh fit (its own subset stream, as ``vmc run``'s) follows once
enough vehicles are present again. The schedule has no channel: every upload arrives.

The same replay runs against a pool that trains in this process (:func:`direct_run`) or one that
asks Flower nodes (:mod:`vmc_sim.flower.apps`), so the two release the same models.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from fl_core.clients import ClientPool
from fl_core.editors import Editor, EditReport, build_editor
from fl_core.editors.fsosa import FSOSAEditor
from fl_core.errors import EmptyPopulationError
from fl_core.experiment import OneShotSetup
from fl_core.payload import ByteKind
from fl_core.training import LocalTrainer

from ..scenario.schema import Scenario
from ..scenario.shards import vehicle_shard

SCHEDULE_FORMAT = "vmc-sim-availability-flower"
RECORDS = "records.json"
MODELS = "models.safetensors"


@dataclass(frozen=True)
class Schedule:
    """The vehicles (by Flower node id, from 1) and their join/leave requests in order."""

    vehicles: dict[int, str]
    requests: list[tuple[float, str, str]]  # (time, "join" | "leave", vehicle)
    begin: float
    end: float
    meta: dict[str, Any]


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
    return Schedule(vehicles, requests, begin, end, dict(doc.get("meta") or {}))


def read_schedule(source: str | os.PathLike[str]) -> Schedule:
    """The schedule in a ``--format flower`` JSON file, or exported from a run directory or trace."""
    path = Path(source)
    if path.is_file() and path.suffix == ".json":
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"{path}: not valid JSON ({e})") from None
        return parse_schedule(doc, str(path))
    from ..rundir.export import flower_schedule, load_availability

    return parse_schedule(flower_schedule(load_availability(path)), str(path))


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


def _row(index: int, t: float, kind: str, editor: Editor | None, report: EditReport | None, **extra: Any) -> dict:
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
    """Replay ``schedule`` with fl_core's editor training every client in this process."""
    t0 = time.perf_counter()
    setup = scenario.federated.setup(scenario.seed)
    pool = direct_pool(setup, scenario.seed)
    c = scenario.coordinator
    records, models = collect(replay(schedule, editor_factory(scenario, pool, method), c.warmup, c.min_clients))
    head = run_head(scenario, schedule, method, "direct")
    head.update(status="complete", wall_s=time.perf_counter() - t0)
    return write_run(out, head, records, models)


def uploads(records: list[dict]) -> list[int]:
    """Model plus Fisher upload bytes per record, as the editor charged them."""
    return [r["bytes"][ByteKind.MODEL_UPLOAD.value] + r["bytes"][ByteKind.FISHER_UPLOAD.value] for r in records]
