"""The SUMO/LuST case study of seed 000 (section VI-C, Fig. 6): F-SOSA-I/U vs Retrain on the
identical, traffic-driven request sequence, for several datasets.

The first dataset runs live on LuST (``scenarios/lust_case_study.yaml``: one RSU in the city
centre, first fit at 08:00, then 31 join/leave requests) and records the trace; every other
dataset replays that trace without SUMO, so all of them see the same requests. Per method it
reports cumulative simulated time (the sum of each request's makespan: transfers, GPU queue,
training, solve), communication by kind, accuracy, and the savings against Retrain beside the
paper's (time -36.66 to -53.84 %, communication -21.97 to -25.76 %). The paper's accounting
applied to our F-SOSA run is reported too (``fsosa, paper accounting``), so both savings can be
seen side by side: its communication re-collects the whole subset on every triggered request (the
paper's implementation), its time is computation time with each request waiting for its slowest
trained client (Appendix B-D), priced where clients train on board.

With ``--jobs N`` (N > 1) the datasets run side by side: one mobility-only pass steps SUMO exactly
as the co-simulation does and records the trace (``<runs>/<name>-trace-<stamp>/trace.jsonl``),
then every dataset, the first included, replays it in a pool of N spawned processes. The time
model's costs are pinned into every dataset's scenario (with any ``--jobs``), and the scenario
trains on one torch thread (``train.threads: 1``: two threads in one process changed per-request
accuracies by up to 1.6 points on MNIST and 3.9 on Fashion-MNIST, the float sums of training
differing), so no record depends on
``--jobs`` or on which process ran it; only the host-measured ``host_*`` columns differ. The
costs are the scenario's own (``compute.calibration``: ``scenarios/lust_case_study.yaml`` pins
those measured by ``vmc calibrate`` on an idle machine) for every dataset of the same image shape
and class count, and calibrated here, once per training setup, for any other dataset.

The traffic is recorded once per machine: the live pass keeps its trace in the trace cache
(``mobility.trace_cache``; ``--trace-cache DIR``, default ``$VMC_CACHE/traces`` or
``~/.cache/vmc-sim/traces``), keyed by the SUMO inputs' content, seed, window, RSU, coverage, SUMO
version and mobility code, and a later case study of the same traffic (another ``--epochs``, the
K-FAC scenario, a rerun) replays it instead of stepping SUMO, with identical records; the run's
manifest and summary say so. ``--no-trace-cache`` always runs SUMO. ``--trace FILE`` replays a
trace recorded elsewhere for every dataset (the committed ``reports/lust_case_study/trace.jsonl``
reproduces the case study without building LuST or running SUMO; the whole file is validated
before anything runs).

The vehicles' contributions go to a contribution cache (``--contribution-cache DIR``, default
``$VMC_CACHE/contributions`` or ``~/.cache/vmc-sim/contributions``, about 5 MB a vehicle): a rerun
loads them instead of training (bit-identical, the same simulated compute charged), and a run that
differs only in the Fisher or the upload (the K-FAC scenario after the diagonal one) computes each
vehicle's Fisher at its cached trained weights. The report says how many were loaded, computed at
cached weights and trained. ``--no-contribution-cache`` trains every vehicle.

    python tools/lust_case_study.py                    # LuST, mnist + fashion_mnist (long)
    python tools/lust_case_study.py --jobs 2           # the same, both datasets at once
    python tools/lust_case_study.py --quick            # embedded city, digits, 10 requests
    python tools/lust_case_study.py --jobs 2 --trace reports/lust_case_study/trace.jsonl   # no SUMO
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vmc_sim.scenario.schema import Scenario


from vmc_sim.reproduction import case_study_runs, report
from vmc_sim.reproduction.case_study import cache_lines, method_rows, per_request, setting, setting_text

ROOT = Path(__file__).resolve().parents[1]

SMOKE_ARGS = ""  # --quick already runs on the embedded city with digits (tests/test_reproductions.py)
PAPER: dict[str, Any] = {  # seed 000, Section VI-C (the case study's text) and Appendix Table VIII (MNIST's bytes)
    "time_saving_pct": (-53.84, -36.66),  # VI-C: "reduce cumulative time ... by 36.66%-53.84%"
    "comm_saving_pct": (-25.76, -21.97),  # VI-C: "... and communication overhead by ... 21.97%-25.76%"
    "fluctuation_pts": 3.96,  # VI-C: "F-SOSA-I/U keep variations within 3.96% across all datasets"
    "mnist_comm_MB": (329.61, 424.48),  # Appendix, Table VIII: F-SOSA-I/U vs Retrain over 31 requests
}


def scenario_for(args: argparse.Namespace, dataset: str, trace: Path | None):
    from vmc_sim.cosim import replay_mobility
    from vmc_sim.scenario.config import load_model
    from vmc_sim.scenario.schema import Scenario, load_scenario

    data = load_scenario(None if args.quick else args.scenario).model_dump(mode="json")
    fed = data["federated"]
    if data["compute"].get("calibration") and not same_work(fed["dataset"], dataset, fed.get("data_root")):
        # costs pinned for the scenario's dataset do not price another input shape or class count
        print(
            f"{dataset}: the costs pinned for {fed['dataset']} do not apply (another input shape or class "
            "count); calibrating here",
            flush=True,
        )
        data["compute"]["calibration"] = None
    fed["dataset"] = dataset
    fed["methods"] = ["fsosa", "retrain"]
    if args.quick:
        data["coordinator"]["max_requests"] = 11
        data["duration"] = 400.0
    if args.epochs:
        fed["train"]["epochs"] = args.epochs
    if getattr(args, "time_model", None):
        data["compute"]["time_model"] = args.time_model
    if trace is not None:
        data["mobility"] = replay_mobility(data, trace)
    elif getattr(args, "trace_cache", None) and not data["mobility"].get("trace_cache"):
        data["mobility"]["trace_cache"] = str(args.trace_cache)
    if getattr(args, "contribution_cache", None) and not data["compute"].get("contribution_cache"):
        data["compute"]["contribution_cache"] = str(args.contribution_cache)
    data["name"] = f"lust-case-study-{dataset}-quick" if args.quick else f"{data['name']}-{dataset}"
    return load_model(Scenario, None, data)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:+.2f} %"


def _acc(v: float | None, unit: str = " %") -> str:
    return "none (every model withdrawn)" if v is None else f"{v:.2f}{unit}"


def same_work(a: str, b: str, root: str | None) -> bool:
    """Whether datasets ``a`` and ``b`` cost the same per sample: the same image shape and number
    of classes (the model and its Fisher are then the same size)."""
    if a == b:
        return True
    from fl_core.data import load_train_test

    da, db = load_train_test(a, root=root)[0], load_train_test(b, root=root)[0]
    return da.input_shape == db.input_shape and da.num_classes == db.num_classes


def pin_costs(scenario: Scenario, done: dict[str, Any]) -> Scenario:
    """``scenario`` with the calibrated time model's costs pinned, measured here once per training
    setup (``done`` keeps them): a run in another process then charges exactly the same costs."""
    from vmc_sim.compute.calibration import calibrated, calibration_key
    from vmc_sim.cosim import pin_calibration

    if not scenario.compute.measures_costs:
        return scenario
    key = calibration_key(scenario.federated)
    if key not in done:
        done[key] = calibrated(scenario.federated, scenario.federated.setup(scenario.seed))
    return pin_calibration(scenario, done[key].as_dict())


def run_datasets(args: argparse.Namespace, datasets: list[str]) -> list[tuple[Path, Path]]:
    """Every dataset's run directory and plot, in ``datasets`` order. One job: the first dataset
    runs live and records the trace, the others replay it one after another. More: a
    mobility-only pass records the trace, then every dataset replays it, ``args.jobs`` at once."""
    costs: dict[str, Any] = {}
    if args.trace is not None:  # recorded traffic: every dataset replays it, no SUMO
        tasks = [
            pin_costs(scenario_for(args, d, args.trace.resolve()), costs).model_dump(mode="json") for d in datasets
        ]
        return run_pool(args, tasks)
    if args.jobs <= 1 or len(datasets) == 1:
        done: list[tuple[Path, Path]] = []
        trace = None
        for d in datasets:
            run, plot = case_study_runs.run_one(
                pin_costs(scenario_for(args, d, trace), costs).model_dump(mode="json"), args.runs
            )
            done.append((Path(run), Path(plot)))
            trace = trace or Path(run) / "trace.jsonl"
        return done
    from vmc_sim.rundir.directory import new_run_dir

    first = scenario_for(args, datasets[0], None)
    trace = new_run_dir(args.runs, f"{first.name}-trace") / "trace.jsonl"
    case_study_runs.record_trace(first, trace)
    tasks = [pin_costs(scenario_for(args, d, trace), costs).model_dump(mode="json") for d in datasets]
    return run_pool(args, tasks)


def run_pool(args: argparse.Namespace, tasks: list[dict[str, Any]]) -> list[tuple[Path, Path]]:
    """Run the datasets' scenarios (JSON dicts), ``args.jobs`` at once; run directories and plots in order."""
    return case_study_runs.run_pool(tasks, args.runs, args.jobs)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", default=str(ROOT / "scenarios" / "lust_case_study.yaml"))
    p.add_argument("--datasets", nargs="+", default=None, help="default: mnist fashion_mnist (quick: digits)")
    p.add_argument("--epochs", type=int, default=None, help="local epochs (default: the scenario's)")
    p.add_argument("--runs", default=None, help="where the run directories go (default: OUT/runs)")
    p.add_argument("--out", default=str(ROOT / "tools" / "out" / "lust_case_study"), help="the report's directory")
    p.add_argument(
        "--quick", action="store_true", help="a smoke test, not LuST: the embedded city, digits/mlp, 10 requests"
    )
    p.add_argument(
        "--time-model",
        choices=["profile", "calibrated", "measured", "device"],
        default=None,
        help="override compute.time_model (calibrated: the scenario's pinned host costs)",
    )
    p.add_argument("--from-runs", nargs="+", metavar="RUN", help="only write the report from finished run directories")
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="datasets run side by side in this many processes, after one mobility-only pass "
        "records the trace (default 1: one after another, the first live)",
    )
    p.add_argument(
        "--trace-cache",
        type=Path,
        default=None,
        help="trace cache directory (default: $VMC_CACHE/traces or ~/.cache/vmc-sim/traces): a run of "
        "traffic recorded before replays its trace instead of running SUMO, with identical records",
    )
    p.add_argument("--no-trace-cache", action="store_true", help="always run SUMO (record no trace in the cache)")
    p.add_argument(
        "--trace",
        type=Path,
        default=None,
        metavar="TRACE",
        help="replay this recorded trace for every dataset instead of running SUMO (no LuST build), e.g. "
        "the committed reports/lust_case_study/trace.jsonl; the records are those of the run that "
        "recorded it",
    )
    p.add_argument(
        "--contribution-cache",
        type=Path,
        default=None,
        help="contribution cache directory (default: $VMC_CACHE/contributions or "
        "~/.cache/vmc-sim/contributions): a vehicle trained before the same way is loaded, one trained "
        "with other Fisher or upload settings only gets its Fisher computed; identical records",
    )
    p.add_argument(
        "--no-contribution-cache", action="store_true", help="train every vehicle (use no contribution cache)"
    )
    args = p.parse_args(argv)
    if args.no_trace_cache:
        args.trace_cache = None
    elif args.trace_cache is None:
        from mobility.trace_cache import default_root

        args.trace_cache = default_root()
    if args.no_contribution_cache:
        args.contribution_cache = None
    elif args.contribution_cache is None:
        from fl_core.cache import default_root as contributions_root

        args.contribution_cache = contributions_root()
    if args.jobs < 1:
        p.error("--jobs must be at least 1")
    if args.trace is not None and args.from_runs:
        p.error("--trace replays traffic for new runs; --from-runs only reports finished ones")
    if args.trace is not None:
        from mobility.errors import TraceError
        from mobility.trace import read_trace

        try:  # the whole file, before anything runs
            read_trace(args.trace)
        except (OSError, TraceError) as e:
            p.error(f"--trace: {e}")
    datasets = args.datasets or (["digits"] if args.quick else ["mnist", "fashion_mnist"])
    from vmc_sim.rundir.directory import RunDir
    from vmc_sim.rundir.plots import plot_run
    from vmc_sim.rundir.summary import contribution_cache_text, dwell_job_lines

    out = report.out_dir(args.out)
    if args.runs is None:
        args.runs = str(out / "runs")
    if args.quick:
        print("--quick: a smoke test on the embedded city (digits, an MLP, 10 requests), not LuST", flush=True)
    summary, requests, traffic, caches = [], [], None, {}
    dwell: dict[str, list[str]] = {}
    if args.from_runs:
        finished = [RunDir(r) for r in args.from_runs]
        datasets = [r.manifest()["config"]["federated"]["dataset"] for r in finished]
        done = [
            (r.path, plot_run(r.path, out / f"fig6_{d}.png", force=True))
            for r, d in zip(finished, datasets, strict=True)
        ]
    else:
        done = run_datasets(args, datasets)
    for d, (path, plot) in zip(datasets, done, strict=True):
        run = RunDir(path)
        if traffic is None:
            traffic = setting(run)
            recorded = run.path / "trace.jsonl"  # a replay (--jobs > 1) names the trace it read
            shutil.copy(
                recorded if recorded.is_file() else run.manifest()["config"]["mobility"]["trace"], out / "trace.jsonl"
            )
        summary += method_rows(run, d)
        requests += per_request(run, d)
        if Path(plot).resolve() != (out / f"fig6_{d}.png").resolve():
            shutil.copy(plot, out / f"fig6_{d}.png")
        print(f"{d}: {run.path}", file=sys.stderr, flush=True)
        dwell[d] = dwell_job_lines(run.manifest().get("summary") or {})
        cache = (run.manifest().get("summary") or {}).get("contribution_cache")
        if cache:
            caches[d] = cache
            print(f"{d}: {contribution_cache_text(cache)}", flush=True)
    report.write_csv(out / "summary.csv", summary)
    report.write_csv(out / "requests.csv", requests)
    cols = [
        "dataset",
        "method",
        "requests",
        "triggered",
        "trained",
        "failed_transfers",
        "not_arrived",
        "take_outs",
        "withdrawn",
        "unconverged_solves",
        "max_latency_s",
        "total_MB",
        "comm_saving_pct",
        "sent_MB",
        "lost_MB",
        "sent_MB_saving_pct",
        "time_s",
        "time_saving_pct",
        "device_s",
        "wasted_device_s",
        "airtime_s",
        "failed_airtime_s",
        "handovers",
        "spent_s_saving_pct",
        "models",
        "final_acc",
        "mean_acc",
        "fluctuation_pts",
        "max_acc_gap_vs_retrain",
    ]
    replayed = (
        [
            f"Traffic replayed from `{args.trace}` (--trace: SUMO did not run; the requests are those of the "
            "run that recorded it)."
        ]
        if args.trace is not None
        else []
    )
    assert traffic is not None  # set by the first dataset's run
    body = [
        setting_text(traffic),
        *replayed,
        "",
        report.md_table(summary, cols),
        "",
        f"Paper (seed 000, Section VI-C, four datasets): cumulative time {PAPER['time_saving_pct'][0]} to "
        f"{PAPER['time_saving_pct'][1]} % vs Retrain; communication {PAPER['comm_saving_pct'][0]} to "
        f"{PAPER['comm_saving_pct'][1]} %; F-SOSA-I/U's accuracy varying within {PAPER['fluctuation_pts']} % over "
        f"the requests; MNIST {PAPER['mnist_comm_MB'][0]} vs {PAPER['mnist_comm_MB'][1]} MB (Appendix, Table VIII).",
        "",
    ]
    for d in datasets:
        f = next(r for r in summary if r["dataset"] == d and r["method"] == "fsosa")
        rt = next(r for r in summary if r["dataset"] == d and r["method"] == "retrain")
        pa = next((r for r in summary if r["dataset"] == d and r["method"] == "fsosa, paper accounting"), None)
        paper_acc = "no F-SOSA fit was released" if pa is None else f"{pa['comm_saving_pct']:+.2f} %"
        body.append(
            f"- {d}: F-SOSA communication {_pct(f['comm_saving_pct'])} vs Retrain (paper's accounting on the "
            f"same run: {paper_acc}; paper {PAPER['comm_saving_pct'][0]} to {PAPER['comm_saving_pct'][1]} %), "
            f"bytes on the air {_pct(f['sent_MB_saving_pct'])}, cumulative time {_pct(f['time_saving_pct'])} "
            f"(paper {PAPER['time_saving_pct'][0]} to {PAPER['time_saving_pct'][1]} %), device time + airtime "
            f"{_pct(f['spent_s_saving_pct'])}, final accuracy {_acc(f['final_acc'])} vs Retrain "
            f"{_acc(rt['final_acc'])}, fluctuation (own max - min over the requests) {_acc(f['fluctuation_pts'], ' points')} "
            f"(Retrain {_acc(rt['fluctuation_pts'], ' points')}; paper: F-SOSA-I/U within {PAPER['fluctuation_pts']}), "
            f"largest per-request gap to Retrain {_acc(f['max_acc_gap_vs_retrain'], ' points')}."
        )
        for r in (x for x in summary if x["dataset"] == d and x["time_s"] is not None and x["failed_transfers"]):
            body.append(
                f"  - **{r['method']}: {r['failed_transfers']} transfers or jobs failed** (the vehicle left "
                f"coverage first): {r['not_arrived']} contributions never arrived and were taken out in "
                f"{r['take_outs']} take-outs before the models were released, the model was withdrawn "
                f"{r['withdrawn']} time(s); {r['wasted_device_s']:.1f} device-seconds and "
                f"{r['lost_MB']:.2f} MB went to work that never arrived (requests waited up to "
                f"{r['max_latency_s']:.0f} s)."
            )
        body += [f"  - {line}" for line in dwell[d] if line]
        for r in (x for x in summary if x["dataset"] == d and x["unconverged_solves"]):
            body.append(
                f"  - **{r['method']}: {r['unconverged_solves']} solve(s) stopped before their tolerance** "
                f"(the run's summary names the requests and the residual reached)"
            )
    body += cache_lines(caches)
    body.append(
        f"\nWall-clock of the process from its start to this report: {report.process_wall_s():.0f} s. "
        "Per-request rows: `requests.csv`; "
        "Fig. 6-style plots: `fig6_<dataset>.png`; the recorded trace: `trace.jsonl`."
    )
    size = (
        "quick: a smoke test on the embedded city, not LuST (digits/mlp, 10 requests)"
        if args.quick
        else f"full (LuST, {', '.join(datasets)}, 31 requests"
        + (f", K = {args.epochs} local epochs)" if args.epochs else ")")
    )
    cmd = " ".join(["python tools/lust_case_study.py", *(sys.argv[1:] if argv is None else argv)])
    history = out / "history.md"
    if history.is_file():  # earlier runs kept beside the new one for comparison
        body += ["", history.read_text().rstrip()]
    title = (
        "Case study smoke test on the embedded city, not LuST (seed 000, VI-C's method)"
        if args.quick
        else "SUMO/LuST case study (seed 000, VI-C)"
    )
    text = report.write_markdown(out / "report.md", title, cmd, size, "\n".join(body))
    print(text.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
