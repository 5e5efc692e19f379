"""What a run did, in words: per-method totals, what each method really spent, and notes on
anything that changed the run (withdrawn models, traffic ending early, caches, solves)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from .directory import RunDir, describe_status
from .records import WithdrawalCause
from .solves import unconverged_solves, warning_lines


def _s(seconds: float) -> str:
    """Seconds for a table: one decimal from 10 s up, three significant digits below (a job on a
    fast simulated device takes milliseconds)."""
    return f"{seconds:.1f}" if abs(seconds) >= 10 or seconds == 0 else f"{seconds:.3g}"


def spending(records: Iterable[dict]) -> dict[str, dict[str, float]]:
    """What each method really spent, from its records: device seconds (training, Fisher, solves)
    and those wasted on contributions that never arrived, airtime and the part of it lost to failed
    transfers, bytes sent on the air and bytes delivered, contributions that never arrived and the
    take-outs that removed them."""
    out: dict[str, dict[str, float]] = {}
    for r in records:
        t = out.setdefault(
            r["method"],
            dict.fromkeys(
                ("device_s", "wasted_device_s", "airtime_s", "failed_airtime_s", "bytes_sent", "bytes_delivered"),
                0.0,
            )
            | {"not_arrived": 0, "take_outs": 0, "kept_unarrived": 0},
        )
        t["device_s"] += r.get("compute_sim_s", 0.0) + r.get("solve_sim_s", 0.0)
        t["wasted_device_s"] += r.get("wasted_compute_s", 0.0)
        t["airtime_s"] += r.get("transfer_s", 0.0)
        t["failed_airtime_s"] += r.get("failed_transfer_s", 0.0)
        t["bytes_sent"] += r.get("bytes_sent", 0)
        t["bytes_delivered"] += r.get("bytes_delivered", 0)
        t["not_arrived"] += len(r.get("not_arrived") or ())
        t["take_outs"] += len(r.get("take_outs") or ())
        t["kept_unarrived"] += len(r.get("kept_unarrived") or ())
    return out


def spending_lines(spent: dict[str, dict[str, float]], order: list[str], reference: str = "retrain") -> list[str]:
    """The spending table; savings are against ``reference`` on everything each method spent
    (device time + airtime, bytes sent), failed work included."""
    ref = spent.get(reference)
    lines = [
        "",
        f"{'spent':<10} {'device s':>9} {'wasted':>7} {'airtime s':>9} {'failed':>7} {'MB sent':>9} "
        f"{'MB lost':>8} {'not arrived':>11} {'time vs ' + reference:>16} {'MB vs ' + reference:>14}",
    ]
    for m in order:
        t = spent[m]
        time_vs = mb_vs = "-"
        if ref is not None and m != reference:
            base_t, base_b = ref["device_s"] + ref["airtime_s"], ref["bytes_sent"]
            if base_t > 0:
                time_vs = f"{100 * ((t['device_s'] + t['airtime_s']) / base_t - 1):+.1f} %"
            if base_b > 0:
                mb_vs = f"{100 * (t['bytes_sent'] / base_b - 1):+.1f} %"
        lines.append(
            f"{m:<10} {_s(t['device_s']):>9} {_s(t['wasted_device_s']):>7} {_s(t['airtime_s']):>9} "
            f"{_s(t['failed_airtime_s']):>7} {t['bytes_sent'] / 1e6:>9.2f} "
            f"{(t['bytes_sent'] - t['bytes_delivered']) / 1e6:>8.2f} {int(t['not_arrived']):>11} {time_vs:>16} {mb_vs:>14}"
        )
    return lines


def dwell_job_lines(summary: dict[str, Any]) -> list[str]:
    """Dwell in coverage against each method's job times (median, 10th-90th percentile), and the
    warnings of methods whose jobs mostly outlast a dwell."""
    dwell, jobs = summary.get("dwell_s"), summary.get("job_s") or {}
    if not dwell:
        return []

    def span(d: dict[str, Any]) -> str:
        if not d.get("count"):
            return "none"
        return f"median {_s(d['median'])} s (p10 {_s(d['p10'])}, p90 {_s(d['p90'])}; {d['count']})"

    lines = ["", f"dwell in coverage: {span(dwell)}, {dwell.get('censored', 0)} still covered at the end"]
    for m, d in jobs.items():
        share = d.get("longer_than_median_dwell")
        beyond = "" if share is None else f"; {100 * share:.0f} % longer than the median dwell"
        lines.append(f"jobs of {m}: {span(d)}{beyond}")
    lines += [f"{m}: {text}" for m, text in (summary.get("dwell_warnings") or {}).items()]
    return lines


def contribution_cache_text(cache: dict) -> str:
    """A run's use of the contribution cache (its manifest's ``summary.contribution_cache``), in words."""
    reused, rejected = cache.get("weights_reused", 0), cache.get("rejected", 0)
    bad = f", {rejected} cached entries did not verify (not used; computed again)" if rejected else ""
    return (
        f"contribution cache: {cache['hits']} of {cache['hits'] + cache['misses']} contributions loaded "
        f"(hit rate {100 * cache['hit_rate']:.0f} %), {reused} computed at cached trained weights (Fisher only), "
        f"{cache['misses'] - reused} trained{bad}; {cache['path']}"
    )


TOTALS = (
    "requests",
    "triggered",
    "total_MB",
    "sim_time_s",
    "sim_compute_s",
    "mean_latency_s",
    "failed_transfers",
    "withdrawn",
    "final_accuracy",
    "unconverged_solves",
)
"""The per-method totals of a run, as ``vmc run`` prints them and a sweep's ``results.csv`` holds them."""


