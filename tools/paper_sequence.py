"""Replay the paper's own 31-request sequence (seed 000, section VI-C) and compare the bytes
with its Tables VIII-XII.

The paper's SUMO/LuST trace produced, after an initial fit on clients 0-11, the requests

    12+ 13+ 14+ 15+ 16+ 3- 6- 7- 17+ 18+ 19+ 1- 11- 16- 2- 20+ 21+ 22+ 4- 8- 9-
    23+ 24+ 25+ 26+ 27+ 0- 10- 17- 18- 19-

(16 arrivals, 15 departures). This tool writes that sequence as a mobility trace (vehicles
``"0"``..``"27"`` parked inside one RSU's coverage, the initial 12 joining at t = 0..11 s, one
request every ``--spacing`` seconds after the fit), runs F-SOSA (``fsosa``: fixed ratio
rho = 0.5, only the clients that change train and upload) and Retrain on it through the
co-simulation, and writes ``requests.csv`` and ``report.md`` into ``--out``:

- our bytes per request, by kind, for F-SOSA and Retrain;
- "F-SOSA as implemented in the paper": the paper re-aggregates the whole subset on every
  triggered edit (one broadcast + P_t model uploads + P_t Fisher uploads, like Retrain) and
  spends nothing on an untriggered one; computed from our F-SOSA records (trigger flags, subset
  sizes) with our payload sizes;
- the paper's per-request MNIST numbers (Table VIII, transcribed below) and its cumulative
  totals for all five datasets.

Full size (the paper's): MNIST, two-layer CNN, K = 50 epochs, K-FAC, 16-bit uploads, 28 data
shards. ``--quick``: 1 epoch, a 6,000-sample training slice, 1,000 test samples.

    python tools/paper_sequence.py --quick
    python tools/paper_sequence.py                       # full size
    python tools/paper_sequence.py --quick --dataset digits --model mlp   # seconds (CI)
"""

from __future__ import annotations

import argparse
import csv
import shutil
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypedDict

from fl_core.models import MODELS
from mobility.events import MobilityEvent
from mobility.trace import write_trace
from vmc_sim.reproduction.common import paper_style, unit_sizes
from vmc_sim.reproduction.paper_sequence import (
    INITIAL_CLIENTS,
    KINDS,
    METHODS,
    SEQUENCE,
    fit_time,
    paper_mnist,
    parse_sequence,
    report,
    request_labels,
)

ROOT = Path(__file__).resolve().parents[1]


class RsuSpec(TypedDict):
    id: str
    x: float
    y: float
    radius: float


RSU: RsuSpec = {"id": "rsu0", "x": 0.0, "y": 0.0, "radius": 300.0}
SCENARIO = ROOT / "scenarios" / "paper_sequence.yaml"


SMOKE_ARGS = "--dataset digits --model mlp"  # extra arguments of the CI smoke run (tests/test_reproductions.py)


