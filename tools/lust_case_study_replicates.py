"""The LuST case study of seed 000 (Section VI-C, Fig. 6) over replicates, in two settings.

- **paper**: the paper's idealisation of the region: every vehicle trains on its own on-board unit
  (``compute.mode: onboard``) and its links outlast its dwell (``coordinator.dwell_limited:
  false``: a departure's withdrawal is issued before it disconnects, and no contribution is lost).
- **physics**: the scenario as written: one edge GPU shared by the clients' jobs and transfers
  that end when the vehicle leaves the region (handover between the region's RSUs on).

A replicate is one traffic seed (SUMO's ``--seed``: base + r) and one run seed (member draw, data
split and W0: base + r). Each replicate's traffic is recorded once by a mobility-only pass (kept in
the trace cache), then every (setting, dataset) replays it, ``--jobs`` at once. Every finished run
is appended to ``OUT/runs.json`` at once, and a rerun of the same command skips the runs already
there and resumes one that stopped part-way (from its run directory, checking what it recorded),
so a long reproduction can be stopped and continued. ``--fisher kfac`` runs the seed's K-FAC
setting (``FISHERS``; ``--replicates 1`` runs it once, without an interval). The report gives each figure's mean
and 95 % interval per (setting, dataset, method), a table "paper | ours | within range?" and
Fig. 6 with interval bands.

    python tools/lust_case_study_replicates.py --jobs 2                          # the region, 5 replicates
    python tools/lust_case_study_replicates.py --datasets mnist --replicates 5 --jobs 2
    python tools/lust_case_study_replicates.py --quick                           # embedded city, digits, 3 replicates
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path
from typing import Any

from vmc_sim.reproduction import case_study_replicates as rep
from vmc_sim.reproduction import case_study_runs, report
from vmc_sim.reproduction.case_study import per_request, setting, setting_text
from vmc_sim.rundir.directory import RunDir

ROOT = Path(__file__).resolve().parents[1]
SMOKE_ARGS = ""  # --quick already runs small (tests/test_case_study_replicates.py)

SETTINGS: dict[str, dict[str, Any]] = {
    # on-board units (profile null: the on-board default, a Jetson AGX Orin); links outlast the dwell
    "paper": {"compute": {"mode": "onboard", "profile": None}, "coordinator": {"dwell_limited": False}},
    "physics": {},
    # the paper setting with compute, not the 802.11p uploads, dominating Retrain's time (a
    # sensitivity setting, not a measured device): what the paper's time saving needs
    "paper_cpu": {
        "compute": {
            "mode": "onboard",
            "profile": {
                "name": "onboard_cpu_class",
                "flops_per_s": 2.1e10,
                "source": "sensitivity setting: the Jetson AGX Orin profile's 1.59e12 / 75",
                "description": "a CPU-class on-board unit",
            },
        },
        "coordinator": {"dwell_limited": False},
    },
}
"""Each setting as changes to the scenario (the physics setting is the scenario as written)."""

FISHERS: dict[str, dict[str, Any]] = {
    "diagonal": {"train": {"fisher": "diagonal"}},
    # seed 000's default (VI-A: "the two-layer CNN from [8] with K-FAC Fisher approximation"), its
    # factors "further compressed using low-rank decomposition and quantization" (Appendix B-E):
    # rank 128, fp16 (0.77 MB a client here, the seed's Table VII 0.88 MB). Damping: the weighted
    # mean or 1.0 on validation (the K-FAC case study selected 1.0 in all of its 110 solves)
    "kfac": {"train": {"fisher": "kfac", "fisher_rank": 128}, "projection": {"dampings": ["mean", 1.0]}},
}
"""``--fisher``: each Fisher setting as changes to the scenario's ``federated`` section."""

SUMMARY_COLUMNS = [
    "setting",
    "dataset",
    "method",
    "replicates",
    "time_saving_pct",
    "comm_saving_pct",
    "device_s_saving_pct",
    "final_acc",
    "final_acc_gap_vs_retrain",
    "fluctuation_pts",
    "trained",
    "not_arrived",
    "withdrawn",
]


