"""Flower's own strategies (FedAvg and its kin) run in rounds on a vmc-sim availability schedule.

The ServerApp wraps its Grid in :class:`~vmc_sim.flower.rounds.ScheduledGrid` and hands it to the
strategy's ``start``: each round samples from the nodes reachable at the round's start, replies of
nodes whose upload outlasts their coverage (on the run's per-node link times when the schedule
carries its radio, :class:`~vmc_sim.flower.rounds.RoundClock`) are discarded, and the aggregated
model is evaluated on
the server (fl_core's ``evaluate``) after every round. A node trains ``train.epochs`` from the
arrays it receives on its vehicle's shard (the shard ``vmc run`` gives it) and replies with its
arrays and ``num-examples``. Flower samples with Python's ``random``, seeded from the scenario seed
through the named stream ``flower-sampling``, so a run is reproducible.
"""

from __future__ import annotations

import random
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp import strategy as flwr_strategy

from fl_core.rng import derive_seed
from fl_core.training import LocalTrainer, evaluate

from ..scenario.schema import Scenario
from ..scenario.shards import vehicle_shard
from .apps import _identify, _node_setup, identify_reply
from .replay import Schedule, write_run
from .rounds import RoundClock, ScheduledGrid, coverage

# Flower's strategy classes by name (fl_core.rounds.STRATEGIES holds the toolkit's own strategies)
FLOWER_STRATEGIES: dict[str, type[flwr_strategy.FedAvg]] = {
    "fedavg": flwr_strategy.FedAvg,
    "fedavgm": flwr_strategy.FedAvgM,
    "fedprox": flwr_strategy.FedProx,
    "fedadagrad": flwr_strategy.FedAdagrad,
    "fedadam": flwr_strategy.FedAdam,
    "fedyogi": flwr_strategy.FedYogi,
    "fedmedian": flwr_strategy.FedMedian,
    "fedtrimmedavg": flwr_strategy.FedTrimmedAvg,
    "krum": flwr_strategy.Krum,
}
SAMPLING = "flower-sampling"  # the named stream seeding Flower's node sampling
WEIGHTS = "weights"  # the one array of a model: fl_core's flat weight vector


def sampling_seed(scenario: Scenario, strategy: str) -> int:
    """The seed of Python's ``random`` for Flower's node sampling in this run."""
    return derive_seed(scenario.seed, SAMPLING, strategy)


def build_strategy(name: str, fraction: float) -> flwr_strategy.FedAvg:
    """Flower's strategy ``name`` training on ``fraction`` of the reachable nodes each round.

    No minimum node counts (Flower would wait for nodes that the schedule says are away) and no
    client-side evaluation (the server evaluates the aggregated model)."""
    if name not in FLOWER_STRATEGIES:
        raise ValueError(f"unknown strategy {name!r} (one of {', '.join(FLOWER_STRATEGIES)})")
    return FLOWER_STRATEGIES[name](
        fraction_train=fraction,
        fraction_evaluate=0.0,
        min_train_nodes=0,
        min_evaluate_nodes=0,
        min_available_nodes=0,
    )


def link_times(schedule: Schedule, method: str) -> tuple[dict[str, float] | None, float | None, str | None]:
    """Per-node link times of the schedule's radio (``method``'s, else its first method's), their
    default, and the method they came from; all None for a schedule without the radio."""
    methods = (schedule.radio or {}).get("methods") or {}
    if not methods:
        return None, None, None
    name = method if method in methods else next(iter(methods))
    section = methods[name]
    default = section.get("default_link_s")
    links = {str(k): float(v) for k, v in (section.get("link_s") or {}).items()}
    return links, (None if default is None else float(default)), name


def _arrays(weights: torch.Tensor) -> ArrayRecord:
    return ArrayRecord({WEIGHTS: Array(np.ascontiguousarray(weights.detach().cpu().numpy()))})


def _weights(record: ArrayRecord) -> torch.Tensor:
    return torch.from_numpy(np.array(record[WEIGHTS].numpy(), dtype=np.float32, copy=True))


