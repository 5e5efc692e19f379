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

from .cosim import replay_scenario, run_scenario
from .engine.cosimulation import CoSimulation
from .rundir.directory import RunDir
from .rundir.frames import Run, open_run
from .rundir.maps import plot_map
from .scenario.schema import Scenario, TimeModelKind, load_scenario
from .sweep import Sweep, SweepSpec, load_sweep, open_sweep, run_sweep

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
