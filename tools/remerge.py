"""Merge a recorded co-simulation run's member sets again, offline, with another Fisher.

A run directory keeps every contribution its clients uploaded (``contributions/``) and, per
request, which clients left and joined each method's subset. This script replays those
changes for one method, and at the requests asked merges the members it finds there:

- ``--fisher stored``: with the uploaded Fishers and the run's own merge settings. This must
  give the accuracy the run recorded; the script checks it on every request it merges and
  exits non-zero where it does not (a member set it could not rebuild is never reported as if
  it were the run's). With ``--dampings`` (other candidates) there is nothing to check.
- ``--fisher diagonal|kfac``: with the Fisher of that kind recomputed for every member at its
  *uploaded* weights, on the client's own shard, from the client's own Fisher stream, then cast
  to the run's upload dtype (``--upload-dtype`` to change it): what the run would have merged
  with that Fisher on the same members (the members' weights are the run's).

Each merged request reports the damping the run's validation set selects and the test accuracy
of every candidate, so a ceiling (the best candidate on the test set) can be read off beside
what the selection takes. Writes ``remerge.md`` and ``remerge.csv`` into ``--out`` after every
merged request (each file replaced whole), so an interrupted remerge keeps the requests it
finished and its table says how many of the asked requests it holds.

    python tools/remerge.py RUN_DIR --requests 0 31                   # must reproduce the run
    python tools/remerge.py RUN_DIR --requests 0 31 --fisher kfac     # the same members, K-FAC
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from fl_core.contribution import Contribution
from fl_core.fisher import compute_fisher, layer_specs, new_sum
from fl_core.models import load_flat
from fl_core.projection import project
from fl_core.stats import SufficientStatistics
from fl_core.store import ContributionStore
from fl_core.training import DTYPES
from fl_core.validation import Validator
from vmc_sim.cosim import manifest_scenario
from vmc_sim.reproduction import report
from vmc_sim.reproduction.common import damping_label, parse_damping
from vmc_sim.rundir.directory import RunDir
from vmc_sim.scenario.shards import recorded_shards
from vmc_sim.scenario.store_key import store_fingerprint

ROOT = Path(__file__).resolve().parents[1]

#: Accuracy the stored-Fisher merge may differ from the recorded one by (one test image in 10,000
#: flipping on float64 summation order).
REPRODUCE_TOL = 1.5e-4


def member_sets(records: list[dict[str, Any]], method: str) -> dict[int, set[str]]:
    """The method's subset after each of its records (by record index), rebuilt from the
    ``left``/``joined`` lists; a fit starts a new subset, a withdrawn model has none."""
    members: set[str] = set()
    sets: dict[int, set[str]] = {}
    for r in records:
        if r.get("method") != method:
            continue
        if r.get("kind") == "fit":
            members = set(r.get("joined", []))
        elif r.get("kind") == "suspend":
            members = set()
        else:
            members = (members - set(r.get("left", []))) | set(r.get("joined", []))
        sets[int(r["index"])] = set(members)
    return sets


def remerge(
    run_dir: Path,
    method: str,
    requests: list[int],
    fisher: str,
    upload_dtype: str | None,
    say: Callable[[str], None] = print,
    dampings: list[float] | None = None,
    on_rows: Callable[[list[dict[str, Any]]], None] | None = None,
) -> list[dict[str, Any]]:
    """One row per (request, candidate damping): validation and test accuracy of the merge
    (``dampings``: other candidates than the run's). Members' Fishers go through the run's
    upload form (``train.fisher_rank``: K-FAC factors compressed, as the run merged them); a run
    without a validation set merged at its fixed damping, and so does this. ``on_rows`` is
    handed the rows so far after every request (to write them before the next merge starts);
    ``check`` says whether a row's request reproduced the run (stored uploads, the run's
    candidates only) or could not be checked."""
    if fisher == "stored" and upload_dtype:
        raise SystemExit("--upload-dtype recasts a recomputed Fisher; with --fisher stored the uploads are the run's")
    run = RunDir(run_dir)
    scenario = manifest_scenario(run_dir / "manifest.json")
    fed = scenario.federated
    if fed.projection_config().method.value == "adam" or fed.projection.iterates:
        raise SystemExit(
            f"{run_dir}: the run merged with Adam or selected CG iterates; remerge replays damping selection"
        )
    setup = fed.setup(scenario.seed)
    model = setup.model_fn()
    trained_with = setup.train.fisher
    store = ContributionStore(run_dir / "contributions", store_fingerprint(scenario), trained_with, layer_specs(model))
    records = [r for r in run.records() if r.get("method") == method]
    if not records:
        raise SystemExit(f"{run_dir}: no records of method {method!r}")
    by_index = {int(r["index"]): r for r in records}
    missing = [i for i in requests if i not in by_index]
    if missing:
        raise SystemExit(f"{run_dir}: method {method!r} has no record(s) {missing} (it has 0-{max(by_index)})")
    sets = member_sets(records, method)
    kind = trained_with.value if fisher == "stored" else fisher
    dtype = DTYPES[upload_dtype or setup.train.upload_dtype]
    projection = fed.projection_config()
    if dampings:
        projection = replace(projection, dampings=tuple(dampings))
    validator, test = setup.validator(), Validator(setup.model_fn, setup.test_set)
    if validator is None and dampings:
        raise SystemExit(
            f"{run_dir}: the run holds out no validation set, so there is nothing to select --dampings with"
        )
    rank = setup.train.fisher_rank

    def uploaded(c: Contribution) -> Contribution:
        """``c`` as the run merged it (fl_core.clients compresses K-FAC factors after the store)."""
        if rank is None or c.fisher is None:
            return c
        return replace(c, fisher=c.fisher.compress(rank), _digest=None)

    shard_of = recorded_shards(run.manifest(), scenario.seed, len(setup.client_data))
    recomputed: dict[str, Contribution] = {}

    def contribution(client: str) -> Contribution:
        c = store.get(client)
        if c is None:
            raise SystemExit(f"{run_dir}: client {client!r} is a member but its contribution is not in the run's store")
        if fisher == "stored":
            return uploaded(c)
        if client not in recomputed:
            local = load_flat(setup.model_fn(), c.weights.float())
            data = setup.client_data[shard_of(client)]
            rep = compute_fisher(
                kind,
                local,
                data.x,
                setup.streams.torch("fisher", client),
                setup.train.fisher_batch,
                setup.train.fisher_labels,
            )
            assert rep is not None  # recomputed only for a Fisher kind (diagonal or kfac)
            recomputed[client] = uploaded(Contribution(client, c.weights, rep.cast(dtype), c.num_samples))
        return recomputed[client]

    rows, failed, unchecked = [], [], []
    for i in requests:
        record, members = by_index[i], sorted(sets[i])
        if not members:
            say(f"request {i}: no model (withdrawn); skipped")
            rows.append(
                {
                    "request": i,
                    "members": 0,
                    "fisher": kind,
                    "damping": "-",
                    "selected": False,
                    "val_accuracy": None,
                    "test_accuracy": None,
                    "recorded_accuracy": record.get("accuracy"),
                    "stop_reason": "no model",
                    "seconds": 0.0,
                    "check": "-",
                }
            )
            if on_rows:
                on_rows(rows)
            continue
        stats = SufficientStatistics(setup.w0.numel(), new_sum(kind, model), projection.weighting)
        stats.apply(joined=[contribution(c) for c in members])
        t0 = time.perf_counter()
        scores: dict[str, float] = {}

        def scorer(w: torch.Tensor, scores: dict[str, float] = scores) -> tuple[float, float]:
            score = validator(w)
            scores[_key(len(scores))] = test(w)[0]
            return score

        w, info = project(stats, projection, scorer=scorer if validator is not None else None)
        seconds = time.perf_counter() - t0
        chosen = test(w)[0]
        candidates = info.candidates or [
            {"damping": info.damping, "val_accuracy": info.validation[0] if info.validation else None}
        ]
        line = f"request {i}: {len(members)} members, {kind} Fisher: damping {damping_label(info.damping)}, test {100 * chosen:.2f} %"
        check = "-"
        if record.get("accuracy") is not None and (fisher != "stored" or dampings):
            line += f" (recorded {100 * record['accuracy']:.2f} %)"
        elif record.get("accuracy") is not None:  # the run's own uploads and merge: must be the run's model
            ok = abs(chosen - record["accuracy"]) <= REPRODUCE_TOL
            check = "reproduced" if ok else "NOT REPRODUCED"
            line += f" (recorded {100 * record['accuracy']:.2f} %: {check})"
            if not ok:
                failed.append(i)
        elif fisher == "stored" and not dampings:
            unchecked.append(i)
            check = "unchecked (no recorded accuracy)"
            line += " (the run recorded no accuracy here: not checked)"
        for n, c in enumerate(candidates):
            rows.append(
                {
                    "request": i,
                    "members": len(members),
                    "fisher": kind,
                    "damping": damping_label(c["damping"]),
                    "selected": damping_label(c["damping"]) == damping_label(info.damping),
                    "val_accuracy": c["val_accuracy"],
                    "test_accuracy": scores.get(_key(n), chosen),
                    "recorded_accuracy": record.get("accuracy"),
                    "stop_reason": c.get("stop_reason", info.stop_reason),
                    "seconds": round(seconds, 1),
                    "check": check,
                }
            )
        say(line)
        if on_rows:
            on_rows(rows)
    if unchecked:
        say(f"not checked against the run (no recorded accuracy): request(s) {unchecked}")
    if failed:
        raise SystemExit(
            f"{run_dir}: the stored contributions do not reproduce request(s) {failed}: the member sets "
            f"rebuilt from the records are not the run's"
        )
    return rows


def _key(n: int) -> str:
    return f"c{n}"


def markdown(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    lines = [
        f"# Remerged: {args.run} ({args.method}, Fisher {args.fisher}"
        + (f", uploads {args.upload_dtype}" if args.upload_dtype else "")
        + ")",
        "",
        f"Command: `python tools/remerge.py {args.run} --method {args.method} --requests "
        f"{' '.join(map(str, args.requests))} --fisher {args.fisher}"
        + (f" --upload-dtype {args.upload_dtype}" if args.upload_dtype else "")
        + (f" --dampings {' '.join(damping_label(d) for d in args.dampings)}" if args.dampings else "")
        + "`",
        "",
    ]
    done = len({r["request"] for r in rows})
    if done < len(args.requests):
        lines += [
            f"**Partial: {done} of the {len(args.requests)} requests asked** (the command was interrupted, "
            "failed or is still running; each request's rows are complete).",
            "",
        ]
    lines += [
        "| request | members | Fisher | damping | selected | val acc % | test acc % | recorded acc % | stop | check |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:

        def pct(v):
            return "-" if v is None else f"{100 * v:.2f}"

        lines.append(
            f"| {r['request']} | {r['members']} | {r['fisher']} | {r['damping']} | {'yes' if r['selected'] else ''} | "
            f"{pct(r['val_accuracy'])} | {pct(r['test_accuracy'])} | {pct(r['recorded_accuracy'])} | "
            f"{r.get('stop_reason', '-')} | {r['check']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", help="a co-simulation run directory (manifest.json, records.jsonl, contributions/)")
    p.add_argument("--method", default="fsosa")
    p.add_argument("--requests", type=int, nargs="+", required=True, help="record indices to merge at")
    p.add_argument("--fisher", choices=["stored", "diagonal", "kfac"], default="stored")
    p.add_argument("--upload-dtype", choices=sorted(DTYPES), default=None, help="default: the run's")
    p.add_argument(
        "--dampings",
        type=parse_damping,
        nargs="+",
        default=None,
        help="candidate relative dampings ('mean' = the weighted mean); default: the run's",
    )
    p.add_argument("--out", default=None, help="directory for remerge.md / remerge.csv")
    args = p.parse_args(argv)
    out = Path(args.out) if args.out else None

    def write(rows: list[dict[str, Any]]) -> None:
        if out is not None:
            report.write_csv(report.out_dir(out) / "remerge.csv", rows)
            report.replace_text(out / "remerge.md", markdown(rows, args))

    try:
        rows = remerge(
            Path(args.run),
            args.method,
            args.requests,
            args.fisher,
            args.upload_dtype,
            dampings=args.dampings,
            on_rows=write,
        )
    except FileNotFoundError as e:  # not a run directory, or one missing a file: one line, not a traceback
        raise SystemExit(f"remerge: {e}") from None
    print(markdown(rows, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
