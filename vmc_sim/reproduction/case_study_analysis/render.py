"""The report's files from a replicate directory's data, byte for byte the same each time."""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ...sweep.stats import interval
from .. import report
from .claims import CLAIMS, _groups, _yn, claims, paired_rows, pin_verdict, pins, traffic_rows
from .data import (
    COMM,
    COMM_RANGE,
    PAIRINGS,
    RATIO_RANGE,
    TIME,
    TIME_RANGE,
    Bundle,
    accounting_rows,
    load,
    num,
    order,
)
from .fisher_cost import cost_section
from .physics import physics_section, runs_section
from .provenance import header, provenance_lines
from .stats import each, finite, mean_ci, range_test

# -- the report --------------------------------------------------------------------------------

PAPER_CLAIMS_TOP = ("C-COMM", "C-TIME", "C-FLUCT", "C-STEADIER", "C-ACC")

#: What a directory without runs of the paper setting (the physics setting alone) says in place
#: of the sections that read the paper setting's runs: an empty table would read as a result.
NO_PAPER = (
    "No runs of the paper setting here: the seed's claims are tested on that setting alone (PLAN.md, "
    "'Claims and their tests'), so this directory tests none of them. Its runs are described under 'Physics setting'."
)
NO_PAPER_PIN = "Nothing to measure here: the criteria read the paper setting's runs, and there are none."
NO_CLAIMS = (
    "No claim of PLAN.md is tested on these runs: the physics setting is described, not tested (PLAN.md, 'Runs')."
)


def _table(rows: Sequence[dict[str, Any]], columns: Sequence[str], headers: Sequence[str] | None = None) -> str:
    return report.md_table(rows, columns, headers)


def accounting_table(bundles: Sequence[Bundle]) -> list[dict[str, Any]]:
    """Every pairing of accountings, every setting, dataset and Fisher of ``bundles``: the time and
    communication saving with every replicate's value, the replicates inside the seed's ranges."""
    out = []
    rows = [r for b in bundles for r in accounting_rows(b)]
    for key, rs in _groups(rows, ["setting", "dataset", "fisher", "arm"]).items():
        setting, dataset, fisher, arm = key
        for c, t in PAIRINGS:
            tv, cv = [r[f"{t}_saving_pct"] for r in rs], [r[f"{c}_saving_pct"] for r in rs]
            if not finite(tv) and not finite(cv):
                continue
            kt, nt, _ = range_test(tv, *TIME_RANGE)
            kc, nc, _ = range_test(cv, *COMM_RANGE)
            out.append(
                {
                    "setting": setting,
                    "dataset": dataset,
                    "fisher": fisher,
                    "arm": arm,
                    "accounting": f"{c}+{t}",
                    "time": mean_ci(tv) if finite(tv) else "not priced" if t == "T3" else "-",
                    "time, per replicate": each(tv),
                    "time in range": f"{kt} of {nt}" if nt else "-",
                    "communication": mean_ci(cv),
                    "communication, per replicate": each(cv),
                    "communication in range": f"{kc} of {nc}" if nc else "-",
                    "ratio, per replicate": each([r[f"{c}+{t}_ratio"] for r in rs]),
                }
            )
    return out


