"""The Flower app that ``flwr run`` runs (``examples/flower_app``): a ServerApp and a ClientApp that
read what to run from Flower's run config instead of Python objects.

The run config (``[tool.flwr.app.config]`` of the app's ``pyproject.toml``, overridden with
``flwr run APP --run-config 'key=value ...'``) names the scenario and the schedule by absolute path
(the SuperLink runs the app from its own directory), the output directory, and what to run:

``scenario``, ``schedule``, ``out``
    the scenario YAML, a ``vmc export availability --format flower`` schedule (``vmc flower
    SCENARIO --schedule-only`` writes one with the run's radio) and the directory to write
    (records.json and models.safetensors, as ``vmc flower``); ``force`` lets it write into a
    directory that is not empty.
``strategy``, ``method``
    ``fsosa`` replays the schedule with the F-SOSA family ``method`` (``fsosa``, ``fedfisher``,
    ``fedavg``); a Flower strategy name (``fedavg``, ``fedadam``, ...) runs it in rounds, on the
    link times of ``method``'s radio outcomes.
``rounds``, ``round-s``, ``fraction``
    a Flower strategy's rounds, simulated seconds per round (0: the schedule's span split evenly)
    and the fraction of reachable nodes trained per round.

The federation needs one simulated SuperNode per schedule node (``--federation-config
num-supernodes=N``); the server refuses fewer, naming N.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from flwr.app import Context, Message
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid

from ..rundir.outputs import claim_dir
from ..scenario.schema import Scenario, load_scenario
from .apps import identify_reply, recall_reply, serve, train_reply
from .replay import Schedule, read_schedule
from .strategies import FLOWER_STRATEGIES, serve_strategy, strategy_train_reply

FSOSA_METHODS = ("fsosa", "fedfisher", "fedavg")


@dataclass(frozen=True)
class AppConfig:
    """A run config read and checked."""

    scenario: Path
    schedule: Path
    out: Path
    strategy: str
    method: str
    rounds: int
    round_s: float | None
    fraction: float
    force: bool


def _path(config: Mapping[str, Any], key: str) -> Path:
    value = str(config.get(key) or "")
    if not value:
        raise ValueError(f"run config {key!r} is empty: give an absolute path (flwr run --run-config '{key}=\"...\"')")
    if not os.path.isabs(value):
        raise ValueError(
            f"run config {key}={value!r} is not an absolute path (the SuperLink runs the app from its own directory)"
        )
    return Path(value)


def app_config(config: Mapping[str, Any]) -> AppConfig:
    """The run config as an :class:`AppConfig`; bad values are refused naming the key."""
    strategy = str(config.get("strategy", "fsosa"))
    method = str(config.get("method", "fsosa"))
    if strategy != "fsosa" and strategy not in FLOWER_STRATEGIES:
        raise ValueError(f"run config strategy={strategy!r}: one of fsosa, {', '.join(FLOWER_STRATEGIES)}")
    if method not in FSOSA_METHODS:
        raise ValueError(f"run config method={method!r}: one of {', '.join(FSOSA_METHODS)}")
    try:
        rounds, round_s, fraction = (
            int(config.get("rounds", 10)),
            float(config.get("round-s", 0.0)),
            float(config.get("fraction", 1.0)),
        )
    except (TypeError, ValueError) as e:
        raise ValueError(f"run config rounds, round-s and fraction must be numbers ({e})") from None
    if rounds < 1 or round_s < 0 or not 0 < fraction <= 1:
        raise ValueError(
            f"run config: rounds >= 1, round-s >= 0, 0 < fraction <= 1 (got {rounds}, {round_s}, {fraction})"
        )
    return AppConfig(
        _path(config, "scenario"),
        _path(config, "schedule"),
        _path(config, "out"),
        strategy,
        method,
        rounds,
        round_s or None,
        fraction,
        bool(config.get("force", False)),
    )


@lru_cache(maxsize=4)
def _scenario(path: str, stamp: int) -> Scenario:
    return load_scenario(path)


@lru_cache(maxsize=4)
def _schedule(path: str, stamp: int) -> Schedule:
    return read_schedule(path)


def load_inputs(cfg: AppConfig) -> tuple[Scenario, Schedule]:
    """The scenario and the schedule the run config names (read once per process and file version)."""
    for p in (cfg.scenario, cfg.schedule):
        if not p.is_file():
            raise FileNotFoundError(f"{p}: no such file (named by the run config)")
    return (
        _scenario(str(cfg.scenario), cfg.scenario.stat().st_mtime_ns),
        _schedule(str(cfg.schedule), cfg.schedule.stat().st_mtime_ns),
    )


def serve_app(grid: Grid, config: Mapping[str, Any]) -> Path:
    """The ServerApp's body: what ``config`` names, run over ``grid``, written to its ``out``."""
    cfg = app_config(config)
    scenario, schedule = load_inputs(cfg)
    out = claim_dir(cfg.out, force=cfg.force)
    if cfg.strategy == "fsosa":
        serve(grid, scenario, schedule, cfg.method, out)
        return out
    span = cfg.round_s if cfg.round_s is not None else (schedule.end - schedule.begin) / cfg.rounds
    options = {"strategy": cfg.strategy, "rounds": cfg.rounds, "round_s": span, "fraction": cfg.fraction}
    serve_strategy(grid, scenario, schedule, out, {**options, "method": cfg.method})
    return out


def app_client() -> ClientApp:
    """The ClientApp: a vehicle's node for F-SOSA or for a Flower strategy, as the run config says."""
    app = ClientApp()

    @app.train()
    def train(message: Message, context: Context) -> Message:
        cfg = app_config(context.run_config)
        scenario, schedule = load_inputs(cfg)
        if cfg.strategy == "fsosa":
            return train_reply(scenario, message, context)
        return strategy_train_reply(scenario, schedule, message, context)

    @app.query("recall")
    def recall(message: Message, context: Context) -> Message:
        scenario, _ = load_inputs(app_config(context.run_config))
        return recall_reply(scenario, message, context)

    app.query("identify")(identify_reply)
    return app
