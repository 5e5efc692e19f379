"""The merge: damping selected on the server's validation set, solves that say how they
ended, float32 block solves equal to the float64 direct solution, FedFisher's Adam loop, and a
rejoining client that does not train again."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

from fl_core.editors import FixedSize, build_editor
from fl_core.fisher import new_sum
from fl_core.projection import ProjectionConfig, SolveWarning, project
from fl_core.stats import SufficientStatistics
from fl_core.validation import Validator


@pytest.fixture(scope="module")
def validator(tiny):
    return Validator(tiny.model_fn, tiny.test.subset(np.arange(200)))


def kfac_stats(tiny, members=range(6)):
    pool = tiny.pool("kfac")
    stats = SufficientStatistics(tiny.w0.numel(), new_sum("kfac", tiny.model_fn()))
    stats.apply(joined=[pool.train(c) for c in members])
    return stats


def dense_fisher(stats) -> torch.Tensor:
    eye = torch.eye(stats.dim, dtype=torch.float64)
    return torch.stack([stats.fisher_sum.matvec(eye[i]) for i in range(stats.dim)], dim=1)


def test_selection_picks_the_best_validated_damping_and_records_every_candidate(tiny, validator):
    stats = kfac_stats(tiny)
    cfg = ProjectionConfig(tol=1e-8, max_iter=3000)
    w, info = project(stats, cfg, scorer=validator)
    assert [c["damping"] for c in info.candidates] == sorted(cfg.dampings, reverse=True)
    best = max(info.candidates, key=lambda c: (c["val_accuracy"], -c["val_loss"]))
    assert info.damping == best["damping"] and info.validation == (best["val_accuracy"], best["val_loss"])
    assert validator(w) == pytest.approx(info.validation, abs=1e-6)
    # every candidate is the damped solution it claims to be (checked on the dense system)
    fd = dense_fisher(stats)
    wbar = stats.mean()
    for c in info.candidates:
        lam = c["damping"] * stats.fisher_sum.trace() / stats.dim
        cand, _ = project(stats, ProjectionConfig(tol=1e-8, max_iter=3000, damping=c["damping"]))
        if math.isinf(lam):
            torch.testing.assert_close(cand, wbar.float())
            continue
        x = torch.linalg.solve(fd + lam * torch.eye(stats.dim, dtype=torch.float64), fd @ wbar - stats.b)
        torch.testing.assert_close(cand.double(), wbar - x, rtol=1e-4, atol=1e-5)
    assert info.converged and all(c["stop_reason"] in ("converged", "closed_form") for c in info.candidates)


def test_one_candidate_with_a_validator_is_that_damping_not_the_fixed_fallback(tiny, validator):
    stats = kfac_stats(tiny)
    w, info = project(stats, ProjectionConfig(dampings=(math.inf,), damping=1e-4), scorer=validator)
    torch.testing.assert_close(w, stats.mean().float())
    assert math.isinf(info.damping) and info.validation == pytest.approx(validator(w), abs=1e-9)


def test_an_edit_with_selection_equals_a_fresh_fit_on_the_same_members(tiny, validator):
    pool = tiny.pool("kfac")
    cfg = ProjectionConfig(tol=1e-9, max_iter=3000)
    editor = build_editor("fsosa", pool, np.random.default_rng(4), FixedSize(3), cfg, validator=validator)
    editor.fit(range(8))
    rng = np.random.default_rng(6)
    for step in range(8):
        present = sorted(editor.clients)
        if step % 2:
            editor.remove(present[rng.integers(len(present))])
        else:
            editor.add(8 + step // 2)
    fresh = SufficientStatistics(tiny.w0.numel(), new_sum("kfac", tiny.model_fn()))
    fresh.apply(joined=[pool.trainer.contribute(c, pool.data_of(c)) for c in sorted(editor.members)])
    w, info = project(fresh, cfg, scorer=validator)
    assert editor.last_solve.damping == info.damping
    torch.testing.assert_close(editor.model, w, rtol=1e-5, atol=1e-6)


def test_float32_block_solves_match_the_float64_direct_solution(tiny):
    stats = kfac_stats(tiny)
    fd = dense_fisher(stats)
    wbar = stats.mean()
    for damping in (1e-3, 1e-1):
        lam = damping * stats.fisher_sum.trace() / stats.dim
        exact = wbar - torch.linalg.solve(fd + lam * torch.eye(stats.dim, dtype=torch.float64), fd @ wbar - stats.b)
        for fast in (True, False):
            w, info = project(stats, ProjectionConfig(tol=1e-9, max_iter=3000, damping=damping, fast_products=fast))
            assert info.converged and info.residual <= 1e-9  # the true float64 residual, per block
            torch.testing.assert_close(w.double(), exact, rtol=1e-5, atol=1e-6)


def test_a_solve_stopped_by_its_cap_warns_with_the_residual_and_says_so(tiny):
    stats = kfac_stats(tiny)
    with pytest.warns(SolveWarning, match=r"relative residual [0-9.e+-]+ after 2 iterations"):
        _, info = project(stats, ProjectionConfig(tol=1e-12, max_iter=2, damping=1e-4))
    assert not info.converged and info.stop_reason == "max_iter" and info.residual > 1e-12
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, ok = project(stats, ProjectionConfig(tol=1e-6, max_iter=3000, damping=1e-1))
    assert ok.converged and ok.stop_reason == "converged"


def test_fedfisher_adam_loop_keeps_the_best_validated_iterate(tiny, validator):
    stats = kfac_stats(tiny)
    cfg = ProjectionConfig(method="adam", max_iter=300, check_every=50, adam_lr=1e-2)
    w, info = project(stats, cfg, scorer=validator)
    assert info.stop_reason == "validation" and info.iterations % 50 == 0
    start = validator(stats.mean().float())
    assert info.validation[0] >= start[0]  # the start (the weighted mean) is a candidate
    assert validator(w) == pytest.approx(info.validation, abs=1e-6)


@pytest.mark.parametrize("method", ["cg_f", "cg_f2"])
def test_early_stopping_keeps_the_best_validated_cg_iterate_and_each_is_that_iterate(tiny, validator, method):
    stats = kfac_stats(tiny)
    cfg = ProjectionConfig(method=method, damping=1e-2, iterates=(5, 1, 12), tol=1e-12, fast_products=False)
    assert cfg.iterates == (1, 5, 12)
    w, info = project(stats, cfg, scorer=validator)
    assert [c["iteration"] for c in info.candidates] == [0, 1, 5, 12]
    best = max(info.candidates, key=lambda c: (c["val_accuracy"], -c["val_loss"]))
    assert info.iterations == best["iteration"] and info.stop_reason == "validation" and info.converged
    assert validator(w) == pytest.approx(info.validation, abs=1e-6)
    # each candidate is the t-th CG iterate from zero (an independent CG stopped at t), t = 0 the mean
    fd = dense_fisher(stats)
    wbar = stats.mean()
    r = fd @ wbar - stats.b
    fl = fd + 1e-2 * stats.fisher_sum.trace() / stats.dim * torch.eye(stats.dim, dtype=torch.float64)
    system, rhs = (fl @ fl, 2 * r) if method == "cg_f2" else (fl, r)
    for c in info.candidates:
        x = torch.zeros_like(r)
        res, p = rhs.clone(), rhs.clone()
        for _ in range(c["iteration"]):
            ap = system @ p
            a = (res @ res) / (p @ ap)
            x, res_new = x + a * p, res - a * ap
            p, res = res_new + (res_new @ res_new) / (res @ res) * p, res_new
        cand = wbar - (0.5 * fl @ x if method == "cg_f2" else x)
        assert validator(cand.float()) == pytest.approx((c["val_accuracy"], c["val_loss"]), abs=1e-4)


def test_early_stopping_is_refused_where_it_cannot_select(tiny, validator):
    stats = kfac_stats(tiny, members=range(3))
    with pytest.raises(ValueError, match="projection.iterates"):
        project(stats, ProjectionConfig(iterates=(5,)))  # no validation set
    with pytest.raises(ValueError, match="projection.iterates.*adam"):
        ProjectionConfig(method="adam", iterates=(5,))
    with pytest.raises(ValueError, match="projection.iterates"):
        ProjectionConfig(iterates=(0,))


def test_an_edit_with_early_stopping_equals_a_fresh_fit_on_the_same_members(tiny, validator):
    pool = tiny.pool("kfac")
    cfg = ProjectionConfig(method="cg_f", damping=0.0, iterates=(3, 10, 30))
    editor = build_editor("fsosa", pool, np.random.default_rng(5), FixedSize(3), cfg, validator=validator)
    editor.fit(range(8))
    editor.remove(sorted(editor.members)[0])
    editor.add(8)
    fresh = SufficientStatistics(tiny.w0.numel(), new_sum("kfac", tiny.model_fn()))
    fresh.apply(joined=[pool.trainer.contribute(c, pool.data_of(c)) for c in sorted(editor.members)])
    w, info = project(fresh, cfg, scorer=validator)
    assert editor.last_solve.iterations == info.iterations
    torch.testing.assert_close(editor.model, w, rtol=1e-5, atol=1e-6)


def test_a_client_rejoining_with_its_contribution_uploads_it_without_training(tiny):
    seen = 0
    for seed in range(40):
        pool = tiny.pool("diagonal")
        editor = build_editor("fsosa", pool, np.random.default_rng(seed), FixedSize(3))
        editor.fit(range(6))
        evicted = set()
        for step, new in enumerate(range(6, 12)):
            before = set(editor.members)
            report = editor.add(new) if step % 2 == 0 else editor.remove(sorted(editor.members)[0])
            rejoined = [c for c in report.joined if c in evicted]
            for c in rejoined:
                seen += 1
                assert c not in report.trained
                assert any(t["client"] == c and t["kind"] == "model_upload" for t in report.transfers)
            trainees = [c for c in report.joined if c not in rejoined]
            assert report.trained == tuple(trainees)
            assert (report.bytes["broadcast"] > 0) == bool(trainees)
            assert report.compute_s == pytest.approx(sum(pool.train(c).compute_s for c in trainees))
            evicted |= before - set(editor.members)
            evicted -= set(report.removed)
    assert seen > 0  # the scenario happened
    retrain = build_editor("retrain", tiny.pool("diagonal"), np.random.default_rng(0), FixedSize(3))
    retrain.fit(range(6))
    assert len(retrain.remove(0).trained) == 3  # Retrain trains every member again
