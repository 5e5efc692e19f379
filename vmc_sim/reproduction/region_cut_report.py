"""The report of a region cut checked against the whole city (reports/lust_region_cut/), generated
from its tables alone: ``coverage.csv`` (one row per region, variant and traffic seed: the
coverage figures over the study window and the wall-clock they took), ``figures.csv`` (the case
study's totals per method, replaying the whole city's and the cut's traces) and ``made.json`` (when,
from which commit, by which command, on which machine). ``tools/lust_region_cut.py`` writes them;
a test renders the committed report again from them and compares it byte for byte."""

from __future__ import annotations

import csv
import json
import math
import statistics
from pathlib import Path
from typing import Any

from mobility.region_check import CoverageFigures, compare

from ..sweep.stats import interval

TOLERANCE = 0.05
"""The largest relative difference a figure may show (the check's 5 %)."""
REGIONS = {
    "region": "the five-RSU region (scenarios/lust_region.yaml)",
    "single": "the case study's RSU (scenarios/lust_case_study.yaml)",
}


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _figures(row: dict[str, str], window: tuple[float, float]) -> CoverageFigures:
    def floats(text: str) -> tuple[float, ...]:
        return tuple(float(v) for v in text.split()) if text else ()

    return CoverageFigures(
        window[0],
        window[1],
        float(row["joins_per_min"]),
        float(row["leaves_per_min"]),
        floats(row["dwell"]),
        int(row["censored"]),
        floats(row["occupancy"]),
    )


def _pct(x: float) -> str:
    return "-" if not math.isfinite(x) else f"{100 * x:+.1f} %"


def _num(x: float, digits: int = 2) -> str:
    return "-" if not math.isfinite(x) else f"{x:.{digits}f}"


