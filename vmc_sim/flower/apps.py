"""The Flower ServerApp and ClientApp of F-SOSA, and :func:`run_flower` (Flower's simulation runtime).

The server keeps fl_core's F-SOSA editor, its additive statistics and its subset sampler; its
client pool (:class:`GridPool`) holds no contribution: it knows which vehicles hold one, and asks
the vehicle's node for it by message (``train`` with W0, or ``query.recall`` for one it holds).
A departure sends nothing: the editor removes the vehicle exactly. Every message's bytes go into
the request's record (``messages``), and the model released after every request is kept.

On the run's radio (a schedule with ``radio``, :mod:`vmc_sim.flower.radio`) a trainee whose upload
``vmc run`` lost loses it here too: a node that W0 never reached is not asked (``delivered:
false``), a reply cut off on the uplink is dropped (``reply_lost``), and the pool raises
:class:`fl_core.errors.UploadLostError`, so the server never aggregates it and takes it out.
"""

from __future__ import annotations

import hashlib
import json
import time
import traceback
from collections.abc import Hashable
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch
from flwr.app import ConfigRecord, Context, Error, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from fl_core.clients import ClientPool, upload_form
from fl_core.contribution import Contribution
from fl_core.errors import UploadLostError
from fl_core.experiment import OneShotSetup
from fl_core.training import LocalTrainer

from ..scenario.schema import Scenario
from ..scenario.shards import vehicle_shard
from .messages import (
    IDENTIFY,
    RECALL,
    TRAIN,
    content_bytes,
    contribution_content,
    read_contribution,
    read_w0,
    recall_content,
    w0_content,
)
from .radio import Outcomes, never_reached, radio_plan, radio_replay
from .replay import Schedule, collect, editor_factory, replay, run_head, write_run

HELD = "held"  # the node's state record holding the contribution it computed


class GridPool(ClientPool):
    """Clients reached through a Flower grid: ``train`` and ``recall`` are messages to a node.

    ``nodes`` maps each vehicle to its Flower node id. ``log`` gathers one entry per message
    (vehicle, node, type, bytes sent and received) until :meth:`drain` hands it to a record.
    ``outcomes`` (the radio's verdicts, None: every reply arrives) says whose uploads are lost."""

    def __init__(
        self,
        setup: OneShotSetup,
        grid: Grid,
        nodes: dict[str, int],
        schedule_ids: dict[str, int],
        outcomes: Outcomes | None = None,
    ) -> None:
        trainer = LocalTrainer(setup.model_fn, setup.w0, setup.train, setup.streams)
        super().__init__(trainer, {}, reuse=False, validator=setup.validator())
        self.grid, self.nodes, self.schedule_ids = grid, nodes, schedule_ids
        self.outcomes = outcomes
        self.held: set[Hashable] = set()
        self.log: list[dict[str, Any]] = []
        self._model = setup.model_fn()

    def train(self, client: Hashable) -> Contribution:
        """The client's contribution: the one it holds, else trained from the W0 sent to it;
        :class:`UploadLostError` where the radio lost it."""
        vehicle = str(client)
        why = self.outcomes.why_lost(client) if self.outcomes is not None else None
        if why is not None:
            self._lose(client, why)
        if client in self.held:
            return self._ask(client, RECALL, recall_content(vehicle))
        return self._ask(client, TRAIN, w0_content(self.trainer.w0, vehicle))

    def _lose(self, client: Hashable, why: str) -> None:
        """A trainee whose upload never arrives: not asked if W0 never reached it, else asked
        and its reply dropped (the node holds what it computed)."""
        vehicle = str(client)
        content = w0_content(self.trainer.w0, vehicle)
        entry: dict[str, Any] = {"vehicle": vehicle, "node_id": self.schedule_ids[vehicle], "type": TRAIN}
        if never_reached(why):
            entry.update(sent=content_bytes(content), reply=None, delivered=False, lost=why)
        else:
            reply = self._send(client, TRAIN, content)
            self.held.add(client)
            entry.update(
                sent=content_bytes(content), reply=None, reply_lost=why, reply_bytes=content_bytes(reply.content)
            )
        self.log.append(entry)
        raise UploadLostError(client, why)

    def recall(self, client: Hashable) -> Contribution:
        """What a member sends again so it can be subtracted."""
        return self.train(client)

    def forget(self, client: Hashable) -> None:
        """The vehicle left: nothing is sent, and it no longer holds a contribution for this run."""
        self.held.discard(client)

    def _send(self, client: Hashable, kind: str, content: RecordDict) -> Message:
        """The node's one reply to a message of ``kind`` (refused naming the vehicle on error)."""
        vehicle = str(client)
        if vehicle not in self.nodes:
            raise KeyError(f"vehicle {vehicle!r} has no Flower node")
        message = Message(content, self.nodes[vehicle], kind)
        replies = list(self.grid.send_and_receive([message]))
        if len(replies) != 1 or replies[0].has_error():
            why = replies[0].error.reason if replies and replies[0].has_error() else f"{len(replies)} replies"
            raise RuntimeError(f"vehicle {vehicle!r} (node {self.nodes[vehicle]}): {kind} failed: {why}")
        return replies[0]

    def _ask(self, client: Hashable, kind: str, content: RecordDict) -> Contribution:
        vehicle = str(client)
        reply = self._send(client, kind, content)
        contribution = read_contribution(reply.content, client, self.trainer.config.fisher, self._model)
        self.held.add(client)
        self.trainings += kind == TRAIN
        self.log.append(
            {
                "vehicle": vehicle,
                "node_id": self.schedule_ids[vehicle],
                "type": kind,
                "sent": content_bytes(content),
                "reply": content_bytes(reply.content),
            }
        )
        return contribution

    def drain(self) -> list[dict[str, Any]]:
        """The messages logged since the last call."""
        out, self.log = self.log, []
        return out


