"""The GPU check as one prepared command for a machine with a CUDA GPU: the CUDA tests, one
case-study vehicle trained on the GPU against the CPU, one K-FAC solve with its float32 products
on the GPU against the CPU, and the LuST case study's MNIST run replayed from the committed trace
(``reports/lust_case_study/trace.jsonl``) with training, Fisher and merges on the GPU
(``federated.train.device``; the solve follows it).

The time model's costs are pinned in the case-study scenario, so no simulated figure may move with
the device: every request's simulated time, population, subset, trigger, bytes, makespan and failed
transfers are compared with the committed ``reports/lust_case_study/requests.csv`` (at the
scenario's K = 50 only; another ``--epochs`` changes the charged work). Accuracies may differ, float
rounding amplified by 50 epochs (two CPUs differed by up to 1.1 points a request on MNIST, bench/
RESULTS.md); the largest difference is printed. Exit status 1 if a test failed or a
simulated field moved.

Here, without a GPU, ``--device cpu`` runs the same steps on the CPU (the baseline of the same
script; the replay is the case study's MNIST run, about 22 min on one core of a 2-core EPYC):

    OMP_NUM_THREADS=1 python bench/gpu_check.py --device cpu --out /tmp/gpu_check
    python bench/gpu_check.py --device cpu --epochs 1 --skip-tests   # the plumbing, 5-6 min
    python bench/gpu_check.py --compare OUT/requests.csv  # any case study's table against the committed one

On a GPU machine where the project is not installed and nothing can be fetched there:
``bash bench/gpu_carry.sh`` (run here) puts the wheels the device image lacks and the MNIST files
into ``.gpu/`` (git-ignored), and the device command is

    python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu/whl/*.whl &&
    PYTHONPATH=/tmp/site:. VMC_DATA=$PWD/.gpu/data PYTHONUNBUFFERED=1 python3 bench/gpu_check.py --out $OUT

with ``carry: [".gpu"]`` and a timeout of about 9 minutes (the steps take about 6 on an H100 by
estimate; ``--skip-tests`` / ``--skip-kfac`` / ``--skip-replay`` for a rerun of the rest).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

import torch  # noqa: E402

SCENARIO = ROOT / "scenarios" / "lust_case_study.yaml"
TRACE = ROOT / "reports" / "lust_case_study" / "trace.jsonl"
COMMITTED = ROOT / "reports" / "lust_case_study" / "requests.csv"
SIMULATED = (
    "kind",
    "removed",
    "added",
    "request_time",
    "population",
    "subset_size",
    "triggered",
    "broadcast_bytes",
    "model_upload_bytes",
    "fisher_upload_bytes",
    "control_bytes",
    "makespan_s",
    "failed",
)


def say(line: str, lines: list[str]) -> None:
    print(line, flush=True)
    lines.append(line)


def machine(device: str) -> str:
    from vmc_sim.compute.host import cpu_model

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device"
    return (
        f"{platform.machine()} {cpu_model()}, {os.cpu_count()} cores, torch {torch.__version__} "
        f"({torch.get_num_threads()} threads), {gpu}; --device {device}"
    )


def cuda_tests() -> tuple[bool, str]:
    """tests/test_cuda.py in a child pytest: (passed, its closing line)."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(ROOT / "tests" / "test_cuda.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    lines = [x for x in done.stdout.splitlines() if x.strip()]
    return done.returncode == 0, (lines[-1] if lines else done.stderr.strip()[-500:])


def case_study(dataset: str, device: str, epochs: int | None, trace: Path):
    """The case study's scenario for ``dataset`` replaying ``trace`` (as tools/lust_case_study.py
    builds it), trained on ``device``."""
    from lust_case_study import scenario_for

    from vmc_sim.scenario.config import load_model
    from vmc_sim.scenario.schema import Scenario

    data = scenario_for(
        argparse.Namespace(quick=False, scenario=str(SCENARIO), epochs=epochs), dataset, trace
    ).model_dump(mode="json")
    data["federated"]["train"]["device"] = device
    data["name"] = f"gpu-check-{dataset}-{device}"
    return load_model(Scenario, None, data)


