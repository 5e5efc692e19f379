"""Table VI of seed 000: scalability of F-SOSA-I/U over client populations.

For each population M (the paper: 20, 50, 100, 200, 500) the paper runs 15 sequential
incremental-learning (IL) requests and 15 sequential unlearning (UL) requests and reports, per
method, the mean accuracy, the time-cost saving relative to Retrain (T-save, %) and the
communication cost normalised to Retrain (Comm., Retrain = 1.00). Methods as in
``tools/fig3_sequences.py``: IL F-SOSA-I, Retrain, Fine-tuning; UL F-SOSA-U, Retrain,
FedEraser, FedRR, FATS-CU (each one that is registered in ``fl_core.editors.EDITORS``).

Choices the paper leaves open, made here:

- Population M = the clients present when the requests start. The data is split among
  M + R shards (R = ``--requests``, Dirichlet alpha): both tasks fit on shards 0..M-1; IL then
  adds shards M..M+R-1 one at a time in a random order, UL removes R of the M initial clients in
  a random order (so at M = 20 the UL run ends with 5 clients). The order comes from the stream
  ``sequence`` keyed by ("table6", M).
- Mean accuracy = mean of the test accuracy after each of the R requests (the fit excluded).
- T-save = 100 (1 - T_method / T_Retrain) and Comm. = B_method / B_Retrain, with T and B summed
  over the R requests (the fit excluded; a ratio of totals, not a mean of per-request ratios).
  T is measured compute (training + Fisher of every client the request makes train, plus the
  solve); B is measured safetensors bytes. For F-SOSA the paper-style Comm. (a triggered edit
  re-collects the whole subset, as the paper's implementation does) is given beside ours.

Random streams: as in ``tools/fig3_sequences.py`` (``sequence`` keyed by ("table6", M)).

    python tools/table6_scalability.py --quick                  # digits, MLP, seconds
    python tools/table6_scalability.py                          # default size (reduced, below)

Default size (reduced against the paper; the committed ``reports/table6/``, about 25 minutes on this 2-core
machine): populations 20, 50 and 100 (200 and 500 are beyond this machine's budget); a
20,000-image MNIST training slice split among M + 15 clients, the two-layer CNN, diagonal Fisher,
K = 10 local epochs at lr 0.01 (momentum 0.9), accuracy on the first 2,000 test images (a 6,000-image slice with
500 test images runs in 7 minutes but leaves accuracies too noisy to compare methods); baselines: FedAvg 5 rounds x 5 clients x 1 epoch, FedRR one
rapid-retraining round per removal, Fine-tuning epochs from {5, 10, 15, 20}.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from fl_core.projection import ProjectionConfig
from fl_core.store import MemoryStore
from vmc_sim.reproduction import common as repro
from vmc_sim.reproduction import report
from vmc_sim.reproduction import sequences as fig3
from vmc_sim.reproduction.sequences_report import summarize

ROOT = Path(__file__).resolve().parents[1]

# Seed 000, Table VI, MNIST columns: method -> {M: (Acc. %, T-save %, Comm. x)}.
PAPER_MNIST = {
    "IL": {
        "retrain": {
            20: (96.33, 0.00, 1.00),
            50: (94.11, 0.00, 1.00),
            100: (92.81, 0.00, 1.00),
            200: (91.30, 0.00, 1.00),
            500: (85.38, 0.00, 1.00),
        },
        "finetune": {
            20: (95.74, 79.68, 0.78),
            50: (93.30, 79.67, 0.70),
            100: (91.32, 72.55, 0.68),
            200: (81.98, 82.80, 0.67),
            500: (75.52, 80.26, 0.67),
        },
        "fsosa": {
            20: (95.62, 20.83, 0.75),
            50: (94.35, 21.64, 0.72),
            100: (92.94, 16.93, 0.87),
            200: (90.22, 18.25, 0.87),
            500: (85.95, 24.17, 0.67),
        },
    },
    "UL": {
        "retrain": {
            20: (95.73, 0.00, 1.00),
            50: (94.87, 0.00, 1.00),
            100: (92.26, 0.00, 1.00),
            200: (91.21, 0.00, 1.00),
            500: (86.62, 0.00, 1.00),
        },
        "federaser": {
            20: (93.95, 78.64, 1.35),
            50: (93.21, 78.21, 1.34),
            100: (91.31, 77.83, 1.34),
            200: (87.56, 77.34, 1.33),
            500: (80.99, 76.82, 1.33),
        },
        "fedrr": {
            20: (92.20, 64.18, 1.35),
            50: (91.97, 63.76, 1.34),
            100: (90.04, 61.21, 1.34),
            200: (86.95, 59.84, 1.33),
            500: (80.71, 59.37, 1.33),
        },
        "fats": {
            20: (88.72, 76.92, 1.00),
            50: (90.87, 76.49, 1.00),
            100: (90.24, 76.12, 1.00),
            200: (86.23, 75.67, 1.00),
            500: (79.63, 75.13, 1.00),
        },
        "fsosa": {
            20: (94.87, 44.73, 0.75),
            50: (94.28, 44.16, 0.87),
            100: (92.33, 43.58, 0.80),
            200: (90.28, 42.91, 0.67),
            500: (85.73, 41.76, 0.53),
        },
    },
}


def table_rows(summary: list[dict[str, Any]], population: int) -> list[dict[str, Any]]:
    """Table VI rows for one population: ours beside the paper's MNIST numbers."""
    out = []
    for s in summary:
        paper = PAPER_MNIST.get(s["task"], {}).get(s["method"], {}).get(population)
        tsave = None if s["time_req_s_vs_retrain_pct"] is None else 0.0 - s["time_req_s_vs_retrain_pct"]
        comm = None if s["MB_req_vs_retrain_pct"] is None else 1 + s["MB_req_vs_retrain_pct"] / 100
        pcomm = None
        if s["method"] == "fsosa" and s["paper_style_MB_req_vs_retrain_pct"] is not None:
            pcomm = 1 + s["paper_style_MB_req_vs_retrain_pct"] / 100
        row = {
            "population": population,
            "task": s["task"],
            "method": s["method"],
            "label": s["label"],
            "mean_accuracy": s["mean_accuracy"],
            "t_save_pct": tsave,
            "comm_x": comm,
            "paper_style_comm_x": pcomm,
            "triggered": s["triggered"],
            "requests": s["requests"],
            "time_req_s": s["time_req_s"],
            "MB_req": s["MB_req"],
            "paper_mnist_accuracy": paper[0] if paper else None,
            "paper_mnist_t_save_pct": paper[1] if paper else None,
            "paper_mnist_comm_x": paper[2] if paper else None,
        }
        row["d_accuracy"] = report.pct_diff(row["mean_accuracy"], row["paper_mnist_accuracy"])
        row["d_t_save"] = report.pct_diff(tsave, row["paper_mnist_t_save_pct"])
        row["d_comm"] = report.pct_diff(comm, row["paper_mnist_comm_x"])
        out.append(row)
    return out


