"""The LuST case study's tables from its run directories: per-method totals, per-request rows,
the setting and the cache lines of its report."""

from __future__ import annotations

from typing import Any

from ..rundir.summary import spending
from .common import compute_time, paper_style, trained_samples, unit_sizes

KINDS = ("broadcast", "model_upload", "fisher_upload", "control")


def method_rows(run, dataset: str) -> list[dict[str, Any]]:
    from ..rundir.solves import unconverged_solves

    records = list(run.records())
    by: dict[str, list[dict]] = {}
    for r in records:
        by.setdefault(r["method"], []).append(r)
    for rows in by.values():
        rows.sort(key=lambda r: r["index"])
    fits = [r for r in by["fsosa"] if r.get("kind") == "fit" and r.get("trained")]
    if fits:  # none when every F-SOSA model was withdrawn: there is no fit to price the paper's accounting
        by["fsosa, paper accounting"] = paper_style(by["fsosa"], unit_sizes(fits[0]))
    own = own_compute_times(run, by)
    short = unconverged_solves(records)
    spent = spending(records)
    out = []
    base = by["retrain"]
    for m, rows in by.items():
        mb = {k: sum((r.get("bytes") or {}).get(k, 0) for r in rows) / 1e6 for k in KINDS}
        total = sum(mb.values())
        t = sum(r.get("makespan_s") or 0.0 for r in rows) if m != "fsosa, paper accounting" else own["fsosa"]
        acc: list[float] = [r["accuracy"] for r in rows if r.get("accuracy") is not None]
        out.append(
            {
                "dataset": dataset,
                "method": m,
                "requests": len(rows) - 1,
                "triggered": sum(int(bool(r.get("triggered"))) for r in rows[1:]),
                "trained": sum(len(r.get("trained") or []) for r in rows),
                "failed_transfers": sum(len(r.get("failed") or []) for r in rows),
                "handovers": sum(r.get("handovers") or 0 for r in rows) if m in spent else None,
                **_spent(spent.get(m)),
                "withdrawn": sum(int(r.get("kind") == "suspend") for r in rows),
                "unconverged_solves": short.get(m, {}).get("unconverged", 0) if m in spent else None,
                "max_latency_s": max((r.get("latency_s") or 0.0 for r in rows), default=0.0) if m in spent else None,
                **{f"{k}_MB": mb[k] for k in KINDS},
                "total_MB": total,
                "time_s": t,
                "compute_time_s": own.get("fsosa" if m == "fsosa, paper accounting" else m),
                "models": len(acc),  # records releasing a model (the others withdrew it or kept none)
                "final_acc": _final_accuracy(rows),
                "mean_acc": 100 * sum(acc) / len(acc) if acc else None,
                "fluctuation_pts": _fluctuation(rows[1:]),
                "max_acc_gap_vs_retrain": (
                    100
                    * max(
                        (
                            abs(a["accuracy"] - b["accuracy"])
                            for a, b in zip(rows, base, strict=False)
                            if a.get("accuracy") is not None and b.get("accuracy") is not None
                        ),
                        default=0.0,
                    )
                    if acc
                    else None
                ),  # None: a withdrawn model
            }
        )
    ref = next(r for r in out if r["method"] == "retrain")

    def saving(ours: float | None, theirs: float | None) -> float | None:
        return 100 * (ours / theirs - 1) if ours is not None and theirs else None

    for r in out:
        r["comm_saving_pct"] = saving(r["total_MB"], ref["total_MB"])
        r["compute_time_saving_pct"] = saving(r["compute_time_s"], ref["compute_time_s"])
        # the paper's accounting prices time as the seed does (common.compute_time), against Retrain's likewise
        paper = r["method"] == "fsosa, paper accounting"
        r["time_saving_pct"] = r["compute_time_saving_pct"] if paper else saving(r["time_s"], ref["time_s"])
        for k in ("spent_s", "sent_MB"):
            r[f"{k}_saving_pct"] = saving(r.get(k), ref.get(k))
    return out


