"""``vmc plot RUN --map``: a map of what happened in a run, one panel per method.

Each panel draws the SUMO network, the buildings the radio had, every RSU with its coverage circle
and, dashed, how far the median uplink in each link state still holds the lowest MCS, and the
track of every vehicle that became a client, coloured by what became of its contributions under
that method (:data:`vmc_sim.rundir.map_inputs.OUTCOMES`). What is drawn is read and verified by
:func:`vmc_sim.rundir.map_inputs.map_inputs`; what could not be drawn is said under the panels.

``map.png`` is written into the run directory under its lock, like ``vmc plot``'s ``fig6.png``
(:func:`vmc_sim.rundir.outputs.run_output`), or to ``--out``. ``--animate`` writes ``map.gif``
instead: the tracks grow over simulated time and a dot marks each client while it is in coverage
(matplotlib's PillowWriter; without pillow the command says so and writes nothing).

Every artist carries a ``gid`` a reader (or a test) can find it by: ``track:<vehicle>``,
``coverage:<rsu>``, ``reach:<state>:<rsu>``, ``rsu:<rsu>``, ``network``, ``buildings``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .directory import describe_status
from .map_inputs import OUTCOMES, MapInputs, bounds, map_inputs
from .outputs import OutputRefused, run_output

COLOURS = {"arrived": "#2ca02c", "not arrived": "#d62728", "withdrawn": "#ff7f0e", "not trained": "#9a9a9a"}
"""The colour of a client's track, by outcome."""
REACH_STYLES = {"los": ":", "nlosv": "-.", "nlos": "--"}
"""The line style of a link state's median-reach circle."""
STATE_NAMES = {"los": "LOS", "nlosv": "NLOSv", "nlos": "NLOS"}
FRAMES = 60
"""Frames of an animation (at most; one per state sample when there are fewer)."""


@dataclass
class MapFigure:
    """A drawn map: the figure, its panels by method, and each panel's track lines by client (what
    an animation updates)."""

    figure: Any
    axes: dict[str, Any]
    tracks: dict[str, dict[str, Any]] = field(default_factory=dict)
    dots: dict[str, Any] = field(default_factory=dict)


def _metres(d: float) -> str:
    return f"{d / 1000:.2f} km" if d >= 1000 else f"{d:.0f} m"


