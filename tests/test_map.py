"""``vmc plot RUN --map``: the figure holds one track per client, coloured by what became of its
contributions, one coverage circle per RSU and the median link's reach per link state; the
network and the buildings are the run's, verified; the PNG and the GIF are written where
``vmc plot`` writes; what cannot be drawn is said."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from matplotlib.colors import to_hex
from test_export import two_method_replay

from fl_core.errors import CorruptFileError
from mobility.errors import TraceError
from vmc_sim.cli import main
from vmc_sim.cosim import replay_scenario, run_scenario
from vmc_sim.radio.link_budget import ChannelConfig
from vmc_sim.radio.link_state import LinkState
from vmc_sim.radio.reach import median_rate_bps, median_reach_m
from vmc_sim.rundir.directory import RunDir
from vmc_sim.rundir.map_inputs import OUTCOMES, _unverified, client_outcomes, map_inputs
from vmc_sim.rundir.maps import COLOURS, map_figure, plot_map
from vmc_sim.scenario.config import load_model
from vmc_sim.scenario.schema import Scenario, load_scenario


@pytest.fixture(scope="module")
def city_run(tmp_path_factory) -> Path:
    """The embedded city for 4 simulated minutes over two RSUs, with uploads slow enough that some
    contributions never arrive (a few seconds)."""
    pytest.importorskip("libsumo")
    data = load_scenario(None).model_dump(mode="json")
    data.update(duration=240.0, coordinator={**data["coordinator"], "max_requests": 24})
    data["mobility"]["rsus"] = {"placement": "auto", "count": 2, "radius": 200}
    data["federated"]["train"]["epochs"] = 1
    data["compute"] = {"time_model": "device", "seconds_per_sample_epoch": 0.02}
    city = load_model(Scenario, None, data)
    return run_scenario(city, out=tmp_path_factory.mktemp("city"), progress=False, say=lambda s: None).path


@pytest.fixture(scope="module")
def replay_run(tmp_path_factory) -> Path:
    """A replay of a written trace (no SUMO, no network), with uploads slow enough to fail."""
    return two_method_replay(tmp_path_factory.mktemp("replay"))


def gids(ax, prefix: str) -> dict[str, object]:
    """The artists of ``ax`` whose gid starts with ``prefix``, by the rest of their gid."""
    found = [*ax.lines, *ax.patches, *ax.collections]
    return {a.get_gid()[len(prefix) :]: a for a in found if (a.get_gid() or "").startswith(prefix)}


def clients_of(run: Path) -> set[str]:
    return {str(c) for r in RunDir(run, create=False).records() for c in r.get("added") or []}


@pytest.mark.sumo
def test_the_map_holds_one_track_per_client_and_one_circle_per_rsu(city_run):
    inputs = map_inputs(city_run)
    drawn = map_figure(inputs)
    clients = clients_of(city_run)
    assert len(clients) > 5 and set(inputs.tracks) == clients
    assert list(drawn.axes) == ["fsosa", "retrain"]  # the scenario's order
    for method, ax in drawn.axes.items():
        tracks = gids(ax, "track:")
        assert set(tracks) == clients
        for client, line in tracks.items():
            assert to_hex(line.get_color()) == COLOURS[inputs.outcomes[method][client]]
        assert set(gids(ax, "coverage:")) == {"rsu0", "rsu1"}
        for rsu in inputs.rsus:
            circle = gids(ax, "coverage:")[rsu["id"]]
            assert circle.center == (rsu["x"], rsu["y"]) and circle.radius == rsu["radius"]
        reach = gids(ax, "reach:")
        assert set(reach) == {f"{s.value}:{r}" for s in LinkState for r in ("rsu0", "rsu1")}
        assert gids(ax, "network")[""].get_segments() and len(gids(ax, "buildings")[""].get_paths()) == 49
    assert inputs.notes == []
    seen = {o for per in inputs.outcomes.values() for o in per.values()}
    assert {"arrived", "not arrived"} <= seen <= set(OUTCOMES)
    drawn.figure.clf()


@pytest.mark.sumo
def test_a_track_follows_the_trace_and_breaks_where_the_vehicle_left(city_run):
    import vmc_sim

    pytest.importorskip("pandas")
    trace = vmc_sim.open_run(city_run).trace
    inputs = map_inputs(city_run)
    client, visits = max(inputs.tracks.items(), key=lambda kv: sum(len(v) for v in kv[1]))
    rows = trace[trace.vehicle == client]
    assert sorted((t, x, y) for visit in visits for t, x, y in visit) == sorted(
        set(zip(rows.time, rows.x, rows.y, strict=True))
    )
    leaves = rows[rows.kind == "leave"].time.tolist()
    assert [v[-1][0] for v in visits if v[-1][0] in leaves] == leaves  # each visit that ended, at its leave


def test_outcomes_take_precedence_and_a_withdrawal_counts_only_members():
    records = [
        {"method": "m", "kind": "fit", "added": ["a", "b", "c", "d", "e"], "members": ["a", "b", "c"]},
        {"method": "m", "kind": "suspend", "added": [], "withdrawn": ["a", "b", "c", "d", "e"], "members": []},
    ]
    rows = [
        {"method": "m", "client": c, "outcome": o}
        for c, o in (("a", "arrived"), ("b", "arrived"), ("b", "not_arrived"), ("d", "arrived"))
    ]
    assert client_outcomes(records, rows) == {
        "m": {"a": "withdrawn", "b": "not arrived", "c": "withdrawn", "d": "arrived", "e": "not trained"}
    }


def test_the_reach_is_where_the_median_link_loses_the_lowest_mcs():
    cfg = ChannelConfig()
    for state in LinkState:
        d = median_reach_m(state, cfg)
        assert median_rate_bps(d, state, cfg) > 0 and median_rate_bps(d + 0.2, state, cfg) == 0
    los, nlosv, nlos = (median_reach_m(s, cfg) for s in LinkState)
    assert los > nlosv > nlos > 50


def test_a_run_without_a_network_is_drawn_without_it_and_says_why(replay_run, tmp_path, capsys):
    inputs = map_inputs(replay_run)
    assert inputs.network is None and inputs.buildings == []
    assert inputs.notes == ["network not drawn: the run names none"]
    assert list(inputs.reach) == [LinkState.LOS]  # the idealised link: LOS only
    assert set(inputs.tracks) == clients_of(replay_run) and "not arrived" in inputs.outcomes["retrain"].values()
    assert main(["plot", str(replay_run), "--map", "--method", "retrain", "--out", str(tmp_path / "m.png")]) == 0
    out = capsys.readouterr().out
    assert "note: network not drawn" in out and (tmp_path / "m.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.sumo
def test_the_png_is_written_into_the_run_under_its_lock_and_elsewhere_only_as_asked(city_run, tmp_path, capsys):
    assert main(["plot", str(city_run), "--map"]) == 0
    assert (city_run / "map.png").read_bytes()[:4] == b"\x89PNG"
    (tmp_path / "taken.png").write_bytes(b"mine")
    assert main(["plot", str(city_run), "--map", "--out", str(tmp_path / "taken.png")]) == 2
    assert "exists" in capsys.readouterr().err and (tmp_path / "taken.png").read_bytes() == b"mine"
    assert main(["plot", str(city_run), "--map", "--animate", "--out", str(tmp_path / "a.png")]) == 2
    assert "GIF" in capsys.readouterr().err
    assert main(["plot", str(city_run), "--map", "--method", "nope"]) == 1
    assert "not a method of the run" in capsys.readouterr().err


@pytest.mark.sumo
def test_the_animation_is_a_gif_over_simulated_time(city_run, tmp_path):
    from PIL import Image

    gif = plot_map(city_run, out=tmp_path / "map.gif", animate=True, method="fsosa", frames=4, say=lambda s: None)
    with Image.open(gif) as im:
        assert im.format == "GIF" and im.n_frames == 4


@pytest.mark.sumo
def test_a_replay_draws_the_network_of_the_run_it_replayed(city_run, tmp_path):
    sc = replay_scenario(city_run / "trace.jsonl")
    replay = run_scenario(sc, out=tmp_path, progress=False, say=lambda s: None).path
    inputs, original = map_inputs(replay), map_inputs(city_run)
    assert inputs.network_file == original.network_file and inputs.network == original.network
    assert len(inputs.buildings) == 49 and inputs.notes == []  # the radio of a replay keeps the city's blocks
    assert inputs.tracks == original.tracks


@pytest.mark.sumo
def test_a_changed_trace_is_refused_naming_it(city_run, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(city_run, copy)
    with open(copy / "trace.jsonl", "a") as f:
        f.write("\n")
    with pytest.raises((CorruptFileError, TraceError), match="trace.jsonl"):
        map_inputs(copy)


def test_a_file_is_drawn_only_when_it_verifies(tmp_path):
    net = tmp_path / "entry" / "city.net.xml"
    net.parent.mkdir()
    net.write_text("<net/>\n")
    from mobility.cache import file_sha256

    digest = file_sha256(net)
    assert _unverified(str(net), {str(net): digest}) is None
    assert "changed since the run" in str(_unverified(str(net), {str(net): "0" * 64}))
    assert "no digest" in str(_unverified(str(net), {}))
    (net.parent / "build.json").write_text(json.dumps({"outputs": {"city.net.xml": digest}}))
    assert _unverified(str(net), {}) is None
    net.write_text("<net>changed</net>\n")
    assert "changed since it was built" in str(_unverified(str(net), {}))
    assert _unverified(str(tmp_path / "gone.net.xml"), {}) == "missing"
