"""One K-FAC projection solve to a relative residual of 1e-6, before and after the per-layer
float32 solver, measured side by side in one run.

The problem is built once with the current code (MNIST, the two-layer CNN, ``--clients`` clients
x ~``--samples-per-client`` samples, ``--epochs`` local epoch(s), K-FAC) and saved with
safetensors: each member's weights, sample count and K-FAC factors (as the current coordinator
holds them, after its PSD repair, kept in float64 so that no version repairs them again). Each version then loads the same file in a fresh
subprocess, builds its own statistics and times one ``project`` call: CG on ``F + lambda I`` with
``lambda = damping * tr(F) / d``, the Kronecker preconditioner, one fixed damping, no validation.

- after: the library in this checkout (block by block, float32 products in the preconditioner's
  eigenbasis, float64 finish);
- before: the library at commit 637fb6d, the parent of a91de9a, from a temporary git worktree
  (one CG over the whole vector in float64). That version has no member weights, so its adapter
  hands it each member's G factor multiplied by the member's weight (float64, exact) and sets its
  weight sum so that its plain mean is the weighted mean: the same F, b and Wbar.

Runs are interleaved (before, after, before, after, ...). Each solve's float64 correction
``x = Wbar - W`` is captured from inside ``project`` (its returned model is float32, which would
hide a 1e-6 residual) and one common float64 routine, independent of both versions, computes its
true relative residual ``||(F + lambda I) x - (F Wbar - b)|| / ||F Wbar - b||``, over the whole
vector and for the worst layer block.

    OMP_NUM_THREADS=1 python bench/kfac_solve.py            # 10 clients x ~600, 1 epoch, max 1000 it
    OMP_NUM_THREADS=1 python bench/kfac_solve.py --quick    # 3 clients x ~200, max 200 it
    OMP_NUM_THREADS=1 python bench/kfac_solve.py --quick --versions after   # no git needed
    OMP_NUM_THREADS=1 python bench/kfac_solve.py --versions after --preconditioners kronecker eigen_diagonal

The current version's runs also list each CG call (block size, iterations, seconds): per block the
float32 phase, then the float64 finish where that phase ended above the tolerance.

``--preconditioners`` times the current version once per block preconditioner
(``fl_core.fisher.base.Preconditioner``) in each repeat, side by side; the old version has only
the Kronecker one.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, cast

import torch
from safetensors.torch import load_file, save_file

ROOT = Path(__file__).resolve().parents[1]
import worktree  # noqa: E402
from problem import add_problem_arguments  # noqa: E402

BEFORE_COMMIT = "637fb6d"
WORKTREE = Path("/tmp/wt-before")
PROBLEM = "problem.safetensors"


# ---------------------------------------------------------------- the problem, built once


def build_problem(args: argparse.Namespace, out: Path) -> dict:
    """Train the clients with the current code and save the members' statistics to ``out``."""
    from problem import kfac_clients

    from fl_core.fisher.kfac import KFACFisher

    setup, contributions, train_s = kfac_clients(args)
    specs = cast(KFACFisher, contributions[0].fisher).specs
    tensors: dict[str, torch.Tensor] = {}
    for c in contributions:
        tensors[f"{c.client}.weights"] = c.weights.contiguous()
        for s, (a, g) in zip(specs, cast(KFACFisher, c.fisher).factors, strict=True):
            tensors[f"{c.client}.{s.name}.A"] = psd64(a)
            tensors[f"{c.client}.{s.name}.G"] = psd64(g)
    meta = {
        "dim": int(setup.w0.numel()),
        "clients": [c.client for c in contributions],
        "num_samples": [int(c.num_samples) for c in contributions],
        "specs": [
            {"name": s.name, "offset": s.offset, "out_features": s.out_features, "in_features": s.in_features}
            for s in specs
        ],
        "dataset": args.dataset,
        "epochs": args.epochs,
        "seed": args.seed,
        "train_s": train_s,
    }
    save_file(tensors, str(out / PROBLEM), metadata={"problem": json.dumps(meta)})
    return meta


