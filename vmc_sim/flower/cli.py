"""``vmc flower SCENARIO --schedule SCHEDULE``: F-SOSA on Flower's simulation runtime, or directly."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

EXAMPLES = """\
examples:
  vmc export availability runs/<run> --format flower --out sched.json
  vmc flower scenarios/city.yaml --schedule sched.json --out flower_run
  vmc flower scenarios/city.yaml --schedule runs/<run> --direct --out direct_run

The run directory gets records.json (one record per request: kind, members, bytes by kind, and
under Flower every message with its bytes) and models.safetensors (the model released after each
request, as model.<index>). Needs the [flower] extra unless --direct.
"""


def _command(args: argparse.Namespace) -> int:
    from ..scenario import load_scenario
    from .replay import direct_run, read_schedule

    scenario = load_scenario(args.scenario)
    schedule = read_schedule(args.schedule)
    out = Path(args.out)
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
    p.add_argument("--out", default="flower_run", help="run directory to write (default: flower_run)")
    p.add_argument("--method", default="fsosa", choices=("fsosa", "fedfisher", "fedavg"), help="F-SOSA family method")
    p.add_argument("--direct", action="store_true", help="train every client in this process instead (no Flower)")
    p.add_argument("--cpus-per-node", type=float, default=1.0, help="CPUs the simulation reserves per running node")
    p.set_defaults(func=_command)
