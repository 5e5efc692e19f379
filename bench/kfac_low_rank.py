"""K-FAC merges of low-rank uploads (``train.fisher_rank``): the float32 products through the
uploaded low-rank form against the same products through the rebuilt whole factors, side by
side in one process on one problem.

The problem: MNIST, the two-layer CNN, ``--clients`` clients x ~``--samples-per-client`` samples,
``--epochs`` local epoch(s), K-FAC, every upload compressed at ``--rank`` (the Table II study's
rank 128 by default), members weighted by sample count. Both variants hold the same statistics
(the same rebuilt factors, the same float64 finish); ``rebuilt`` hides the low-rank form from
the float32 products, as the library did before they used it. Solves alternate (low rank,
rebuilt, low rank, ...), each timed by ``project`` itself; the table gives iterations, seconds,
the library's residual, the distance between the two variants' merged models and their test
accuracy. One fc1 product
(the layer that is ~95 % of a solve) is timed alone too.

    OMP_NUM_THREADS=1 python bench/kfac_low_rank.py                  # 10 x ~600, rank 128, damping 0.01
    OMP_NUM_THREADS=1 python bench/kfac_low_rank.py --quick          # 3 x ~200, rank 16
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from typing import Any, cast

import torch
from problem import add_problem_arguments, kfac_clients

from fl_core.fisher import FisherRep, kfac
from fl_core.fisher.kfac import KFACSum
from fl_core.projection import ProjectionConfig, ProjectionMethod, project
from fl_core.stats import SufficientStatistics
from fl_core.training import evaluate
from vmc_sim.compute.host import cpu_model


@contextmanager
def rebuilt_factors() -> Iterator[None]:
    """Float32 products through the rebuilt whole factors, as before the low-rank path."""
    real = kfac._low_rank_layer
    kfac._low_rank_layer = lambda *a, **k: None
    try:
        yield
    finally:
        kfac._low_rank_layer = real


def statistics_of(contributions: list, dim: int) -> SufficientStatistics:
    stats = SufficientStatistics(dim, KFACSum(contributions[0].fisher.specs))
    stats.apply(joined=contributions)
    return stats


def fc1_product_seconds(stats: SufficientStatistics, repeats: int = 10) -> float:
    """Seconds of one float32 product of the largest layer block (best of ``repeats``)."""
    fsum = stats.fisher_sum
    assert fsum is not None  # a K-FAC sum (statistics_of)
    blocks = fsum.blocks(stats.dim)
    b = max(range(len(blocks)), key=lambda i: blocks[i].stop - blocks[i].start)
    v = torch.randn(blocks[b].stop - blocks[b].start, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    fsum.block_matvec(b, v, fast=True)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fsum.block_matvec(b, v, fast=True)
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_problem_arguments(p)
    p.add_argument("--rank", type=int, default=128)
    p.add_argument("--damping", type=float, default=1e-2, help="relative damping (times tr(F)/d)")
    p.add_argument("--tol", type=float, default=1e-6)
    p.add_argument("--max-iter", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="3 clients x ~200 samples, rank 16, one repeat")
    args = p.parse_args(argv)
    if args.quick:
        args.clients, args.samples_per_client, args.rank, args.repeats = 3, 200, 16, 1

    setup, contributions, train_s = kfac_clients(args)
    uploads = [replace(c, fisher=cast(FisherRep, c.fisher).compress(args.rank), _digest=None) for c in contributions]
    dim = int(setup.w0.numel())
    print(
        f"problem: {args.dataset} CNN ({dim} params), {args.clients} clients, K-FAC uploads at rank {args.rank}, "
        f"damping {args.damping:g}, tol {args.tol:g}; training {train_s:.1f} s; {platform.machine()} {cpu_model()}, "
        f"{torch.get_num_threads()} thread(s), torch {torch.__version__}",
        flush=True,
    )
    config = ProjectionConfig(method=ProjectionMethod.CG_F, tol=args.tol, max_iter=args.max_iter, damping=args.damping)
    rows: list[dict[str, Any]] = []
    models = {}
    for k in range(1, args.repeats + 1):
        for variant in ("low rank", "rebuilt"):
            with rebuilt_factors() if variant == "rebuilt" else nullcontext():
                stats = statistics_of(uploads, dim)
                product_s = fc1_product_seconds(stats)
                w, info = project(stats, config)
            models[variant] = w.double()
            rows.append(
                {
                    "variant": variant,
                    "run": k,
                    "iterations": info.iterations,
                    "seconds": info.seconds,
                    "residual": info.residual,
                    "converged": info.converged,
                    "product_s": product_s,
                }
            )
            print(
                f"  {variant} {k}: {info.iterations} it, {info.seconds:.1f} s, residual {info.residual:.2e}, "
                f"largest-block product {1e3 * product_s:.1f} ms",
                flush=True,
            )
    gap = float((models["low rank"] - models["rebuilt"]).norm() / models["rebuilt"].norm())
    net = setup.model_fn()
    accuracy = {v: 100 * evaluate(net, w.float(), setup.test_set)[0] for v, w in models.items()}
    print(
        "\n| variant | run | iterations (worst block) | seconds | library residual | converged | largest-block product ms |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['variant']} | {r['run']} | {r['iterations']} | {r['seconds']:.1f} | {r['residual']:.2e} | "
            f"{'yes' if r['converged'] else 'no'} | {1e3 * r['product_s']:.1f} |"
        )
    mean = {v: statistics.mean(r["seconds"] for r in rows if r["variant"] == v) for v in ("low rank", "rebuilt")}
    prod = {v: statistics.mean(r["product_s"] for r in rows if r["variant"] == v) for v in ("low rank", "rebuilt")}
    print(
        f"\nmean solve: low rank {mean['low rank']:.1f} s, rebuilt {mean['rebuilt']:.1f} s, "
        f"{mean['rebuilt'] / mean['low rank']:.2f}x; largest-block product {prod['rebuilt'] / prod['low rank']:.2f}x; "
        f"merged models differ by {gap:.1e} (relative L2); test accuracy low rank {accuracy['low rank']:.2f} %, "
        f"rebuilt {accuracy['rebuilt']:.2f} % ({len(setup.test_set)} images)"
    )
    return 0 if all(r["converged"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