def serve_strategy(grid: Grid, scenario: Scenario, schedule: Schedule, out: Path, options: dict[str, Any]) -> None:
    """The ServerApp's body: ``options`` (strategy, rounds, round_s, fraction) run over ``grid``
    through the schedule; the rounds and models go to ``out`` (``status: failed`` and why on failure)."""
    t0 = time.perf_counter()
    name = str(options["strategy"])
    seed = sampling_seed(scenario, name)
    head: dict[str, Any] = {
        "format": "vmc-sim-flower-rounds",
        "runner": "flower",
        "scenario": scenario.name,
        "seed": scenario.seed,
        "method": name,
        "nodes": len(schedule.vehicles),
        "schedule": schedule.meta.get("trace"),
        "rounds": int(options["rounds"]),
        "round_s": float(options["round_s"]),
        "fraction": float(options["fraction"]),
        "sampling_seed": seed,
        "status": "running",
    }
    links, default_link, links_of = link_times(schedule, str(options.get("method", "fsosa")))
    head["link_times"] = None if links_of is None else {"method": links_of, "default_s": default_link}
    models: dict[int, torch.Tensor] = {}
    grid_view: ScheduledGrid | None = None
    try:
        setup = scenario.federated.setup(scenario.seed)
        model = setup.model_fn()
        clock = RoundClock(schedule.begin, float(options["round_s"]), coverage(schedule), links, default_link)
        ids = {v: k for k, v in schedule.vehicles.items()}
        grid_view = ScheduledGrid(grid, clock, _identify(grid, schedule), ids)
        view = grid_view

        def evaluate_fn(server_round: int, arrays: ArrayRecord) -> MetricRecord:
            weights = _weights(arrays)
            accuracy = float(evaluate(model, weights, setup.test_set)[0])
            models[server_round] = weights
            if server_round == 0:
                head["initial_accuracy"] = accuracy
            else:
                view.record()["accuracy"] = accuracy
                view.advance()
            return MetricRecord({"accuracy": accuracy})

        strategy = build_strategy(name, float(options["fraction"]))
        random.seed(seed)
        strategy.start(
            grid=view, initial_arrays=_arrays(setup.w0), num_rounds=int(options["rounds"]), evaluate_fn=evaluate_fn
        )
        head["status"] = "complete"
    except Exception as e:
        head.update(status="failed", error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc())
    head["wall_s"] = time.perf_counter() - t0
    rounds = [grid_view.rounds[k] for k in sorted(grid_view.rounds)] if grid_view is not None else []
    write_run(out, head, rounds, models)


def strategy_server_app(scenario: Scenario, schedule: Schedule, out: Path, options: dict[str, Any]) -> ServerApp:
    """A ServerApp running Flower's strategy ``options["strategy"]`` on ``schedule``; writes ``out``."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        serve_strategy(grid, scenario, schedule, out, options)

    return app


def strategy_train_reply(scenario: Scenario, schedule: Schedule, message: Message, context: Context) -> Message:
    """A node's answer to a strategy's ``train``: it plays schedule node ``partition-id + 1``,
    trains ``train.epochs`` from the arrays received on its vehicle's shard and replies with its
    arrays and ``num-examples``."""
    seed = scenario.seed
    setup = _node_setup(scenario.federated.model_dump_json(), seed)
    vehicle = schedule.vehicles[int(context.node_config["partition-id"]) + 1]
    server_round = int(str(message.content.config_records["config"].get("server-round", 0)))
    data = setup.client_data[vehicle_shard(seed, vehicle, len(setup.client_data))]
    start = _weights(message.content.array_records["arrays"])
    trainer = LocalTrainer(setup.model_fn, start, setup.train, setup.streams)
    trained = trainer.train((vehicle, "round", server_round), data)
    metrics = MetricRecord({"num-examples": len(data), "train_s": float(trained.train_s)})
    return Message(RecordDict({"arrays": _arrays(trained.weights), "metrics": metrics}), reply_to=message)


def strategy_client_app(scenario: Scenario, schedule: Schedule) -> ClientApp:
    """A ClientApp answering a strategy's rounds (:func:`strategy_train_reply`)."""
    app = ClientApp()

    @app.train()
    def train(message: Message, context: Context) -> Message:
        return strategy_train_reply(scenario, schedule, message, context)

    app.query("identify")(identify_reply)
    return app


def run_strategy(
    scenario: Scenario,
    schedule: Schedule,
    out: Path,
    strategy: str = "fedavg",
    rounds: int = 10,
    round_s: float | None = None,
    fraction: float = 1.0,
    cpus_per_node: float = 1.0,
    method: str = "fsosa",
) -> Path:
    """Run Flower's ``strategy`` for ``rounds`` rounds of ``round_s`` simulated seconds (default:
    the schedule's span split evenly) through ``flwr.simulation.run_simulation``, one node per vehicle;
    on the radio's link times of ``method`` when the schedule carries them."""
    from flwr.simulation import run_simulation

    build_strategy(strategy, fraction)
    if rounds < 1:
        raise ValueError("rounds must be at least 1")
    span = round_s if round_s is not None else (schedule.end - schedule.begin) / rounds
    if not span > 0:
        raise ValueError(f"a round must last a positive number of seconds, got {span}")
    options = {"strategy": strategy, "rounds": rounds, "round_s": span, "fraction": fraction, "method": method}
    run_simulation(
        server_app=strategy_server_app(scenario, schedule, out, options),
        client_app=strategy_client_app(scenario, schedule),
        num_supernodes=len(schedule.vehicles),
        backend_config={"client_resources": {"num_cpus": cpus_per_node, "num_gpus": 0.0}},
    )
    return out
