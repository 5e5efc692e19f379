"""Fisher representations agree with each other where they must, and every projection method
lands on the same point of {W : F W = b}."""

from __future__ import annotations

import pytest
import torch

from fl_core.cg import conjugate_gradient
from fl_core.contribution import Contribution
from fl_core.fisher import FisherKind, compute_fisher, layer_specs, new_sum
from fl_core.fisher.base import Preconditioner
from fl_core.fisher.capture import LayerSpec
from fl_core.fisher.diagonal import DiagonalFisher, DiagonalSum
from fl_core.fisher.kfac import KFACFisher, KFACSum
from fl_core.models import build_model, flat_params, num_params
from fl_core.payload import serialize, serialized_size
from fl_core.projection import ProjectionConfig, ProjectionMethod, project
from fl_core.stats import SufficientStatistics


def gen(seed=3):
    return torch.Generator().manual_seed(seed)


@pytest.fixture
def mlp():
    torch.manual_seed(0)
    return build_model("mlp", (1, 8, 8), 10, hidden=(12,))


def test_diagonal_is_the_diagonal_of_the_full_fisher(mlp):
    x = torch.randn(20, 1, 8, 8)
    full = compute_fisher("full", mlp, x, gen())
    diag = compute_fisher("diagonal", mlp, x, gen())
    torch.testing.assert_close(torch.diagonal(full.matrix), diag.diag, rtol=1e-5, atol=1e-7)


def test_kfac_is_exact_per_layer_for_one_sample(mlp):
    x = torch.randn(1, 1, 8, 8)
    full = compute_fisher("full", mlp, x, gen())
    kfac = compute_fisher("kfac", mlp, x, gen())
    mask = torch.zeros_like(full.matrix, dtype=torch.float64)
    for s in kfac.specs:
        mask[s.offset : s.offset + s.size, s.offset : s.offset + s.size] = 1
    v = torch.randn(full.dim, dtype=torch.float64)
    torch.testing.assert_close(kfac.matvec(v), (full.matrix.double() * mask) @ v, rtol=1e-5, atol=1e-6)


def test_conv_kfac_and_diag_shapes_and_psd():
    torch.manual_seed(0)
    cnn = build_model("cnn", (1, 28, 28), 10)
    x = torch.randn(6, 1, 28, 28)
    kfac = compute_fisher("kfac", cnn, x, gen())
    diag = compute_fisher("diagonal", cnn, x, gen())
    assert kfac.dim == diag.dim == num_params(cnn) == 643_104
    for (a, g), s in zip(kfac.factors, kfac.specs, strict=True):
        assert a.shape == (s.in_features, s.in_features) and g.shape == (s.out_features, s.out_features)
        assert torch.linalg.eigvalsh(a.double()).min() > -1e-5 and torch.linalg.eigvalsh(g.double()).min() > -1e-5
    assert (diag.diag >= 0).all()


@pytest.mark.parametrize("kind", ["kfac", "diagonal"])
def test_float32_capture_matches_a_float64_capture(kind):
    """Capture contracts each batch in float32 and sums batches in float64; a float64 copy of the
    model is the reference (factor error near 1e-7, far below any damping)."""
    torch.manual_seed(0)
    cnn = build_model("cnn", (1, 28, 28), 10)
    x = torch.randn(40, 1, 28, 28)
    fast = compute_fisher(kind, cnn, x, gen(), batch_size=16)
    ref_model = build_model("cnn", (1, 28, 28), 10).double()
    ref_model.load_state_dict({k: v.double() for k, v in cnn.state_dict().items()})
    ref = compute_fisher(kind, ref_model, x.double(), gen(), batch_size=16)
    pairs = zip(fast.factors, ref.factors, strict=True) if kind == "kfac" else [((fast.diag,), (ref.diag,))]
    for got, want in pairs:
        for g, w in zip(got, want, strict=True):
            w = w.double()
            assert float((g.double() - w).norm() / w.norm()) < 1e-5


def test_resnet18_groupnorm_is_fully_covered():
    m = build_model("resnet18", (3, 32, 32), 10)
    specs = layer_specs(m)
    assert sum(s.size for s in specs) == num_params(m)
    assert not any(isinstance(x, torch.nn.BatchNorm2d) for x in m.modules())