def vehicle(scenario, device: str, cpu_epochs: int) -> list[str]:
    """One case-study client (shard 0) trained with its Fisher: on ``device`` at the scenario's K
    and at ``cpu_epochs``, on the CPU at ``cpu_epochs``; seconds per epoch and how far apart the
    two devices' weights and Fisher end after ``cpu_epochs`` epochs."""
    from dataclasses import replace

    from fl_core.training import LocalTrainer

    setup = scenario.federated.setup(scenario.seed)
    data = setup.client_data[0]
    k = setup.train.epochs

    def run(dev: str, epochs: int):
        trainer = LocalTrainer(setup.model_fn, setup.w0, replace(setup.train, device=dev, epochs=epochs), setup.streams)
        t0 = time.perf_counter()
        trained = trainer.train(0, data)  # float32 weights, back on the CPU
        c = trainer.contribute(0, data, trained)
        return trained.weights, c, time.perf_counter() - t0

    rows = [
        f"one vehicle: shard 0, {len(data)} images, {scenario.federated.model}, batch {setup.train.batch_size}, "
        f"{getattr(setup.train.fisher, 'value', setup.train.fisher)} Fisher"
    ]
    cpu_w, cpu, cpu_s = run("cpu", cpu_epochs)
    rows.append(
        f"- cpu, K = {cpu_epochs}: {cpu_s:.2f} s (training {cpu.train_s:.2f} s = {cpu.train_s / cpu_epochs:.3f} s "
        f"an epoch, Fisher {cpu.fisher_s:.2f} s)"
    )
    if device != "cpu":
        run(device, 1)  # CUDA context, kernels, allocator: not charged to the figures below
        short_w, short, _ = run(device, cpu_epochs)
        _, full, full_s = run(device, k)
        rows.append(
            f"- {device}, K = {k}: {full_s:.2f} s (training {full.train_s:.2f} s = {full.train_s / k:.3f} s an "
            f"epoch, Fisher {full.fisher_s:.2f} s); training {cpu.train_s / cpu_epochs / (full.train_s / k):.1f}x "
            f"the CPU's epochs"
        )
        dw = float((short_w.double() - cpu_w.double()).norm() / cpu_w.double().norm())
        df = max(
            float((short.fisher.tensors()[n].double() - t.double()).norm() / t.double().norm())
            for n, t in cpu.fisher.tensors().items()
        )
        rows.append(
            f"- after K = {cpu_epochs} on both devices: weights {dw:.2e} apart (relative), Fisher at most {df:.2e}"
        )
    return rows


def kfac_solve(device: str, clients: int, samples: int) -> list[str]:
    """One K-FAC merge (CG on F, damping 1e-4 tr(F)/d, tol 1e-6) of ``clients`` one-epoch MNIST CNN
    clients, its float32 products on the CPU and on ``device``."""
    from problem import kfac_clients

    from fl_core.fisher.capture import layer_specs
    from fl_core.fisher.kfac import KFACSum
    from fl_core.projection import ProjectionConfig, ProjectionMethod, project
    from fl_core.stats import SufficientStatistics

    setup, contributions, train_s = kfac_clients(
        argparse.Namespace(dataset="mnist", clients=clients, samples_per_client=samples, epochs=1, seed=0)
    )
    stats = SufficientStatistics(int(setup.w0.numel()), KFACSum(layer_specs(setup.model_fn())), weighting="samples")
    stats.apply(joined=contributions)
    rows = [f"one K-FAC solve: {clients} MNIST CNN clients x ~{samples} (trained on the CPU in {train_s:.1f} s)"]
    solved = {}
    for dev in ("cpu",) if device == "cpu" else ("cpu", device):
        cfg = ProjectionConfig(
            method=ProjectionMethod.CG_F, tol=1e-6, max_iter=1000, damping=1e-4, precondition=True, device=dev
        )
        solved[dev] = x, info = project(stats, cfg)
        rows.append(
            f"- {dev}: {info.iterations} iterations, {info.seconds:.1f} s, residual {info.residual:.2e}, "
            f"converged {bool(info.converged)}"
        )
    if device != "cpu":
        (x_cpu, on_cpu), (x_dev, on_dev) = solved["cpu"], solved[device]
        rows.append(
            f"- merged models {float((x_dev - x_cpu).norm() / x_cpu.norm()):.2e} apart (relative); the solve "
            f"{on_cpu.seconds / on_dev.seconds:.1f}x faster on {device}"
        )
    return rows


def replay(scenario, out: Path, compare: bool) -> tuple[list[str], bool]:
    """The case study's run of ``scenario`` (a replay: no SUMO), timed; its simulated fields checked
    against the committed report when ``compare``. (rows, simulated fields all equal)."""
    from lust_case_study import per_request

    from vmc_sim.cosim import run_scenario
    from vmc_sim.reproduction import report

    dataset = scenario.federated.dataset
    t0 = time.perf_counter()
    run = run_scenario(scenario, out=out / "runs", progress=False, say=lambda s: None)
    wall = time.perf_counter() - t0
    rows = per_request(run, dataset)
    mine = out / f"requests_{dataset}.csv"
    report.write_csv(mine, rows)
    records = list(run.records())
    final = {r["method"]: r.get("accuracy") for r in sorted(records, key=lambda r: r["index"])}
    lines = [
        f"case study replayed ({dataset}, K = {scenario.federated.train.epochs}, {len(records)} records, "
        f"train.device {scenario.federated.train.device}): {wall:.1f} s wall ({wall / 60:.1f} min); final accuracy "
        + ", ".join(f"{m} {100 * a:.2f} %" for m, a in sorted(final.items()) if a is not None)
    ]
    if not compare:
        return lines + ["- not compared with the committed report (another K charges other work)"], True
    line, same = against_committed(mine, dataset)
    return lines + [line], same


