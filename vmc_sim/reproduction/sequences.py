"""The Fig. 3 request-sequence runner (seed 000): the sequences, every method behind the editor
interface on them, summaries, plot and report body. ``tools/fig3_sequences.py`` runs it once,
``tools/table6_scalability.py`` at several populations.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np

from fl_core.clients import ClientPool
from fl_core.editors import EDITORS, FedRRConfig, FineTuneConfig, FixedRatio, build_editor
from fl_core.experiment import OneShotSetup
from fl_core.models import MODELS
from fl_core.projection import ProjectionConfig
from fl_core.rounds import RoundConfig
from fl_core.store import MemoryStore
from fl_core.training import LocalTrainer, evaluate

from .common import setup_from_args

IL_METHODS = ("fsosa", "retrain", "finetune")
UL_METHODS = ("fsosa", "retrain", "federaser", "fedrr", "fats")
LABELS = {
    ("IL", "fsosa"): "F-SOSA-I",
    ("UL", "fsosa"): "F-SOSA-U",
    "retrain": "Retrain",
    "finetune": "Fine-tuning",
    "federaser": "FedEraser",
    "fedrr": "FedRR",
    "fats": "FATS-CU",
}
KINDS = ("broadcast", "model_upload", "fisher_upload", "control")
MB = 1e6


class PaperFig3(TypedDict):
    il_gain_over_finetune_max: float
    il_fluctuation: dict[str, float]
    il_comm_vs_retrain: float
    ul_gain_over_baselines_max: float


# Seed 000, section VI-B 3 (Fig. 3, CIFAR-10): the findings stated in the text.
PAPER_FIG3: PaperFig3 = {
    "il_gain_over_finetune_max": 18.6,  # F-SOSA-I minus Fine-tuning, points, at most
    "il_fluctuation": {"fsosa": 2.28, "retrain": 3.20, "finetune": 9.12},  # %, definition not given
    "il_comm_vs_retrain": -39.73,  # F-SOSA-I final cumulative communication vs Retrain, %
    "ul_gain_over_baselines_max": 10.0,  # F-SOSA-U over FedEraser/FedRR/FATS-CU, points, "up to"
}


def label(task: str, method: str) -> str:
    """The paper's name of ``method`` in ``task`` (IL or UL)."""
    return LABELS.get((task, method)) or LABELS.get(method, method)


@dataclass(frozen=True)
class Sequences:
    """The initial client set and the IL (joins) and UL (leaves) request sequences."""

    initial: tuple[int, ...]
    joins: tuple[int, ...]
    leaves: tuple[int, ...]


def draw_sequences(population: int, initial: int, requests: int, rng: np.random.Generator) -> Sequences:
    """Initial clients 0..initial-1; ``requests`` joins drawn from initial..population-1 and
    ``requests`` leaves drawn from the initial clients, each without replacement."""
    if not 0 < initial < population:
        raise ValueError(f"initial must lie in 1..population-1, got initial={initial}, population={population}")
    if requests > population - initial:
        raise ValueError(f"requests={requests} joins need {requests} inactive clients; only {population - initial}")
    if requests >= initial:
        raise ValueError(f"requests={requests} leaves would empty the initial set of {initial} clients")
    joins = rng.choice(np.arange(initial, population), size=requests, replace=False)
    leaves = rng.choice(np.arange(initial), size=requests, replace=False)
    return Sequences(tuple(range(initial)), tuple(int(c) for c in joins), tuple(int(c) for c in leaves))


@dataclass(frozen=True)
class Baselines:
    """Settings of the multi-round baselines (FedAvg training, FedEraser/FedRR/FATS-CU) and of
    Fine-tuning; ``rounds`` is shared by every multi-round editor."""

    rounds: RoundConfig = RoundConfig()
    fedrr: FedRRConfig = FedRRConfig()
    finetune: FineTuneConfig = FineTuneConfig()

    def options(self, method: str) -> Any:
        return {"fedrr": self.fedrr, "finetune": self.finetune}.get(method)


def make_editor(
    name: str,
    pool: ClientPool,
    rng: np.random.Generator,
    rho: float,
    projection: ProjectionConfig,
    baselines: Baselines,
):
    """``build_editor(name, ...)`` with the fixed-ratio rule and the baselines' settings."""
    return build_editor(
        name, pool, rng, FixedRatio(rho), projection, rounds=baselines.rounds, options=baselines.options(name)
    )


def _paper_style_bytes(rep, unit: dict[str, float]) -> float:
    """F-SOSA as implemented in the paper: a triggered edit re-collects the whole subset."""
    if not rep.triggered:
        return 0.0
    return unit["broadcast"] + rep.subset_size * (unit["model_upload"] + unit["fisher_upload"])


