"""One SUMO run for every run of the same traffic (``mobility.trace_cache``): a second run of a
live scenario replays the trace the first recorded, without starting SUMO, and writes the same
records; a cached trace that does not verify, or one cut short, is never replayed; the key
follows the traffic (inputs by content, seed, window, RSUs), not where the files lie."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import small_scenario

import mobility.source
from mobility.errors import TraceError
from mobility.trace_cache import TraceCache, trace_key
from vmc_sim.cosim import open_source, run_scenario, summarize
from vmc_sim.rundir.directory import RunDir
from vmc_sim.scenario.config import load_model
from vmc_sim.scenario.schema import Scenario

TINY_CITY = {
    "junctions_x": 4,
    "junctions_y": 4,
    "spacing": 200.0,
    "lanes": 1,
    "period": 1.0,
    "duration": 300.0,
    "min_distance": 300.0,
    "seed": 5,
}


def scenario(tmp_path: Path, duration: float = 80.0, **mobility) -> Scenario:
    city = {
        "source": "city",
        "city": {**TINY_CITY, "cache_dir": str(tmp_path / "sumo")},
        "rsus": {"radius": 250.0},
        "trace_cache": str(tmp_path / "traces"),
        **mobility,
    }
    one_shot = {"rho": 0.5, "methods": ["fsosa", "retrain"], "train": {"epochs": 1, "lr": 0.05, "fisher": "diagonal"}}
    coordinator = {"warmup": 20.0, "min_clients": 3}
    return small_scenario(city, one_shot, name="tc", seed=1, duration=duration, coordinator=coordinator)


def records(run: RunDir) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith("host_")} for r in run.records()]


def entries(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "traces").rglob("*.jsonl"))


def test_the_second_run_replays_the_first_runs_traffic_without_sumo(tmp_path, monkeypatch):
    sc = scenario(tmp_path)
    first = run_scenario(sc, out=tmp_path / "a", progress=False, say=lambda s: None)
    assert first.manifest()["mobility"]["trace_cache"]["hit"] is False
    assert len(entries(tmp_path)) == 1
    assert len(records(first)) > 4, "the tiny city must produce requests for this test to mean anything"

    def no_sumo(self):
        raise AssertionError("SUMO started although the traffic is in the trace cache")

    monkeypatch.setattr(mobility.source.SumoSession, "start", no_sumo)
    second = run_scenario(sc, out=tmp_path / "b", progress=False, say=lambda s: None)
    assert second.manifest()["mobility"]["trace_cache"] == {
        "key": first.manifest()["mobility"]["trace_cache"]["key"],
        "hit": True,
    }
    assert records(second) == records(first)
    assert (second.path / "trace.jsonl").read_bytes() == (first.path / "trace.jsonl").read_bytes()
    assert "replayed the cached trace" in summarize(second)
    assert "replayed the cached trace" not in summarize(first)


def test_a_cached_trace_that_does_not_verify_is_recorded_again(tmp_path):
    sc = scenario(tmp_path, duration=60.0)
    first = run_scenario(sc, out=tmp_path / "a", progress=False, say=lambda s: None)
    (entry,) = entries(tmp_path)
    good = entry.read_bytes()
    entry.write_bytes(good.replace(b'"join"', b'"leave"', 1))  # one event flipped: the sidecar no longer matches
    second = run_scenario(sc, out=tmp_path / "b", progress=False, say=lambda s: None)
    assert second.manifest()["mobility"]["trace_cache"]["hit"] is False  # SUMO ran again
    assert second.manifest()["mobility"]["trace_cache"]["rejected"] is True
    assert first.manifest()["mobility"]["trace_cache"]["rejected"] is False  # a plain miss
    from vmc_sim.cosim import summarize

    assert "did not verify (changed, truncated or too short) and was not used; SUMO ran" in summarize(second)
    assert records(second) == records(first)
    assert entry.read_bytes() == good  # and the entry was rewritten from the new recording


def test_a_trace_cut_short_is_not_kept_and_a_longer_run_does_not_replay_a_shorter_one(tmp_path):
    sc = scenario(tmp_path, duration=60.0)
    source, _ = open_source(sc, tmp_path / "cut.jsonl")
    source.advance(source.time + 20.0)  # stopped long before the run's end, as an interrupted run is
    source.close()
    assert entries(tmp_path) == []
    run_scenario(sc, out=tmp_path / "a", progress=False, say=lambda s: None)
    assert len(entries(tmp_path)) == 1
    longer = run_scenario(scenario(tmp_path, duration=90.0), out=tmp_path / "b", progress=False, say=lambda s: None)
    assert longer.manifest()["mobility"]["trace_cache"]["hit"] is False
    assert len(entries(tmp_path)) == 2


def test_the_key_follows_the_traffic_not_the_file_paths(tmp_path):
    from vmc_sim.cosim import sumo_config

    sc = scenario(tmp_path)
    m = sc.mobility
    sumo, _ = sumo_config(sc)
    source, rsus = open_source(sc.model_copy(update={"mobility": m.model_copy(update={"trace_cache": None})}), None)
    source.close()
    cov = m.coverage_config()
    key = trace_key(sumo, rsus, cov)
    moved = tmp_path / "moved"
    moved.mkdir()
    copies = [shutil.copy(p, moved) for p in [sumo.net_file, *sumo.route_files]]
    assert (
        trace_key(sumo.__class__(**{**sumo.to_dict(), "net_file": copies[0], "route_files": copies[1:]}), rsus, cov)
        == key
    )
    for change in ({"seed": sumo.seed + 1}, {"end": sumo.end + 1.0}, {"scale": 0.5}):
        assert trace_key(sumo.__class__(**{**sumo.to_dict(), **change}), rsus, cov) != key, change
    Path(copies[1]).write_text(Path(copies[1]).read_text().replace("depart=", "depart =", 1))
    assert (
        trace_key(sumo.__class__(**{**sumo.to_dict(), "net_file": copies[0], "route_files": copies[1:]}), rsus, cov)
        != key
    )  # a route file's bytes changed
    wider = [r.__class__(**{**r.to_dict(), "radius": r.radius + 1.0}) for r in rsus]
    assert trace_key(sumo, wider, cov) != key


@pytest.mark.slow
def test_a_sweep_over_rho_runs_sumo_once(tmp_path):
    from vmc_sim.sweep import SweepSpec, run_sweep

    base = scenario(tmp_path, duration=40.0).model_dump(mode="json")
    base["mobility"]["trace_cache"] = None  # the sweep brings its own
    spec = load_model(SweepSpec, None, {"name": "rho", "base": base, "grid": {"rho": [0.3, 0.7]}, "workers": 1})
    said: list[str] = []
    result = run_sweep(spec, out=tmp_path / "sweep", say=said.append)
    replayed = [p["trace_replayed"] for p in result.points]
    assert replayed == [False, True]
    assert any("1 of 2 points replayed" in s for s in said)
    assert len(list((result.path / "trace_cache").rglob("*.jsonl"))) == 1


def test_cache_lookup_counts_what_it_did(tmp_path):
    cache = TraceCache(tmp_path / "c")
    assert cache.lookup("0" * 64, 10.0) is None
    assert cache.stats.as_dict() == {"hits": 0, "misses": 1, "rejected": 0, "stored": 0}
    with pytest.raises(TraceError, match="does not exist"):
        cache.store("0" * 64, tmp_path / "missing.jsonl", 10.0)
    assert cache.stats.stored == 0 and not list((tmp_path / "c").rglob("*.jsonl"))


def test_a_cache_that_cannot_be_written_warns_and_leaves_the_run_complete(tmp_path):
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache directory should be")
    sc = scenario(tmp_path, duration=40.0, trace_cache=str(blocked))
    with pytest.warns(UserWarning, match="could not keep this run's trace"):
        run = run_scenario(sc, out=tmp_path / "a", progress=False, say=lambda s: None)
    assert run.manifest()["status"] == "complete" and (run.path / "trace.jsonl").is_file()


def test_traffic_recorded_on_one_machine_is_replayed_on_another_through_a_peer(tmp_path, monkeypatch):
    """Two machines, each its own trace cache, one peer (the sweep's keeper on the driver): the
    second replays the first's traffic without SUMO, with identical records."""
    from fl_core.cache_peer import CacheKeeper
    from mobility.trace_cache import set_peer

    keeper = CacheKeeper(tmp_path / "driver")
    monkeypatch.setattr("mobility.trace_cache._PEER", None)
    set_peer(keeper)
    first = run_scenario(
        scenario(tmp_path / "a", trace_cache=str(tmp_path / "a" / "traces")),
        out=tmp_path / "ra",
        progress=False,
        say=lambda s: None,
    )
    assert any((tmp_path / "driver").rglob("*.sha256"))

    def no_sumo(self):
        raise AssertionError("SUMO started although the peer holds the traffic")

    monkeypatch.setattr(mobility.source.SumoSession, "start", no_sumo)
    second = run_scenario(
        scenario(tmp_path / "b", trace_cache=str(tmp_path / "b" / "traces")),
        out=tmp_path / "rb",
        progress=False,
        say=lambda s: None,
    )
    set_peer(None)
    assert second.manifest()["mobility"]["trace_cache"]["hit"] is True
    assert records(second) == records(first)
