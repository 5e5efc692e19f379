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

Every point of the cartesian product is validated as a full :class:`~vmc_sim.scenario.Scenario`
before anything runs, so a bad value is refused up front with the grid key, the value and the
field. Each point then runs in its own process (libsumo allows one simulation per process): a
local spawn-context process pool by default, or Ray tasks with ``engine: ray``. A point that
fails is recorded with its error and the others go on. The sweep directory
``<out>/<name>-<stamp>/`` holds one run directory per point, ``sweep.json`` (grid, points,
status; rewritten as points finish), ``results.csv`` (one row per point and method) and
``sweep.png``.
"""

from .cli import add_sweep_parser
from .execution import SweepResult, pin_calibrations, run_sweep
from .spec import GridPoint, SweepSpec, base_scenario, expand, inert_axes, load_sweep
from .tables import gather_rows, markdown_table, method_totals, plot_sweep, write_csv

__all__ = [
    "GridPoint",
    "SweepResult",
    "SweepSpec",
    "add_sweep_parser",
    "base_scenario",
    "expand",
    "gather_rows",
    "inert_axes",
    "load_sweep",
    "markdown_table",
    "method_totals",
    "pin_calibrations",
    "plot_sweep",
    "run_sweep",
    "write_csv",
]
