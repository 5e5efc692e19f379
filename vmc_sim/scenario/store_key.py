"""The key of a run's contribution store: what a client's contribution depends on (the run seed and
the federated configuration, less the methods and the merge). The engine writes the store under
this key and every reader (``vmc certify``, ``tools/remerge.py``) opens it under the same one."""

from __future__ import annotations

import hashlib
import json

from fl_core.training import key_settings

from .schema import Scenario


def store_fingerprint(scenario: Scenario) -> str:
    """The key of a run's contribution store: what a client's contribution depends on (the run seed
    and the federated configuration)."""
    fed = scenario.federated.model_dump(mode="json")
    fed.pop("methods", None)
    fed.pop("projection", None)
    fed["train"] = key_settings(scenario.federated.train.build())  # runs recorded before a setting keep their key
    return hashlib.sha256(json.dumps([scenario.seed, fed], sort_keys=True).encode()).hexdigest()
