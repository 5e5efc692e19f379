"""``vmc sweep --engine ray`` on a multi-node Ray cluster started on this machine
(``ray.cluster_utils.Cluster``: a head with no CPU and worker nodes of one CPU each). Points run
in node-local directories with their inputs sent through Ray and their run directories sent back,
give the records and ``results.csv`` of ``--engine local``, and a point whose node is removed
mid-run runs again on another node with the same records."""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
import time
from pathlib import Path

import pytest
from test_sweep import quiet, read_csv, spec, tiny_base, tiny_trace

from vmc_sim.rundir.directory import RunDir
from vmc_sim.sweep import run_sweep

ray = pytest.importorskip("ray", reason="Ray is not installed (optional extra 'ray')")
from ray.cluster_utils import Cluster  # noqa: E402

HOST_DEPENDENT = ("wall_s", "run_dir", "host")


def sim_records(run_dir: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith("host_")} for r in RunDir(run_dir, create=False).records()]


def same_results(a: Path, b: Path) -> None:
    ra, rb = read_csv(a / "results.csv"), read_csv(b / "results.csv")
    assert [{k: v for k, v in r.items() if k not in HOST_DEPENDENT} for r in ra] == [
        {k: v for k, v in r.items() if k not in HOST_DEPENDENT} for r in rb
    ]
    for r in ra:
        assert sim_records(a / r["point"]) == sim_records(b / r["point"]), r["point"]


def start(monkeypatch: pytest.MonkeyPatch, cache: Path):
    """A head with no CPU and two one-CPU nodes working in a directory of their own (short: Ray's
    socket paths live under it)."""
    nodes_dir = Path(tempfile.mkdtemp(prefix="vmcn-", dir="/tmp"))
    monkeypatch.setenv("TMPDIR", str(nodes_dir))  # the nodes' work directories, not the driver's
    monkeypatch.setenv("VMC_CACHE", str(cache))
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    nodes = [c.add_node(num_cpus=1) for _ in range(2)]
    c.wait_for_nodes()
    return c, nodes, nodes_dir


def stop(c: Cluster, nodes_dir: Path) -> None:
    ray.shutdown()
    c.shutdown()
    shutil.rmtree(nodes_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory):
    """One cluster for the tests that leave it whole."""
    with pytest.MonkeyPatch.context() as mp:
        c, nodes, nodes_dir = start(mp, tmp_path_factory.mktemp("node-cache"))
        yield c, nodes, nodes_dir
        stop(c, nodes_dir)


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    """A cluster of its own, for a test that removes a node."""
    c, nodes, nodes_dir = start(monkeypatch, tmp_path / "node-cache")
    yield c, nodes, nodes_dir
    stop(c, nodes_dir)


def test_points_on_two_nodes_equal_the_local_sweep(shared_cluster, tmp_path):
    c, _, nodes_dir = shared_cluster
    trace = tiny_trace(tmp_path / "trace.jsonl")
    sp = spec({"seed": [0, 1]}, base=tiny_base(trace))
    local = run_sweep(sp, tmp_path / "local", engine="local", workers=2, say=quiet)
    remote = run_sweep(sp, tmp_path / "ray", engine="ray", address=c.address, say=quiet)
    assert not remote.failed
    same_results(local.path, remote.path)
    for p in json.loads((remote.path / "sweep.json").read_text())["points"]:
        manifest = RunDir(p["run_dir"], create=False).manifest()
        ran_on = manifest["config"]["mobility"]["trace"]
        assert ran_on.startswith(str(nodes_dir)) and ran_on != str(trace)  # its own copy, on the node
        assert p["attempts"] == []


