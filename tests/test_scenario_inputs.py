"""Scenario files from a user's point of view: their own SUMO network, unknown keys, files
checked before anything runs, and no run directory left by a run that never recorded."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mobility.sumo_files import root_tag
from vmc_sim.cli import main
from vmc_sim.cosim import run_scenario
from vmc_sim.scenario.config import ConfigError
from vmc_sim.scenario.inputs import check_inputs
from vmc_sim.scenario.schema import load_scenario

ROOT = Path(__file__).resolve().parent.parent
OWN = ROOT / "scenarios" / "own_network"


def write(tmp_path, text: str, name: str = "s.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_the_shipped_own_network_scenario_resolves_its_files_relative_to_itself(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # not the scenario's directory
    sc = load_scenario(ROOT / "scenarios" / "own_network.yaml")
    assert Path(sc.mobility.net_file) == OWN / "town.net.xml"
    assert [Path(p) for p in sc.mobility.route_files] == [OWN / "town.rou.xml"]
    check_inputs(sc)
    assert root_tag(OWN / "town.net.xml") == "net" and root_tag(OWN / "town.sumocfg") == "configuration"


def test_a_sumocfg_alone_is_enough(tmp_path):
    shutil.copytree(OWN, tmp_path / "net")
    p = write(tmp_path, "mobility:\n  source: files\n  config_file: net/town.sumocfg\n")
    check_inputs(load_scenario(p))
    (tmp_path / "net" / "town.net.xml").unlink()
    with pytest.raises(ConfigError, match=r"mobility.config_file: the net-file it names does not exist"):
        check_inputs(load_scenario(p))


def test_an_unknown_key_lists_the_keys_of_its_section(tmp_path):
    with pytest.raises(ConfigError) as e:
        load_scenario(write(tmp_path, "federated:\n  rho: 0.3\n  epochs: 3\n"))
    msg = str(e.value)
    assert "federated.epochs: unknown key; federated takes" in msg
    assert "num_clients" in msg and "train" in msg and "methods" in msg
    with pytest.raises(ConfigError, match=r"federated.train.epoch: unknown key; federated.train takes epochs, lr"):
        load_scenario(write(tmp_path, "federated:\n  train: {epoch: 3}\n"))
    with pytest.raises(ConfigError, match=r"colour: unknown key; the top level takes name, seed, duration"):
        load_scenario(write(tmp_path, "colour: red\n"))
    with pytest.raises(ConfigError, match=r"mobility.rsus.*unknown field\(s\) \['radios'\]; mobility.rsus takes"):
        load_scenario(write(tmp_path, "mobility:\n  rsus: {radios: 100}\n"))


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        (
            "mobility:\n  source: files\n  net_file: nowhere.net.xml\n  route_files: [nowhere.rou.xml]\n",
            r"mobility.net_file: file not found: .*nowhere.net.xml",
        ),
        (
            f"mobility:\n  source: files\n  net_file: {OWN}/town.rou.xml\n  route_files: [{OWN}/town.net.xml]\n",
            r"mobility.net_file: .*town.rou.xml is a route file \(<routes>\), not a SUMO network \(<net>\); "
            r"did you swap net_file and route_files\?",
        ),
        (
            f"mobility:\n  source: files\n  net_file: {OWN}/town.net.xml\n  route_files: [{OWN}/town.net.xml]\n",
            r"mobility.route_files\[0\]: .* is a SUMO network \(<net>\), not a route file",
        ),
        (
            f"mobility:\n  source: files\n  config_file: {OWN}/town.net.xml\n",
            r"mobility.config_file: .* is a SUMO network \(<net>\), not a SUMO configuration",
        ),
        ("mobility:\n  source: trace\n  trace: gone.jsonl\n", r"mobility.trace: file not found"),
    ],
)
def test_files_are_checked_before_anything_runs_and_no_run_directory_is_left(tmp_path, text, pattern):
    out = tmp_path / "runs"
    rc = main(["run", str(write(tmp_path, text)), "--out", str(out), "--quiet"])
    assert rc == 2
    with pytest.raises(ConfigError, match=pattern):
        run_scenario(load_scenario(tmp_path / "s.yaml"), out=out, progress=False, say=lambda s: None)
    assert not out.exists() or not any(out.iterdir())


def test_an_unknown_dataset_is_refused_when_the_file_is_read(tmp_path):
    with pytest.raises(ConfigError, match=r"federated.dataset: .*unknown dataset 'mnsit'; known datasets: .*mnist"):
        load_scenario(write(tmp_path, "federated:\n  dataset: mnsit\n"))


def test_a_run_that_fails_before_its_first_record_leaves_no_run_directory(tmp_path, monkeypatch):
    import vmc_sim.cosim as cosim

    def broken(*a, **k):
        raise RuntimeError("SUMO could not start (injected)")

    monkeypatch.setattr(cosim, "open_source", broken)
    out = tmp_path / "runs"
    with pytest.raises(RuntimeError, match="injected"):
        run_scenario(load_scenario(None), out=out, progress=False, say=lambda s: None)
    assert not out.exists() or not any(out.iterdir())


def test_run_help_points_to_the_scenario_reference(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = capsys.readouterr().out
    assert "scenarios/REFERENCE.md" in text and "scenarios/own_network.yaml" in text and "--print-config" in text


def test_a_partial_section_keeps_the_documented_defaults(tmp_path):
    from vmc_sim.scenario.schema import Scenario

    sc = load_scenario(write(tmp_path, "federated:\n  rho: 0.3\nmobility:\n  rsus: {count: 2}\n"))
    d = Scenario()
    assert sc.federated.rho == 0.3
    assert (sc.federated.num_clients, sc.federated.train.epochs, sc.federated.train.lr) == (16, 20, 0.05)
    assert sc.federated.train.fisher == d.federated.train.fisher and sc.federated.model == "mlp"
    assert sc.federated.model_dump() == d.federated.model_copy(update={"rho": 0.3}).model_dump()
    assert sc.mobility.rsus == {"placement": "auto", "count": 2, "radius": 200.0}
    fixed = load_scenario(write(tmp_path, "federated: {subset_size: 5}\n"))
    assert fixed.federated.rho is None and fixed.federated.subset_size == 5
    with pytest.raises(ConfigError, match="either rho"):
        load_scenario(write(tmp_path, "federated: {subset_size: 5, rho: 0.5}\n"))


def test_print_config_shows_the_resolved_scenario_and_runs_nothing(tmp_path, capsys):
    import yaml

    path = write(tmp_path, "name: partial\nfederated:\n  rho: 0.3\n")
    out = tmp_path / "runs"
    assert main(["run", str(path), "--print-config", "--out", str(out)]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed == load_scenario(path).resolved()
    assert printed["federated"]["train"]["epochs"] == 20 and printed["compute"]["time_model"] == "profile"
    # the sections a lower layer reads are shown with the values it uses, not as given ({})
    assert printed["channel"]["path_loss_model"] == "tr37885_urban" and printed["channel"]["outage_timeout_s"] == 3
    assert printed["channel"]["link_state_model"] == "city"  # resolved: the model the defaults imply
    assert printed["mobility"]["city"]["junctions_x"] == 8 and printed["mobility"]["coverage"]["membership"] == "union"
    assert "begin" in printed["mobility"]["lust"] and printed["mobility"]["rsus"]["radius"] == 200
    assert not out.exists()
    again = write(tmp_path, yaml.safe_dump(printed), "again.yaml")
    assert load_scenario(again).resolved() == load_scenario(path).resolved()


def test_the_scenario_reference_is_generated_from_the_schema():
    from vmc_sim.scenario.docs import scenario_reference

    text = (ROOT / "scenarios" / "REFERENCE.md").read_text()
    assert text == scenario_reference(), (
        "regenerate: python -c 'from vmc_sim.scenario.docs import scenario_reference; "
        'open("scenarios/REFERENCE.md", "w").write(scenario_reference())\''
    )
    assert "| `num_clients` | `16` |" in text and "| `radius` | `200.0` |" in text


def test_projection_preconditioner_reaches_the_merge_and_a_bad_one_is_named(tmp_path):
    from fl_core.fisher.base import Preconditioner

    assert load_scenario(None).federated.projection.build().preconditioner is Preconditioner.KRONECKER
    sc = load_scenario(write(tmp_path, "federated:\n  projection: {preconditioner: eigen_diagonal}\n"))
    assert sc.federated.projection.build().preconditioner is Preconditioner.EIGEN_DIAGONAL
    with pytest.raises(ConfigError, match=r"federated.projection.preconditioner"):
        load_scenario(write(tmp_path, "federated:\n  projection: {preconditioner: jacobi}\n"))


def test_projection_iterates_reach_the_merge_and_bad_ones_are_named(tmp_path):
    sc = load_scenario(write(tmp_path, "federated:\n  projection: {method: cg_f, damping: 0, iterates: [50, 10]}\n"))
    assert sc.federated.projection.build().iterates == (10, 50)
    with pytest.raises(ConfigError, match=r"federated.projection.iterates"):
        load_scenario(write(tmp_path, "federated:\n  projection: {iterates: [0]}\n"))


def test_the_solve_runs_where_training_does_unless_the_projection_says_otherwise(tmp_path):
    """``projection.device`` (null by default) follows ``train.device``, so ``device: auto`` puts
    training, the Fisher and the solve's products on the GPU together; a bad device is named."""
    assert load_scenario(None).federated.projection_config().device == "cpu"
    sc = load_scenario(write(tmp_path, "federated:\n  train: {device: auto}\n"))
    assert sc.federated.projection_config().device == "auto"
    sc = load_scenario(write(tmp_path, "federated:\n  train: {device: auto}\n  projection: {device: cpu}\n"))
    assert sc.federated.projection_config().device == "cpu"
    with pytest.raises(ConfigError, match=r"federated.projection.device"):
        load_scenario(write(tmp_path, "federated:\n  projection: {device: tpu}\n"))


