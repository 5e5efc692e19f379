"""What the reproduction scripts under ``tools/`` share: the one-shot runner of Tables II, III
and V, the contribution store of a reproduction, the warm-up, the paper-style byte accounting, the
common options and the failure rule (a method that fails makes its script exit non-zero)."""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import time
from pathlib import Path
from typing import Any, Protocol, cast

import numpy as np

from fl_core.augment import Augment
from fl_core.editors import DenseConfig, DenseEditor, Editor, FixedRatio, build_editor
from fl_core.experiment import OneShotSetup
from fl_core.fisher import FisherLabels, layer_specs
from fl_core.projection import STOPPED_SHORT, ProjectionConfig, SolveInfo
from fl_core.rng import derive_seed
from fl_core.store import ContributionStore
from fl_core.training import LocalTrainer, TrainConfig, evaluate, key_settings

from . import report

LR_NOTE = (
    "local SGD has momentum 0.9, so lr 0.01 is the paper's and the default; lr 0.05 with momentum diverged on the "
    "reduced runs (Fig. 1, MNIST, rho 0.5, K = 10, batch 16: F-SOSA 84.19 % at lr 0.01, 24.97 % at lr 0.05; "
    "Fig. 2 at lr 0.05 ended at chance from K = 50)"
)


class SubsetEditor(Protocol):
    @property
    def members(self) -> set[int]: ...


def members_of(editor: Editor) -> set[int]:
    """The subset of an editor that keeps one (F-SOSA and its variants, DENSE, FedLPA): members of
    a one-shot setup, whose clients are 0..n-1."""
    return cast(SubsetEditor, editor).members


def warm_up(trainer: LocalTrainer, setup: OneShotSetup) -> None:
    """One throwaway contribution on a few samples, so that torch's one-off start-up cost is not
    charged to whichever client happens to train first (seen: 2.8 s on a 0.01 s client)."""
    data = setup.client_data[min(setup.client_data)]
    trainer.contribute("warm-up", data.subset(np.arange(min(64, len(data)))))


def alpha_for(dataset: str, alpha: float) -> float | None:
    """FEMNIST keeps its natural split by writer (seed 000, VI-A); the others use Dirichlet."""
    return None if dataset == "femnist" else alpha


def train_config(args: argparse.Namespace, epochs: int | None = None) -> TrainConfig:
    """Local training from ``--epochs`` (or ``epochs``), ``--lr``, ``--batch-size``, ``--fisher``, ``--threads``."""
    return TrainConfig(
        epochs=args.epochs if epochs is None else epochs,
        lr=args.lr,
        batch_size=args.batch_size,
        fisher=args.fisher,
        threads=args.threads,
    )


def setup_from_args(
    args: argparse.Namespace,
    dataset: str,
    alpha: float | None,
    train: TrainConfig | None = None,
    num_clients: int | None = None,
) -> OneShotSetup:
    """The one-shot set-up a reproduction's command line names: ``dataset`` split with ``alpha``
    among ``--clients`` (or ``num_clients``) clients, ``--model``, ``--seed``, ``train`` (default
    :func:`train_config`), ``--max-train`` and ``--max-test``."""
    return OneShotSetup(
        dataset=dataset,
        num_clients=args.clients if num_clients is None else num_clients,
        alpha=alpha,
        model=args.model,
        seed=args.seed,
        train=train_config(args) if train is None else train,
        max_train_samples=args.max_train,
        max_test_samples=args.max_test,
    )


def unit_sizes(fit: dict[str, Any]) -> dict[str, float]:
    """Per-payload bytes (broadcast; model and Fisher upload per client) from a fit record."""
    n = len(fit["trained"])
    return {
        "broadcast": fit["bytes"]["broadcast"],
        "model_upload": fit["bytes"]["model_upload"] / n,
        "fisher_upload": fit["bytes"]["fisher_upload"] / n,
    }


def paper_style(fsosa: list[dict[str, Any]], unit: dict[str, float]) -> list[dict[str, Any]]:
    """The paper's accounting on our F-SOSA run: a triggered request re-collects the whole subset."""
    out = []
    for r in fsosa:
        trig = bool(r.get("triggered")) and r.get("kind") != "suspend"  # a withdrawn model re-collects nothing
        p = r["subset_size"] if trig else 0
        b = {
            "broadcast": unit["broadcast"] if trig else 0,
            "model_upload": p * unit["model_upload"],
            "fisher_upload": p * unit["fisher_upload"],
            "control": (r.get("bytes") or {}).get("control", 0),
        }
        out.append(
            {
                **{
                    k: r.get(k)
                    for k in (
                        "index",
                        "kind",
                        "triggered",
                        "population",
                        "subset_size",
                        "left",
                        "joined",
                        "request_time",
                    )
                },
                "method": "fsosa_paper",
                "bytes": b,
                "total_bytes": sum(b.values()),
                "trained": [],
                "makespan_s": None,
                "accuracy": None,
                "failed": [],
            }
        )
    return out


