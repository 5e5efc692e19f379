"""Mobility against a real SUMO (from the wheels) on a tiny generated city.

Every test that starts libsumo closes it before returning (one libsumo simulation per process).
"""

from __future__ import annotations

import itertools
import math
import os
import signal
import time
from pathlib import Path

import pytest

pytest.importorskip("sumo")
pytest.importorskip("libsumo")
pytest.importorskip("traci")

from mobility.cache import file_sha256  # noqa: E402
from mobility.city import CityConfig, build_city  # noqa: E402
from mobility.coverage import CoverageConfig, CoverageTracker  # noqa: E402
from mobility.errors import SumoError  # noqa: E402
from mobility.rsu import Rsu, RsuConfig, central_region, place_rsus  # noqa: E402
from mobility.source import SumoSource, TraceSource  # noqa: E402
from mobility.sumo import SumoConfig, SumoSession, sumo_binary, sumo_home, sumo_tool, sumo_version  # noqa: E402
from mobility.trace import read_trace  # noqa: E402

pytestmark = pytest.mark.sumo

TINY = dict(
    junctions_x=4, junctions_y=4, spacing=200.0, lanes=1, period=2.0, duration=300.0, min_distance=300.0, seed=5
)
END = 400.0


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("sumo-cache")


@pytest.fixture(scope="module")
def city(cache):
    return build_city(CityConfig(**TINY, cache_dir=str(cache)))


@pytest.fixture(scope="module")
def centre_rsu(city, cache):
    return place_rsus(RsuConfig(count=1, radius=150.0), city.net_file, cache_dir=str(cache))


def run_all(src, chunk: float):
    events = []
    while not src.finished:
        events += src.advance(src.time + chunk)
    return events


def test_binaries_and_tools_are_found():
    for name in ("sumo", "netgenerate", "netconvert", "duarouter"):
        assert sumo_binary(name).is_file()
    assert sumo_tool("randomTrips.py").is_file()
    assert sumo_version().startswith("1.28")


def test_sumo_home_is_honoured_only_when_it_holds_the_binary(tmp_path, monkeypatch):
    wheel = sumo_home()
    monkeypatch.setenv("SUMO_HOME", str(tmp_path))
    assert sumo_home() == wheel  # an empty SUMO_HOME falls back to the wheel
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "sumo").symlink_to(wheel / "bin" / "sumo")
    assert sumo_home() == tmp_path


def test_city_builds_caches_and_is_deterministic(city, cache, tmp_path):
    t0 = time.perf_counter()
    again = build_city(CityConfig(**TINY, cache_dir=str(cache)))
    assert time.perf_counter() - t0 < 0.5
    assert again.directory == city.directory and again.metadata == city.metadata
    assert city.metadata["demand"]["vehicles"] > 50
    other = build_city(CityConfig(**TINY, cache_dir=str(tmp_path)))
    assert other.directory != city.directory
    for name in ("net_file", "route_file"):
        assert file_sha256(getattr(other, name)) == file_sha256(getattr(city, name))
    reseeded = build_city(CityConfig(**{**TINY, "seed": 6}, cache_dir=str(tmp_path)))
    assert file_sha256(reseeded.net_file) == file_sha256(city.net_file)
    assert file_sha256(reseeded.route_file) != file_sha256(city.route_file)
    assert not [p for p in Path(tmp_path).iterdir() if p.name.startswith(".")]  # no temp dirs left behind


def test_a_damaged_cached_build_is_built_again_not_trusted(city, tmp_path):
    from mobility.rsu import junction_centrality

    first = build_city(CityConfig(**TINY, cache_dir=str(tmp_path)))
    good = file_sha256(first.route_file)
    with open(first.route_file, "ab") as f:
        f.write(b"<!-- edited -->")
    with pytest.warns(
        UserWarning, match=r"city.rou.xml does not match the digest recorded when it was built; building"
    ):
        again = build_city(CityConfig(**TINY, cache_dir=str(tmp_path)))
    assert again.directory == first.directory and file_sha256(again.route_file) == good
    Path(again.net_file).unlink()
    with pytest.warns(UserWarning, match=r"city.net.xml is missing; building it again"):
        build_city(CityConfig(**TINY, cache_dir=str(tmp_path)))
    scores = junction_centrality(city.net_file, cache_dir=str(tmp_path))
    (stored,) = tmp_path.glob("centrality-*/centrality.json")
    stored.write_text(stored.read_text().replace("0.", "9.", 1))
    with pytest.warns(UserWarning, match=r"centrality.json does not match the digest"):
        assert junction_centrality(city.net_file, cache_dir=str(tmp_path)) == scores


def test_auto_placement_ranks_central_junctions(city, cache):
    [one] = place_rsus(RsuConfig(count=1, radius=150.0), city.net_file, cache_dir=str(cache))
    xmin, ymin, xmax, ymax = central_region(city.net_file, 0.5)
    assert xmin <= one.x <= xmax and ymin <= one.y <= ymax and one.junction
    four = place_rsus(RsuConfig(count=4, radius=100.0, central_fraction=1.0), city.net_file, cache_dir=str(cache))
    assert all(math.hypot(a.x - b.x, a.y - b.y) >= 200.0 for a in four for b in four if a is not b)
    with pytest.raises(ValueError, match="rsu.count=20"):
        place_rsus(RsuConfig(count=20, radius=150.0), city.net_file, cache_dir=str(cache))


