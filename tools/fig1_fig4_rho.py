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

Full size run for ``reports/fig1_fig4/`` (about 10 minutes on the 2-core box): MNIST, FEMNIST
and CIFAR-10 (SVHN is not in ``shared/data``), M = 20, alpha 0.5, the two-layer CNN,
K = 10 local epochs (paper 50), lr 0.05 (paper 0.01; ``LR_NOTE`` in vmc_sim/reproduction/common.py says why), batch 16 (the paper
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
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from fl_core.clients import ClientPool
from fl_core.editors import EditReport, FixedRatio, build_editor
from fl_core.experiment import OneShotSetup
from fl_core.projection import ProjectionConfig
from fl_core.store import MemoryStore
from fl_core.training import LocalTrainer, TrainConfig, evaluate
from vmc_sim.reproduction import common as repro
from vmc_sim.reproduction import report
from vmc_sim.reproduction.common import alpha_for, warm_up

SMOKE_ARGS = "--datasets digits --model mlp"  # extra arguments of the CI smoke run (tests/test_reproductions.py)

# Seed 000 anchors: Table II (alpha 0.5) and Table III (FEMNIST) at rho = 0.5 (F-SOSA) and
# rho = 1 (FedFisher): (accuracy %, time s, MB). The figures themselves carry no numbers.
PAPER = {
    ("mnist", 0.5): (95.43, 34.59, 18.46), ("mnist", 1.0): (95.98, 43.76, 35.30),
    ("svhn", 0.5): (80.33, 21.29, 40.31), ("svhn", 1.0): (80.52, 28.98, 77.04),
    ("cifar10", 0.5): (51.69, 16.26, 40.31), ("cifar10", 1.0): (51.86, 23.16, 77.04),
    ("femnist", 0.5): (75.71, 67.07, 289.68), ("femnist", 1.0): (76.94, 115.89, 554.12),
}
FINDINGS = (
    "Fig. 1: increasing rho improves accuracy (more clients aggregated); rho = 1.0 recovers FedFisher "
    "and gives the highest accuracy, at more time and communication, especially on FEMNIST; rho = 0.5 "
    "is the default trade-off.",
    "Fig. 4 (F-SOSA-I/U editing): accuracy improves with rho at the cost of time and communication "
    "from larger aggregation sets; small rho (0.1-0.3) already gives large accuracy gains; around "
    "rho = 0.5 is a favourable balance on all datasets.",
)
MB = 1e6








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
    return {"parallel_s": sum(r.max_client_compute_s + r.solve_s for r in reports),
            "compute_s": sum(r.compute_s for r in reports), "bytes": sum(r.total_bytes for r in reports),
            "triggered": sum(r.triggered for r in reports if r.kind != "fit")}


def run_dataset(dataset: str, args: argparse.Namespace) -> tuple[list[dict], list[dict], dict]:
    setup = OneShotSetup(
        dataset=dataset, num_clients=args.clients, alpha=alpha_for(dataset, args.alpha), model=args.model,
        seed=args.seed, train=TrainConfig(epochs=args.epochs, lr=args.lr, batch_size=args.batch_size,
                                          fisher=args.fisher, threads=args.threads),
        max_train_samples=args.max_train, max_test_samples=args.max_test,
    )
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
            fit_rows.append(row(dataset, rho, draw, len(editor.members), acc, loss, costs([fit]), fit.solve_s,
                                pool.trainings))
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
            r = row(dataset, rho, draw, len(editor.members), acc, loss, total, sum(x.solve_s for x in reports),
                    pool.trainings)
            r.update({"requests": len(sequence), "triggered": edits["triggered"],
                      "edit_parallel_s": round(edits["parallel_s"], 2), "edit_MB": round(edits["bytes"] / MB, 3)})
            edit_rows.append(r)
            print(json.dumps(r), file=sys.stderr, flush=True)
    check.update({"dataset": dataset, "clients_trained": trainings, "clients": args.clients,
                  "train_samples": len(setup.train_set), "test_samples": len(setup.test_set),
                  "sequence": " ".join(f"{c}{'+' if k == 'add' else '-'}" for k, c in sequence),
                  "initial": len(initial)})
    return fit_rows, edit_rows, check


def row(dataset: str, rho: float, draw: int, members: int, acc: float, loss: float, c: dict, solve_s: float,
        trainings: int) -> dict:
    mb = c["bytes"] / MB
    return {
        "dataset": dataset, "rho": rho, "draw": draw, "members": members, "accuracy": round(100 * acc, 2), "loss": round(loss, 4),
        "parallel_s": round(c["parallel_s"], 2), "compute_s": round(c["compute_s"], 2), "solve_s": round(solve_s, 3),
        "MB": round(mb, 3), "acc_per_s": round(100 * acc / c["parallel_s"], 3) if c["parallel_s"] > 0 else None,
        "acc_per_MB": round(100 * acc / mb, 3), "new_trainings": trainings,
    }


def summarize(rows: list[dict]) -> list[dict]:
    """One row per (dataset, rho): the mean over subset draws of every number, the accuracy's
    standard deviation, the number of draws and the clients newly trained (summed)."""
    out: list[dict] = []
    for key in dict.fromkeys((r["dataset"], r["rho"]) for r in rows):
        group = [r for r in rows if (r["dataset"], r["rho"]) == key]
        mean = {"dataset": key[0], "rho": key[1], "draws": len(group)}
        for k, v in group[0].items():
            if k in mean or k == "draw" or not isinstance(v, (int, float)):
                continue
            values = [g[k] for g in group if g[k] is not None]
            if not values:
                mean[k] = None
            elif k == "new_trainings":
                mean[k] = sum(values)
            elif all(isinstance(x, int) for x in values) and len(set(values)) == 1:
                mean[k] = values[0]
            else:
                mean[k] = round(float(np.mean(values)), 3)
        mean["acc_sd"] = round(float(np.std([g["accuracy"] for g in group])), 2)
        out.append(mean)
    return out


def listing(rows: list[dict], key: str) -> str:
    return ", ".join(f"{r[key]:.2f}" for r in rows)


def trend(values: list[float]) -> str:
    """'rises', 'falls', or 'not monotone' (ties count as monotone)."""
    d = np.diff(values)
    if (d >= 0).all():
        return "rises"
    if (d <= 0).all():
        return "falls"
    return "not monotone"


def plot_fig1(rows: list[dict], rhos: list[float], path: Path) -> None:
    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    width = 0.8 / len(rhos)
    for ax, (key, label) in zip(axes, [("accuracy", "Accuracy (%)"), ("parallel_s", "Time Cost (s)"), ("MB", "Comm. Cost (MB)")]):
        for j, rho in enumerate(rhos):
            picked = [next(r for r in rows if r["dataset"] == d and r["rho"] == rho) for d in datasets]
            ax.bar(np.arange(len(datasets)) + (j - (len(rhos) - 1) / 2) * width, [r[key] for r in picked], width,
                   yerr=[r["acc_sd"] for r in picked] if key == "accuracy" else None, capsize=2, label=f"rho={rho}")
        ax.set_xticks(range(len(datasets)), datasets)
        ax.set_xlabel("Dataset")
        ax.set_ylabel(label)
    axes[0].legend(fontsize=8)
    fig.suptitle("Fig. 1 (reproduced): effect of rho on F-SOSA's accuracy and overhead (one-shot fit)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_fig4(rows: list[dict], path: Path) -> None:
    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    panels = [("accuracy", "Accuracy (%)"), ("acc_per_s", "Time eff. (acc %/s)"), ("acc_per_MB", "Comm. eff. (acc %/MB)")]
    fig, axes = plt.subplots(len(panels), len(datasets), figsize=(max(6.0, 3.6 * len(datasets)), 7.5), squeeze=False)
    for j, d in enumerate(datasets):
        rs = [r for r in rows if r["dataset"] == d]
        for i, (key, label) in enumerate(panels):
            ax = axes[i][j]
            ax.errorbar([r["rho"] for r in rs], [r[key] for r in rs], fmt="o-", capsize=3,
                        yerr=[r["acc_sd"] for r in rs] if key == "accuracy" else None)
            ax.set_ylabel(label)
            if i == 0:
                ax.set_title(d)
            if i == len(panels) - 1:
                ax.set_xlabel("rho")
    fig.suptitle("Fig. 4 (reproduced): rho vs accuracy and efficiency after an F-SOSA-I/U request sequence")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def markdown(fit_rows: list[dict], edit_rows: list[dict], checks: list[dict], args: argparse.Namespace) -> str:
    cols = ["dataset", "rho", "members", "accuracy", "acc_sd", "paper_acc", "parallel_s", "paper_s", "compute_s", "MB",
            "paper_MB", "acc_per_s", "acc_per_MB"]
    heads = ["data", "rho", "P", "acc %", "sd", "paper acc %", "time s", "paper s", "compute s", "MB", "paper MB",
             "acc/s", "acc/MB"]
    for r in fit_rows:
        p = PAPER.get((r["dataset"], r["rho"]))
        r["paper_acc"], r["paper_s"], r["paper_MB"] = p if p else (None, None, None)
    body = ["## The paper's statements", "", *[f"- {f}" for f in FINDINGS], "",
            f"Every number of ours is the mean over {args.draws} draws of the subset (one for rho = 1, where every "
            "client is a member); sd = the accuracy's standard deviation over the draws; per-draw rows are in the "
            "`*_draws.csv` files.", "",
            "Paper anchors beside ours: Table II (alpha 0.5) / Table III (FEMNIST), F-SOSA at rho = 0.5 and "
            "FedFisher (= rho 1.0; for FEMNIST the FedFisher column of the scrambled Table III text is inferred "
            "from its costs, see `shared/reference/paper_figures.md`). SVHN is not in `shared/data`, so it has no "
            "row here.", "",
            "## Fig. 1: one-shot fit on all M clients", "", "![Fig. 1](fig1_rho.png)", "",
            report.md_table(fit_rows, cols, heads), ""]
    body += ["## Fig. 4: after the request sequence (fit on the first M - joins clients, then the requests)", "",
             "![Fig. 4](fig4_rho_efficiency.png)", "",
             report.md_table(edit_rows, ["dataset", "rho", "members", "triggered", "accuracy", "acc_sd", "parallel_s", "MB",
                                         "edit_parallel_s", "edit_MB", "acc_per_s", "acc_per_MB"],
                             ["data", "rho", "P at end", "triggered", "acc %", "sd", "cum. time s", "cum. MB",
                              "requests' time s", "requests' MB", "acc/s", "acc/MB"]), ""]
    body += ["## Checks of the paper's statements on our numbers", ""]
    for c in checks:
        d = c["dataset"]
        f = [r for r in fit_rows if r["dataset"] == d]
        e = [r for r in edit_rows if r["dataset"] == d]
        line = (f"- {d} ({c['train_samples']} train / {c['test_samples']} test samples; {c['clients_trained']} "
                f"trainings of its {c['clients']} clients for all runs): "
                f"one-shot accuracy {trend([r['accuracy'] for r in f])} with rho "
                f"({listing(f, 'accuracy')}); time {trend([r['parallel_s'] for r in f])}, "
                f"MB {trend([r['MB'] for r in f])}; after editing accuracy {trend([r['accuracy'] for r in e])} "
                f"({listing(e, 'accuracy')}), triggered "
                f"{', '.join(str(r['triggered']) for r in e)} of {c['sequence'].count(' ') + 1} requests.")
        if "max_abs_diff_rho1_vs_fedfisher" in c:
            line += f" rho = 1 vs FedFisher: max |weight difference| {c['max_abs_diff_rho1_vs_fedfisher']:.2e}."
        half = next((r for r in f if r["rho"] == 0.5), None)
        one = next((r for r in f if r["rho"] == 1.0), None)
        p_half, p_one = PAPER.get((d, 0.5)), PAPER.get((d, 1.0))
        if half and one and p_half and p_one:
            line += (f" rho 1.0 / 0.5 ratios, ours vs paper: time {one['parallel_s'] / half['parallel_s']:.2f} vs "
                     f"{p_one[1] / p_half[1]:.2f}, MB {one['MB'] / half['MB']:.2f} vs {p_one[2] / p_half[2]:.2f}, "
                     f"accuracy gain {one['accuracy'] - half['accuracy']:+.2f} vs {p_one[0] - p_half[0]:+.2f} points; "
                     f"our rho 0.5 accuracy differs from the paper's by {report.pct_diff(half['accuracy'], p_half[0]):+.2f} points.")
        body.append(line)
    body += ["", "Request sequences (client id, + arrival / - departure): "
             + "; ".join(f"{c['dataset']}: fit on {c['initial']}, then {c['sequence']}" for c in checks), "",
             "Differences from the paper's protocol: " + differences(args), ""]
    return "\n".join(body)


def differences(args: argparse.Namespace) -> str:
    notes = [f"batch {args.batch_size} (the paper's CNN batch size is not stated; table2 uses 64)"]
    if args.epochs != 50:
        notes.append(f"K = {args.epochs} local epochs (paper 50)")
    notes += repro.protocol_notes(args, "(paper: full sets; FEMNIST here is LEAF's 5 % sample, 14,708 images)")
    notes.append("uploads are fp32 safetensors (paper: 16-bit models, compressed K-FAC), so MB are larger")
    notes.append("time is measured on a shared 2-core CPU with one torch thread; the paper's absolute seconds are "
                 "not comparable, the ratios are")
    notes.append(f"Fig. 4 uses M = {args.clients} clients with {args.requests} requests (paper: up to 100 clients, "
                 "50 initially active)")
    return "; ".join(notes) + "."


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    repro.common_args(p, max_train=6000, max_test=4000)
    p.add_argument("--rhos", type=float, nargs="+", default=[0.2, 0.5, 0.8, 1.0])
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--draws", type=int, default=3, help="subset draws per rho < 1 (results are their mean)")
    p.add_argument("--joins", type=int, default=5, help="clients held back to arrive during the Fig. 4 sequence")
    p.add_argument("--requests", type=int, default=10, help="requests in the Fig. 4 sequence")
    p.add_argument("--out", default="tools/out/fig1_fig4")
    p.add_argument("--quick", action="store_true", help="smoke size: MNIST only, 2,000 samples, K = 2, 500 test samples, 2 draws")
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
    size = (f"{', '.join(args.datasets)}; M = {args.clients}, alpha {args.alpha} (FEMNIST by writer), {args.model}, "
            f"K = {args.epochs}, lr {args.lr}, batch {args.batch_size}, {args.fisher} Fisher, rho in {args.rhos} "
            f"({args.draws} subset draws each below 1), "
            f"train slice {args.max_train}, test {args.max_test}, seed {args.seed}" + (" (QUICK)" if args.quick else "")
            + f"; ran in {time.perf_counter() - started:.0f} s wall")
    repro.publish(out, "fig1_fig4.md", "Seed 000 Fig. 1 and Fig. 4: the stability level rho", "fig1_fig4_rho.py", argv,
                  size, markdown(fit_rows, edit_rows, checks, args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