def psd64(m: torch.Tensor) -> torch.Tensor:
    """``m`` in float64, its negative eigenvalues set to zero where it fails the current library's
    Cholesky test (``KFACFisher.psd``). The library stores its repair in float32, which can fail the
    test again and be repaired again on every load; kept in float64 it passes, so every version
    and the residual check use these exact factors."""
    d = m.double()
    scale = float(torch.diagonal(d).abs().max()) if d.numel() else 0.0
    eye = torch.eye(d.shape[0], dtype=torch.float64)
    if scale == 0.0 or int(torch.linalg.cholesky_ex(d + 1e-9 * scale * eye).info) == 0:
        return d.contiguous()
    e, q = torch.linalg.eigh(d)
    fixed = (q * e.clamp_min(0)) @ q.T
    return (0.5 * (fixed + fixed.T)).contiguous()


def load_problem(directory: Path) -> tuple[dict, dict[str, torch.Tensor]]:
    """The saved problem's metadata and tensors."""
    from safetensors import safe_open

    with safe_open(str(directory / PROBLEM), framework="pt") as f:
        meta = json.loads(f.metadata()["problem"])
    return meta, load_file(str(directory / PROBLEM))


def member_weights(meta: dict, weighting: str) -> list[float]:
    """Each member's aggregation weight: its sample count, or one."""
    return [float(n) if weighting == "samples" else 1.0 for n in meta["num_samples"]]


# ---------------------------------------------------------------- the common float64 check


