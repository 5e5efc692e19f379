"""Shared fixtures: a tiny federated setup on scikit-learn's digits (no files needed), and the
short co-simulation scenario the engine's tests build on."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pytest
import torch

from fl_core.clients import ClientPool
from fl_core.data import load_train_test
from fl_core.models import build_model, flat_params
from fl_core.partition import dirichlet_partition
from fl_core.rng import Streams
from fl_core.training import LocalTrainer, TrainConfig

if TYPE_CHECKING:
    from vmc_sim.scenario.schema import Scenario


class TinySetup:
    """Digits split among ``n`` clients, a 64-16-10 MLP, one run seed."""

    def __init__(self, n: int = 12, seed: int = 7) -> None:
        self.train, self.test = load_train_test("digits")
        self.streams = Streams(seed)
        parts = dirichlet_partition(self.train.y.numpy(), n, 0.5, self.streams.numpy("partition"), min_size=20)
        self.data = {i: self.train.subset(p) for i, p in enumerate(parts)}
        torch.manual_seed(self.streams.seed("init"))
        self.w0 = flat_params(self.model_fn())

    def model_fn(self):
        return build_model("mlp", self.train.input_shape, self.train.num_classes, hidden=(16,))

    def pool(self, fisher: str = "diagonal", epochs: int = 2, reuse: bool = True, **kw) -> ClientPool:
        cfg = TrainConfig(epochs=epochs, lr=0.05, batch_size=32, fisher=fisher, **kw)
        return ClientPool(LocalTrainer(self.model_fn, self.w0, cfg, self.streams), self.data, reuse=reuse)


def small_scenario(
    mobility: dict[str, Any] | str | os.PathLike[str], federated: dict[str, Any], /, **over: Any
) -> Scenario:
    """A short co-simulation scenario on digits with the small MLP: ``mobility`` (a trace file to
    replay, or the whole section) and ``federated`` (laid over dataset, model and 12 clients) as
    given, named ``t``, seed 3, 120 s, a 5 s warm-up and 4 clients at least, the device time model,
    on the idealised line-of-sight link (the engine's mechanics; the city radio has tests of its own);
    each section in ``over`` (``federated`` too) is laid over its default one level deep (a value
    that is not a dict replaces it)."""
    from vmc_sim.scenario.config import load_model
    from vmc_sim.scenario.schema import Scenario

    data: dict[str, Any] = {
        "name": "t",
        "seed": 3,
        "duration": 120.0,
        "mobility": mobility if isinstance(mobility, dict) else {"source": "trace", "trace": str(mobility)},
        "federated": {"dataset": "digits", "num_clients": 12, "model": "mlp", **federated},
        "coordinator": {"warmup": 5.0, "min_clients": 4},
        "compute": {"time_model": "device"},
        "channel": {"path_loss_model": "tr37885_urban_los"},
    }
    for k, v in over.items():
        data[k] = {**data.get(k, {}), **v} if isinstance(v, dict) else v
    return load_model(Scenario, None, data)


torch.set_num_threads(1)  # the tiny test models lose to thread synchronisation

USER_CACHE = Path.home() / ".cache" / "vmc-sim"
TEST_CACHE = Path(tempfile.gettempdir()) / f"vmc-sim-test-cache-{os.getuid()}"
# The suite keeps its caches (decoded data, SUMO builds, calibrations measured under test load,
# FLOP counts, contributions) apart from the user's: a later run of the user's reads none of them.
os.environ["VMC_CACHE"] = str(TEST_CACHE)


def _listing(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` with its size and modification time (ns)."""
    if not root.is_dir():
        return {}
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


def pytest_sessionstart(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput"):  # the controller (or a run without workers)
        session.config.stash[_BEFORE] = _listing(USER_CACHE)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if any test wrote into the user's cache (``~/.cache/vmc-sim``)."""
    before = session.config.stash.get(_BEFORE, None)
    if before is None:
        return
    after = _listing(USER_CACHE)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    if changed:
        shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
        print(f"\nthe test suite changed the user's cache {USER_CACHE}: {shown}", file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_BEFORE = pytest.StashKey[dict]()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` first, the rest in their usual order: with ``-n auto --dist worksteal``
    a worker that runs out of short tests takes the other's, so no long test starts last and
    leaves one core idle while it runs."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(scope="session")
def tiny() -> TinySetup:
    return TinySetup()


ROOT = Path(__file__).resolve().parents[1]


def load_script(relative: str) -> ModuleType:
    """A script under ``tools/`` or ``bench/`` as a module (registered under its file name), with
    the sibling modules it imports loaded the same way, as it finds them beside it when it runs."""
    path = ROOT / relative
    text = path.read_text()
    for sibling in sorted(path.parent.glob("*.py")):
        name = sibling.stem
        if sibling != path and re.search(rf"^\s*(import {name}\b|from {name} import)", text, re.M):
            _load(sibling)
    return _load(path)


def _load(path: Path) -> ModuleType:
    if path.stem in sys.modules and getattr(sys.modules[path.stem], "__file__", None) == str(path):
        return sys.modules[path.stem]
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module  # dataclasses and pickling look their module up by name
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def script():
    """:func:`load_script` as a fixture."""
    return load_script
