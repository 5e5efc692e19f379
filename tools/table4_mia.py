"""Reproduce Table IV of seed 000: membership inference on the global model after unlearning.

Protocol (the paper says only "MIA on the unlearned global models"; the rest is ours):

- One federated setup per dataset (CIFAR-10: Dirichlet alpha 0.5; FEMNIST: by writer), the
  paper's two-layer CNN with K-FAC, fixed ratio rho = 0.5. Every method fits on all M clients
  from one shared client pool (contributions are deterministic, so methods share them).
- ``--requests`` unlearning requests in sequence; each removes one client drawn uniformly
  (stream ``mia/table4-requests``) among the clients of F-SOSA's current subset, so every
  request really changes F-SOSA's model (removing a non-member is trivially exact). All
  methods get the same requests.
- After each request every method's model is attacked with members = the removed client's
  training samples and non-members = label-matched unseen test samples
  (:func:`fl_core.mia_audit.audit`): loss threshold, confidence threshold, shadow models. The test
  set is split once: one half gives the non-members, the other half the shadow models' data,
  so the shadow attacker is trained once per dataset and shared by all models and requests.
- Control row ``fsosa (before)``: F-SOSA's model just *before* each request, when the removed
  client was still one of its members: how much these attacks see at all in a fused model.
- Reported: mean +- sd over the requests of accuracy, precision and AUC (%), the paper's
  numbers beside them (its attack is not specified; every attack is compared with them).

Methods: ``retrain`` (Retrain), ``fsosa`` (F-SOSA-U), and FedEraser / FedRR / FATS-CU when they
are registered in ``fl_core.editors.EDITORS`` as ``federaser`` / ``fedrr`` / ``fats`` (skipped
with a note otherwise). Datasets missing from the data directory are skipped with a note.

Sizes. Default (about 8-10 minutes a dataset on two shared cores; run one dataset per
invocation to stay within 15 minutes): M = 10 clients, a 5,000-sample training slice (about
500 samples a client), K = 20 local epochs at lr 0.01 with momentum 0.9, batch 32 (paper: K = 50 with
M = 50 initial clients), CG capped at 100 iterations, 4 requests, 3 shadow models, at most
1,000 members a request; the multi-round baselines train 3 FedAvg rounds of 5 clients, 1 local
epoch each. ``--quick``: digits, MLP, M = 8, K = 5, 2 requests.

    python tools/table4_mia.py --quick
    python tools/table4_mia.py --datasets cifar10 --out tools/out/table4_mia/cifar10
    python tools/table4_mia.py --datasets femnist --out tools/out/table4_mia/femnist
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from fl_core.data import DatasetNotFoundError
from fl_core.editors import EDITORS, FixedRatio, build_editor
from fl_core.mia import AttackKind, train_shadow_attacker
from fl_core.mia_audit import AuditConfig, audit
from fl_core.projection import ProjectionConfig
from fl_core.rounds import RoundConfig
from fl_core.training import evaluate
from vmc_sim.reproduction import report
from vmc_sim.reproduction.common import alpha_for, members_of, setup_from_args

LABELS = {
    "retrain": "Retrain",
    "federaser": "FedEraser",
    "fedrr": "FedRR",
    "fats": "FATS-CU",
    "fsosa": "F-SOSA-U",
    "fsosa (before)": "F-SOSA before removal",
}
BASELINES = ("federaser", "fedrr", "fats")
METRICS = ("accuracy", "precision", "auc")
BEFORE = "fsosa (before)"


def _paper(values: str) -> dict[str, tuple[float, ...]]:
    """``"48.99±0.78 ..."`` in the order Retrain, FedEraser, FedRR, FATS-CU, F-SOSA-U."""
    order = ("retrain", "federaser", "fedrr", "fats", "fsosa")
    pairs = [tuple(float(x) for x in v.split("±")) for v in values.split()]
    return dict(zip(order, pairs, strict=True))


# Seed 000, Table IV (mean ± sd, %). The seed text prints the same numbers in the accuracy and
# the AUC rows of each dataset (checked against the text: lines "Accuracy (%)" and "AUC (%)").
PAPER = {
    "cifar10": {
        "accuracy": _paper("48.99±0.78 45.17±2.33 53.54±0.88 51.64±1.67 51.63±1.80"),
        "precision": _paper("40.75±7.83 42.29±2.87 61.29±2.99 52.04±2.09 52.17±2.72"),
        "auc": _paper("48.99±0.78 45.17±2.33 53.54±0.88 51.64±1.67 51.63±1.80"),
    },
    "femnist": {
        "accuracy": _paper("50.01±0.02 50.45±0.49 50.47±0.25 50.45±0.21 50.92±0.33"),
        "precision": _paper("51.08±3.23 50.37±0.41 50.33±0.18 50.31±0.15 50.63±0.23"),
        "auc": _paper("50.01±0.02 50.45±0.49 50.47±0.25 50.45±0.21 50.92±0.33"),
    },
}


def run_dataset(dataset: str, args: argparse.Namespace, notes: list[str]) -> tuple[list[dict], list[dict]]:
    """Audit rows (one per request, model, attack) and per-method fit/final rows for ``dataset``."""
    t0 = time.perf_counter()
    try:
        setup = setup_from_args(args, dataset, alpha_for(dataset, args.alpha))
    except DatasetNotFoundError as e:
        notes.append(f"{dataset}: skipped, the data set is not present ({str(e).splitlines()[0]})")
        return [], []
    pool = setup.pool()
    projection = ProjectionConfig(tol=args.cg_tol, max_iter=args.cg_iter)
    rounds = RoundConfig(
        rounds=args.rounds,
        clients_per_round=min(args.per_round, args.clients),
        local_epochs=args.round_epochs,
        lr=args.round_lr,
        batch_size=args.batch_size,
    )
    names = ["retrain"] + [b for b in BASELINES if b in EDITORS] + ["fsosa"]
    missing = [b for b in BASELINES if b not in EDITORS]
    if missing:
        notes.append(
            f"{dataset}: {', '.join(LABELS[b] for b in missing)} not registered in fl_core.editors "
            f"(no {', '.join(missing)}): skipped"
        )
    editors, methods = {}, []
    for name in names:
        try:
            editor = build_editor(
                name,
                pool,
                setup.streams.numpy("subset", name),
                FixedRatio(args.rho),
                projection,
                rounds=rounds if name in BASELINES else None,  # multi-round baselines only (None: the default)
            )
            t = time.perf_counter()
            editor.fit(range(args.clients))
            log(f"{dataset}: {name} fitted in {time.perf_counter() - t:.1f} s")
        except Exception as e:  # a baseline that fails is reported, the others go on
            notes.append(f"{dataset}: {name} failed to fit and is left out ({type(e).__name__}: {e})")
            continue
        editors[name] = editor
        methods.append({"dataset": dataset, "method": name, "fit_s": round(time.perf_counter() - t, 2)})
    if "fsosa" not in editors:
        notes.append(f"{dataset}: F-SOSA failed to fit: nothing to audit")
        return [], methods
    test = setup.test_set
    perm = setup.streams.numpy("mia", "table4-split").permutation(len(test))
    nonmember_pool, shadow_pool = (
        test.subset(np.sort(perm[: len(test) // 2])),
        test.subset(np.sort(perm[len(test) // 2 :])),
    )
    sizes = sorted(len(d) for d in setup.client_data.values())
    t = time.perf_counter()
    attacker = train_shadow_attacker(
        setup.model_fn,
        shadow_pool,
        setup.train,
        num_shadows=args.shadows,
        shadow_size=sizes[len(sizes) // 2],
        epochs=args.shadow_epochs,
        seed=args.seed,
    )
    log(
        f"{dataset}: {args.shadows} shadow models ({attacker.shadow_size} samples each) in "
        f"{time.perf_counter() - t:.1f} s, attack fit accuracy {100 * attacker.shadow_train_accuracy:.1f} %"
    )
    config = AuditConfig(max_samples=args.max_samples, seed=args.seed)
    pick = setup.streams.numpy("mia", "table4-requests")
    rows = []
    for r in range(args.requests):
        fsosa = editors["fsosa"]
        members = sorted(members_of(fsosa))
        client = members[int(pick.integers(len(members)))]
        assert fsosa.model is not None  # fitted above
        models = {BEFORE: fsosa.model.clone()}
        for name in list(editors):
            try:
                rep = editors[name].remove(client)
            except Exception as e:
                notes.append(
                    f"{dataset}: {name} failed on removing client {client} and is left out ({type(e).__name__}: {e})"
                )
                del editors[name]
                continue
            edited = editors[name].model
            assert edited is not None  # an edit keeps a model (remove() refuses an unfitted editor)
            models[name] = edited
            if name == "fsosa" and not rep.triggered:
                raise RuntimeError(f"removing member {client} did not trigger F-SOSA-U")
        result = audit(
            setup.model_fn, models, setup.client_data[client], nonmember_pool, setup.train, config, attacker=attacker
        )
        for row in result.rows():
            rows.append(
                {
                    "dataset": dataset,
                    "request": r + 1,
                    "client": client,
                    "model": row["model"],
                    "attack": row["attack"],
                    "n": row["n_members"],
                    **{m: None if row[m] is None else round(100 * row[m], 2) for m in METRICS},
                }
            )
        aucs = {m: 100 * x.auc for m, rs in result.results.items() for x in rs if x.attack == "loss"}
        log(
            f"{dataset}: request {r + 1}: client {client} removed, {result.n_members} members; loss AUC % "
            + ", ".join(f"{m} {v:.1f}" for m, v in aucs.items())
        )
    for m in methods:
        if m["method"] in editors:
            model = editors[m["method"]].model
            assert model is not None  # fitted and edited above
            acc, _ = evaluate(setup.model_fn(), model, test)
            m["final_test_accuracy"] = round(100 * acc, 2)
    log(f"{dataset}: done in {time.perf_counter() - t0:.0f} s")
    return rows, methods


def summarize(rows: list[dict]) -> list[dict]:
    """Mean and sd over the requests per (dataset, model, attack), with the paper's numbers."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["dataset"], r["model"], r["attack"]), []).append(r)
    out = []
    for (dataset, model, attack), rs in groups.items():
        row: dict[str, Any] = {
            "dataset": dataset,
            "method": LABELS.get(model, model),
            "model": model,
            "attack": attack,
            "requests": len(rs),
            "n_mean": round(float(np.mean([r["n"] for r in rs]))),
        }
        for m in METRICS:
            vals = [r[m] for r in rs if r[m] is not None]
            row[m] = round(float(np.mean(vals)), 2) if vals else None
            row[f"{m}_sd"] = round(float(np.std(vals, ddof=1)), 2) if len(vals) > 1 else None
            paper = PAPER.get(dataset, {}).get(m, {}).get(model)
            row[f"paper_{m}"] = paper[0] if paper else None
        row["auc_minus_paper"] = report.pct_diff(row["auc"], row["paper_auc"])
        row["auc_minus_paper"] = None if row["auc_minus_paper"] is None else round(row["auc_minus_paper"], 2)
        se = 100 * math.sqrt((2 * row["n_mean"] + 1) / (12.0 * row["n_mean"] ** 2)) if row["n_mean"] else None
        row["auc_null_2se"] = None if se is None else round(2 * se, 2)
        out.append(row)
    return out


