"""vmc-sim: the co-simulation layer where mobility (SUMO) and the federated core meet.

A co-simulation from Python::

    import vmc_sim

    scenario = vmc_sim.load_scenario({"duration": 300, "federated": {"methods": ["fsosa", "retrain"]}})
    run = vmc_sim.run_scenario(scenario, out="runs", progress=False)
    for record in run.records():                  # one per request and method
        print(record["method"], record["kind"], record["accuracy"])

    frames = vmc_sim.open_run(run.path)           # as pandas DataFrames (the [pandas] extra)
    frames.records, frames.trace, frames.contributions
    vmc_sim.plot_map(run.path)                    # map.png: the clients' tracks, the RSUs, the radio's reach
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fl_core.lazy import lazy_exports

if TYPE_CHECKING:  # the names below, for type checkers; at run time each is imported when first used
    from .cosim import replay_scenario, run_scenario
    from .engine.cosimulation import CoSimulation
    from .rundir.directory import RunDir
    from .rundir.frames import Run, open_run
    from .rundir.maps import plot_map
    from .scenario.schema import Scenario, TimeModelKind, load_scenario
    from .sweep import Sweep, SweepSpec, load_sweep, open_sweep, run_sweep

_EXPORTS: dict[str, str] = {
    "replay_scenario": ".cosim",
    "run_scenario": ".cosim",
    "CoSimulation": ".engine.cosimulation",
    "RunDir": ".rundir.directory",
    "Run": ".rundir.frames",
    "open_run": ".rundir.frames",
    "plot_map": ".rundir.maps",
    "Scenario": ".scenario.schema",
    "TimeModelKind": ".scenario.schema",
    "load_scenario": ".scenario.schema",
    "Sweep": ".sweep",
    "SweepSpec": ".sweep",
    "open_sweep": ".sweep",
    "load_sweep": ".sweep",
    "run_sweep": ".sweep",
}
"""Each public name and the module it lives in: imported on first use, so that importing the
package (a command that trains nothing) imports nothing heavy."""

__all__ = [
    "CoSimulation",
    "Run",
    "RunDir",
    "Scenario",
    "Sweep",
    "SweepSpec",
    "TimeModelKind",
    "load_scenario",
    "load_sweep",
    "open_run",
    "open_sweep",
    "plot_map",
    "replay_scenario",
    "run_scenario",
    "run_sweep",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