def merge(base: dict[str, Any], change: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``change`` merged in, section by section."""
    out = copy.deepcopy(base)
    for k, v in change.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
    return out


def base_scenario(args: argparse.Namespace) -> dict[str, Any]:
    """The scenario every replicate starts from, as a JSON dict."""
    from vmc_sim.scenario.schema import load_scenario

    data = load_scenario(None if args.quick else args.scenario).model_dump(mode="json")
    fed = data["federated"]
    fed["methods"] = ["fsosa", "retrain"]
    if args.quick:  # the embedded city: 10 requests, every client its own shard
        data["coordinator"]["max_requests"] = 11
        data["duration"] = 400.0
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


def replicate(base: dict[str, Any], r: int) -> dict[str, Any]:
    """Replicate ``r`` of ``base``: traffic seed and run seed both moved on by ``r``."""
    data = copy.deepcopy(base)
    data["seed"] = base["seed"] + r
    data["mobility"]["sumo"]["seed"] = base["mobility"]["sumo"]["seed"] + r
    data["name"] = f"{base['name']}-r{r}"
    return data


DATASETS: dict[str, dict[str, Any]] = {
    # seed 000, VI-A: "FEMNIST, as a FL dataset, naturally exhibits non-IID characteristics; we
    # follow [9], sampling 10% of users and grouping into M clients": its writers (here LEAF's
    # 5 % sample, 184 writers) grouped into the shards instead of a Dirichlet split
    "femnist": {"alpha": None},
}
"""Changes to the ``federated`` section a dataset needs (the others take the scenario's split)."""


def task(data: dict[str, Any], setting_name: str, dataset: str, trace: Path) -> dict[str, Any]:
    """One run: replicate ``data`` in ``setting_name`` on ``dataset``, replaying ``trace``."""
    out = merge(data, SETTINGS[setting_name])
    out["federated"] = merge(out["federated"], {"dataset": dataset, **DATASETS.get(dataset, {})})
    out["mobility"] = {"source": "trace", "trace": str(trace)}
    out["name"] = f"{data['name']}-{setting_name}-{dataset}"
    return out


def read_index(path: Path) -> list[dict[str, Any]]:
    """The finished runs recorded in ``path`` whose run directories still hold a complete run."""
    if not path.is_file():
        return []
    entries = json.loads(path.read_text(encoding="utf-8"))
    kept = []
    for e in entries:
        manifest = Path(e["run"]) / "manifest.json"
        if manifest.is_file() and json.loads(manifest.read_text()).get("status") == "complete":
            kept.append(e)
        else:
            print(f"{path}: {e['run']} is not a complete run any more; it runs again", file=sys.stderr)
    return kept


def run_all(args: argparse.Namespace, index: Path) -> list[dict[str, Any]]:
    """Every (replicate, setting, dataset) run, skipping those ``index`` already holds."""
    from vmc_sim.rundir.directory import new_run_dir
    from vmc_sim.scenario.config import load_model
    from vmc_sim.scenario.schema import Scenario

    entries = read_index(index)
    have = {(e["replicate"], e["setting"], e["dataset"]) for e in entries}
    base = base_scenario(args)
    for r in range(args.replicates):
        wanted = [(s, d) for s in args.settings for d in args.datasets if (r, s, d) not in have]
        if not wanted:
            continue
        data = replicate(base, r)
        t0 = time.perf_counter()
        live = load_model(Scenario, None, data)
        trace = case_study_runs.record_trace(live, new_run_dir(args.runs, f"{live.name}-trace") / "trace.jsonl")
        trace_s = time.perf_counter() - t0
        tasks = [task(data, s, d, trace) for s, d in wanted]
        resume = [unfinished(Path(args.runs), t) for t in tasks]
        for (s, d), run in zip(wanted, resume, strict=True):
            if run is not None:
                print(f"replicate {r}, {s}, {d}: continuing {run}", flush=True)
        started = time.perf_counter()

        def done(
            i: int,
            run: Path,
            plot: Path,
            r: int = r,
            started: float = started,
            trace_s: float = trace_s,
            wanted: list[tuple[str, str]] = wanted,
            tasks: list[dict[str, Any]] = tasks,
            data: dict[str, Any] = data,
        ) -> None:
            s, d = wanted[i]
            entries.append(
                {
                    "replicate": r,
                    "setting": s,
                    "dataset": d,
                    "seed": tasks[i]["seed"],
                    "sumo_seed": data["mobility"]["sumo"]["seed"],
                    "run": str(run),
                    "trace_s": trace_s,
                    "finished_after_s": time.perf_counter() - started,
                }
            )
            report.replace_text(index, json.dumps(entries, indent=1))
            print(f"replicate {r}, {s}, {d}: {run}", flush=True)

        case_study_runs.run_pool(tasks, args.runs, args.jobs, on_done=done, resume=resume)
    return entries


def unfinished(runs: Path, scenario: dict[str, Any]) -> str | None:
    """The newest run directory under ``runs`` that an earlier invocation started for
    ``scenario`` and did not finish (interrupted, killed, or failed after its first record), to
    be resumed rather than started again; the traffic it replays may sit in an older trace
    directory (the same traffic: the replicate's SUMO inputs and seeds are in its name and config)."""
    from vmc_sim.cosim import manifest_scenario
    from vmc_sim.rundir.directory import read_manifest, writer_alive
    from vmc_sim.scenario.config import load_model
    from vmc_sim.scenario.schema import Scenario

    want = {**load_model(Scenario, None, scenario).model_dump(mode="json"), "mobility": None}
    for path in sorted(runs.glob(f"{scenario['name']}-*"), reverse=True):
        manifest = path / "manifest.json"
        if not manifest.is_file() or not (path / "records.jsonl").is_file():
            continue
        m = read_manifest(manifest)
        if m.get("status") == "complete" or writer_alive(path):
            continue
        recorded = manifest_scenario(manifest).model_dump(mode="json")
        if recorded["mobility"]["source"] == "trace" and {**recorded, "mobility": None} == want:
            return str(path)
    return None


def choices(entries: list[dict[str, Any]]) -> list[str]:
    """What the seed leaves open and how the runs chose it, read from the runs' own manifests."""
    from statistics import mean

    from vmc_sim.cosim import manifest_scenario

    out = [
        "Choices seed 000 leaves open (Section VI-C names a city-centre region at the 08:00 rush hour, "
        "arrivals as contributions, departures as unlearning requests, four datasets, nothing more):",
        "",
    ]
    first = RunDir(entries[0]["run"], create=False).manifest()
    config = first["config"]
    rsus = first.get("rsus") or []
    fed = config["federated"]
    out.append(
        f"- Region: {len(rsus)} RSU(s) of radius {rsus[0]['radius']:g} m sharing one coordinator ("
        + ", ".join(str(r.get("junction") or r["id"]) for r in rsus)
        + "; with several, neighbouring cells touch, so a vehicle crossing the centre is handed over instead of "
        "leaving)."
        if rsus
        else "- Region: the scenario's RSUs."
    )
    out.append(
        f"- Requests: the first fit at the end of the warm-up with the vehicles then covered, then the next "
        f"{config['coordinator']['max_requests'] - 1} arrivals and departures, as the seed's Tables VIII-XII "
        "(the seed states no request rate; ours is what the traffic gives, in the traffic lines below)."
    )
    split: dict[str, str] = {}
    for e in entries:
        if e["dataset"] not in split:
            scenario = manifest_scenario(Path(e["run"]) / "manifest.json")
            setup = scenario.federated.setup(scenario.seed)
            shards = list(setup.client_data.values())
            fd = scenario.federated
            how = (
                f"its writers grouped into {fd.num_clients} shards (seed 000, VI-A)"
                if fd.alpha is None
                else f"{fd.num_clients} Dirichlet shards (alpha {fd.alpha:g}, {fd.scheme.value})"
            )
            split[e["dataset"]] = f"{e['dataset']} {how}, {mean(len(d.y) for d in shards):,.0f} samples a shard"
    out.append(
        "- Data per vehicle: the training set split into shards; "
        + "; ".join(split.values())
        + f". Every vehicle that becomes a client holds its own shard (shard_assignment: "
        f"{fed.get('shard_assignment', 'hash')}): no two clients share data."
    )
    out.append(
        "- Which vehicles count: every vehicle in any RSU's coverage (union over the region) at the first fit, "
        "and every later entry into or exit from the region's coverage; a vehicle handed over between RSUs "
        "stays a client."
    )
    out.append(f"- Fisher: {fed['train']['fisher']} (the seed's default is K-FAC).")
    out.append(
        "- Devices: on board (paper setting) the on-board default profile, an NVIDIA Jetson AGX Orin; at the "
        "edge (physical setting) an NVIDIA T4; the seed names no hardware. Both are FLOP profiles, so simulated "
        "time is the same on any host."
    )
    datasets = sorted({e["dataset"] for e in entries})
    out.append(
        f"- Datasets here: {', '.join(datasets)}. The seed's four are MNIST, SVHN, CIFAR-10 and FEMNIST; SVHN's "
        "files are not on these machines (its loader is tested)."
    )
    return out + [""]


def write_report(args: argparse.Namespace, entries: list[dict[str, Any]], out: Path, wall_s: float) -> Path:
    """replicates.csv, summary.csv, paper.csv, the band plots and report.md from ``entries``."""
    rows = rep.replicate_rows(entries)
    summary = rep.summarize(rows)
    table = rep.paper_table(summary)
    report.write_csv(out / "replicates.csv", rows)
    report.write_csv(out / "summary.csv", summary)
    report.write_csv(out / "paper.csv", table)
    report.write_csv(
        out / "requests.csv",
        [
            {"setting": e["setting"], "replicate": e["replicate"], **r}
            for e in entries
            for r in per_request(RunDir(e["run"], create=False), e["dataset"])
        ],
    )
    series = rep.request_series(entries)
    pairs = sorted({(e["setting"], e["dataset"]) for e in entries})
    for s, d in pairs:
        rep.plot_bands(series, s, d, out / f"fig6_{s}_{d}.png")
    shown = [
        {
            **{k: row[k] for k in ("setting", "dataset", "method", "replicates")},
            **{k: rep.pm(row, k) for k in SUMMARY_COLUMNS[4:]},
        }
        for row in summary
    ]
    first: dict[str, dict[str, Any]] = {}
    for e in sorted(entries, key=lambda e: e["replicate"]):
        first.setdefault(e["setting"], e)
    replicates = sorted({e["replicate"] for e in entries})
    body = [
        *choices(entries),
        "Settings (the same region, traffic and seeds; only these differ):",
        "",
        "- **paper**: on-board training (every vehicle its own unit), links that outlast the dwell "
        "(`coordinator.dwell_limited: false`): no contribution is lost, as in seed 000's case study.",
        "- **physics**: one edge GPU shared by the clients' jobs, transfers that end when the vehicle "
        "leaves the region (handover between its RSUs).",
        *(
            [
                "- **paper_cpu**: the paper setting with a CPU-class on-board unit (the Orin's FLOP/s / 75, a "
                "sensitivity setting, not a measured device), so that compute, not the uploads, dominates "
                "Retrain's time."
            ]
            if any(e["setting"] == "paper_cpu" for e in entries)
            else []
        ),
        "",
        f"Replicates: {len(replicates)} (traffic seed and run seed both base + r, r in {replicates}). "
        "Replicate 0's traffic in each setting:",
        "",
        *(f"- {s}: {setting_text(setting(RunDir(e['run'])))}" for s, e in sorted(first.items())),
        "",
        "Mean ± 95 % interval half-width (Student t) over the replicates, and the count:",
        "",
        report.md_table(shown, list(shown[0])),
        "",
        "Seed 000, Section VI-C, against ours (F-SOSA; 'within range?': yes when the mean lies in the "
        "paper's range, 'interval overlaps' when only the interval reaches it):",
        "",
        report.md_table(table, ["setting", "dataset", "figure", "paper", "ours", "within range?"]),
        "",
        "F-SOSA's time saving priced each way: a triggered request charged Retrain's answer, in "
        "device-seconds, device plus airtime, and makespan; F-SOSA's own compute with Retrain's "
        "transfers on a triggered request; and seed 000's own accounting (Appendix B-D, the one the "
        "table above uses: computation time, each request waiting for its slowest trained client, on-board "
        "settings only) with the share of its saving made by untriggered requests (the seed's BDD100K "
        "case: 78.31 %). Beside them Retrain's share of device time and the share of requests F-SOSA "
        "triggers on:",
        "",
        report.md_table(rep.time_accounting(entries), ["setting", "dataset", "figure", "ours"]),
        "",
        *(f"![{s} {d}](fig6_{s}_{d}.png)" for s, d in pairs),
        "",
        f"Wall-clock: {wall_s:.0f} s for this command; per replicate (its SUMO pass and its runs, "
        "`--jobs` at once): "
        + ", ".join(
            f"r{r}: {max(e['trace_s'] + e['finished_after_s'] for e in entries if e['replicate'] == r):.0f} s"
            for r in replicates
        )
        + ". Per-replicate rows: `replicates.csv`; intervals: `summary.csv`; the table above: `paper.csv`; "
        "every request of every run: `requests.csv`; the runs: `runs.json`.",
    ]
    size = (
        "quick (embedded city, digits/mlp, 10 requests)"
        if args.quick
        else f"full ({Path(args.scenario).name}, {', '.join(args.datasets)}, {len(replicates)} replicates)"
    )
    cmd = " ".join(["python tools/lust_case_study_replicates.py", *args.argv])
    title = "SUMO/LuST case study over replicates (seed 000, VI-C)"
    return report.write_markdown(out / "report.md", title, cmd, size, "\n".join(body))


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
    p.add_argument("--report-only", action="store_true", help="only write the report from OUT/runs.json")
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
    if args.trace_cache is None:
        from mobility.trace_cache import default_root

        args.trace_cache = default_root()
    if args.contribution_cache is None:
        from fl_core.cache import default_root as contributions_root

        args.contribution_cache = contributions_root()
    out = report.out_dir(args.out)
    index = out / "runs.json"
    t0 = time.perf_counter()
    entries = read_index(index) if args.report_only else run_all(args, index)
    if not entries:
        p.error(f"{index}: no finished runs to report")
    text = write_report(args, entries, out, time.perf_counter() - t0)
    print(text.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
