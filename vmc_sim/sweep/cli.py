"""``vmc sweep``: the command line."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .execution import SweepResult


def _cli(args: argparse.Namespace) -> int:
    from .execution import resume_sweep, run_sweep  # here: `vmc --help` builds this parser without them
    from .replicates import replicate_runs
    from .spec import expand, inert_axes, load_sweep, point_label

    if args.resume:
        if args.sweep or args.dry_run:
            print("vmc sweep: --resume SWEEP_DIR takes no sweep file and no --dry-run", file=sys.stderr)
            return 2
        return _report(resume_sweep(args.resume, engine=args.engine, workers=args.workers, address=args.address))
    if not args.sweep:
        print("vmc sweep: give a sweep file (or --resume SWEEP_DIR)", file=sys.stderr)
        return 2
    spec, base_dir = load_sweep(args.sweep)
    if args.dry_run:
        points = expand(spec, base_dir, where=args.sweep)
        for note in inert_axes(spec, points):
            print(f"note: {note}")
        runs = replicate_runs(spec, points, where=args.sweep)
        seeds = spec.replicate_seeds()
        for p in points:
            print(f"{p.id}: {point_label(p.values)}")
        if seeds:
            fields = ", ".join(spec.replicate_fields())
            print(f"replicates: seeds {seeds} set {fields}; {len(runs)} runs")
        print(f"{len(points)} points, all valid")
        return 0
    result = run_sweep(
        spec,
        args.out,
        base_dir=base_dir,
        engine=args.engine,
        workers=args.workers,
        address=args.address,
        where=args.sweep,
    )
    return _report(result)


def _report(result: SweepResult) -> int:
    """The exit status of a sweep: 1, saying how many, if any run failed."""
    if result.failed:
        unit = "runs" if result.summary else "points"
        print(
            f"vmc: {len(result.failed)} of {len(result.points)} {unit} failed (see {result.path / 'sweep.json'})",
            file=sys.stderr,
        )
        return 1
    return 0


def add_sweep_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register ``vmc sweep SWEEP [--out] [--engine] [--workers] [--address] [--dry-run]`` and
    ``vmc sweep --resume SWEEP_DIR``."""
    p = subparsers.add_parser(
        "sweep",
        help="run a grid of scenarios (density, rho, radius, method, seed), each point once or once per "
        "replicate seed, locally or on Ray, then gather one table and one plot",
    )
    p.add_argument(
        "sweep",
        nargs="?",
        help="sweep YAML: name, base (scenario file or mapping), grid (field -> values), replicates (seeds)",
    )
    p.add_argument(
        "--resume",
        metavar="SWEEP_DIR",
        help="run the points of an interrupted sweep that did not complete (each completed one is verified "
        "and kept), with the spec its sweep.json recorded",
    )
    p.add_argument("--out", default="runs", help="where the sweep directory is created")
    p.add_argument("--engine", choices=("local", "ray"), help="local process pool or Ray (default: the file's, local)")
    p.add_argument("--workers", type=int, help="points run at once; Ray: CPUs of a local instance (default 2)")
    p.add_argument("--address", help="Ray cluster address to join instead of starting a local instance")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="validate every point and check its input files as a run would, list the points, run nothing",
    )
    p.set_defaults(func=_cli)
