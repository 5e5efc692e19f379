"""``device: auto`` puts local training, the Fisher and a K-FAC solve's float32 products on a
CUDA device when one is present; the contribution it uploads and the merge are the CPU ones up to
float rounding. Skipped, with its reason, on a
machine without CUDA (CI has none; run it where a GPU is)."""

from __future__ import annotations

import pytest
import torch

from fl_core.data import ArrayDataset
from fl_core.fisher import compute_fisher
from fl_core.models import build_model, flat_params, load_flat
from fl_core.rng import Streams
from fl_core.training import LocalTrainer, TrainConfig, resolve_device

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")


def _data(n: int = 256) -> ArrayDataset:
    g = torch.Generator().manual_seed(0)
    return ArrayDataset(torch.randn(n, 1, 28, 28, generator=g), torch.randint(0, 10, (n,), generator=g), 10, "noise")


def test_auto_resolves_to_the_gpu():
    assert resolve_device("auto").type == "cuda"


@pytest.mark.parametrize("fisher", ["kfac", "diagonal"])
def test_a_contribution_trained_on_the_gpu_matches_the_cpu_one(fisher):
    torch.manual_seed(0)
    model_fn = lambda: build_model("cnn", (1, 28, 28), 10)  # noqa: E731
    w0, data = flat_params(model_fn()), _data()
    cfg = dict(epochs=2, lr=0.01, batch_size=32, fisher=fisher)
    cpu = LocalTrainer(model_fn, w0, TrainConfig(device="cpu", **cfg), Streams(7)).contribute("c", data)
    gpu = LocalTrainer(model_fn, w0, TrainConfig(device="auto", **cfg), Streams(7)).contribute("c", data)
    assert gpu.weights.device.type == "cpu"  # uploads leave the device
    # same shuffles and label draws (CPU streams); only float rounding differs after 16 steps
    assert float((gpu.weights - cpu.weights).norm() / cpu.weights.norm()) < 1e-3
    for k, t in cpu.fisher.tensors().items():
        assert float((gpu.fisher.tensors()[k] - t).norm() / t.norm()) < 1e-2, k


def test_the_fisher_of_fixed_weights_is_the_same_on_both_devices():
    torch.manual_seed(0)
    model, data = build_model("cnn", (1, 28, 28), 10), _data()
    w = flat_params(model)
    on_cpu = compute_fisher("kfac", model, data.x, torch.Generator().manual_seed(3), 64)
    gpu_model = load_flat(build_model("cnn", (1, 28, 28), 10).cuda(), w)
    on_gpu = compute_fisher("kfac", gpu_model, data.x.cuda(), torch.Generator().manual_seed(3), 64)
    for k, t in on_cpu.tensors().items():
        assert float((on_gpu.tensors()[k] - t).norm() / t.norm()) < 1e-4, k


def test_a_kfac_solve_on_the_gpu_reaches_the_cpu_solution():
    """``projection.device: auto`` runs a block solve's float32 products on the GPU (its rotated
    factors live there); the float64 finish on the CPU brings it to the same tolerance."""
    from test_fisher_projection import low_rank_kfac_stats

    from fl_core.projection import ProjectionConfig, project

    for rank in (None, 3):
        stats = low_rank_kfac_stats(rank)
        cpu, info_cpu = project(stats, ProjectionConfig(method="cg_f", tol=1e-9, max_iter=5000, damping=1e-4))
        gpu, info_gpu = project(
            stats, ProjectionConfig(method="cg_f", tol=1e-9, max_iter=5000, damping=1e-4, device="auto")
        )
        assert info_cpu.converged and info_gpu.converged and gpu.device.type == "cpu"
        assert any(key[1].startswith("cuda") for key in stats.fisher_sum._rotated)
        torch.testing.assert_close(gpu, cpu, rtol=1e-5, atol=1e-5 * float(cpu.abs().max()))
