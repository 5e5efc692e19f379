"""Reproduce the CIFAR-10 half of Table V of seed 000 (appendix B-B): F-SOSA against FedFisher and
one-shot FedAvg with ResNet-18, Dirichlet alpha 0.1 / 0.5 / 0.8, M = 20, rho = 0.5.

The paper's setting: an ImageNet-pretrained ResNet-18, K = 50 local epochs, lr 0.001, batch 64,
SGD with momentum 0.9. Pretrained weights cannot be downloaded on these machines (no internet, and
none are in ``shared/data``), so this script trains ResNet-18 *from scratch* (the project's
``resnet18``: CIFAR stem, parameter-free GroupNorm), which is the main reason its accuracies sit
far below the paper's; the report says so in its header. A from-scratch ResNet-18 also needs a
larger learning rate than a pretrained one to move at all in a few epochs (``--lr``, default 0.01
here; the paper's 0.001 is one option away).

Fisher: diagonal by default. K-FAC factors of ResNet-18's 4,608-wide convolutions are 85 MB each
and their solve dominates a CPU run; the paper's F-SOSA payload (462.44 MB for 10 members, about
the weights alone) shows it compressed its curvature too. ``--fisher kfac`` is one option away.

The merge, the damping selection on the held-out validation set, the time and byte columns are
those of ``vmc_sim/reproduction/common.py`` (one code path: this script calls its ``run``). The BDD100K/YOLOv8s
half of Table V needs a detection dataset and model that are not on these machines; it is not
reproduced.

Full size (the paper's) is far beyond a 2-core CPU (1.25 M ResNet-18 sample-steps per method and
alpha). Two sizes are committed under ``reports/table5_resnet18/``. At 180 images a client and
K = 3 (about 6 minutes on two cores) ResNet-18 from scratch learns nothing (every method at chance,
10 %); it shows the byte accounting (F-SOSA 491.23 MB vs the paper's 462.44). At 500 images a
client and K = 10 (``k10_5500/``, 45 minutes on two cores) the merges leave chance: F-SOSA 17.50 %,
FedFisher 13.65 %, one-shot FedAvg 10.05 %, still far from the pretrained paper's 65.98 / 69.66 %::

    python tools/table5_resnet18.py --alphas 0.5 --clients 10 --max-train 2000 --max-test 1000 \
        --epochs 3 --validation-samples 200 --threads 2 --out reports/table5_resnet18
    python tools/table5_resnet18.py --alphas 0.5 --clients 10 --max-train 5500 --max-test 2000 \
        --epochs 10 --validation-samples 500 --threads 2 --store STORE --out reports/table5_resnet18/k10_5500
    python tools/table5_resnet18.py --quick
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

from fl_core.fisher import FisherLabels
from fl_core.projection import DEFAULT_DAMPINGS
from vmc_sim.reproduction import common as repro
from vmc_sim.reproduction import report

PAPER_V = {  # seed 000, Table V, CIFAR-10 (ResNet-18, pretrained): (accuracy %, time s, MB)
    0.1: {
        "fedfisher": (46.60, 361.02, 882.16),
        "fedlpa": (45.18, 2493.05, 8066.21),
        "dense": (28.04, 479.82, 895.13),
        "fsosa": (35.17, 278.22, 462.44),
    },
    0.5: {
        "fedfisher": (69.66, 362.14, 882.16),
        "fedlpa": (68.41, 2355.83, 8066.21),
        "dense": (57.48, 474.14, 895.13),
        "fsosa": (65.98, 210.34, 462.44),
    },
    0.8: {
        "fedfisher": (72.61, 365.50, 882.16),
        "fedlpa": (70.55, 1713.55, 8066.21),
        "dense": (63.92, 473.76, 895.13),
        "fsosa": (69.87, 208.27, 462.44),
    },
}
SMOKE_ARGS = "--max-train 60 --max-test 50 --fisher-labels sampled"  # extra arguments of the CI smoke run (tests/test_reproductions.py)


def options(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--alphas", type=float, nargs="+", default=[0.1, 0.5, 0.8])
    p.add_argument("--clients", type=int, default=20)
    p.add_argument("--rho", type=float, default=0.5)
    p.add_argument("--epochs", type=int, default=50, help="K local epochs (paper: 50)")
    p.add_argument("--lr", type=float, default=0.01, help="local lr (paper, pretrained: 0.001)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--fisher", default="diagonal", choices=["diagonal", "kfac"])
    p.add_argument(
        "--fisher-labels",
        choices=[v.value for v in FisherLabels],
        default="expected",
        help="labels the true Fisher averages over: one drawn per input, or every class at its probability",
    )
    p.add_argument("--validation-samples", type=int, default=500)
    p.add_argument("--dampings", type=repro.parse_damping, nargs="+", default=list(DEFAULT_DAMPINGS))
    p.add_argument("--cg-tol", type=float, default=1e-6)
    p.add_argument("--cg-iter", type=int, default=1000)
    p.add_argument("--methods", nargs="+", choices=list(repro.METHODS), default=list(repro.METHODS))
    p.add_argument("--store", default=None, help="keep contributions in this directory (reruns train nothing)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--max-train", type=int, default=None)
    p.add_argument("--max-test", type=int, default=None)
    p.add_argument("--out", default="tools/out/table5_resnet18")
    p.add_argument("--quick", action="store_true", help="smoke size: 600 samples, M = 6, K = 1, alpha 0.5 (CI: 60)")
    args = p.parse_args(argv)
    if args.quick:
        args.alphas, args.clients, args.epochs = [0.5], 6, 1
        args.max_train, args.max_test = args.max_train or 600, args.max_test or 300
    # the fields vmc_sim/reproduction/common.py's run() reads, fixed to this table's setting
    args.dataset, args.model, args.scheme, args.merge, args.weighting = (
        "cifar10",
        "resnet18",
        "per_client",
        "auto",
        "samples",
    )
    args.damping, args.adam_lr, args.check_every = 1e-4, 1e-3, 100
    return args


def markdown(rows: list[dict], args: argparse.Namespace) -> str:
    lines = [
        f"Made: {report.provenance()}",
        f"Table V (CIFAR-10, ResNet-18) reproduction: M={args.clients}, rho={args.rho}, K={args.epochs} epochs, lr={args.lr}, "
        f"batch {args.batch_size}, momentum {args.momentum}, Fisher {args.fisher} ({args.fisher_labels} labels), seed {args.seed}"
        + (" (QUICK size)" if args.quick else ""),
        "ResNet-18 trained FROM SCRATCH (CIFAR stem, parameter-free GroupNorm): the paper starts from ImageNet-pretrained "
        "weights, which cannot be downloaded here. "
        f"Training slice: {args.max_train or 'all'} images, test: {args.max_test or 'all'} images.",
        f"Split: Dirichlet per_client; {repro.held_out_label(rows, args.validation_samples)} for the damping selection from "
        f"{', '.join(repro.damping_label(d) for d in args.dampings)}; CG tolerance {args.cg_tol:g}, at most {args.cg_iter} "
        f"iterations per layer.",
        f"Machine: {report.host()}, {torch.get_num_threads()} threads, torch {torch.__version__}",
        "",
        "| alpha | method | acc % | paper acc % | damping (val acc %) | solve | parallel s | paper s | MB | paper MB |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        paper = PAPER_V.get(r["alpha"], {}).get(r["method"])
        pa, ps, pmb = (f"{paper[0]:.2f}", f"{paper[1]:.2f}", f"{paper[2]:.2f}") if paper else ("-", "-", "-")
        val = "" if r["val_accuracy"] is None else f" ({r['val_accuracy']:.1f})"
        lines.append(
            f"| {r['alpha']} | {r['method']} | {r['accuracy']:.2f} | {pa} | {r['damping']}{val} | {repro.solve_label(r)} | "
            f"{r['parallel_s']:.1f} | {ps} | {r['MB']:.2f} | {pmb} |"
        )
    return "\n".join(lines) + "\n"


def check(rows: list[dict]) -> list[str]:
    """What the report claims at any size: F-SOSA sends well under FedFisher's bytes (it uploads from
    rho*M members; paper 462.44 / 882.16 MB = 0.52 at M = 20), and every solve either reached its
    tolerance or says why it stopped."""
    problems = []
    by = {(r["alpha"], r["method"]): r for r in rows}
    for (alpha, method), r in by.items():
        if method == "fsosa" and (alpha, "fedfisher") in by:
            ratio = r["MB"] / by[(alpha, "fedfisher")]["MB"]
            share = r["members"] / by[(alpha, "fedfisher")]["members"]
            # members' uploads scale with the share; the W0 broadcast and control messages add a few
            # points (measured 0.538 at M = 6, rho 0.5), so 0.1 above the share is a real excess
            if ratio > share + 0.1:
                problems.append(f"alpha {alpha}: F-SOSA/FedFisher bytes {ratio:.3f} for a member share of {share:.3f}")
        if method != "fedavg" and r["stop_reason"] not in ("converged", "validation"):
            problems.append(f"alpha {alpha} {method}: the selected solve stopped at {r['stop_reason']}")
    return problems


def main(argv: list[str] | None = None) -> int:
    args = options(argv)
    rows = repro.run(args)
    out = report.out_dir(args.out)
    report.write_csv(out / "table5_resnet18.csv", rows)
    md = markdown(rows, args)
    problems = check(rows)
    md += "".join(f"\nCHECK FAILED: {p}" for p in problems)
    (out / "table5_resnet18.md").write_text(md)
    print(md)
    print(json.dumps({"checks_failed": problems}), file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
