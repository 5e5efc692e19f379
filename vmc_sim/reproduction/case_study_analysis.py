"""The LuST case study's analysis as ``reports/lust_case_study/PLAN.md`` fixes it, computed from the
files a replicate directory keeps and nothing else: ``replicates.csv`` (one row per run and
method), ``requests.csv`` (one row per record), ``runs.csv`` (traffic, dwell and job times per run,
where the runs wrote one), ``runs.json`` (the runs' wall-clock) and ``provenance.json`` (when, where,
from which commit and by which command the runs were made). :func:`render` turns them into the
report's files, so the committed report is a function of the committed data and a test
regenerates it byte for byte; a figure the plan needs that the files do not hold is said to
await the runs of the plan, never filled in.

The accountings (PLAN.md, "Accountings"), per run, F-SOSA against Retrain on the same requests:

- C1, payload bytes: each record's ``bytes`` (broadcast, model upload, Fisher upload, control).
- C2, re-collected bytes: a triggered F-SOSA record charged a broadcast and the whole subset's
  uploads (``subset_size`` x the first fit's per-client upload), as seed 000's Tables VIII-XII.
- T1, makespan: each record's ``makespan_s`` (request to release, in simulated time).
- T2, re-collected makespan: a triggered F-SOSA record charged Retrain's ``makespan_s``.
- T3, computation time (Appendix B-D): the slowest trained client plus the solve
  (``common.compute_time``), from ``compute_time_s`` per record or the run's total.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..sweep.stats import interval
from . import report

# -- seed 000's figures ------------------------------------------------------------------------

SEED_DATASET = {"mnist": "MNIST", "svhn": "SVHN", "fashion_mnist": "SVHN", "femnist": "FEMNIST", "cifar10": "CIFAR-10"}
"""The seed's dataset each of ours is compared with (Fashion-MNIST stands in for SVHN, whose files
these machines lack)."""

SEED_COMM_SAVING = {"MNIST": -22.35, "SVHN": -25.76, "FEMNIST": -21.97, "CIFAR-10": -22.35}
"""Communication saving per dataset, % (Appendix B-E; Tables VIII-XI: 329.61/424.48, 717.63/966.63,
5416.97/6942.18, 750.59/966.63 MB)."""

SEED_UNTRIGGERED = {"MNIST": 7, "SVHN": 8, "FEMNIST": 7, "CIFAR-10": 7, "BDD100K": 8}
"""Requests of 31 on which F-SOSA's row of Tables VIII-XII is 0.00 (every other row equals Retrain's)."""

SEED_FISHER = {"MNIST": "diagonal", "SVHN": "kfac", "FEMNIST": "kfac", "CIFAR-10": "kfac"}
"""The Fisher whose size Tables VIII-XI upload: MNIST's Fisher uploads equal its model uploads
(144.68 MB each, the 16-bit diagonal of Table VII); the others' are K-FAC's (e.g. CIFAR-10 338.50
against 322.59 MB, Table VII's 18.81 against 17.92)."""

TIME_RANGE = (-53.84, -36.66)  # VI-C: "reduce cumulative time ... by 36.66%-53.84%"
COMM_RANGE = (-25.76, -21.97)  # VI-C: "... and communication overhead by ... 21.97%-25.76%"
FLUCT_MAX = 3.96  # VI-C: "F-SOSA-I/U keep variations within 3.96% across all datasets"
SWING_MIN = 5.0  # VI-C: "On SVHN, for instance, Retrain exhibits swings over 5%"
ACC_MARGIN = 1.0  # VI-C: "F-SOSA-I/U match the accuracy of Retrain": equivalence within 1 point
BDD_UNTRIGGERED_SHARE = 78.31  # B-D: skipped updates make "approximately 78.31%" of the time saving
RATIO_RANGE = (TIME_RANGE[1] / COMM_RANGE[0], TIME_RANGE[0] / COMM_RANGE[1])
"""Time saving over communication saving as seed 000's VI-C figures allow it on any dataset:
36.66 / 25.76 = 1.42 to 53.84 / 21.97 = 2.45 (the text gives the time range over the four
datasets, not per dataset)."""


def ratio_range(dataset: str) -> tuple[float, float] | None:
    """The ratio of time to communication saving the seed allows on ``dataset``: the time range
    over its own communication saving (None for a dataset the seed does not have)."""
    c = SEED_COMM_SAVING.get(SEED_DATASET.get(dataset, ""))
    return None if c is None else (TIME_RANGE[1] / c, TIME_RANGE[0] / c)


# -- reading the files -------------------------------------------------------------------------


def num(value: Any) -> float | None:
    """A CSV cell as a finite float; None for an empty, non-numeric or non-finite cell."""
    if value is None or value == "":
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def read_csv(path: Path) -> list[dict[str, str]]:
    """The rows of ``path`` (none when the file is missing)."""
    if not path.is_file():
        return []
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


@dataclass
class Bundle:
    """One replicate directory's data: its CSVs, runs.json and provenance.json."""

    path: Path
    provenance: dict[str, Any]
    replicates: list[dict[str, str]]
    requests: list[dict[str, str]]
    runs: list[dict[str, str]] = field(default_factory=list)
    index: list[dict[str, Any]] = field(default_factory=list)

    @property
    def fisher(self) -> str:
        """The Fisher of the runs that name none (provenance.json's)."""
        return str(self.provenance.get("fisher", "diagonal"))

    def key(self, row: dict[str, Any]) -> tuple[str, str, str, str, int]:
        """(setting, dataset, fisher, arm, replicate) of a row of any of the CSVs."""
        return (
            row["setting"],
            row["dataset"],
            row.get("fisher") or self.fisher,
            row.get("arm") or str(self.provenance.get("arm", "both")),
            int(row["replicate"]),
        )


def load(path: str | Path) -> Bundle:
    """The data of the replicate directory ``path``."""
    p = Path(path)
    prov = p / "provenance.json"
    if not prov.is_file():
        raise FileNotFoundError(f"{prov}: the runs' provenance is missing (see PLAN.md, 'Files')")
    index_path = p / "runs.json"
    return Bundle(
        path=p,
        provenance=json.loads(prov.read_text(encoding="utf-8")),
        replicates=read_csv(p / "replicates.csv"),
        requests=read_csv(p / "requests.csv"),
        runs=read_csv(p / "runs.csv"),
        index=json.loads(index_path.read_text(encoding="utf-8")) if index_path.is_file() else [],
    )


# -- the accountings ---------------------------------------------------------------------------

KINDS = ("broadcast", "model_upload", "fisher_upload", "control")
COMM = {"C1": "payload bytes", "C2": "re-collected bytes"}
TIME = {"T1": "makespan", "T2": "re-collected makespan", "T3": "computation time (B-D)"}
PAIRINGS = [(c, t) for c in COMM for t in TIME]
"""Every accounting of communication with every accounting of time."""


def _bytes(r: dict[str, str]) -> float:
    return sum(num(r.get(f"{k}_bytes")) or 0.0 for k in KINDS)


def _triggered(r: dict[str, str]) -> bool:
    """A record that re-collects in seed 000's accounting: triggered, and not a withdrawal."""
    return r.get("triggered") == "1" and r.get("kind") != "suspend"


def _saving(ours: float, theirs: float) -> float | None:
    return 100 * (ours / theirs - 1) if theirs else None


def _share(retrain: Sequence[float], fsosa: Sequence[float], skipped: Sequence[bool]) -> float | None:
    """The share (%) of F-SOSA's saving made on the requests it did not trigger on."""
    saved = sum(retrain) - sum(fsosa)
    part = sum(r - f for r, f, s in zip(retrain, fsosa, skipped, strict=True) if s)
    return 100 * part / saved if saved else None


@dataclass
class Run:
    """One run's F-SOSA and Retrain records, aligned by request index."""

    key: tuple[str, str, str, str, int]
    fsosa: list[dict[str, str]]
    retrain: list[dict[str, str]]
    seed: str = ""
    sumo_seed: str = ""


def runs_of(bundle: Bundle) -> list[Run]:
    """The runs of ``bundle``'s requests.csv that have both F-SOSA and Retrain, in key order."""
    by: dict[tuple, dict[str, list[dict[str, str]]]] = {}
    for r in bundle.requests:
        by.setdefault(bundle.key(r), {}).setdefault(r["method"], []).append(r)
    seeds = {bundle.key(r): (r.get("seed") or "", r.get("sumo_seed") or "") for r in bundle.replicates}
    out = []
    for key in sorted(by, key=order):
        m = by[key]
        if "fsosa" in m and "retrain" in m:
            f = sorted(m["fsosa"], key=lambda r: int(r["index"]))
            rt = sorted(m["retrain"], key=lambda r: int(r["index"]))
            out.append(Run(key, f, rt, *seeds.get(key, ("", ""))))
    return out


SETTING_ORDER = ["paper", "paper_cpu", "physics"]
DATASET_ORDER = ["mnist", "fashion_mnist", "femnist", "cifar10", "svhn"]


def _rank(value: str, known: list[str]) -> tuple[int, str]:
    return (known.index(value), "") if value in known else (len(known), value)


def order(key: tuple) -> tuple:
    """Sort key of (setting, dataset, fisher, arm, replicate, ...): the seed's dataset order."""
    head = [_rank(key[0], SETTING_ORDER)] + ([_rank(key[1], DATASET_ORDER)] if len(key) > 1 else [])
    return (*head, *key[2:])


def accounting_rows(bundle: Bundle) -> list[dict[str, Any]]:
    """Per run: F-SOSA's saving against Retrain under every accounting, the untriggered share of
    each saving, F-SOSA's triggered requests, and the ratio of time to communication saving of
    every pairing (PLAN.md, "Accountings")."""
    totals = {bundle.key(r): r for r in bundle.replicates if r["method"] == "fsosa"}
    out = []
    for run in runs_of(bundle):
        f, rt = run.fsosa, run.retrain
        at = {int(r["index"]): r for r in rt}
        skipped = [int(r["index"]) > 0 and r.get("triggered") != "1" for r in f]
        fits = [r for r in f if r.get("kind") == "fit" and (num(r.get("model_upload_bytes")) or 0) > 0]
        comm: dict[str, tuple[float | None, float | None]] = {}
        retrain_bytes = [_bytes(at[int(r["index"])]) if int(r["index"]) in at else 0.0 for r in f]
        comm["C1"] = (
            _saving(sum(map(_bytes, f)), sum(map(_bytes, rt))),
            _share(retrain_bytes, [_bytes(r) for r in f], skipped),
        )
        if fits:
            p = num(fits[0]["subset_size"]) or 1.0
            unit_b = num(fits[0]["broadcast_bytes"]) or 0.0
            unit_u = ((num(fits[0]["model_upload_bytes"]) or 0.0) + (num(fits[0]["fisher_upload_bytes"]) or 0.0)) / p
            again = [
                ((unit_b + (num(r["subset_size"]) or 0.0) * unit_u) if _triggered(r) else 0.0)
                + (num(r.get("control_bytes")) or 0.0)
                for r in f
            ]
            comm["C2"] = (_saving(sum(again), sum(map(_bytes, rt))), _share(retrain_bytes, again, skipped))
        else:  # every F-SOSA model withdrawn before its first upload: nothing to re-collect
            comm["C2"] = (None, None)

        def makespan(r: dict[str, str]) -> float:
            return num(r.get("makespan_s")) or 0.0

        retrain_time = [makespan(at[int(r["index"])]) if int(r["index"]) in at else 0.0 for r in f]
        own = [makespan(r) for r in f]
        again_t = [rt_s if _triggered(r) else o for r, rt_s, o in zip(f, retrain_time, own, strict=True)]
        times: dict[str, tuple[float | None, float | None]] = {
            "T1": (_saving(sum(own), sum(map(makespan, rt))), _share(retrain_time, own, skipped)),
            "T2": (_saving(sum(again_t), sum(map(makespan, rt))), _share(retrain_time, again_t, skipped)),
        }
        per_f = [num(r.get("compute_time_s")) for r in f]
        per_r = [num(at[int(r["index"])].get("compute_time_s")) if int(r["index"]) in at else None for r in f]
        if f and all(v is not None for v in per_f + per_r):
            fs, rs = [v or 0.0 for v in per_f], [v or 0.0 for v in per_r]
            times["T3"] = (_saving(sum(fs), sum(rs)), _share(rs, fs, skipped))
        else:  # the committed runs keep only each run's total (replicates.csv), not the requests'
            times["T3"] = (num(totals.get(run.key, {}).get("compute_time_saving_pct")), None)
        setting, dataset, fisher, arm, replicate = run.key
        row: dict[str, Any] = {
            "setting": setting,
            "dataset": dataset,
            "fisher": fisher,
            "arm": arm,
            "replicate": replicate,
            "seed": run.seed,
            "sumo_seed": run.sumo_seed,
            "requests": len(f) - 1,
            "triggered": sum(1 for r in f[1:] if r.get("triggered") == "1"),
            "triggered_pattern": "".join("1" if r.get("triggered") == "1" else "0" for r in f[1:]),
            "payload_equal_to_retrain": sum(
                1
                for r in f[1:]
                if r.get("triggered") == "1" and int(r["index"]) in at and _bytes(r) == _bytes(at[int(r["index"])])
            ),
        }
        for k, (saving, share) in {**comm, **times}.items():
            row[f"{k}_saving_pct"] = saving
            row[f"{k}_untriggered_share_pct"] = share
        for c, t in PAIRINGS:
            cs, ts = row[f"{c}_saving_pct"], row[f"{t}_saving_pct"]
            row[f"{c}+{t}_ratio"] = ts / cs if cs and ts is not None else None
        out.append(row)
    return out


# -- tests and their verdicts ------------------------------------------------------------------


def finite(values: Iterable[Any]) -> list[float]:
    """The finite numbers among ``values``."""
    return [
        x
        for x in (num(v) if not isinstance(v, (int, float)) else float(v) for v in values)
        if x is not None and math.isfinite(x)
    ]


def mean_ci(values: Iterable[Any], digits: int = 2) -> str:
    """``mean ± 95 % half-width (n=k)``; ``mean (n=1)`` for one value; ``-`` for none."""
    iv = interval(finite(values))
    if iv.n == 0:
        return "-"
    spread = "" if math.isnan(iv.ci) else f" ± {iv.ci:.{digits}f}"
    return f"{iv.mean:.{digits}f}{spread} (n={iv.n})"


def each(values: Sequence[Any], digits: int = 2) -> str:
    """Every replicate's value in replicate order, ``-`` where it has none (counts as integers)."""

    def cell(v: Any) -> str:
        if isinstance(v, int) and not isinstance(v, bool):
            return str(v)
        x = num(v) if not isinstance(v, float) else (v if math.isfinite(v) else None)
        return "-" if x is None else f"{x:.{digits}f}"

    return " / ".join(cell(v) for v in values) or "-"


def range_test(values: Iterable[Any], lo: float, hi: float) -> tuple[int, int, str]:
    """PLAN.md's rule for a claimed range: (replicates inside, replicates, verdict). ``agrees``:
    the mean inside and at least half the replicates inside; ``contradicted``: the mean's 95 %
    interval wholly outside; ``undecided`` otherwise; one replicate is no test."""
    xs = finite(values)
    n, k = len(xs), sum(1 for x in xs if lo <= x <= hi)
    if n == 0:
        return 0, 0, "no data"
    iv = interval(xs)
    if n == 1:
        return k, n, "one replicate: no test (" + ("inside" if k else "outside") + ")"
    if lo <= iv.mean <= hi and 2 * k >= n:
        return k, n, "agrees"
    if iv.mean + iv.ci < lo or iv.mean - iv.ci > hi:
        return k, n, "contradicted"
    return k, n, "undecided"


def paired_test(diffs: Iterable[Any]) -> tuple[int, int, str]:
    """PLAN.md's rule for "F-SOSA below Retrain" on paired differences (F-SOSA - Retrain):
    (replicates below zero, replicates, verdict): ``supported`` when the 95 % t interval lies below
    zero, ``contradicted`` above it, ``undecided`` when it spans zero."""
    xs = finite(diffs)
    n, k = len(xs), sum(1 for x in xs if x < 0)
    if n == 0:
        return 0, 0, "no data"
    if n == 1:
        return k, n, "one replicate: no test"
    iv = interval(xs)
    if iv.mean + iv.ci < 0:
        return k, n, "supported"
    if iv.mean - iv.ci > 0:
        return k, n, "contradicted"
    return k, n, "undecided (the interval spans 0)"


def equivalence_test(diffs: Iterable[Any], margin: float) -> tuple[int, int, str]:
    """PLAN.md's rule for "matches Retrain": (replicates within ``margin``, replicates, verdict):
    ``equivalent`` when the 95 % t interval of the mean difference lies within ±margin,
    ``differs`` when it lies wholly outside, ``undecided`` otherwise."""
    xs = finite(diffs)
    n, k = len(xs), sum(1 for x in xs if abs(x) <= margin)
    if n == 0:
        return 0, 0, "no data"
    if n == 1:
        return k, n, "one replicate: no test (" + ("within" if k else "outside") + f" ±{margin:g})"
    iv = interval(xs)
    if -margin <= iv.mean - iv.ci and iv.mean + iv.ci <= margin:
        return k, n, "equivalent"
    if iv.mean + iv.ci < -margin or iv.mean - iv.ci > margin:
        return k, n, "differs"
    return k, n, "undecided"


def variance_test(a: Sequence[float], b: Sequence[float]) -> tuple[float, float] | None:
    """The ratio of the sample variances of ``a`` and ``b`` and its two-sided F-test p-value
    (None with fewer than two values on a side or a zero variance)."""
    from scipy.stats import f as fdist

    if len(a) < 2 or len(b) < 2:
        return None
    va, vb = interval(a).std ** 2, interval(b).std ** 2
    if vb == 0 or va == 0:
        return None
    ratio = va / vb
    lower = fdist.cdf(ratio, len(a) - 1, len(b) - 1)
    return ratio, float(min(1.0, 2 * min(lower, 1 - lower)))


# -- what the report says ----------------------------------------------------------------------


def _groups(rows: Iterable[dict[str, Any]], keys: Sequence[str]) -> dict[tuple, list[dict[str, Any]]]:
    out: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(tuple(r[k] for k in keys), []).append(r)
    return {
        k: sorted(v, key=lambda r: int(r["replicate"])) for k, v in sorted(out.items(), key=lambda kv: order(kv[0]))
    }


def method_table(bundle: Bundle) -> dict[tuple, dict[str, dict[str, str]]]:
    """replicates.csv as (setting, dataset, fisher, arm, replicate) -> method -> row."""
    out: dict[tuple, dict[str, dict[str, str]]] = {}
    for r in bundle.replicates:
        out.setdefault(bundle.key(r), {})[r["method"]] = r
    return out


def paired_rows(bundle: Bundle) -> list[dict[str, Any]]:
    """Per run: F-SOSA - Retrain in fluctuation, final accuracy and mean accuracy (points), and
    each method's fluctuation."""
    out = []
    for key, m in sorted(method_table(bundle).items(), key=lambda kv: order(kv[0])):
        if "fsosa" not in m or "retrain" not in m:
            continue
        f, r = m["fsosa"], m["retrain"]

        def diff(name: str, f: dict[str, str] = f, r: dict[str, str] = r) -> float | None:
            a, b = num(f.get(name)), num(r.get(name))
            return None if a is None or b is None else a - b

        setting, dataset, fisher, arm, replicate = key
        out.append(
            {
                "setting": setting,
                "dataset": dataset,
                "fisher": fisher,
                "arm": arm,
                "replicate": replicate,
                "fsosa_fluctuation_pts": num(f.get("fluctuation_pts")),
                "retrain_fluctuation_pts": num(r.get("fluctuation_pts")),
                "fluctuation_diff_pts": diff("fluctuation_pts"),
                "final_acc_diff_pts": diff("final_acc"),
                "mean_acc_diff_pts": diff("mean_acc"),
            }
        )
    return out


@dataclass
class Claim:
    """One claim of PLAN.md on one (setting, dataset, fisher, arm): the seed's figure, ours, every
    replicate's value, how many replicates agree and the verdict of the plan's test."""

    claim: str
    setting: str
    dataset: str
    fisher: str
    arm: str
    paper: str
    ours: str
    per_replicate: str
    agree: str
    verdict: str

    def row(self) -> dict[str, str]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


CLAIMS = {
    "C-COMM": "communication saving under the pinned accounting, %",
    "C-TIME": "cumulative time saving under the pinned accounting, %",
    "C-RATIO": "time over communication saving under the pinned accounting",
    "C-SHARE": "untriggered requests' share of the pinned time saving, %",
    "C-TRIG": "F-SOSA's triggered requests of 31",
    "C-FLUCT": "F-SOSA's fluctuation (own max - min), points",
    "C-STEADIER": "fluctuation, F-SOSA - Retrain (paired), points",
    "C-ACC": "final accuracy, F-SOSA - Retrain (paired), points",
    "C-SWING": "Retrain's fluctuation, points",
    "C-SPREAD": "which seed drives the spread of the savings (traffic against member draw)",
    "C-DRAWS": "distinct F-SOSA trigger patterns among a replicate's datasets",
}
"""The claims PLAN.md tests, by id (PLAN.md, "Claims")."""


def _claim(
    cid: str, key: tuple, paper: str, values: list[Any], test: tuple[int, int, str], of: str = "in range"
) -> Claim:
    k, n, verdict = test
    agree = f"{k} of {n} {of}" if n else "-"
    return Claim(cid, *_where(key), paper, mean_ci(values), each(values), agree, verdict)


def _where(key: tuple) -> tuple[str, str, str, str]:
    """(setting, dataset, fisher, arm) of a group key."""
    return str(key[0]), str(key[1]), str(key[2]), str(key[3])


def claims(bundle: Bundle, beside: Sequence[Bundle] = ()) -> list[Claim]:
    """Every claim of PLAN.md on every (dataset, fisher, arm) of the paper setting in ``bundle``,
    then the two claims on the design: which seed drives the spread, and whether each dataset drew
    its own triggers. The accounting is the one the runs of ``bundle`` and ``beside`` pin."""
    keys = ["setting", "dataset", "fisher", "arm"]
    every = accounting_rows(bundle)
    pinned, _, _ = pin_verdict(pins(every + [r for b in beside for r in accounting_rows(b)]))
    ck, tk = (pinned or "C2+T3").split("+")
    acc = _groups([r for r in every if r["setting"] == "paper"], keys)
    pair = _groups([r for r in paired_rows(bundle) if r["setting"] == "paper"], keys)
    out: list[Claim] = []

    def unpinned(claim: Claim) -> Claim:
        if pinned is None:  # PLAN.md: no verdict under an accounting the seed does not single out
            claim.verdict = f"no verdict: no accounting pinned ({ck}+{tk} shown)"
        return claim

    for key in sorted(set(acc) | set(pair), key=order):
        rows, prs = acc.get(key, []), pair.get(key, [])
        seed = SEED_DATASET.get(key[1])
        if seed is None:
            continue
        comm = [r[f"{ck}_saving_pct"] for r in rows]
        time = [r[f"{tk}_saving_pct"] for r in rows]
        ratio = [r[f"{ck}+{tk}_ratio"] for r in rows]
        c = SEED_COMM_SAVING[seed]
        comm_range = f"{COMM_RANGE[0]} to {COMM_RANGE[1]} ({seed}: {c})"
        out.append(unpinned(_claim("C-COMM", key, comm_range, comm, range_test(comm, *COMM_RANGE))))
        time_range = f"{TIME_RANGE[0]} to {TIME_RANGE[1]}"
        out.append(unpinned(_claim("C-TIME", key, time_range, time, range_test(time, *TIME_RANGE))))
        lo, hi = ratio_range(key[1]) or RATIO_RANGE
        out.append(
            _claim(
                "C-RATIO",
                key,
                f"{lo:.2f} to {hi:.2f} (the time range over {seed}'s {c})",
                ratio,
                range_test(ratio, lo, hi),
            )
        )
        shares = [r[f"{tk}_untriggered_share_pct"] for r in rows]
        if finite(shares):
            iv = interval(finite(shares))
            inside = not math.isnan(iv.ci) and iv.mean - iv.ci <= BDD_UNTRIGGERED_SHARE <= iv.mean + iv.ci
            verdict = (
                "one replicate: no test"
                if iv.n < 2
                else ("interval holds 78.31" if inside else "interval excludes 78.31")
            )
            out.append(Claim("C-SHARE", *_where(key), "78.31 (BDD100K)", mean_ci(shares), each(shares), "-", verdict))
        else:
            waits = "awaits the runs of the plan (requests.csv without per-record times)"
            out.append(Claim("C-SHARE", *_where(key), "78.31 (BDD100K)", "-", "-", "-", waits))
        trig = [r["triggered"] for r in rows]
        paper = f"{31 - SEED_UNTRIGGERED[seed]} ({seed}, Tables VIII-XI; 23-24 over the five tables)"
        out.append(_claim("C-TRIG", key, paper, trig, range_test(trig, 23, 24), "at 23-24"))
        fl = [r["fsosa_fluctuation_pts"] for r in prs]
        out.append(
            _claim("C-FLUCT", key, f"at most {FLUCT_MAX}", fl, range_test(fl, 0.0, FLUCT_MAX), f"at most {FLUCT_MAX}")
        )
        d = [r["fluctuation_diff_pts"] for r in prs]
        out.append(_claim("C-STEADIER", key, 'below 0 ("smaller fluctuations")', d, paired_test(d), "below 0"))
        a = [r["final_acc_diff_pts"] for r in prs]
        margin = f"within ±{ACC_MARGIN:g}"
        out.append(
            _claim(
                "C-ACC", key, f'{margin} ("match the accuracy of Retrain")', a, equivalence_test(a, ACC_MARGIN), margin
            )
        )
        if seed == "SVHN":
            sw = [r["retrain_fluctuation_pts"] for r in prs]
            out.append(
                _claim(
                    "C-SWING",
                    key,
                    f"over {SWING_MIN:g} (SVHN)",
                    sw,
                    range_test(sw, SWING_MIN, math.inf),
                    f"over {SWING_MIN:g}",
                )
            )
    return out + spread_claims(acc) + draw_claims(acc)


def spread_claims(acc: dict[tuple, list[dict[str, Any]]]) -> list[Claim]:
    """C-SPREAD per (dataset, fisher) of the paper setting: the variance of the C2 and T3 savings
    with the traffic seed varied against the member draw varied (two-sided F-test at 5 %)."""
    out = []
    for setting, dataset, fisher in sorted({k[:3] for k in acc}, key=order):
        key = (setting, dataset, fisher, "traffic vs members")
        traffic, members = (
            acc.get((setting, dataset, fisher, "traffic"), []),
            acc.get((setting, dataset, fisher, "members"), []),
        )
        if not traffic or not members:
            out.append(
                Claim(
                    "C-SPREAD",
                    *_where(key),
                    "-",
                    "-",
                    "-",
                    "-",
                    "awaits the runs of the plan (arms traffic and members)",
                )
            )
            continue
        for fig in ("C2_saving_pct", "T3_saving_pct"):
            a, b = finite(r[fig] for r in traffic), finite(r[fig] for r in members)
            test = variance_test(a, b)
            if test is None:
                verdict = "no test (fewer than 2 values or no spread)"
            else:
                ratio, p = test
                driver = "the traffic seed" if ratio > 1 else "the member draw"
                verdict = f"variance ratio {ratio:.2f}, p = {p:.3f}: " + (
                    f"{driver} drives the spread" if p < 0.05 else "no difference detected"
                )
            sd = f"SD traffic {interval(a).std:.2f} (n={len(a)}), members {interval(b).std:.2f} (n={len(b)})"
            out.append(Claim("C-SPREAD", *_where(key), fig.split("_")[0], sd, "-", "-", verdict))
    return out


def draw_claims(acc: dict[tuple, list[dict[str, Any]]]) -> list[Claim]:
    """C-DRAWS per (fisher, arm) of the paper setting: how many distinct F-SOSA trigger patterns the
    datasets of each replicate drew (seed 000's Tables VIII-XI: one per dataset)."""
    per: dict[tuple[str, str, str], dict[int, set[str]]] = {}
    counts: dict[tuple[str, str, str], dict[int, int]] = {}
    for (setting, _dataset, fisher, arm), rows in acc.items():
        for r in rows:
            per.setdefault((setting, fisher, arm), {}).setdefault(r["replicate"], set()).add(r["triggered_pattern"])
            counts.setdefault((setting, fisher, arm), {}).setdefault(r["replicate"], 0)
            counts[(setting, fisher, arm)][r["replicate"]] += 1
    out = []
    for (setting, fisher, arm), reps in sorted(per.items(), key=lambda kv: order(kv[0])):
        n = counts[(setting, fisher, arm)]
        several = [r for r in sorted(reps) if n[r] > 1]
        if not several:
            continue
        distinct = [len(reps[r]) for r in several]
        shared = sum(1 for r, d in zip(several, distinct, strict=True) if d == 1)
        verdict = (
            "shared: one trigger pattern for every dataset of a replicate, so the datasets' communication savings are one measurement"
            if shared == len(several)
            else f"own draws: {len(several) - shared} of {len(several)} replicates draw more than one pattern"
        )
        out.append(
            Claim(
                "C-DRAWS",
                setting,
                "all",
                fisher,
                arm,
                "one pattern per dataset (Tables VIII-XI: 4 patterns)",
                "-",
                " / ".join(f"r{r} {d} of {n[r]}" for r, d in zip(several, distinct, strict=True)),
                f"{shared} of {len(several)} shared",
                verdict,
            )
        )
    return out


@dataclass
class Pin:
    """Whether one pairing of accountings shows seed 000's pattern (PLAN.md, "Pinning")."""

    pairing: str
    per_request_bytes: bool | None  # (a) F-SOSA's bytes on a request are 0 or Retrain's
    comm_share: bool | None  # (b) untriggered requests make all of the communication saving
    time_share: bool | None  # (b) ... and not all of the time saving
    ratio: bool | None  # (c) the ratio in the seed's bounds in at least half the replicates of every dataset
    detail: str

    @property
    def fails(self) -> bool:
        return False in (self.per_request_bytes, self.comm_share, self.time_share, self.ratio)


def pins(rows: list[dict[str, Any]]) -> list[Pin]:
    """Criteria (a)-(c) of PLAN.md for every pairing, on the paper setting's runs of ``rows``; (c)
    counts the (dataset, Fisher, arm) groups of two replicates or more, and awaits runs without one."""
    paper = [r for r in rows if r["setting"] == "paper"]
    by_ds = _groups(paper, ["dataset", "fisher", "arm"])
    out = []
    for c, t in PAIRINGS:
        name = f"{c}+{t}"
        if c == "C1":
            equal = sum(r["payload_equal_to_retrain"] for r in paper)
            trig = sum(r["triggered"] for r in paper)
            a: bool | None = equal == trig if trig else None
        else:
            a, equal, trig = True, 0, 0  # C2 charges Retrain's round by construction
        cshares = finite(r[f"{c}_untriggered_share_pct"] for r in paper)
        b_comm = all(abs(x - 100) < 1e-6 for x in cshares) if cshares else None
        tshares = finite(r[f"{t}_untriggered_share_pct"] for r in paper)
        b_time = (not all(x >= 100 - 1e-6 for x in tshares)) if tshares else None
        counts = []
        ok: bool | None = None
        for (ds, fisher, arm), rs in by_ds.items():
            vals = finite(r[f"{name}_ratio"] for r in rs)
            k = sum(1 for x in vals if RATIO_RANGE[0] <= x <= RATIO_RANGE[1])
            counts.append(
                f"{ds} ({fisher}, {arm}) {k} of {len(vals)}"
                + (" (one replicate: not counted)" if len(vals) == 1 else "")
            )
            if len(vals) >= 2:  # one replicate is no test
                ok = (ok is not False) and 2 * k >= len(vals)
        detail = (
            (f"payload equal to Retrain's on {equal} of {trig} triggered requests; " if c == "C1" else "")
            + f"untriggered share of the communication saving {mean_ci(cshares)}, of the time saving "
            + (mean_ci(tshares) if tshares else "not in the files")
            + f"; ratio in {RATIO_RANGE[0]:.2f}-{RATIO_RANGE[1]:.2f}: "
            + ", ".join(counts)
        )
        out.append(Pin(name, a, b_comm, b_time, ok, detail))
    return out


def pin_verdict(found: list[Pin]) -> tuple[str | None, str, bool]:
    """The pairing the criteria single out (None when none or several pass), the sentence that
    says so, and whether every criterion could be checked (False: the pin is provisional)."""
    passing = [p for p in found if not p.fails and p.ratio]
    if len(passing) != 1:
        names = ", ".join(p.pairing for p in passing) or "none"
        return None, f"No accounting is singled out: the pairings that meet (a)-(c) are {names}.", True
    p = passing[0]
    open_ = [
        n
        for n, v in (
            ("(a)", p.per_request_bytes),
            ("(b) on communication", p.comm_share),
            ("(b) on time", p.time_share),
        )
        if v is None
    ]
    waits = f"; {' and '.join(open_)} cannot be checked on these files and awaits the runs of the plan" if open_ else ""
    return p.pairing, f"{p.pairing} is the only pairing that meets (a)-(c){waits}.", not open_


def _yn(v: bool | None) -> str:
    return "awaits" if v is None else ("yes" if v else "no")


def traffic_rows(bundle: Bundle) -> list[dict[str, Any]]:
    """Per replicate (and arm): the first fit's clients, the requests, their span, whether every
    setting and dataset replayed the same requests, and F-SOSA's distinct trigger patterns."""
    per: dict[tuple[str, int], dict[tuple[str, str, str], list[dict[str, str]]]] = {}
    for r in bundle.requests:
        if r["method"] != "retrain":
            continue
        setting, dataset, fisher, arm, replicate = bundle.key(r)
        per.setdefault((arm, replicate), {}).setdefault((setting, dataset, fisher), []).append(r)
    patterns: dict[tuple[str, int], dict[str, set[str]]] = {}
    for row in accounting_rows(bundle):
        patterns.setdefault((row["arm"], row["replicate"]), {}).setdefault(row["setting"], set()).add(
            row["triggered_pattern"]
        )
    seeds = {
        (bundle.key(r)[3], bundle.key(r)[4]): (r.get("seed") or "", r.get("sumo_seed") or "") for r in bundle.replicates
    }
    out = []
    for (arm, replicate), runs in sorted(per.items()):
        seqs = set()
        first = None
        for key in sorted(runs, key=order):
            rs = sorted(runs[key], key=lambda r: int(r["index"]))
            seqs.add(tuple((r["index"], r["request_time"]) for r in rs))
            first = first or rs
        assert first is not None
        fit, reqs = first[0], first[1:]
        t0 = num(fit["request_time"]) or 0.0
        span = (num(reqs[-1]["request_time"]) or 0.0) - t0 if reqs else 0.0
        pats = patterns.get((arm, replicate), {})
        seed, sumo = seeds.get((arm, replicate), ("", ""))
        out.append(
            {
                "arm": arm,
                "replicate": replicate,
                "seed": seed,
                "sumo_seed": sumo,
                "clients_at_first_fit": len(fit["added"].split()) or int(num(fit.get("population")) or 0),
                "first_fit": _clock(t0),
                "requests": len(reqs),
                "arrivals": sum(len(r["added"].split()) for r in reqs),
                "departures": sum(len(r["removed"].split()) for r in reqs),
                "span_s": span,
                "requests_per_min": len(reqs) / (span / 60) if span > 0 else None,
                "same_request_times_in_every_run": "yes" if len(seqs) == 1 else f"no ({len(seqs)} sequences)",
                "fsosa_trigger_patterns": "; ".join(
                    f"{s}: {len(p)} over {sum(1 for k in runs if k[0] == s)} dataset(s)"
                    for s, p in sorted(pats.items(), key=lambda kv: order((kv[0],)))
                ),
            }
        )
    return out


def _clock(t: float) -> str:
    t = int(round(t)) % 86400
    return f"{t // 3600:02d}:{t % 3600 // 60:02d}:{t % 60:02d}"


# -- the report --------------------------------------------------------------------------------

PAPER_CLAIMS_TOP = ("C-COMM", "C-TIME", "C-FLUCT", "C-STEADIER", "C-ACC")


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


def _provenance_lines(prov: dict[str, Any], bundle: Bundle) -> list[str]:
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


def _size(bundle: Bundle) -> str:
    got: dict[tuple[str, str, str], set[int]] = {}
    for r in bundle.replicates:
        s, d, f, arm, rep = bundle.key(r)
        got.setdefault((s, f, arm), set()).add(rep)
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


def render(path: str | Path) -> dict[str, str]:
    """The report's files of the replicate directory ``path`` (name -> text): report.md,
    summary.csv, accounting.csv, claims.csv; from its data files and those of the directories
    its provenance.json puts beside it."""
    from .case_study_replicates import summarize

    bundle = load(path)
    prov = bundle.provenance
    beside = [load((bundle.path / p).resolve()) for p in prov.get("beside", [])]
    acc = accounting_rows(bundle)
    pooled = acc + [r for b in beside for r in accounting_rows(b)]  # the pin is the seed's, not one Fisher's
    found = claims(bundle, beside)
    pinned, pin_text, complete = pin_verdict(pins(pooled))
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
        how = "pinned" if complete else "provisionally pinned (a criterion awaits the runs)"
        headline = f"{pinned} ({COMM[c]}, {TIME[t]}), {how} as 'Which accounting the seed pins' measures"
    else:
        headline = "none pinned ('Which accounting the seed pins')"
    top = [c.row() for c in found if c.claim in PAPER_CLAIMS_TOP]
    body: list[str] = [
        "Runs (`provenance.json`, `runs.json`):",
        "",
        *_provenance_lines(prov, bundle),
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
        f"Paper setting; accounting {headline}.",
        "",
        _table(
            top,
            ["claim", "dataset", "fisher", "paper", "ours", "per_replicate", "agree", "verdict"],
            ["claim", "dataset", "fisher", "paper", "ours", "per replicate", "agree", "verdict"],
        ),
        "",
        "Claims: " + "; ".join(f"{k} {v}" for k, v in CLAIMS.items()) + ". Ours: mean ± 95 % Student-t half-width (n).",
        "",
        "## Which accounting the seed pins",
        "",
        "Criteria (PLAN.md, 'Pinning'), on the paper setting's runs of this directory and of those beside it "
        "(both Fishers): (a) F-SOSA's bytes on every request are 0 or "
        "Retrain's (Tables VIII-XII); (b) untriggered requests make all of the communication saving and not all of "
        "the time saving (Appendix B-D: 100 % and 78.31 %); (c) time saving over communication saving within "
        f"{RATIO_RANGE[0]:.2f}-{RATIO_RANGE[1]:.2f} (VI-C: 36.66/25.76 to 53.84/21.97) in at least half the replicates "
        "of every dataset and Fisher (a group of one replicate is not counted).",
        "",
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
        "",
        "## Every accounting, both Fishers",
        "",
        f"Headline accounting: {headline}. C1 payload bytes, C2 re-collected bytes (Tables VIII-XII), T1 makespan, "
        "T2 re-collected makespan, T3 computation time (Appendix B-D); definitions in PLAN.md. Savings in % against "
        f"Retrain; in range: time {TIME_RANGE[0]} to {TIME_RANGE[1]}, communication {COMM_RANGE[0]} to {COMM_RANGE[1]}; "
        "per replicate in replicate order."
        + (
            " K-FAC and diagonal rows come from "
            + ", ".join(f"`{p}`" for p in ["."] + list(prov.get("beside", [])))
            + "."
            if beside
            else ""
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
        "## Claims of PLAN.md, one by one",
        "",
        _table(
            [c.row() for c in found],
            ["claim", "setting", "dataset", "fisher", "arm", "paper", "ours", "per_replicate", "agree", "verdict"],
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
        *_runs_section(bundle),
        "## Physics setting",
        "",
        *_physics(bundle),
        "",
        *(f"![{s} {d}](fig6_{s}_{d}.png)" for s, d in _plotted(bundle)),
        "",
        "Files: `replicates.csv` (per replicate and method), `requests.csv` (per record), `runs.json` (the runs), "
        "`provenance.json` (when, where, how); generated from them: `summary.csv` (intervals per setting, dataset, "
        "method), `accounting.csv` (every accounting per run), `claims.csv` (the table above), this report.",
    ]
    title = prov.get("title", "SUMO/LuST case study over replicates (seed 000, VI-C)")
    files["report.md"] = f"# {title}\n\n{_header(prov, bundle)}\n\n" + "\n".join(body).rstrip() + "\n"
    return files


def _header(prov: dict[str, Any], bundle: Bundle) -> str:
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


def _runs_section(bundle: Bundle) -> list[str]:
    if not bundle.runs:
        return [
            "Dwell in coverage, job times, teleports and coverage events held back: not in this directory's files; "
            "they await the runs of the plan (`runs.csv`).",
            "",
        ]
    cols = [c for c in bundle.runs[0] if c not in ("run",)]
    return ["Per run (`runs.csv`, from each run's manifest):", "", report.md_table(bundle.runs, cols), ""]


def _physics(bundle: Bundle) -> list[str]:
    rows = []
    for key, m in sorted(method_table(bundle).items(), key=lambda kv: order(kv[0])):
        if key[0] != "physics":
            continue
        f, r = m.get("fsosa", {}), m.get("retrain", {})
        rows.append(
            {
                "dataset": key[1],
                "fisher": key[2],
                "arm": key[3],
                "replicate": key[4],
                "F-SOSA / Retrain models released": f"{f.get('models', '-')} / {r.get('models', '-')}",
                "withdrawn": f"{f.get('withdrawn', '-')} / {r.get('withdrawn', '-')}",
                "contributions never arrived": f"{f.get('not_arrived', '-')} / {r.get('not_arrived', '-')}",
                "take-outs": f"{f.get('take_outs', '-')} / {r.get('take_outs', '-')}",
                "final accuracy": f"{_f2(f.get('final_acc'))} / {_f2(r.get('final_acc'))}",
                "T1 saving": _f2(f.get("time_saving_pct")),
                "C1 saving": _f2(f.get("comm_saving_pct")),
            }
        )
    if not rows:
        return ["No physics runs in this directory."]
    return [
        "One edge GPU shared by the clients' jobs, transfers that end when the vehicle leaves the region. The seed's "
        "claims are not tested here (its case study loses no contribution); per replicate, F-SOSA / Retrain "
        "(`replicates.csv`; final accuracy `-` where the model was withdrawn at the end):",
        "",
        report.md_table(rows, list(rows[0])),
    ]


def _f2(v: Any) -> str:
    x = num(v)
    return "-" if x is None else f"{x:.2f}"


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
