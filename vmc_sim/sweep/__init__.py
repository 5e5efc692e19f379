"""``vmc sweep``: a grid of scenarios run as separate co-simulations, gathered into one table and one plot.

A sweep file (YAML) names a base scenario and a grid::

    name: density-rho
    base: city.yaml                  # a scenario file (relative to this file), an inline mapping, or omitted
    grid:
      density: [0.5, 1.0]            # = mobility.density (SUMO's --scale: city, files and lust sources)
      rho: [0.3, 0.5]                # = federated.rho
      mobility.rsus.radius: [150, 250]
      method: [fsosa, [fsosa, retrain]]   # = federated.methods; a bare name means [name]
      seed: [0, 1]                   # the run seed; mobility.sumo.seed varies the traffic
    engine: local                    # or ray; --engine overrides
    workers: 2                       # --workers overrides

Every point of the cartesian product is validated as a full :class:`~vmc_sim.scenario.schema.Scenario`
before anything runs, so a bad value is refused up front with the grid key, the value and the
field. Each point then runs in its own process (libsumo allows one simulation per process): a
local spawn-context process pool by default, or Ray tasks with ``engine: ray``. A point that
fails is recorded with its error and the others go on. The sweep directory
``<out>/<name>-<stamp>/`` holds one run directory per point, ``sweep.json`` (grid, points,
status; rewritten as points finish), ``results.csv`` (one row per point and method) and
``sweep.png``. One process writes it (the run lock, :class:`vmc_sim.rundir.lock.RunLock`, held for
the sweep's life); an interrupted sweep says how many points completed and how to resume it.
A grid key whose field the points' mobility source does not read is noted as without effect
(:data:`vmc_sim.scenario.mobility_section.SOURCE_READS`).

Replicates, as SUMO's runSeeds: ``replicates`` runs every point once per seed, for a mean and an
interval instead of one draw::

    grid:
      rho: [0.3, 0.5]
    replicates: 5                    # seeds 0..4; or a list, e.g. [11, 12, 13]
    replicate_sets: [seed, traffic]  # the default: the run seed, and the traffic (mobility.sumo.seed,
                                     # mobility.city.seed); or name fields, e.g. [mobility.sumo.seed]

Each replicate sets those scenario seeds to its seed (a grid key that sets one of them too is
refused) and is its own run, ``<point>-rep<seed>/``, whose manifest records its seeds. With
several seeds, ``results.csv`` has one row per run and method with the seed in ``replicate``,
``summary.csv`` has per point and method every figure's mean, sample standard deviation,
half-width of the 95 % Student-t interval (n - 1 degrees of freedom) and count ``n`` over the
replicates that completed (``<figure>_mean``, ``_std``, ``_ci95``, ``_n``), the printed table gives
mean ± half-width (``(n=k)`` beside it below 3 replicates, where it is very wide), and ``sweep.png``
draws the mean with the interval as a band, clipped to the figure's range. ``sweep.json``
lists the seeds and the fields they set (``replicates``). A single seed sets the seeds and leaves
every output as without replicates.

A sweep's tables as pandas DataFrames: ``open_sweep(path).results`` (:mod:`.frames`); with pandas and
pyarrow installed (the ``[pandas]`` extra) every sweep also writes ``results.parquet``.

Imports fl_core, mobility, and of vmc_sim scenario, compute, rundir and the run itself (``cosim``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fl_core.lazy import lazy_exports

if TYPE_CHECKING:  # the names below, for type checkers; at run time each is imported when first used
    from .aggregate import summarize_replicates, summary_table, write_summary_csv
    from .cli import add_sweep_parser
    from .execution import SweepResult, pin_calibrations, resume_sweep, run_sweep
    from .frames import Sweep, open_sweep
    from .replicates import replicate_runs
    from .spec import GridPoint, SweepSpec, base_scenario, expand, inert_axes, load_sweep
    from .stats import Interval, interval, t_quantile
    from .tables import gather_rows, markdown_table, method_totals, plot_sweep, write_csv

_EXPORTS: dict[str, str] = {
    "summarize_replicates": ".aggregate",
    "summary_table": ".aggregate",
    "write_summary_csv": ".aggregate",
    "add_sweep_parser": ".cli",
    "SweepResult": ".execution",
    "pin_calibrations": ".execution",
    "resume_sweep": ".execution",
    "run_sweep": ".execution",
    "Sweep": ".frames",
    "open_sweep": ".frames",
    "replicate_runs": ".replicates",
    "GridPoint": ".spec",
    "SweepSpec": ".spec",
    "base_scenario": ".spec",
    "expand": ".spec",
    "inert_axes": ".spec",
    "load_sweep": ".spec",
    "Interval": ".stats",
    "interval": ".stats",
    "t_quantile": ".stats",
    "gather_rows": ".tables",
    "markdown_table": ".tables",
    "method_totals": ".tables",
    "plot_sweep": ".tables",
    "write_csv": ".tables",
}
"""Each public name and the module it lives in: imported on first use (``vmc --help`` builds the
sweep's parser without the rest)."""

__all__ = [
    "GridPoint",
    "Interval",
    "Sweep",
    "SweepResult",
    "SweepSpec",
    "add_sweep_parser",
    "base_scenario",
    "expand",
    "gather_rows",
    "inert_axes",
    "interval",
    "load_sweep",
    "markdown_table",
    "method_totals",
    "open_sweep",
    "pin_calibrations",
    "plot_sweep",
    "replicate_runs",
    "resume_sweep",
    "run_sweep",
    "summarize_replicates",
    "summary_table",
    "t_quantile",
    "write_csv",
    "write_summary_csv",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
