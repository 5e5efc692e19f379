"""What the report says: the per-method tables, the paired rows, the claims with their verdicts, the pinned pairing."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ...sweep.stats import interval
from .data import (
    ACC_MARGIN,
    BDD_UNTRIGGERED_SHARE,
    COMM_RANGE,
    FLUCT_MAX,
    PAIRINGS,
    RATIO_RANGE,
    SEED_COMM_SAVING,
    SEED_DATASET,
    SEED_UNTRIGGERED,
    SWING_MIN,
    TIME_RANGE,
    Bundle,
    accounting_rows,
    num,
    order,
    ratio_range,
)
from .stats import each, equivalence_test, finite, mean_ci, paired_test, range_test, variance_test

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
                    "not tested: the arms traffic and members are not among these runs (the plan varies the "
                    "seeds apart on MNIST with the diagonal Fisher: PLAN.md, 'Runs')",
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
                verdict = f"variance ratio {ratio:.3g}, p = {p:.3f}: " + (
                    f"{driver} drives the spread" if p < 0.05 else "no difference detected"
                )
            sd = f"SD traffic {interval(a).std:.2f} (n={len(a)}), members {interval(b).std:.2f} (n={len(b)})"
            shared = {(r["seed"], r["sumo_seed"]) for r in traffic} & {(r["seed"], r["sumo_seed"]) for r in members}
            if shared:  # the F-test takes the two samples as independent; a run in both arms is in each
                sd += f"; {len(shared)} run(s) in both arms"
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