def _cell(mean: float | None, sd: float | None) -> str:
    if mean is None:
        return "-"
    return f"{mean:.2f}" + ("" if sd is None else f" ± {sd:.2f}")


def markdown(summary: list[dict], methods: list[dict], notes: list[str], args: argparse.Namespace) -> str:
    parts = []
    for dataset in dict.fromkeys(r["dataset"] for r in summary):
        rows = [r for r in summary if r["dataset"] == dataset]
        n = rows[0]["n_mean"]
        parts.append(
            f"## {dataset}\n\nMembers per request: about {n} (as many label-matched non-members); "
            f"AUC under no leakage: 50 ± {rows[0]['auc_null_2se']} (2 se).\n"
        )
        lines = [
            "| method | attack | acc % | prec % | AUC % | paper acc/AUC % | paper prec % | AUC - paper |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            lines.append(
                f"| {r['method']} | {r['attack']} | {_cell(r['accuracy'], r['accuracy_sd'])} | "
                f"{_cell(r['precision'], r['precision_sd'])} | {_cell(r['auc'], r['auc_sd'])} | "
                f"{report.fmt(r['paper_auc'])} | {report.fmt(r['paper_precision'])} | "
                f"{report.fmt(r['auc_minus_paper'])} |"
            )
        parts.append("\n".join(lines))
        fits = [m for m in methods if m["dataset"] == dataset]
        if fits:
            parts.append(
                "Final test accuracy after the requests: "
                + ", ".join(
                    f"{LABELS.get(m['method'], m['method'])} {report.fmt(m.get('final_test_accuracy'))} %" for m in fits
                )
            )
    if notes:
        parts.append("## Notes\n\n" + "\n".join(f"- {n}" for n in notes))
    parts.append(
        "## Reading\n\n"
        "Members are the removed client's training samples, non-members unseen test samples with the same label "
        "histogram; 50 % is chance. Accuracy and precision of the threshold attacks are measured on a held-out "
        "half after fitting the threshold on the other half (oracle-calibrated); the shadow attack uses its "
        "classifier's 0.5 cut. The paper's attack and sample counts are not given, so the comparison is with "
        "the level (near 50 %) rather than digit by digit. The row 'F-SOSA before removal' attacks the model "
        "that still contained the client: the gap between it and F-SOSA-U is what unlearning removed."
    )
    return "\n\n".join(parts)


