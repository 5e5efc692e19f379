"""``vmc flower SCENARIO --schedule SCHEDULE``: F-SOSA on Flower's simulation runtime, or directly."""

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
  vmc export availability runs/<run> --format flower --out sched.json
  vmc flower scenarios/city.yaml --schedule sched.json --out flower_run
  vmc flower scenarios/city.yaml --schedule runs/<run> --direct --out direct_run
  vmc flower scenarios/city.yaml --schedule sched.json --strategy fedavg --rounds 20 --round-s 30

The run directory gets records.json (one record per request: kind, members, bytes by kind, and
under Flower every message with its bytes) and models.safetensors (the model released after each
request, as model.<index>). With --strategy other than fsosa, records.json holds one record per
round (window, reachable, sampled, dropouts, aggregated, bytes, accuracy) and models.safetensors
the model after each round (model.<round>, model.0 the initial one). Needs the [flower] extra
unless --direct.
"""


def _command(args: argparse.Namespace) -> int:
    from ..scenario.schema import load_scenario
    from .replay import direct_run, read_schedule

    scenario = load_scenario(args.scenario)
    if scenario.federated.shard_assignment.value != "hash":
        print(
            f"vmc flower: {args.scenario}: federated.shard_assignment: {scenario.federated.shard_assignment.value} "
            "is not supported on Flower (its nodes find their shard by hash); use shard_assignment: hash",
            file=sys.stderr,
        )
        return 2
    schedule = read_schedule(args.schedule)
    out = claim_dir(args.out, force=args.force)  # a new directory of its own: never a run's, never unasked over one
    if args.strategy != "fsosa":
        return _strategy_command(args, scenario, schedule, out)
    if args.direct:
        direct_run(scenario, schedule, out, args.method)
    else:
        try:
            from .apps import run_flower
        except ImportError as e:
            print(f"vmc flower: Flower is not installed ({e}); pip install 'vmc-sim[flower]'", file=sys.stderr)
            return 2
        run_flower(scenario, schedule, out, args.method, args.cpus_per_node)
    records = out / "records.json"
    if not records.is_file():
        print(f"vmc flower: the server wrote no {records}", file=sys.stderr)
        return 1
    doc: dict[str, Any] = json.loads(records.read_text(encoding="utf-8"))
    print(f"wrote {out}: {len(doc['records'])} records, {len(schedule.vehicles)} nodes, status {doc['status']}")
    if doc["status"] != "complete":
        print(f"vmc flower: {doc.get('error')}", file=sys.stderr)
        return 1
    return 0


def _strategy_command(args: argparse.Namespace, scenario: Any, schedule: Any, out: Path) -> int:
    """``--strategy NAME``: Flower's own strategy in rounds on the schedule's simulated clock."""
    if args.direct:
        print("vmc flower: --direct replays F-SOSA only (--strategy fsosa)", file=sys.stderr)
        return 2
    try:
        from .strategies import run_strategy
    except ImportError as e:
        print(f"vmc flower: Flower is not installed ({e}); pip install 'vmc-sim[flower]'", file=sys.stderr)
        return 2
    run_strategy(scenario, schedule, out, args.strategy, args.rounds, args.round_s, args.fraction, args.cpus_per_node)
    records = out / "records.json"
    if not records.is_file():
        print(f"vmc flower: the server wrote no {records}", file=sys.stderr)
        return 1
    doc: dict[str, Any] = json.loads(records.read_text(encoding="utf-8"))
    if doc["status"] != "complete":
        print(f"vmc flower: {doc.get('error')}", file=sys.stderr)
        return 1
    last = doc["records"][-1] if doc["records"] else {}
    print(f"wrote {out}: {len(doc['records'])} rounds of {args.strategy}, accuracy {last.get('accuracy')}")
    return 0


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
        required=True,
        help="a 'vmc export availability --format flower' JSON, or a run directory or trace to export it from",
    )
    p.add_argument(
        "--out",
        default="flower_run",
        help="directory to write, created new (default: flower_run); never inside a run or sweep directory",
    )
    p.add_argument("--force", action="store_true", help="write into --out even if it exists and is not empty")
    p.add_argument("--method", default="fsosa", choices=("fsosa", "fedfisher", "fedavg"), help="F-SOSA family method")
    p.add_argument("--direct", action="store_true", help="train every client in this process instead (no Flower)")
    p.add_argument(
        "--strategy",
        default="fsosa",
        choices=("fsosa", *STRATEGY_NAMES),
        help="fsosa (default): replay joins and leaves with F-SOSA; else Flower's strategy in rounds, sampling "
        "the nodes in coverage at each round's start and discarding replies of nodes that leave inside it",
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
    p.set_defaults(func=_command)
