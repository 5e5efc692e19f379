"""One Fisher pass (a client's curvature upload) per sample, this checkout against another
commit, side by side in one run, with the values compared.

Each (version, representation, labels) is timed in a fresh subprocess on the same model and
inputs (the paper's MNIST CNN at its init, ``--samples`` random 28x28 inputs, Fisher batch 128,
one torch thread, best of ``--repeats`` after a warm-up). Versions are interleaved (before,
after, before, after, ...). Every run saves its Fisher with safetensors, and the driver prints
the largest relative difference (Frobenius, per tensor) between the two versions' values.

- after: the library in this checkout;
- before: the library at ``--before`` (default 53aa834: one backward pass per class through
  ``loss.backward``, weight gradients included), from a temporary git worktree.

    OMP_NUM_THREADS=1 python bench/fisher_pass.py                  # 1024 samples, 3 repeats, 2 rounds
    OMP_NUM_THREADS=1 python bench/fisher_pass.py --quick --versions after
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
import worktree  # noqa: E402


def child(kind: str, labels: str, samples: int, repeats: int, out: str) -> None:
    """Time one representation in this process (its ``fl_core`` is the PYTHONPATH's)."""
    import torch
    from safetensors.torch import save_file

    from fl_core.fisher import compute_fisher
    from fl_core.models import build_model

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = build_model("cnn", (1, 28, 28), 10)
    x = torch.randn(samples, 1, 28, 28, generator=torch.Generator().manual_seed(1))
    compute_fisher(kind, model, x[:128], torch.Generator().manual_seed(2), batch_size=128, labels=labels)
    best, rep = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        rep = compute_fisher(kind, model, x, torch.Generator().manual_seed(2), batch_size=128, labels=labels)
        best = min(best, time.perf_counter() - t0)
    assert rep is not None  # repeats >= 1
    save_file({k: v.contiguous() for k, v in rep.tensors().items()}, out)
    print(json.dumps({"ms_per_sample": 1e3 * best / samples}))


def run_one(pythonpath: Path, kind: str, labels: str, samples: int, repeats: int, out: Path) -> float:
    env = dict(os.environ, PYTHONPATH=str(pythonpath), OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", kind, labels, str(samples), str(repeats), str(out)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{pythonpath} {kind}/{labels} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])["ms_per_sample"]


def rel_diff(a: Path, b: Path) -> float:
    from safetensors.torch import load_file

    ta, tb = load_file(str(a)), load_file(str(b))
    worst = 0.0
    for k in ta:
        x, y = ta[k].double(), tb[k].double()
        worst = max(worst, float((x - y).norm() / x.norm().clamp_min(1e-300)))
    return worst


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--child", nargs=5, metavar=("KIND", "LABELS", "SAMPLES", "REPEATS", "OUT"), help=argparse.SUPPRESS)
    p.add_argument("--before", default="53aa834", help="the commit to compare with")
    p.add_argument("--versions", nargs="+", choices=["before", "after"], default=["before", "after"])
    p.add_argument("--kinds", nargs="+", choices=["diagonal", "kfac"], default=["diagonal", "kfac"])
    p.add_argument("--labels", nargs="+", choices=["expected", "sampled"], default=["expected", "sampled"])
    p.add_argument("--samples", type=int, default=1024)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--rounds", type=int, default=2, help="interleaved rounds of every version")
    p.add_argument("--quick", action="store_true", help="at most 256 samples, 1 repeat, 1 round")
    args = p.parse_args(argv)
    if args.child:
        kind, labels, samples, repeats, out = args.child
        child(kind, labels, int(samples), int(repeats), out)
        return 0
    if args.quick:
        args.samples = min(args.samples, 256)
        args.repeats, args.rounds = 1, 1
    with tempfile.TemporaryDirectory() as tmp_name, ExitStack() as stack:
        tmp = Path(tmp_name)
        paths = {"after": ROOT}
        if "before" in args.versions:
            paths["before"] = stack.enter_context(worktree.checkout(ROOT, args.before))
        from vmc_sim.compute.host import cpu_model  # here: "before" workers import this file beside an older fl_core

        print(
            f"# {platform.machine()} {cpu_model()}, {os.cpu_count()} cores, 1 thread, "
            f"{args.samples} samples, best of {args.repeats}, {args.rounds} interleaved round(s); "
            f"before = {args.before}"
            + (f", load average {os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else "")
        )
        times: dict[tuple[str, str, str], list[float]] = {}
        for _ in range(args.rounds):
            for kind in args.kinds:
                for labels in args.labels:
                    for v in args.versions:
                        out = tmp / f"{v}-{kind}-{labels}.safetensors"
                        times.setdefault((v, kind, labels), []).append(
                            run_one(paths[v], kind, labels, args.samples, args.repeats, out)
                        )
        print(
            "| representation | labels | "
            + " | ".join(f"{v} ms/sample" for v in args.versions)
            + (" | before/after | max rel. diff |" if len(args.versions) == 2 else " |")
        )
        print("|---|---|" + "---|" * len(args.versions) + ("---|---|" if len(args.versions) == 2 else ""))
        for kind in args.kinds:
            for labels in args.labels:
                best = {v: min(times[(v, kind, labels)]) for v in args.versions}
                row = f"| {kind} | {labels} | " + " | ".join(f"{best[v]:.3f}" for v in args.versions)
                if len(args.versions) == 2:
                    diff = rel_diff(
                        tmp / f"before-{kind}-{labels}.safetensors", tmp / f"after-{kind}-{labels}.safetensors"
                    )
                    row += f" | {best['before'] / best['after']:.2f}x | {diff:.1e}"
                print(row + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
