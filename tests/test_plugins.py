"""One file is enough to extend the toolkit: a module outside the package (``tests/plugins/
toy_plugins.py``) registers a mobility source, a rate model and an editor, each one definition
plus its registration, and a scenario that names the module under ``plugins`` runs on all three."""

from __future__ import annotations

from pathlib import Path

import pytest

from vmc_sim import load_scenario, run_scenario
from vmc_sim.scenario.config import ConfigError

PLUGINS = Path(__file__).parent / "plugins"


@pytest.fixture(autouse=True)
def _registries_as_they_were():
    """A plug-in's names live in the process's registries; take them out again after each test,
    so that tests sharing the worker see the toolkit's own names only."""
    import sys

    from fl_core.editors import EDITORS
    from vmc_sim.radio.rate_models import RATES
    from vmc_sim.sources.registry import SOURCES

    saved = [(r, set(r.names())) for r in (SOURCES, RATES, EDITORS)]
    yield
    for registry, names in saved:
        for name in set(registry.names()) - names:
            registry.remove(name)
    sys.modules.pop("toy_plugins", None)


def toy_scenario() -> dict:
    return {
        "name": "toy",
        "duration": 120.0,
        "plugins": ["toy_plugins"],
        "mobility": {"source": "shuttle"},
        "channel": {"rate_model": "flat2m", "rate_cap_bps": None},
        "federated": {
            "methods": ["keepall", "fsosa"],
            "editor_options": {"keepall": {"note": "kept"}},
            "train": {"epochs": 2},
        },
        "coordinator": {"warmup": 5.0, "min_clients": 4},
    }


def test_a_scenario_runs_on_a_source_a_rate_model_and_an_editor_of_a_plug_in(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGINS))
    scenario = load_scenario(toy_scenario())
    run = run_scenario(scenario, out=tmp_path / "runs", progress=False, say=lambda s: None)
    rows = [r for r in run.records() if "method" in r]
    assert {r["method"] for r in rows} == {"keepall", "fsosa"}
    assert any(r["kind"] == "remove" and r["triggered"] for r in rows if r["method"] == "keepall")
    timed = [r for r in rows if r.get("transfer_s", 0) > 0 and r["bytes_delivered"]]
    assert timed  # the toy rate carried the transfers: no transfer ran faster than its 2 Mb/s
    assert all(8 * r["bytes_delivered"] / r["transfer_s"] <= 2e6 * (1 + 1e-9) for r in timed)
    assert run.manifest()["config"]["federated"]["editor_options"] == {"keepall": {"note": "kept"}}


def test_a_plug_in_editor_s_options_are_checked_by_its_own_class(monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGINS))
    bad = toy_scenario()
    bad["federated"]["editor_options"] = {"keepall": {"note": ""}}
    with pytest.raises(ConfigError, match="keepall.note must not be empty"):
        load_scenario(bad)
    bad["federated"]["editor_options"] = {"keepall": {"nope": 1}}
    with pytest.raises(ConfigError, match=r"unknown option\(s\) \['nope'\] of editor 'keepall'"):
        load_scenario(bad)


def test_a_name_no_registry_holds_is_refused_naming_what_there_is(monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGINS))
    with pytest.raises(ConfigError, match=r"unknown mobility source 'nowhere'; known mobility sources: city, "):
        load_scenario({"mobility": {"source": "nowhere"}})
    with pytest.raises(ConfigError, match=r"plugins: cannot import 'no_such_plugin'"):
        load_scenario({"plugins": ["no_such_plugin"]})