def test_layer_with_bias_is_refused():
    m = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(4, 2))
    with pytest.raises(ValueError, match="bias"):
        layer_specs(m)


def test_kfac_upload_roundtrip_and_measured_size(mlp):
    kfac = compute_fisher("kfac", mlp, torch.randn(8, 1, 8, 8), gen())
    again = KFACFisher.from_tensors(kfac.tensors(), kfac)
    for (a, g), (a2, g2) in zip(kfac.factors, again.factors, strict=True):
        assert torch.equal(a, a2) and torch.equal(g, g2)
    tensors = kfac.tensors()
    assert serialized_size(tensors) == len(serialize(tensors))
    packed = sum(t.numel() for t in tensors.values())
    assert packed == sum(
        s.in_features * (s.in_features + 1) // 2 + s.out_features * (s.out_features + 1) // 2 for s in kfac.specs
    )
    half = kfac.cast(torch.float16)
    assert all(t.dtype == torch.float16 for t in half.tensors().values())
    assert serialized_size(half.tensors()) < 0.55 * serialized_size(tensors)


def test_a_float16_kfac_upload_keeps_a_trained_models_tiny_factors(mlp):
    """A trained model's G entries sit below float16's normal range (measured on the case study's
    MNIST CNN: median 3e-8, max 6e-6, against A's O(1-100)); cast as they were, they underflow
    and the K-FAC merge fell from 96.5 % to the weighted mean's 87.9 %. The upload balances each
    factor pair by a power of two first: the same Kronecker product, to float16 precision."""
    kfac = compute_fisher("kfac", mlp, torch.randn(16, 1, 8, 8), gen())
    tiny = KFACFisher(
        kfac.specs, [(a.double() * 50.0, g.double() * 1e-7 / float(g.abs().max())) for a, g in kfac.factors]
    )
    v = torch.randn(tiny.dim, dtype=torch.float64)
    exact = tiny.matvec(v)

    def error(rep: KFACFisher) -> float:
        return float((rep.matvec(v) - exact).norm() / exact.norm())

    half = tiny.cast(torch.float16)
    assert all(t.dtype == torch.float16 for t in half.tensors().values())
    assert error(half) < 2e-3
    assert error(tiny.cast_as_is(torch.float16)) > 0.5  # what the unbalanced cast did
    for _, (a2, g2) in zip(tiny.factors, half.factors, strict=True):  # both factors well inside float16's range
        assert 1e-3 < float(a2.abs().max()) / float(g2.abs().max()) < 1e3
    assert torch.equal(tiny.cast(torch.float32).factors[0][0], tiny.factors[0][0].float())  # wider types: as is


def stats_for(kind, model, n_clients=4, seed=0):
    torch.manual_seed(seed)
    stats = SufficientStatistics(num_params(model), new_sum(kind, model))
    contributions = []
    for i in range(n_clients):
        w = flat_params(model) + 0.1 * torch.randn(num_params(model))
        fisher = compute_fisher(kind, model, torch.randn(30, 1, 8, 8), gen(i), labels="sampled")
        contributions.append(Contribution(i, w, fisher, 30))
    stats.apply(joined=contributions)
    return stats


@pytest.mark.parametrize("kind", ["diagonal", "full", "kfac"])
def test_projection_methods_agree(mlp, kind):
    stats = stats_for(kind, mlp)
    ref, info = project(
        stats, ProjectionConfig(method="cg_f", tol=1e-10, max_iter=5000, damping=1e-3, precondition=False)
    )
    for cfg in (
        ProjectionConfig(method="cg_f", tol=1e-10, max_iter=5000, damping=1e-3, precondition=True),
        ProjectionConfig(method="cg_f2", tol=1e-12, max_iter=20000, damping=1e-3),
    ):
        w, info = project(stats, cfg)
        torch.testing.assert_close(w, ref, rtol=1e-3, atol=1e-4)


def test_the_kronecker_preconditioner_shortens_cg_on_f(mlp):
    stats = stats_for("kfac", mlp)
    plain = project(stats, ProjectionConfig(method="cg_f", tol=1e-8, max_iter=20000, damping=1e-3, precondition=False))
    pcg = project(stats, ProjectionConfig(method="cg_f", tol=1e-8, max_iter=20000, damping=1e-3, precondition=True))
    assert plain[1].converged and pcg[1].converged and pcg[1].method.endswith("+pcg")
    assert pcg[1].iterations < plain[1].iterations
    torch.testing.assert_close(pcg[0], plain[0], rtol=1e-3, atol=1e-4)


