"""The opening of a replicate directory's report: when, where, by which code and command its runs
were made, and what they cost the host (wall-clock, traffic passes, contributions trained or taken
from the cache); from ``provenance.json``, ``runs.json`` and ``runs.csv``."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ..case_study_replicates import CONTRIBUTION_COLUMNS
from .data import DATASET_ORDER, Bundle, _rank, num, order


def provenance_lines(prov: dict[str, Any], bundle: Bundle) -> list[str]:
    """The "Runs" list: each batch of runs, the notes, the code per entry and the wall-clock."""
    lines = []
    for b in prov.get("batches", []):
        parts = [f"**{b['what']}**", f"`{b['command']}`"]
        parts.append(f"code at commit {b['commit']}" if b.get("commit") else "the code's commit not recorded")
        parts += [b["dates"], b["machine"]]
        if b.get("wall_s") is not None:
            parts.append(f"{b['wall_s']:,.0f} s wall")
        if b.get("note"):
            parts.append(b["note"])
        lines.append("- " + "; ".join(parts) + ".")
    for note in prov.get("notes", []):
        lines.append(f"- {note}")
    made = [e for e in bundle.index if "run_s" in e]
    commits: dict[str, int] = {}
    for e in made:  # a directory's runs can span invocations, each from the code of its day
        if e.get("commit"):
            commits[e["commit"]] = commits.get(e["commit"], 0) + 1
    if commits:
        unknown_commit = sum(1 for e in made if not e.get("commit"))
        lines.append(
            "- The code of the runs (`runs.json`, entries per commit): "
            + ", ".join(f"{c} {n}" for c, n in commits.items())
            + (f"; {unknown_commit} entries made before the commit was recorded" if unknown_commit else "")
            + "."
        )
    own = {e["run"]: float(e["run_s"]) for e in made}
    if own:  # each run's own wall-clock (runs made side by side, traffic passes overlapping them)
        # a pass is counted where SUMO recorded it (once per traffic seed); a trace the cache held is a copy
        recorded = {(e["sumo_seed"], e["trace_s"]) for e in bundle.index if e.get("trace_recorded")}
        passes = sorted(float(t) for _, t in recorded)
        whole = {e["run"] for e in bundle.index if "run_s" in e and not e.get("resumed")}
        runs = sorted(r for run, r in own.items() if run in whole)
        cut = len(own) - len(whole)
        unknown = sum(1 for e in bundle.index if "run_s" in e and "trace_recorded" not in e)
        replayed = sum(1 for e in bundle.index if "run_s" in e and e.get("trace_recorded") is False)
        lines.append(
            f"- Wall-clock (`runs.json`): {len(runs)} runs made in one go, each "
            + (f"{_spread(runs)} s of its own" if runs else "none")
            + (f" ({cut} more continued after a stop, not counted)" if cut else "")
            + (f"; {len(passes)} SUMO passes of the traffic it replays, {_spread(passes)} s each" if passes else "")
            + (f"; {replayed} entries replayed a trace the cache held (no SUMO pass)" if replayed else "")
            + (
                f"; {unknown} entries do not record whether SUMO or the trace cache gave their traffic"
                if unknown
                else ""
            )
            + _made_from(bundle, [e for e in made if e["run"] in whole])
            + "."
        )
        return lines
    walls: dict[int, float] = {}
    for e in bundle.index:
        r = int(e["replicate"])
        walls[r] = max(walls.get(r, 0.0), float(e.get("trace_s") or 0.0) + float(e.get("finished_after_s") or 0.0))
    if walls:
        lines.append(
            "- Wall-clock per replicate (its SUMO pass and its runs, `runs.json`): "
            + ", ".join(f"r{r} {s:,.0f} s" for r, s in sorted(walls.items()))
            + "."
        )
    return lines


def _spread(values: Sequence[float]) -> str:
    """``median (min-max)`` of sorted ``values``, whole seconds."""
    mid = (
        values[len(values) // 2] if len(values) % 2 else 0.5 * (values[len(values) // 2 - 1] + values[len(values) // 2])
    )
    return f"median {mid:,.0f} ({values[0]:,.0f}-{values[-1]:,.0f})"


def _size(bundle: Bundle) -> str:
    by: dict[tuple[str, str, str], dict[str, set[int]]] = {}
    for r in bundle.replicates:
        s, d, f, arm, rep = bundle.key(r)
        by.setdefault((s, f, arm), {}).setdefault(d, set()).add(rep)
    parts = []
    for (s, f, arm), ds in sorted(by.items(), key=lambda kv: order(kv[0])):
        reps = sorted({len(v) for v in ds.values()})
        parts.append(
            f"{s} ({f} Fisher, arm {arm}): {', '.join(sorted(ds, key=lambda d: _rank(d, DATASET_ORDER)))}, "
            f"{'/'.join(map(str, reps))} replicate(s) each"
        )
    return "; ".join(parts)


def _made_from(bundle: Bundle, entries: list[dict[str, Any]]) -> str:
    """What the runs of ``entries`` cost beyond their own solves: the contributions they trained,
    against those the contribution cache gave them (``runs.csv``); their wall-clock reads so."""
    keyed = {bundle.key(r): r for r in bundle.runs}
    rows = [keyed.get(bundle.key(e)) for e in {e["run"]: e for e in entries}.values()]  # a shared run once
    counts = [[num(r.get(c)) for c in CONTRIBUTION_COLUMNS] if r else [None] * 3 for r in rows]
    if not counts or any(x is None for c in counts for x in c):
        return ""
    trained, fisher_only, cached = (int(sum(c[i] or 0 for c in counts)) for i in range(3))
    return (
        f"; those runs trained {trained:,} contributions, computed {fisher_only:,} at trained weights the "
        f"contribution cache held (the Fisher only) and took {cached:,} whole from it (`runs.csv`)"
    )


def header(prov: dict[str, Any], bundle: Bundle) -> str:
    """The lines every report of the project opens with, here from the runs' provenance (the
    latest batch with a known commit), not from the moment the report is written: the report is
    the same whenever it is regenerated."""
    batches = prov.get("batches", [])
    dated = [b for b in batches if b.get("commit")]
    if dated:
        last = dated[-1]
        day = re.match(r"\d{4}-\d{2}-\d{2}", str(last.get("dates", "")))
        made = f"{day.group(0) if day else last.get('dates')}, commit {last['commit']} (the runs, `provenance.json`)"
    else:
        made = "unknown (no batch in `provenance.json` names its commit)"
    machines = sorted({b["machine"] for b in batches if b.get("machine")})
    return (
        f"Made: {made}  \nCommand: `{prov['report_command']}` (this report, from the data files alone; a hand edit "
        f"fails `tests/test_case_study_report.py`; the runs' commands below)  \nSize: {_size(bundle)}  \n"
        f"Machine: {'; '.join(machines) or 'not recorded'} (the runs)"
    )
