"""Two RSUs sharing one channel, ours against ns-3 (reports/channel_validation/shared_air.csv).

The CSV was written by ``bench/ns3_shared_air.py`` with ns-3 3.44. The default tests need no ns-3:
they recompute our totals (two ``RsuChannel``s on the media of ``vmc_sim.radio.air.media``) and
check them against the committed ns-3 columns; where ns-3 is installed, a slow test re-runs N = 4
(in a child process) and checks that ns-3 still gives the committed totals.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT, load_script
from test_channel_validation import _ns3_installed

from vmc_sim.radio.air import media

CSV = ROOT / "reports" / "channel_validation" / "shared_air.csv"
BENCH = "bench/ns3_shared_air.py"


@pytest.fixture(scope="module")
def bench():
    return load_script(BENCH)


@pytest.fixture(scope="module")
def rows(bench):
    return bench.read_csv(CSV)


def test_csv_covers_every_count_in_both_modes(bench, rows):
    assert [(r["N"], r["mode"]) for r in rows] == [(n, m) for n in bench.STATIONS for m in bench.MODES]


def test_the_cells_share_one_medium_only_on_one_channel_and_within_carrier_sense(bench):
    one = {m: (air := media(list(bench.rsus(m)), bench.our_config(m)))["A"] is air["B"] for m in bench.MODES}
    assert one == {"shared": True, "inner": True, "far": True, "separate": False, "apart": False}


def test_ours_is_the_committed_total(bench, rows):
    for r in rows:
        assert bench.ours_mbps(r["N"], r["mode"]) == pytest.approx(r["ours_total_mbps"], abs=1e-3), r  # else re-run
        assert r["ratio"] == pytest.approx(r["ns3_total_mbps"] / r["ours_total_mbps"], abs=1e-3)


def _off(bench, rows, mode: str) -> list[tuple[int, float]]:
    return [
        (r["N"], round(r["ratio"], 3)) for r in rows if r["mode"] == mode and abs(r["ratio"] - 1.0) > bench.TOLERANCE
    ]


@pytest.mark.parametrize("mode", ["separate", "inner", "apart"])
def test_ours_matches_ns3(bench, rows, mode):
    """Each cell on its own channel, the cells sharing one with the vehicles at their common edge, and
    cells just out of carrier sense, which ours lets not interfere (the error of that approximation)."""
    assert not _off(bench, rows, mode), f"(N, ns-3 / ours) beyond {bench.TOLERANCE}"


@pytest.mark.xfail(
    strict=True,
    reason="ns-3 decodes a frame through a collision with the other cell's (capture): 15.8 % at N = 16, 23.9 % far",
)
@pytest.mark.parametrize("mode", ["shared", "far"])
def test_ours_matches_ns3_with_the_vehicles_spread(bench, rows, mode):
    assert not _off(bench, rows, mode), f"(N, ns-3 / ours) beyond {bench.TOLERANCE}"


def test_beyond_carrier_sense_the_other_cell_costs_ns3_a_little(rows):
    """Ours lets cells out of carrier sense not interfere; in ns-3 they do, so ns-3 is at or below ours."""
    apart = [r["ratio"] for r in rows if r["mode"] == "apart"]
    assert apart and all(x <= 1.01 for x in apart), apart


def test_ns3_gains_by_capture_where_the_vehicles_stand_near_their_rsus(rows):
    """Sharing the air, ns-3 carries more than ours, the more so with the vehicles near their RSUs."""
    for n in {r["N"] for r in rows}:
        shared, inner = (next(r["ratio"] for r in rows if r["N"] == n and r["mode"] == m) for m in ("shared", "inner"))
        assert shared > 1.0 and inner > 1.0 and shared >= inner - 0.01, (n, shared, inner)


def test_every_vehicle_hears_every_other(bench):
    """No hidden terminals in the shared and far runs (the comparison is of contention alone); in
    the apart runs no vehicle defers to the other cell's."""
    for n in bench.STATIONS:
        assert bench.heard_dbm(n, "shared") > bench.NS3_CCA_DBM and bench.heard_dbm(n, "far") > bench.NS3_CCA_DBM
        assert bench.heard_dbm(n, "apart") < bench.NS3_CCA_DBM


@pytest.mark.slow  # ns-3's import alone takes 6-14 s
@pytest.mark.skipif(not _ns3_installed(), reason="ns-3 not installed (pip install -e .[ns3])")
def test_ns3_still_gives_the_committed_totals(bench, rows, tmp_path):
    out = tmp_path / "shared_air.csv"
    cmd = [sys.executable, str(ROOT / BENCH), "--stations", "4", "--out", str(out), "--no-report"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 1) and "wrote" in proc.stdout, proc.stdout + proc.stderr  # 1: a target missed
    old = {(r["N"], r["mode"]): r for r in rows}
    fresh = bench.read_csv(out)
    assert [(r["N"], r["mode"]) for r in fresh] == [(4, m) for m in bench.MODES]
    for r in fresh:
        assert r["ns3_total_mbps"] == pytest.approx(old[r["N"], r["mode"]]["ns3_total_mbps"], abs=1e-3), r


def test_an_out_inside_a_run_directory_is_refused_before_ns3_runs(bench, tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text('{"status": "complete"}')
    with pytest.raises(SystemExit) as e:
        bench.main(["--stations", "2", "--out", str(run / "air.csv"), "--no-report"])
    assert e.value.code == 2 and "does not own" in capsys.readouterr().err
    assert sorted(p.name for p in run.iterdir()) == ["manifest.json"]
