"""The LuST case study of seed 000 (Section VI-C, Fig. 6) over replicates, in two settings.

- **paper**: the paper's idealisation of the region: every vehicle trains on its own on-board unit
  (``compute.mode: onboard``) and its links outlast its dwell (``coordinator.dwell_limited:
  false``: a departure's withdrawal is issued before it disconnects, and no contribution is lost).
- **physics**: the scenario as written, on the toolkit's default radio (the city's: link states,
  shadowing, the five RSUs sharing the air): one edge GPU shared by the clients' jobs and transfers
  that end when the vehicle leaves the region (handover between the region's RSUs on).

A replicate draws the traffic (SUMO's ``--seed``) and the run seed (member draw, data split, W0):
``--vary traffic`` moves only SUMO's seed (base + r), ``--vary members`` only the run seed, ``--vary
both`` both (the default; several arms at once are allowed, and a run two arms share runs once).
``--dataset-draws own`` gives each dataset its own run seed (base + r + an offset per dataset,
:func:`dataset_offset`), so its trigger draws are its own as in seed 000's Tables VIII-XI;
``shared`` (the default) gives every dataset the same. Each replicate's traffic is recorded once by a
mobility-only pass (kept in the trace cache), then every (setting, dataset) replays it, ``--jobs``
at once. Every finished run is appended to ``OUT/runs.json`` at once, and a rerun of the same command
skips the runs already there and resumes one that stopped part-way (from its run directory, checking
what it recorded), so a long reproduction can be stopped and continued. ``--fisher kfac`` runs the
seed's K-FAC setting (``FISHERS``).

What the runs leave in OUT: ``runs.json`` (per run: its arm, seeds and run directory; ``run_s``,
the seconds it took itself, from its resumption where ``resumed``; ``trace_s``, the seconds its
traffic took, a SUMO pass where ``trace_recorded`` and the trace cache's copy otherwise; ``commit``, the
code it was made with),
``replicates.csv`` (per run and method), ``requests.csv``
(per record, with each record's time in seed 000's accounting), ``runs.csv`` (per run: traffic,
dwell, job times, from its manifest), ``distributions.csv.gz`` (every visit's dwell and every job's
time behind those) and ``provenance.json`` (when, where, from which commit, by which command); the
report (``report.md``, ``summary.csv``, ``accounting.csv``, ``claims.csv`` and
Fig. 6 with interval bands) is generated from those files alone
(:mod:`vmc_sim.reproduction.case_study_analysis`, the analysis reports/lust_case_study/PLAN.md
fixes), so ``--report-only`` writes it again from a directory whose run directories are gone.

    python tools/lust_case_study_replicates.py --jobs 2                          # the region, 5 replicates
    python tools/lust_case_study_replicates.py --datasets mnist --replicates 5 --jobs 2
    python tools/lust_case_study_replicates.py --quick                           # embedded city, digits, 3 replicates
    python tools/lust_case_study_replicates.py --datasets mnist --settings paper --replicates 10 \
        --vary traffic members both --dataset-draws own --jobs 2 --out reports/lust_case_study/plan_mnist
    python tools/lust_case_study_replicates.py --report-only --out reports/lust_case_study/replicates

The same command with ``--status`` says how much of it OUT records and what a rerun would make
(runs left, those recorded part-way, the traffic seeds they replay), and changes nothing.
``--beside DIR ...`` names the other Fisher's replicate directories, whose runs the report pools
for the pinning and the accounting table (kept in OUT/provenance.json).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from vmc_sim.reproduction import case_study_analysis as analysis
from vmc_sim.reproduction import case_study_replicates as rep
from vmc_sim.reproduction import case_study_runs, report
from vmc_sim.reproduction.case_study import per_request
from vmc_sim.reproduction.case_study_design import (
    ARMS,
    FISHERS,
    SETTINGS,
    merge,
    replicate,
    task,
)
from vmc_sim.rundir.directory import RunDir

ROOT = Path(__file__).resolve().parents[1]
SMOKE_ARGS = ""  # --quick already runs small (tests/test_case_study_replicates.py)


def default_caches(args: argparse.Namespace) -> None:
    """Default ``--trace-cache``/``--contribution-cache`` (the runs' scenarios name them: found again only so)."""
    if args.trace_cache is None:
        from mobility.trace_cache import default_root

        args.trace_cache = default_root()
    if args.contribution_cache is None:
        from fl_core.cache import default_root as contributions_root

        args.contribution_cache = contributions_root()


def base_scenario(args: argparse.Namespace) -> dict[str, Any]:
    """The scenario every replicate starts from, as a JSON dict."""
    from vmc_sim.scenario.schema import load_scenario

    data = load_scenario(None if args.quick else args.scenario).model_dump(mode="json")
    fed = data["federated"]
    fed["methods"] = ["fsosa", "retrain"]
    if args.quick:  # the embedded city: 10 requests, every client its own shard, the LuST scenarios' link
        data["coordinator"]["max_requests"] = 11
        data["duration"] = 400.0
        data["channel"] = {"path_loss_model": "tr37885_urban_los", "shared_air": False}
        fed.update(num_clients=32, shard_assignment="arrival")
    if args.epochs:
        fed["train"]["epochs"] = args.epochs
    if args.fisher:
        data["federated"] = fed = merge(fed, FISHERS[args.fisher])
    if args.trace_cache and not data["mobility"].get("trace_cache"):
        data["mobility"]["trace_cache"] = str(args.trace_cache)
    if args.contribution_cache and not data["compute"].get("contribution_cache"):
        data["compute"]["contribution_cache"] = str(args.contribution_cache)
    return data


Unit = tuple[int, dict[str, Any], list[tuple[str, str]]]  # (SUMO seed, replicate scenario, its runs to make)


def plan_runs(
    args: argparse.Namespace, entries: list[dict[str, Any]], base: dict[str, Any]
) -> tuple[list[dict[str, Any]], dict[tuple[Any, ...], list[tuple[str, int]]], list[Unit]]:
    """What the (arm, replicate, setting, dataset) runs of ``args`` still need beside ``entries``
    (``runs.json``): the entries to add for runs another arm already made with the same seeds, the
    runs to make (each with the (arm, replicate)s it serves) and the units that make them, one per
    replicate with runs left. Nothing is written or run."""
    draws = args.dataset_draws
    fisher = base["federated"]["train"]["fisher"]
    same = {(e["seed"], e["sumo_seed"], e["setting"], e["dataset"], e.get("fisher", fisher)): e for e in entries}
    have = {(rep.entry_arm(e), e["replicate"], e["setting"], e["dataset"], rep.entry_draws(e)) for e in entries}
    again: list[dict[str, Any]] = []
    planned: dict[tuple[Any, ...], list[tuple[str, int]]] = {}  # a run to make -> the (arm, replicate)s it serves
    units: list[Unit] = []
    for arm in args.vary:
        for r in range(args.replicates):
            data = replicate(base, r, arm)
            sumo_seed = data["mobility"]["sumo"]["seed"]
            left = []
            for s, d in ((s, d) for s in args.settings for d in args.datasets):
                if (arm, r, s, d, draws) in have:
                    continue
                key = (task(data, s, d, Path("-"), draws == "own")["seed"], sumo_seed, s, d, fisher)
                if key in same:  # the same run under another arm: recorded, not run again
                    again.append({**same[key], "arm": arm, "replicate": r, "dataset_draws": draws})
                elif key in planned:  # made by an earlier unit of this invocation, recorded for both
                    planned[key].append((arm, r))
                else:
                    planned[key] = [(arm, r)]
                    left.append((s, d))
            if left:
                units.append((sumo_seed, data, left))
    return again, planned, units


def status(args: argparse.Namespace, index: Path) -> str:
    """What ``--status`` prints: how much of the command ``index`` records, and what is left."""
    default_caches(args)
    entries = case_study_runs.read_index(index)
    base = base_scenario(args)
    again, planned, units = plan_runs(args, entries, base)
    wanted = {
        (a, r, s, d) for a in args.vary for r in range(args.replicates) for s in args.settings for d in args.datasets
    }
    keys = {(rep.entry_arm(e), e["replicate"], e["setting"], e["dataset"]) for e in entries + again}
    recorded = len(wanted & keys)  # an OUT may hold entries another command made
    draws = args.dataset_draws == "own"
    part_way = [
        name
        for _, data, left in units
        for s, d in left
        if (name := case_study_runs.unfinished(Path(args.runs), task(data, s, d, Path("-"), draws))) is not None
    ]
    seeds = sorted({seed for seed, _, _ in units})
    lines = [
        f"{index}: {recorded} of {len(wanted)} (arm, replicate, setting, dataset) entries recorded"
        + (f" ({len(again)} of them by runs another arm made, recorded at the next run)" if again else ""),
        f"runs to make: {len(planned)}, of them {len(part_way)} recorded part-way (continued, not restarted)",
    ]
    lines += [f"  part-way: {p}" for p in part_way]
    if seeds:
        lines.append(
            f"traffic seeds they replay (SUMO unless the trace cache holds them): {', '.join(map(str, seeds))}"
        )
    return "\n".join(lines)


def run_all(args: argparse.Namespace, index: Path) -> list[dict[str, Any]]:
    """Every (arm, replicate, setting, dataset) run, skipping those ``index`` already holds; a run
    another arm already made (or is about to make) with the same seeds is recorded again under this
    arm, not rerun. Each traffic seed's trace is recorded once and replayed by every run on it;
    with ``--jobs`` above one the later replicates' traffic passes overlap earlier runs
    (:func:`case_study_runs.run_staged`)."""
    entries = case_study_runs.read_index(index)
    draws = args.dataset_draws
    base = base_scenario(args)
    fisher = base["federated"]["train"]["fisher"]
    again, planned, units = plan_runs(args, entries, base)
    commit = report.provenance().partition(", commit ")[2]  # the code these runs are made with
    if again:
        entries += again
        report.replace_text(index, json.dumps(entries, indent=1))
    seeds = list(dict.fromkeys(seed for seed, _, _ in units))  # one trace each, recorded by its first replicate
    traces = [next(data for seed, data, _ in units if seed == want) for want in seeds]
    made: dict[int, list[tuple[dict[str, Any], str, str, dict[str, Any], float, float]]] = {}  # trace -> its runs
    sumo_ran: dict[int, bool] = {}  # trace -> whether SUMO recorded it (False: the trace cache held it)
    resumed: set[tuple[int, int]] = set()  # (trace, run) of the runs that continue a stopped one

    def expand(i: int, trace: Path, trace_s: float, recorded: bool) -> list[tuple[dict[str, Any], str | None]]:
        ready = time.perf_counter()
        made[i] = []
        sumo_ran[i] = recorded
        for _, data, wanted in (u for u in units if u[0] == seeds[i]):
            for s, d in wanted:
                made[i].append((data, s, d, task(data, s, d, trace, draws == "own"), trace_s, ready))
        runs: list[tuple[dict[str, Any], str | None]] = []
        for data, s, d, t, _, _ in made[i]:
            resume = case_study_runs.unfinished(Path(args.runs), t)
            if resume is not None:
                print(f"{data['name']}, {s}, {d}: continuing {resume}", flush=True)
                resumed.add((i, len(runs)))
            runs.append((t, resume))
        return runs

    def done(i: int, j: int, run: Path, plot: Path, run_s: float) -> None:
        data, s, d, t, trace_s, ready = made[i][j]
        sumo_seed = data["mobility"]["sumo"]["seed"]
        for arm, r in planned[(t["seed"], sumo_seed, s, d, fisher)]:
            entries.append(
                {
                    "replicate": r,
                    "arm": arm,
                    "dataset_draws": draws,
                    "fisher": fisher,
                    "setting": s,
                    "dataset": d,
                    "seed": t["seed"],
                    "sumo_seed": sumo_seed,
                    "run": str(run),
                    "trace_s": trace_s,
                    "trace_recorded": sumo_ran[i],  # False: trace_s is the cache's copy, not a SUMO pass
                    "commit": commit,
                    "run_s": run_s,  # from its resumption when it continued a stopped run
                    "resumed": (i, j) in resumed,
                    "finished_after_s": time.perf_counter() - ready,
                }
            )
            print(f"{arm} replicate {r}, {s}, {d}: {run}", flush=True)
        report.replace_text(index, json.dumps(entries, indent=1))

    case_study_runs.run_staged(traces, expand, args.runs, args.jobs, done)
    return entries


def write_data(args: argparse.Namespace, entries: list[dict[str, Any]], out: Path, wall_s: float, ran: bool) -> None:
    """The data files of OUT from the run directories of ``entries``: replicates.csv,
    requests.csv, runs.csv, and provenance.json with this invocation added when it ran anything."""
    report.write_csv(out / "replicates.csv", rep.replicate_rows(entries))
    report.write_csv(
        out / "requests.csv",
        [
            {
                "setting": e["setting"],
                "replicate": e["replicate"],
                "arm": rep.entry_arm(e),
                "seed": e["seed"],
                "sumo_seed": e["sumo_seed"],
                "fisher": e.get("fisher"),
                **r,
            }
            for e in entries
            for r in per_request(RunDir(e["run"], create=False), e["dataset"])
        ],
    )
    report.write_csv(out / "runs.csv", rep.run_rows(entries))
    spread = rep.distribution_rows(entries)
    if spread:
        report.write_csv(out / "distributions.csv.gz", spread)
    path = out / "provenance.json"
    prov: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}
    try:
        shown = Path(out).resolve().relative_to(ROOT)
    except ValueError:
        shown = Path(out)
    fishers = sorted({str(e.get("fisher")) for e in entries})
    prov.setdefault("title", "SUMO/LuST case study over replicates (seed 000, VI-C)")
    prov.setdefault("fisher", fishers[0] if len(fishers) == 1 else "see the rows")
    prov.setdefault("report_command", f"python tools/lust_case_study_replicates.py --report-only --out {shown}")
    setup = rep.setup_note(entries)  # from the run directories, as the data files beside it: the others kept
    kept = [n for n in prov.get("notes", []) if not n.startswith(setup.partition(":")[0] + ":")]
    prov["notes"] = [setup, *kept]
    if ran:
        made = report.provenance()  # "DATE, commit HASH[ +changes]"
        date, _, commit = made.partition(", commit ")
        size = "quick (embedded city, digits/mlp, 10 requests)" if args.quick else Path(args.scenario).name
        prov.setdefault("batches", []).append(
            {
                "what": f"{size}: {', '.join(args.datasets)}; settings {', '.join(args.settings)}; "
                f"{args.replicates} replicate(s); arms {', '.join(args.vary)}; dataset draws {args.dataset_draws}",
                "command": " ".join(["python tools/lust_case_study_replicates.py", *args.argv]),
                "commit": commit or None,
                "dates": date,
                "machine": report.machine(),
                "wall_s": round(wall_s),
                "note": None,
            }
        )
    report.replace_text(path, json.dumps(prov, indent=1, ensure_ascii=False) + "\n")