def render(path: str | Path) -> dict[str, str]:
    """The report's files of the replicate directory ``path`` (name -> text): report.md,
    summary.csv, accounting.csv, claims.csv; from its data files and those of the directories
    its provenance.json puts beside it."""
    from ..case_study_replicates import summarize

    bundle = load(path)
    prov = bundle.provenance
    named = list(prov.get("beside", []))
    present = [p for p in named if (bundle.path / p / "provenance.json").is_file()]
    beside = [load((bundle.path / p).resolve()) for p in present]
    absent = [p for p in named if p not in present]  # named beside, no data yet: said, not silently left out
    acc = accounting_rows(bundle)
    pooled = acc + [r for b in beside for r in accounting_rows(b)]  # the pin is the seed's, not one Fisher's
    found = claims(bundle, beside)
    pinned, pin_text, complete = pin_verdict(pins(pooled))
    has_paper = any(r.get("setting") == "paper" for r in pooled)  # the seed's claims and the pin read these
    rows_in = [
        {**r, **{k: num(v) for k, v in r.items() if k not in ("setting", "dataset", "method", "run", "arm", "fisher")}}
        for r in bundle.replicates
    ]
    summary = summarize(rows_in)
    files = {
        "summary.csv": _csv(summary),
        "accounting.csv": _csv(acc),
        "claims.csv": _csv([c.row() for c in found]),
    }
    if pinned:
        c, t = pinned.split("+")
        how = (
            "provisionally pinned (a criterion awaits the runs)"
            if not complete
            else "provisionally pinned (the directory beside it awaits its runs)"
            if absent
            else "pinned"
        )
        headline = f"{pinned} ({COMM[c]}, {TIME[t]}), {how} as 'Which accounting the seed pins' measures"
    elif not has_paper:
        headline = "none (no runs of the paper setting to pin it on)"
    else:
        headline = "none pinned ('Which accounting the seed pins')"
    top, arm_note = headline_rows([c.row() for c in found if c.claim in PAPER_CLAIMS_TOP])
    arm_col = ["arm"] if len({r.get("arm") for r in top}) > 1 else []  # arms side by side: say which row is which
    body: list[str] = [
        "Runs (`provenance.json`, `runs.json`):",
        "",
        *provenance_lines(prov, bundle),
        "",
        (
            (
                f"Analysis: [PLAN.md]({prov['plan']})"
                if prov.get("plan")
                else "Analysis: `reports/lust_case_study/PLAN.md`"
            )
            + f" fixes the accountings, the claims and their tests. {prov.get('plan_status', '')}"
        ).rstrip(),
        "",
        "## Paper | ours | replicates that agree",
        "",
        *(
            [
                f"Paper setting; accounting {headline}.{arm_note}",
                "",
                _table(
                    top,
                    ["claim", "dataset", "fisher", *arm_col, "paper", "ours", "per_replicate", "agree", "verdict"],
                    ["claim", "dataset", "fisher", *arm_col, "paper", "ours", "per replicate", "agree", "verdict"],
                ),
                "",
                "Claims: "
                + "; ".join(f"{k} {v}" for k, v in CLAIMS.items())
                + ". Ours: mean ± 95 % Student-t half-width (n).",
            ]
            if has_paper
            else [NO_PAPER]
        ),
        "",
        "## Which accounting the seed pins",
        "",
        "Criteria (PLAN.md, 'Pinning'), on the paper setting's runs of this directory and of those beside it "
        "(both Fishers): (a) F-SOSA's bytes on every request are 0 or "
        "Retrain's (Tables VIII-XII); (b) untriggered requests make all of the communication saving and not all of "
        "the time saving (Appendix B-D: 100 % and 78.31 %); (c) time saving over communication saving within "
        f"{RATIO_RANGE[0]:.2f}-{RATIO_RANGE[1]:.2f} (VI-C: 36.66/25.76 to 53.84/21.97) in at least half the replicates "
        "of every dataset and Fisher (a group of one replicate is not counted)."
        + (
            " Named beside it but without data yet (awaiting its runs, so left out here and below): "
            + ", ".join(f"`{p}`" for p in absent)
            + "."
            if absent
            else ""
        ),
        "",
        *(
            [
                _table(
                    [
                        {
                            "pairing": p.pairing,
                            "(a)": _yn(p.per_request_bytes),
                            "(b) comm.": _yn(p.comm_share),
                            "(b) time": _yn(p.time_share),
                            "(c)": _yn(p.ratio),
                            "measured": p.detail,
                        }
                        for p in pins(pooled)
                    ],
                    ["pairing", "(a)", "(b) comm.", "(b) time", "(c)", "measured"],
                ),
                "",
                pin_text,
            ]
            if has_paper
            else [NO_PAPER_PIN]
        ),
        "",
        "## Every accounting, both Fishers",
        "",
        f"Headline accounting: {headline}. C1 payload bytes, C2 re-collected bytes (Tables VIII-XII), T1 makespan, "
        "T2 re-collected makespan, T3 computation time (Appendix B-D); definitions in PLAN.md. Savings in % against "
        f"Retrain; in range: time {TIME_RANGE[0]} to {TIME_RANGE[1]}, communication {COMM_RANGE[0]} to {COMM_RANGE[1]}; "
        "per replicate in replicate order."
        + (
            " K-FAC and diagonal rows come from " + ", ".join(f"`{p}`" for p in [".", *present]) + "." if beside else ""
        ),
        "",
        _table(
            accounting_table([bundle, *beside]),
            [
                "setting",
                "dataset",
                "fisher",
                "arm",
                "accounting",
                "time",
                "time, per replicate",
                "time in range",
                "communication",
                "communication, per replicate",
                "communication in range",
                "ratio, per replicate",
            ],
        ),
        "",
        *cost_section([bundle, *beside]),
        "## Claims of PLAN.md, one by one",
        "",
        (
            _table(
                [c.row() for c in found],
                ["claim", "setting", "dataset", "fisher", "arm", "paper", "ours", "per_replicate", "agree", "verdict"],
            )
            if found
            else NO_CLAIMS
        ),
        "",
        "## F-SOSA against Retrain, paired by replicate",
        "",
        "Differences F-SOSA - Retrain in points, per replicate, with the mean's 95 % Student-t interval; a claim that "
        "F-SOSA is below Retrain holds only where the interval lies below 0.",
        "",
        _table(
            _paired_summary(bundle),
            [
                "setting",
                "dataset",
                "fisher",
                "arm",
                "figure",
                "mean ± 95 % (n)",
                "per replicate",
                "below 0",
                "interval",
            ],
        ),
        "",
        "## Traffic per replicate",
        "",
        "From `requests.csv` (Retrain's records): the clients at the first fit, the requests after it and their span; "
        "whether every setting and dataset of the replicate saw its requests at the same times; how many distinct F-SOSA "
        "trigger patterns its datasets drew (one pattern over several datasets: their trigger draws are shared, "
        "so their communication savings are one measurement, not several).",
        "",
        _table(
            traffic_rows(bundle),
            [
                "arm",
                "replicate",
                "seed",
                "sumo_seed",
                "clients_at_first_fit",
                "first_fit",
                "requests",
                "arrivals",
                "departures",
                "span_s",
                "requests_per_min",
                "same_request_times_in_every_run",
                "fsosa_trigger_patterns",
            ],
        ),
        "",
        *runs_section(bundle),
        "## Physics setting",
        "",
        *physics_section(bundle),
        "",
        *(f"![{s} {d}](fig6_{s}_{d}.png)" for s, d in _plotted(bundle)),
        "",
        "Files: `replicates.csv` (per replicate and method), `requests.csv` (per record), `runs.json` (the runs), "
        "`provenance.json` (when, where, how); generated from them: `summary.csv` (intervals per setting, dataset, "
        "method), `accounting.csv` (every accounting per run), `claims.csv` (the table above), this report.",
    ]
    title = prov.get("title", "SUMO/LuST case study over replicates (seed 000, VI-C)")
    files["report.md"] = f"# {title}\n\n{header(prov, bundle)}\n\n" + "\n".join(body).rstrip() + "\n"
    return files