def plot(summary: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = list(dict.fromkeys(r["dataset"] for r in summary))
    fig, axes = plt.subplots(1, len(datasets), figsize=(6 * len(datasets), 4), squeeze=False)
    attacks = [a.value for a in AttackKind]
    for ax, dataset in zip(axes[0], datasets, strict=True):
        rows = [r for r in summary if r["dataset"] == dataset]
        models = list(dict.fromkeys(r["model"] for r in rows))
        x = np.arange(len(models))
        for k, attack in enumerate(attacks):
            vals = {r["model"]: r for r in rows if r["attack"] == attack}
            ax.bar(
                x + (k - 1) * 0.25,
                [vals[m]["auc"] if m in vals else 0 for m in models],
                0.25,
                yerr=[(vals[m]["auc_sd"] or 0) if m in vals else 0 for m in models],
                label=attack,
                capsize=2,
            )
        paper = [next((r["paper_auc"] for r in rows if r["model"] == m and r["paper_auc"]), None) for m in models]
        px = [i for i, p in enumerate(paper) if p is not None]
        if px:
            ax.scatter(px, [paper[i] for i in px], color="black", marker="D", zorder=3, label="paper")
        ax.axhline(50, color="grey", lw=0.8, ls="--")
        ax.set_xticks(x, [LABELS.get(m, m) for m in models], rotation=20, fontsize=8)
        ax.set_ylabel("MIA AUC %")
        ax.set_ylim(30, 80)
        ax.set_title(dataset)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", nargs="+", default=["cifar10", "femnist"])
    p.add_argument("--model", default="cnn")
    p.add_argument("--clients", type=int, default=10)
    p.add_argument("--alpha", type=float, default=0.5)
    p.add_argument("--rho", type=float, default=0.5)
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--fisher", default="kfac")
    p.add_argument("--cg-tol", type=float, default=1e-5)
    p.add_argument("--cg-iter", type=int, default=100)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: auto)")
    p.add_argument("--max-train", type=int, default=5000, help="training slice per dataset (0: all)")
    p.add_argument("--max-test", type=int, default=None)
    p.add_argument("--rounds", type=int, default=3, help="FedAvg rounds of the multi-round baselines")
    p.add_argument("--per-round", type=int, default=5, help="clients per round of the multi-round baselines")
    p.add_argument("--round-epochs", type=int, default=1, help="local epochs per round of the multi-round baselines")
    p.add_argument(
        "--round-lr", type=float, default=0.05, help="local SGD lr of those rounds (they train without momentum)"
    )
    p.add_argument("--requests", type=int, default=4, help="unlearning requests in sequence")
    p.add_argument("--max-samples", type=int, default=1000, help="members (and non-members) per audit at most")
    p.add_argument("--shadows", type=int, default=3)
    p.add_argument("--shadow-epochs", type=int, default=None, help="default: --epochs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="tools/out/table4_mia")
    p.add_argument("--quick", action="store_true", help="smoke size: digits, MLP, M=8, K=5, 2 requests")
    args = p.parse_args(argv)
    if args.quick:
        args.datasets, args.model, args.clients, args.epochs = ["digits"], "mlp", 8, 5
        args.requests, args.shadows, args.max_train, args.lr, args.rounds = 2, 2, 0, 0.05, 2
    args.max_train = args.max_train or None
    t0 = time.perf_counter()
    notes: list[str] = []
    rows, methods = [], []
    for dataset in args.datasets:
        r, m = run_dataset(dataset, args, notes)
        rows += r
        methods += m
    out = report.out_dir(args.out)
    if not rows:
        report.write_csv(out / "table4_mia.csv", [{"note": n} for n in notes] or [{"note": "no data set ran"}])
        report.write_markdown(
            out / "table4_mia.md",
            "Table IV (seed 000): membership inference after unlearning",
            "python tools/table4_mia.py " + " ".join(map(shlex.quote, argv or sys.argv[1:])),
            "nothing ran",
            "\n".join(f"- {n}" for n in notes),
        )
        print("\n".join(notes), file=sys.stderr)
        return 1
    summary = summarize(rows)
    report.write_csv(out / "table4_mia_requests.csv", rows)
    report.write_csv(out / "table4_mia.csv", summary)
    report.write_csv(out / "table4_mia_methods.csv", methods)
    plot(summary, out / "table4_mia.png")
    size = (
        f"{', '.join(args.datasets)}; {args.model}, M={args.clients} clients"
        f"{'' if args.max_train is None else f', {args.max_train}-sample training slice'}, K={args.epochs} epochs, "
        f"lr {args.lr}, batch {args.batch_size}, rho {args.rho}, Fisher {args.fisher} (CG <= {args.cg_iter} "
        f"iterations, tol {args.cg_tol}), {args.requests} removal requests, "
        f"baselines {args.rounds} FedAvg rounds x {args.per_round} clients x {args.round_epochs} epoch(s), "
        f"{args.shadows} shadow models, seed {args.seed}"
        + (" (QUICK)" if args.quick else "")
        + f"; wall {time.perf_counter() - t0:.0f} s"
    )
    command = "python tools/table4_mia.py " + " ".join(map(shlex.quote, sys.argv[1:] if argv is None else argv))
    body = markdown(summary, methods, notes, args)
    report.write_markdown(
        out / "table4_mia.md", "Table IV (seed 000): membership inference after unlearning", command.strip(), size, body
    )
    print((out / "table4_mia.md").read_text())
    return 1 if any(" failed" in n for n in notes) else 0  # a method that failed fails the run


if __name__ == "__main__":
    raise SystemExit(main())
