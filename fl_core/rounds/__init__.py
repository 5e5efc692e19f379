"""Multi-round federated training (the FedAvg family), the base of DG-FedReuse, PDF and the
multi-round unlearning baselines.

| module       | job                                                              |
|--------------|------------------------------------------------------------------|
| config       | :class:`RoundConfig`: local training, client sampling, server optimizer |
| local        | one client's local update from the global weights (SGD or FedProx) |
| server       | server optimizers applied to the aggregated update (FedAvg, FedAdam) |
| strategy     | :class:`RoundStrategy`: the template round (select, train, encode, aggregate), built from :class:`StrategyInputs` |
| fedavg, fedprox, fedadam, topk, dgfedreuse, pdf | one strategy each, named after it |
| registry     | :data:`STRATEGIES` by name, :func:`build_strategy`                 |

A round is split into verbs the co-simulation can drive one by one (``begin`` selects and
broadcasts, ``update`` trains one client, ``finish`` aggregates whatever arrived), and
:meth:`RoundStrategy.run_round` chains them for scripts. A client's update is a deterministic
function of (run seed, client id, round index, global weights).
"""

from .config import ClientAlgo, RoundConfig, ServerOpt
from .local import ClientUpdate, local_update
from .registry import STRATEGIES, build_strategy
from .server import AdamServer, AvgServer, ServerOptimizer, build_server
from .strategy import RoundReport, RoundStrategy, StrategyInputs

__all__ = [
    "ClientAlgo",
    "RoundConfig",
    "ServerOpt",
    "ClientUpdate",
    "local_update",
    "AdamServer",
    "AvgServer",
    "ServerOptimizer",
    "build_server",
    "RoundReport",
    "RoundStrategy",
    "StrategyInputs",
    "STRATEGIES",
    "build_strategy",
]
