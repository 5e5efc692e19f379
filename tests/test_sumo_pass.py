"""bench/sumo_pass.py: a real SUMO pass exported to ns-2, and what ns-3's Ns2MobilityHelper makes of it."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

pytest.importorskip("sumo")

from conftest import load_script  # noqa: E402

pytestmark = pytest.mark.sumo
RADIUS_M = 85.0
SET_RE = re.compile(r"^\$node_\((\d+)\) set ([XYZ])_ (\S+)$")
DEST_RE = re.compile(r'^\$ns_ at (\S+) "\$node_\((\d+)\) setdest (\S+) (\S+) (\S+)"$')


@pytest.fixture(scope="module")
def sp():
    return load_script("bench/sumo_pass.py")


@pytest.fixture(scope="module")
def run(sp, tmp_path_factory):
    return sp.make_pass(tmp_path_factory.mktemp("pass"), seed=1)


def _read_ns2(path, node):
    """(initial x, y) and the setdest rows (t, x, y, v) of ``node``; every line must be one ns-3 reads."""
    start, rows = {}, []
    for line in path.read_text().splitlines():
        if m := SET_RE.match(line):
            if int(m.group(1)) == node:
                start[m.group(2)] = float(m.group(3))
        else:
            m = DEST_RE.match(line)
            assert m, line
            if int(m.group(2)) == node:
                rows.append([float(m.group(i)) for i in (1, 3, 4, 5)])
    return (start["X"], start["Y"]), np.array(rows)


def _ns3_replay(start, rows, t):
    """Ns2MobilityHelper's rule: at each setdest head from where the node is towards (x, y) at v, stop on arrival."""
    pos = np.array(start)
    for k, (tk, x, y, v) in enumerate(rows):
        if tk > t:
            break
        end = rows[k + 1][0] if k + 1 < len(rows) else math.inf
        gap = np.array([x, y]) - pos
        dist = float(np.hypot(*gap))
        if v > 0 and dist > 0:
            pos = pos + gap * min(1.0, v * (min(t, end) - tk) / dist)
    return pos


def test_same_seed_same_trajectory(sp, run, tmp_path):
    again = sp.make_pass(tmp_path, seed=1)
    for a, b in ((run.times, again.times), (run.xy, again.xy), (run.speed, again.speed)):
        np.testing.assert_array_equal(a, b)
    assert run.ns2_path.read_text() == again.ns2_path.read_text()
    assert run.ns2_node_index == again.ns2_node_index


def test_coverage_interval_is_exact_and_positive(sp, run):
    cov = sp.coverage_interval(run, RADIUS_M)
    assert cov is not None
    entry, exit_ = cov
    assert exit_ > entry > run.times[0]
    for t in (entry, exit_):
        x, y, _, _ = sp.position_at(run, t)
        assert math.hypot(x - run.rsu_xy[0], y - run.rsu_xy[1]) == pytest.approx(RADIUS_M, abs=1e-6)
    for t in np.linspace(entry, exit_, 50):
        x, y, _, _ = sp.position_at(run, float(t))
        assert math.hypot(x - run.rsu_xy[0], y - run.rsu_xy[1]) <= RADIUS_M + 1e-6
    assert sp.position_at(run, run.times[0] - 0.01) is None
    assert sp.position_at(run, run.times[-1] + run.lag_s + 0.01) is None


def test_ns2_file_is_the_fcd_and_ns3_follows_position_at(sp, run):
    start, rows = _read_ns2(run.ns2_path, run.ns2_node_index)
    assert start == tuple(run.xy[0])
    # traceExporter: setdest at t_k goes to the FCD sample at t_k (not t_{k+1}) at the speed of t_k ...
    np.testing.assert_array_equal(rows[:, 0], run.times)
    np.testing.assert_array_equal(rows[:, 1:3], run.xy)
    np.testing.assert_array_equal(rows[:, 3], run.speed)
    # ... and SUMO's Euler step covered exactly that: |x_k - x_{k-1}| = v_k dt, so ns-3 arrives at t_k + dt
    step = np.hypot(*np.diff(run.xy, axis=0).T)
    np.testing.assert_allclose(step, run.speed[1:] * run.lag_s, atol=1e-3)
    entry, exit_ = sp.coverage_interval(run, RADIUS_M)
    for t in np.linspace(entry, exit_, 23):
        x, y, _, _ = sp.position_at(run, float(t))
        assert np.hypot(*(_ns3_replay(start, rows, float(t)) - (x, y))) < 0.05, t
