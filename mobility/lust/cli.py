"""``vmc lust build`` / ``report`` / ``rsu`` / ``dwell`` (also ``python -m mobility lust ...``).

``build`` builds (or finds in the cache) the rebuilt network and the calibrated demand and prints
the network against LuST's, the bus lines placed, the run settings and how the calibration run
itself flowed. ``report`` replays the built scenario with its run settings and prints the same
figures for a window (07:00-09:00 by default; ``--day`` for a full day, which builds a full-day
demand), optionally sizing an RSU for the 08:00 peak (``--fit-rsu``; ``rsu`` refits from saved
positions without SUMO). They write what they print
under ``--out``. ``dwell`` prints how long vehicles stay in coverage in a recorded trace (a
run's ``trace.jsonl``, e.g. ``reports/lust_case_study/trace.jsonl``): the time a vehicle has to
finish its contribution. A scenario file (``--scenario``) supplies ``mobility.lust``, the SUMO seed,
backend and extra arguments, and ``mobility.density``; options given here override it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mobility.lust.config import PUBLISHED_NETWORK, LustConfig
from mobility.lust.report import DAY_WINDOW, hhmm

_CONFIG_FLAGS = {
    "osm": "osm_file",
    "source_dir": "source_dir",
    "begin": "begin",
    "end": "end",
    "warmup": "warmup",
    "peak": "peak_running",
    "trip_time": "trip_time",
    "calibration": "calibration",
    "lust_seed": "seed",
    "cache_dir": "cache_dir",
}


def _clock(text: str) -> float:
    """``HH:MM`` or seconds -> seconds of the day."""
    if ":" in text:
        h, m = text.split(":", 1)
        return int(h) * 3600.0 + int(m) * 60.0
    return float(text)


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scenario", help="scenario YAML whose mobility.lust / mobility.sumo / mobility.density to use")
    p.add_argument("--day", action="store_true", help="the whole day (00:00-24:00, no warm-up)")
    p.add_argument("--osm", help="LuST OSM file (default: ../shared/scenarios/lust or $VMC_LUST_DIR)")
    p.add_argument("--source-dir", help="folder with the LuST OSM, vtypes, bus lines and stops")
    p.add_argument("--begin", type=_clock, help="window start (HH:MM or s of day; default 07:00)")
    p.add_argument("--end", type=_clock, help="window end (default 09:00)")
    p.add_argument("--warmup", type=float, help="s of demand before the window (default 1800)")
    p.add_argument("--peak", type=float, help="running vehicles at 08:00 (default LuST's 4150)")
    p.add_argument("--trip-time", type=float, help="mean trip time the calibration aims at (default: the day's, 551 s)")
    p.add_argument("--calibration", choices=["closed_loop", "open_loop"])
    p.add_argument("--lust-seed", type=int, help="seed of the demand and the calibration run")
    p.add_argument("--seed", type=int, help="SUMO seed of the replay (default: the scenario's, else 42)")
    p.add_argument(
        "--sumo-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra SUMO argument on top of LuST's run settings (repeat: --sumo-arg=--time-to-teleport --sumo-arg=300)",
    )
    p.add_argument("--cache-dir", help="cache root (default $VMC_CACHE/sumo or ~/.cache/vmc-sim/sumo)")
    p.add_argument("--backend", default=None, choices=["libsumo", "traci"])
    p.add_argument("--out", default="runs/lust", help="where the report files go (default runs/lust)")


def _settings(a: argparse.Namespace) -> tuple[LustConfig, dict[str, Any]]:
    """The LustConfig and run options from ``--scenario`` and the flags."""
    lust: dict[str, Any] = {}
    run: dict[str, Any] = {"backend": "libsumo", "seed": 42, "extra_args": [], "time_to_teleport": None, "density": 1.0}
    if a.scenario:
        from mobility.yaml_text import load_yaml

        data = load_yaml(Path(a.scenario).read_text()) or {}
        m = data.get("mobility") or {}
        if m.get("source", "lust") != "lust":
            raise ValueError(f"{a.scenario}: mobility.source is {m.get('source')!r}, not 'lust'")
        lust.update(m.get("lust") or {})
        s = m.get("sumo") or {}
        run.update({k: s[k] for k in ("backend", "seed", "extra_args", "time_to_teleport") if k in s})
        run["density"] = float(m.get("density", 1.0))
    for flag, name in _CONFIG_FLAGS.items():
        v = getattr(a, flag, None)
        if v is not None:
            lust[name] = v
    if a.day:
        lust.update(begin=DAY_WINDOW[0], end=DAY_WINDOW[1], warmup=0.0)
    if a.backend:
        run["backend"] = a.backend
    if a.seed is not None:
        run["seed"] = a.seed
    run["extra_args"] = list(run["extra_args"]) + list(a.sumo_arg)
    known = {f.name for f in dataclasses.fields(LustConfig)}
    unknown = sorted(set(lust) - known)
    if unknown:
        raise ValueError(f"mobility.lust.{unknown[0]} is not a known field (known: {sorted(known)})")
    return LustConfig(**lust), run


def _build(cfg: LustConfig, run: dict[str, Any], force: bool = False):
    from mobility.lust.demand import build_lust

    return build_lust(
        cfg,
        force=force,
        backend=run["backend"],
        extra_args=run["extra_args"],
        time_to_teleport=run["time_to_teleport"],
        progress=lambda s: print(s, flush=True),
    )


def _ways(ways: list[str] | None) -> str:
    """How a lane patch's way filter reads in the build's summary."""
    return "every way" if ways is None else "ways " + ", ".join(ways)


def network_lines(net: dict[str, Any]) -> list[str]:
    pub = net.get("published") or PUBLISHED_NETWORK
    lines = [
        f"network: {net['nodes']:,} junctions, {net['edges']:,} edges, {net['length_km']} km, "
        f"{net.get('four_lane_edges', '?')} edges of 4+ lanes, {net.get('dead_ends', '?')} dead ends, "
        f"{net.get('traffic_lights', '?')} traffic lights",
        f"  LuST:    {pub['nodes']:,} junctions, {pub['edges']:,} edges, {pub['length_km']} km, "
        f"{pub.get('four_lane_edges', '?')} edges of 4+ lanes",
    ]
    if "lust_traffic_lights" in net:
        lines.append(
            f"  LuST's {net['lust_traffic_lights']} light ids found here: {net['lust_traffic_light_ids_found']}"
        )
    bays = net.get("turn_bays")
    if bays:
        lines.append(
            f"  left-turn bays: {bays['edges']} edges of {_ways(bays['ways'])} ({bays['bay_m']:,} m of bay, up to "
            f"{bays['length']:g} m each; {bays['too_short']} too short), patch {bays['file']} "
            f"sha256 {bays['sha256'][:12]}"
        )
    dual = net.get("dual_lefts")
    if dual:
        lines.append(
            f"  second left-turn lanes: {dual['approaches']} light approaches of {_ways(dual['ways'])}, "
            f"patch {dual['file']} sha256 {dual['sha256'][:12]}"
        )
    return lines


def bus_lines(b: dict[str, Any] | None) -> list[str]:
    if not b:
        return ["buses: not used (no LuST bus files beside the OSM, or lust.buses: false)"]
    out = [
        f"buses: {b['lines_placed']} of {b['lines']} lines placed ({b['routes_placed']} of {b['routes']} routes), "
        f"{b['stops_served']} of {b['stops']} stops served, {b['vehicles_placed']} of {b['vehicles_in_window']} "
        f"bus trips in the window"
    ]
    if b.get("refused"):
        out.append(f"  not placed: {b['refused']}")
    return out


def cmd_build(a: argparse.Namespace) -> int:
    from mobility.lust.report import LustReport

    cfg, run = _settings(a)
    t0 = time.perf_counter()
    files = _build(cfg, run, force=a.force)
    m = files.metadata
    demand = m.get("demand", {})
    print("\n".join(network_lines(m["network"])))
    print("\n".join(bus_lines(demand.get("buses"))))
    print("run settings: " + " ".join(m.get("run_settings", [])))
    print(
        f"demand: {demand.get('trips', 0):,} trips ({demand.get('calibration')}), free-flow trip time "
        f"{demand.get('free_flow_trip_time_s')} s, target trip time {demand.get('target_trip_time_s')} s; "
        f"built in {demand.get('build_s')} s"
    )
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    cl = demand.get("closed_loop")
    if cl and "report" in cl:
        rep = LustReport(**{k: v for k, v in cl["report"].items() if k in LustReport.__dataclass_fields__})
        print("calibration run (the build's own SUMO run, same settings):")
        print(rep.summary())
        rep.write(out, "build")
    (out / "build_manifest.json").write_text(
        json.dumps({k: v for k, v in m.items() if k != "demand"} | {"demand": _trim(demand)}, indent=2) + "\n"
    )
    print(f"scenario in {files.directory}; written to {out} ({time.perf_counter() - t0:.0f} s)")
    if getattr(a, "report", False):
        return cmd_report(a, files=files, cfg=cfg, run=run)
    return 0


def _trim(demand: dict[str, Any]) -> dict[str, Any]:
    d = dict(demand)
    if "closed_loop" in d:
        d["closed_loop"] = {k: v for k, v in d["closed_loop"].items() if k not in ("report", "aims")}
    return d


def cmd_report(
    a: argparse.Namespace, files=None, cfg: LustConfig | None = None, run: dict[str, Any] | None = None
) -> int:
    from mobility.lust.report import run_report

    if files is None:
        cfg, run = _settings(a)
        files = _build(cfg, run)
    assert cfg is not None and run is not None
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    begin = DAY_WINDOW[0] if a.day else cfg.begin
    end = DAY_WINDOW[1] if a.day else cfg.end
    positions: list[float] = []
    fit = getattr(a, "fit_rsu", False)
    if fit or a.region:
        at = _clock(a.rsu_at)
        positions = [at - 120 + i for i in range(0, 120 + int(a.rsu_horizon) + 1)]
    print(
        f"replaying {files.directory} {hhmm(files.begin)}-{hhmm(end) if end < 86400 else '24:00'} "
        f"(report window {hhmm(begin)}-{hhmm(end) if end < 86400 else '24:00'}, density {run['density']})",
        flush=True,
    )
    report, rec = run_report(
        files,
        begin=begin,
        end=end,
        backend=run["backend"],
        seed=run["seed"],
        density=run["density"],
        extra_args=run["extra_args"],
        positions_at=positions,
        log_dir=out if a.keep_log else None,
        progress=(
            lambda r: print(
                f"  {hhmm(r['time'])} running {r['running']} target {r['target']:.0f} speed {r['mean_speed']:.1f}",
                flush=True,
            )
        )
        if a.progress
        else None,
    )
    report.extra.update(
        network=files.metadata.get("network"),
        buses=files.metadata.get("demand", {}).get("buses"),
        build=str(files.directory),
    )
    print(report.summary())
    paths = report.write(out, "report")
    if fit or a.region:
        from mobility.lust.rsu_fit import save_positions

        if a.save_positions:
            save_positions(a.save_positions, rec.positions)
    if fit:
        _fit(a, str(files.net_file), rec.positions, cfg.cache_dir, out)
    if a.region:
        _region_dwell(a, str(files.net_file), rec.positions, out)
    print(f"written: {', '.join(str(p) for p in paths.values())}")
    return 0


def _fit(a: argparse.Namespace, net_file: str, positions: dict, cache_dir: str | None, out: Path) -> None:
    from mobility.lust.rsu_fit import fit_rsu

    best = fit_rsu(
        net_file, positions, at=_clock(a.rsu_at), target=a.rsu_target, cache_dir=cache_dir, horizon=a.rsu_horizon
    )
    (out / "rsu.json").write_text(json.dumps(best, indent=2) + "\n")
    print(
        f"RSU for {best['target']} clients at {hhmm(best['at'])} ({best['in_range']} junction/radius pairs with "
        f"10-15): junction {best['junction']} (x {best['x']}, y {best['y']}, centrality rank "
        f"{best['centrality_rank']}), radius {best['radius']:g} m: {best['count_at']} vehicles at "
        f"{hhmm(best['at'])} ({best['count_mean']} on average within 1 min); {best['requests_per_minute']} "
        f"join/leave requests per minute over the next {best['horizon_s'] / 60:.0f} min ({best['joins']} joins, "
        f"{best['leaves']} leaves)"
    )


def _region_dwell(a: argparse.Namespace, net_file: str, positions: dict, out: Path) -> None:
    """Print (and write ``dwell.json``) the dwell in the union of the ``--region`` junctions' cells."""
    from mobility.dwell import positions_dwell, summary_line
    from mobility.rsu import RsuConfig, place_rsus

    junctions = [j for j in a.region.split(",") if j]
    cells = place_rsus(
        RsuConfig(
            placement="explicit",
            radius=a.region_radius,
            positions=[{"id": f"rsu{k}", "junction": j} for k, j in enumerate(junctions)],
        ),
        net_file,
    )
    found = positions_dwell(positions, cells)
    found["region"] = [c.to_dict() for c in cells]
    (out / "dwell.json").write_text(json.dumps(found, indent=2) + "\n")
    print(
        f"dwell in the region of {len(cells)} RSU(s) of {a.region_radius:g} m over "
        f"{hhmm(found['window'][0])}-{hhmm(found['window'][1])}: {summary_line(found)}"
    )


