"""The LuST case study over replicates: per-replicate figures, their mean and 95 % interval per
(setting, dataset, method), and Fig. 6 with interval bands; the analysis and the report are
:mod:`.case_study_analysis`'s, from the files these rows are written to.

A replicate is one traffic seed (SUMO's ``--seed``) and one run seed (the member draw, the data
split, W0), either or both moved on by its number (the tool's ``--vary``); every setting and dataset
of a replicate replays the same recorded traffic.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ..rundir.directory import RunDir
from ..rundir.plots import label_fig6
from ..sweep.stats import interval
from .case_study import KINDS, method_rows
from .case_study import setting as run_setting

FIGURES = (
    "time_saving_pct",
    "comm_saving_pct",
    "sent_MB_saving_pct",
    "spent_s_saving_pct",
    "device_s_saving_pct",
    "final_acc",
    "final_acc_gap_vs_retrain",
    "mean_acc",
    "fluctuation_pts",
    "max_acc_gap_vs_retrain",
    "time_s",
    "total_MB",
    "device_s",
    "airtime_s",
    "trained",
    "not_arrived",
    "withdrawn",
    "models",
)
"""The figures of a method's row that are summarised over replicates."""


def replicate_rows(entries: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every method's row of every run in ``entries`` (each: setting, replicate, dataset, run; arm,
    dataset draws and Fisher where recorded), with the replicate's keys and the F-SOSA - Retrain
    final-accuracy gap added."""
    rows: list[dict[str, Any]] = []
    for e in entries:
        found = method_rows(RunDir(e["run"], create=False), e["dataset"])
        ref = next(r for r in found if r["method"] == "retrain")
        for r in found:
            gap = None
            if r["final_acc"] is not None and ref["final_acc"] is not None:
                gap = r["final_acc"] - ref["final_acc"]
            dev = 100 * (r["device_s"] / ref["device_s"] - 1) if r.get("device_s") and ref.get("device_s") else None
            rows.append(
                {
                    "setting": e["setting"],
                    "replicate": e["replicate"],
                    "arm": e.get("arm") or "both",
                    "dataset_draws": e.get("dataset_draws") or "shared",
                    "fisher": e.get("fisher"),
                    "seed": e.get("seed"),
                    "sumo_seed": e.get("sumo_seed"),
                    **r,
                    "final_acc_gap_vs_retrain": gap,
                    "device_s_saving_pct": dev,
                    "run": str(e["run"]),
                }
            )
    return rows


def summarize_values(figure: str, values: Iterable[Any]) -> dict[str, Any]:
    """``figure``'s mean, standard deviation, 95 % half-width and count over ``values``, under the
    names :func:`summarize` gives them (what :func:`pm` reads)."""
    iv = interval(values)
    return {f"{figure}_mean": iv.mean, f"{figure}_std": iv.std, f"{figure}_ci95": iv.ci, f"{figure}_n": iv.n}


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean, standard deviation, 95 % half-width and count of every figure per (setting, dataset, method)."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["setting"], r["dataset"], r["method"]), []).append(r)
    out = []
    for (setting, dataset, method), rs in groups.items():
        row: dict[str, Any] = {"setting": setting, "dataset": dataset, "method": method, "replicates": len(rs)}
        for f in FIGURES:
            row.update(summarize_values(f, [r.get(f) for r in rs]))
        out.append(row)
    return out


def pm(row: dict[str, Any], figure: str, digits: int = 2) -> str:
    """``mean ± half-width (n)`` of ``figure`` in a summary row; ``-`` where no replicate has it."""
    n = row.get(f"{figure}_n", 0)
    if not n:
        return "-"
    mean, ci = row[f"{figure}_mean"], row[f"{figure}_ci95"]
    spread = "" if math.isnan(ci) else f" ± {ci:.{digits}f}"
    return f"{mean:.{digits}f}{spread} (n={n})"


def request_series(rows: Iterable[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, np.ndarray]]:
    """Per (setting, dataset, method): accuracy (%), cumulative time (s) and MB after each request,
    one row per replicate (NaN where the model was withdrawn or the replicate has fewer requests),
    from the rows of ``requests.csv`` (:func:`..case_study.per_request` with setting and replicate;
    values as written or as read back, strings)."""

    def num(v: Any) -> float | None:
        return None if v is None or v == "" else float(v)

    runs: dict[tuple[str, str, str, str, str], list[dict[str, Any]]] = {}
    for r in rows:
        key = (r["setting"], r["dataset"], r["method"], str(r.get("arm") or ""), str(r["replicate"]))
        runs.setdefault(key, []).append(r)
    raw: dict[tuple[str, str, str], dict[str, list[list[float]]]] = {}
    for key in sorted(runs):
        rs = sorted(runs[key], key=lambda r: int(r["index"]))
        acc = [math.nan if num(r["accuracy"]) is None else 100 * float(r["accuracy"]) for r in rs]
        t = np.cumsum([num(r["makespan_s"]) or 0.0 for r in rs]).tolist()
        mb = np.cumsum([sum(num(r[f"{k}_bytes"]) or 0.0 for k in KINDS) / 1e6 for r in rs]).tolist()
        s = raw.setdefault((key[0], key[1], key[2]), {"acc": [], "time": [], "MB": []})
        s["acc"].append(acc)
        s["time"].append(t)
        s["MB"].append(mb)
    out: dict[tuple[str, str, str], dict[str, np.ndarray]] = {}
    for group, series in raw.items():
        width = max(len(a) for a in series["acc"])
        out[group] = {k: np.array([v + [math.nan] * (width - len(v)) for v in vs]) for k, vs in series.items()}
    return out


def _band(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and 95 % half-width per column, over the finite values of each column."""
    cols = [interval(values[:, j]) for j in range(values.shape[1])]
    return np.array([c.mean for c in cols]), np.array([0.0 if math.isnan(c.ci) else c.ci for c in cols])


