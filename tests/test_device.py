"""The shared device in simulated time: FIFO one job at a time by default, queued jobs batched
when the scenario allows it, and the batch cost model at its two ends."""

from __future__ import annotations

import pytest
import simpy
from test_cosim import scenario, trace_file

from vmc_sim.compute.device import SharedDevice, batch_seconds, device_job
from vmc_sim.cosim import run_scenario


def _run_jobs(arrivals: list[tuple[float, float]], max_jobs: int | None = 1, overlap: float = 0.0):
    """Submit jobs (arrival time, seconds) to a shared device (``max_jobs`` None: on board);
    return the device and each job's timing and finish time."""
    env = simpy.Environment()
    device = None if max_jobs is None else SharedDevice(env, max_jobs, overlap)
    out = []

    def job(at, seconds):
        yield env.timeout(at)
        timing = {"queue_s": 0.0, "compute_sim_s": 0.0}
        yield from device_job(env, device, seconds, timing)
        out.append({**timing, "end": env.now, "at": at})

    for at, s in arrivals:
        env.process(job(at, s))
    env.run()
    return device, sorted(out, key=lambda r: (r["at"], r["end"]))


def test_batch_cost_model_ends():
    assert batch_seconds([3.0, 1.0, 2.0], 0.0) == pytest.approx(6.0)
    assert batch_seconds([3.0, 1.0, 2.0], 1.0) == pytest.approx(3.0)
    assert batch_seconds([3.0, 1.0, 2.0], 0.5) == pytest.approx(4.5)
    assert batch_seconds([], 0.5) == 0.0


def test_default_device_serves_one_job_at_a_time_in_arrival_order():
    dev, rows = _run_jobs([(0.0, 2.0), (0.0, 3.0), (1.0, 1.0)])
    assert [r["end"] for r in rows] == [2.0, 5.0, 6.0]
    assert [r["queue_s"] for r in rows] == [0.0, 2.0, 4.0]
    assert [r["compute_sim_s"] for r in rows] == [2.0, 3.0, 1.0]
    assert dev.batches == [1, 1, 1]


def test_queued_jobs_run_together_up_to_the_batch_size():
    dev, rows = _run_jobs([(0.0, 2.0), (0.0, 3.0), (0.0, 1.0), (0.5, 4.0)], max_jobs=2, overlap=1.0)
    # batch 1: the two first jobs (3 s, their longest); batch 2: the two that queued meanwhile
    assert dev.batches == [2, 2]
    assert [r["end"] for r in rows] == [3.0, 3.0, 7.0, 7.0]
    assert rows[3]["queue_s"] == pytest.approx(2.5)
    assert all(r["compute_sim_s"] == r["end"] - r["at"] - r["queue_s"] for r in rows)


def test_onboard_units_run_in_parallel():
    _, rows = _run_jobs([(0.0, 2.0), (0.0, 3.0)], max_jobs=None)
    assert [r["end"] for r in rows] == [2.0, 3.0] and all(r["queue_s"] == 0 for r in rows)


def test_bad_batch_settings_are_refused():
    with pytest.raises(ValueError, match="max_jobs"):
        SharedDevice(simpy.Environment(), max_jobs=0)
    with pytest.raises(ValueError, match="overlap"):
        SharedDevice(simpy.Environment(), overlap=1.5)


def test_batching_shortens_a_retrain_fit_in_the_cosimulation(tmp_path):
    trace = trace_file(tmp_path)
    compute = {"time_model": "device", "seconds_per_sample_epoch": 0.01}
    fed = {"methods": ["retrain"]}
    plain = run_scenario(
        scenario(trace, compute=compute, federated=fed), out=tmp_path / "a", progress=False, say=lambda s: None
    )
    batched = run_scenario(
        scenario(trace, compute={**compute, "batch_max_jobs": 8, "batch_overlap": 1.0}, federated=fed),
        out=tmp_path / "b",
        progress=False,
        say=lambda s: None,
    )
    fit_a = next(r for r in plain.records() if r["kind"] == "fit")
    fit_b = next(r for r in batched.records() if r["kind"] == "fit")
    assert fit_b["total_bytes"] == fit_a["total_bytes"] and fit_b["accuracy"] == fit_a["accuracy"]
    assert fit_b["makespan_s"] < fit_a["makespan_s"]
    assert fit_b["queue_s"] < fit_a["queue_s"]
