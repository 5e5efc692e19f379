"""Reproduce Table II of seed 000 (one-shot learning): F-SOSA vs FedFisher vs one-shot FedAvg.

Full size (the paper's): MNIST, alpha 0.1/0.5/0.8, M = 20, rho = 0.5, K = 50 epochs, lr 0.01,
two-layer CNN, K-FAC. ``--quick`` is a smoke size (a 3,000-sample slice, M = 6, K = 1).

Time columns: ``compute_s`` sums every client's measured training + Fisher time (one machine
training them one after another), ``parallel_s`` is the slowest client plus the solve (clients
training side by side, as the paper's edge devices do). Bytes are the safetensors payloads.
Writes CSV + markdown into ``--out`` and prints the markdown.

    python tools/table2.py --quick
    python tools/table2.py --dataset mnist --alphas 0.1 0.5 0.8
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
import sys
import time
from pathlib import Path

import torch

from fl_core.editors import FixedRatio, build_editor
from fl_core.experiment import OneShotSetup
from fl_core.projection import ProjectionConfig
from fl_core.training import TrainConfig, evaluate

PAPER = {  # seed 000, Table II, MNIST: (accuracy %, time s, MB)
    ("mnist", 0.1): {"fedfisher": (90.35, 43.11, 35.30), "fsosa": (91.08, 34.63, 18.46)},
    ("mnist", 0.5): {"fedfisher": (95.98, 43.76, 35.30), "fsosa": (95.43, 34.59, 18.46)},
    ("mnist", 0.8): {"fedfisher": (96.08, 43.15, 35.30), "fsosa": (95.80, 35.56, 18.46)},
}
METHODS = ("fsosa", "fedfisher", "fedavg")


SMOKE_ARGS = "--dataset digits --model mlp --cg-iter 50"  # extra arguments of the CI smoke run (tests/test_reproductions.py)

def run(args: argparse.Namespace) -> list[dict]:
    rows = []
    for alpha in args.alphas:
        setup = OneShotSetup(
            dataset=args.dataset, num_clients=args.clients, alpha=alpha, model=args.model, seed=args.seed,
            train=TrainConfig(epochs=args.epochs, lr=args.lr, batch_size=args.batch_size, fisher=args.fisher,
                              device=args.device, threads=args.threads),
            max_train_samples=args.max_train, max_test_samples=args.max_test,
        )
        pool = setup.pool()
        projection = ProjectionConfig(tol=args.cg_tol, max_iter=args.cg_iter, damping=args.damping)
        for method in METHODS:
            editor = build_editor(method, pool, setup.streams.numpy("subset", method), FixedRatio(args.rho), projection)
            t0 = time.perf_counter()
            report = editor.fit(range(args.clients))
            wall = time.perf_counter() - t0
            acc, loss = evaluate(setup.model_fn(), editor.model, setup.test_set)
            compute = sum(pool.train(c).compute_s for c in editor.members)
            slowest = max(pool.train(c).compute_s for c in editor.members)
            mb = report.total_bytes / 1e6
            parallel = slowest + report.solve_s
            row = {
                "dataset": args.dataset, "alpha": alpha, "method": method, "clients": args.clients,
                "members": len(editor.members), "epochs": args.epochs, "accuracy": round(100 * acc, 2),
                "loss": round(loss, 4), "compute_s": round(compute, 2), "parallel_s": round(parallel, 2),
                "solve_s": round(report.solve_s, 3), "cg_iters": report.solve.iterations,
                "cg_residual": report.solve.residual, "MB": round(mb, 2),
                "acc_per_s": round(100 * acc / parallel, 3), "acc_per_MB": round(100 * acc / mb, 3),
                "wall_s": round(wall, 1),
            }
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    return rows


def markdown(rows: list[dict], args: argparse.Namespace) -> str:
    lines = [
        f"Table II reproduction: {args.dataset}, M={args.clients}, rho={args.rho}, K={args.epochs} epochs, "
        f"lr={args.lr}, batch {args.batch_size}, {args.model}, Fisher {args.fisher}, seed {args.seed}"
        + (" (QUICK size)" if args.quick else ""),
        f"Machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}",
        "",
        "| alpha | method | acc % | paper acc % | parallel s | compute s (sum) | solve s | CG iters | MB | paper MB | acc/s | acc/MB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        paper = PAPER.get((r["dataset"], r["alpha"]), {}).get(r["method"])
        pa, pmb = (f"{paper[0]:.2f}", f"{paper[2]:.2f}") if paper else ("-", "-")
        lines.append(
            f"| {r['alpha']} | {r['method']} | {r['accuracy']:.2f} | {pa} | {r['parallel_s']:.1f} | {r['compute_s']:.1f} | "
            f"{r['solve_s']:.2f} | {r['cg_iters']} | {r['MB']:.2f} | {pmb} | {r['acc_per_s']:.2f} | {r['acc_per_MB']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="mnist")
    p.add_argument("--alphas", type=float, nargs="+", default=[0.1, 0.5, 0.8])
    p.add_argument("--clients", type=int, default=20)
    p.add_argument("--rho", type=float, default=0.5)
    p.add_argument("--epochs", type=int, default=50)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--model", default="cnn")
    p.add_argument("--fisher", default="kfac")
    p.add_argument("--damping", type=float, default=1e-4)
    p.add_argument("--cg-tol", type=float, default=1e-6)
    p.add_argument("--cg-iter", type=int, default=300)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: auto)")
    p.add_argument("--max-train", type=int, default=None)
    p.add_argument("--max-test", type=int, default=None)
    p.add_argument("--out", default="tools/out/table2")
    p.add_argument("--quick", action="store_true", help="smoke size: 3,000 samples, M=6, K=1, 1 alpha")
    args = p.parse_args(argv)
    if args.quick:
        args.alphas, args.clients, args.epochs = args.alphas[:1] if len(args.alphas) < 3 else [0.5], 6, 1
        args.max_train, args.max_test = args.max_train or 3000, args.max_test or 1000
    rows = run(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "table2.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    md = markdown(rows, args)
    (out / "table2.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
