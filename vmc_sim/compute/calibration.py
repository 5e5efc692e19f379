"""The calibrated time model (``compute.time_model: calibrated``; the default is ``profile``).

Simulated compute must not depend on which method ran first, nor on host noise. So a job's
simulated duration is never the host time it happened to take: it is a **cost per unit of
work**, measured once per process, times the work the job does, which is a deterministic
function of the scenario and its seeds:

- local training: ``train_s_per_sample_epoch x samples x epochs``;
- the Fisher pass after it: ``fisher_s_per_sample x samples``;
- the coordinator's solve: ``solve_s_per_unit x (1 + operator products)`` of the solve
  (a closed-form diagonal solve is one unit; CG adds one unit per Fisher-vector product;
  measured on solves cut at ``CALIBRATION_SOLVE_ITER`` products, which is enough for a cost per
  product and keeps a K-FAC calibration to minutes).

The costs are measured on the scenario's own model, training settings and client shards (the
eight around the median size, so fixed per-call overheads weigh as for a typical client), after a
warm-up that is thrown away (the first training in a process pays for thread pools, allocator
growth and lazy imports), as the median of ``repeats`` timed repeats; a private random stream
is used, so calibrating changes no result of the run. They are measured **once per machine**
and training setup: kept in memory for the process and in ``$VMC_CACHE/calibration.json``
(default ``~/.cache/vmc-sim/calibration.json``), keyed by the setup, the host, the CPU count,
torch's version and thread count, so two runs of one scenario on one machine, in one process
or two, whatever their method order, charge the same costs. ``VMC_RECALIBRATE=1`` measures
anew (and replaces the cached entry). The costs are written to the run's manifest under
``calibration`` (``source``: measured, cached or pinned). Pinning them in the scenario
(``compute.calibration``, e.g. copied from a manifest) makes simulated times identical on any
machine; ``vmc run --resume`` and ``vmc replay`` pin the recorded run's costs, and ``vmc sweep``
calibrates once in its driver and pins the costs into every point.

The host-measured seconds are still recorded, in columns named ``host_*``.
"""

from __future__ import annotations

import json
import os
import statistics
import time
import warnings
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, cast

from fl_core.json_store import read_entries, write_entry

CALIBRATION_EPOCHS = 2
CALIBRATION_CLIENTS = 8
CALIBRATION_SOLVE_ITER = 50  # operator products a timed solve may take: enough for a per-product cost


@dataclass(frozen=True)
class Calibration:
    """Costs per unit of work, and how they were measured."""

    train_s_per_sample_epoch: float
    fisher_s_per_sample: float
    solve_s_per_unit: float
    source: str = "measured"  # measured | pinned
    repeats: int = 0
    samples: int = 0
    seconds: float = 0.0  # host time the calibration took (warm-up included)
    measured_at: str = ""  # UTC time of the measurement
    load: tuple[float, float] | None = None  # the host's 1-minute load average before and after measuring
    others: float | None = None  # cores other processes kept busy, on average, while measuring (None: not known)

    def client_seconds(self, samples: int, epochs: int, fisher: bool = True) -> float:
        """One client's local training (+ Fisher pass) on ``samples`` samples for ``epochs``."""
        return samples * (epochs * self.train_s_per_sample_epoch + (self.fisher_s_per_sample if fisher else 0.0))

    def solve_seconds(self, products: int) -> float:
        """One coordinator solve that took ``products`` operator products."""
        return self.solve_s_per_unit * (1 + max(0, int(products)))

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def costs(self) -> dict[str, float]:
        """The three costs alone (what ``compute.calibration`` takes)."""
        return {
            "train_s_per_sample_epoch": self.train_s_per_sample_epoch,
            "fisher_s_per_sample": self.fisher_s_per_sample,
            "solve_s_per_unit": self.solve_s_per_unit,
        }


HOST_COLUMNS = ("compute_s", "max_client_compute_s", "client_compute_s", "solve_s", "wall_s")
"""Report fields that are host measurements: recorded as ``host_<name>``."""


def host_columns(d: dict[str, Any]) -> dict[str, Any]:
    """A report's dict with every host-measured field renamed ``host_*`` (the solve's own
    ``seconds`` becomes ``host_projection_s``), so that every other field of a record is a
    deterministic function of the scenario and its seeds."""
    for k in HOST_COLUMNS:
        if k in d:
            d[f"host_{k}"] = d.pop(k)
    if isinstance(d.get("solve"), dict) and "seconds" in d["solve"]:
        d["host_projection_s"] = d["solve"].pop("seconds")
    return d


_CACHE: dict[str, Calibration] = {}


