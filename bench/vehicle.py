"""One case-study vehicle's work (K epochs of local training, then its Fisher), this checkout
against another commit, side by side in one run: the work that makes up the LuST case study's
wall-clock (31 requests, about 30 distinct vehicles a dataset, each trained and its Fisher
computed once).

Both versions train the same data: the first ``--samples`` MNIST training images (a case-study
shard holds about 2,100), the paper's CNN from the same W0 (seed 0), batch 64, lr 0.01, momentum 0.9 (the case study's), diagonal
Fisher, one torch thread, each (version, round) in a fresh process, versions interleaved
(before, after, before, after, ...). The driver prints seconds of training and of the Fisher, and
how far apart the two versions' trained weights end (relative norm): float rounding only (the
channels-last layout; the optimizer is the same update).

- after: the library in this checkout;
- before: the library at ``--before`` (default 637fb6d, the baseline before the training speed-ups), from a temporary
  git worktree. Its Fisher is the one of its time (the default labels then, which may differ
  from today's expected-label Fisher: the row says which each computed).

    python bench/vehicle.py                  # K = 50, 2 rounds (about 4 min on a 2-core EPYC)
    python bench/vehicle.py --epochs 5 --rounds 1
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
import worktree  # noqa: E402


def child(epochs: int, samples: int, out: str) -> None:
    """Train and compute the Fisher of one vehicle in this process (its ``fl_core`` is the PYTHONPATH's)."""
    import numpy as np
    import torch
    from safetensors.torch import save_file

    from fl_core.data import load_train_test
    from fl_core.models import build_model, flat_params
    from fl_core.rng import Streams
    from fl_core.training import LocalTrainer, TrainConfig

    torch.set_num_threads(1)
    train, _ = load_train_test("mnist")
    data = train.subset(np.arange(samples))

    def model_fn() -> torch.nn.Module:
        return build_model("cnn", train.input_shape, train.num_classes)

    torch.manual_seed(0)
    w0 = flat_params(model_fn())
    config = TrainConfig(  # fisher as a string: the older fl_core this child may import takes one too
        epochs=epochs,
        lr=0.01,
        batch_size=64,
        momentum=0.9,
        fisher="diagonal",  # type: ignore[arg-type]
        upload_dtype="float32",
        threads=1,
    )
    c = LocalTrainer(model_fn, w0, config, Streams(0)).contribute(0, data)
    # a library older than ``fisher_labels`` (637fb6d among them) drew one label per input
    labels = getattr(config, "fisher_labels", "sampled (one drawn label)")
    save_file({"weights": c.weights.float().contiguous()}, out)
    print(json.dumps({"train_s": c.train_s, "fisher_s": c.fisher_s, "labels": str(getattr(labels, "value", labels))}))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", default="637fb6d")
    p.add_argument("--epochs", type=int, default=50)
    p.add_argument("--samples", type=int, default=2100)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--child", nargs=3, metavar=("EPOCHS", "SAMPLES", "OUT"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(int(args.child[0]), int(args.child[1]), args.child[2])
        return 0

    from safetensors.torch import load_file

    from vmc_sim.compute.host import cpu_model

    # the worktree lies under /tmp, away from ../shared: both versions read this checkout's data
    data = os.environ.get("VMC_DATA") or str(ROOT.parent / "shared" / "data")
    results: dict[str, list[dict]] = {"before": [], "after": []}
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        paths = {"before": stack.enter_context(worktree.checkout(ROOT, args.before)), "after": ROOT}
        for r in range(args.rounds):
            for version in ("before", "after"):
                out = str(Path(tmp) / f"{version}{r}.safetensors")
                env = {**os.environ, "PYTHONPATH": str(paths[version]), "OMP_NUM_THREADS": "1", "VMC_DATA": data}
                done = subprocess.run(
                    [sys.executable, __file__, "--child", str(args.epochs), str(args.samples), out],
                    env=env,
                    cwd=paths[version],
                    capture_output=True,
                    text=True,
                )
                if done.returncode != 0:
                    raise SystemExit(f"{version} (round {r}) failed:\n{done.stderr[-3000:]}")
                row = json.loads(done.stdout.strip().splitlines()[-1])
                row["weights"] = load_file(out)["weights"].double()
                results[version].append(row)
                print(
                    f"# {version} round {r}: training {row['train_s']:.1f} s, Fisher {row['fisher_s']:.1f} s "
                    f"({row['labels']} labels)",
                    flush=True,
                )
    best = {v: {k: min(r[k] for r in rows) for k in ("train_s", "fisher_s")} for v, rows in results.items()}
    wb, wa = results["before"][0]["weights"], results["after"][0]["weights"]
    print(
        f"\n{platform.machine()} {cpu_model()}, {os.cpu_count()} cores, one thread; MNIST CNN, {args.samples} images, "
        f"K = {args.epochs}, batch 64; best of {args.rounds} interleaved rounds; before = {args.before}\n"
    )
    print("| version | training s | s an epoch | Fisher s | Fisher labels | vehicle s |")
    print("|---|---|---|---|---|---|")
    for v in ("before", "after"):
        b = best[v]
        print(
            f"| {v} | {b['train_s']:.1f} | {b['train_s'] / args.epochs:.3f} | {b['fisher_s']:.1f} | "
            f"{results[v][0]['labels']} | {b['train_s'] + b['fisher_s']:.1f} |"
        )
    tb, ta = best["before"]["train_s"], best["after"]["train_s"]
    print(f"\ntraining {tb / ta:.2f}x; trained weights {float((wa - wb).norm() / wb.norm()):.2e} apart (relative)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