def _identify(grid: Grid, schedule: Schedule) -> dict[str, int]:
    """Vehicle -> Flower node id: node with partition ``k - 1`` plays schedule node ``k``."""
    node_ids = sorted(grid.get_node_ids())
    asked = [Message(RecordDict({"task": ConfigRecord({})}), n, IDENTIFY) for n in node_ids]
    partitions: dict[int, int] = {}
    for reply in grid.send_and_receive(asked):
        if reply.has_error():
            raise RuntimeError(f"node {reply.metadata.src_node_id} did not identify: {reply.error.reason}")
        partitions[int(str(reply.content.config_records["node"]["partition_id"]))] = int(reply.metadata.src_node_id)
    missing = [k for k in schedule.vehicles if k - 1 not in partitions]
    if missing:
        raise RuntimeError(
            f"no Flower node plays schedule node(s) {missing[:5]} ({len(partitions)} nodes answered, the schedule "
            f"has {len(schedule.vehicles)}): run {len(schedule.vehicles)} SuperNodes (flwr run: --federation-config "
            f"num-supernodes={len(schedule.vehicles)})"
        )
    return {v: partitions[k - 1] for k, v in schedule.vehicles.items()}


def serve(grid: Grid, scenario: Scenario, schedule: Schedule, method: str, out: Path) -> None:
    """The ServerApp's body: replay ``schedule`` over ``grid`` and write the records and models.
    A failure is written into the records (``status: failed``) with what was done before it."""
    t0 = time.perf_counter()
    head = run_head(scenario, schedule, method, "flower")
    records: list[dict] = []
    models: dict[int, torch.Tensor] = {}
    try:
        setup = scenario.federated.setup(scenario.seed)
        nodes = _identify(grid, schedule)
        outcomes = Outcomes() if schedule.radio is not None else None
        pool = GridPool(setup, grid, nodes, {v: k for k, v in schedule.vehicles.items()}, outcomes)
        editors = editor_factory(scenario, pool, method)
        if outcomes is not None:
            rows = radio_replay(radio_plan(schedule, method), editors, pool, outcomes)
        else:
            c = scenario.coordinator
            rows = replay(schedule, editors, c.warmup, c.min_clients)
        records, models = collect(rows, lambda row: row.__setitem__("messages", pool.drain()))
        head["status"] = "complete"
    except Exception as e:
        head.update(status="failed", error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc())
    head["wall_s"] = time.perf_counter() - t0
    write_run(out, head, records, models)


