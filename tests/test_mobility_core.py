"""Mobility logic that needs no SUMO: events, configs, coverage bookkeeping, traces, replay."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from mobility.city import CityConfig
from mobility.coverage import CoverageConfig, CoverageTracker, MemberState
from mobility.errors import TraceError
from mobility.events import EVENT_FIELDS, MobilityEvent, events_from_json, events_to_json
from mobility.rsu import Rsu, RsuConfig, place_rsus
from mobility.source import MobilitySource, TraceSource
from mobility.sumo import SumoConfig
from mobility.trace import TraceWriter, read_trace, write_trace

ROOT = Path(__file__).resolve().parents[1]


def ev(t, kind, v="v1", rsu="r0", x=0.0, y=0.0, s=1.0):
    return MobilityEvent(t, kind, v, rsu, x, y, s)


# -- events -------------------------------------------------------------------------------


def test_event_json_round_trip_is_exact():
    e = MobilityEvent(12.0, "join", "veh7", "rsu0", 0.1 + 0.2, -3.5e-7, 13.888888888)
    assert MobilityEvent.from_json(e.to_json()) == e
    events = [e, MobilityEvent(13, "leave", "veh7", "rsu0", 1, 2, 0)]
    assert events_from_json(events_to_json(events)) == events
    assert isinstance(events[1].time, float)
    # the JSON form holds every field, in the dataclass's order, as the fields hold them
    assert e.to_dict() == dataclasses.asdict(e)
    assert list(e.to_dict()) == [f.name for f in dataclasses.fields(MobilityEvent)] == list(EVENT_FIELDS)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"kind": "enter"}, "kind"),
        ({"vehicle": ""}, "vehicle"),
        ({"x": float("nan")}, "x"),
        ({"time": "1"}, "time"),
    ],
)
def test_event_validation_names_the_field(kwargs, field):
    base = dict(time=1.0, kind="join", vehicle="v", rsu="r", x=0.0, y=0.0, speed=0.0)
    with pytest.raises(ValueError, match=field):
        MobilityEvent(**{**base, **kwargs})


def test_event_from_dict_names_missing_and_unknown_fields():
    with pytest.raises(ValueError, match="missing.*speed"):
        MobilityEvent.from_dict({"time": 1, "kind": "join", "vehicle": "v", "rsu": "r", "x": 0, "y": 0})
    with pytest.raises(ValueError, match="unknown.*colour"):
        MobilityEvent.from_dict(
            {"time": 1, "kind": "join", "vehicle": "v", "rsu": "r", "x": 0, "y": 0, "speed": 0, "colour": 1}
        )
    with pytest.raises(ValueError, match=r"event \[1\]"):
        events_from_json('[{"time":1,"kind":"join","vehicle":"v","rsu":"r","x":0,"y":0,"speed":0},{"time":2}]')


# -- configs ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("factory", "field"),
    [
        (lambda: SumoConfig(backend="veins", net_file="a"), "sumo.backend"),
        (lambda: SumoConfig(net_file="a", step_length=0), "sumo.step_length"),
        (lambda: SumoConfig(net_file="a", seed=-1), "sumo.seed"),
        (lambda: SumoConfig(net_file="a", begin=10, end=5), "sumo.end"),
        (lambda: CityConfig(junctions_x=1), "city.junctions_x"),
        (lambda: CityConfig(period=0), "city.period"),
        (lambda: CityConfig(demand_scale=-1), "city.demand_scale"),
        (lambda: CityConfig(min_distance=1e6), "city.min_distance"),
        (lambda: RsuConfig(radius=0), "rsu.radius"),
        (lambda: RsuConfig(placement="random"), "rsu.placement"),
        (lambda: RsuConfig(placement="explicit"), "rsu.positions"),
        (lambda: RsuConfig(placement="explicit", positions=[[1, "a"]]), r"rsu.positions\[0\]"),
        (lambda: RsuConfig(region=[0, 0, -1, 5]), "rsu.region"),
        (lambda: RsuConfig(count=0), "rsu.count"),
        (lambda: CoverageConfig(membership="any"), "coverage.membership"),
        (lambda: CoverageConfig(v2v_range=-5), "coverage.v2v_range"),
        (lambda: CoverageConfig(state_interval=0), "coverage.state_interval"),
    ],
)
def test_config_errors_name_the_field(factory, field):
    with pytest.raises(ValueError, match=field):
        factory()


def test_explicit_rsus_need_no_network():
    rsus = place_rsus(
        RsuConfig(
            placement="explicit", radius=100, positions=[[10, 20], {"id": "north", "x": 0, "y": 500, "radius": 250}]
        )
    )
    assert rsus == [Rsu("rsu0", 10.0, 20.0, 100.0), Rsu("north", 0.0, 500.0, 250.0)]
    with pytest.raises(ValueError, match="duplicate"):
        place_rsus(
            RsuConfig(placement="explicit", positions=[{"id": "a", "x": 0, "y": 0}, {"id": "a", "x": 1, "y": 1}])
        )


# -- coverage bookkeeping -----------------------------------------------------------------


def test_union_membership_counts_a_vehicle_once_and_hands_over_silently():
    a, b = Rsu("a", 0.0, 0.0, 100.0), Rsu("b", 150.0, 0.0, 100.0)
    tr = CoverageTracker([a, b], CoverageConfig())
    assert tr.observe(1, {"a": {"v": (-150.0, 0.0, 10.0)}, "b": {}}) == []
    [j] = tr.observe(2, {"a": {"v": (-90.0, 0.0, 10.0)}, "b": {}})
    assert (j.kind, j.rsu, j.x) == ("join", "a", -90.0)
    assert tr.observe(3, {"a": {"v": (75.0, 0.0, 10.0)}, "b": {"v": (75.0, 0.0, 10.0)}}) == []
    assert tr.members()[0].rsu == "a"  # stays with the RSU it is attached to while still covered
    assert tr.observe(4, {"a": {}, "b": {"v": (160.0, 0.0, 10.0)}}) == []
    assert tr.members()[0].rsu == "b"
    [lv] = tr.observe(5, {"a": {}, "b": {"v": (260.0, 0.0, 10.0)}})  # seen in context but outside radius
    assert (lv.kind, lv.rsu, lv.x, lv.time) == ("leave", "b", 160.0, 5.0)


def test_join_in_two_rsus_at_once_picks_the_nearest():
    tr = CoverageTracker([Rsu("a", 0.0, 0.0, 100.0), Rsu("b", 100.0, 0.0, 100.0)])
    [j] = tr.observe(1, {"a": {"v": (60.0, 0.0, 1.0)}, "b": {"v": (60.0, 0.0, 1.0)}})
    assert j.rsu == "b"


def test_per_rsu_membership_gives_a_pair_per_rsu_and_leaves_before_joins():
    tr = CoverageTracker([Rsu("a", 0.0, 0.0, 100.0), Rsu("b", 150.0, 0.0, 100.0)], CoverageConfig(membership="per_rsu"))
    e1 = tr.observe(1, {"a": {"v": (75.0, 0.0, 1.0)}, "b": {"v": (75.0, 0.0, 1.0)}})
    assert [(e.kind, e.rsu) for e in e1] == [("join", "a"), ("join", "b")]
    e2 = tr.observe(2, {"a": {"w": (0.0, 0.0, 1.0)}, "b": {}})
    assert [(e.kind, e.vehicle, e.rsu) for e in e2] == [("leave", "v", "a"), ("leave", "v", "b"), ("join", "w", "a")]


def test_vehicle_that_vanishes_while_covered_leaves_with_its_last_state():
    tr = CoverageTracker([Rsu("a", 0.0, 0.0, 100.0)])
    tr.observe(1, {"a": {"v": (5.0, 5.0, 3.0)}})
    [lv] = tr.observe(2, {"a": {}})  # arrived or teleported: gone from the context
    assert (lv.kind, lv.x, lv.y, lv.speed) == ("leave", 5.0, 5.0, 3.0)


def test_v2v_chain_extends_coverage_up_to_the_hop_limit():
    r = Rsu("a", 0.0, 0.0, 100.0)
    cfg = CoverageConfig(v2v_range=60.0, v2v_max_hops=2)
    assert cfg.context_radius(r) == 220.0
    tr = CoverageTracker([r], cfg)
    near = {
        "d": (90.0, 0.0, 1.0),
        "h1": (140.0, 0.0, 1.0),
        "h2": (190.0, 0.0, 1.0),
        "h3": (240.0, 0.0, 1.0),
        "lone": (0.0, 180.0, 1.0),
    }
    assert set(tr.covered({"a": near})["a"]) == {"d", "h1", "h2"}
    joins = tr.observe(1, {"a": near})
    assert sorted(e.vehicle for e in joins) == ["d", "h1", "h2"]
    # the direct vehicle leaves: the chain breaks, everyone leaves
    near.pop("d")
    assert sorted(e.vehicle for e in tr.observe(2, {"a": near})) == ["d", "h1", "h2"]


def test_coverage_precision_rounds_states():
    tr = CoverageTracker([Rsu("a", 0.0, 0.0, 100.0)], CoverageConfig(precision=1))
    [j] = tr.observe(1, {"a": {"v": (1.2345, 2.3456, 3.4567)}})
    assert (j.x, j.y, j.speed) == (1.2, 2.3, 3.5)


# -- traces -------------------------------------------------------------------------------


def _write_sample(path: Path, *, end: bool = True) -> list[MobilityEvent]:
    events = [ev(1.0, "join", "v1"), ev(1.0, "join", "v2"), ev(3.0, "leave", "v1"), ev(5.0, "leave", "v2")]
    w = TraceWriter(path, {"clock": {"begin": 0.0, "step_length": 1.0}, "coverage": {"membership": "union"}})
    w.write_events(events[:2])
    w.write_states(2.0, [MemberState("v1", "r0", 1.5, 0.0, 2.0), MemberState("v2", "r0", 0.0, 0.0, 1.0)])
    w.write_events(events[2:])
    w.flush()
    if end:
        w.close("finished", time=6.0)
    else:
        w.abandon()
    return events


def test_trace_round_trip_and_header(tmp_path):
    path = tmp_path / "t.jsonl"
    events = _write_sample(path)
    tr = read_trace(path, with_states=True)
    assert tr.events == events and tr.complete and tr.end["status"] == "finished"
    assert tr.meta["clock"]["step_length"] == 1.0
    assert tr.states[0][0] == 2.0 and tr.states[0][1][0].x == 1.5
    with pytest.raises(FileExistsError, match="overwrite"):
        TraceWriter(path, {})


def test_trace_source_follows_the_clock_and_states(tmp_path):
    path = tmp_path / "t.jsonl"
    events = _write_sample(path)
    src = TraceSource(path)
    assert isinstance(src, MobilitySource)
    assert src.advance(0.5) == [] and src.time == 0.0
    assert src.advance(1.7) == events[:2] and src.time == 1.0
    assert [m.x for m in src.members()] == [0.0, 0.0]
    assert src.advance(2.0) == [] and [m.x for m in src.members()] == [1.5, 0.0]
    assert src.advance(4.2) == events[2:3] and src.time == 4.0 and not src.finished
    assert src.advance(100) == events[3:] and src.time == 6.0 and src.finished
    assert src.members() == []
    src.close()


def test_incomplete_trace_without_end_is_readable(tmp_path):
    path = tmp_path / "t.jsonl"
    events = _write_sample(path, end=False)
    tr = read_trace(path)
    assert tr.events == events and not tr.complete
    src = TraceSource(path)
    assert src.advance(1e9) == events and src.finished and src.time == 5.0


@pytest.mark.parametrize(
    ("mutate", "line", "message"),
    [
        (lambda lines: lines[:-1] + [lines[-1][:20]], 7, "truncated"),
        (lambda lines: lines[:2] + ["{not json\n"] + lines[3:], 3, "invalid JSON"),
        (lambda lines: lines[:1] + ['{"type":"event","time":1}\n'] + lines[2:], 2, "missing field"),
        (lambda lines: lines[:1] + ['{"type":"frame","time":1}\n'] + lines[2:], 2, "unknown record type"),
        (lambda lines: lines[:4] + [lines[1]] + lines[5:], 5, "backwards"),
        (lambda lines: lines + [lines[1]], 8, "after the end record"),
        (lambda lines: lines[:2] + ["\n"] + lines[3:], 3, "empty line"),
    ],
)
def test_malformed_trace_error_names_the_line(tmp_path, mutate, line, message):
    path = tmp_path / "t.jsonl"
    _write_sample(path)
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(mutate(lines)))
    with pytest.raises(TraceError, match=rf"t\.jsonl:{line}: .*{message}"):
        read_trace(path)
    with pytest.raises(TraceError, match=rf":{line}:"):
        TraceSource(path)


def test_bad_header_is_refused(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"type":"header","format":"something-else","version":1,"meta":{}}\n')
    with pytest.raises(TraceError, match=r":1: not a vmc-sim-mobility-trace header"):
        read_trace(path)
    path.write_text("")
    with pytest.raises(TraceError, match="empty"):
        read_trace(path)
    with pytest.raises(TraceError, match="does not exist"):
        read_trace(tmp_path / "missing.jsonl")


def test_write_trace_for_a_given_request_sequence(tmp_path):
    events = [ev(float(i), "join" if i % 2 == 0 else "leave") for i in range(6)]
    p = write_trace(tmp_path / "seq.jsonl", events, {"source": "paper"})
    assert read_trace(p).events == events
    with pytest.raises(TraceError, match=r"event \[1\]"):
        write_trace(tmp_path / "bad.jsonl", [ev(2.0, "join"), ev(1.0, "leave")])


def test_mobility_imports_no_torch_and_no_other_layer():
    code = (
        "import sys, mobility, mobility.city, mobility.rsu, mobility.coverage, mobility.source, mobility.trace, "
        "mobility.config, "
        "mobility.lust\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'fl_core', 'vmc_sim')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": ""})


def test_mobility_config_from_dict_names_the_path():
    from mobility.config import MobilityConfig

    cfg = MobilityConfig.from_dict(
        {
            "network": "city",
            "city": {"period": 2.0},
            "sumo": {"backend": "traci"},
            "rsu": {"count": 2},
            "coverage": {"v2v_range": 100},
        }
    )
    assert cfg.city.period == 2.0 and cfg.sumo.backend == "traci" and cfg.coverage.v2v_range == 100
    with pytest.raises(ValueError, match=r"mobility\.city\.perod is not a known field"):
        MobilityConfig.from_dict({"city": {"perod": 2.0}})
    with pytest.raises(ValueError, match=r"mobility\.city: city\.period must be a positive"):
        MobilityConfig.from_dict({"city": {"period": -1}})
    with pytest.raises(ValueError, match=r"mobility\.netwrk is not a known field"):
        MobilityConfig.from_dict({"netwrk": "city"})
    with pytest.raises(ValueError, match="mobility.network must be one of"):
        MobilityConfig.from_dict({"network": "paris"})
    with pytest.raises(ValueError, match="mobility.lust_clone must name"):
        MobilityConfig.from_dict({"network": "lust_clone"})
