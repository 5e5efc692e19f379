"""Benchmark the F-SOSA coordinator: projection solvers, edit vs fresh fit, state growth.

1. CG on F vs CG on F^2 (the paper's form) for K-FAC on the two-layer CNN with 10 clients
   (MNIST): iterations and seconds to a relative residual of ``--tol`` (1e-6), with and without
   damping and the Kronecker preconditioner.
2. The coordinator's cost of one triggered edit (swap one member's statistics, warm-started
   solve) vs a fresh fit (statistics of all members, cold solve). Client training excluded.
3. The coordinator's persistent state after 10 and after 1,000 edits (tiny MLP, K-FAC).

    python bench/projection.py            # full: 10 x 600 MNIST samples, 1 epoch, 500 iterations
    python bench/projection.py --quick
"""

from __future__ import annotations

import argparse
import platform
import time
from typing import cast

import numpy as np
import torch
from problem import add_problem_arguments, kfac_clients

from fl_core.editors import FixedRatio, FSOSAEditor, build_editor
from fl_core.experiment import OneShotSetup
from fl_core.fisher import FisherKind, new_sum
from fl_core.projection import ProjectionConfig, ProjectionMethod, project
from fl_core.sampler import ordered
from fl_core.stats import SufficientStatistics
from fl_core.training import TrainConfig
from vmc_sim.compute.host import cpu_model

#: Solver variants by name: (method, damping, Kronecker preconditioner).
CASES = {
    "f": (ProjectionMethod.CG_F, 0.0, False),
    "f2": (ProjectionMethod.CG_F2, 0.0, False),
    "f-damped": (ProjectionMethod.CG_F, 1e-4, False),
    "f2-damped": (ProjectionMethod.CG_F2, 1e-4, False),
    "f-precond": (ProjectionMethod.CG_F, 1e-4, True),
}


def solvers(args: argparse.Namespace) -> None:
    setup, contributions, train_s = kfac_clients(args)
    print(
        f"setup: {args.dataset} CNN ({setup.w0.numel()} params), {args.clients} clients x "
        f"~{args.samples_per_client} samples, {args.epochs} epoch(s); training+K-FAC {train_s:.1f} s"
    )
    stats = SufficientStatistics(setup.w0.numel(), new_sum("kfac", setup.model_fn()))
    stats.apply(joined=contributions)
    fsum = stats.fisher_sum
    assert fsum is not None  # a K-FAC sum was given above
    v = torch.randn(stats.dim, dtype=torch.float64)
    t0 = time.perf_counter()
    for _ in range(3):
        fsum.matvec(v)
    print(f"one K-FAC matvec over {args.clients} members: {(time.perf_counter() - t0) / 3:.3f} s")
    print(
        f"\n| solver | damping | precond | iterations | seconds | rel. residual | constraint residual | reached {args.tol:g} |"
    )
    print("|---|---|---|---|---|---|---|---|")
    cases = [CASES[name] for name in args.cases]
    for method, damping, pre in cases:
        cfg = ProjectionConfig(method=method, tol=args.tol, max_iter=args.max_iter, damping=damping, precondition=pre)
        _, info = project(stats, cfg)
        print(
            f"| {method.value} | {damping:g} | {pre} | {info.iterations} | {info.seconds:.1f} | {info.residual:.2e} | "
            f"{info.constraint_residual:.2e} | {info.converged} |",
            flush=True,
        )

    if args.no_edit:
        return
    # 2. triggered edit vs fresh fit on the coordinator
    cfg = ProjectionConfig(tol=args.edit_tol, max_iter=args.max_iter)
    half = args.clients // 2
    members = contributions[:half]
    newcomer = contributions[half]
    t0 = time.perf_counter()
    fresh = SufficientStatistics(stats.dim, new_sum("kfac", setup.model_fn()))
    fresh.apply(joined=members)
    w, info_fresh = project(fresh, cfg)
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    fresh.apply(left=[members[0]], joined=[newcomer])
    previous_mean = (fresh.weight_sum - newcomer.weights.double() + members[0].weights.double()) / fresh.count
    w2, info_edit = project(fresh, cfg, warm=previous_mean - w.double())
    edit_s = time.perf_counter() - t0
    print(
        f"\ncoordinator, {half} members, tol {args.edit_tol:g}: fresh fit {fit_s:.1f} s ({info_fresh.iterations} it), "
        f"one triggered edit {edit_s:.1f} s ({info_edit.iterations} it, warm start)"
    )


def state_growth(args: argparse.Namespace) -> None:
    setup = OneShotSetup(
        dataset="digits",
        num_clients=12,
        alpha=0.5,
        model="mlp",
        seed=args.seed,
        train=TrainConfig(epochs=1, lr=0.05, fisher=FisherKind.KFAC),
    )
    shards = setup.client_data
    from fl_core.clients import ClientPool
    from fl_core.training import LocalTrainer

    pool = ClientPool(LocalTrainer(setup.model_fn, setup.w0, setup.train, setup.streams), lambda c: shards[c % 12])
    editor = cast(FSOSAEditor, build_editor("fsosa", pool, setup.streams.numpy("subset", "bench"), FixedRatio(0.5)))
    editor.fit(range(12))
    rng = np.random.default_rng(args.seed)
    nxt, sizes, ever = 12, {}, set(range(12))
    for step in range(1, args.edits + 1):
        present = ordered(editor.clients)
        if len(present) > 16 or (len(present) > 8 and rng.random() < 0.5):
            editor.remove(present[rng.integers(len(present))])
        else:
            editor.add(nxt)
            ever.add(nxt)
            nxt += 1
        if step in (10, 100, args.edits):
            sizes[step] = (editor.state_bytes(), len(ever), len(editor.clients), len(editor.members))
    print("\n| edits | coordinator state bytes | clients ever seen | clients now | members |")
    print("|---|---|---|---|---|")
    for step, (b, e, n, m) in sizes.items():
        print(f"| {step} | {b} | {e} | {n} | {m} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_problem_arguments(p)
    p.add_argument("--tol", type=float, default=1e-6)
    p.add_argument("--edit-tol", type=float, default=1e-5)
    p.add_argument("--max-iter", type=int, default=500)
    p.add_argument("--edits", type=int, default=1000)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--only", choices=["solvers", "state"], default=None)
    p.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES), help="solver variants to run")
    p.add_argument("--no-edit", action="store_true", help="skip the edit vs fresh fit comparison")
    args = p.parse_args()
    if args.quick:
        args.clients, args.samples_per_client, args.max_iter, args.edits = 4, 200, 30, 50
    print(f"machine: {platform.machine()} {cpu_model()}, torch {torch.__version__}, {torch.get_num_threads()} threads")
    if args.only in (None, "solvers"):
        solvers(args)
    if args.only in (None, "state"):
        state_growth(args)


if __name__ == "__main__":
    main()