def plotter(bundle: analysis.Bundle) -> None:
    """Fig. 6 with interval bands per (setting, dataset), from ``requests.csv``."""
    series = rep.request_series(bundle.requests)
    for s, d in sorted({(r["setting"], r["dataset"]) for r in bundle.requests}):
        rep.plot_bands(series, s, d, bundle.path / f"fig6_{s}_{d}.png")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", default=str(ROOT / "scenarios" / "lust_region.yaml"))
    p.add_argument("--datasets", nargs="+", default=None, help="default: mnist fashion_mnist (quick: digits)")
    p.add_argument("--settings", nargs="+", choices=list(SETTINGS), default=["paper", "physics"])
    p.add_argument("--replicates", type=int, default=None, help="default 5 (quick: 3)")
    p.add_argument("--fisher", choices=list(FISHERS), default=None, help="default: the scenario's (FISHERS)")
    p.add_argument("--epochs", type=int, default=None, help="local epochs (default: the scenario's)")
    p.add_argument("--jobs", type=int, default=1, help="runs side by side in this many processes")
    p.add_argument("--runs", default=str(ROOT / "runs"), help="where the run directories go")
    p.add_argument("--out", default=str(ROOT / "tools" / "out" / "lust_case_study_replicates"))
    p.add_argument("--quick", action="store_true", help="embedded city, digits/mlp, 10 requests, 3 replicates")
    p.add_argument("--report-only", action="store_true", help="only write the report from OUT's data files")
    p.add_argument(
        "--status",
        action="store_true",
        help="say how much of this command OUT records and what is left; change nothing",
    )
    p.add_argument("--vary", nargs="+", choices=list(ARMS), default=["both"], help="which seeds a replicate moves")
    p.add_argument(
        "--dataset-draws",
        choices=["shared", "own"],
        default="shared",
        help="own: every dataset its own run seed (member and trigger draws); shared: the same for all",
    )
    p.add_argument(
        "--beside",
        nargs="+",
        default=None,
        help="replicate directories of the other Fisher whose runs the report pools (PLAN.md, 'Pinning'), kept in "
        "OUT/provenance.json",
    )
    p.add_argument("--trace-cache", type=Path, default=None, help="default: $VMC_CACHE/traces")
    p.add_argument("--contribution-cache", type=Path, default=None, help="default: $VMC_CACHE/contributions")
    args = p.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    args.datasets = args.datasets or (["digits"] if args.quick else ["mnist", "fashion_mnist"])
    args.replicates = args.replicates or (3 if args.quick else 5)
    if args.replicates < 1:
        p.error("--replicates must be at least 1 (an interval needs two)")
    if args.jobs < 1:
        p.error("--jobs must be at least 1")
    if any(Path(b).resolve() == Path(args.out).resolve() for b in args.beside or []):
        p.error("--beside names OUT itself; it takes the other Fisher's replicate directories")
    from vmc_sim.rundir.lock import RunLock, RunLockedError
    from vmc_sim.rundir.outputs import OutputRefused, claim_parent

    if args.status:  # reads only: no lock taken, so it answers while another invocation writes OUT
        print(status(args, Path(args.out) / "runs.json"))
        return 0
    try:  # neither inside a run or sweep directory, checked before anything is made
        claim_parent(args.runs)
        out = report.out_dir(args.out)
    except OutputRefused as e:
        p.error(str(e))
    try:  # one process writes a replicate directory: a second would overwrite runs.json under the first
        lock = RunLock(out, what="replicate directory")
    except RunLockedError as e:
        p.error(str(e))
    with lock:
        try:
            return write(args, out)
        except NothingToReport as e:
            p.error(str(e))


