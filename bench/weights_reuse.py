"""What a run saves when the contribution cache holds its vehicles' trained weights: a client of
a scenario trained once (K epochs, timed), then its Fisher computed at those weights for each
Fisher kind (timed). A run that differs from an earlier one only in the Fisher or the upload
(the K-FAC case study after the diagonal one, a sweep over ``train.fisher``) pays the Fisher
alone per vehicle (``fl_core.cache``); one with nothing cached pays both.

Real shards of the scenario's split (the case study's: MNIST, ~2,140 images a shard, the CNN,
K = 50), one torch thread, nothing kept on disk.

    OMP_NUM_THREADS=1 python bench/weights_reuse.py                       # 2 clients of the case study
    OMP_NUM_THREADS=1 python bench/weights_reuse.py --clients 1 --epochs 5
"""

from __future__ import annotations

import argparse
import platform
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", default=str(ROOT / "scenarios" / "lust_case_study.yaml"))
    p.add_argument("--clients", type=int, default=2, help="how many of the split's clients (the first ones)")
    p.add_argument("--epochs", type=int, default=None, help="local epochs (default: the scenario's)")
    p.add_argument("--fishers", nargs="+", default=["diagonal", "kfac"])
    args = p.parse_args(argv)

    import torch

    from fl_core.training import LocalTrainer, apply_threads
    from vmc_sim.compute.host import cpu_model
    from vmc_sim.scenario.schema import load_scenario

    scenario = load_scenario(args.scenario)
    setup = scenario.federated.setup(scenario.seed)
    config = setup.train if args.epochs is None else replace(setup.train, epochs=args.epochs)
    apply_threads(replace(config, threads=1), setup.model_fn())
    print(
        f"# {Path(args.scenario).name}: {scenario.federated.dataset}, {scenario.federated.model}, K = {config.epochs}, "
        f"batch {config.batch_size}; torch {torch.__version__}, {torch.get_num_threads()} thread, "
        f"{platform.machine()} {cpu_model()}"
    )
    print(
        "| client | samples | training s | "
        + " | ".join(f"{f} Fisher s | {f}: cached weights save" for f in args.fishers)
        + " |"
    )
    print("|---|---|---|" + "---|---|" * len(args.fishers))
    totals = {"train": 0.0, **{f: 0.0 for f in args.fishers}}
    for client in sorted(setup.client_data)[: args.clients]:
        data = setup.client_data[client]
        trained = LocalTrainer(setup.model_fn, setup.w0, config, setup.streams).train(client, data)
        row = [str(client), str(len(data)), f"{trained.train_s:.1f}"]
        totals["train"] += trained.train_s
        for kind in args.fishers:
            trainer = LocalTrainer(setup.model_fn, setup.w0, replace(config, fisher=kind), setup.streams)
            t0 = time.perf_counter()
            trainer.contribute(client, data, trained)
            fisher_s = time.perf_counter() - t0
            totals[kind] += fisher_s
            row += [f"{fisher_s:.1f}", f"{100 * trained.train_s / (trained.train_s + fisher_s):.0f} %"]
        print("| " + " | ".join(row) + " |", flush=True)
    row = ["all", "", f"{totals['train']:.1f}"]
    for kind in args.fishers:
        row += [f"{totals[kind]:.1f}", f"{100 * totals['train'] / (totals['train'] + totals[kind]):.0f} %"]
    print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