def test_a_point_whose_node_dies_runs_again_on_another(cluster, tmp_path):
    c, nodes, nodes_dir = cluster
    trace = tiny_trace(tmp_path / "trace.jsonl")
    base = tiny_base(trace)
    base["federated"]["train"]["epochs"] = 1500  # seconds of training: long enough to be caught running
    sp = spec({"seed": [0, 1]}, base=base)
    out: dict = {}
    worker = threading.Thread(
        target=lambda: out.setdefault("r", run_sweep(sp, tmp_path / "ray", engine="ray", address=c.address, say=quiet))
    )
    worker.start()
    deadline = time.monotonic() + 240
    while len(list(nodes_dir.glob("vmc-point-*/run/manifest.json"))) < 2:
        assert time.monotonic() < deadline and worker.is_alive(), "both points never started"
        time.sleep(0.05)
    c.remove_node(nodes[0])  # both nodes are busy: a point dies with it
    worker.join(timeout=600)
    remote = out["r"]
    assert not remote.failed
    points = json.loads((remote.path / "sweep.json").read_text())["points"]
    assert sorted(len(p["attempts"]) for p in points) == [0, 1]  # the retry is recorded with its point
    local = run_sweep(sp, tmp_path / "local", engine="local", workers=2, say=quiet)
    same_results(local.path, remote.path)


def test_resume_runs_only_what_did_not_complete(tmp_path, capsys):
    """``vmc sweep --resume``: a point recorded complete whose files verify is kept as it is; one
    that failed and one whose records were cut run again, and the table equals a clean sweep's."""
    from vmc_sim.cli import main

    trace = tiny_trace(tmp_path / "trace.jsonl")
    sp = spec({"seed": [0, 1, 2]}, base=tiny_base(trace))
    clean = run_sweep(sp, tmp_path / "clean", engine="local", workers=2, say=quiet)
    first = run_sweep(sp, tmp_path / "cut", engine="local", workers=2, say=quiet)
    state = json.loads((first.path / "sweep.json").read_text())
    kept, failed, cut = (Path(p["run_dir"]) for p in state["points"])
    state["points"][1]["status"] = "failed"  # as a point whose worker died leaves it
    (first.path / "sweep.json").write_text(json.dumps(state))
    records = cut / "records.jsonl"
    records.write_bytes(records.read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[0] + b"\n")
    untouched = (kept / "records.jsonl").stat().st_mtime_ns
    assert main(["sweep", "--resume", str(first.path)]) == 0
    out = capsys.readouterr().out
    assert "1 points complete and verified, 2 to run" in out and "does not verify" in out
    assert (kept / "records.jsonl").stat().st_mtime_ns == untouched
    same_results(clean.path, first.path)
    resumed = json.loads((first.path / "sweep.json").read_text())
    assert resumed["status"] == "complete" and len(resumed["resumes"]) == 1


def test_a_vehicle_trained_on_one_node_is_loaded_on_the_other(shared_cluster, tmp_path):
    """The sweep's contribution cache lives on the driver (a Ray actor): the point that runs after
    the first two, on whichever node, loads every contribution it needs; the hit rate in
    sweep.json counts every node's points."""
    c, _, _ = shared_cluster
    trace = tiny_trace(tmp_path / "trace.jsonl")
    sp = spec({"compute.seconds_per_sample_epoch": [1e-5, 2e-5, 3e-5]}, base=tiny_base(trace), contribution_cache=True)
    remote = run_sweep(sp, tmp_path / "ray", engine="ray", address=c.address, say=quiet)
    assert not remote.failed
    state = json.loads((remote.path / "sweep.json").read_text())
    last = max(state["points"], key=lambda p: p["cache"]["hits"])
    assert last["cache"]["hits"] == last["cache"]["hits"] + last["cache"]["misses"] > 0  # trained nowhere again
    assert state["contribution_cache"]["hits"] >= last["cache"]["hits"]
    assert any((remote.path / "contribution_cache").rglob("*.sha256"))  # the one copy, on the driver
    local = run_sweep(sp, tmp_path / "local", engine="local", workers=2, say=quiet)
    same_results(local.path, remote.path)