def true_residuals(
    meta: dict, tensors: dict[str, torch.Tensor], x: torch.Tensor, damping: float, weighting: str
) -> tuple[float, float]:
    """``(whole, worst block)`` true relative residuals of ``(F + lambda I) x = F Wbar - b`` in
    float64, from the saved factors alone (no library code): ``F = sum_i w_i G_i (x) A_i``."""
    w = member_weights(meta, weighting)
    clients = meta["clients"]
    weights = [tensors[f"{c}.weights"].double() for c in clients]
    wbar = cast(torch.Tensor, sum(wi * wt for wi, wt in zip(w, weights, strict=True)) / sum(w))
    blocks = []
    for s in meta["specs"]:
        a = torch.stack([tensors[f"{c}.{s['name']}.A"].double() for c in clients])
        g = torch.stack([tensors[f"{c}.{s['name']}.G"].double() * wi for c, wi in zip(clients, w, strict=True)])
        blocks.append((slice(s["offset"], s["offset"] + s["out_features"] * s["in_features"]), s, a, g))

    def block_f(v: torch.Tensor, s: dict, a: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        return torch.matmul(torch.matmul(g, v.view(1, s["out_features"], s["in_features"])), a).sum(0).reshape(-1)

    trace = sum(
        float((torch.diagonal(a, dim1=-2, dim2=-1).sum(-1) * torch.diagonal(g, dim1=-2, dim2=-1).sum(-1)).sum())
        for _, _, a, g in blocks
    )
    lam = damping * trace / meta["dim"]
    x = x.double()
    num2 = den2 = 0.0
    worst = 0.0
    for sl, s, a, g in blocks:
        b = sum(block_f(wt[sl], s, a[i : i + 1], g[i : i + 1]) for i, wt in enumerate(weights))
        r = block_f(wbar[sl], s, a, g) - b
        e = block_f(x[sl], s, a, g) + lam * x[sl] - r
        ne, nr = float(e.norm()) ** 2, float(r.norm()) ** 2
        num2, den2 = num2 + ne, den2 + nr
        if nr > 0:
            worst = max(worst, (ne / nr) ** 0.5)
    return (num2 / den2) ** 0.5 if den2 else 0.0, worst


# ---------------------------------------------------------------- one version's solve (subprocess)


def _is_current(stats_module) -> bool:
    return hasattr(stats_module, "Weighting")


def worker(
    directory: Path,
    tag: str,
    damping: float,
    tol: float,
    max_iter: int,
    weighting: str,
    preconditioner: str | None = None,
) -> None:
    """Load the problem with whichever ``fl_core`` is importable, solve once, save ``x`` and a JSON
    record to ``directory`` (``x_<tag>.safetensors``, ``result_<tag>.json``). ``preconditioner``
    (current version only; None: the library's default) picks the block preconditioner."""
    import fl_core

    # whichever version is importable: its modules are typed as any (their names differ by version)
    P: Any = importlib.import_module("fl_core.projection")
    S: Any = importlib.import_module("fl_core.stats")
    from fl_core.contribution import Contribution
    from fl_core.fisher.capture import LayerSpec
    from fl_core.fisher.kfac import KFACFisher, KFACSum

    meta, tensors = load_problem(directory)
    specs = [LayerSpec(**s) for s in meta["specs"]]
    w = member_weights(meta, weighting)
    current = _is_current(S)
    calls: list[dict] = []  # the current version's CG calls, in order
    contributions = []
    for c, n, wi in zip(meta["clients"], meta["num_samples"], w, strict=True):
        factors = []
        for s in specs:
            a, g = tensors[f"{c}.{s.name}.A"], tensors[f"{c}.{s.name}.G"]
            factors.append((a, g) if current else (a, g * wi))  # old: the member's weight folded into G
        contributions.append(Contribution(c, tensors[f"{c}.weights"], KFACFisher(specs, factors), n))
    if current:
        stats = S.SufficientStatistics(meta["dim"], KFACSum(specs), weighting=weighting)
        stats.apply(joined=contributions)
        psd_changed = any(
            not torch.equal(kept, given)
            for c in contributions
            for kept_pair, given_pair in zip(
                stats.fisher_sum.members[c.client].factors, cast(KFACFisher, c.fisher).factors, strict=True
            )
            for kept, given in zip(kept_pair, given_pair, strict=True)
        )
        cfg = P.ProjectionConfig(
            method="cg_f",
            tol=tol,
            max_iter=max_iter,
            damping=damping,
            precondition=True,
            **({} if preconditioner is None else {"preconditioner": preconditioner}),
        )
        captured: dict[str, torch.Tensor] = {}
        inner = P._solve_cg_f

        def capture(*a, **k):
            solve = inner(*a, **k)
            captured["x"] = solve.x.clone()
            return solve

        P._solve_cg_f = capture
        cg = P.conjugate_gradient

        def timed(*a, **k):  # each block's CG phases: the float32 one, then a float64 finish if needed
            t0 = time.perf_counter()
            x, it, res = cg(*a, **k)
            calls.append(
                {"size": int(a[1].numel()), "iterations": it, "seconds": time.perf_counter() - t0, "residual": res}
            )
            return x, it, res

        P.conjugate_gradient = timed
    else:
        stats = S.SufficientStatistics(meta["dim"], KFACSum(specs))
        stats.apply(joined=contributions)
        wbar = sum(wi * c.weights.double() for wi, c in zip(w, contributions, strict=True)) / sum(w)
        stats.weight_sum = wbar * stats.count  # its mean is the plain mean: make it the weighted one
        psd_changed = False
        cfg = P.ProjectionConfig(method="cg_f", tol=tol, max_iter=max_iter, damping=damping, precondition=True)
        captured = {}
        inner = P.conjugate_gradient

        def capture(*a, **k):
            x, it, res = inner(*a, **k)
            captured["x"] = x.clone()
            return x, it, res

        P.conjugate_gradient = capture
    _, info = P.project(stats, cfg)
    used = cfg.preconditioner.value if current else "kronecker"
    save_file({"x": captured["x"].contiguous()}, str(directory / f"x_{tag}.safetensors"))
    record = {
        "tag": tag,
        "fl_core": str(Path(fl_core.__file__).parent),
        "current": current,
        "method": info.method,
        "iterations": info.iterations,
        "seconds": info.seconds,
        "residual": info.residual,
        "converged": bool(info.converged),
        "psd_changed": psd_changed,
        "threads": torch.get_num_threads(),
        "preconditioner": used,
        "cg_calls": calls,
    }
    (directory / f"result_{tag}.json").write_text(json.dumps(record))


# ---------------------------------------------------------------- orchestration


def ensure_worktree() -> bool:
    """Create the worktree of the old commit; True if this run created it (and must remove it)."""
    return worktree.add(ROOT, BEFORE_COMMIT, WORKTREE)


def remove_worktree() -> None:
    """Remove the worktree created by :func:`ensure_worktree`."""
    worktree.remove(ROOT, WORKTREE)


def run_version(
    version: str, tag: str, directory: Path, args: argparse.Namespace, preconditioner: str | None = None
) -> dict:
    """Solve once in a fresh subprocess with the version's ``fl_core`` first on the path
    (``preconditioner``: the current version's block preconditioner, None for its default)."""
    env = dict(os.environ, PYTHONPATH=str(WORKTREE if version == "before" else ROOT), PYTHONDONTWRITEBYTECODE="1")
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        str(directory),
        "--tag",
        tag,
        "--damping",
        repr(args.damping),
        "--tol",
        repr(args.tol),
        "--max-iter",
        str(args.max_iter),
        "--weighting",
        args.weighting,
    ] + ([] if preconditioner is None else ["--preconditioner", preconditioner])
    subprocess.run(cmd, check=True, env=env, cwd=str(directory))
    record = json.loads((directory / f"result_{tag}.json").read_text())
    expected = WORKTREE if version == "before" else ROOT
    if Path(record["fl_core"]).resolve() != (expected / "fl_core").resolve():
        raise RuntimeError(f"{tag}: imported fl_core from {record['fl_core']}, expected {expected / 'fl_core'}")
    if record["psd_changed"]:
        raise RuntimeError(f"{tag}: the library repaired the saved factors again: the versions would solve different F")
    return record


