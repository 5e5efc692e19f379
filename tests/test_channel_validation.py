"""Our 3GPP TR 37.885 V2V path loss against ns-3's (reports/channel_validation/pathloss.csv).

The CSV was written by ``bench/ns3_pathloss.py`` with ns-3 3.44 (LOS forced, no shadowing,
5.9 GHz, RSU 5.0 m, vehicle 1.5 m). The first test needs no ns-3: it checks the current
``vmc_sim.radio.link_budget.path_loss_db`` against the committed ns-3 column. The second re-runs ns-3 at two
distances (in a child process: ns-3's cppyy bindings stay out of the test process) and checks
that the committed column is what ns-3 gives.
"""

from __future__ import annotations

import importlib.util
import math
import subprocess
import sys

import pytest
from conftest import ROOT, load_script

CSV = ROOT / "reports" / "channel_validation" / "pathloss.csv"
BENCH = "bench/ns3_pathloss.py"


@pytest.fixture(scope="module")
def bench():
    return load_script(BENCH)


@pytest.fixture(scope="module")
def committed(bench):
    return bench.read_csv(CSV)


def test_csv_covers_both_models_at_every_distance(bench, committed):
    got = {(r["model"], r["distance"]) for r in committed}
    want = {(m, float(d)) for m in bench.NS3_MODELS for d in bench.DISTANCES_M}
    assert got == want and len(committed) == len(want)


def test_our_path_loss_matches_ns3(bench, committed):
    worst = []
    for r in committed:
        ours = bench.ours_db(r["model"], r["distance"])
        if abs(ours - r["ns3_db"]) > bench.TOLERANCE_DB:
            worst.append((r["model"], r["distance"], round(ours, 4), round(r["ns3_db"], 4)))
    assert not worst, f"(model, ground distance m, ours dB, ns-3 dB) beyond {bench.TOLERANCE_DB} dB: {worst}"


def _ns3_installed() -> bool:
    try:
        from importlib.metadata import PackageNotFoundError, version

        version("ns3")
    except PackageNotFoundError:
        return False
    return importlib.util.find_spec("ns") is not None