def cmd_rsu(a: argparse.Namespace) -> int:
    """Fit the RSU from positions saved by ``report --fit-rsu --save-positions`` (no SUMO run)."""
    from mobility.lust.network import build_lust_network
    from mobility.lust.rsu_fit import load_positions

    cfg, _ = _settings(a)
    net_file, _ = build_lust_network(cfg)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    positions = load_positions(a.positions)
    if a.fit_rsu or not a.region:
        _fit(a, str(net_file), positions, cfg.cache_dir, out)
    if a.region:
        _region_dwell(a, str(net_file), positions, out)
    return 0


def cmd_dwell(a: argparse.Namespace) -> int:
    """Print the dwell in coverage of a recorded trace (or of the trace a scenario names)."""
    from mobility.dwell import dwell_command

    source = a.trace or a.scenario
    if not source:
        raise ValueError("vmc lust dwell needs a trace (or a run directory), or --scenario with mobility.trace")
    return dwell_command(source, as_json=a.json)


def add_dwell_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments of ``vmc lust dwell`` and ``vmc dwell``."""
    p.add_argument(
        "trace",
        nargs="?",
        help="a trace file (a run's trace.jsonl), a run directory or a scenario YAML with mobility.trace",
    )
    p.add_argument("--scenario", help="instead: a scenario YAML whose mobility.trace to read")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.set_defaults(func=cmd_dwell)


def add_lust_parser(subparsers: Any) -> argparse.ArgumentParser:
    """``vmc lust {build,report,rsu,dwell}`` on an argparse subparsers object."""
    p = subparsers.add_parser(
        "lust",
        help="build LuST and report how it flows against the published day",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="lust_command", required=True)
    b = sub.add_parser("build", help="build (or reuse) the rebuilt LuST and its calibrated demand; print its figures")
    _add_common(b)
    b.add_argument("--force", action="store_true", help="rebuild even if cached")
    b.add_argument("--report", action="store_true", help="then replay it and report (as `report`)")
    _add_report_flags(b)
    b.set_defaults(func=cmd_build)
    r = sub.add_parser("report", help="replay the built LuST with its run settings and report the window")
    _add_common(r)
    _add_report_flags(r)
    r.set_defaults(func=cmd_report)
    f = sub.add_parser("rsu", help="size the RSU from positions saved by `report --fit-rsu --save-positions`")
    f.add_argument("positions", help="the .npz written by --save-positions")
    _add_common(f)
    _add_report_flags(f)
    f.set_defaults(func=cmd_rsu)
    d = sub.add_parser(
        "dwell",
        help="how long vehicles stay in coverage in a recorded trace: visits, median, p10/p90, censored",
    )
    add_dwell_arguments(d)
    return p


def _add_report_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--fit-rsu", action="store_true", help="also choose an RSU with about --rsu-target vehicles at --rsu-at"
    )
    p.add_argument(
        "--region",
        help="comma-separated junction ids: print the dwell in coverage of their cells' union "
        "(with --region-radius) over the sampled window around --rsu-at",
    )
    p.add_argument("--region-radius", type=float, default=85.0, help="metres of each region cell (default 85)")
    p.add_argument("--rsu-at", default="08:00", help="time of the first fit (default 08:00)")
    p.add_argument("--rsu-target", type=int, default=12, help="vehicles in coverage wanted then (default 12)")
    p.add_argument("--rsu-horizon", type=float, default=600.0, help="s after --rsu-at over which requests are counted")
    p.add_argument(
        "--save-positions",
        metavar="NPZ",
        help="with --fit-rsu: also save the recorded positions (refit with `vmc lust rsu NPZ`)",
    )
    p.add_argument("--keep-log", action="store_true", help="keep SUMO's warning log in --out")
    p.add_argument("--progress", action="store_true", help="print every sample while replaying")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m mobility lust {build,report,rsu,dwell} [options]``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in ("build", "report", "rsu", "dwell", "-h", "--help"):
        args = ["build", *args]  # the old `python -m mobility lust [options]` builds
    p = argparse.ArgumentParser(prog="python -m mobility")
    add_lust_parser(p.add_subparsers(dest="command", required=True))
    a = p.parse_args(["lust", *args])
    return a.func(a)