def warm_up(setup: OneShotSetup) -> None:
    """One throwaway contribution, so that torch's first-call overhead is not charged to a client."""
    if getattr(setup, "_warm", False):
        return
    first = next(iter(setup.client_data))
    LocalTrainer(setup.model_fn, setup.w0, setup.train, setup.streams).contribute("warm-up", setup.client_data[first])
    setattr(setup, "_warm", True)  # noqa: B010  OneShotSetup has no such field: a mark read back by getattr above


def run_sequence(
    task: str,
    method: str,
    setup: OneShotSetup,
    store: MemoryStore,
    seq: Sequences,
    rho: float,
    projection: ProjectionConfig,
    test,
    baselines: Baselines = Baselines(),
    say=print,
) -> list[dict[str, Any]]:
    """Fit ``method`` on ``seq.initial`` then replay the IL or UL sequence; one row per request
    (index 0 = the fit) with accuracy, time and bytes, per request and cumulative."""
    if task not in ("IL", "UL"):
        raise ValueError(f"task must be 'IL' or 'UL', got {task!r}")
    trainer = LocalTrainer(setup.model_fn, setup.w0, setup.train, setup.streams)
    pool = ClientPool(trainer, setup.client_data, reuse=True, store=store)
    editor = make_editor(method, pool, setup.streams.numpy("subset", task), rho, projection, baselines)
    warm_up(setup)
    net = setup.model_fn()
    requests = [("+", c) for c in seq.joins] if task == "IL" else [("-", c) for c in seq.leaves]
    rows: list[dict[str, Any]] = []
    cum = {"time_s": 0.0, "MB": 0.0, "paper_MB": 0.0}
    last_model, last_acc = None, None
    unit: dict[str, float] | None = None
    for index, req in enumerate([None, *requests]):
        if req is None:
            rep = editor.fit(seq.initial)
            n = max(1, len(rep.trained))
            unit = {
                "broadcast": rep.bytes["broadcast"],
                "model_upload": rep.bytes["model_upload"] / n,
                "fisher_upload": rep.bytes["fisher_upload"] / n,
            }
        elif req[0] == "+":
            rep = editor.add(req[1])
        else:
            rep = editor.remove(req[1])
        if editor.model is not last_model:
            last_acc, _ = evaluate(net, editor.model, test)
            last_model = editor.model
        time_s = float(rep.compute_s) + float(rep.solve_s)
        mb = rep.total_bytes / MB
        paper_mb = mb
        if method == "fsosa" and index:
            assert unit is not None  # set by the fit (index 0)
            paper_mb = _paper_style_bytes(rep, unit) / MB
        cum["time_s"] += time_s
        cum["MB"] += mb
        cum["paper_MB"] += paper_mb
        assert last_acc is not None  # evaluated after the fit
        rows.append(
            {
                "task": task,
                "method": method,
                "label": label(task, method),
                "index": index,
                "request": "fit" if req is None else f"{req[1]}{req[0]}",
                "population": rep.population,
                "subset_size": rep.subset_size,
                "triggered": int(bool(rep.triggered)),
                "trained": len(rep.trained),
                "accuracy": round(100 * last_acc, 3),
                "compute_s": round(float(rep.compute_s), 4),
                "max_client_compute_s": round(float(rep.max_client_compute_s), 4),
                "solve_s": round(float(rep.solve_s), 4),
                "wall_s": round(float(rep.wall_s), 4),
                "time_s": round(time_s, 4),
                "cum_time_s": round(cum["time_s"], 4),
                **{f"{k}_MB": round(rep.bytes.get(k, 0) / MB, 6) for k in KINDS},
                "MB": round(mb, 6),
                "cum_MB": round(cum["MB"], 6),
                "paper_style_MB": round(paper_mb, 6),
                "cum_paper_style_MB": round(cum["paper_MB"], 6),
            }
        )
        say(
            f"  {task} {method:<10} #{index:<2} {rows[-1]['request']:>5} acc {rows[-1]['accuracy']:6.2f} "
            f"time {time_s:7.2f} s  {mb:7.3f} MB  P={rep.subset_size} trig={int(bool(rep.triggered))}"
        )
    return rows