@pytest.mark.slow  # ns-3's import alone takes 6-14 s
@pytest.mark.skipif(not _ns3_installed(), reason="ns-3 not installed (pip install -e .[ns3])")
def test_ns3_still_gives_the_committed_column(bench, committed, tmp_path):
    distances = (10, 300)
    out = tmp_path / "pathloss.csv"
    cmd = [sys.executable, str(ROOT / BENCH), "--distances", *map(str, distances), "--out", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr  # 1: ours off by more than the tolerance
    fresh = {(r["model"], r["distance"]): r["ns3_db"] for r in bench.read_csv(out)}
    old = {(r["model"], r["distance"]): r["ns3_db"] for r in committed}
    assert set(fresh) == {(m, float(d)) for m in bench.NS3_MODELS for d in distances}
    for key, value in fresh.items():
        assert value == pytest.approx(old[key], abs=1e-5), key


# ---------------------------------------------------------------- 802.11p goodput against ns-3's wifi

WIFI_BENCH = "bench/ns3_wifi_link.py"
LINK_CSV = ROOT / "reports" / "channel_validation" / "link.csv"
CONTENTION_CSV = ROOT / "reports" / "channel_validation" / "contention.csv"


@pytest.fixture(scope="module")
def wifi():
    return load_script(WIFI_BENCH)


def test_wifi_csvs_cover_every_point(wifi):
    assert [r["distance"] for r in wifi.read_csv(LINK_CSV)] == [float(d) for d in wifi.DISTANCES_M]
    assert [r["N"] for r in wifi.read_csv(CONTENTION_CSV)] == [float(n) for n in wifi.STATIONS]


def test_our_80211p_link_goodput_matches_ns3(wifi):
    """One vehicle -> RSU, ns-3 at the MCS ours picks: ours within 10 % wherever the link holds."""
    off = []
    for r in wifi.read_csv(LINK_CSV):
        ours = wifi.ours_mbps(r["distance"])
        assert wifi.our_mcs_bps(r["distance"]) / 1e6 == r["mcs_mbps"], r  # ns-3 ran at the MCS ours picks now
        assert r["ns3_goodput_mbps"] > 0 and ours > 0, r  # the link holds at every distance up to 500 m
        if abs(r["ns3_goodput_mbps"] / ours - 1.0) > wifi.LINK_TOLERANCE:
            off.append((r["distance"], round(ours, 3), r["ns3_goodput_mbps"]))
    assert not off, f"(distance m, ours Mb/s, ns-3 Mb/s) beyond {wifi.LINK_TOLERANCE:.0%}: {off}"


def test_our_80211p_contention_matches_ns3(wifi):
    """N vehicles at 50 m, 27 Mb/s: ours with bandwidth / N each, total within 15 % of ns-3's."""
    off = []
    for r in wifi.read_csv(CONTENTION_CSV):
        n = int(r["N"])
        ours_total = n * wifi.ours_mbps(wifi.CONTENTION_DISTANCE_M, n)
        if abs(r["ns3_total_mbps"] / ours_total - 1.0) > wifi.CONTENTION_TOLERANCE:
            off.append((n, round(ours_total, 3), r["ns3_total_mbps"]))
    assert not off, f"(N, ours total Mb/s, ns-3 total Mb/s) beyond {wifi.CONTENTION_TOLERANCE:.0%}: {off}"


@pytest.mark.slow  # two ns-3 runs, each with ns-3's 6-14 s import: about 20 s
@pytest.mark.skipif(not _ns3_installed(), reason="ns-3 not installed (pip install -e .[ns3])")
def test_ns3_wifi_still_gives_the_committed_columns(wifi, tmp_path):
    runs = (
        ("link", ["--distances", "300"], LINK_CSV, "distance", ("ns3_goodput_mbps", "ns3_ideal_mbps")),
        ("contention", ["--stations", "4"], CONTENTION_CSV, "N", ("ns3_total_mbps", "ns3_min_vehicle_mbps")),
    )
    for mode, args, committed_csv, key, columns in runs:
        out = tmp_path / f"{mode}.csv"
        cmd = [sys.executable, str(ROOT / WIFI_BENCH), mode, *args, "--out", str(out)]
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert proc.returncode in (0, 1), proc.stdout + proc.stderr  # 1: ours off by more than the tolerance
        (fresh,) = wifi.read_csv(out)
        (old,) = [r for r in wifi.read_csv(committed_csv) if r[key] == fresh[key]]
        for column in columns:  # same seed and ns-3 version: the same run
            assert fresh[column] == pytest.approx(old[column], rel=1e-3), (mode, column)


# ---------------------------------------------------------------- drive-by upload against ns-3

DRIVEBY_BENCH = "bench/ns3_driveby.py"
DRIVEBY_CSV = ROOT / "reports" / "channel_validation" / "driveby.csv"


@pytest.fixture(scope="module")
def driveby():
    return load_script(DRIVEBY_BENCH)


def _driveby_ours(driveby, r):
    """(ns-3 / ours for TCP, ns-3 / ours for UDP) of one committed pass, ours recomputed now."""
    done, delivered = driveby.ours(r["speed"], int(r["bytes"]))
    if math.isnan(r["ns3_completion_s"]):  # no completion within the pass: bytes delivered
        assert math.isnan(done), r
        return r["ns3_bytes_delivered"] / delivered, r["ns3_udp_bytes_delivered"] / delivered
    assert delivered == r["bytes"], r
    return r["ns3_completion_s"] / done, r["ns3_udp_completion_s"] / done


def test_driveby_csv_covers_every_pass(driveby):
    rows = driveby.read_csv(DRIVEBY_CSV)
    want = [(float(v), float(driveby.BYTES)) for v in driveby.SPEEDS_MPS]
    want.append((float(max(driveby.SPEEDS_MPS)), float(driveby.LARGE_BYTES)))
    assert [(r["speed"], r["bytes"]) for r in rows] == want


def test_our_driveby_channel_is_the_committed_one(driveby):
    """The ours columns are what RsuChannel gives now (else re-run the bench and the report)."""
    for r in driveby.read_csv(DRIVEBY_CSV):
        done, delivered = driveby.ours(r["speed"], int(r["bytes"]))
        if math.isnan(r["ours_completion_s"]):
            assert math.isnan(done) and delivered == pytest.approx(r["ours_bytes_delivered"], abs=1), r
        else:
            assert done == pytest.approx(r["ours_completion_s"], abs=1e-4) and delivered == r["bytes"], r


def _beyond_target(driveby, transport: str) -> list[tuple]:
    """(speed m/s, bytes, ns-3 / ours) of every pass where ns-3's ``transport`` run misses the target."""
    off = []
    for r in driveby.read_csv(DRIVEBY_CSV):
        tcp, udp = _driveby_ours(driveby, r)
        ratio = tcp if transport == "tcp" else udp
        if abs(ratio - 1.0) > driveby.TOLERANCE:
            off.append((r["speed"], r["bytes"], round(ratio, 3)))
    return off


def test_our_driveby_matches_ns3_udp(driveby):
    """Without transport ACKs (UDP at 27 Mb/s) ns-3's pass is within 10 % of our channel's."""
    off = _beyond_target(driveby, "udp")
    assert not off, f"(speed m/s, bytes, ns-3 UDP / ours) beyond {driveby.TOLERANCE:.0%}: {off}"


@pytest.mark.xfail(
    strict=True,
    reason="ns-3's TCP upload takes 22 % longer than ours (1.566 s against 1.282 s) and delivers 18 % fewer "
    "bytes in a 25 m/s pass: TCP ACKs from the RSU take airtime our goodput model does not count "
    "(see reports/channel_validation/report.md, drive-by upload)",
)
def test_our_driveby_matches_ns3_tcp(driveby):
    """The upload as the co-simulation means it (TCP bulk send, 27 Mb/s): ours within 10 % of ns-3."""
    off = _beyond_target(driveby, "tcp")
    assert not off, f"(speed m/s, bytes, ns-3 TCP / ours) beyond {driveby.TOLERANCE:.0%}: {off}"


@pytest.mark.slow  # three ns-3 runs after ns-3's 6-14 s import: about 10 s
@pytest.mark.skipif(not _ns3_installed(), reason="ns-3 not installed (pip install -e .[ns3])")
def test_ns3_driveby_still_gives_the_committed_columns(driveby, tmp_path):
    out = tmp_path / "driveby.csv"
    cmd = [sys.executable, str(ROOT / DRIVEBY_BENCH), "--speeds", "13.9", "--no-large", "--out", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr  # 1: ours off by more than the tolerance
    (fresh,) = driveby.read_csv(out)
    (old,) = [r for r in driveby.read_csv(DRIVEBY_CSV) if (r["speed"], r["bytes"]) == (13.9, driveby.BYTES)]
    for column in ("ns3_completion_s", "ns3_ideal_completion_s", "ns3_udp_completion_s"):  # same seed: same run
        assert fresh[column] == pytest.approx(old[column], abs=1e-3), column


@pytest.mark.parametrize("transport", ["tcp", "udp"])
def test_transport_model_matches_ns3_driveby(driveby, transport):
    """``channel.transport`` accounts for the gap: ours over TCP (UDP) within 10 % of ns-3's TCP (UDP) pass.

    Within the 85 m radius ours holds 27 Mb/s for the whole pass, so ours over ``transport`` is the
    committed MSDU-counting figure scaled by the ratio of the two rates.
    """
    from vmc_sim.radio.link_budget import ChannelConfig, rate_bps

    def rate(t: str) -> float:
        cfg = ChannelConfig(rate_model="ieee80211p", bandwidth_hz=10e6, rate_cap_bps=None, transport=t)
        return rate_bps(50.0, 10e6, "uplink", cfg)

    scale = rate("none") / rate(transport)
    column = "ns3" if transport == "tcp" else "ns3_udp"
    off = []
    for r in driveby.read_csv(DRIVEBY_CSV):
        if math.isnan(r["ours_completion_s"]):
            ratio = r[f"{column}_bytes_delivered"] / (r["ours_bytes_delivered"] / scale)
        else:
            ratio = r[f"{column}_completion_s"] / (r["ours_completion_s"] * scale)
        if abs(ratio - 1.0) > driveby.TOLERANCE:
            off.append((r["speed"], r["bytes"], round(ratio, 3)))
    assert not off, f"(speed m/s, bytes, ns-3 {transport} / ours) beyond {driveby.TOLERANCE:.0%}: {off}"


def test_channel_plots_draw_every_comparison_from_the_committed_csvs(tmp_path):
    import shutil

    plots = load_script("bench/channel_plots.py")
    for csv_file in (ROOT / "reports" / "channel_validation").glob("*.csv"):
        shutil.copy(csv_file, tmp_path)
    assert plots.main(["--dir", str(tmp_path)]) == 0
    for name in ("pathloss", "link", "contention", "driveby"):
        assert (tmp_path / f"{name}.png").stat().st_size > 10_000, name