def plot_bands(
    series: dict[tuple[str, str, str], dict[str, np.ndarray]], setting: str, dataset: str, path: Path
) -> Path:
    """Fig. 6 of seed 000 for one setting and dataset: each method's mean over the replicates with
    its 95 % interval as a band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    n = 0
    for (st, ds, method), s in sorted(series.items()):
        if (st, ds) != (setting, dataset):
            continue
        n = max(n, s["acc"].shape[0])
        for ax, key in zip(axes, ("acc", "time", "MB"), strict=True):
            mean, half = _band(s[key])
            x = np.arange(len(mean))
            ax.plot(x, mean, label=method, lw=1.2)
            ax.fill_between(x, mean - half, mean + half, alpha=0.25)
    label_fig6(axes)
    fig.suptitle(f"{dataset}, {setting} setting: mean and 95 % interval over {n} replicates")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def distribution_rows(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every completed visit's dwell in coverage and every job's time of each run whose manifest
    holds them (``distributions.csv.gz``: the distributions ``runs.csv`` summarises); a run recorded
    under several arms once."""
    out = []
    seen = set()
    for e in entries:
        if e["run"] in seen:
            continue
        seen.add(e["run"])
        summary = RunDir(e["run"], create=False).manifest().get("summary") or {}
        keys = {k: e[k] for k in ("setting", "dataset", "fisher", "replicate", "seed", "sumo_seed")}
        series = [("dwell", (summary.get("dwell_s") or {}).get("values"))]
        series += [(f"job {m}", j.get("values")) for m, j in sorted((summary.get("job_s") or {}).items())]
        out += [{**keys, "what": what, "s": v} for what, values in series for v in values or []]
    return out


def entry_arm(e: dict[str, Any]) -> str:
    """An entry's arm; runs recorded before ``--vary`` moved both seeds."""
    return str(e.get("arm") or "both")


def entry_draws(e: dict[str, Any]) -> str:
    """An entry's dataset draws; runs recorded before ``--dataset-draws`` shared them."""
    return str(e.get("dataset_draws") or "shared")


#: runs.csv's columns on how a run came by its contributions (:func:`contribution_counts`).
CONTRIBUTION_COLUMNS = ("contributions_trained", "contributions_fisher_only", "contributions_cached")


def contribution_counts(cache: dict[str, Any] | None) -> dict[str, int | None]:
    """How a run came by its contributions, from its manifest's contribution cache (the attempt
    that finished it): trained, computed at trained weights the cache held (the Fisher only, as for
    the other Fisher's runs of the same members), or taken whole from the cache."""
    if not cache:
        return dict.fromkeys(CONTRIBUTION_COLUMNS)
    reused = int(cache.get("weights_reused", 0))
    counts = (int(cache.get("misses", 0)) - reused, reused, int(cache.get("hits", 0)))
    return dict(zip(CONTRIBUTION_COLUMNS, counts, strict=True))