def test_a_zero_fedprox_weight_is_refused_when_the_file_is_read(tmp_path):
    # it used to run FedProx at 0.01 while the manifest said 0
    with pytest.raises(ConfigError, match=r"federated.rounds.prox_mu"):
        load_scenario(write(tmp_path, "federated:\n  rounds:\n    prox_mu: 0\n"))


@pytest.mark.parametrize("text", ["", "\n\n  \n", "# nothing yet\n", "# a\n\n# b\n"])
def test_an_empty_scenario_file_is_refused_not_run_as_the_default(tmp_path, capsys, text):
    out = tmp_path / "runs"
    assert main(["run", str(write(tmp_path, text)), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "scenario file" in err and "s.yaml is empty; write at least one key" in err, err
    assert not out.exists()
    with pytest.raises(ConfigError, match=r"s.yaml is empty"):
        load_scenario(tmp_path / "s.yaml")


def test_an_explicit_empty_mapping_means_every_default(tmp_path):
    assert load_scenario(write(tmp_path, "{}\n")) == load_scenario(None)


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("federated:\n  train:\n    lr: .inf\n", r"federated.train.lr: must be a finite number, got inf"),
        ("duration: .inf\n", r"duration: must be a finite number, got inf"),
        ("federated:\n  rho: .nan\n", r"federated.rho: must be a finite number, got nan"),
        ("coordinator: {warmup: 'inf'}\n", r"coordinator.warmup: must be a finite number, got inf"),
        ("seed: '-inf'\n", r"seed: must be a finite number, got -inf"),
        ("channel: {bandwidth_hz: -.inf}\n", r"channel.bandwidth_hz: must be a finite number, got -inf"),
        ("mobility:\n  rsus: {region: [0, 0, .inf, 5]}\n", r"mobility.rsus.region\[2\]: must be a finite number"),
        ("mobility:\n  city: {spacing: nan}\n", r"mobility.city.spacing: must be a finite number, got nan"),
        ("mobility:\n  lust: {scale: .inf}\n", r"mobility.lust.scale: must be a finite number, got inf"),
    ],
)
def test_a_non_finite_number_is_refused_naming_the_file_and_key(tmp_path, capsys, text, pattern):
    out = tmp_path / "runs"
    assert main(["run", str(write(tmp_path, text)), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "s.yaml" in err, err
    with pytest.raises(ConfigError, match=pattern):
        load_scenario(tmp_path / "s.yaml")
    assert not out.exists()


def test_the_train_config_refuses_an_infinite_learning_rate():
    from fl_core.training import TrainConfig

    with pytest.raises(ValueError, match=r"train.lr must be a finite number > 0, got inf"):
        TrainConfig(lr=float("inf"))


FAR = "rsus: {placement: explicit, positions: [[100, 100], {id: far, x: 1000000, y: 1000000}]}"


@pytest.mark.parametrize(
    ("text", "bounds"),
    [
        (f"mobility:\n  {FAR}\n", r"the embedded city's network \(x 0..1750, y 0..1750 m\)"),
        (
            f"mobility:\n  source: files\n  net_file: {OWN}/town.net.xml\n  route_files: [{OWN}/town.rou.xml]\n  {FAR}\n",
            r"the network .*town.net.xml \(x 0..600, y 0..600 m\)",
        ),
        (
            f"mobility:\n  source: files\n  config_file: {OWN}/town.sumocfg\n  {FAR}\n",
            r"the network .*town.net.xml \(x 0..600, y 0..600 m\)",
        ),
    ],
)
def test_an_rsu_outside_the_network_is_refused_before_anything_runs(tmp_path, capsys, text, bounds):
    out = tmp_path / "runs"
    assert main(["run", str(write(tmp_path, text)), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "s.yaml: mobility.rsus.positions[1]: RSU 'far' at (1e+06, 1e+06) lies outside" in err, err
    with pytest.raises(ConfigError, match=bounds):
        load_scenario(tmp_path / "s.yaml")
    assert not out.exists()
    import yaml

    mapping = yaml.safe_load(text)
    with pytest.raises(ConfigError, match=r"mobility.rsus.positions\[1\]: RSU 'far'.*" + bounds):
        run_scenario(load_scenario(mapping), out=out, progress=False, say=lambda s: None)
    assert not out.exists()


def test_an_rsu_just_off_the_edge_that_still_covers_it_is_kept(tmp_path):
    from vmc_sim.scenario.inputs import check_rsu_bounds

    sc = load_scenario(write(tmp_path, "mobility:\n  rsus: {placement: explicit, positions: [[1850, -50]]}\n"))
    check_rsu_bounds(sc)  # 100 m right of and 50 m below the corner (1750, 0): within its 200 m
    with pytest.raises(ConfigError, match=r"positions\[0\]: RSU 'rsu0' at \(1951, 0\)"):
        load_scenario(write(tmp_path, "mobility:\n  rsus: {placement: explicit, positions: [[1951, 0]]}\n"))


def test_a_trace_has_no_network_to_check_rsus_against(tmp_path):
    from vmc_sim.scenario.inputs import check_rsu_bounds

    sc = load_scenario(
        {
            "mobility": {
                "source": "trace",
                "trace": "t.jsonl",
                "rsus": {"placement": "explicit", "positions": [[1e6, 1e6]]},
            }
        }
    )
    check_rsu_bounds(sc)


def _geo_net(path):
    path.write_text(
        '<net version="1.20"><location netOffset="-500,-400" convBoundary="0.00,0.00,2500.00,3500.00" '
        'origBoundary="6.10,49.58,6.14,49.62" projParameter="+proj=utm +zone=32 +ellps=WGS84"/></net>\n'
    )
    return path


def test_rsus_placed_by_any_means_are_checked_against_the_network(tmp_path):
    """An RSU far from the network is refused before SUMO runs, whether given in metres, as
    lon/lat (against the network's geo bounds) or resolved from a junction or LuST's built network
    (:func:`vmc_sim.sources.base.check_placed_rsus`, called once RSUs are placed)."""
    from mobility.rsu import Rsu, geo_distance_m
    from mobility.sumo_files import geo_bounds
    from vmc_sim.sources.base import SourceInputError, check_placed_rsus

    net = _geo_net(tmp_path / "geo.net.xml")
    assert geo_bounds(net) == (6.10, 49.58, 6.14, 49.62)
    assert geo_distance_m(6.12, 49.60, geo_bounds(net)) == 0.0
    assert 7_000 < geo_distance_m(6.24, 49.60, geo_bounds(net)) < 7_300  # 0.1 degree of longitude at 49.6 N
    check_placed_rsus([Rsu(id="in", x=100.0, y=100.0, radius=50.0)], net)
    with pytest.raises(
        SourceInputError, match=r"RSU 'far' at \(1e\+06, 1e\+06\) lies outside the bounds of the network"
    ):
        check_placed_rsus([Rsu(id="far", x=1e6, y=1e6, radius=85.0)], net)


def test_a_lon_lat_rsu_off_a_geo_referenced_network_is_refused_before_the_run(tmp_path):
    from vmc_sim.scenario.config import ConfigError, load_model
    from vmc_sim.scenario.inputs import check_inputs
    from vmc_sim.scenario.schema import Scenario

    net = _geo_net(tmp_path / "geo.net.xml")
    routes = tmp_path / "r.rou.xml"
    routes.write_text("<routes/>\n")
    data = {
        "mobility": {
            "source": "files",
            "net_file": str(net),
            "route_files": [str(routes)],
            "rsus": {"placement": "explicit", "radius": 85, "positions": [{"id": "lux", "lon": 6.12, "lat": 49.6}]},
        }
    }
    check_inputs(load_model(Scenario, None, data))
    data["mobility"]["rsus"]["positions"] = [{"id": "paris", "lon": 2.35, "lat": 48.86}]
    with pytest.raises(
        ConfigError, match=r"positions\[0\]: RSU 'paris' at \(lon 2.35, lat 48.86\) lies [\d,]+ m outside"
    ):
        check_inputs(load_model(Scenario, None, data))


@pytest.mark.parametrize(
    ("name", "what"),
    [("a,b.rou.xml", "it has a ',' in its path"), ("town.rou.xml ", "its name begins or ends with white space")],
)
def test_a_file_name_sumo_cannot_take_is_refused_before_sumo_runs(tmp_path, capsys, name, what):
    """SUMO splits its file options at commas and strips white space from each name: such a file
    is refused naming the field, the file and why, before SUMO starts (also when a generated input
    would be handed to it, by :class:`mobility.sumo_config.SumoConfig`)."""
    from mobility.sumo_config import SumoConfig

    shutil.copy(OWN / "town.rou.xml", tmp_path / name)
    text = f"mobility:\n  source: files\n  net_file: {OWN}/town.net.xml\n  route_files: ['{tmp_path / name}']\n"
    out = tmp_path / "runs"
    assert main(["run", str(write(tmp_path, text)), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"mobility.route_files[0]: SUMO cannot take the file '{tmp_path / name}': {what}" in err, err
    assert not out.exists()
    with pytest.raises(ValueError, match=r"sumo.route_files\[1\]: SUMO cannot take the file"):
        SumoConfig(net_file="n.net.xml", route_files=["ok.rou.xml", str(tmp_path / name)])
    with pytest.raises(ValueError, match=r"sumo.net_file: SUMO cannot take the file 'x,y.net.xml'"):
        SumoConfig(net_file="x,y.net.xml")


def test_sumo_takes_other_characters_and_not_a_comma(tmp_path):
    """What the check above rests on, asked of the sumo binary itself."""
    pytest.importorskip("sumo")
    import subprocess

    from mobility.sumo import sumo_binary

    for name, ok in (("a b;#'é.rou.xml", True), ("a,b.rou.xml", False)):
        shutil.copy(OWN / "town.rou.xml", tmp_path / name)
        args = [str(sumo_binary("sumo")), "-n", str(OWN / "town.net.xml"), "-r", str(tmp_path / name), "--end", "1"]
        assert (subprocess.run(args, capture_output=True).returncode == 0) == ok, name


def test_the_route_files_of_an_fcd_source_can_raise_its_speed_limit(tmp_path):
    from vmc_sim.scenario.input_digests import input_files
    from vmc_sim.sources.fcd import fcd_rules

    (tmp_path / "f.xml").write_text(
        '<fcd-export><timestep time="0"><vehicle id="v" x="1" y="1" speed="1"/></timestep></fcd-export>'
    )
    (tmp_path / "types.add.xml").write_text('<additional><vType id="fast" maxSpeed="100"/></additional>\n')
    positions = "rsus: {placement: explicit, positions: [[0, 0]]}"
    sc = load_scenario(write(tmp_path, f"mobility:\n  source: fcd\n  fcd_file: f.xml\n  {positions}\n"))
    assert fcd_rules(sc.mobility).max_speed == 83.34
    sc = load_scenario(
        write(tmp_path, f"mobility:\n  source: fcd\n  fcd_file: f.xml\n  route_files: [types.add.xml]\n  {positions}\n")
    )
    assert fcd_rules(sc.mobility).max_speed == 150.0 and str(tmp_path / "types.add.xml") in input_files(sc)
    check_inputs(sc)
    sc = load_scenario(
        write(tmp_path, f"mobility:\n  source: fcd\n  fcd_file: f.xml\n  fcd_max_speed: 20\n  {positions}\n")
    )
    assert fcd_rules(sc.mobility).max_speed == 20.0
    sc = load_scenario(
        write(tmp_path, f"mobility:\n  source: fcd\n  fcd_file: f.xml\n  route_files: [f.xml]\n  {positions}\n")
    )
    with pytest.raises(
        ConfigError, match=r"mobility.route_files\[0\]: .*f.xml is an XML file with root <fcd-export>, not a route file"
    ):
        check_inputs(sc)


def test_every_key_of_a_scenario_documents_itself():
    """The reference is generated from the fields alone: every key's meaning comes from its own
    definition (a pydantic description, or a lower layer's dataclass field's ``metadata['doc']``)."""
    from vmc_sim.scenario.docs import scenario_reference

    rows = [line for line in scenario_reference().splitlines() if line.startswith("| `")]
    bare = [row.split("|")[1].strip() for row in rows if not row.rstrip("| ").split("|")[-1].strip()]
    assert rows and bare == []
