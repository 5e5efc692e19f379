"""Fig. 3 of seed 000: F-SOSA-I/U against the baselines on one fixed random request sequence.

The paper (section VI-B 3) starts from 50 active clients of a population of at most 100, draws
a sequence of client joins (incremental learning, IL) and leaves (unlearning, UL) at random,
replays it against every method and plots, per request, test accuracy, cumulative time and
cumulative communication. Methods (names of ``fl_core.editors.EDITORS``):

- IL: ``fsosa`` (F-SOSA-I), ``retrain`` (rerun F-SOSA on the new client set), ``finetune``;
- UL: ``fsosa`` (F-SOSA-U), ``retrain``, ``federaser``, ``fedrr``, ``fats`` (FATS-CU).

A method missing from the registry when the script runs is skipped and named in the report;
one that raises is reported with its error and the others still run.

Choices the paper leaves open, made here:

- Two sequences from the same initial fit: IL = ``--requests`` joins of clients drawn without
  replacement from the inactive part of the population, UL = ``--requests`` leaves drawn from
  the initial clients. Both are drawn once from the stream ``sequence`` (keyed by the figure and
  the population) and every method replays the same one.
- Subset size P_t = floor(rho M(t)) (fixed ratio, rho = 0.5), as in the paper's dynamic runs.
- Time = the measured compute the request caused: every client's local training + Fisher
  (``EditReport.compute_s``, clients one after another; a contribution reused from the shared
  cache charges its measured time again) plus the coordinator's solve. Communication = the
  measured safetensors bytes of every transfer (``EditReport.bytes``), including the request's
  control message. Both cumulative curves include the initial fit (request 0), as the paper's
  Fig. 3 does ("initial accuracy and overhead differ across unlearning baselines").
- "Paper-style" bytes for F-SOSA: the paper's implementation re-collects the whole subset on
  every triggered edit (one broadcast + P_t model and Fisher uploads, like Retrain) and spends
  nothing otherwise; computed from our F-SOSA trigger flags and subset sizes with our payload
  sizes (the same convention as ``tools/paper_sequence.py``).
- Accuracy fluctuation (the paper gives 2.28 / 3.20 / 9.12 % without a definition): we report
  the range (max - min) of the accuracy over the requests after the fit, its standard
  deviation and the largest change between consecutive requests.

Every method has its own client pool; all pools share one in-memory cache of contributions
(each contribution is a deterministic function of (seed, client id, config)), so a client
trains once in real time and every method that uses it is charged its measured compute.

Random streams (``fl_core.rng``): ``partition``, ``init``, ``train``, ``fisher`` as everywhere;
``subset`` keyed by (method, task) for each editor's sampler; ``sequence`` keyed by
("fig3", population) for the request sequence (a purpose of this script).

    python tools/fig3_sequences.py --quick          # digits, MLP, seconds
    python tools/fig3_sequences.py                  # default size (reduced): MNIST, CNN, diagonal Fisher

Default size (reduced against the paper; about 10 minutes on this 2-core machine): a 20,000-image MNIST training
slice split among 100 clients (about 200 each), initial fit on 50, 15 joins and 15 leaves, the
two-layer CNN, diagonal Fisher (closed-form solve), K = 20 local epochs at lr 0.01 (momentum 0.9), accuracy on
the first 1,000 test images; baselines: FedAvg 6 rounds x 10 clients x 1 epoch, FedRR one
rapid-retraining round per removal, Fine-tuning epochs from {5, 10, 15, 20}.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from fl_core.projection import ProjectionConfig
from fl_core.store import MemoryStore
from vmc_sim.reproduction import report
from vmc_sim.reproduction.common import exit_code
from vmc_sim.reproduction.sequences import (
    IL_METHODS,
    UL_METHODS,
    add_common_args,
    apply_quick,
    baselines_of,
    build_setup,
    command_line,
    common_info,
    draw_sequences,
    run_task,
)
from vmc_sim.reproduction.sequences_report import DIFFERENCES, markdown_body, plot, summarize

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--quick", action="store_true", help="smoke size: digits, MLP, 20 epochs at lr 0.05, 24 clients, 6 requests"
    )
    add_common_args(p)
    p.add_argument("--population", type=int, default=100, help="clients in all (data shards)")
    p.add_argument("--initial", type=int, default=50, help="clients in the initial fit")
    p.add_argument("--il-methods", nargs="+", default=list(IL_METHODS))
    p.add_argument("--ul-methods", nargs="+", default=list(UL_METHODS))
    p.add_argument("--out", default=str(ROOT / "tools" / "out" / "fig3"))
    p.set_defaults(max_train=20000, epochs=20, max_test=1000, rounds=6, round_clients=10)
    args = p.parse_args(argv)
    if args.quick:
        apply_quick(args)
        args.population, args.initial, args.requests = 24, 12, 6
    out = report.out_dir(args.out)
    t0 = time.perf_counter()
    setup = build_setup(args, args.population)
    projection = ProjectionConfig(tol=args.cg_tol, max_iter=args.cg_iter)
    seq = draw_sequences(
        args.population, args.initial, args.requests, setup.streams.numpy("sequence", "fig3", args.population)
    )
    store = MemoryStore()
    baselines = baselines_of(args)
    rows, notes = [], {}
    for task, methods in (("IL", args.il_methods), ("UL", args.ul_methods)):
        r, n = run_task(task, methods, setup, store, seq, args.rho, projection, setup.test_set, baselines)
        rows += r
        notes.update({(task, m): why for m, why in n.items()})
    summary = summarize(rows)
    size = (
        ("quick (digits, MLP)" if args.quick else "reduced")
        + f": population {args.population}, initial {args.initial}, "
        f"{args.requests} joins + {args.requests} leaves, {args.dataset}/{args.model}/{args.fisher}, K = {args.epochs}"
    )
    info = {
        **common_info(args, setup),
        "population": args.population,
        "initial": args.initial,
        "joins": seq.joins,
        "leaves": seq.leaves,
        "wall_s": time.perf_counter() - t0,
        "trainings": len(store),
        "differences": DIFFERENCES,
    }
    report.write_csv(out / "fig3_requests.csv", rows)
    report.write_csv(out / "fig3_summary.csv", summary)
    plot(rows, out / "fig3.png", f"Fig. 3 reproduction: {size}")
    body = markdown_body(rows, summary, notes, info)
    report.write_markdown(
        out / "fig3.md",
        "Seed 000, Fig. 3: F-SOSA-I/U vs baselines on one request sequence",
        command_line("fig3_sequences.py", argv),
        size,
        body,
    )
    print((out / "fig3.md").read_text())
    return exit_code([f"{t} {m}: {why}" for (t, m), why in notes.items() if why.startswith("failed")])


if __name__ == "__main__":
    raise SystemExit(main())
