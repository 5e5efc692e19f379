"""One way to find a method by name: every kind is a :class:`fl_core.registry.Registry`, and a bad
name is refused with the kind and the names that exist."""

from __future__ import annotations

import pytest

from fl_core.data import DATASETS
from fl_core.editors import EDITORS
from fl_core.fisher import REPRESENTATIONS
from fl_core.models import MODELS
from fl_core.registry import Registry, UnknownNameError
from fl_core.rounds import STRATEGIES
from vmc_sim.engine.timing import TIME_MODELS


@pytest.mark.parametrize("registry", [EDITORS, STRATEGIES, REPRESENTATIONS, DATASETS, MODELS, TIME_MODELS])
def test_every_kind_is_found_through_one_registry(registry):
    assert isinstance(registry, Registry) and len(registry) > 0
    for name in registry:
        assert registry[name] is registry.get(name)
    with pytest.raises(
        UnknownNameError, match=rf"unknown {registry.kind} 'no-such-name'; known .*{registry.names()[0]}"
    ):
        registry["no-such-name"]


def test_a_registry_takes_each_name_once_and_resolves_aliases():
    r = Registry("thing", {"a": 1}, aliases={"alpha": "a"})
    assert r["alpha"] == 1 and "alpha" in r and list(r) == ["a"]
    with pytest.raises(ValueError, match="registered already"):
        r.add("a", 2)
    with pytest.raises(UnknownNameError, match="unknown thing"):
        r.alias("beta", "b")
    r.remove("a")  # the name and its aliases go; the name can be registered again
    assert "a" not in r and "alpha" not in r and r.names() == []
    r.add("a", 3)
    assert r["a"] == 3


def test_each_strategy_has_its_own_file_named_after_it():
    import importlib

    for name in STRATEGIES:
        module = importlib.import_module(f"fl_core.rounds.{name}")
        assert getattr(module, f"build_{name}") is STRATEGIES[name]
