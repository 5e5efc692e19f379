"""``python -m mobility lust [...]``: build and check the LuST scenario; ``python -m mobility city``: build the city."""

from __future__ import annotations

import json
import sys


def _city(argv: list[str]) -> int:
    import argparse

    from mobility.city import CityConfig, build_city

    p = argparse.ArgumentParser(prog="python -m mobility city", description="build (or reuse) the embedded city")
    p.add_argument("--seed", type=int, default=CityConfig.seed)
    p.add_argument("--demand-scale", type=float, default=CityConfig.demand_scale)
    a = p.parse_args(argv)
    files = build_city(CityConfig(seed=a.seed, demand_scale=a.demand_scale))
    print(
        json.dumps(
            {"dir": str(files.directory), "network": files.metadata["network"], "demand": files.metadata["demand"]},
            indent=2,
        )
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    """Dispatch to the ``lust`` or ``city`` builder."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in ("lust", "city"):
        print("usage: python -m mobility {lust,city} [options]  (--help after the command for its options)")
        return 2
    if args[0] == "lust":
        from mobility.lust import main as lust_main

        return lust_main(args[1:])
    return _city(args[1:])


if __name__ == "__main__":
    raise SystemExit(main())