def against_committed(mine: Path, dataset: str, committed: Path = COMMITTED) -> tuple[str, bool]:
    """``dataset``'s rows of the per-request table ``mine`` against the committed report's: (a line
    saying which simulated cells moved and how far the accuracies are apart, simulated fields all
    equal). ``python bench/gpu_check.py --compare FILE`` runs it on any case study's requests.csv."""
    with open(mine, newline="") as f:
        new = {(r["method"], r["index"]): r for r in csv.DictReader(f) if r.get("dataset", dataset) == dataset}
    with open(committed, newline="") as f:
        old = {(r["method"], r["index"]): r for r in csv.DictReader(f) if r["dataset"] == dataset}
    moved = [
        (k, c, old[k][c], new.get(k, {}).get(c)) for k in old for c in SIMULATED if new.get(k, {}).get(c) != old[k][c]
    ]
    acc = [
        abs(float(new[k]["accuracy"]) - float(old[k]["accuracy"]))
        for k in old
        if k in new and old[k]["accuracy"] and new[k]["accuracy"]
    ]
    same = not moved and len(new) == len(old)
    return (
        f"- {dataset} against the committed report ({len(old)} rows): simulated fields "
        + ("identical" if same else f"DIFFER in {len(moved)} cells, first {moved[:3]}; rows {len(new)} vs {len(old)}")
        + (
            f"; accuracy differs by at most {100 * max(acc):.2f} points (mean {100 * sum(acc) / len(acc):.2f})"
            if acc
            else ""
        )
    ), same


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda", help="cuda (default), cuda:N, auto or cpu (the baseline here)")
    p.add_argument("--dataset", default="mnist")
    p.add_argument("--epochs", type=int, default=None, help="local epochs of the replay (default: the scenario's 50)")
    p.add_argument("--cpu-epochs", type=int, default=2, help="epochs of the one-vehicle CPU comparison")
    p.add_argument("--kfac-clients", type=int, default=10)
    p.add_argument("--kfac-samples", type=int, default=600, help="samples per client of the K-FAC solve")
    p.add_argument("--trace", type=Path, default=TRACE)
    p.add_argument("--out", type=Path, default=Path("gpu_check_out"))
    p.add_argument("--skip-tests", action="store_true")
    p.add_argument("--skip-kfac", action="store_true")
    p.add_argument("--skip-replay", action="store_true")
    p.add_argument(
        "--compare",
        type=Path,
        default=None,
        metavar="CSV",
        help="only compare a case study's requests.csv with the committed report, then exit",
    )
    args = p.parse_args(argv)
    if args.compare is not None:
        with open(args.compare, newline="") as f:
            datasets = sorted({r.get("dataset", args.dataset) for r in csv.DictReader(f)})
        results = [against_committed(args.compare, d) for d in datasets]
        for line, _ in results:
            print(line)
        return 0 if results and all(same for _, same in results) else 1
    if args.device != "cpu" and not torch.cuda.is_available():
        p.error(f"--device {args.device}: this machine has no CUDA device (use --device cpu for the CPU baseline)")
    args.out.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []
    ok = True
    say(f"machine: {machine(args.device)}", lines)
    if not args.skip_tests:
        passed, closing = cuda_tests()
        ok &= passed
        say(f"tests/test_cuda.py: {closing}", lines)
    scenario = case_study(args.dataset, args.device, args.epochs, args.trace)
    t0 = time.perf_counter()
    for row in vehicle(scenario, args.device, args.cpu_epochs):
        say(row, lines)
    say(f"  ({time.perf_counter() - t0:.1f} s)", lines)
    if not args.skip_kfac:
        t0 = time.perf_counter()
        for row in kfac_solve(args.device, args.kfac_clients, args.kfac_samples):
            say(row, lines)
        say(f"  ({time.perf_counter() - t0:.1f} s)", lines)
    if not args.skip_replay:
        rows, same = replay(scenario, args.out, compare=args.epochs is None and args.trace == TRACE)
        ok &= same
        for row in rows:
            say(row, lines)
    (args.out / "gpu_check.md").write_text("\n".join(lines) + "\n")
    (args.out / "gpu_check.json").write_text(json.dumps({"ok": ok, "lines": lines}, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