def own_compute_times(run, by: dict[str, list[dict[str, Any]]]) -> dict[str, float | None]:
    """F-SOSA's and Retrain's time in seed 000's accounting (``common.compute_time``) where the
    run trained on on-board units, side by side as the accounting assumes; None on a shared device."""
    onboard = ((run.manifest().get("config") or {}).get("compute") or {}).get("mode") == "onboard"
    samples = trained_samples(run.path) if onboard else {}
    return {m: compute_time(by[m], samples) if onboard else None for m in ("fsosa", "retrain")}


def _fluctuation(rows: list[dict[str, Any]]) -> float | None:
    """The paper's fluctuation (seed 000, Section VI-C): the method's own largest minus smallest
    accuracy (points) over the models released after the requests; None when none was released."""
    acc = [100 * r["accuracy"] for r in rows if r.get("accuracy") is not None]
    return max(acc) - min(acc) if acc else None


def _final_accuracy(rows: list[dict[str, Any]]) -> float | None:
    """Accuracy (%) of the model that exists after the last record: a record that changed nothing keeps
    the one before; a withdrawal leaves none."""
    acc = None
    for r in rows:
        if r.get("kind") in ("suspend", "suspended"):
            acc = None
        elif r.get("accuracy") is not None:
            acc = 100 * r["accuracy"]
    return acc


def _spent(t: dict[str, float] | None) -> dict[str, Any]:
    """What a method really spent (:func:`vmc_sim.rundir.summary.spending`), in the report's units; None
    for the paper's accounting, which models no transfer."""
    if t is None:
        keys = ("device_s", "wasted_device_s", "airtime_s", "failed_airtime_s", "spent_s", "sent_MB", "lost_MB")
        return {**dict.fromkeys(keys), "not_arrived": None, "take_outs": None}
    return {
        "device_s": t["device_s"],
        "wasted_device_s": t["wasted_device_s"],
        "airtime_s": t["airtime_s"],
        "failed_airtime_s": t["failed_airtime_s"],
        "spent_s": t["device_s"] + t["airtime_s"],
        "sent_MB": t["bytes_sent"] / 1e6,
        "lost_MB": (t["bytes_sent"] - t["bytes_delivered"]) / 1e6,
        "not_arrived": int(t["not_arrived"]),
        "take_outs": int(t["take_outs"]),
    }


def per_request(run, dataset: str) -> list[dict[str, Any]]:
    """One row per record of every method: what the request asked, what each method trained, sent
    and spent on it, and its model's accuracy. ``compute_time_s`` is the record's time in seed 000's
    accounting of time (Appendix B-D, ``common.compute_time``: its slowest trained client plus the
    solve), filled only where that accounting holds for the whole run (on-board units), so the
    analysis can split the saving between triggered and untriggered requests."""
    records = list(run.records())
    by: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by.setdefault(r["method"], []).append(r)
    own = own_compute_times(run, by) if "fsosa" in by and "retrain" in by else {}
    samples = trained_samples(run.path) if any(v is not None for v in own.values()) else {}
    rows = []
    for r in sorted(records, key=lambda r: (r["method"], r["index"])):
        priced = own.get(r["method"]) is not None
        rows.append(
            {
                "dataset": dataset,
                "method": r["method"],
                "index": r["index"],
                "kind": r.get("kind"),
                "removed": " ".join(map(str, r.get("removed") or [])),
                "added": " ".join(map(str, r.get("added") or [])),
                "request_time": r.get("request_time"),
                "done_time": r.get("done_time"),
                "latency_s": r.get("latency_s"),
                "population": r.get("population"),
                "subset_size": r.get("subset_size"),
                "triggered": int(bool(r.get("triggered"))),
                **{f"{k}_bytes": (r.get("bytes") or {}).get(k, 0) for k in KINDS},
                "makespan_s": r.get("makespan_s"),
                "accuracy": r.get("accuracy"),
                "failed": len(r.get("failed") or []),
                "members": " ".join(map(str, r.get("members") or [])),
                "not_arrived": " ".join(map(str, r.get("not_arrived") or [])),
                "take_outs": len(r.get("take_outs") or []),
                "bytes_sent": r.get("bytes_sent"),
                "bytes_delivered": r.get("bytes_delivered"),
                "wasted_compute_s": r.get("wasted_compute_s"),
                "handovers": r.get("handovers"),
                "trained_n": len(r.get("trained") or []),
                "compute_sim_s": r.get("compute_sim_s"),
                "solve_sim_s": r.get("solve_sim_s"),
                "transfer_s": r.get("transfer_s"),
                "compute_time_s": compute_time([r], samples) if priced else None,
            }
        )
    return rows