def _ci(values: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95 % t interval (NaN below two values)."""
    iv = interval(values)
    return iv.mean, iv.ci


def _clock(s: float) -> str:
    return f"{int(s // 3600):02d}:{int(s % 3600 // 60):02d}"


def variant_results(
    coverage: list[dict[str, str]], window: tuple[float, float]
) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (region, variant): the checks against the whole city over the seeds both sides have, and
    the wall-clock figures."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for region in dict.fromkeys(r["region"] for r in coverage):
        rows = [r for r in coverage if r["region"] == region]
        whole = {int(r["seed"]): r for r in rows if r["variant"] == "whole"}
        for variant in dict.fromkeys(r["variant"] for r in rows if r["variant"] != "whole"):
            cut = {int(r["seed"]): r for r in rows if r["variant"] == variant}
            seeds = sorted(set(whole) & set(cut))
            checks = compare(
                [_figures(whole[s], window) for s in seeds], [_figures(cut[s], window) for s in seeds], TOLERANCE
            )
            judged = [c for c in checks if c.passed is not None]
            out[(region, variant)] = {
                "seeds": seeds,
                "checks": checks,
                "passed": all(c.passed for c in judged),
                "failed": [c.figure for c in judged if not c.passed],
                "parts": sum(int(cut[s]["parts"]) for s in seeds),
                "whole_s": statistics.fmean(float(whole[s]["wall_s"]) for s in seeds),
                "cut_s": statistics.fmean(float(cut[s]["wall_s"]) for s in seeds),
                "build_s": statistics.fmean(float(cut[s]["build_s"]) for s in seeds),
            }
    return out


def _buffer(variant: str) -> float:
    return next(float(p[1:]) for p in variant.split("-")[1:] if p.startswith("b"))


def chosen(results: dict[tuple[str, str], dict[str, Any]], region: str) -> dict[str, str | None]:
    """Per timing, the variant with the smallest buffer that passes every check for ``region``."""
    out: dict[str, str | None] = {}
    for (reg, variant), r in sorted(results.items(), key=lambda kv: _buffer(kv[0][1])):
        if reg != region:
            continue
        timing = variant.split("-")[0]
        out.setdefault(timing, None)
        if r["passed"] and out[timing] is None:
            out[timing] = variant
    return out


def _coverage_section(
    region: str,
    results: dict[tuple[str, str], dict[str, Any]],
    coverage: list[dict[str, str]],
    window: tuple[float, float],
) -> list[str]:
    mine = {v: r for (reg, v), r in results.items() if reg == region}
    if not mine:
        return []
    first = next(iter(mine.values()))
    lines = [f"## {REGIONS.get(region, region)}", ""]
    lines.append(
        "Each figure is the mean over the traffic seeds a variant ran (dwell: of the visits pooled over them), the "
        "whole city's on the same seeds beside the cut's, and the cut's relative difference; a figure passes within "
        f"{100 * TOLERANCE:.0f} %. The whole city's row shows its figures over the first variant's seeds."
    )
    lines.append("")
    names = [c.figure for c in first["checks"]]
    head = ["variant", "seeds", *names, "passes", "split vehicles", "whole city s", "cut s (build + run)"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    whole_cells = [_num(c.whole, 3) if "KS" not in c.figure else "-" for c in first["checks"]]
    whole_n = max(len(r["seeds"]) for r in mine.values())
    lines.append(f"| whole city | {whole_n} | " + " | ".join(whole_cells) + f" | - | - | {first['whole_s']:.0f} | - |")
    for v, r in mine.items():
        cells = []
        for c in r["checks"]:
            if c.passed is None:
                cells.append(_num(c.cut, 3))
            else:
                cells.append(f"{_num(c.cut, 3)} ({_pct(c.relative)}{'' if c.passed else ' ✗'})")
        verdict = "yes" if r["passed"] else "no: " + ", ".join(r["failed"])
        lines.append(
            f"| {v} | {len(r['seeds'])} | " + " | ".join(cells) + f" | {verdict} | {r['parts']} | {r['whole_s']:.0f} | "
            f"{r['build_s']:.0f} + {r['cut_s']:.0f} |"
        )
    lines.append("")
    pick = chosen(results, region)
    for timing, picked in pick.items():
        if picked is None:
            lines.append(f"- {timing}: no buffer tried passes every figure.")
        else:
            r = mine[picked]
            lines.append(
                f"- {timing}: the smallest buffer that passes every figure is {_buffer(picked):g} m ({picked}); its cut steps in "
                f"{r['cut_s']:.0f} s what the whole city steps in {r['whole_s']:.0f} s "
                f"({r['whole_s'] / r['cut_s']:.1f}x), after {r['build_s']:.0f} s to build it once."
            )
    if all(v is None for v in pick.values()):
        lines.append(
            "- So no cut is used for this region: `mobility.region` stays a choice a scenario makes, and the whole "
            "city the default."
        )
    lines.append("")
    lines += _per_seed(region, coverage, window)
    lines.append("Paired differences per seed (cut - whole city) of the per-seed figures, mean and 95 % interval:")
    lines.append("")
    lines += ["| variant | figure | mean | 95 % interval | seeds with the cut higher |", "|---|---|---|---|---|"]
    for v, r in mine.items():
        for c in r["checks"]:
            if not c.paired:
                continue
            m, h = _ci(list(c.paired))
            up = sum(1 for d in c.paired if d > 0)
            lines.append(f"| {v} | {c.figure} | {_num(m, 3)} | ± {_num(h, 3)} | {up} of {len(c.paired)} |")
    lines.append("")
    return lines


def _per_seed(region: str, coverage: list[dict[str, str]], window: tuple[float, float]) -> list[str]:
    """Each seed's mean vehicles in coverage, the whole city's beside every cut's: whether a cut
    misses some seeds (congestion that forms in the whole city only) or all of them."""
    rows = [r for r in coverage if r["region"] == region]
    seeds = sorted({int(r["seed"]) for r in rows})
    lines = ["Per seed, vehicles in coverage (mean over the window):", ""]
    lines += ["| variant | " + " | ".join(f"seed {s}" for s in seeds) + " |", "|" + "---|" * (len(seeds) + 1)]
    for variant in dict.fromkeys(r["variant"] for r in rows):
        each = {int(r["seed"]): _figures(r, window).occupancy_mean for r in rows if r["variant"] == variant}
        name = "whole city" if variant == "whole" else variant
        lines.append(f"| {name} | " + " | ".join(_num(each.get(s, math.nan)) for s in seeds) + " |")
    lines.append("")
    return lines


FIGURES = (("requests", "requests", 0), ("sim_time_s", "simulated time (s)", 1), ("total_MB", "MB", 2))


def _figures_section(figures: list[dict[str, str]], variant: str | None, any_passed: bool) -> list[str]:
    if not figures:
        why = (
            "Not replayed: no cut passes the coverage checks above, so no cut's case-study figures are compared "
            "(`--figures VARIANT` replays one)."
            if not any_passed
            else "Not replayed yet (`--figures VARIANT`)."
        )
        return ["## The case study's figures", "", why, ""]
    lines = [
        "## The case study's figures",
        "",
        f"Each scenario as written replays the whole city's trace and the cut's ({variant}), seed by seed (run seed = "
        "traffic seed - 42, as the replicates): per method the mean over the seeds with its 95 % interval, and whether "
        "each side's mean lies inside the other's interval.",
        "",
        "| region | method | figure | whole city | cut | each inside the other's interval |",
        "|---|---|---|---|---|---|",
    ]
    for region in dict.fromkeys(r["region"] for r in figures):
        for method in dict.fromkeys(r["method"] for r in figures if r["region"] == region):
            rows = [r for r in figures if r["region"] == region and r["method"] == method]
            for key, label, digits in FIGURES:
                w = [float(r[key]) for r in rows if r["side"] == "whole"]
                c = [float(r[key]) for r in rows if r["side"] == "cut"]
                if not w or not c:
                    continue
                (mw, hw), (mc, hc) = _ci(w), _ci(c)
                inside = (abs(mw - mc) <= hc or (hc == 0 and mw == mc)) and (
                    abs(mc - mw) <= hw or (hw == 0 and mw == mc)
                )
                lines.append(
                    f"| {region} | {method} | {label} | {mw:.{digits}f} ± {_num(hw, digits)} | "
                    f"{mc:.{digits}f} ± {_num(hc, digits)} | {'yes' if inside else 'no'} |"
                )
    lines.append("")
    return lines


def render(directory: str | Path) -> str:
    """The report of ``directory`` from its tables (the module docstring)."""
    d = Path(directory)
    made = json.loads((d / "made.json").read_text())
    window = (float(made["window"][0]), float(made["window"][1]))
    coverage = _rows(d / "coverage.csv")
    figures = _rows(d / "figures.csv") if (d / "figures.csv").is_file() else []
    results = variant_results(coverage, window)
    lines = [
        "# A region cut of LuST against the whole city",
        "",
        f"Made: {made['made']}  ",
        f"Command: `{made['command']}`  ",
        f"Machine: {made['machine']}",
        "",
        f"The study window is {_clock(window[0])}-{_clock(window[1])}. A cut is named `<timing>-b<buffer m>[-f<speed "
        "factor>]` (mobility/region_cut.py): exit_times enters each vehicle when it reached the region in the whole "
        "city's run of the same seed; free_flow when it would at the speed limits times the factor. "
        '"Split vehicles" counts vehicles in coverage whose route left the cut and came back (a new vehicle to the '
        "co-simulation). Wall-clock seconds are the machine's above, with other work beside them.",
        "",
    ]
    for region in dict.fromkeys(r["region"] for r in coverage):
        lines += _coverage_section(region, results, coverage, window)
    lines += _figures_section(figures, made.get("figures_variant"), any(r["passed"] for r in results.values()))
    return "\n".join(lines).rstrip() + "\n"
