"""The ``vmc`` command line."""

from __future__ import annotations

import argparse
import sys

from fl_core.errors import CorruptFileError
from mobility.errors import TraceError

from .rundir.outputs import OutputRefused, os_error_text
from .scenario.errors import ConfigError

INPUT_ERRORS = (FileNotFoundError, NotADirectoryError, CorruptFileError, TraceError)


def _print_config(model) -> int:
    """The fully resolved configuration as YAML (every key, documented defaults filled in)."""
    import yaml

    data = model.resolved() if hasattr(model, "resolved") else model.model_dump(mode="json")
    print(yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100), end="")
    return 0


def _oneshot(args: argparse.Namespace) -> int:
    from .oneshot import run_oneshot
    from .scenario.config import OneShotConfig, load_model

    config = load_model(OneShotConfig, args.config)
    if args.print_config:
        return _print_config(config)
    run_oneshot(
        config,
        out=args.out,
        say=lambda s: print(s, flush=True),
        progress=None if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True)),
    )
    return 0


def _run(args: argparse.Namespace) -> int:
    from .cosim import run_scenario
    from .scenario.schema import load_scenario

    if args.resume:
        from pathlib import Path

        from .cosim import manifest_scenario

        scenario = manifest_scenario(Path(args.resume) / "manifest.json")
        if args.out is not None:
            raise ConfigError(f"--out {args.out}: a resume writes into its run directory {args.resume}; drop --out")
        if args.scenario is not None:
            _same_scenario(load_scenario(args.scenario), scenario, args.scenario, args.resume)
        if args.print_config:
            return _print_config(scenario)
        run_scenario(scenario, progress=not args.quiet, run_dir=Path(args.resume), resume=True)
        return 0
    scenario = load_scenario(args.scenario)
    if args.print_config:
        return _print_config(scenario)
    run_scenario(scenario, out=args.out or "runs", progress=not args.quiet)
    return 0


def _same_scenario(given, recorded, path: str, run: str) -> None:
    """Refuse a scenario given with ``--resume`` unless it is the one the run recorded (a resume
    continues the run as it began; another scenario is another run)."""
    a, b = _flat(given.resolved()), _flat(recorded.resolved())
    differ = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    if differ:
        shown = ", ".join(f"{k} ({a.get(k)!r} against {b.get(k)!r})" for k in differ[:4])
        more = f" and {len(differ) - 4} more" if len(differ) > 4 else ""
        raise ConfigError(
            f"{path} is not the scenario of the run {run}: {shown}{more}; a resume continues the run as "
            "it began (drop the scenario, or run it as a new run without --resume)"
        )