def trained_samples(run_path: str | Path) -> dict[str, int]:
    """Client -> training samples of every contribution a run trained (its store's index; the
    store's ``client`` field is the client's ``repr``)."""
    index = Path(run_path) / "contributions" / "index.json"
    if not index.is_file():
        return {}
    try:
        entries = json.loads(index.read_text())
        return {e["client"]: int(e["meta"]["num_samples"]) for e in entries.values()}
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"{index}: not a valid contribution index ({e})") from None


def compute_time(records: list[dict[str, Any]], samples: dict[str, int]) -> float | None:
    """Seed 000's accounting of time (Appendix B-D, the BDD100K case study): cumulative
    computation time, the clients of a request training side by side, so a request costs its
    slowest trained client's job ("Retrain must wait for all participating clients to complete
    local training and is therefore limited by the slowest client") plus the coordinator's solve,
    and a request that trains nobody costs its solve alone. Each job's seconds are the record's
    ``compute_sim_s`` shared by samples; None where that does not hold (jobs queued on one shared
    device, a failed job, a client missing from ``samples``): the accounting assumes on-board units."""
    total, rates = 0.0, []
    for r in records:
        trained = r.get("trained") or []
        if trained:
            n = [samples.get(repr(c)) for c in trained]
            if any(k is None or k <= 0 for k in n) or r.get("failed") or not r.get("compute_sim_s"):
                return None
            ns = cast(list[int], n)
            rates.append(r["compute_sim_s"] / sum(ns))
            total += rates[-1] * max(ns)
        total += r.get("solve_sim_s") or 0.0
    if rates and max(rates) > min(rates) * (1 + 1e-6):  # not one cost per sample: jobs shared a device
        return None
    return total


METHODS = ("fsosa", "fedfisher", "fedavg")


CHOICES = METHODS + ("fedlpa", "dense")


def parse_alpha(text: str) -> float | None:
    """A Dirichlet alpha, or ``writer`` for the natural split by writer (FEMNIST)."""
    if text == "writer":
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"alpha must be a positive number or 'writer', got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"alpha must be positive, got {value}")
    return value


def alpha_label(alpha: float | None) -> str:
    return "writer" if alpha is None else f"{alpha}"


def parse_damping(text: str) -> float:
    """A relative damping, or ``mean`` (infinite damping: the weighted mean)."""
    if text == "mean":
        return math.inf
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"damping must be a number >= 0 or 'mean', got {text!r}") from None
    if not 0 <= value < math.inf:
        raise argparse.ArgumentTypeError(f"damping must be a finite number >= 0 or 'mean', got {text!r}")
    return value


def damping_label(d: float | None) -> str:
    return "-" if d is None else ("mean" if math.isinf(d) else f"{d:g}")


def contribution_store(setup: OneShotSetup, args: argparse.Namespace, alpha: float | None) -> ContributionStore | None:
    """``--store``: one directory per (dataset, split, training) setting, guarded by its fingerprint.
    Threads, device and the K-FAC upload rank are not part of it (the store keeps whole factors;
    ``fl_core.clients`` compresses on upload), so runs that differ only in those share it."""
    if not args.store:
        return None
    train = key_settings(setup.train, ("device", "threads", "fisher_rank"))
    key = json.dumps(
        {
            "dataset": args.dataset,
            "alpha": alpha,
            "scheme": args.scheme,
            "clients": args.clients,
            "model": args.model,
            "seed": args.seed,
            "train": train,
            "max_train": args.max_train,
            "validation": args.validation_samples,
        },
        sort_keys=True,
    )
    fp = hashlib.sha256(key.encode()).hexdigest()[:16]
    return ContributionStore(Path(args.store) / fp, fp, setup.train.fisher, layer_specs(setup.model_fn()))


def dense_config(args: argparse.Namespace) -> DenseConfig:
    """DENSE's server sizes from the ``--dense-*`` options (None keeps the default)."""
    sizes = {
        "rounds": args.dense_rounds,
        "generator_steps": args.dense_generator_steps,
        "distill_steps": args.dense_distill_steps,
    }
    return DenseConfig(**{k: v for k, v in sizes.items() if v is not None})