def heterogeneous_kfac_stats(shared_a: bool = False, seed: int = 5) -> SufficientStatistics:
    """Two layers, three members whose A factors differ in scale and in their principal directions
    (or, with ``shared_a``, one A for all), unequal sample counts; deterministic."""
    g = torch.Generator().manual_seed(seed)
    specs = [LayerSpec("l0", 0, 6, 9), LayerSpec("l1", 54, 4, 6)]
    dim = sum(s.size for s in specs)

    def psd(n: int, scale: float) -> torch.Tensor:
        x = torch.randn(n, n + 3, generator=g) * torch.logspace(0, -2, n).unsqueeze(1)
        return (scale * (x @ x.T) / n).float()

    shared = [psd(s.in_features, 1.0) for s in specs]
    contributions = []
    for i, (scale, n) in enumerate(((1.0, 40), (5.0, 10), (0.2, 25))):
        factors = [
            (shared[k] if shared_a else psd(s.in_features, scale), psd(s.out_features, 1.0 / (i + 1)))
            for k, s in enumerate(specs)
        ]
        contributions.append(Contribution(i, torch.randn(dim, generator=g), KFACFisher(specs, factors), n))
    stats = SufficientStatistics(dim, KFACSum(specs))
    stats.apply(joined=contributions)
    return stats


def dense_fisher(stats: SufficientStatistics) -> torch.Tensor:
    """The summed Fisher as a dense float64 matrix, column by column through ``matvec``."""
    eye = torch.eye(stats.dim, dtype=torch.float64)
    return torch.stack([stats.fisher_sum.matvec(e) for e in eye], dim=1)


def test_eigen_diagonal_is_the_diagonal_of_f_in_the_kronecker_eigenbasis():
    stats = heterogeneous_kfac_stats()
    fsum, f = stats.fisher_sum, dense_fisher(stats)
    for b, (s, sl) in enumerate(zip(fsum.specs, fsum.blocks(stats.dim), strict=True)):
        qa, qg, _, _ = fsum._eigenbasis(b)
        q = torch.kron(qg, qa)  # row-major vec(V) of an (out, in) block
        expected = torch.diagonal(q.T @ f[sl, sl] @ q).reshape(s.out_features, s.in_features)
        torch.testing.assert_close(fsum._eigen_diagonal(b), expected, rtol=1e-5, atol=1e-7 * float(expected.max()))


@pytest.mark.parametrize("preconditioner", ["kronecker", "eigen_diagonal"])
def test_block_preconditioners_reach_the_dense_float64_solution(preconditioner):
    stats = heterogeneous_kfac_stats()
    f, wbar, damping = dense_fisher(stats), stats.mean(), 1e-4
    lam = damping * stats.fisher_sum.trace() / stats.dim
    dense = wbar - torch.linalg.solve(f + lam * torch.eye(stats.dim, dtype=torch.float64), f @ wbar - stats.b)
    w, info = project(
        stats, ProjectionConfig(method="cg_f", tol=1e-9, max_iter=5000, damping=damping, preconditioner=preconditioner)
    )
    assert info.converged and info.method.endswith("+pcg") and info.residual <= 1e-9
    torch.testing.assert_close(w.double(), dense, rtol=1e-5, atol=1e-5 * float(dense.abs().max()))


def test_both_block_preconditioners_are_exact_when_the_members_share_their_a_factor():
    stats = heterogeneous_kfac_stats(shared_a=True)
    for preconditioner in Preconditioner:
        _, info = project(
            stats,
            ProjectionConfig(
                method="cg_f", tol=1e-8, max_iter=5000, damping=1e-4, preconditioner=preconditioner, fast_products=False
            ),
        )
        assert info.converged and info.iterations <= 2, (preconditioner, info.iterations)


def test_the_preconditioner_option_is_validated_and_kronecker_by_default():
    assert ProjectionConfig().preconditioner is Preconditioner.KRONECKER
    assert ProjectionConfig(preconditioner="eigen_diagonal").preconditioner is Preconditioner.EIGEN_DIAGONAL
    with pytest.raises(ValueError, match="projection.preconditioner"):
        ProjectionConfig(preconditioner="jacobi")


