"""``vmc flower SCENARIO [--schedule SCHEDULE]``: F-SOSA (or a Flower strategy) on Flower, on the
co-simulation's radio: ``flwr run`` of the packaged app, Flower's deprecated in-process
``run_simulation``, or directly in this process."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..rundir.outputs import claim_dir

STRATEGY_NAMES = (
    "fedavg",
    "fedavgm",
    "fedprox",
    "fedadagrad",
    "fedadam",
    "fedyogi",
    "fedmedian",
    "fedtrimmedavg",
    "krum",
)
EXAMPLES = """\
examples:
  vmc flower scenarios/city.yaml --out flower_run
  vmc flower scenarios/city.yaml --out flower_run --schedule-only
  vmc flower scenarios/city.yaml --schedule runs/<run> --direct --out direct_run
  vmc flower scenarios/city.yaml --schedule sched.json --strategy fedavg --rounds 20 --round-s 30

Without --schedule the scenario's co-simulation runs once (OUT/cosim/, the method alone), and its
traffic and link outcomes become OUT/schedule.json: an upload vmc run lost is lost on Flower too.
A schedule exported from a run directory (vmc export availability RUN --format flower) carries
them as well; one exported from a trace alone has coverage only (every upload arrives).

The directory gets records.json (one record per request: kind, members, bytes by kind, the uploads
lost and the take-outs, and under Flower every message with its bytes) and models.safetensors (the
model released after each request, as model.<index>, the index of vmc run's record). With
--strategy other than fsosa, records.json holds one record per round (window, reachable, sampled,
dropouts, aggregated, bytes, accuracy) and models.safetensors the model after each round
(model.<round>, model.0 the initial one). Needs the [flower] extra unless --direct or
--schedule-only.
"""


def _schedule(args: argparse.Namespace, scenario: Any, out: Path) -> tuple[Any, Path]:
    """The schedule to replay and the JSON file holding it: ``--schedule``, or exported from the
    co-simulation run here (``OUT/cosim``)."""
    from .radio_run import radio_schedule, write_schedule
    from .replay import parse_schedule, schedule_document

    if args.schedule is None:
        print(f"vmc flower: no --schedule: running the co-simulation of {args.scenario} ({args.method}) once")
        doc, _ = radio_schedule(scenario, out, args.method)
        where = str(out / "schedule.json")
    else:
        doc, where = schedule_document(args.schedule), str(args.schedule)
    schedule = parse_schedule(doc, where)
    path = Path(args.schedule) if args.schedule is not None and str(args.schedule).endswith(".json") else None
    return schedule, (path if path is not None and path.is_file() else write_schedule(doc, out))


def flwr_command(app: Path, scenario: Path, schedule: Path, out: Path, nodes: int, extra: str = "") -> str:
    """The ``flwr run`` line that runs ``schedule`` with the packaged app (paths absolute)."""
    config = f'scenario="{scenario.resolve()}" schedule="{schedule.resolve()}" out="{out.resolve()}"{extra}'
    return (
        f"FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION=1 flwr run {app} --stream "
        f"--run-config '{config}' --federation-config num-supernodes={nodes}"
    )


def _command(args: argparse.Namespace) -> int:
    from ..scenario.schema import load_scenario

    scenario = load_scenario(args.scenario)
    if scenario.federated.shard_assignment.value != "hash":
        print(
            f"vmc flower: {args.scenario}: federated.shard_assignment: {scenario.federated.shard_assignment.value} "
            "is not supported on Flower (its nodes find their shard by hash); use shard_assignment: hash",
            file=sys.stderr,
        )
        return 2
    out = claim_dir(args.out, force=args.force)  # a new directory of its own: never a run's, never unasked over one
    schedule, schedule_path = _schedule(args, scenario, out)
    radio = "with the run's radio" if schedule.radio is not None else "coverage only: every upload arrives"
    print(f"schedule: {schedule_path} ({len(schedule.vehicles)} nodes, {radio})")
    if args.schedule_only:
        extra = "" if args.strategy == "fsosa" else f' strategy="{args.strategy}" rounds={args.rounds}'
        app_out = out / "app"
        print("run it with Flower's CLI:")
        print("  " + flwr_command(args.app, Path(args.scenario), schedule_path, app_out, len(schedule.vehicles), extra))
        return 0
    if args.strategy != "fsosa":
        return _strategy_command(args, scenario, schedule, schedule_path, out)
    if args.direct:
        from .replay import direct_run

        direct_run(scenario, schedule, out, args.method)
    elif args.runtime == "flwr-run":
        status = _flwr_run(args, schedule_path, out, len(schedule.vehicles), {"method": args.method})
        if status:
            return status
    else:
        try:
            from .apps import run_flower
        except ImportError as e:
            print(f"vmc flower: Flower is not installed ({e}); pip install 'vmc-sim[flower]'", file=sys.stderr)
            return 2
        run_flower(scenario, schedule, out, args.method, args.cpus_per_node)
    return _report(out, f"{len(schedule.vehicles)} nodes")


def _report(out: Path, what: str) -> int:
    """Say what the server wrote into ``out`` (1: nothing, or a failed run)."""
    records = out / "records.json"
    if not records.is_file():
        print(f"vmc flower: the server wrote no {records}", file=sys.stderr)
        return 1
    doc: dict[str, Any] = json.loads(records.read_text(encoding="utf-8"))
    if doc["status"] != "complete":
        print(f"vmc flower: {doc.get('error')}", file=sys.stderr)
        return 1
    rows = doc["records"]
    if doc.get("format") == "vmc-sim-flower-rounds":
        print(
            f"wrote {out}: {len(rows)} rounds of {doc['method']}, accuracy {rows[-1].get('accuracy') if rows else None}"
        )
    else:
        print(f"wrote {out}: {len(rows)} records, {what}, status {doc['status']}")
    return 0


def _flwr_run(args: argparse.Namespace, schedule: Path, out: Path, nodes: int, config: dict[str, Any]) -> int:
    """Run the packaged app with ``flwr run`` (a SuperLink started and stopped here) into ``out``."""
    from .flwr_run import run_app

    if not (args.app / "pyproject.toml").is_file():
        print(
            f"vmc flower: {args.app}: no Flower app (give --app, the examples/flower_app directory of a source "
            "checkout, or --runtime simulation)",
            file=sys.stderr,
        )
        return 2
    cpus = float(args.cpus_per_node)
    if not cpus.is_integer() or cpus < 1:
        print(
            f"vmc flower: --cpus-per-node {args.cpus_per_node}: flwr run reserves whole CPUs per node "
            "(give a whole number, or --runtime simulation)",
            file=sys.stderr,
        )
        return 2
    run_config = {
        "scenario": str(Path(args.scenario).resolve()),
        "schedule": str(schedule.resolve()),
        "out": str(out.resolve()),
        "force": True,  # out is this command's: it holds the schedule and the co-simulation
        **config,
    }
    done = run_app(run_config, nodes, out / "flwr_home", app=args.app, cpus_per_node=int(cpus))
    (out / "flwr_run.log").write_text(done.output, encoding="utf-8")
    if done.returncode != 0 or not (out / "records.json").is_file():
        print(
            f"vmc flower: flwr run exited {done.returncode} (its output: {out / 'flwr_run.log'}, the SuperLink's: "
            f"{out / 'flwr_home' / 'superlink.log'})",
            file=sys.stderr,
        )
        return 1
    return 0


def _strategy_command(args: argparse.Namespace, scenario: Any, schedule: Any, schedule_path: Path, out: Path) -> int:
    """``--strategy NAME``: Flower's own strategy in rounds on the schedule's simulated clock."""
    if args.direct:
        print("vmc flower: --direct replays F-SOSA only (--strategy fsosa)", file=sys.stderr)
        return 2
    if args.runtime == "flwr-run":
        config = {"strategy": args.strategy, "method": args.method, "rounds": args.rounds}
        config.update({"round-s": float(args.round_s or 0.0), "fraction": args.fraction})
        status = _flwr_run(args, schedule_path, out, len(schedule.vehicles), config)
        return status or _report(out, args.strategy)
    try:
        from .strategies import run_strategy
    except ImportError as e:
        print(f"vmc flower: Flower is not installed ({e}); pip install 'vmc-sim[flower]'", file=sys.stderr)
        return 2
    run_strategy(
        scenario,
        schedule,
        out,
        args.strategy,
        args.rounds,
        args.round_s,
        args.fraction,
        args.cpus_per_node,
        args.method,
    )
    return _report(out, args.strategy)


def add_flower_parser(sub: Any) -> None:
    """``vmc flower SCENARIO --schedule SCHEDULE [--out DIR] [--method M] [--direct]``."""
    p = sub.add_parser(
        "flower",
        help="replay an availability schedule with F-SOSA on Flower's Message API (one node per vehicle)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Replay a schedule's joins and leaves with F-SOSA: the server asks a vehicle's Flower node for "
        "its contribution (trained once from W0 on the shard vmc run gives it), a departure is removed exactly "
        "at the server; the released models and every message's bytes are recorded.",
        epilog=EXAMPLES,
    )
    p.add_argument("scenario", help="scenario YAML (its federated, seed and coordinator sections are used)")
    p.add_argument(
        "--schedule",
        default=None,
        help="a 'vmc export availability --format flower' JSON, or a run directory or trace to export it from "
        "(default: run the scenario's co-simulation once and export its traffic and link outcomes)",
    )
    p.add_argument(
        "--schedule-only",
        action="store_true",
        help="write OUT/schedule.json and print the 'flwr run' line that runs it, nothing more",
    )
    p.add_argument(
        "--runtime",
        choices=("flwr-run", "simulation"),
        default="flwr-run",
        help="flwr-run (default): 'flwr run' of the packaged app through a SuperLink started and stopped here; "
        "simulation: Flower's in-process run_simulation (deprecated by Flower 1.42, faster to start)",
    )
    p.add_argument(
        "--app",
        type=Path,
        default=None,
        help="the Flower app directory for --runtime flwr-run (default: examples/flower_app of this checkout)",
    )
    p.add_argument(
        "--out",
        default="flower_run",
        help="directory to write, created new (default: flower_run); never inside a run or sweep directory",
    )
    p.add_argument("--force", action="store_true", help="write into --out even if it exists and is not empty")
    p.add_argument(
        "--method",
        default="fsosa",
        choices=("fsosa", "fedfisher", "fedavg"),
        help="F-SOSA family method (with --strategy: whose radio outcomes give the nodes' link times)",
    )
    p.add_argument("--direct", action="store_true", help="train every client in this process instead (no Flower)")
    p.add_argument(
        "--strategy",
        default="fsosa",
        choices=("fsosa", *STRATEGY_NAMES),
        help="fsosa (default): replay joins and leaves with F-SOSA; else Flower's strategy in rounds, sampling "
        "the nodes in coverage at each round's start and discarding replies of nodes whose upload outlasts "
        "their coverage (on the run's link times) or the round",
    )
    p.add_argument("--rounds", type=int, default=10, help="rounds of a Flower strategy (default: 10)")
    p.add_argument(
        "--round-s",
        type=float,
        default=None,
        help="simulated seconds per round (default: the schedule's span / rounds)",
    )
    p.add_argument("--fraction", type=float, default=1.0, help="fraction of reachable nodes trained per round")
    p.add_argument("--cpus-per-node", type=float, default=1.0, help="CPUs the simulation reserves per running node")
    p.set_defaults(func=_with_app)


def _with_app(args: argparse.Namespace) -> int:
    """Fill ``--app``'s default (the checkout's app) and run the command."""
    if args.app is None:
        from .flwr_run import APP

        args.app = APP
    return _command(args)
