"""Our TR 37.885 link states against ns-3's (reports/channel_validation/link_states*.csv).

The CSVs were written by ``bench/ns3_link_states.py`` with ns-3 3.44: P(LOS) of the V2V urban and
highway channel condition models against ours, the NLOSv blockage loss of both, and the NLOSv share
our ``city`` rule gives in a SUMO scene (``bench/blockage_scene.py``). The default tests need no
ns-3: they recompute our seeded draws and check them and the targets against the committed ns-3
columns; with the SUMO wheels the scene is rebuilt; where ns-3 is installed, a slow test re-runs it
at two distances (in a child process) and checks that it gives the committed counts.
"""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
from conftest import ROOT, load_script
from test_channel_validation import _ns3_installed

DIR = ROOT / "reports" / "channel_validation"
BENCH = "bench/ns3_link_states.py"


@pytest.fixture(scope="module")
def bench():
    return load_script(BENCH)


@pytest.fixture(scope="module")
def rows(bench):
    return bench.read_csv(DIR / "link_states.csv")


@pytest.fixture(scope="module")
def blockage(bench):
    return bench.read_csv(DIR / "link_states_blockage.csv")


def test_csv_covers_both_models_at_every_distance(bench, rows):
    assert [(r["model"], r["distance"]) for r in rows] == [
        (m, float(d)) for m in bench.MODELS for d in bench.DISTANCES_M
    ]
    for r in rows:
        assert r["draws"] == bench.DRAWS >= 10_000
        assert (
            r["ns3_los"] + r["ns3_nlosv"] + r["ns3_nlos"]
            == r["ours_los"] + r["ours_nlosv"] + r["ours_nlos"]
            == r["draws"]
        )
        assert r["ns3_nlos"] == r["ours_nlos"] == 0  # no buildings: every non-LOS draw is NLOSv on both sides


def test_our_draws_are_the_committed_ones(bench, rows):
    """Our seeded draws give the committed counts now (else re-run the bench and the report)."""
    for r in rows:
        assert bench.our_counts(r["model"], r["distance"], r["draws"]) == (
            r["ours_los"],
            r["ours_nlosv"],
            r["ours_nlos"],
        ), r
        assert r["table_p_los"] == pytest.approx(bench.TABLES[r["model"]](r["distance"]), abs=1e-4)


def test_p_los_matches_ns3_at_every_distance(bench, rows):
    off = [
        (r["model"], r["distance"], r["diff"])
        for r in rows
        if abs(r["ours_los"] - r["ns3_los"]) / r["draws"] > bench.TOLERANCE
    ]
    assert not off, f"(model, distance, ours - ns-3) beyond {bench.TOLERANCE}: {off}"
    for r in rows:
        assert r["diff"] == pytest.approx((r["ours_los"] - r["ns3_los"]) / r["draws"], abs=1e-4)
        p, n = r["table_p_los"], r["draws"]
        assert abs(r["ns3_los"] / n - p) <= 5 * math.sqrt(p * (1 - p) / n) + 1e-9, r  # ns-3 draws the table too


def test_blockage_loss_matches_ns3(bench, blockage):
    assert len(blockage) == len(bench.BLOCKAGE_CASES) * len(bench.BLOCKAGE_DISTANCES_M)
    for i, (case, blocker_m, rsu_m, vehicle_m) in enumerate(bench.BLOCKAGE_CASES):
        for b in (b for b in blockage if b["case"] == case):
            ours = bench.ours_blockage(i, blocker_m, rsu_m, vehicle_m, b["distance"], b["draws"])
            assert (ours.mean(), ours.std()) == (
                pytest.approx(b["ours_mean_db"], abs=1e-4),
                pytest.approx(b["ours_sd_db"], abs=1e-4),
            )
            d3d = math.hypot(b["distance"], rsu_m - vehicle_m)
            assert (b["mu_db"], b["sigma_db"]) == pytest.approx(
                bench.standard_mu_sigma(blocker_m, rsu_m, vehicle_m, d3d), abs=1e-4
            )
            assert b["ns3_mean_db"] == pytest.approx(
                b["mu_db"], abs=bench.BLOCKAGE_MEAN_TOLERANCE_DB
            )  # ns-3 3.44: the standard's
    assert bench.blockage_ok(blockage)


@pytest.mark.sumo
def test_the_scene_gives_the_committed_shares(tmp_path):
    pytest.importorskip("sumo")
    scene = load_script("bench/blockage_scene.py")
    committed = load_script(BENCH).read_csv(DIR / "link_states_scene.csv")
    rows, _facts = scene.scene(tmp_path)
    assert len(rows) == len(committed)
    for new, old in zip(rows, committed, strict=True):
        assert new["links"] == old["links"], (new, old)
        for k in ("bin_lo", "bin_hi", "table_nlosv", "nlosv_rsu_5m", "nlosv_rsu_1_5m"):
            assert new[k] == pytest.approx(old[k], abs=1e-4), (k, new, old)


@pytest.mark.slow  # ns-3's import alone takes 6-14 s
@pytest.mark.skipif(not _ns3_installed(), reason="ns-3 not installed (pip install -e .[ns3])")
def test_ns3_still_gives_the_committed_counts(bench, rows, blockage, tmp_path):
    distances = (30, 250)
    cmd = [sys.executable, str(ROOT / BENCH), "--distances", *map(str, distances), "--out-dir", str(tmp_path), "--no-report", "--no-scene"]  # fmt: skip
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 1) and "wrote" in proc.stdout, proc.stdout + proc.stderr  # 1: a target missed
    old = {(r["model"], r["distance"]): r for r in rows}
    fresh = bench.read_csv(tmp_path / "link_states.csv")
    assert {(r["model"], r["distance"]) for r in fresh} == {(m, float(d)) for m in bench.MODELS for d in distances}
    for r in fresh:
        assert [r[k] for k in ("ns3_los", "ns3_nlosv", "ns3_nlos")] == [old[r["model"], r["distance"]][k] for k in ("ns3_los", "ns3_nlosv", "ns3_nlos")]  # fmt: skip
    for new, b in zip(bench.read_csv(tmp_path / "link_states_blockage.csv"), blockage, strict=True):
        assert (new["ns3_mean_db"], new["ns3_sd_db"]) == (pytest.approx(b["ns3_mean_db"], abs=1e-4), pytest.approx(b["ns3_sd_db"], abs=1e-4))  # fmt: skip