def setting(run) -> dict[str, Any]:
    """The case study's traffic: the RSU, the clients in coverage at the first fit and the request rate."""
    rows = sorted((r for r in run.records() if r["method"] == "retrain"), key=lambda r: r["index"])
    manifest = run.manifest()
    rsus, summary = manifest.get("rsus") or [], manifest.get("summary") or {}
    fit, reqs = rows[0], rows[1:]
    t_fit = fit.get("request_time") or 0.0
    span = (reqs[-1]["request_time"] - t_fit) if reqs else 0.0
    return {
        "rsus": rsus,
        "clients_at_fit": len(fit.get("added") or ()) or fit.get("population"),
        "fit_time": t_fit,
        "requests": len(reqs),
        "span_s": span,
        "requests_per_minute": len(reqs) / (span / 60.0) if span > 0 else None,
        "joins": sum(len(r.get("added") or []) for r in reqs),
        "leaves": sum(len(r.get("removed") or []) for r in reqs),
        "teleports": summary.get("teleports") or 0,
        "not_dispatched": (summary.get("max_requests") or {}).get("events_not_dispatched") or 0,
    }


def _clock(t: float) -> str:
    t = int(round(t)) % 86400
    return f"{t // 3600:02d}:{t % 3600 // 60:02d}:{t % 60:02d}"


def setting_text(st: dict[str, Any]) -> str:
    rsu = (
        "; ".join(
            f"{r['id']} at junction {r.get('junction') or '-'} (x {r['x']:.1f}, y {r['y']:.1f}), radius "
            f"{r['radius']:g} m"
            for r in st["rsus"]
        )
        or "-"
    )
    rate = f"{st['requests_per_minute']:.2f}" if st["requests_per_minute"] else "-"
    return (
        f"Traffic: RSU {rsu}; {st['clients_at_fit']} clients in coverage at the first fit ({_clock(st['fit_time'])}, "
        f"paper: 12, the first arrival being client 12 in seed 000's Table VIII); then {st['requests']} requests ({st['joins']} arrivals, {st['leaves']} departures) in "
        f"{st['span_s'] / 60:.1f} min: **{rate} requests per minute** (the seed states no request rate)."
        + (
            f" SUMO teleported {st['teleports']} stuck vehicle(s) during the run (a jam; each leaves coverage)."
            if st.get("teleports")
            else ""
        )
        + (
            f" After the last request, {st['not_dispatched']} coverage events were not sent (coordinator.max_requests)."
            if st.get("not_dispatched")
            else ""
        )
    )


def cache_lines(caches: dict[str, dict]) -> list[str]:
    """The report's lines on the contribution cache (``caches``: dataset -> its run's manifest
    ``summary.contribution_cache``); they say whether the wall-clock is a cold run's, which it is
    only when nothing was loaded from the cache."""
    from vmc_sim.rundir.summary import contribution_cache_text

    if not caches:
        return []
    warm = any(c.get("hits") or c.get("weights_reused") for c in caches.values())
    head = "Contribution cache (records as if trained; " + (
        "the wall-clock below is not a cold run's):"
        if warm
        else "nothing was loaded from it: the wall-clock below is a cold run's):"
    )
    return ["", head, *(f"- {d}: {contribution_cache_text(c)}" for d, c in caches.items())]
