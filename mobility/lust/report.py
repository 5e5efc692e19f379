"""How a LuST run flows, against the published day: what ``vmc lust build`` and ``vmc lust report`` print.

For a window (07:00-09:00 by default, or the whole day): running vehicles against the published
curve (mean and largest relative error), vehicles inserted per hour, teleports by cause (and the
lanes where most happen), network mean speed and share of vehicles halted (speed < 0.1 m/s), and
mean trip time (vehicles that arrived in the window: arrival minus insertion; Little's law
estimate beside it), each checked against LuST's published targets at the 08:00 peak.

:class:`Recorder` collects these while SUMO steps (the demand calibration uses it on its own run,
so a build reports the same figures); :func:`run_report` replays a built scenario with its run
settings and returns a :class:`LustReport`.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import os
import re
import sys
import time as _time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mobility.lust.config import (
    LUST_PEAK_RUNNING,
    PUBLISHED_VEHICLES_PER_DAY,
    LustFiles,
    target_running,
)
from mobility.sumo import SumoSession

HALTING_SPEED = 0.1
"""m/s; SUMO's own threshold for a halting vehicle."""
PEAK = 8 * 3600.0
DAY_WINDOW = (0.0, 86400.0)
RUSH_WINDOW = (7 * 3600.0, 9 * 3600.0)

_TELEPORT = re.compile(r"Teleporting vehicle '([^']*)'; (.*?), lane='([^']*)'.*?time=([0-9]+(?:\.[0-9]+)?)")