def plot(rows: list[dict[str, Any]], path: Path, title: str) -> Path:
    """Mean accuracy, T-save and Comm. against the population, ours (solid) and the paper's MNIST (dotted)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = (
        ("mean_accuracy", "paper_mnist_accuracy", "Mean accuracy (%)"),
        ("t_save_pct", "paper_mnist_t_save_pct", "T-save vs Retrain (%)"),
        ("comm_x", "paper_mnist_comm_x", "Comm. (Retrain = 1)"),
    )
    fig, axes = plt.subplots(2, 3, figsize=(13, 7))
    for r_i, task in enumerate(("IL", "UL")):
        methods = list(dict.fromkeys(r["method"] for r in rows if r["task"] == task))
        for c_i, (key, pkey, ylabel) in enumerate(metrics):
            ax = axes[r_i, c_i]
            for k, m in enumerate(methods):
                rs = sorted((r for r in rows if r["task"] == task and r["method"] == m), key=lambda r: r["population"])
                color = f"C{k}"
                ax.plot(
                    [r["population"] for r in rs], [r[key] for r in rs], marker="o", color=color, label=rs[0]["label"]
                )
                pts = [(r["population"], r[pkey]) for r in rs if r[pkey] is not None]
                if pts:
                    ax.plot(
                        *zip(*pts, strict=True),
                        ls=":",
                        marker="x",
                        color=color,
                        label=f"{rs[0]['label']} (paper MNIST)",
                    )
                if key == "comm_x" and m == "fsosa":
                    ax.plot(
                        [r["population"] for r in rs],
                        [r["paper_style_comm_x"] for r in rs],
                        ls="--",
                        color="gray",
                        label=f"{rs[0]['label']} (paper-style bytes)",
                    )
            ax.set_xscale("log")
            ax.set_xlabel("clients M")
            ax.set_ylabel(ylabel)
            ax.set_title(f"{task}: {ylabel}", fontsize=9)
            if c_i == 2:
                ax.legend(fontsize=6)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


DIFFERENCES = [
    "Dataset, model and training: the paper's Table VI uses MNIST/SVHN/FEMNIST/CIFAR-10 with K-FAC and K = 50 "
    "local epochs and populations up to 500; ours is the size named above (MNIST only, diagonal Fisher so every "
    "solve is closed form, fewer local epochs, the populations listed). Only the MNIST columns are compared; "
    "absolute accuracies differ with K and the Fisher, so compare methods within a row block.",
    "Comm.: ours counts the bytes each method really transfers. Our F-SOSA-I/U moves only the clients that "
    "change, so its Comm. is far below the paper's 0.53-0.87; the paper's implementation re-collects the whole "
    "subset on every triggered edit, which the paper-style column reproduces from our trigger flags and subset "
    "sizes (its expected value under the fixed-ratio couplings is about 0.75: about half the requests change "
    "P_t and must trigger, the others trigger with probability about rho).",
    "T-save: ours is measured compute (training + Fisher + solve, clients one after another); the paper's is "
    "wall-clock time on its testbed, which includes costs that do not shrink with fewer trainings (its "
    "F-SOSA-I T-save is 15.84-24.17 % on MNIST while its Comm. saving is 13-33 %).",
    "Population semantics (M = clients before the requests, M + R data shards for R requests) and the ratio-of-totals "
    "definition of T-save and Comm. are our reading; the paper does not spell them out.",
    "Payloads are float32 safetensors (the paper: 16-bit); ratios are comparable, absolute bytes are not.",
]


def markdown_body(rows: list[dict[str, Any]], notes: dict, info: dict[str, Any]) -> str:
    L = [
        f"{info['dataset']}, model `{info['model']}`, Fisher {info['fisher']}, K = {info['epochs']} local epoch(s), "
        f"lr {info['lr']}, batch {info['batch_size']}, Dirichlet alpha {info['alpha']} over M + {info['requests']} "
        f"shards of {info['train_samples']} training samples, test on {info['test_samples']}, rho = {info['rho']}, "
        f"seed {info['seed']}; populations {', '.join(map(str, info['populations']))}; {info['requests']} IL and "
        f"{info['requests']} UL requests each; {info['baselines']}. Wall-clock {info['wall_s']:.0f} s.",
        "",
        "Acc. = mean accuracy over the requests (%); T-save = time saving vs Retrain over the requests (%); "
        "Comm. = bytes over the requests / Retrain's; `paper-style` = F-SOSA's Comm. if every triggered edit "
        "re-collected the whole subset (the paper's implementation). `d` = ours minus the paper's MNIST value.",
        "",
    ]
    cols = [
        "population",
        "label",
        "mean_accuracy",
        "paper_mnist_accuracy",
        "d_accuracy",
        "t_save_pct",
        "paper_mnist_t_save_pct",
        "d_t_save",
        "comm_x",
        "paper_style_comm_x",
        "paper_mnist_comm_x",
        "d_comm",
        "triggered",
    ]
    heads = [
        "M",
        "method",
        "Acc.",
        "paper Acc.",
        "d Acc.",
        "T-save",
        "paper T-save",
        "d T-save",
        "Comm.",
        "paper-style Comm.",
        "paper Comm.",
        "d Comm.",
        "triggered",
    ]
    for task, name in (("IL", "(a) Incremental learning"), ("UL", "(b) Unlearning")):
        L += [f"## {name}", "", report.md_table([r for r in rows if r["task"] == task], cols, heads), ""]
    L += ["## Findings beside the paper's", ""]
    for task, ours, others in (("IL", "fsosa", ["finetune"]), ("UL", "fsosa", ["federaser", "fedrr", "fats"])):
        for m in info["populations"]:
            rs = {r["method"]: r for r in rows if r["task"] == task and r["population"] == m}
            if ours not in rs or "retrain" not in rs:
                continue
            f, rt = rs[ours], rs["retrain"]
            base = [rs[o] for o in others if o in rs]
            best = max(base, key=lambda r: r["mean_accuracy"]) if base else None
            line = (
                f"- {task}, M = {m}: {f['label']} {f['mean_accuracy']:.2f} % vs Retrain {rt['mean_accuracy']:.2f} % "
                f"({f['mean_accuracy'] - rt['mean_accuracy']:+.2f} points"
            )
            p = PAPER_MNIST[task][ours].get(m), PAPER_MNIST[task]["retrain"].get(m)
            if p[0] and p[1]:
                line += f"; paper MNIST {p[0][0] - p[1][0]:+.2f}"
            line += ")"
            if best:
                line += (
                    f"; best other baseline {best['label']} {best['mean_accuracy']:.2f} % "
                    f"({f['mean_accuracy'] - best['mean_accuracy']:+.2f} points"
                )
                pb = PAPER_MNIST[task].get(best["method"], {}).get(m)
                if pb and p[0]:
                    line += f"; paper MNIST {p[0][0] - pb[0]:+.2f}"
                line += ")"
            line += f"; T-save {f['t_save_pct']:.1f} % (paper {p[0][1]:.2f} %)" if p[0] else ""
            L.append(line + ".")
    if notes:
        L += ["", "## Methods not run", ""]
        L += [f"- {t} {fig3.label(t, m)} (`{m}`): {why}" for (t, m), why in notes.items()]
    L += ["", "## Differences from the paper", ""] + [f"- {d}" for d in DIFFERENCES]
    return "\n".join(L)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--quick", action="store_true", help="smoke size: digits, MLP, 20 epochs at lr 0.05, M = 8 and 16, 4 requests"
    )
    fig3.add_common_args(p)
    p.add_argument("--populations", type=int, nargs="+", default=[20, 50, 100])
    p.add_argument("--il-methods", nargs="+", default=list(fig3.IL_METHODS))
    p.add_argument("--ul-methods", nargs="+", default=list(fig3.UL_METHODS))
    p.add_argument("--out", default=str(ROOT / "tools" / "out" / "table6"))
    p.set_defaults(max_train=20000, epochs=10, max_test=2000, rounds=5, round_clients=5)
    args = p.parse_args(argv)
    if args.quick:
        fig3.apply_quick(args)
        args.populations, args.requests = [8, 16], 4
    out = report.out_dir(args.out)
    t0 = time.perf_counter()
    projection = ProjectionConfig(tol=args.cg_tol, max_iter=args.cg_iter)
    baselines = fig3.baselines_of(args)
    rows, per_request, notes, setup = [], [], {}, None
    for m in args.populations:
        print(f"population {m}", flush=True)
        setup = fig3.build_setup(args, m + args.requests)
        seq = fig3.draw_sequences(m + args.requests, m, args.requests, setup.streams.numpy("sequence", "table6", m))
        store = MemoryStore()
        runs = []
        for task, methods in (("IL", args.il_methods), ("UL", args.ul_methods)):
            r, n = fig3.run_task(task, methods, setup, store, seq, args.rho, projection, setup.test_set, baselines)
            runs += r
            notes.update({(task, k): why for k, why in n.items()})
        per_request += [{"population": m, **r} for r in runs]
        rows += table_rows(summarize(runs), m)
    size = (
        ("quick (digits, MLP)" if args.quick else "reduced") + f": populations {args.populations}, "
        f"{args.requests} IL + {args.requests} UL requests, {args.dataset}/{args.model}/{args.fisher}, K = {args.epochs}"
    )
    assert setup is not None  # at least one population ran (common_info reads its sizes)
    info = {
        **fig3.common_info(args, setup),
        "populations": args.populations,
        "requests": args.requests,
        "wall_s": time.perf_counter() - t0,
    }
    report.write_csv(out / "table6.csv", rows)
    report.write_csv(out / "table6_requests.csv", per_request)
    plot(rows, out / "table6.png", f"Table VI reproduction: {size}")
    report.write_markdown(
        out / "table6.md",
        "Seed 000, Table VI: scalability of F-SOSA-I/U over client populations",
        fig3.command_line("table6_scalability.py", argv),
        size,
        markdown_body(rows, notes, info),
    )
    print((out / "table6.md").read_text())
    return repro.exit_code([f"{t} {m}: {why}" for (t, m), why in notes.items() if why.startswith("failed")])


if __name__ == "__main__":
    raise SystemExit(main())