def _draw_panel(ax: Any, inputs: MapInputs, method: str) -> dict[str, Any]:
    """One method's panel; returns its track lines by client."""
    from matplotlib.collections import LineCollection, PolyCollection
    from matplotlib.lines import Line2D
    from matplotlib.patches import Circle

    if inputs.network:
        ax.add_collection(LineCollection(inputs.network, colors="#8c8c8c", linewidths=0.7, zorder=1, gid="network"))
    if inputs.buildings:
        polys = [list(b.points) for b in inputs.buildings]
        ax.add_collection(
            PolyCollection(polys, facecolors="#f1ece4", edgecolors="#d8cfc2", lw=0.4, zorder=0, gid="buildings")
        )
    for r in inputs.rsus:
        rid, x, y = str(r["id"]), float(r["x"]), float(r["y"])
        ax.add_patch(
            Circle((x, y), float(r["radius"]), fc="#1f77b4", alpha=0.08, ec="none", zorder=2, gid=f"coverage:{rid}")
        )
        ax.add_patch(
            Circle((x, y), float(r["radius"]), fill=False, ec="#1f77b4", lw=1.0, zorder=2, gid=f"coverage-edge:{rid}")
        )
        for state, reach in inputs.reach.items():
            ax.add_patch(
                Circle(
                    (x, y),
                    reach,
                    fill=False,
                    ec="#1f77b4",
                    lw=0.8,
                    ls=REACH_STYLES[state.value],
                    zorder=2,
                    gid=f"reach:{state.value}:{rid}",
                )
            )
        ax.plot([x], [y], marker="^", ms=8, color="#1f77b4", mec="black", zorder=5, gid=f"rsu:{rid}")
    lines: dict[str, Any] = {}
    outcome = inputs.outcomes.get(method, {})
    for client, visits in inputs.tracks.items():
        xs: list[float] = []
        ys: list[float] = []
        for visit in visits:
            xs += [p[1] for p in visit] + [math.nan]
            ys += [p[2] for p in visit] + [math.nan]
        what = outcome.get(client, "not trained")  # the rarer outcomes drawn on top of the others
        z = 3 + 0.1 * (len(OUTCOMES) - OUTCOMES.index(what))
        (lines[client],) = ax.plot(xs, ys, color=COLOURS[what], lw=1.5, alpha=0.8, zorder=z, gid=f"track:{client}")
    counts = {o: sum(1 for c in inputs.tracks if outcome.get(c, "not trained") == o) for o in OUTCOMES}
    handles = [Line2D([], [], color=COLOURS[o], lw=2, label=f"{o} ({counts[o]})") for o in OUTCOMES if counts[o]]
    handles.append(Line2D([], [], marker="^", ls="none", color="#1f77b4", mec="black", label="RSU, its coverage"))
    handles += [
        Line2D(
            [],
            [],
            color="#1f77b4",
            ls=REACH_STYLES[s.value],
            label=f"median {STATE_NAMES[s.value]} uplink: lowest MCS to {_metres(d)}",
        )
        for s, d in inputs.reach.items()
    ]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.09), ncol=2, fontsize=7, frameon=False)
    xmin, ymin, xmax, ymax = extent(inputs)
    ax.set_xlim(xmin, xmax)
    ax.set_ylim(ymin, ymax)
    ax.set_aspect("equal")
    ax.set_title(f"{method}: {len(inputs.tracks)} clients")
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    return lines


def extent(inputs: MapInputs) -> tuple[float, float, float, float]:
    """The panels' (xmin, ymin, xmax, ymax): what happened (:func:`vmc_sim.rundir.map_inputs.bounds`)
    with the streets around the cells (three quarters of a coverage radius)."""
    xmin, ymin, xmax, ymax = bounds(inputs)
    radius = max((float(r["radius"]) for r in inputs.rsus), default=0.0)
    pad = max(0.04 * max(xmax - xmin, ymax - ymin, 1.0), 0.75 * radius)
    return xmin - pad, ymin - pad, xmax + pad, ymax + pad