def run_task(
    task: str,
    methods: Sequence[str],
    setup: OneShotSetup,
    store: MemoryStore,
    seq: Sequences,
    rho: float,
    projection: ProjectionConfig,
    test,
    baselines: Baselines = Baselines(),
    say=print,
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Every registered method of ``methods`` on the task's sequence; returns (rows, notes) where
    notes names each method skipped (not registered) or failed (its error)."""
    rows, notes = [], {}
    for m in methods:
        if m not in EDITORS:
            notes[m] = "not registered in fl_core.editors.EDITORS when this ran"
            say(f"  {task} {m}: skipped ({notes[m]})")
            continue
        try:
            rows += run_sequence(task, m, setup, store, seq, rho, projection, test, baselines, say)
        except Exception as exc:  # a baseline still being written must not stop the others
            notes[m] = f"failed: {type(exc).__name__}: {exc}"
            say(f"  {task} {m}: {notes[m]}\n{traceback.format_exc(limit=3)}")
    return rows, notes


def build_setup(args: argparse.Namespace, num_clients: int) -> OneShotSetup:
    """The sequences' set-up: ``--dataset`` with ``--alpha`` among ``num_clients`` clients."""
    return setup_from_args(args, args.dataset, args.alpha, num_clients=num_clients)


def add_common_args(p: argparse.ArgumentParser) -> None:
    """Options shared with ``tools/table6_scalability.py``."""
    p.add_argument("--dataset", default="mnist")
    p.add_argument("--model", default="cnn", choices=MODELS.names())
    p.add_argument("--fisher", default="diagonal", help="diagonal (default: closed-form solve), kfac, full")
    p.add_argument("--epochs", type=int, default=10, help="K local epochs (paper: 50)")
    p.add_argument("--lr", type=float, default=0.01, help="local SGD lr, with momentum 0.9 (the paper's 0.01)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--alpha", type=float, default=0.5, help="Dirichlet label skew")
    p.add_argument("--rho", type=float, default=0.5)
    p.add_argument("--requests", type=int, default=15, help="joins (IL) and leaves (UL) per sequence")
    p.add_argument("--max-train", type=int, default=None, help="training slice (default: all)")
    p.add_argument("--max-test", type=int, default=2000, help="test samples used for accuracy")
    p.add_argument("--cg-tol", type=float, default=1e-5)
    p.add_argument("--cg-iter", type=int, default=200)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    g = p.add_argument_group("multi-round baselines (FedAvg training of FedEraser, FedRR, FATS-CU) and Fine-tuning")
    g.add_argument("--rounds", type=int, default=6, help="FedAvg rounds of the initial training")
    g.add_argument("--round-clients", type=int, default=10, help="clients per round")
    g.add_argument("--round-epochs", type=int, default=1, help="local epochs per round")
    g.add_argument(
        "--round-lr", type=float, default=0.05, help="local SGD lr of the rounds (they train without momentum)"
    )
    g.add_argument("--round-batch", type=int, default=32)
    g.add_argument("--fedrr-rounds", type=int, default=1, help="FedRR's rapid-retraining rounds per removal")
    g.add_argument(
        "--finetune-grid",
        type=int,
        nargs="+",
        default=[5, 10, 15, 20],
        help="Fine-tuning's epochs to choose from (paper: 5, 10, ..., 50)",
    )


def apply_quick(args: argparse.Namespace) -> None:
    """The smoke size shared by both scripts: digits, the MLP, short runs (seconds)."""
    args.dataset, args.model, args.fisher, args.epochs, args.lr = "digits", "mlp", "diagonal", 20, 0.05
    args.max_train, args.max_test = None, None
    args.rounds, args.round_clients, args.round_epochs, args.fedrr_rounds = 4, 5, 2, 1
    args.finetune_grid = [5, 10]


def baselines_of(args: argparse.Namespace) -> Baselines:
    """The baselines' settings from the command line."""
    rounds = RoundConfig(
        rounds=args.rounds,
        clients_per_round=args.round_clients,
        local_epochs=args.round_epochs,
        lr=args.round_lr,
        batch_size=args.round_batch,
    )
    return Baselines(
        rounds, FedRRConfig(rounds=args.fedrr_rounds), FineTuneConfig(epochs_grid=tuple(args.finetune_grid))
    )


def common_info(args: argparse.Namespace, setup: OneShotSetup) -> dict[str, Any]:
    b = baselines_of(args)
    return {
        "baselines": (
            f"multi-round baselines: FedAvg {b.rounds.rounds} rounds x {b.rounds.clients_per_round} clients "
            f"x {b.rounds.local_epochs} local epoch(s), lr {b.rounds.lr}, batch {b.rounds.batch_size}; "
            f"FedEraser interval 2, calibration ratio 0.5; FedRR {b.fedrr.rounds} rapid-retraining round(s) per "
            f"removal; FATS-CU sample rate 0.5; Fine-tuning epochs chosen from "
            f"{{{', '.join(map(str, b.finetune.epochs_grid))}}} on a 20 % hold-out of the new client"
        ),
        "dataset": args.dataset,
        "model": args.model,
        "fisher": args.fisher,
        "epochs": args.epochs,
        "lr": args.lr,
        "batch_size": args.batch_size,
        "alpha": args.alpha,
        "rho": args.rho,
        "seed": args.seed,
        "train_samples": len(setup.train_set),
        "test_samples": len(setup.test_set),
    }


def command_line(script: str, argv: list[str] | None) -> str:
    return "python tools/" + script + " " + " ".join(sys.argv[1:] if argv is None else argv)