def test_closed_form_equals_cg_for_a_diagonal_damped_or_not(mlp):
    stats = stats_for("diagonal", mlp)
    closed, info = project(stats, ProjectionConfig(method="closed_form", damping=0.0))
    cg, info_cg = project(stats, ProjectionConfig(method="cg_f", damping=0.0, tol=1e-12, max_iter=10000))
    torch.testing.assert_close(closed, cg, rtol=1e-4, atol=1e-5)
    assert info.constraint_residual < 1e-10
    closed, _ = project(stats, ProjectionConfig(method="closed_form", damping=1e-2))
    cg, info_cg = project(stats, ProjectionConfig(method="cg_f", damping=1e-2, tol=1e-12, max_iter=10000))
    assert info_cg.converged
    torch.testing.assert_close(closed, cg, rtol=1e-5, atol=1e-6)


def test_closed_form_counts_the_coordinates_it_leaves_at_the_mean():
    # two members whose diagonal Fishers are zero on the same 3 of 8 coordinates: undamped, those
    # coordinates have no constraint to meet and stay at the weighted mean; the count is reported
    fishers = [
        torch.tensor([1.0, 2.0, 0.0, 3.0, 0.0, 1.0, 0.0, 4.0], dtype=torch.float64),
        torch.tensor([2.0, 1.0, 0.0, 1.0, 0.0, 2.0, 0.0, 1.0], dtype=torch.float64),
    ]
    stats = SufficientStatistics(8, DiagonalSum(8))
    stats.apply(
        joined=[Contribution(i, torch.randn(8, generator=gen(i)), DiagonalFisher(f), 10) for i, f in enumerate(fishers)]
    )
    w, info = project(stats, ProjectionConfig(method="closed_form", damping=0.0))
    assert info.floored == 3 and info.as_dict()["floored"] == 3
    torch.testing.assert_close(w.double()[[2, 4, 6]], stats.mean()[[2, 4, 6]], rtol=0, atol=1e-6)
    _, damped = project(stats, ProjectionConfig(method="closed_form", damping=1e-2))
    assert damped.floored == 0


def test_projection_is_closest_point_and_satisfies_constraint(mlp):
    stats = stats_for("full", mlp)
    w, info = project(stats, ProjectionConfig(method="cg_f", damping=0.0, tol=1e-10, max_iter=5000))
    fsum = stats.fisher_sum
    residual = fsum.matvec(w.double()) - stats.b
    assert residual.norm() / stats.b.norm() < 1e-3
    # W - Wbar lies in range(F): orthogonal to the null space of F
    evals, evecs = torch.linalg.eigh(fsum.total)
    null = evecs[:, evals < 1e-9 * evals.max()]
    assert (null.T @ (w.double() - stats.mean())).norm() < 1e-3 * (w.double() - stats.mean()).norm() + 1e-6


def test_warm_start_reaches_the_same_point(mlp):
    stats = stats_for("kfac", mlp)
    cfg = ProjectionConfig(tol=1e-10, max_iter=5000)
    cold, info_cold = project(stats, cfg)
    warm, info_warm = project(stats, cfg, warm=stats.mean() - cold.double())
    torch.testing.assert_close(cold, warm, rtol=1e-4, atol=1e-5)
    assert info_warm.iterations <= info_cold.iterations


def test_cg_solves_a_small_spd_system():
    torch.manual_seed(0)
    a = torch.randn(30, 30, dtype=torch.float64)
    a = a @ a.T + 30 * torch.eye(30, dtype=torch.float64)
    b = torch.randn(30, dtype=torch.float64)
    x, it, res = conjugate_gradient(lambda v: a @ v, b, 1e-12, 100)
    torch.testing.assert_close(a @ x, b)
    assert res < 1e-12 and it <= 30


def test_config_errors_name_the_field():
    with pytest.raises(ValueError, match="projection.tol"):
        ProjectionConfig(tol=0)
    with pytest.raises(ValueError, match="projection.damping"):
        ProjectionConfig(damping=-1)
    with pytest.raises(ValueError, match="not a valid ProjectionMethod"):
        ProjectionConfig(method="newton")
    assert ProjectionMethod("cg_f2") is ProjectionMethod.CG_F2
    assert FisherKind("kfac") is FisherKind.KFAC


