"""vmc-sim: the co-simulation layer where mobility (SUMO) and the federated core meet.

A co-simulation from Python::

    import vmc_sim

    scenario = vmc_sim.load_scenario({"duration": 300, "federated": {"methods": ["fsosa", "retrain"]}})
    run = vmc_sim.run_scenario(scenario, out="runs", progress=False)
    for record in run.records():                  # one per request and method
        print(record["method"], record["kind"], record["accuracy"])
"""

from .cosim import replay_scenario, run_scenario
from .engine.cosimulation import CoSimulation
from .rundir.directory import RunDir
from .scenario.schema import Scenario, TimeModelKind, load_scenario
from .sweep import SweepSpec, load_sweep, run_sweep

__all__ = [
    "CoSimulation",
    "RunDir",
    "Scenario",
    "SweepSpec",
    "TimeModelKind",
    "load_scenario",
    "load_sweep",
    "replay_scenario",
    "run_scenario",
    "run_sweep",
]