def run_rows(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per run, from its manifest and records: the seeds, the traffic (the first fit's clients, the
    requests' span, teleports, coverage events held back), the dwell in coverage, how its
    contributions were made (:func:`contribution_counts`) and each method's job times (``runs.csv``)."""
    out = []
    for e in entries:
        run = RunDir(e["run"], create=False)
        summary = run.manifest().get("summary") or {}
        st = run_setting(run)
        dwell = summary.get("dwell_s") or {}
        row: dict[str, Any] = {
            "setting": e["setting"],
            "dataset": e["dataset"],
            "fisher": e.get("fisher"),
            "arm": entry_arm(e),
            "replicate": e["replicate"],
            "seed": e["seed"],
            "sumo_seed": e["sumo_seed"],
            "clients_at_first_fit": st["clients_at_fit"],
            "requests": st["requests"],
            "span_s": st["span_s"],
            "teleports": st["teleports"],
            "events_not_dispatched": st["not_dispatched"],
            "dwell_median_s": dwell.get("median"),
            "dwell_p10_s": dwell.get("p10"),
            "dwell_p90_s": dwell.get("p90"),
            "dwell_visits": dwell.get("count"),
            **contribution_counts(summary.get("contribution_cache")),
        }
        for method, jobs in sorted((summary.get("job_s") or {}).items()):
            row[f"{method}_job_median_s"] = jobs.get("median")
            row[f"{method}_jobs_longer_than_median_dwell"] = jobs.get("longer_than_median_dwell")
        out.append(row)
    return out


def setup_note(entries: list[dict[str, Any]]) -> str:
    """What seed 000 leaves open (VI-C names a city-centre region at the 08:00 rush hour, arrivals
    as contributions, departures as unlearning requests, four datasets) and how the runs chose it,
    read from the runs' own manifests."""
    from statistics import mean

    from ..cosim import manifest_scenario

    first = RunDir(entries[0]["run"], create=False).manifest()
    config, rsus = first["config"], first.get("rsus") or []
    region = (
        f"{len(rsus)} RSU(s) of radius {rsus[0]['radius']:g} m sharing one coordinator ("
        + ", ".join(str(r.get("junction") or r["id"]) for r in rsus)
        + ")"
        if rsus
        else "the scenario's RSUs"
    )
    split: dict[str, str] = {}
    for e in entries:
        if e["dataset"] not in split:
            scenario = manifest_scenario(Path(e["run"]) / "manifest.json")
            shards = list(scenario.federated.setup(scenario.seed).client_data.values())
            fd = scenario.federated
            how = "writers grouped" if fd.alpha is None else f"Dirichlet alpha {fd.alpha:g} ({fd.scheme.value})"
            split[e["dataset"]] = (
                f"{e['dataset']} {fd.num_clients} shards, {how}, {mean(len(d.y) for d in shards):,.0f} samples a shard"
            )
    radios: dict[str, str] = {}
    for e in entries:
        if e["setting"] not in radios:
            radios[e["setting"]] = radio_text(RunDir(e["run"], create=False).manifest())
    return (
        f"Setup from the runs' manifests: {region}; the first fit at the end of the warm-up, then the next "
        f"{config['coordinator']['max_requests'] - 1} requests; {'; '.join(split.values())}; each vehicle that "
        f"becomes a client holds its own shard (shard_assignment: {config['federated'].get('shard_assignment')}); "
        "the radio each setting ran on (the manifests' resolved channel): "
        + "; ".join(f"{s}: {t}" for s, t in sorted(radios.items()))
        + "."
    )


def radio_text(manifest: dict[str, Any]) -> str:
    """The run's radio in words, from its manifest's resolved ``channel`` (a scenario that names no
    channel gets the toolkit's default, which the scenario's own ``config.channel`` cannot show)."""
    ch = manifest.get("channel") or {}
    if not ch:
        return f"not recorded (scenario channel {json.dumps(manifest['config'].get('channel') or {}, sort_keys=True)})"
    air = "the RSUs sharing one channel" if ch.get("shared_air") else "each RSU on its own channel"
    return f"path loss {ch.get('path_loss_model')}, link states {ch.get('link_state_model')}, {air}"
