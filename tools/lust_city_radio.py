"""The LuST case study's physics setting on the idealised link and on the city's radio
(reports/lust_case_study/city_radio/).

``scenarios/lust_region.yaml`` as written keeps the link of the committed case-study reports: line
of sight everywhere, no shadowing, each RSU alone on its channel. The toolkit's default channel is
now the city's radio: TR 37.885's link states (NLOS from buildings, or, as LuST has no building
footprints, TR 38.901's UMi street-canyon LOS probability standing in for them; NLOSv behind other
vehicles from SUMO's positions), shadowing per state, and the five RSUs sharing one 802.11p
channel. This replays the same recorded traffic of each traffic seed through the scenario twice,
as written ("idealised") and with the channel section left to its defaults ("city radio"), with
one contribution store, so that both sides see the same vehicles, shards and trained
contributions and differ only in the radio. Per seed and method it records the totals (requests,
triggered, simulated time, MB, failed transfers, contributions that never arrived, withdrawals,
final accuracy) and the share of link-time per link state; the report is generated from that
table (:func:`render`).

    python tools/lust_city_radio.py --traces WORK/whole/region-42/trace.jsonl WORK/whole/region-43/trace.jsonl ...

A trace is the whole city's recording of the region at one SUMO seed (``tools/lust_region_cut.py``
keeps them as ``WORK/whole/region-<seed>/trace.jsonl``); run seed = SUMO seed - 42, as the
replicates.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from vmc_sim.reproduction import report
from vmc_sim.reproduction.case_study_analysis import mean_ci
from vmc_sim.rundir.outputs import OutputRefused

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "scenarios" / "lust_region.yaml"
RADIOS = ("idealised", "city radio")
FIELDS = (
    "seed",
    "radio",
    "method",
    "requests",
    "triggered",
    "sim_time_s",
    "total_MB",
    "failed_transfers",
    "not_arrived",
    "withdrawn",
    "final_accuracy",
    "share_los",
    "share_nlosv",
    "share_nlos",
    "wall_s",
)


def sumo_seed(trace: Path) -> int:
    """The SUMO seed the trace was recorded with (its header's scenario)."""
    from mobility.trace import read_trace

    meta = read_trace(trace).meta
    seed = (meta.get("sumo") or {}).get("seed")
    if seed is None:
        raise SystemExit(f"{trace}: its header names no SUMO seed")
    return int(seed)


def run_rows(trace: Path, work: Path) -> list[dict[str, Any]]:
    """Both radios on ``trace``: one row per radio and method."""
    from vmc_sim.cosim import replay_scenario, run_scenario
    from vmc_sim.rundir.summary import method_totals, spending
    from vmc_sim.scenario.config import load_model
    from vmc_sim.scenario.schema import Scenario

    seed = sumo_seed(trace)
    rows = []
    for radio in RADIOS:
        done = work / f"{seed}-{radio.replace(' ', '_')}.json"
        if not done.is_file():
            data = replay_scenario(trace, SCENARIO).model_dump(mode="json")
            data["seed"] = seed - 42
            data["compute"]["contribution_cache"] = str(work / "contributions")
            if radio == "city radio":
                data["channel"] = {}
            t0 = time.perf_counter()
            run = run_scenario(load_model(Scenario, None, data), out=work / "runs", progress=False, say=lambda s: None)
            wall = time.perf_counter() - t0
            records = list(run.records())
            totals, spent = method_totals(records), spending(records)
            shares = run.manifest()["summary"]["radio"]["state_share"]
            got = []
            for m, t in totals.items():
                share = shares.get(m, {})
                got.append(
                    {
                        "seed": seed,
                        "radio": radio,
                        "method": m,
                        "requests": t["requests"],
                        "triggered": t["triggered"],
                        "sim_time_s": round(t["sim_time_s"], 3),
                        "total_MB": round(t["total_MB"], 3),
                        "failed_transfers": t["failed_transfers"],
                        "not_arrived": int(spent[m]["not_arrived"]),
                        "withdrawn": t["withdrawn"],
                        "final_accuracy": ""
                        if math.isnan(t["final_accuracy"])
                        else round(100 * t["final_accuracy"], 2),
                        "share_los": round(share.get("los", 0.0), 4),
                        "share_nlosv": round(share.get("nlosv", 0.0), 4),
                        "share_nlos": round(share.get("nlos", 0.0), 4),
                        "wall_s": round(wall, 1),
                    }
                )
            done.write_text(json.dumps(got))
            print(f"seed {seed}, {radio}: {wall:.0f} s", flush=True)
        rows += json.loads(done.read_text())
    return rows


COMPARED = (
    ("sim_time_s", "simulated time (s)"),
    ("total_MB", "MB"),
    ("failed_transfers", "failed transfers"),
    ("not_arrived", "contributions that never arrived"),
    ("withdrawn", "withdrawals"),
    ("final_accuracy", "final accuracy (%)"),
)


def render(directory: Path) -> str:
    """The report from ``runs.csv`` and ``made.json`` alone."""
    made = json.loads((directory / "made.json").read_text())
    with open(directory / "runs.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    seeds = sorted({int(r["seed"]) for r in rows})
    methods = list(dict.fromkeys(r["method"] for r in rows))
    get = {(int(r["seed"]), r["radio"], r["method"]): r for r in rows}
    lines = [
        "# The case study's physics setting on the city's radio",
        "",
        f"Made: {made['made']}  ",
        f"Command: `{made['command']}`  ",
        f"Machine: {made['machine']}",
        "",
        "The five-RSU region (`scenarios/lust_region.yaml`, MNIST, F-SOSA and Retrain, one edge T4, transfers that "
        "end when a vehicle leaves the region) replays the whole city's recorded traffic of each SUMO seed twice: "
        "with the idealised link the committed reports used (line of sight, no shadowing, each RSU on its own "
        "channel) and with the default channel, the city's radio (LOS, NLOSv and NLOS per link with shadowing per "
        "state; UMi street-canyon LOS probability standing in for LuST's missing buildings; the five RSUs on one "
        "channel). Both sides load the same trained contributions; only the radio differs. Run seed = SUMO seed - 42.",
        "",
        f"Seeds: {', '.join(str(s) for s in seeds)}.",
        "",
        "## Per seed",
        "",
        "| seed | method | radio | simulated time s | MB | failed transfers | never arrived | withdrawals "
        "| final acc. % | link time LOS / NLOSv / NLOS |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in seeds:
        for m in methods:
            for radio in RADIOS:
                r = get.get((s, radio, m))
                if r is None:
                    continue
                acc = r["final_accuracy"] or "withdrawn"
                shares = f"{float(r['share_los']):.2f} / {float(r['share_nlosv']):.2f} / {float(r['share_nlos']):.2f}"
                lines.append(
                    f"| {s} | {m} | {radio} | {float(r['sim_time_s']):.1f} | {float(r['total_MB']):.1f} | "
                    f"{r['failed_transfers']} | {r['not_arrived']} | {r['withdrawn']} | {acc} | {shares} |"
                )
    lines += [
        "",
        "## City radio - idealised, paired by seed",
        "",
        "Mean of the per-seed differences with its 95 % t interval, and how many seeds moved each way.",
        "",
        "| method | figure | idealised | city radio | difference | seeds higher / lower / equal |",
        "|---|---|---|---|---|---|",
    ]
    for m in methods:
        for key, label in COMPARED:
            pairs = []
            for s in seeds:
                a, b = get.get((s, RADIOS[0], m)), get.get((s, RADIOS[1], m))
                if a is None or b is None or a[key] == "" or b[key] == "":
                    continue
                pairs.append((float(a[key]), float(b[key])))
            if not pairs:
                continue
            diffs = [b - a for a, b in pairs]
            up = sum(d > 0 for d in diffs)
            down = sum(d < 0 for d in diffs)
            lines.append(
                f"| {m} | {label} | {mean_ci([a for a, _ in pairs])} | {mean_ci([b for _, b in pairs])} | {mean_ci(diffs)} | "
                f"{up} / {down} / {len(diffs) - up - down} |"
            )
    saving = []
    for radio in RADIOS:
        per = []
        for s in seeds:
            ours, theirs = get.get((s, radio, "fsosa")), get.get((s, radio, "retrain"))
            if ours and theirs and float(theirs["sim_time_s"]):
                per.append(100 * (float(ours["sim_time_s"]) / float(theirs["sim_time_s"]) - 1))
        saving.append(f"{radio}: {mean_ci(per)}")
    lines += ["", "F-SOSA's simulated time against Retrain's, % per seed: " + "; ".join(saving) + ".", ""]
    for radio in RADIOS:
        ended = {m: [s for s in seeds if (get.get((s, radio, m)) or {}).get("final_accuracy")] for m in methods}
        lines.append(
            f"- {radio}: seeds that end with a released model: "
            + "; ".join(
                f"{m} {len(v)} of {len(seeds)}" + (f" ({', '.join(map(str, v))})" if v else "")
                for m, v in ended.items()
            )
            + "."
        )
    check = made.get("replicates_check")
    if check:
        same = sum(1 for c in check if c["committed"] is not None and abs(c["ours"] - c["committed"]) < 1e-6)
        lines.append(
            f"- The idealised side against the committed replicates' physics setting on MNIST "
            f"(`{check[0]['file']}`, replicate = seed - 42): simulated time equal on {same} of {len(check)} "
            "(seed, method) pairs."
        )
    return "\n".join(lines) + "\n"


REPLICATES = ROOT / "reports" / "lust_case_study" / "replicates" / "replicates.csv"


def replicates_check(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The idealised rows beside the committed replicates' physics setting on MNIST (the same
    scenario, traffic and seeds): their simulated time should be the same."""
    if not REPLICATES.is_file():
        return []
    with open(REPLICATES, newline="") as f:
        committed = {
            (int(r["replicate"]), r["method"]): float(r["time_s"])
            for r in csv.DictReader(f)
            if r["setting"] == "physics" and r["dataset"] == "mnist" and r["time_s"]
        }
    return [
        {
            "file": str(REPLICATES.relative_to(ROOT)),
            "seed": r["seed"],
            "method": r["method"],
            "ours": r["sim_time_s"],
            "committed": None
            if committed.get((r["seed"] - 42, r["method"])) is None
            else round(committed[(r["seed"] - 42, r["method"])], 3),
        }
        for r in rows
        if r["radio"] == RADIOS[0]
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--traces", nargs="+", type=Path, required=True, help="the whole city's traces, one per SUMO seed")
    p.add_argument("--work", type=Path, default=ROOT / "tools" / "out" / "lust_city_radio", help="runs and store")
    p.add_argument("--out", default=str(ROOT / "reports" / "lust_case_study" / "city_radio"))
    a = p.parse_args(argv)
    missing = [t for t in a.traces if not t.is_file()]
    if missing:
        p.error(f"--traces: {', '.join(map(str, missing))} does not exist")
    try:  # neither inside a run or sweep directory
        work, out = report.out_dir(a.work), report.out_dir(a.out)
    except OutputRefused as e:
        p.error(str(e))
    rows = [row for trace in a.traces for row in run_rows(trace, work)]
    report.write_csv(out / "runs.csv", rows)
    command = "python tools/lust_city_radio.py " + " ".join(sys.argv[1:] if argv is None else argv)
    made = {
        "made": report.provenance(),
        "command": command,
        "machine": report.machine(),
        "replicates_check": replicates_check(rows),
    }
    report.replace_text(out / "made.json", json.dumps(made, indent=1) + "\n")
    report.replace_text(out / "report.md", render(out))
    print(f"written {out / 'report.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
