"""How many vehicles each region cut lets into SUMO, per window, from the cuts a
``tools/lust_region_cut.py --work WORK`` run built (``WORK/cache/region-*``: build.json and the
cut's routes). An exit-times cut enters each vehicle when it reached the cut in the whole city's
run, so its counts are what the whole city let through; a free-flow cut enters every vehicle of
the demand whose route crosses the cut at its free-flow time, so the difference is the traffic
the whole city's congestion held back upstream (or kept out of the window).

    python bench/cut_demand.py --work /tmp/region_cut                  # 06:30-08:30 and 07:30-08:30
    python bench/cut_demand.py --work /tmp/region_cut --windows 07:00-08:00
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

#: The case study's run window and its study window.
WINDOWS = ("06:30-08:30", "07:30-08:30")
DEPART = re.compile(rb'depart="([0-9.]+)"')


def window(text: str) -> tuple[str, float, float]:
    """``HH:MM-HH:MM`` as (label, begin s, end s) of the day."""
    try:
        a, b = (int(h) * 3600.0 + int(m) * 60.0 for h, m in (t.split(":") for t in text.split("-")))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a window is HH:MM-HH:MM") from None
    if b <= a:
        raise argparse.ArgumentTypeError(f"{text!r}: the window ends before it begins")
    return text, a, b


def build_counts(build: Path, windows: list[tuple[str, float, float]]) -> dict[str, Any]:
    """One cut: its variant, the box it was cut to, and how many vehicles depart in each window."""
    meta = json.loads((build / "build.json").read_text())
    params = meta["params"]
    departs = [float(m.group(1)) for m in DEPART.finditer((build / "region.rou.xml").read_bytes())]
    cut = params["cut"]
    name = f"{cut['timing']}-b{cut['buffer']:g}" + (
        f"-f{cut['speed_factor']:g}" if cut["timing"] == "free_flow" else ""
    )
    row: dict[str, Any] = {"variant": name, "box": tuple(round(b) for b in params["bounds"]), "edges": meta["edges"]}
    for label, begin, end in windows:
        row[label] = sum(begin <= t < end for t in departs)
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", type=Path, required=True, help="the --work of tools/lust_region_cut.py")
    p.add_argument("--windows", nargs="+", type=window, default=[window(w) for w in WINDOWS], help="HH:MM-HH:MM")
    args = p.parse_args(argv)
    builds = sorted(d for d in (args.work / "cache").glob("region-*") if (d / "build.json").is_file())
    if not builds:
        p.error(f"{args.work / 'cache'}: no region cut builds (run tools/lust_region_cut.py --work {args.work} first)")
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for b in builds:
        r = build_counts(b, args.windows)
        groups.setdefault((r["box"], r["edges"], r["variant"]), []).append(r)
    labels = [w[0] for w in args.windows]
    print("| cut box (m) | edges | variant | builds | " + " | ".join(f"vehicles entering {x}" for x in labels) + " |")
    print("|---|---|---|---|" + "---|" * len(labels))
    for (box, edges, variant), rows in sorted(groups.items()):
        spans = [f"{min(r[x] for r in rows):,}-{max(r[x] for r in rows):,}" for x in labels]
        print(f"| {box} | {edges} | {variant} | {len(rows)} | " + " | ".join(spans) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