def server_app(scenario: Scenario, schedule: Schedule, out: Path, method: str = "fsosa") -> ServerApp:
    """A ServerApp that replays ``schedule`` with F-SOSA and writes ``out``."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        serve(grid, scenario, schedule, method, out)

    return app


@lru_cache(maxsize=2)
def _node_setup(federated: str, seed: int) -> OneShotSetup:
    """The data and training settings a node process builds once per scenario."""
    from ..scenario.config import FederatedSection

    return FederatedSection.model_validate_json(federated).setup(seed)


def _contribution(setup: OneShotSetup, seed: int, vehicle: str, w0: torch.Tensor) -> Contribution:
    """The vehicle's contribution: trained once from ``w0`` on the shard ``vmc run`` gives it."""
    shards = setup.client_data
    data = shards[vehicle_shard(seed, vehicle, len(shards))]
    trainer = LocalTrainer(setup.model_fn, w0, setup.train, setup.streams)
    return upload_form(trainer.contribute(vehicle, data), setup.train.fisher_rank)


def identify_reply(message: Message, context: Context) -> Message:
    """The node's answer to ``query.identify``: the partition (schedule node - 1) it plays."""
    partition = int(context.node_config.get("partition-id", -1))
    return Message(RecordDict({"node": ConfigRecord({"partition_id": partition})}), reply_to=message)


def _scenario_keys(scenario: Scenario) -> tuple[str, int, str]:
    """The federated section as JSON, the seed, and the key a node's held contribution is filed under."""
    federated = scenario.federated.model_dump_json()
    return federated, scenario.seed, hashlib.sha256(json.dumps([federated, scenario.seed]).encode()).hexdigest()


def train_reply(scenario: Scenario, message: Message, context: Context) -> Message:
    """A node's answer to ``train``: its vehicle's contribution, trained from the W0 received,
    kept in the node's state and uploaded."""
    federated, seed, key = _scenario_keys(scenario)
    w0, vehicle = read_w0(message.content)
    content = contribution_content(_contribution(_node_setup(federated, seed), seed, vehicle, w0))
    context.state[HELD] = ConfigRecord({"vehicle": vehicle, "scenario": key})
    for name, record in content.items():
        context.state[f"{HELD}.{name}"] = record
    return Message(content, reply_to=message)


def recall_reply(scenario: Scenario, message: Message, context: Context) -> Message:
    """A node's answer to ``query.recall``: the contribution it holds, uploaded again."""
    _, _, key = _scenario_keys(scenario)
    vehicle = str(message.content.config_records["task"]["vehicle"])
    held = context.state.get(HELD)
    if held is None or held["vehicle"] != vehicle or held["scenario"] != key:
        return Message(Error(code=0, reason=f"holds no contribution of {vehicle!r}"), reply_to=message)
    names = ("model", "meta", "fisher")
    content = RecordDict({n: context.state[f"{HELD}.{n}"] for n in names if f"{HELD}.{n}" in context.state})
    return Message(content, reply_to=message)


def client_app(scenario: Scenario) -> ClientApp:
    """A ClientApp that trains a vehicle's contribution, keeps it in the node's state and uploads it."""
    app = ClientApp()

    @app.train()
    def train(message: Message, context: Context) -> Message:
        return train_reply(scenario, message, context)

    @app.query("recall")
    def recall(message: Message, context: Context) -> Message:
        return recall_reply(scenario, message, context)

    app.query("identify")(identify_reply)
    return app


def run_flower(
    scenario: Scenario, schedule: Schedule, out: Path, method: str = "fsosa", cpus_per_node: float = 1.0
) -> Path:
    """Run the server and one node per vehicle through ``flwr.simulation.run_simulation``; the
    records and models land in ``out`` (``records.json`` says ``status: failed`` and why on failure)."""
    from flwr.simulation import run_simulation

    t0 = time.perf_counter()
    run_simulation(
        server_app=server_app(scenario, schedule, out, method),
        client_app=client_app(scenario),
        num_supernodes=len(schedule.vehicles),
        backend_config={"client_resources": {"num_cpus": cpus_per_node, "num_gpus": 0.0}},
    )
    records = out / "records.json"
    if records.is_file():
        doc = json.loads(records.read_text(encoding="utf-8"))
        doc["simulation_wall_s"] = time.perf_counter() - t0
        records.write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    return out