def _naive_members(rsu: Rsu, states, v2v: float | None, hops: int) -> set[str]:
    member = {v for v, (x, y, _) in states.items() if math.hypot(x - rsu.x, y - rsu.y) <= rsu.radius}
    if v2v:
        frontier = set(member)
        for _ in range(hops):
            frontier = {
                w
                for w, (x, y, _) in states.items()
                if w not in member and any(math.hypot(x - states[u][0], y - states[u][1]) <= v2v for u in frontier)
            }
            member |= frontier
    return member


@pytest.mark.parametrize("v2v", [None, 80.0])
def test_coverage_alternates_and_matches_brute_force(city, centre_rsu, v2v):
    cfg = CoverageConfig(v2v_range=v2v, v2v_max_hops=2)
    tracker = CoverageTracker(centre_rsu, cfg)
    events, checked = [], 0
    with SumoSession(city.sumo_config(end=END)) as s:
        tracker.attach(s)
        while not s.finished:
            t = s.step()
            events += tracker.update(t, s)
            if int(t) % 10 == 0:
                states = {v: s.vehicle_state(v) for v in s.vehicle_ids()}
                expected = _naive_members(centre_rsu[0], states, v2v, 2)
                assert {m.vehicle for m in tracker.members()} == expected, f"t={t}"
                checked += 1
    assert checked >= 30
    assert sum(e.kind == "join" for e in events) > 20
    by_vehicle: dict[str, list[str]] = {}
    for e in events:
        by_vehicle.setdefault(e.vehicle, []).append(e.kind)
    for kinds in by_vehicle.values():
        assert kinds[0] == "join"
        assert all(a != b for a, b in itertools.pairwise(kinds)), kinds
    times = [e.time for e in events]
    assert times == sorted(times)


def test_backends_give_identical_events_and_replay_is_identical(city, centre_rsu, tmp_path):
    runs = {}
    for backend in ("libsumo", "traci"):
        trace = tmp_path / f"{backend}.jsonl"
        src = SumoSource(
            city.sumo_config(backend=backend, end=END), centre_rsu, trace=trace, metadata={"city": city.metadata}
        )
        try:
            chunks, members = [], {}
            while not src.finished:
                chunks.append(src.advance(src.time + 7.5))
                members[src.time] = src.members()
        finally:
            src.close()
        runs[backend] = (chunks, members)
    assert runs["libsumo"] == runs["traci"]
    chunks, members = runs["libsumo"]
    events = [e for c in chunks for e in c]
    assert len(events) > 40
    recorded = read_trace(tmp_path / "libsumo.jsonl")
    assert recorded.events == events and recorded.end["status"] == "finished"
    assert recorded.meta["sumo"]["seed"] == 42 and recorded.meta["rsus"][0]["radius"] == 150.0
    with TraceSource(tmp_path / "libsumo.jsonl") as replay:
        replayed, replay_members = [], {}
        while not replay.finished:
            replayed.append(replay.advance(replay.time + 7.5))
            replay_members[replay.time] = replay.members()
    assert replayed == chunks and replay_members == members


def test_sumo_death_raises_and_keeps_every_event(city, centre_rsu, tmp_path, monkeypatch):
    trace = tmp_path / "crash.jsonl"
    src = SumoSource(city.sumo_config(backend="traci", end=END), centre_rsu, trace=trace)
    returned = src.advance(150.0)
    assert returned
    real_update = src.tracker.update

    def update_then_kill(t, session):
        out = real_update(t, session)
        if t >= 200.0 and session.pid is not None and session.raw is not None:
            os.kill(session.pid, signal.SIGKILL)
        return out

    monkeypatch.setattr(src.tracker, "update", update_then_kill)
    with pytest.raises(SumoError, match=r"SUMO \(traci\) died.*SIGKILL") as info:
        src.advance(300.0)
    kept = info.value.events
    assert kept and all(150.0 < e.time <= 200.0 for e in kept)
    assert src.finished
    src.close()
    recorded = read_trace(trace)
    assert recorded.events == returned + kept
    assert recorded.end["status"] == "error" and "died" in recorded.end["message"]
    with TraceSource(trace) as replay:
        assert replay.advance(1e9) == returned + kept and replay.finished and replay.time == recorded.end["time"]


def test_libsumo_is_single_instance_and_bad_input_is_named(city, tmp_path):
    with pytest.raises(SumoError, match="missing.net.xml"):
        SumoSession(SumoConfig(net_file=str(tmp_path / "missing.net.xml"))).start()
    first = SumoSession(city.sumo_config(end=50))
    first.start()
    try:
        with pytest.raises(SumoError, match="one simulation per process"):
            SumoSession(city.sumo_config(end=50)).start()
        with SumoSession(city.sumo_config(backend="traci", end=50)) as side:  # traci runs alongside
            assert side.step() == first.step() == 1.0
    finally:
        first.close()
    with SumoSession(city.sumo_config(end=50)) as again:  # closed properly: libsumo can start again
        assert again.step() == 1.0


def test_open_source_from_config_runs_the_city(cache, tmp_path):
    from mobility.config import MobilityConfig, open_source

    cfg = MobilityConfig.from_dict(
        {
            "network": "city",
            "city": {**TINY, "cache_dir": str(cache)},
            "sumo": {"end": 120.0, "seed": 3},
            "rsu": {"count": 1, "radius": 200.0},
            "coverage": {"state_interval": 10.0},
        }
    )
    src, rsus = open_source(cfg, trace=tmp_path / "run.jsonl")
    try:
        events = run_all(src, 30.0)
    finally:
        src.close()
    assert src.time == 120.0 and rsus[0].radius == 200.0
    meta = read_trace(tmp_path / "run.jsonl").meta
    assert meta["network"] == "city" and meta["sumo"]["seed"] == 3 and meta["city"]["seed"] == 5
    assert read_trace(tmp_path / "run.jsonl").events == events
