"""The default ``profile`` time model: FLOPs counted per model, charged on a named device, the
same whatever the host's calibration; the other time models stay options."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
from test_cosim import scenario, sim_records, trace_file

from fl_core.editors import EditReport
from fl_core.flops import ModelFlops, count_flops, model_flops
from fl_core.models import build_model
from fl_core.projection_config import SolveInfo
from vmc_sim.compute.hardware import EDGE_DEFAULT, ONBOARD_DEFAULT, PROFILES, DeviceProfile, profile_of
from vmc_sim.cosim import run_scenario
from vmc_sim.engine.timing import CalibratedTime, ProfileTime, time_model
from vmc_sim.scenario.config import ConfigError, load_model
from vmc_sim.scenario.schema import Scenario, TimeModelKind, load_scenario

ROOT = Path(__file__).resolve().parents[1]
FAST = {"train_s_per_sample_epoch": 1e-6, "fisher_s_per_sample": 1e-6, "solve_s_per_unit": 1e-6}
SLOW = {"train_s_per_sample_epoch": 0.5, "fisher_s_per_sample": 2.0, "solve_s_per_unit": 3.0}


def _shrunk_default(**compute) -> Scenario:
    """The embedded default scenario (SUMO's city), shrunk to a few seconds."""
    data = load_scenario(None).model_dump(mode="json")
    data["duration"] = 240.0
    data["federated"]["train"]["epochs"] = 2
    data["coordinator"]["max_requests"] = 8
    data["compute"].update(compute)
    return load_model(Scenario, None, data)


@pytest.mark.sumo
def test_the_host_calibration_does_not_matter_under_the_default_model(tmp_path):
    pytest.importorskip("libsumo")
    runs = []
    for k, costs in enumerate((FAST, SLOW)):
        sc = _shrunk_default(calibration=costs)
        assert sc.compute.time_model is TimeModelKind.PROFILE and not sc.compute.measures_costs
        runs.append(run_scenario(sc, out=tmp_path / f"r{k}", progress=False, say=lambda s: None))
    fast, slow = (sim_records(r) for r in runs)
    assert fast and fast == slow
    assert any(r.get("compute_sim_s", 0) > 0 for r in fast) and any(r.get("solve_sim_s", 0) > 0 for r in fast)
    assert runs[0].manifest()["calibration"] is None


def test_a_fit_is_charged_its_flops_on_the_device(tmp_path):
    sc = scenario(trace_file(tmp_path), federated={"methods": ["retrain"]}, compute={"time_model": "profile"})
    run = run_scenario(sc, out=tmp_path / "p", progress=False, say=lambda s: None)
    setup = sc.federated.setup(sc.seed)
    tm = time_model(sc, setup)
    assert isinstance(tm, ProfileTime) and tm.client.name == EDGE_DEFAULT
    fit = next(r for r in run.records() if r["kind"] == "fit")
    samples = fit["compute_sim_s"] * tm.client.flops_per_s / (2 * tm.flops.train + tm.flops.fisher)
    assert samples == pytest.approx(round(samples), abs=1e-6) and round(samples) > 0


def test_mlp_flops_are_the_hand_count():
    """forward: 2 in h + 2 h out; a training sample-epoch adds the weight gradients of both
    layers and the input gradient of the second (not of the first: the data needs none); the
    diagonal Fisher adds the backward to the layer outputs (one label, or C batched) and one
    squared-gradient product per layer (the labels summed first for linear layers)."""
    for shape in ((1, 8, 8), (1, 28, 28)):
        n_in, h, out = shape[1] * shape[2], 32, 10
        fn = functools.partial(build_model, "mlp", shape, out, hidden=(h,))
        f = count_flops(fn, shape, "diagonal", "sampled")
        forward = 2 * n_in * h + 2 * h * out
        assert f.forward == forward and f.params == n_in * h + h * out
        assert f.train == 4 * n_in * h + 6 * h * out
        assert f.fisher == 2 * forward + 2 * h * out
        assert count_flops(fn, shape, "diagonal", "expected").fisher == 2 * forward + out * 2 * h * out
        assert count_flops(fn, shape, "none").fisher == 0
        assert f.product() == 2 * f.params
    tiny = lambda: build_model("mlp", (1, 8, 8), 10, hidden=(32,))  # noqa: E731
    full = count_flops(tiny, (1, 8, 8), "full", "sampled")  # the per-sample gradient's outer product on top
    assert full.fisher > 2 * full.params**2 and full.product() == 2 * full.params**2


def test_cnn_forward_flops_are_the_hand_count():
    for c, size in ((1, 28), (3, 32)):
        s1 = size - 4
        s2 = s1 // 2 - 4
        hand = 2 * (c * 25 * 32 * s1 * s1 + 800 * 64 * s2 * s2 + 64 * (s2 // 2) ** 2 * 512 + 512 * 128 + 128 * 10)
        f = model_flops(
            ("cnn", "test"), functools.partial(build_model, "cnn", (c, size, size), 10), (c, size, size), 10
        )
        assert f.forward == hand
        assert 2.5 * hand < f.train < 3 * hand  # forward + backward, less the first layer's input gradient

    def unbuilt():
        raise AssertionError("counted again")

    assert model_flops(("cnn", "test"), unbuilt, (3, 32, 32), 10) is f  # counted once per key


def test_kfac_products_grow_with_the_members():
    f = ModelFlops(100, 300, 0, 30, "kfac", "expected", ((10, 2), (1, 10)))
    one = 2 * 10 * 2 * 12 + 2 * 1 * 10 * 11
    assert f.product(1) == one and f.product(5) == 5 * one


def _profile_time(epochs: int) -> ProfileTime:
    flops = ModelFlops(1000, 3000, 5000, 50, "diagonal", "expected", ((5, 10),))  # forward, train, fisher, d
    dev = DeviceProfile("d", "test device", 1e9, "test")
    return ProfileTime(epochs, True, flops, dev, DeviceProfile("c", "", 2e9, "test"), validation_samples=100)


def test_contribution_seconds_scale_with_samples_and_epochs():
    one, two = _profile_time(10), _profile_time(20)
    assert one.contribution(200, None, None) == pytest.approx(2 * one.contribution(100, None, None))
    assert one.contribution(100, None, None) == pytest.approx(100 * (10 * 3000 + 5000) / 1e9)
    assert two.contribution(100, None, None) - one.contribution(100, None, None) == pytest.approx(100 * 10 * 3000 / 1e9)
    assert one.contribution(7, 40, lambda: 99.0) == pytest.approx(40 * 3000 / 1e9)  # sample-epochs; host time unused
    assert one.local_update(60, 5.0) == pytest.approx(2 * one.local_update(30, 5.0))
    assert one.local_update(60, 5.0, reused=True) == 0


def test_a_solve_is_charged_its_products_and_its_scoring():
    tm = _profile_time(10)
    assert tm.solve(EditReport("m", "fit")) == 0.0
    info = SolveInfo("cg_f", products=9, validation=(0.5, 1.0), candidates=[{}, {}, {}])
    report = EditReport("m", "fit", subset_size=4, solve=info)
    assert tm.solve(report) == pytest.approx((10 * 2 * 50 + 3 * 100 * 1000) / 2e9)


def test_an_unknown_profile_is_refused_naming_the_known_ones():
    for key in ("profile", "coordinator_profile"):
        with pytest.raises(ConfigError) as err:
            load_scenario({"compute": {key: "h100"}})
        assert f"compute.{key}" in str(err.value) and all(n in str(err.value) for n in PROFILES.names())
    with pytest.raises(ValueError, match="known device profiles: " + ", ".join(PROFILES.names())):
        profile_of("h100", EDGE_DEFAULT)
    with pytest.raises(ConfigError, match="built-in"):
        load_scenario({"compute": {"profile": {"name": EDGE_DEFAULT, "flops_per_s": 1e12, "source": "x"}}})


def test_profiles_follow_the_mode_and_take_a_custom_device():
    c = load_scenario({"compute": {"mode": "onboard"}}).compute
    assert c.client_profile().name == ONBOARD_DEFAULT and c.solver_profile().name == EDGE_DEFAULT
    own = {"name": "my_obu", "flops_per_s": 2.5e11, "source": "measured on our unit", "description": "ours"}
    c = load_scenario({"compute": {"profile": own, "coordinator_profile": "nvidia_a100"}}).compute
    assert c.client_profile() == DeviceProfile("my_obu", "ours", 2.5e11, "measured on our unit")
    assert c.solver_profile() is PROFILES["nvidia_a100"]
    for name in PROFILES.names():
        p = PROFILES[name]
        assert p.source and p.flops_per_s == pytest.approx(p.peak_flops_per_s * p.utilisation)


def test_describe_says_what_the_profile_model_charges_with():
    sc = load_scenario(None)
    tm = time_model(sc, sc.federated.setup(sc.seed))
    d = tm.describe()
    assert d is not None and d["client_profile"]["name"] == d["coordinator_profile"]["name"] == EDGE_DEFAULT
    assert d["flops_per_sample"]["forward"] == 2 * 64 * 32 + 2 * 32 * 10 and d["model"] == "mlp"
    assert tm.calibration is None


def test_calibrated_stays_an_option(tmp_path):
    sc = load_scenario({"compute": {"time_model": "calibrated", "calibration": SLOW}})
    assert not sc.compute.measures_costs
    assert load_scenario({"compute": {"time_model": "calibrated"}}).compute.measures_costs
    tm = time_model(sc, sc.federated.setup(sc.seed))
    assert isinstance(tm, CalibratedTime) and tm.describe() is None
    assert tm.contribution(10, None, None) == pytest.approx(10 * (20 * 0.5 + 2.0))
    trace = trace_file(tmp_path)
    run = run_scenario(
        scenario(trace, federated={"methods": ["fsosa"]}, compute={"time_model": "calibrated", "calibration": SLOW}),
        out=tmp_path / "c",
        progress=False,
        say=lambda s: None,
    )
    assert run.manifest()["calibration"]["source"] == "pinned"


def test_shipped_scenarios_that_pin_costs_still_load():
    for path in sorted((ROOT / "scenarios").glob("*.yaml")):
        sc = load_scenario(path)
        if sc.compute.calibration is not None and sc.compute.time_model is TimeModelKind.PROFILE:
            assert not sc.compute.measures_costs and sc.compute.client_profile().name


def test_a_stored_count_is_reused_only_if_it_verifies(tmp_path, monkeypatch):
    """Counts persist in ``$VMC_CACHE/flops.json``; an entry that no longer matches the model is counted again."""
    import json

    import fl_core.flops as flops

    monkeypatch.setenv("VMC_CACHE", str(tmp_path))
    monkeypatch.setattr(flops, "_CACHE", {})
    fn = lambda: build_model("mlp", (1, 8, 8), 10, hidden=(32,))  # noqa: E731
    first = model_flops("mlp-test", fn, (1, 8, 8), 10)
    stored = json.loads(flops.store_path().read_text())
    (name,) = stored
    assert stored[name]["forward"] == first.forward
    monkeypatch.setattr(flops, "_CACHE", {})
    monkeypatch.setattr(flops, "count_flops", lambda *a, **k: pytest.fail("a verified count is counted again"))
    assert model_flops("mlp-test", fn, (1, 8, 8), 10) == first
    stored[name]["params"] += 1  # another model under the same key
    flops.store_path().write_text(json.dumps(stored))
    monkeypatch.setattr(flops, "_CACHE", {})
    monkeypatch.setattr(flops, "count_flops", count_flops)
    assert model_flops("mlp-test", fn, (1, 8, 8), 10) == first
    assert json.loads(flops.store_path().read_text())[name]["params"] == first.params