@contextlib.contextmanager
def quiet_stderr() -> Iterator[None]:
    """Send this process's standard error (file descriptor 2) to the null device for a while.

    With warnings on (to count teleports by cause from SUMO's ``--error-log``), libsumo also
    prints every warning to standard error; that copy is dropped here."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def hhmm(t: float) -> str:
    """``HH:MM`` of a time of day in seconds (wrapping at 24 h)."""
    t = int(round(t)) % 86400
    return f"{t // 3600:02d}:{(t % 3600) // 60:02d}"


def teleport_cause(reason: str) -> str:
    """``waited too long (jam)`` -> ``jam``; ``junction collision with vehicle 'x'`` -> ``junction collision``."""
    inner = re.search(r"\(([^)]*)\)", reason)
    if inner:
        return inner.group(1).strip()
    return re.sub(r"\s+with vehicle.*$", "", reason).strip()


def parse_teleports(log_path: str | Path, begin: float = -math.inf, end: float = math.inf) -> dict[str, Any]:
    """Teleports in SUMO's warning log between ``begin`` and ``end``: total, by cause, top lanes."""
    causes: dict[str, int] = {}
    lanes: dict[str, int] = {}
    total = 0
    p = Path(log_path)
    if p.is_file():
        with open(p, errors="replace") as f:
            for line in f:
                if "Teleporting vehicle" not in line:
                    continue
                m = _TELEPORT.search(line)
                if m is None:
                    continue
                t = float(m.group(4))
                if not begin <= t <= end:
                    continue
                cause = teleport_cause(m.group(2))
                total += 1
                causes[cause] = causes.get(cause, 0) + 1
                lanes[m.group(3)] = lanes.get(m.group(3), 0) + 1
    top = sorted(lanes.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
    return {"total": total, "by_cause": dict(sorted(causes.items())), "top_lanes": dict(top)}


class Recorder:
    """Per-step counts and per-sample state of one SUMO run (see the module docstring).

    Call :meth:`step` after every ``session.step()``; it samples every ``sample_every`` s.
    ``positions_at`` (times of day) keeps the ids and positions of every vehicle at those steps
    (for sizing an RSU, :mod:`mobility.lust.rsu_fit`).
    """

    def __init__(
        self,
        begin: float,
        peak_running: float = LUST_PEAK_RUNNING,
        sample_every: float = 60.0,
        positions_at: Sequence[float] = (),
    ) -> None:
        self.begin = begin
        self.peak_running = peak_running
        self.sample_every = sample_every
        self.next_sample = begin + sample_every
        self.samples: list[dict[str, float]] = []
        self.departs: dict[str, float] = {}
        self.inserted: dict[int, int] = {}  # vehicles inserted per minute of the day
        self.trips: list[tuple[float, float]] = []  # (arrival time, trip time)
        self.arrived_now: list[tuple[str, float]] = []
        self.teleport_times: list[float] = []
        self._positions_at = sorted(float(t) for t in positions_at)
        self.positions: dict[float, tuple[list[str], list[tuple[float, float]]]] = {}

    def step(self, s: SumoSession, t: float) -> None:
        for vid in s.departed_ids():
            self.departs[vid] = t
            m = int(t // 60)
            self.inserted[m] = self.inserted.get(m, 0) + 1
        self.arrived_now = []
        for vid in s.arrived_ids():
            d = self.departs.pop(vid, None)
            if d is not None:
                self.trips.append((t, t - d))
                self.arrived_now.append((vid, t - d))
        self.teleport_times.extend(t for _ in s.teleport_ids())
        if self._positions_at and t + 1e-9 >= self._positions_at[0]:
            while self._positions_at and t + 1e-9 >= self._positions_at[0]:
                self._positions_at.pop(0)
            self.positions[t] = self._snapshot(s)
        if t + 1e-9 >= self.next_sample:
            self.samples.append(self._sample(s, t))
            self.next_sample += self.sample_every

    @staticmethod
    def _snapshot(s: SumoSession) -> tuple[list[str], list[tuple[float, float]]]:
        api = s.raw

        def _do() -> tuple[list[str], list[tuple[float, float]]]:
            ids = list(api.vehicle.getIDList())
            return ids, [tuple(api.vehicle.getPosition(v)) for v in ids]

        return s.call("vehicle.getPosition (all)", _do)

    def _sample(self, s: SumoSession, t: float) -> dict[str, float]:
        api = s.raw

        def _speeds() -> list[float]:
            return [api.vehicle.getSpeed(v) for v in api.vehicle.getIDList()]

        speeds = s.call("vehicle.getSpeed (all)", _speeds)
        n = len(speeds)
        return {
            "time": t,
            "running": n,
            "target": round(float(target_running(t, self.peak_running)), 1),
            "mean_speed": round(sum(speeds) / n, 3) if n else math.nan,
            "halted_share": round(sum(1 for v in speeds if v < HALTING_SPEED) / n, 4) if n else math.nan,
        }


@dataclass
class LustReport:
    """The figures of one run over ``[begin, end]`` (see the module docstring)."""

    begin: float
    end: float
    samples: list[dict[str, float]]
    inserted_per_hour: dict[str, int]
    inserted: int
    arrived: int
    teleports: dict[str, Any]
    mean_trip_time: float
    littles_law_trip_time: float
    peak_running: float = LUST_PEAK_RUNNING
    wall_s: float = math.nan
    simulated_s: float = math.nan
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def day(self) -> bool:
        return self.begin <= 0 and self.end >= 86400

    def _window(self) -> list[dict[str, float]]:
        return [r for r in self.samples if self.begin <= r["time"] <= self.end and r["target"] > 0]

    @property
    def mean_relative_error(self) -> float:
        w = self._window()
        return sum(abs(r["running"] - r["target"]) / r["target"] for r in w) / len(w) if w else math.nan

    @property
    def max_relative_error(self) -> float:
        w = [r for r in self._window() if r["target"] >= 0.05 * self.peak_running]
        return max((abs(r["running"] - r["target"]) / r["target"] for r in w), default=math.nan)

    def at(self, t: float) -> dict[str, float] | None:
        """The sample nearest to ``t`` (None without samples)."""
        return min(self.samples, key=lambda r: abs(r["time"] - t)) if self.samples else None

    def window_mean(self, key: str) -> float:
        vals = [r[key] for r in self._window() if not math.isnan(r[key])]
        return sum(vals) / len(vals) if vals else math.nan

    def targets(self) -> list[dict[str, Any]]:
        """LuST's published targets with the measured value and whether it is met."""
        out = []
        peak = self.at(PEAK) if self.begin <= PEAK <= self.end else None

        def add(name: str, value: float, goal: str, ok: bool) -> None:
            out.append({"name": name, "value": value, "target": goal, "met": bool(ok)})

        if peak is not None:
            err = (peak["running"] - peak["target"]) / peak["target"]
            scale = self.peak_running / LUST_PEAK_RUNNING
            lo, hi = 4000 * scale, 4800 * scale
            goal = (
                "4,000-4,800"
                if scale == 1
                else f"{lo:,.0f}-{hi:,.0f} (LuST's 4,000-4,800 at a peak of {self.peak_running:,.0f})"
            )
            add(
                "running at 08:00",
                peak["running"],
                f"{goal} and within +-5 % of the curve",
                lo <= peak["running"] <= hi and abs(err) <= 0.05,
            )
            add("mean speed at 08:00 (m/s)", peak["mean_speed"], ">= 10", peak["mean_speed"] >= 10)
        if self.day:
            add(
                "inserted vehicles in the day",
                self.inserted,
                f"within 10 % of {PUBLISHED_VEHICLES_PER_DAY:,}",
                abs(self.inserted / PUBLISHED_VEHICLES_PER_DAY - 1) <= 0.10,
            )
            add("teleports in the day", self.teleports["total"], "< 100", self.teleports["total"] < 100)
        else:
            add(
                f"teleports {hhmm(self.begin)}-{hhmm(self.end)}",
                self.teleports["total"],
                "< 50",
                self.teleports["total"] < 50,
            )
        add("mean trip time (s)", round(self.mean_trip_time, 1), "400-700", 400 <= self.mean_trip_time <= 700)
        return out

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(
            mean_relative_error=self.mean_relative_error,
            max_relative_error=self.max_relative_error,
            mean_speed=self.window_mean("mean_speed"),
            halted_share=self.window_mean("halted_share"),
            at_0800=self.at(PEAK) if self.begin <= PEAK <= self.end else None,
            targets=self.targets(),
        )
        return d

    def summary(self) -> str:
        """Text for humans: the figures, then the targets."""
        w = f"{hhmm(self.begin)}-{hhmm(self.end) if self.end < 86400 else '24:00'}"
        lines = [
            f"LuST run {w}"
            + (f" (simulated {self.simulated_s:.0f} s in {self.wall_s:.0f} s)" if not math.isnan(self.wall_s) else ""),
            f"  running vs published curve: mean error {100 * self.mean_relative_error:.1f} %, "
            f"largest {100 * self.max_relative_error:.1f} %",
            "  inserted per hour: "
            + ", ".join(f"{h} {n:,}" for h, n in self.inserted_per_hour.items())
            + f" (total {self.inserted:,})",
            f"  teleports: {self.teleports['total']}"
            + (
                " (" + ", ".join(f"{k} {v}" for k, v in self.teleports["by_cause"].items()) + ")"
                if self.teleports["by_cause"]
                else ""
            ),
            f"  mean speed {self.window_mean('mean_speed'):.1f} m/s, halted {100 * self.window_mean('halted_share'):.1f} % "
            "(window means)",
            f"  mean trip time {self.mean_trip_time:.0f} s ({self.arrived:,} arrivals; Little's law "
            f"{self.littles_law_trip_time:.0f} s)",
        ]
        step = 3600 if self.day else 900
        for r in self.samples:
            if self.begin <= r["time"] <= self.end and int(round(r["time"])) % step == 0:
                err = (r["running"] - r["target"]) / r["target"] if r["target"] else math.nan
                lines.append(
                    f"  {hhmm(r['time'])}  running {r['running']:5d}  target {r['target']:6.0f} ({100 * err:+.1f} %)"
                    f"  speed {r['mean_speed']:5.1f} m/s  halted {100 * r['halted_share']:4.1f} %"
                )
        lines.append("  targets:")
        for t in self.targets():
            lines.append(f"    [{'met' if t['met'] else 'NOT met'}] {t['name']}: {t['value']} (target {t['target']})")
        return "\n".join(lines)

    def write(self, out_dir: str | Path, name: str = "report") -> dict[str, Path]:
        """``<name>.json``, ``<name>.md`` (the summary), ``<name>_curve.csv`` and a plot if matplotlib is there."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        paths = {"json": out / f"{name}.json", "md": out / f"{name}.md", "csv": out / f"{name}_curve.csv"}
        paths["json"].write_text(json.dumps(self.to_dict(), indent=2, default=_json_default) + "\n")
        paths["md"].write_text("```\n" + self.summary() + "\n```\n")
        with open(paths["csv"], "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["time_s", "running", "target", "mean_speed", "halted_share"])
            for r in self.samples:
                w.writerow([r["time"], r["running"], r["target"], r["mean_speed"], r["halted_share"]])
        with contextlib.suppress(ImportError):
            paths["png"] = self.plot(out / f"{name}_curve.png")
        return paths

    def plot(self, path: str | Path) -> Path:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        t = [r["time"] / 3600 for r in self.samples]
        fig, ax = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
        ax[0].plot(t, [r["target"] for r in self.samples], "k--", label="published (scaled)")
        ax[0].plot(t, [r["running"] for r in self.samples], label="running")
        ax[0].set_ylabel("vehicles")
        ax[0].legend()
        ax[1].plot(t, [r["mean_speed"] for r in self.samples], label="mean speed (m/s)")
        ax[1].plot(t, [100 * r["halted_share"] for r in self.samples], label="halted (%)")
        ax[1].set_xlabel("hour of day")
        ax[1].legend()
        for a in ax:
            a.axvspan(self.begin / 3600, self.end / 3600, color="0.93", zorder=0)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return Path(path)


def _json_default(v: Any) -> Any:
    return str(v)


def make_report(
    rec: Recorder,
    begin: float,
    end: float,
    teleports: dict[str, Any],
    *,
    wall_s: float = math.nan,
    simulated_s: float = math.nan,
    extra: dict[str, Any] | None = None,
) -> LustReport:
    """A :class:`LustReport` over ``[begin, end]`` from what ``rec`` collected."""
    hours: dict[str, int] = {}
    for m, n in sorted(rec.inserted.items()):  # per hour, the first one from the window's start
        if begin <= m * 60 < end:
            label = hhmm(max(m // 60 * 3600, begin))
            hours[label] = hours.get(label, 0) + n
    trips = [d for t, d in rec.trips if begin < t <= end]
    window = [r for r in rec.samples if begin <= r["time"] <= end]
    span = (window[-1]["time"] - begin) if window else 0.0
    mean_running = sum(r["running"] for r in window) / len(window) if window else math.nan
    little = mean_running * span / len(trips) if trips and span > 0 else math.nan
    return LustReport(
        begin=begin,
        end=end,
        samples=rec.samples,
        inserted_per_hour=hours,
        inserted=sum(hours.values()),
        arrived=len(trips),
        teleports=teleports,
        mean_trip_time=sum(trips) / len(trips) if trips else math.nan,
        littles_law_trip_time=little,
        peak_running=rec.peak_running,
        wall_s=wall_s,
        simulated_s=simulated_s,
        extra=extra or {},
    )


def run_report(
    files: LustFiles,
    *,
    begin: float | None = None,
    end: float | None = None,
    backend: str = "libsumo",
    seed: int = 42,
    density: float = 1.0,
    sample_every: float = 60.0,
    extra_args: Sequence[str] = (),
    positions_at: Sequence[float] = (),
    log_dir: str | Path | None = None,
    progress: Callable[[dict[str, float]], None] | None = None,
) -> tuple[LustReport, Recorder]:
    """Replay ``files`` (its run settings, ``extra_args`` on top) from its start to ``end`` and
    report over ``[begin, end]`` (defaults: the build's window)."""
    import tempfile

    w_begin = files.observe_from if begin is None else begin
    w_begin = files.begin if w_begin is None else w_begin
    w_end = files.end if end is None else end
    tmp = Path(log_dir) if log_dir is not None else Path(tempfile.mkdtemp(prefix="vmc-lust-report-"))
    tmp.mkdir(parents=True, exist_ok=True)
    log = tmp / "sumo-warnings.log"
    cfg = files.sumo_config(
        backend=backend,
        seed=seed,
        scale=density,
        extra_args=["--no-warnings", "false", "--error-log", str(log), *extra_args],
        **({"end": w_end} if w_end is not None else {}),
    )
    rec = Recorder(files.begin, files.peak_running, sample_every, positions_at)
    t0 = _time.perf_counter()
    with quiet_stderr(), SumoSession(cfg) as s:
        start = s.time
        n_samples = 0
        while not s.finished:
            t = s.step()
            rec.step(s, t)
            if progress is not None and len(rec.samples) > n_samples:
                n_samples = len(rec.samples)
                progress(rec.samples[-1])
        simulated = s.time - start
    wall = _time.perf_counter() - t0
    teleports = parse_teleports(log, w_begin, w_end if w_end is not None else math.inf)
    if log_dir is None:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    report = make_report(
        rec,
        w_begin,
        w_end if w_end is not None else s.time,
        teleports,
        wall_s=wall,
        simulated_s=simulated,
        extra={"run_settings": list(cfg.extra_args), "density": density, "seed": seed},
    )
    return report, rec


def demand_report(files: LustFiles, **kwargs: Any) -> LustReport:
    """:func:`run_report` without the recorder (the report only)."""
    kwargs.pop("peak_running", None)  # the build's own peak scales the curve
    return run_report(files, **kwargs)[0]