def calibration_key(federated) -> str:
    """What the costs depend on: dataset, model, the clients' sizes, how local training runs and
    the merge (not the seed, the number of epochs or the learning rate: the costs are per
    sample-epoch)."""
    d = federated.model_dump(mode="json")
    keep = {
        k: d[k]
        for k in (
            "dataset",
            "data_root",
            "model",
            "projection",
            "num_clients",
            "alpha",
            "scheme",
            "max_train_samples",
            "validation_samples",
        )
    }
    keep["train"] = {k: v for k, v in d["train"].items() if k not in ("epochs", "lr")}
    from fl_core.training import TRAINER_VERSION

    keep["trainer_version"] = TRAINER_VERSION  # a trainer that got faster (or slower) is measured anew
    if keep["train"].get("fisher") in ("kfac", "full"):  # merged by CG (the diagonal one in closed form)
        from fl_core.projection import SOLVER_VERSION

        keep["solver_version"] = SOLVER_VERSION
    if keep["train"].get("fisher_rank") is not None:
        # the solve is timed on the low-rank uploads, whose products now go through that form
        # (entries measured on the rebuilt factors priced them 1.8-3.5x too high)
        keep["products"] = "low_rank_uploads"
    return json.dumps(keep, sort_keys=True)


def _host_key() -> dict[str, Any]:
    import os
    import platform

    import torch

    from .host import cpu_model

    # the CPU model too: a container's node name can stay the same on another CPU
    return {
        "node": platform.node(),
        "machine": platform.machine(),
        "cpu": cpu_model(),
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }


def _cache_key(federated) -> str:
    """The machine cache's key: the setup's costs key and this host."""
    return json.dumps([json.loads(calibration_key(federated)), _host_key()], sort_keys=True)


def cache_file() -> Path:
    """``$VMC_CACHE/calibration.json``, else ``~/.cache/vmc-sim/calibration.json``."""
    env = os.environ.get("VMC_CACHE")
    return (Path(env).expanduser() if env else Path.home() / ".cache" / "vmc-sim") / "calibration.json"


def _read_cache() -> dict[str, Any]:
    return read_entries(cache_file())


def _write_cache(key: str, cal: Calibration) -> None:
    write_entry(cache_file(), key, cal.as_dict())  # a read-only home: the costs stay per process


def calibrated(federated, setup, repeats: int = 5) -> Calibration:
    """The costs for this federated section on this machine: from this process's memory, else
    the machine's cache file, else measured now (and cached in both)."""
    key = _cache_key(federated)
    fresh = os.environ.get("VMC_RECALIBRATE", "").strip() not in ("", "0")
    if key in _CACHE:
        return _CACHE[key]
    stored = None if fresh else _read_cache().get(key)
    if stored:
        try:
            load = stored.get("load")
            cal = Calibration(**{**stored, "source": "cached", "load": tuple(load) if load else None})
            if cal.train_s_per_sample_epoch > 0:
                busy = busy_host(cal, _host_key()["threads"])
                if busy:
                    warnings.warn(
                        f"the cached calibration of {federated.dataset}/{federated.model} ({cache_file()}): "
                        f"{busy}; measure anew on an idle machine (VMC_RECALIBRATE=1 or `vmc calibrate`)",
                        stacklevel=2,
                    )
                _CACHE[key] = cal
                return cal
        except TypeError:
            pass
    cal = measure(setup, federated.projection_config(), repeats)
    busy = busy_host(cal, _host_key()["threads"])
    if busy:
        warnings.warn(
            f"calibrating {federated.dataset}/{federated.model}: {busy} (simulated times inherit them; "
            "pin a quiet machine's costs with `vmc calibrate`)",
            stacklevel=2,
        )
    _write_cache(key, cal)
    _CACHE[key] = cal
    return cal


def recalibrate(scenario, repeats: int = 5, save_busy: bool = False) -> tuple[Calibration, bool]:
    """Measure a scenario's costs anew on this machine (``vmc calibrate``) and keep them in the
    machine's cache, where the next run of the same setup finds them, unless other work competed
    while measuring (``save_busy`` saves them anyway). Returns the costs and whether they were saved."""
    federated = scenario.federated
    cal = measure(federated.setup(scenario.seed), federated.projection_config(), repeats)
    if busy_host(cal, _host_key()["threads"]) and not save_busy:
        return cal, False
    key = _cache_key(federated)
    _write_cache(key, cal)
    _CACHE[key] = cal
    return cal, True


