"""Uploads on real SUMO passes (bench/ns3_sumo_driveby.py): our channel against ns-3's, over TCP and UDP.

The ns-3 columns of ``reports/channel_validation/driveby_sumo.csv`` were written by ns-3 3.44 on
the ns-2 file SUMO's ``traceExporter.py`` made from each pass. The default suite rebuilds each
pass with SUMO (the same seed gives the same trajectory), recomputes ours on it and checks it
against the committed ns-3 figures; the ``[ns3]`` extra re-runs ns-3 on one pass.
"""

from __future__ import annotations

import importlib.util
import math
import subprocess
import sys

import pytest

pytest.importorskip("sumo")

from conftest import ROOT, load_script  # noqa: E402

pytestmark = pytest.mark.sumo
BENCH = "bench/ns3_sumo_driveby.py"
CSV = ROOT / "reports" / "channel_validation" / "driveby_sumo.csv"


@pytest.fixture(scope="module")
def bench():
    return load_script(BENCH)


@pytest.fixture(scope="module")
def committed(bench):
    return bench.read_csv(CSV)


@pytest.fixture(scope="module")
def recomputed(bench, committed, tmp_path_factory):
    """Per committed row: (pass window, {transport: ours now}) on the pass SUMO gives now."""
    sp = sys.modules["sumo_pass"]
    passes = {int(s): sp.make_pass(tmp_path_factory.mktemp(f"seed{int(s)}"), seed=int(s)) for s in bench.SEEDS}
    out = []
    for r in committed:
        p = passes[int(r["seed"])]
        out.append((bench.window(p), {t: bench.ours(p, int(r["bytes"]), t) for t in bench.TRANSPORTS}))
    return out


def test_csv_covers_every_seed_and_size(bench, committed):
    want = [(float(s), float(b)) for s in bench.SEEDS for b in (bench.BYTES, bench.LARGE_BYTES)]
    assert [(r["seed"], r["bytes"]) for r in committed] == want


def test_passes_and_ours_are_the_committed_ones(committed, recomputed):
    """SUMO gives the same passes and RsuChannel the same figures (else re-run the bench and the report)."""
    for r, ((entry, exit_), ours) in zip(committed, recomputed, strict=True):
        assert (entry, exit_) == (pytest.approx(r["entry_s"], abs=1e-4), pytest.approx(r["exit_s"], abs=1e-4)), r
        for t, (done, delivered) in ours.items():
            if math.isnan(r[f"ours_{t}_completion_s"]):
                assert math.isnan(done) and delivered == pytest.approx(r[f"ours_{t}_bytes_delivered"], abs=1), (t, r)
            else:
                assert done == pytest.approx(r[f"ours_{t}_completion_s"], abs=1e-4), (t, r)
                assert delivered == r["bytes"], (t, r)


def test_some_upload_outlasts_its_pass(committed):
    """The large upload is dwell-limited on both sides: the comparison covers leaving mid-upload."""
    large = [r for r in committed if r["bytes"] > r["ns3_tcp_bytes_delivered"]]
    assert large and all(math.isnan(r["ours_tcp_completion_s"]) for r in large)


@pytest.mark.parametrize("transport", ["tcp", "udp"])
def test_ours_matches_ns3_on_sumo_passes(bench, committed, recomputed, transport):
    """Completion time (or bytes delivered when the vehicle leaves first) within 10 % of ns-3's."""
    off = []
    for r, (_window, ours) in zip(committed, recomputed, strict=True):
        ns3 = (r[f"ns3_{transport}_completion_s"], int(r[f"ns3_{transport}_bytes_delivered"]))
        ratio = bench.ratio(ns3, ours[transport])
        if not abs(ratio - 1.0) <= bench.TOLERANCE:
            off.append((r["seed"], r["bytes"], round(ratio, 3)))
    assert not off, f"(seed, bytes, ns-3 / ours) beyond {bench.TOLERANCE:.0%}: {off}"


def _ns3_installed() -> bool:
    return importlib.util.find_spec("ns") is not None


@pytest.mark.slow  # ns-3's import (6-14 s) and two uploads on one pass
@pytest.mark.skipif(not _ns3_installed(), reason="ns-3 not installed (pip install -e .[ns3])")
def test_ns3_still_gives_the_committed_columns(bench, committed, tmp_path):
    out = tmp_path / "driveby_sumo.csv"
    cmd = [sys.executable, str(ROOT / BENCH), "--seeds", "2", "--bytes", str(bench.BYTES), "--out", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr  # 1: ours off by more than the tolerance
    (fresh,) = bench.read_csv(out)
    (old,) = [r for r in committed if (r["seed"], r["bytes"]) == (2.0, bench.BYTES)]
    for column in ("ns3_tcp_completion_s", "ns3_udp_completion_s", "entry_s", "exit_s"):
        assert fresh[column] == pytest.approx(old[column], abs=1e-3), column