def test_low_rank_upload_is_smaller_exact_on_low_rank_factors_and_rebuilt_from_itself(mlp):
    kfac = compute_fisher("kfac", mlp, torch.randn(5, 1, 8, 8), gen())  # 5 samples: the A factors have rank <= 5
    low = kfac.compress(6)
    tensors = low.tensors()
    assert any(k.endswith(".U") for k in tensors)
    assert serialized_size(tensors) < 0.5 * serialized_size(kfac.tensors())
    for (a, _g), (a2, _g2) in zip(kfac.factors, low.factors, strict=True):
        torch.testing.assert_close(a2, a, rtol=0, atol=1e-5 * float(a.abs().max()))
    again = KFACFisher.from_tensors(tensors, kfac)  # what the coordinator (or a store) rebuilds
    assert again.tensors().keys() == tensors.keys()
    for (a, g), (a2, g2) in zip(low.factors, again.factors, strict=True):
        assert torch.equal(a, a2) and torch.equal(g, g2)
    half = low.cast(torch.float16)
    assert half.tensors().keys() == tensors.keys() and all(t.dtype == torch.float16 for t in half.tensors().values())
    assert kfac.compress(None) is kfac
    assert kfac.compress(10_000).tensors().keys() == kfac.tensors().keys()  # nothing pays: whole triangles


def test_low_rank_keeps_the_top_eigenvalues_and_the_mean_of_the_rest():
    torch.manual_seed(0)
    q, _ = torch.linalg.qr(torch.randn(40, 40, dtype=torch.float64))
    e = torch.linspace(0.1, 4.0, 40, dtype=torch.float64)
    m = ((q * e) @ q.T).float()
    specs = layer_specs(build_model("mlp", (1, 5, 8), 10, hidden=(40,)))[:1]  # fc1: 40 in, 40 out
    low = KFACFisher(specs, [(m, m)]).compress(3)
    got = torch.linalg.eigvalsh(low.factors[0][0].double())
    torch.testing.assert_close(got[-3:], e[-3:], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got[:-3], e[:-3].mean().expand(37), rtol=1e-5, atol=1e-5)


def test_low_rank_is_refused_for_a_diagonal_fisher(mlp):
    diag = compute_fisher("diagonal", mlp, torch.randn(4, 1, 8, 8), gen())
    assert diag.compress(None) is diag
    with pytest.raises(ValueError, match="K-FAC"):
        diag.compress(4)


def low_rank_kfac_stats(rank: int | None, repaired: int | None = None) -> SufficientStatistics:
    """Three members on a 24 -> 20 -> 4 layer pair, their factors uploaded at ``rank`` (None:
    whole); member ``repaired`` keeps whole factors (as one whose upload the coordinator
    repaired would). Deterministic."""
    g = torch.Generator().manual_seed(11)
    specs = [LayerSpec("fc1", 0, 20, 24), LayerSpec("fc2", 480, 4, 20)]
    dim = sum(s.size for s in specs)

    def psd(n: int, scale: float) -> torch.Tensor:
        x = torch.randn(n, 2 * n, generator=g) * torch.logspace(0, -2, n).unsqueeze(1)
        return (scale * (x @ x.T) / n).float()

    contributions = []
    for i, n in enumerate((30, 12, 21)):
        fisher = KFACFisher(specs, [(psd(s.in_features, 1.0 + i), psd(s.out_features, 0.5 / (i + 1))) for s in specs])
        contributions.append(
            Contribution(i, torch.randn(dim, generator=g), fisher if i == repaired else fisher.compress(rank), n)
        )
    stats = SufficientStatistics(dim, KFACSum(specs))
    stats.apply(joined=contributions)
    return stats