def _csv(rows: Sequence[dict[str, Any]]) -> str:
    import io

    columns: list[str] = []
    for r in rows:
        columns += [k for k in r if k not in columns]
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    w.writeheader()
    w.writerows([{k: _cell(v) for k, v in r.items()} for r in rows])
    return buf.getvalue()


def _cell(v: Any) -> Any:
    if isinstance(v, float):
        return "" if math.isnan(v) else repr(v)
    return "" if v is None else v


def _paired_summary(bundle: Bundle) -> list[dict[str, Any]]:
    out = []
    for key, rs in _groups(paired_rows(bundle), ["setting", "dataset", "fisher", "arm"]).items():
        for fig, name in (
            ("fluctuation_diff_pts", "fluctuation"),
            ("final_acc_diff_pts", "final accuracy"),
            ("mean_acc_diff_pts", "mean accuracy over the requests"),
        ):
            vals = [r[fig] for r in rs]
            xs = finite(vals)
            if not xs:
                continue
            iv = interval(xs)
            span = "-" if math.isnan(iv.ci) else f"{iv.mean - iv.ci:.2f} to {iv.mean + iv.ci:.2f}"
            out.append(
                {
                    "setting": key[0],
                    "dataset": key[1],
                    "fisher": key[2],
                    "arm": key[3],
                    "figure": name,
                    "mean ± 95 % (n)": mean_ci(vals),
                    "per replicate": each(vals),
                    "below 0": f"{sum(1 for x in xs if x < 0)} of {len(xs)}",
                    "interval": span,
                }
            )
    return out


def _plotted(bundle: Bundle) -> list[tuple[str, str]]:
    pairs = sorted({(r["setting"], r["dataset"]) for r in bundle.requests}, key=order)
    return [(s, d) for s, d in pairs if (bundle.path / f"fig6_{s}_{d}.png").is_file()]


def write(path: str | Path, plots: Callable[[Bundle], None] | None = None) -> Path:
    """Write :func:`render`'s files into the replicate directory ``path`` (and the plots, when
    given a plotter); the report's path."""
    if plots is not None:
        plots(load(path))
    for name, text in render(path).items():
        report.replace_text(Path(path) / name, text)
    return Path(path) / "report.md"


def headline_rows(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
    """The claims of the top table and what it says of them: with several arms, only arm both (the
    design that varies both seeds), one row per claim; the other arms are in the full claims table."""
    arms = sorted({str(r.get("arm")) for r in rows})
    if len(arms) < 2 or "both" not in arms:
        return rows, ""
    others = ", ".join(a for a in arms if a != "both")
    note = (
        " Arm both (the traffic seed and the member draw varied together); the arms that vary one of them "
        f"({others}) are in 'Claims of PLAN.md, one by one'."
    )
    return [r for r in rows if r.get("arm") == "both"], note