def subset_stream(setup: OneShotSetup, args: argparse.Namespace, method: str) -> np.random.Generator:
    """The stream of ``method``'s subset draw: the run seed's, or ``--subset-seed``'s (same split and
    contributions, another draw of F-SOSA's members)."""
    subset_seed = getattr(args, "subset_seed", None)
    if subset_seed is None:
        return setup.streams.numpy("subset", method)
    return np.random.default_rng(derive_seed(subset_seed, "subset", method))


def run(args: argparse.Namespace) -> list[dict]:
    """Table II/III/V rows: every one-shot method fitted on each alpha's split (tools/table2.py, tools/table5_resnet18.py)."""
    rows = []
    for alpha in args.alphas:
        setup = OneShotSetup(
            dataset=args.dataset,
            num_clients=args.clients,
            alpha=alpha,
            model=args.model,
            seed=args.seed,
            train=TrainConfig(
                epochs=args.epochs,
                lr=args.lr,
                batch_size=args.batch_size,
                momentum=args.momentum,
                fisher=args.fisher,
                device=args.device,
                threads=args.threads,
                fisher_rank=getattr(args, "fisher_rank", None),
                fisher_labels=getattr(args, "fisher_labels", FisherLabels.EXPECTED),
                augment=getattr(args, "augment", Augment.NONE),
            ),
            max_train_samples=args.max_train,
            max_test_samples=args.max_test,
            scheme=args.scheme,
            validation_samples=args.validation_samples,
        )
        pool = setup.pool()
        pool.store = contribution_store(setup, args, alpha)
        projection = ProjectionConfig(
            method=args.merge,
            tol=args.cg_tol,
            max_iter=args.cg_iter,
            damping=args.damping,
            dampings=tuple(args.dampings),
            weighting=args.weighting,
            adam_lr=args.adam_lr,
            check_every=args.check_every,
            iterates=tuple(getattr(args, "iterates", None) or ()),
            device=args.device,
        )
        for method in args.methods:
            editor: Editor
            if method == "dense":
                editor = DenseEditor(pool, dense_config(args))
            else:
                editor = build_editor(
                    method, pool, subset_stream(setup, args, method), FixedRatio(args.rho), projection
                )
            t0 = time.perf_counter()
            report = editor.fit(range(args.clients))
            wall = time.perf_counter() - t0
            assert editor.model is not None  # fitted just above
            acc, loss = evaluate(setup.model_fn(), editor.model, setup.test_set)
            compute, slowest = report.compute_s, report.max_client_compute_s
            solve = report.solve
            mb = report.total_bytes / 1e6
            parallel = slowest + report.solve_s
            row = {
                "dataset": args.dataset,
                "alpha": alpha,
                "method": method,
                "clients": args.clients,
                "members": len(members_of(editor)),
                "fisher_rank": getattr(args, "fisher_rank", None),
                "subset_seed": getattr(args, "subset_seed", None),
                "member_ids": sorted(int(c) for c in members_of(editor)),
                "epochs": args.epochs,
                "accuracy": round(100 * acc, 2),
                "loss": round(loss, 4),
                "compute_s": round(compute, 2),
                "parallel_s": round(parallel, 2),
                "solve_s": round(report.solve_s, 3),
                "cg_iters": solve.iterations if solve else None,
                "cg_residual": solve.residual if solve else None,
                "MB": round(mb, 2),
                "damping": merge_choice(solve),
                "val_accuracy": round(100 * solve.validation[0], 2) if solve and solve.validation else None,
                "stop_reason": solve.stop_reason if solve else "-",
                "converged": solve.converged if solve else True,
                "acc_per_s": round(100 * acc / parallel, 3),
                "acc_per_MB": round(100 * acc / mb, 3),
                "wall_s": round(wall, 1),
                "candidates": candidates_label(solve),
                "stopped_short": stopped_short_label(solve),
                "validation_held": len(setup.validation_set),
            }
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    return rows


def held_out_label(rows: list[dict], asked: int) -> str:
    """How many training samples the runs held out for validation, and why if fewer than asked
    (at most 10 % of the training slice is held out)."""
    held = sorted({r["validation_held"] for r in rows if "validation_held" in r})
    if not held or held == [asked]:
        return f"{asked} training samples held out"
    counts = "/".join(str(h) for h in held)
    return f"{counts} training samples held out (asked for {asked}; at most 10 % of the training slice)"