def build_events(spacing: float = 60.0, text: str = SEQUENCE, initial: int = INITIAL_CLIENTS) -> list[MobilityEvent]:
    """Joins of the initial vehicles (t = 0, 1, ...) then one request every ``spacing`` s after the fit.

    Every vehicle is parked at its own spot 20-80 m from the RSU (well inside its coverage) and
    leaves from that same spot, so no transfer can fail for lack of coverage."""
    if spacing <= 0:
        raise ValueError(f"spacing must be positive, got {spacing}")

    def spot(v: str) -> tuple[float, float]:
        i = int(v)
        return 20.0 + 10.0 * (i % 7), 10.0 * (i // 7)

    events = [MobilityEvent(float(i), "join", str(i), RSU["id"], *spot(str(i)), 0.0) for i in range(initial)]
    t0 = fit_time(initial)
    for k, (kind, v) in enumerate(parse_sequence(text, initial), 1):
        events.append(MobilityEvent(t0 + k * spacing, kind, v, RSU["id"], *spot(v), 0.0))
    return events


def write_paper_trace(path: str | Path, spacing: float = 60.0) -> Path:
    events = build_events(spacing)
    meta = {
        "source": "paper-sequence",
        "sequence": SEQUENCE,
        "clock": {"begin": 0.0, "step_length": 1.0},
        "rsus": [dict(RSU)],
        "coverage": {},
    }
    return write_trace(path, events, meta, end_time=events[-1].time + spacing, overwrite=True)


# --- the run ---------------------------------------------------------------------------------
def build_scenario(args: argparse.Namespace, trace: Path):
    from vmc_sim.scenario.config import load_model
    from vmc_sim.scenario.schema import Scenario, load_scenario

    data = load_scenario(args.scenario).model_dump(mode="json", exclude_unset=False)
    fed, train = data["federated"], data["federated"]["train"]
    data["mobility"]["trace"] = str(trace)
    data["duration"] = fit_time() + (len(SEQUENCE.split()) + 1) * args.spacing
    data["seed"] = args.seed
    data["coordinator"]["warmup"] = fit_time()
    data["coordinator"]["min_clients"] = INITIAL_CLIENTS
    if args.quick:
        train["epochs"] = 1
        fed["max_train_samples"], fed["max_test_samples"] = 6000, 1000
    for key, value in (
        ("dataset", args.dataset),
        ("model", args.model),
        ("alpha", args.alpha),
        ("max_train_samples", args.max_train),
        ("max_test_samples", args.max_test),
    ):
        if value is not None:
            fed[key] = value
    for key, value in (
        ("epochs", args.epochs),
        ("fisher", args.fisher),
        ("upload_dtype", args.upload_dtype),
        ("device", args.device),
    ):
        if value is not None:
            train[key] = value
    if args.compute_mode:
        data["compute"]["mode"] = args.compute_mode
    if args.time_model:
        data["compute"]["time_model"] = args.time_model
    data["name"] = "paper-sequence" + ("-quick" if args.quick else "")
    return load_model(Scenario, None, data)


def collect(records: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Records by method, in request order, checked: one per request (fit + 31)."""
    by: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by.setdefault(r["method"], []).append(r)
    n = 1 + len(SEQUENCE.split())
    for m, rows in by.items():
        rows.sort(key=lambda r: r["index"])
        if [r["index"] for r in rows] != list(range(n)):
            raise RuntimeError(f"{m}: expected records for requests 0..{n - 1}, got {[r['index'] for r in rows]}")
        for r, (label, parsed) in zip(rows[1:], zip(SEQUENCE.split(), parse_sequence(), strict=True), strict=True):
            kind, v = parsed
            got = r.get("removed") if kind == "leave" else r.get("added")
            if list(got or []) != [v]:
                raise RuntimeError(
                    f"{m}: request {r['index']} should be {label}, the record has "
                    f"removed={r.get('removed')} added={r.get('added')}"
                )
    return by


def write_csv(path: Path, runs: dict[str, list[dict[str, Any]]], paper: list[dict[str, Any]]) -> None:
    labels = request_labels()
    fields = [
        "method",
        "index",
        "request",
        "request_time",
        "population",
        "subset_size",
        "triggered",
        "left",
        "joined",
        "trained",
        *[f"{k}_bytes" for k in KINDS],
        "total_bytes",
        "cum_total_bytes",
        "makespan_s",
        "accuracy",
        "failed_transfers",
        "paper_mnist_triggered",
        "paper_mnist_subset_size",
        *[f"paper_mnist_{k}_MB" for k in ("broadcast", "model_upload", "fisher_upload", "total")],
    ]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for m in METHODS:
            cum = 0
            side = 1 if m == "retrain" else 0
            for r, p in zip(runs[m], paper, strict=False):
                cum += r["total_bytes"]
                w.writerow(
                    {
                        "method": m,
                        "index": r["index"],
                        "request": labels[r["index"]],
                        "request_time": r.get("request_time"),
                        "population": r.get("population"),
                        "subset_size": r.get("subset_size"),
                        "triggered": int(bool(r.get("triggered"))),
                        "left": " ".join(map(str, r.get("left") or [])),
                        "joined": " ".join(map(str, r.get("joined") or [])),
                        "trained": " ".join(map(str, r.get("trained") or [])),
                        **{f"{k}_bytes": int(r["bytes"][k]) for k in KINDS},
                        "total_bytes": int(r["total_bytes"]),
                        "cum_total_bytes": int(cum),
                        "makespan_s": "" if r.get("makespan_s") is None else round(r["makespan_s"], 3),
                        "accuracy": "" if r.get("accuracy") is None else round(r["accuracy"], 5),
                        "failed_transfers": len(r.get("failed") or []),
                        "paper_mnist_triggered": int(p["triggered"]) if m != "retrain" else 1,
                        "paper_mnist_subset_size": p["subset_size"],
                        **{
                            f"paper_mnist_{k}_MB": p[k][side]
                            for k in ("broadcast", "model_upload", "fisher_upload", "total")
                        },
                    }
                )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="smoke size: 1 epoch, 6,000 training / 1,000 test samples")
    p.add_argument("--epochs", type=int, default=None, help="K local epochs (full size: 50)")
    p.add_argument("--spacing", type=float, default=60.0, help="simulated seconds between requests")
    p.add_argument("--dataset", default=None, help="dataset (default mnist; digits for a seconds-long smoke run)")
    p.add_argument("--model", default=None, choices=MODELS.names())
    p.add_argument("--alpha", type=float, default=None, help="Dirichlet label skew of the 28 shards")
    p.add_argument("--fisher", default=None, help="kfac (default), diagonal, ...")
    p.add_argument("--upload-dtype", default=None, help="float16 (default), bfloat16, float32")
    p.add_argument("--max-train", type=int, default=None)
    p.add_argument("--max-test", type=int, default=None)
    p.add_argument("--device", default=None)
    p.add_argument("--compute-mode", default=None, choices=["onboard", "shared_gpu"])
    p.add_argument("--time-model", default=None, choices=["device", "measured"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--scenario", default=str(SCENARIO), help="base scenario (full-size settings)")
    p.add_argument("--out", default=str(ROOT / "tools" / "out" / "paper_sequence"))
    p.add_argument("--progress", action="store_true")
    p.add_argument("--report-only", action="store_true", help="only rewrite the CSV and report from --out/run")
    args = p.parse_args(argv)

    from fl_core.data import load_dataset
    from fl_core.models import build_model, num_params
    from vmc_sim.cosim import run_scenario
    from vmc_sim.rundir.directory import RunDir

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    run_path = out / "run"
    if args.report_only:  # rebuild requests.csv and report.md from the run already in --out
        from vmc_sim.scenario.config import load_model
        from vmc_sim.scenario.schema import Scenario

        run = RunDir(run_path)
        manifest = run.manifest()
        if manifest.get("status") != "complete":
            raise SystemExit(f"{run_path}: the run is not complete (status {manifest.get('status')!r})")
        scenario = load_model(Scenario, None, manifest["config"])
        wall = float(manifest.get("summary", {}).get("wall_s", float("nan")))
        args.quick = scenario.name.endswith("-quick")
    else:
        trace = write_paper_trace(out / "trace.jsonl", args.spacing)
        scenario = build_scenario(args, trace)
        if run_path.exists():  # records are appended: start from an empty run directory
            shutil.rmtree(run_path)
        t0 = time.perf_counter()
        run = run_scenario(scenario, run_dir=run_path, progress=args.progress, say=print)
        wall = time.perf_counter() - t0

    by = collect(run.records())
    for m in ("fsosa", "retrain"):
        if m not in by:
            raise RuntimeError(f"the run has no {m} records (methods: {sorted(by)})")
    unit = unit_sizes(by["retrain"][0])
    by["fsosa_paper"] = paper_style(by["fsosa"], unit)
    paper = paper_mnist()

    fed, train = scenario.federated, scenario.federated.train
    test = load_dataset(fed.dataset, "test", fed.data_root)
    model = build_model(
        fed.model, test.input_shape, test.num_classes, **({"hidden": (32,)} if fed.model == "mlp" else {})
    )
    info = {
        "size": "quick" if args.quick else "full",
        "dataset": fed.dataset,
        "model": fed.model,
        "params": num_params(model),
        "input": "x".join(map(str, test.input_shape)),
        "cnn_mnist_params": num_params(build_model("cnn", (1, 28, 28), 10)),
        "epochs": train.epochs,
        "fisher": getattr(train.fisher, "value", train.fisher),
        "upload_dtype": train.upload_dtype,
        "num_clients": fed.num_clients,
        "alpha": fed.alpha,
        "rho": fed.rho,
        "seed": scenario.seed,
        "train_samples": fed.max_train_samples or "all",
        "test_samples": fed.max_test_samples or "all",
        "spacing": by["fsosa"][2]["request_time"] - by["fsosa"][1]["request_time"],
        "compute": f"{scenario.compute.mode}/{scenario.compute.time_model.value}",
        "wall_s": wall,
        "run_dir": str(run_path),
    }
    write_csv(out / "requests.csv", by, paper)
    text = report(by, paper, unit, info)
    (out / "report.md").write_text(text)
    print(text)
    print(f"wrote {out / 'requests.csv'} and {out / 'report.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