def measure(args: argparse.Namespace, directory: Path) -> dict:
    """Build the problem, run the interleaved solves, check every solution; a JSON-ready summary."""
    meta = build_problem(args, directory)
    print(
        f"problem: {args.dataset} CNN ({meta['dim']} params), {args.clients} clients x ~{args.samples_per_client} "
        f"samples ({sum(meta['num_samples'])} in all), {args.epochs} epoch(s), K-FAC; training {meta['train_s']:.1f} s",
        flush=True,
    )
    created = "before" in args.versions and ensure_worktree()
    runs = []
    try:
        for k in range(1, args.repeats + 1):
            for version, pre in solves(args):
                tag = f"{version}-{k}" if pre is None else f"{version}-{pre}-{k}"
                record = run_version(version, tag, directory, args, pre)
                x = load_file(str(directory / f"x_{tag}.safetensors"))["x"]
                _, tensors = load_problem(directory)
                record["version"], record["run"] = label(version, pre), k
                record["true_residual"], record["true_worst_block"] = true_residuals(
                    meta, tensors, x, args.damping, args.weighting
                )
                runs.append(record)
                print(
                    f"  {tag}: {record['preconditioner']}, {record['iterations']} it, {record['seconds']:.1f} s, "
                    f"true residual {record['true_residual']:.2e}",
                    flush=True,
                )
                if record.get("cg_calls"):
                    print(
                        "    CG calls (block size: iterations / seconds): "
                        + ", ".join(f"{c['size']}: {c['iterations']} / {c['seconds']:.1f}" for c in record["cg_calls"]),
                        flush=True,
                    )
    finally:
        if created and not args.keep_worktree:
            remove_worktree()
    labels = list(dict.fromkeys(r["version"] for r in runs))
    mean = {v: statistics.mean(r["seconds"] for r in runs if r["version"] == v) for v in labels}
    ratio = mean["before"] / mean["after"] if {"before", "after"} <= set(mean) else None
    return {
        "problem": meta,
        "config": {"damping": args.damping, "tol": args.tol, "max_iter": args.max_iter, "weighting": args.weighting},
        "runs": runs,
        "mean_seconds": mean,
        "ratio": ratio,
    }