def merge_choice(solve) -> str:
    """What the merge chose: its damping, and the CG iterate when it selected iterates."""
    if solve is None:
        return "-"
    early_stopped = any("iteration" in c for c in solve.candidates)
    return damping_label(solve.damping) + (f" it{solve.iterations}" if early_stopped else "")


def candidates_label(solve) -> str:
    """Every candidate the merge scored, ``damping:val%`` (or ``it<t>:val%`` for CG iterates), for the CSV."""
    if solve is None:
        return ""
    return " ".join(
        (f"it{c['iteration']}" if "iteration" in c else str(damping_label(c["damping"])))
        + f":{100 * c['val_accuracy']:.1f}"
        for c in solve.candidates
    )


def stopped_short_label(solve: SolveInfo | None) -> str:
    """The scored candidates whose solve ended above its tolerance, ``damping reason residual``
    each; empty when every candidate converged."""
    if solve is None:
        return ""
    return ", ".join(
        f"{damping_label(c['damping'])} {c['stop_reason']} {c['residual']:.2e}"
        for c in solve.candidates
        if c.get("stop_reason") in STOPPED_SHORT
    )


def solve_label(row: dict) -> str:
    """A table's 'solve' cell: why the selected solve stopped, and every other candidate that did
    not reach its tolerance (a row is only 'converged' when all of them did)."""
    short = row.get("stopped_short") or ""
    if not short:
        return row["stop_reason"]
    return f"{row['stop_reason']}; candidate {short}"


def common_args(p: argparse.ArgumentParser, **defaults: Any) -> argparse.ArgumentParser:
    """The options every one-shot reproduction takes (``defaults`` override the values below)."""
    d = {
        "clients": 20,
        "alpha": 0.5,
        "lr": 0.01,
        "batch_size": 16,
        "model": "cnn",
        "fisher": "diagonal",
        "damping": 1e-4,
        "cg_tol": 1e-5,
        "cg_iter": 200,
        "seed": 0,
        "max_train": None,
        "max_test": None,
        **defaults,
    }
    p.add_argument("--datasets", nargs="+", default=None, help="default: mnist femnist cifar10 (--quick: mnist)")
    for name in (
        "clients",
        "alpha",
        "lr",
        "batch_size",
        "model",
        "fisher",
        "damping",
        "cg_tol",
        "cg_iter",
        "seed",
        "max_train",
        "max_test",
    ):
        value = d[name]
        kind = str if isinstance(value, str) else (float if isinstance(value, float) else int)
        extra: dict[str, Any] = {"choices": ["diagonal", "kfac", "full"]} if name == "fisher" else {}
        p.add_argument("--" + name.replace("_", "-"), type=kind, default=value, **extra)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: auto)")
    return p


def protocol_notes(args: argparse.Namespace, slice_note: str) -> list[str]:
    """How a run's learning rate, Fisher, training slice and test set differ from seed 000's protocol."""
    notes = []
    if args.lr != 0.01:
        notes.append(f"lr {args.lr} (paper 0.01: {LR_NOTE})")
    if args.fisher != "kfac":
        notes.append(f"{args.fisher} Fisher (paper K-FAC)")
    if args.max_train:
        notes.append(f"training data sliced to {args.max_train} samples per dataset, {slice_note}")
    if args.max_test:
        notes.append(f"first {args.max_test} test samples")
    return notes


def per_dataset(run_dataset, args: argparse.Namespace) -> tuple[list, ...]:
    """``run_dataset(name, args)`` over ``args.datasets``: list parts are concatenated, others
    (one summary per dataset) collected into lists, in the order ``run_dataset`` returns them."""
    out: tuple[list, ...] | None = None
    for name in args.datasets:
        parts = run_dataset(name, args)
        out = out or tuple([] for _ in parts)
        for acc, part in zip(out, parts, strict=True):
            acc.extend(part) if isinstance(part, list) else acc.append(part)
    return out or ()


def publish(out: Path, name: str, title: str, script: str, argv: list[str] | None, size: str, body: str) -> Path:
    """Write ``out/name.md`` (command line, size, machine, body) and print it."""
    command = f"python tools/{script} " + " ".join(sys.argv[1:] if argv is None else argv)
    path = report.write_markdown(out / name, title, command.strip(), size, body)
    print(path.read_text())
    return path


def exit_code(failures: list[str]) -> int:
    """0 when every method ran; else 1, after naming each failure on stderr."""
    for f in failures:
        print(f"FAILED: {f}", file=sys.stderr)
    return 1 if failures else 0