def test_float32_products_use_low_rank_uploads_where_every_member_sent_them():
    """A layer every member uploaded in low rank multiplies through that form (fc1: 4 r < in + out);
    the float32 product then equals the float64 product of the rebuilt factors to float32 rounding."""
    from fl_core.fisher.kfac import _LowRankLayer

    stats = low_rank_kfac_stats(rank=3)
    fsum = stats.fisher_sum
    kinds = [isinstance(layer, _LowRankLayer) for layer in fsum._stack32()]
    assert kinds == [True, False]  # fc2 (4 outputs): its G is too small to compress, so it went whole
    v = torch.randn(stats.dim, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    for b, sl in enumerate(fsum.blocks(stats.dim)):
        exact, fast = fsum.block_matvec(b, v[sl]), fsum.block_matvec(b, v[sl], fast=True)
        assert float((fast - exact).norm() / exact.norm()) < 1e-6, b
    for repaired, rank in ((0, 3), (None, None)):  # one member with whole factors, or none compressed
        assert not any(
            isinstance(layer, _LowRankLayer) for layer in low_rank_kfac_stats(rank, repaired).fisher_sum._stack32()
        )


def test_a_low_rank_upload_whose_rebuild_is_repaired_keeps_its_form():
    """A rank-2 A factor sent at rank 3: its float32 rebuild fails the PSD test and is repaired,
    while the upload itself is PSD; the repaired Fisher still names that upload and multiplies
    through it."""
    from fl_core.fisher.kfac import _LowRankLayer

    g = torch.Generator().manual_seed(1)
    specs = [LayerSpec("fc1", 0, 20, 24)]
    x, y = torch.randn(24, 2, generator=g), torch.randn(20, 40, generator=g)
    upload = KFACFisher(specs, [((x @ x.T).float(), (y @ y.T / 40).float())]).compress(3)
    repaired = upload.psd()
    assert repaired is not upload and repaired.tensors().keys() == upload.tensors().keys()
    fsum = KFACSum(specs)
    fsum.add(0, upload)
    assert isinstance(fsum._stack32()[0], _LowRankLayer)
    v = torch.randn(480, dtype=torch.float64, generator=g)
    exact, fast = fsum.block_matvec(0, v), fsum.block_matvec(0, v, fast=True)
    assert float((fast - exact).norm() / exact.norm()) < 1e-6


def test_a_low_rank_merge_reaches_the_float64_solution_of_the_rebuilt_factors():
    stats = low_rank_kfac_stats(rank=3)
    f, wbar, damping = dense_fisher(stats), stats.mean(), 1e-4
    lam = damping * stats.fisher_sum.trace() / stats.dim
    dense = wbar - torch.linalg.solve(f + lam * torch.eye(stats.dim, dtype=torch.float64), f @ wbar - stats.b)
    w, info = project(stats, ProjectionConfig(method="cg_f", tol=1e-9, max_iter=5000, damping=damping))
    assert info.converged and info.residual <= 1e-9
    torch.testing.assert_close(w.double(), dense, rtol=1e-5, atol=1e-5 * float(dense.abs().max()))


@pytest.mark.parametrize("rank", [None, 3])
@pytest.mark.parametrize("preconditioner", list(Preconditioner))
def test_the_rotated_block_is_the_preconditioned_block_in_its_eigenbasis(rank, preconditioner):
    """``block_rotated``: an orthogonal change of basis whose float32 products are ``R^T F R`` and
    whose division is the block preconditioner, so CG's fast phase there is the same PCG."""
    stats = low_rank_kfac_stats(rank)
    fsum = stats.fisher_sum
    lam = 1e-3 * fsum.trace() / stats.dim
    g = torch.Generator().manual_seed(4)
    for b, sl in enumerate(fsum.blocks(stats.dim)):
        rot, pre = fsum.block_rotated(b, lam, preconditioner), fsum.block_preconditioner(b, lam, preconditioner)
        v = torch.randn(sl.stop - sl.start, dtype=torch.float64, generator=g)
        y = rot.rotate(v)
        torch.testing.assert_close(rot.unrotate(y), v)
        assert abs(float(y.norm() / v.norm()) - 1.0) < 1e-12
        expected = rot.rotate(fsum.block_matvec(b, rot.unrotate(y)))
        assert float((rot.matvec(y) - expected).norm() / expected.norm()) < 1e-6, b
        torch.testing.assert_close(rot.unrotate(rot.rotate(v) / rot.denom), pre(v))


def test_a_sum_without_an_eigenbasis_has_no_rotated_block():
    diagonal = DiagonalSum(6)
    assert (
        diagonal.block_rotated(0, 1e-3) is None and KFACSum([LayerSpec("l0", 0, 2, 3)]).block_rotated(0, 1e-3) is None
    )


def test_the_solve_device_is_validated_and_the_cpu_by_default():
    assert ProjectionConfig().device == "cpu" and ProjectionConfig(device="auto").device == "auto"
    with pytest.raises(ValueError, match="projection.device"):
        ProjectionConfig(device="tpu")