def map_figure(inputs: MapInputs, methods: list[str] | None = None) -> MapFigure:
    """The map of ``inputs``, one panel per method of ``methods`` (default: every method of the run)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = methods or inputs.methods or [""]
    cols = min(len(methods), 3)
    rows = math.ceil(len(methods) / cols)
    xmin, ymin, xmax, ymax = extent(inputs)
    height = 6.0 * min(max((ymax - ymin) / max(xmax - xmin, 1e-9), 0.5), 1.6)  # a panel 6 inches wide
    fig, grid = plt.subplots(
        rows,
        cols,
        figsize=(6.0 * cols, (height + 1.6) * rows + 0.3 * len(inputs.notes)),
        squeeze=False,
        layout="constrained",
    )
    drawn = MapFigure(fig, {})
    for ax, method in zip(grid.flat, methods, strict=False):
        drawn.axes[method] = ax
        drawn.tracks[method] = _draw_panel(ax, inputs, method)
    for ax in list(grid.flat)[len(methods) :]:
        ax.remove()
    title = f"{inputs.run.name} ({inputs.scenario})" + (f"; radio: {inputs.radio}" if inputs.radio else "")
    if inputs.status and inputs.status != "complete":
        title += f"\n{describe_status(inputs.run, inputs.status)} (partial: the records so far)"
    fig.suptitle(title, fontsize=10)
    if inputs.notes:
        fig.supxlabel("\n".join(inputs.notes), fontsize=7, color="#a02020", ha="left", x=0.01, wrap=True)
    return drawn


def _animate(drawn: MapFigure, inputs: MapInputs, target: Path, frames: int) -> None:
    """Grow the tracks over simulated time and mark the clients in coverage; save a GIF."""
    import numpy as np
    from matplotlib.animation import FuncAnimation, PillowWriter

    drawn.figure.canvas.draw()  # lay the panels out once, then keep that layout for every frame
    drawn.figure.set_layout_engine("none")
    begin, end = inputs.span()
    visits = {c: [np.array(v, dtype=float).reshape(-1, 3) for v in vs] for c, vs in inputs.tracks.items()}
    for method, ax in drawn.axes.items():
        drawn.dots[method] = ax.scatter([], [], s=18, zorder=6, edgecolors="black", linewidths=0.4)
    clocks = [
        ax.text(
            0.02, 0.98, "", transform=ax.transAxes, ha="left", va="top", fontsize=10, zorder=7, backgroundcolor="white"
        )
        for ax in drawn.axes.values()
    ]

    def frame(t: float) -> list[Any]:
        shown: dict[str, tuple[list[float], list[float], tuple[float, float] | None]] = {}
        for client, arrays in visits.items():
            xs: list[float] = []
            ys: list[float] = []
            here = None
            for a in arrays:
                seen = a[a[:, 0] <= t]
                if len(seen):
                    xs += [*seen[:, 1], math.nan]
                    ys += [*seen[:, 2], math.nan]
                    if t <= a[-1, 0]:
                        here = (float(seen[-1, 1]), float(seen[-1, 2]))
            shown[client] = (xs, ys, here)
        for method, lines in drawn.tracks.items():
            outcome = inputs.outcomes.get(method, {})
            dots, colours = [], []
            for client, line in lines.items():
                xs, ys, here = shown[client]
                line.set_data(xs, ys)
                if here is not None:
                    dots.append(here)
                    colours.append(COLOURS[outcome.get(client, "not trained")])
            drawn.dots[method].set_offsets(np.array(dots, dtype=float).reshape(-1, 2))
            drawn.dots[method].set_facecolors(colours)
        for clock in clocks:
            clock.set_text(f"t = {t:.0f} s")
        return []

    times = np.linspace(begin, end, max(2, frames))
    FuncAnimation(drawn.figure, frame, frames=times, blit=False).save(str(target), writer=PillowWriter(fps=10), dpi=80)


def plot_map(
    path: str | Path,
    out: str | Path | None = None,
    force: bool = False,
    method: str | None = None,
    animate: bool = False,
    frames: int = FRAMES,
    say: Callable[[str], None] = print,
) -> Path:
    """Draw the map of the run at ``path`` (module docstring) and return the file written:
    ``map.png`` (or, ``animate``, ``map.gif``) in the run directory under its lock, or ``out``.
    ``method`` draws one method's panel only. What could not be drawn is said through ``say``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if animate:
        from matplotlib.animation import PillowWriter

        if not PillowWriter.isAvailable():
            raise OutputRefused(
                "--animate writes a GIF with matplotlib's PillowWriter, which needs pillow: pip install pillow"
            )
        if out is not None and Path(out).suffix.lower() != ".gif":
            raise OutputRefused(f"{out}: --animate writes a GIF; give --out a name ending in .gif")
    inputs = map_inputs(path)
    if method is not None and method not in inputs.outcomes:
        raise ValueError(
            f"--method {method}: not a method of the run {inputs.run} (its methods: {', '.join(inputs.methods)})"
        )
    if not inputs.tracks:
        say(f"note: {inputs.run}: no vehicle became a client; the map shows the network and the RSUs only")
    for note in inputs.notes:
        say(f"note: {note}")
    drawn = map_figure(inputs, None if method is None else [method])
    try:
        with run_output(inputs.run, "map.gif" if animate else "map.png", out, force) as target:
            if animate:
                _animate(drawn, inputs, target, frames)
            else:
                drawn.figure.savefig(target, dpi=110, bbox_inches="tight", pad_inches=0.15)
    finally:
        plt.close(drawn.figure)
    return target