def method_totals(records: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per method, in order of first record: requests answered (the first fit's included; a
    record of a batch window counts every request it answered), how many triggered a change, MB,
    simulated time (sum of makespans) and compute, mean latency, failed transfers, withdrawals
    (records of kind ``suspend``, counted by cause in ``withdrawn_by``), the accuracy of the model that exists at the end (NaN when the
    last thing that happened to it was a withdrawal) and solves stopped before their tolerance.
    The one code path of ``vmc run``'s table and a sweep's row."""
    rows = [r for r in records if "method" in r]
    totals: dict[str, dict[str, Any]] = {}
    latencies: dict[str, list[float]] = {}
    for r in rows:
        t = totals.setdefault(r["method"], {"method": r["method"], **dict.fromkeys(TOTALS, 0), "withdrawn_by": {}})
        if t["requests"] == 0:
            t.update(total_MB=0.0, sim_time_s=0.0, sim_compute_s=0.0, final_accuracy=math.nan)
        t["requests"] += len(r.get("requests") or [r.get("index")])
        t["triggered"] += int(bool(r.get("triggered")))
        t["total_MB"] += r.get("total_bytes", 0) / 1e6
        t["sim_time_s"] += r.get("makespan_s", 0.0)
        t["sim_compute_s"] += r.get("compute_sim_s", 0.0)
        latencies.setdefault(r["method"], []).append(float(r.get("latency_s", 0.0)))
        t["failed_transfers"] += len(r.get("failed") or [])
        if r.get("kind") == "suspend":
            t["withdrawn"] += 1
            cause = r.get("cause", WithdrawalCause.COVERAGE.value)  # runs before causes were recorded
            t["withdrawn_by"][cause] = t["withdrawn_by"].get(cause, 0) + 1
            t["final_accuracy"] = math.nan
        elif r.get("accuracy") is not None:
            t["final_accuracy"] = r["accuracy"]
    short = unconverged_solves(rows)
    for m, t in totals.items():
        t["mean_latency_s"] = sum(latencies[m]) / len(latencies[m])
        t["unconverged_solves"] = short.get(m, {}).get("unconverged", 0)
    return totals


def final_accuracy_text(t: dict[str, Any]) -> str:
    """The final accuracy cell: percent, or ``withdrawn`` when no model exists at the end."""
    acc = t["final_accuracy"]
    if isinstance(acc, float) and math.isnan(acc):
        return "withdrawn" if t["withdrawn"] else "none"
    return f"{100 * acc:.2f}"


def summarize(run: RunDir) -> str:
    """Totals per method (:func:`method_totals`), what each spent, and every note a reader needs."""
    rows = list(run.records())
    totals = method_totals(rows)
    unreachable: dict[str, int] = {}
    for r in rows:
        hit = bool(((r.get("extra") or {}).get("unlearn") or {}).get("ranked_out_of_coverage"))
        unreachable[r["method"]] = unreachable.get(r["method"], 0) + int(hit)
    try:
        manifest = run.manifest()
    except (OSError, ValueError):
        manifest = {}
    federated = (manifest.get("config") or {}).get("federated") or {}
    status = manifest.get("status")
    partial = (
        [f"note: this run is {describe_status(run.path, status)}: the figures cover its {len(rows)} records so far"]
        if status and status != "complete"
        else []
    )
    listed = [m for m in federated.get("methods") or [] if m in totals]
    totals = {m: totals[m] for m in [*listed, *(m for m in totals if m not in listed)]}  # the scenario's order
    lines = [
        "",
        *partial,
        f"{'method':<10} {'requests':>8} {'triggered':>9} {'MB':>10} {'sim time s':>10} {'sim compute s':>13} "
        f"{'mean latency s':>14} {'failed':>6} {'withdrawn':>9} {'final acc %':>11}",
    ]
    for m, t in totals.items():
        lines.append(
            f"{m:<10} {t['requests']:>8} {t['triggered']:>9} {t['total_MB']:>10.2f} {_s(t['sim_time_s']):>10} "
            f"{_s(t['sim_compute_s']):>13} {_s(t['mean_latency_s']):>14} {t['failed_transfers']:>6} "
            f"{t['withdrawn']:>9} {final_accuracy_text(t):>11}"
        )
    spent = spending(rows)
    if any("bytes_sent" in r for r in rows):
        lines += spending_lines(spent, [m for m in totals if m in spent])
    lines += dwell_job_lines(manifest.get("summary") or {})
    for m, t in totals.items():
        if unreachable.get(m):
            lines.append(
                f"note: {m}: {unreachable[m]} unlearning request(s) found no retained participant in "
                f"coverage and ranked every past participant instead, out of coverage ones included "
                f"(records' extra.unlearn)"
            )
        if t["withdrawn"]:
            end = (
                "; it was withdrawn at the end (final acc: withdrawn)" if final_accuracy_text(t) == "withdrawn" else ""
            )
            why = "; ".join(f"{n} when {WithdrawalCause(c).words}" for c, n in sorted(t["withdrawn_by"].items()))
            lines.append(
                f"note: {m}: the model was withdrawn {t['withdrawn']} time(s): {why} (records of kind 'suspend'){end}"
            )
    summary = manifest.get("summary") or {}
    held, asked = summary.get("validation_held"), federated.get("validation_samples")
    if held is not None and asked is not None and held < asked:
        lines.append(
            f"note: the merges selected their damping on {held} held-out samples (federated.validation_samples "
            f"asks {asked}; at most 10 % of the training set is held out)"
        )
    repaired = summary.get("partition_repaired")
    if repaired:
        lines.append(
            f"note: no Dirichlet draw of the split (of {repaired['attempts']}) gave every client a sample: "
            f"{repaired['samples_moved']} sample(s) were moved to empty clients, so the label skew is not "
            "exactly Dir(alpha) (federated.alpha)"
        )
    ended = summary.get("traffic_ended_early")
    if ended:
        how = (
            ""
            if ended.get("trace_complete") is None or ended.get("trace_status") == "finished"
            else "; the replayed trace has no end record (its recorder stopped)"
            if not ended["trace_complete"]
            else f"; the replayed trace ended with status '{ended.get('trace_status')}'"
            + (f" ({ended['trace_message']})" if ended.get("trace_message") else "")
        )
        lines.append(
            f"note: traffic ended at {ended['at']:.1f} s, {ended['scenario_end'] - ended['at']:.1f} s before "
            f"the scenario's end ({ended['scenario_end']:.1f} s): no arrival or departure after it{how}"
        )
    cut = (summary.get("drain") or {}).get("traffic_cut")
    if cut:
        lines.append(
            f"note: {', '.join(cut['busy'])} still had work {cut['after_s']:.0f} s after the end of traffic "
            f"(coordinator.drain_s): the traffic then ended ({cut['covered']} vehicle(s) still covered went out "
            f"of reach), what was in flight failed, and the last record came {summary['drain']['s']:.0f} s "
            "after the end"
        )
    lines += radio_lines(summary.get("radio"))
    teleports = summary.get("teleports")
    if teleports:
        lines.append(
            f"note: SUMO teleported {teleports} vehicle(s) stuck longer than sumo.time_to_teleport (a jam); "
            f"a teleport takes a vehicle out of coverage, so it may have sent departures and arrivals"
        )
    capped = summary.get("max_requests") or {}
    if capped.get("events_not_dispatched"):
        lines.append(
            f"note: coordinator.max_requests = {capped['cap']} was reached: {capped['events_not_dispatched']} "
            f"later coverage event(s) (arrivals and departures) were not sent as requests, so the final "
            f"models still hold vehicles that left after it"
        )
    traced = (manifest.get("mobility") or {}).get("trace_cache")
    if traced and traced.get("rejected"):
        lines.append(
            f"mobility: the cached trace {traced['key'][:12]} did not verify (changed, truncated or too "
            f"short) and was not used; SUMO ran and recorded it again"
        )
    if traced and traced.get("hit"):
        lines.append(
            f"mobility: replayed the cached trace {traced['key'][:12]} (SUMO did not run; same traffic, "
            f"same records); {(manifest.get('config') or {}).get('mobility', {}).get('trace_cache')}"
        )
    cache = summary.get("contribution_cache")
    if cache:
        lines.append(contribution_cache_text(cache))
    min_clients = ((manifest.get("config") or {}).get("coordinator") or {}).get("min_clients")
    for m in federated.get("methods") or []:
        if m not in totals:
            lines.append(
                f"note: {m}: no record: no model was ever fitted (coverage never held "
                f"coordinator.min_clients = {min_clients} vehicles after the warm-up)"
            )
    min_available = (federated.get("rounds") or {}).get("min_available")
    for m in federated.get("strategies") or []:
        if m not in totals:
            lines.append(
                f"note: {m}: no record: no round ran (coverage never held coordinator.min_clients = "
                f"{min_clients} vehicles after the warm-up, then rounds.min_available = {min_available})"
            )
    try:
        tol = float(manifest["config"]["federated"]["projection"]["tol"])
    except (KeyError, TypeError, ValueError):
        tol = float("nan")
    lines += warning_lines(unconverged_solves(rows), tol)
    return "\n".join(lines)


def radio_lines(radio: dict[str, Any] | None) -> list[str]:
    """The run summary's lines on the radio: its link states, the buildings or their stand-in, which
    RSUs shared the air, and the time links spent in each state."""
    if not radio:
        return []
    model = radio["link_state_model"]
    if model == "los":
        lines = ["radio: every link line of sight (link_state_model: los, the idealised channel)"]
    elif radio.get("buildings") is not None:
        lines = [f"radio: link states {model}; NLOS by {radio['buildings']} building footprint(s)"]
    elif radio.get("stand_in"):
        lines = [
            f"radio: link states {model}; the scenario names no buildings: the {radio['stand_in']} stood in "
            "for them (mobility.buildings: SUMO polygon files)"
        ]
    else:
        lines = [f"radio: link states {model}; no buildings, so no link is NLOS"]
    shared = [d for d in radio.get("shared_air") or [] if "+" in d]
    if shared:
        lines.append(f"radio: RSUs sharing the air: {'; '.join(shared)}")
    for method, share in (radio.get("state_share") or {}).items():
        if share:
            parts = ", ".join(f"{k.upper() if k != 'nlosv' else 'NLOSv'} {100 * v:.1f} %" for k, v in share.items())
            lines.append(f"radio: {method}: time links carried a transfer: {parts}")
    return lines
