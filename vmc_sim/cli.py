"""The ``vmc`` command line."""

from __future__ import annotations

import argparse
import sys

from .config import ConfigError


def _oneshot(args: argparse.Namespace) -> int:
    from .config import OneShotConfig, load_model
    from .oneshot import run_oneshot

    config = load_model(OneShotConfig, args.config)
    run_oneshot(config, out=args.out)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vmc", description="vmc-sim: vehicular co-simulation for federated learning")
    sub = p.add_subparsers(dest="command", required=True)
    o = sub.add_parser("oneshot", help="fit methods on one client set and replay an editing sequence")
    o.add_argument("config", nargs="?", help="YAML file (default: the embedded digits example)")
    o.add_argument("--out", default="runs", help="where run directories are created")
    o.set_defaults(func=_oneshot)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as e:
        print(f"vmc: invalid configuration\n{e}", file=sys.stderr)
        return 2
    except (ValueError, KeyError, FileNotFoundError) as e:
        print(f"vmc: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