def solves(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    """``(version, preconditioner)`` of each solve of one repeat, in order: the old version once
    (Kronecker only), the current one once per ``--preconditioners`` entry (None: its default)."""
    out: list[tuple[str, str | None]] = []
    for version in args.versions:
        if version == "before" or not args.preconditioners:
            out.append((version, None))
        else:
            out.extend((version, pre) for pre in args.preconditioners)
    return out


def label(version: str, preconditioner: str | None) -> str:
    """A run's version as tabulated: ``after/<preconditioner>`` when one was named."""
    return version if preconditioner is None else f"{version}/{preconditioner}"


def table(summary: dict) -> str:
    """The runs as a markdown table, with the mean seconds and the before/after ratio."""
    lines = [
        "| version | run | solver | preconditioner | iterations | seconds | library residual | true residual | "
        "true, worst block | reached tol |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    tol = summary["config"]["tol"]
    for r in summary["runs"]:
        lines.append(
            f"| {r['version']} | {r['run']} | {r['method']} | {r['preconditioner']} | {r['iterations']} | "
            f"{r['seconds']:.1f} | "
            f"{r['residual']:.2e} | {r['true_residual']:.2e} | {r['true_worst_block']:.2e} | "
            f"{'yes' if r['true_residual'] <= tol else 'no'} |"
        )
    means = ", ".join(f"{v} {s:.1f} s" for v, s in summary["mean_seconds"].items())
    before = summary["mean_seconds"].get("before")
    ratios = ", ".join(
        f"before/{v} {before / s:.2f}x"
        for v, s in summary["mean_seconds"].items()
        if before is not None and v != "before"
    )
    lines.append("")
    lines.append(f"mean seconds: {means}" + (f"; ratio {ratios}" if ratios else ""))
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_problem_arguments(p)
    p.add_argument("--damping", type=float, default=1e-4, help="relative damping (times tr(F)/d)")
    p.add_argument("--tol", type=float, default=1e-6)
    p.add_argument(
        "--max-iter", type=int, default=None, help="CG iterations at most (per block after; 1000, quick 200)"
    )
    p.add_argument(
        "--weighting",
        choices=["samples", "uniform"],
        default="samples",
        help="members' weights (the current library's default: samples)",
    )
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument(
        "--versions",
        nargs="+",
        choices=["before", "after"],
        default=["before", "after"],
        help="which versions to run, in this order within each repeat",
    )
    p.add_argument(
        "--preconditioners",
        nargs="+",
        default=None,
        metavar="KIND",
        help="time the current version once per block preconditioner (kronecker, eigen_diagonal) "
        "in each repeat; default: its default preconditioner",
    )
    p.add_argument("--preconditioner", default=None, help=argparse.SUPPRESS)
    p.add_argument(
        "--quick", action="store_true", help="3 clients x ~200 samples, max 200 iterations unless --max-iter"
    )
    p.add_argument("--workdir", type=Path, default=None, help="keep the problem, solutions and results here")
    p.add_argument("--json", type=Path, default=None, help="also write the summary as JSON")
    p.add_argument("--keep-worktree", action="store_true")
    p.add_argument("--worker", type=Path, default=None, help=argparse.SUPPRESS)
    p.add_argument("--tag", default="", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.clients, args.samples_per_client = 3, 200
    if args.worker is None and args.preconditioners:
        from fl_core.fisher.base import Preconditioner

        known = [k.value for k in Preconditioner]
        if unknown := [k for k in args.preconditioners if k not in known]:
            p.error(f"--preconditioners: unknown {unknown}; known: {known}")
    if args.max_iter is None:
        args.max_iter = 200 if args.quick else 1000
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.worker is not None:
        worker(args.worker, args.tag, args.damping, args.tol, args.max_iter, args.weighting, args.preconditioner)
        return
    from vmc_sim.compute.host import cpu_model  # here: "before" workers import this file beside an older fl_core

    print(
        f"machine: {platform.machine()} {cpu_model()}, {os.cpu_count()} cores, torch {torch.__version__}, "
        f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}",
        flush=True,
    )
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
        summary = measure(args, args.workdir)
    else:
        with tempfile.TemporaryDirectory(prefix="kfac_solve_") as tmp:
            summary = measure(args, Path(tmp))
    print()
    print(table(summary))
    if args.json is not None:
        args.json.write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
