"""Reproduce Fig. 1 and Fig. 4 of seed 000: how the stability level rho trades F-SOSA's
accuracy against its time and communication.

For every dataset, M clients (Dirichlet ``--alpha``; FEMNIST is split by writer) and every
rho in ``--rhos``:

- Fig. 1 (one-shot learning): F-SOSA fits on all M clients with ``P = floor(rho M)`` members;
  accuracy, time cost and communication cost. FedFisher is fitted once as well, to check that
  rho = 1 recovers it (same members, same fusion, so the same weights).
- Fig. 4 (editing, F-SOSA-I/U): F-SOSA fits on the first ``M - --joins`` clients, then serves
  one fixed sequence of ``--requests`` single requests (the ``--joins`` held-back clients
  arrive, randomly chosen active clients leave; departed clients do not return). Accuracy after
  the last request, and time / communication efficiency = that accuracy divided by the
  cumulative time (fit + requests) and the cumulative MB.

Every rho < 1 is run for ``--draws`` independent subset draws and reported as their mean (the
accuracy's spread over draws beside it): one draw of a 4-member subset is noisy.

Contributions are deterministic per (seed, client), so every client trains once per dataset:
all rho values share one in-memory store of contributions, and a rho that uses a client charges
that client's measured compute again (``Contribution.compute_s``), as ``tools/table2.py`` does.
Time columns as in table2: ``parallel_s`` = slowest trained client + projection solve per step
(clients train side by side), ``compute_s`` = all trained clients' compute summed. Bytes are the
safetensors payloads the editor charges (W0 broadcast, model and Fisher uploads, control).

Choices the paper leaves open: draw 0 of every rho uses the subset stream ``subset/'fsosa'`` (as
in table2, so rho = 0.5, draw 0 is table2's F-SOSA run), draw d > 0 uses ``subset/'fsosa'/d``;
the request sequence is drawn from the stream ``requests/<dataset>`` (purpose named here) and
is the same for every rho and draw.

The default run (reduced against the paper) for ``reports/fig1_fig4/`` (about 10 minutes on the 2-core box): MNIST, FEMNIST
and CIFAR-10 (SVHN is not in ``shared/data``), M = 20, alpha 0.5, the two-layer CNN,
K = 10 local epochs (paper 50), lr 0.01 with momentum 0.9 (the paper's; ``LR_NOTE`` in vmc_sim/reproduction/common.py says why not 0.05), batch 16 (the paper
gives no batch size for the CNN; 16 gives four times the SGD steps of 64 per CPU second, which
the short runs need), a diagonal Fisher (paper K-FAC: the diagonal projection is closed form, a
K-FAC solve takes minutes here), training slices of 6,000 samples per dataset and the first
4,000 test samples. ``--quick`` is MNIST alone, 2 epochs on a 2,000-sample slice.

    python tools/fig1_fig4_rho.py --quick
    flock /tmp/vmc-heavy.lock python tools/fig1_fig4_rho.py
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import matplotlib

matplotlib.use("Agg")

from fl_core.clients import ClientPool
from fl_core.editors import EditReport, FixedRatio, build_editor
from fl_core.experiment import OneShotSetup
from fl_core.projection import ProjectionConfig
from fl_core.store import MemoryStore
from fl_core.training import LocalTrainer, evaluate
from vmc_sim.reproduction import common as repro
from vmc_sim.reproduction import report
from vmc_sim.reproduction.common import alpha_for, setup_from_args, warm_up
from vmc_sim.reproduction.rho import MB, markdown, plot_fig1, plot_fig4, summarize

SMOKE_ARGS = "--datasets digits --model mlp"  # extra arguments of the CI smoke run (tests/test_reproductions.py)


def request_sequence(setup: OneShotSetup, joins: int, count: int) -> tuple[list[int], list[tuple[str, int]]]:
    """Initial clients and ``count`` single requests: the ``joins`` held-back clients arrive,
    the rest are departures of uniformly chosen active clients, in a random order."""
    clients = sorted(setup.client_data)
    if not 0 <= joins < len(clients) or count < joins:
        raise ValueError(f"--joins must be in [0, {len(clients) - 1}] and at most --requests, got {joins}")
    rng = setup.streams.numpy("requests", setup.dataset)
    initial, waiting = clients[: len(clients) - joins], clients[len(clients) - joins :]
    kinds = rng.permutation(["add"] * joins + ["remove"] * (count - joins))
    active, sequence = list(initial), []
    for kind in kinds:
        if kind == "add":
            client = waiting.pop(0)
            active.append(client)
        else:
            if len(active) <= 1:
                raise ValueError(f"--requests {count}: the departures would leave no client")
            client = active.pop(int(rng.integers(len(active))))
        sequence.append((str(kind), client))
    return initial, sequence


def costs(reports: list[EditReport]) -> dict:
    """Time and bytes of a list of requests (each trained client is charged its measured compute,
    also when its contribution came from the store)."""
    return {
        "parallel_s": sum(r.max_client_compute_s + r.solve_s for r in reports),
        "compute_s": sum(r.compute_s for r in reports),
        "bytes": sum(r.total_bytes for r in reports),
        "triggered": sum(r.triggered for r in reports if r.kind != "fit"),
    }


def run_dataset(dataset: str, args: argparse.Namespace) -> tuple[list[dict], list[dict], dict]:
    setup = setup_from_args(args, dataset, alpha_for(dataset, args.alpha))
    trainer: LocalTrainer = setup.pool().trainer
    warm_up(trainer, setup)
    store = MemoryStore()
    projection = ProjectionConfig(tol=args.cg_tol, max_iter=args.cg_iter, damping=args.damping)
    eval_model = setup.model_fn()

    def new_pool() -> ClientPool:
        return ClientPool(trainer, setup.client_data, store=store)

    def editor_for(name: str, pool: ClientPool, rho: float, draw: int = 0):
        stream = setup.streams.numpy("subset", name) if draw == 0 else setup.streams.numpy("subset", name, draw)
        return build_editor(name, pool, stream, FixedRatio(rho), projection)

    def draws(rho: float) -> range:
        return range(1 if rho == 1.0 else args.draws)  # rho = 1: every client is a member, no randomness

    fit_rows, edit_rows, check = [], [], {}
    trainings = 0
    for rho in args.rhos:
        for draw in draws(rho):
            pool = new_pool()
            editor = editor_for("fsosa", pool, rho, draw)
            fit = editor.fit(range(args.clients))
            trainings += pool.trainings
            acc, loss = evaluate(eval_model, editor.model, setup.test_set)
            if rho == 1.0:
                check["fsosa_rho1"] = editor.model
            fit_rows.append(
                row(dataset, rho, draw, len(editor.members), acc, loss, costs([fit]), fit.solve_s, pool.trainings)
            )
            print(json.dumps(fit_rows[-1]), file=sys.stderr, flush=True)

    pool = new_pool()
    fedfisher = editor_for("fedfisher", pool, 1.0)
    fedfisher.fit(range(args.clients))
    trainings += pool.trainings
    if "fsosa_rho1" in check:
        check["max_abs_diff_rho1_vs_fedfisher"] = float((check.pop("fsosa_rho1") - fedfisher.model).abs().max())

    initial, sequence = request_sequence(setup, args.joins, args.requests)
    for rho in args.rhos:
        for draw in draws(rho):
            pool = new_pool()
            editor = editor_for("fsosa", pool, rho, draw)
            reports = [editor.fit(initial)]
            for kind, client in sequence:
                reports.append(editor.add(client) if kind == "add" else editor.remove(client))
            trainings += pool.trainings
            acc, loss = evaluate(eval_model, editor.model, setup.test_set)
            total, edits = costs(reports), costs(reports[1:])
            r = row(
                dataset,
                rho,
                draw,
                len(editor.members),
                acc,
                loss,
                total,
                sum(x.solve_s for x in reports),
                pool.trainings,
            )
            r.update(
                {
                    "requests": len(sequence),
                    "triggered": edits["triggered"],
                    "edit_parallel_s": round(edits["parallel_s"], 2),
                    "edit_MB": round(edits["bytes"] / MB, 3),
                }
            )
            edit_rows.append(r)
            print(json.dumps(r), file=sys.stderr, flush=True)
    check.update(
        {
            "dataset": dataset,
            "clients_trained": trainings,
            "clients": args.clients,
            "train_samples": len(setup.train_set),
            "test_samples": len(setup.test_set),
            "sequence": " ".join(f"{c}{'+' if k == 'add' else '-'}" for k, c in sequence),
            "initial": len(initial),
        }
    )
    return fit_rows, edit_rows, check


def row(
    dataset: str, rho: float, draw: int, members: int, acc: float, loss: float, c: dict, solve_s: float, trainings: int
) -> dict:
    mb = c["bytes"] / MB
    return {
        "dataset": dataset,
        "rho": rho,
        "draw": draw,
        "members": members,
        "accuracy": round(100 * acc, 2),
        "loss": round(loss, 4),
        "parallel_s": round(c["parallel_s"], 2),
        "compute_s": round(c["compute_s"], 2),
        "solve_s": round(solve_s, 3),
        "MB": round(mb, 3),
        "acc_per_s": round(100 * acc / c["parallel_s"], 3) if c["parallel_s"] > 0 else None,
        "acc_per_MB": round(100 * acc / mb, 3),
        "new_trainings": trainings,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    repro.common_args(p, max_train=6000, max_test=4000)
    p.add_argument("--rhos", type=float, nargs="+", default=[0.2, 0.5, 0.8, 1.0])
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--draws", type=int, default=3, help="subset draws per rho < 1 (results are their mean)")
    p.add_argument("--joins", type=int, default=5, help="clients held back to arrive during the Fig. 4 sequence")
    p.add_argument("--requests", type=int, default=10, help="requests in the Fig. 4 sequence")
    p.add_argument("--out", default="tools/out/fig1_fig4")
    p.add_argument(
        "--quick", action="store_true", help="smoke size: MNIST only, 2,000 samples, K = 2, 500 test samples, 2 draws"
    )
    args = p.parse_args(argv)
    if args.quick:
        args.epochs, args.max_train, args.max_test, args.draws = 2, 2000, 500, 2
        args.datasets = args.datasets or ["mnist"]
    args.datasets = args.datasets or ["mnist", "femnist", "cifar10"]
    if args.draws < 1:
        raise SystemExit(f"--draws must be >= 1, got {args.draws}")
    if any(not 0 < r <= 1 for r in args.rhos):
        raise SystemExit(f"--rhos must lie in (0, 1], got {args.rhos}")
    started = time.perf_counter()
    fit_rows, edit_rows, checks = repro.per_dataset(run_dataset, args)
    out = report.out_dir(args.out)
    report.write_csv(out / "fig1_rho_draws.csv", fit_rows)
    report.write_csv(out / "fig4_rho_editing_draws.csv", edit_rows)
    fit_rows, edit_rows = summarize(fit_rows), summarize(edit_rows)
    report.write_csv(out / "fig1_rho.csv", fit_rows)
    report.write_csv(out / "fig4_rho_editing.csv", edit_rows)
    plot_fig1(fit_rows, args.rhos, out / "fig1_rho.png")
    plot_fig4(edit_rows, out / "fig4_rho_efficiency.png")
    size = (
        f"{', '.join(args.datasets)}; M = {args.clients}, alpha {args.alpha} (FEMNIST by writer), {args.model}, "
        f"K = {args.epochs}, lr {args.lr}, batch {args.batch_size}, {args.fisher} Fisher, rho in {args.rhos} "
        f"({args.draws} subset draws each below 1), "
        f"train slice {args.max_train}, test {args.max_test}, seed {args.seed}"
        + (" (QUICK)" if args.quick else "")
        + f"; ran in {time.perf_counter() - started:.0f} s wall"
    )
    repro.publish(
        out,
        "fig1_fig4.md",
        "Seed 000 Fig. 1 and Fig. 4: the stability level rho",
        "fig1_fig4_rho.py",
        argv,
        size,
        markdown(fit_rows, edit_rows, checks, args),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