class NothingToReport(Exception):
    """A replicate directory with no data to write a report from."""


def write(args: argparse.Namespace, out: Path) -> int:
    """Make the runs ``out`` lacks (unless ``--report-only``) and write its data files and report."""
    if args.report_only:
        if not (out / "provenance.json").is_file():
            raise NothingToReport(f"{out}: no provenance.json beside the data to report")
        set_beside(out, args.beside)
        print(analysis.write(out, plots=plotter).read_text())
        return 0
    default_caches(args)
    index = out / "runs.json"
    t0 = time.perf_counter()
    before = len(case_study_runs.read_index(index))
    entries = run_all(args, index)
    if not entries:
        raise NothingToReport(f"{index}: no finished runs to report")
    write_data(args, entries, out, time.perf_counter() - t0, ran=len(entries) > before)
    set_beside(out, args.beside)
    print(analysis.write(out, plots=plotter).read_text())
    return 0


def set_beside(out: Path, beside: list[str] | None) -> None:
    """Keep the directories ``beside`` in ``out/provenance.json``, relative to ``out`` (None: as it is)."""
    if beside is None:
        return
    rel = [os.path.relpath(Path(b).resolve(), out.resolve()) for b in beside]
    path = out / "provenance.json"
    prov = json.loads(path.read_text())
    prov["beside"] = rel
    report.replace_text(path, json.dumps(prov, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