def _flat(d: dict, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _replay(args: argparse.Namespace) -> int:
    from .cosim import replay_scenario, run_scenario

    scenario = replay_scenario(args.trace, args.scenario)
    run_scenario(scenario, out=args.out, progress=not args.quiet)
    return 0


def _status(args: argparse.Namespace) -> int:
    """Print whether a run directory is being written, how it ended, and how many records it holds."""
    from .rundir.directory import RunDir, describe_status, read_manifest

    run = RunDir(args.run, create=False)
    path = run.path
    manifest = read_manifest(path / "manifest.json")
    torn = run.torn_tail()
    print(f"{path}: {describe_status(path, manifest.get('status'))}")
    print(f"records: {run.record_count()}" + (f" (and {torn} bytes of an incomplete last line)" if torn else ""))
    if manifest.get("hint"):
        print(manifest["hint"])
    return 0


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {value}")
    return value


def _calibrate(args: argparse.Namespace) -> int:
    import torch
    import yaml

    from .compute.calibration import busy_host, recalibrate
    from .scenario.schema import TimeModelKind, load_scenario

    scenario = load_scenario(args.scenario)
    if scenario.compute.time_model is not TimeModelKind.CALIBRATED:
        print(
            f"vmc: compute.time_model is {scenario.compute.time_model.value!r}; only the calibrated time model has "
            "costs to measure",
            file=sys.stderr,
        )
        return 2
    cal, saved = recalibrate(scenario, args.repeats, save_busy=args.force)
    print(
        f"# {scenario.name}: {scenario.federated.dataset}, {scenario.federated.model}, "
        f"{cal.samples} samples x {cal.repeats} repeats, {cal.seconds:.0f} s, {torch.get_num_threads()} thread(s), "
        f"measured {cal.measured_at}"
        + ("" if cal.load is None else f", load average {cal.load[0]} -> {cal.load[1]}")
        + ("" if cal.others is None else f", other processes {cal.others} core(s)")
    )
    warning = busy_host(cal, torch.get_num_threads())
    if warning:
        kept = (
            "saved to the machine's cache anyway (--force)"
            if saved
            else "NOT saved to the machine's cache (--force saves them)"
        )
        print(f"# WARNING: {warning}; {kept}")
        print(f"vmc calibrate: {warning}; {kept}", file=sys.stderr)
    print("# pin these in the scenario to make simulated times the same on any machine:")
    print(yaml.safe_dump({"compute": {"calibration": cal.costs()}}, sort_keys=False), end="")
    return 0


def _plot(args: argparse.Namespace) -> int:
    if args.map or args.animate or args.method:
        from .rundir.maps import plot_map

        print(plot_map(args.run, args.out, args.force, method=args.method, animate=args.animate))
        return 0
    from .rundir.plots import plot_run

    print(plot_run(args.run, args.out, args.force))
    return 0


SCENARIO_HELP = """\
scenario reference:
  scenarios/REFERENCE.md: every section (mobility, federated, coordinator, channel, compute) and
  key, with its default and meaning; docs/scenarios.md (how a file is read, your own SUMO
  network) and docs/cosimulation.md (what a run means). A scenario file is laid over the
  documented defaults, mapping by mapping: a partial section keeps the section's other defaults.
  --print-config shows the resolved scenario.
  Commented examples: scenarios/city.yaml (the embedded default written out) and
  scenarios/own_network.yaml (your own SUMO network: net + route files, or a .sumocfg).
  An unknown key is refused with the keys its section takes.

examples:
  vmc run                                   the embedded city, digits, F-SOSA vs Retrain
  vmc run scenarios/own_network.yaml        a network of your own
  vmc run my.yaml --print-config            the resolved scenario, nothing run
  vmc run --resume runs/<run>               continue a run whose SUMO died
"""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vmc", description="vmc-sim: vehicular co-simulation for federated learning")
    sub = p.add_subparsers(dest="command", required=True)
    o = sub.add_parser("oneshot", help="fit methods on one client set and replay an editing sequence")
    o.add_argument("config", nargs="?", help="YAML file (default: the embedded digits example)")
    o.add_argument("--out", default="runs", help="where run directories are created")
    o.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    o.add_argument("--print-config", action="store_true", help="print the fully resolved configuration and run nothing")
    o.set_defaults(func=_oneshot)
    r = sub.add_parser(
        "run",
        help="run a co-simulation scenario (default: the embedded city)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run a co-simulation scenario: SUMO traffic drives join/leave requests, every method in "
        "federated.methods replays them, and a run directory records every request.",
        epilog=SCENARIO_HELP,
    )
    r.add_argument("scenario", nargs="?", help="scenario YAML (default: embedded city, digits, F-SOSA vs Retrain)")
    r.add_argument("--out", default=None, help="where run directories are created (default: runs)")
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    r.add_argument("--resume", metavar="RUN", help="continue a failed run directory from its last record")
    r.add_argument(
        "--print-config",
        action="store_true",
        help="print the fully resolved scenario (every key, defaults filled in) as YAML and run nothing",
    )
    r.set_defaults(func=_run)
    p_replay = sub.add_parser("replay", help="rerun a recorded trace without SUMO")
    p_replay.add_argument("trace", help="a trace file (trace.jsonl of a run directory)")
    p_replay.add_argument("--scenario", help="scenario YAML (default: the manifest beside the trace)")
    p_replay.add_argument("--out", default="runs")
    p_replay.add_argument("--quiet", action="store_true")
    p_replay.set_defaults(func=_replay)
    p_status = sub.add_parser("status", help="whether a run directory is being written, how it ended, its records")
    p_status.add_argument("run", help="a run directory")
    p_status.set_defaults(func=_status)
    p_cal = sub.add_parser(
        "calibrate",
        help="measure the calibrated time model's costs on this machine and print them to pin",
        description="Measure the costs per unit of work (training, Fisher pass, solve) of a scenario's federated "
        "setup on this machine, replace the machine's cached entry, and print the compute.calibration "
        "block that pins them in the scenario. Measure on an otherwise idle machine: the load average "
        "before and after is printed, with a warning when other work competed.",
    )
    p_cal.add_argument("scenario", help="scenario YAML")
    p_cal.add_argument(
        "--repeats", type=_positive_int, default=5, help="timed repeats after the warm-up (the median is kept)"
    )
    p_cal.add_argument(
        "--force",
        action="store_true",
        help="save the costs to the machine's cache even when other work competed while measuring",
    )
    p_cal.set_defaults(func=_calibrate)
    p_plot = sub.add_parser(
        "plot",
        help="plot a run directory (accuracy, cumulative time and bytes), or --map: where its clients drove",
    )
    p_plot.add_argument("run", help="run directory")
    p_plot.add_argument(
        "--out", help="output file (default: RUN/fig6.png, RUN/map.png or RUN/map.gif, written under the run's lock)"
    )
    p_plot.add_argument("--force", action="store_true", help="replace --out if it exists")
    p_plot.add_argument(
        "--map",
        action="store_true",
        help="a map instead: the network, the RSUs, their coverage and the median link's reach per link state, "
        "and each client's track coloured by what became of its contributions (one panel per method)",
    )
    p_plot.add_argument("--method", help="--map: draw this method's panel only")
    p_plot.add_argument("--animate", action="store_true", help="--map over simulated time, as a GIF (needs pillow)")
    p_plot.set_defaults(func=_plot)
    from mobility.lust.cli import add_dwell_arguments

    add_dwell_arguments(
        sub.add_parser(
            "dwell",
            help="how long vehicles stay in coverage in a trace, run directory or scenario's trace",
            description="Dwell times in coverage (join to leave, every visit; visits still open at the end are "
            "censored and counted apart): count, median, p10, p90, mean, per RSU cell where recorded.",
        )
    )
    from .sweep.cli import add_sweep_parser

    add_sweep_parser(sub)
    from .rundir.audit_cli import add_audit_parser

    add_audit_parser(sub)
    from .rundir.certify_cli import add_certify_parser

    add_certify_parser(sub)
    from .rundir.export import add_export_parser

    add_export_parser(sub)
    from .flower.cli import add_flower_parser

    add_flower_parser(sub)
    from mobility.lust.cli import add_lust_parser

    add_lust_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as e:
        print(f"vmc: invalid configuration\n{e}", file=sys.stderr)
        return 2
    except (*INPUT_ERRORS, OutputRefused) as e:  # a file given or read back is missing or damaged; a write refused
        print(f"vmc: {_words(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:  # the run or sweep directory already says 'interrupted' and how to resume
        print(f"vmc: {str(e) or 'interrupted'}", file=sys.stderr)
        return 130
    except Exception as e:  # every failure ends with one clear line; records are already on disk
        print(f"vmc: {_words(e)}", file=sys.stderr)
        return 1


def _words(e: BaseException) -> str:
    """An error's message; an OS error's raw ``[Errno N] ...`` in plain words naming the path."""
    if isinstance(e, OSError) and e.errno is not None and str(e).startswith("[Errno"):
        return os_error_text(e)
    return str(e)


if __name__ == "__main__":
    raise SystemExit(main())
