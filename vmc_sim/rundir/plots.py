"""Plots of a run directory, in the manner of seed 000's Fig. 6: accuracy per request, and the
cumulative simulated time and bytes of every method against Retrain."""

from __future__ import annotations

from pathlib import Path

from .directory import RunDir, describe_status
from .outputs import run_output


def _series(run: RunDir) -> dict[str, dict[str, list[float]]]:
    out: dict[str, dict[str, list[float]]] = {}
    for r in run.records():
        if "kind" not in r:
            continue
        s = out.setdefault(r["method"], {"index": [], "acc": [], "bytes": [], "time": []})
        s["index"].append(r["index"])
        acc = r.get("accuracy")
        s["acc"].append(float("nan") if acc is None else 100 * acc)  # None: the model was withdrawn
        s["bytes"].append((s["bytes"][-1] if s["bytes"] else 0.0) + r.get("total_bytes", 0) / 1e6)
        s["time"].append((s["time"][-1] if s["time"] else 0.0) + r.get("makespan_s", 0.0))
    return out


def label_fig6(axes) -> None:
    """Titles, labels, grid and legend of Fig. 6's three panels (accuracy, time, communication)."""
    for ax, title, ylabel in zip(
        axes,
        ("Test accuracy after each request", "Cumulative time (simulated)", "Cumulative communication"),
        ("accuracy %", "seconds", "MB"),
        strict=True,
    ):
        ax.set_title(title)
        ax.set_xlabel("request")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend()


def plot_run(path: str | Path, out: str | Path | None = None, force: bool = False) -> Path:
    """Write ``fig6.png`` (three panels) into the run directory, under its lock (or to ``out``: a new
    file, or an existing one with ``force``; :func:`vmc_sim.rundir.outputs.run_output`), and return its path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run = RunDir(path, create=False)
    series = _series(run)
    if not series:
        raise ValueError(f"{path}: no request records to plot")
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for method, s in series.items():
        axes[0].plot(s["index"], s["acc"], label=method, lw=1)
        axes[1].plot(s["index"], s["time"], label=method)
        axes[2].plot(s["index"], s["bytes"], label=method)
    label_fig6(axes)
    status = (run.manifest() if (run.path / "manifest.json").is_file() else {}).get("status")
    if status and status != "complete":  # a reader must not take a partial run for a finished one
        fig.suptitle(f"{run.path.name}: {describe_status(run.path, status)} (partial: the records so far)")
    fig.tight_layout()
    try:
        with run_output(run.path, "fig6.png", out, force) as target:
            fig.savefig(target, dpi=110)
    finally:
        plt.close(fig)
    return target