def measure(setup, projection, repeats: int = 5) -> Calibration:
    """Time ``repeats`` rounds of training ``CALIBRATION_CLIENTS`` of the scenario's own client
    shards (those around the median size, so per-call overheads weigh as they do for a typical
    client), after one warm-up round, and as many solves; the medians per unit of work."""
    import torch

    from fl_core.clients import upload_form
    from fl_core.fisher import FisherKind, new_sum
    from fl_core.projection import project
    from fl_core.rng import Streams
    from fl_core.stats import SufficientStatistics
    from fl_core.training import LocalTrainer

    t_start = time.perf_counter()
    load_before = _load_average()
    cpu_before = _cpu_snapshot()
    shards = sorted((d for d in setup.client_data.values() if len(d)), key=len)
    mid = len(shards) // 2
    lo = max(0, mid - CALIBRATION_CLIENTS // 2)
    parts = shards[lo : lo + CALIBRATION_CLIENTS]
    samples = sum(len(p) for p in parts)
    epochs = min(CALIBRATION_EPOCHS, setup.train.epochs)
    trainer = LocalTrainer(setup.model_fn, setup.w0, replace(setup.train, epochs=epochs), Streams(0))
    rng_state = torch.random.get_rng_state()
    try:
        warm = [trainer.contribute(("calibration", k), p) for k, p in enumerate(parts)]  # warm-up: discarded
        train, fisher = [], []
        for _ in range(repeats):
            done = [trainer.contribute(("calibration", k), p) for k, p in enumerate(parts)]
            train.append(sum(c.train_s for c in done) / (samples * epochs))
            fisher.append(sum(c.fisher_s for c in done) / samples)
        solve = [0.0]
        kind = FisherKind(setup.train.fisher)
        fsum = new_sum(kind, setup.model_fn())
        stats = SufficientStatistics(setup.w0.numel(), fsum, projection.weighting)
        stats.apply([], [upload_form(c, setup.train.fisher_rank) for c in warm])  # merged as uploaded
        # the cost of a product, measured on one fixed-damping solve cut at CALIBRATION_SOLVE_ITER
        # products per block (a K-FAC CNN solve to its tolerance would take ~1000: 30 min a calibration)
        projection = replace(projection, iterates=(), max_iter=min(projection.max_iter, CALIBRATION_SOLVE_ITER))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            project(stats, projection)  # warm-up
            solve = []
            for _ in range(repeats):
                _, info = project(stats, projection)
                solve.append(info.seconds / (1 + info.products))
    finally:
        torch.random.set_rng_state(rng_state)
    fisher_s = statistics.median(fisher) if FisherKind(setup.train.fisher) is not FisherKind.NONE else 0.0
    return Calibration(
        train_s_per_sample_epoch=statistics.median(train),
        fisher_s_per_sample=fisher_s,
        solve_s_per_unit=statistics.median(solve),
        source="measured",
        repeats=repeats,
        samples=samples,
        seconds=time.perf_counter() - t_start,
        measured_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        # the platform that gave a load average before measuring gives one after
        load=None if load_before is None else (load_before, cast(float, _load_average())),
        others=_others_cores(cpu_before, _cpu_snapshot()),
    )


def _load_average() -> float | None:
    """The host's 1-minute load average (None where the platform has none)."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def _cpu_snapshot() -> tuple[float, float, float] | None:
    """(CPU seconds the whole host has been busy, CPU seconds of this process, wall clock), or
    None where the host's counters cannot be read (they come from Linux's /proc/stat)."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            ticks = [int(x) for x in f.readline().split()[1:9]]
        hz = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, AttributeError):
        return None
    if len(ticks) < 5:
        return None
    idle = ticks[3] + ticks[4]  # idle + iowait
    return (sum(ticks) - idle) / hz, time.process_time(), time.perf_counter()


def _others_cores(start: tuple[float, float, float] | None, end: tuple[float, float, float] | None) -> float | None:
    """Cores that other processes kept busy on average between two :func:`_cpu_snapshot` calls:
    the host's busy CPU time less this process's own, over the wall clock between them."""
    if start is None or end is None or end[2] <= start[2]:
        return None
    return round(max(0.0, ((end[0] - start[0]) - (end[1] - start[1])) / (end[2] - start[2])), 2)


def busy_host(cal: Calibration, threads: int) -> str | None:
    """Why ``cal`` may have been measured on a busy host, or None.

    Where it was measured (``cal.others``): other processes kept more than half a core busy on
    average while it ran. The 1-minute load average lags (right after other work ends it is still
    high on an idle host), so it is only the fallback, for calibrations cached before ``others``
    existed and hosts without the counters: above half a core before measuring, or above the
    measuring process's own threads by more than half a core after it."""
    cores = f"with {threads} thread(s) on {os.cpu_count() or 1} cores"
    if cal.others is not None:
        if cal.others <= 0.5:
            return None
        return (
            f"other processes kept {cal.others:.2f} core(s) busy on average while measuring {cores}: "
            "other work competed, so these costs are likely too high"
        )
    if cal.load is None:
        return None
    before, after = cal.load
    if before <= 0.5 and after <= threads + 0.5:
        return None
    return (
        f"the host's load average was {before:.2f} before and {after:.2f} after measuring {cores}: "
        "other work competed, so these costs are likely too high"
    )


def pinned(costs) -> Calibration:
    """A calibration given in the scenario (``compute.calibration``)."""
    return Calibration(
        costs.train_s_per_sample_epoch, costs.fisher_s_per_sample, costs.solve_s_per_unit, source="pinned"
    )
