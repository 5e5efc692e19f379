"""The F-SOSA merge: the point of ``{W : F W = b}`` closest to ``Wbar``, regularised.

With ``F = sum_i w_i F_i``, ``b = sum_i w_i F_i W_i`` and ``Wbar`` the weighted mean of the
members' models (``fl_core.stats``), the projection is ``W = Wbar - F^+ (F Wbar - b)``.

**Regularisation.** Sampled-label Fishers are singular and badly conditioned (a softmax gradient
sums to zero; K-FAC factors have tiny eigenvalues), and the exact projection over-trusts those
directions: measured on MNIST with the two-layer CNN, the undamped merge sits far from every
member and loses 15-20 points to a damped one. The merge is therefore damped,
``W(lambda) = Wbar - (F + lambda I)^{-1} (F Wbar - b)`` with ``lambda = damping * tr(F) / d``,
which moves from the exact projection (``damping -> 0``) to the plain weighted mean
(``damping = inf``). No fixed damping is right everywhere (the best value differs by orders of
magnitude between alpha 0.1 and 0.5), so, as FedFisher does with its server-side validation,
the damping is *selected*: when a :class:`fl_core.validation.Validator` is given, every damping of
``ProjectionConfig.dampings`` is solved (largest first, each warm-started from the previous
one), scored on the server's fixed held-out validation set, and the best accuracy wins (ties:
lower validation loss, then the larger damping). The selection is a deterministic function of
the member statistics and the fixed validation set; every solve starts from the same point
whatever the history, so an edit still equals a fresh fit on the same members.
A single candidate with a validator is used as it is (scored, nothing to select). Without a
validator the fixed ``damping`` is used.

Methods:

- ``closed_form`` (diagonal F): ``W_j = (b_j + lambda Wbar_j) / (F_j + lambda)``; with
  ``lambda = 0``, ``b_j / F_j`` where ``F_j > curvature_floor * max F`` and ``Wbar_j`` elsewhere
  (how many coordinates were left at the mean: ``SolveInfo.floored``).
- ``cg_f`` (default otherwise): conjugate gradient on ``(F + lambda I) x = F Wbar - b`` from
  ``x0 = 0`` (its iterates stay in range(F); ``lambda = 0`` converges to ``F^+ r`` with the
  condition number of F). Block-diagonal sums (K-FAC: one block per layer) are solved block by
  block, each with its own preconditioner (``ProjectionConfig.preconditioner``: Kronecker by
  default) and stopping test (a block converges when its own relative residual is below ``tol``,
  which bounds the whole system's); small layers stop after a few iterations instead of paying
  for the slowest. Products run in float32 (``fast_products``) and each block finishes in
  float64 until its true residual is below ``tol``. The float32 phase runs in the
  preconditioner's eigenbasis (``FisherSum.block_rotated``), where preconditioning is a
  division: the same iterates in exact arithmetic, without two basis changes an iteration.
- ``cg_f2``: the paper's form, CG on ``F_l^2 L = 2 (F_l Wbar - b)`` with ``F_l = F + lambda I``
  and ``W = Wbar - F_l L / 2`` (condition number squared; two products per iteration).
- Early stopping instead of damping (``ProjectionConfig.iterates``, with ``cg_f`` or ``cg_f2``): the
  paper's CG started from ``Wbar`` regularises by stopping early, so one solve at the fixed
  ``damping`` (0: undamped) runs on the whole system and the iterates listed (and ``Wbar`` itself,
  iteration 0) are scored on the validation set; the best is kept, ``stop_reason`` says
  ``validation``. Still a deterministic function of the member statistics (every solve starts
  from zero), so edits stay equal to fresh fits.
- ``adam``: FedFisher's server loop for comparison: Adam on ``sum_i w_i (W - W_i)^T F_i (W - W_i)
  / (2 sum_i w_i)`` from ``Wbar`` for ``max_iter`` steps, scored on the validation set every
  ``check_every`` steps (and at the start), keeping the best iterate.

Every solve reports iterations, the true relative residual, the constraint residual, seconds, and
why it stopped (``converged``, ``max_iter``, ``stalled``, ``validation``). A solve that stops
before its tolerance also raises a :class:`SolveWarning` naming the residual it reached.
"""

from __future__ import annotations

import functools
import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import torch

from .cg import conjugate_gradient
from .devices import resolve_device
from .fisher.base import RotatedBlock
from .projection_config import (
    DEFAULT_DAMPINGS,
    FAST_TOL,
    SOLVER_VERSION,
    STOPPED_SHORT,
    ProjectionConfig,
    ProjectionMethod,
    Score,
    Scorer,
    SolveInfo,
    SolveWarning,
)
from .stats import SufficientStatistics


@dataclass
class _Solve:
    """One damped solve: the correction ``x = Wbar - W`` and how it went."""

    x: torch.Tensor
    iterations: int
    residual: float
    products: int
    stop_reason: str
    preconditioned: bool = False

    @property
    def converged(self) -> bool:
        return self.stop_reason == "converged"


def _norm(v: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm(v))


def _solve_cg_f(
    stats: SufficientStatistics, r: torch.Tensor, lam: float, config: ProjectionConfig, x0: torch.Tensor | None
) -> _Solve:
    """``(F + lam I) x = r`` block by block (fast products, then a float64 finish)."""
    fsum = stats.fisher_sum
    assert fsum is not None  # project() solves only with a Fisher sum
    x = torch.zeros_like(r) if x0 is None else x0.clone()
    worst_res, worst_it, products, reasons, used_pre = 0.0, 0, 0, set(), False
    for b, sl in enumerate(fsum.blocks(stats.dim)):
        rb = r[sl]
        nb = _norm(rb)
        if nb == 0.0:
            x[sl] = 0.0
            continue
        precondition = config.precondition and lam > 0
        pre = fsum.block_preconditioner(b, lam, config.preconditioner) if precondition else None
        rotated = (
            fsum.block_rotated(b, lam, config.preconditioner, resolve_device(config.device))
            if precondition and config.fast_products
            else None
        )
        share = (sl.stop - sl.start) / stats.dim

        def op(v: torch.Tensor, fast: bool, b=b) -> torch.Tensor:
            out = fsum.block_matvec(b, v, fast=fast)
            return out.add_(v, alpha=lam) if lam else out

        xb, it_total = x[sl], 0
        for fast in (True, False) if config.fast_products else (False,):
            budget = config.max_iter - it_total
            if budget <= 0:
                break
            start = xb if (x0 is not None or it_total) else None
            tol = max(config.tol, FAST_TOL) if fast else config.tol
            if fast and rotated is not None:  # the same PCG in the preconditioner's eigenbasis
                xb, it = _rotated_cg(rotated, lam, rb, tol, budget, start)
            else:
                xb, it, _ = conjugate_gradient(functools.partial(op, fast=fast), rb, tol, budget, pre, start)
            it_total += it
            true_res = _norm(rb - op(xb, False)) / nb
            products += (it + 2) * share
            if true_res <= config.tol:
                break
        x[sl] = xb
        used_pre = used_pre or pre is not None
        reason = "converged" if true_res <= config.tol else ("max_iter" if it_total >= config.max_iter else "stalled")
        reasons.add(reason)
        worst_res, worst_it = max(worst_res, true_res), max(worst_it, it_total)
    reason = next((r_ for r_ in STOPPED_SHORT if r_ in reasons), "converged")
    return _Solve(x, worst_it, worst_res, round(products), reason, used_pre)


def _rotated_cg(
    rotated: RotatedBlock, lam: float, rb: torch.Tensor, tol: float, budget: int, start: torch.Tensor | None
) -> tuple[torch.Tensor, int]:
    """PCG on one block in its preconditioner's eigenbasis: the solution (rotated back) and the iterations."""
    yb, it, _ = conjugate_gradient(
        lambda y: rotated.matvec(y).add_(y, alpha=lam),
        rotated.rotate(rb),
        tol,
        budget,
        lambda y: y / rotated.denom,
        None if start is None else rotated.rotate(start),
    )
    return rotated.unrotate(yb), it


def _damped_operator(stats: SufficientStatistics, lam: float, fast: bool) -> Callable[[torch.Tensor], torch.Tensor]:
    """``v -> (F + lam I) v`` on the whole vector (``fast``: float32 block products, float64 sums)."""
    fsum = stats.fisher_sum
    assert fsum is not None  # project() solves only with a Fisher sum
    blocks = fsum.blocks(stats.dim)

    def op(v: torch.Tensor) -> torch.Tensor:
        if fast:
            out = torch.empty_like(v)
            for b, sl in enumerate(blocks):
                out[sl] = fsum.block_matvec(b, v[sl], fast=True)
        else:
            out = fsum.matvec(v)
        return out.add_(v, alpha=lam) if lam else out

    return op


def _solve_cg_f2(stats: SufficientStatistics, r: torch.Tensor, lam: float, config: ProjectionConfig) -> _Solve:
    """The paper's dual form on the damped operator, as one system in float64."""
    op = _damped_operator(stats, lam, fast=False)
    dual, it, res = conjugate_gradient(lambda v: op(op(v)), 2.0 * r, config.tol, config.max_iter)
    reason = "converged" if res <= config.tol else ("max_iter" if it >= config.max_iter else "stalled")
    return _Solve(0.5 * op(dual), it, res, 2 * it + 1, reason)


def _closed_form(
    stats: SufficientStatistics, wbar: torch.Tensor, lam: float, config: ProjectionConfig
) -> tuple[torch.Tensor, int]:
    """The diagonal solution and how many coordinates were left at the mean (undamped, curvature
    at most ``curvature_floor`` times the largest: their constraint cannot be met)."""
    assert stats.fisher_sum is not None and stats.b is not None  # project() solves only with a Fisher sum
    diag = stats.fisher_sum.diagonal()
    if diag is None:
        raise ValueError("the closed-form projection needs a diagonal Fisher")
    if lam > 0:
        return (stats.b + lam * wbar) / (diag + lam), 0
    floor = config.curvature_floor * float(diag.max()) if diag.numel() else 0.0
    ok = diag > floor
    w = wbar.clone()
    w[ok] = stats.b[ok] / diag[ok]
    return w, int(ok.numel() - ok.sum())


def _better(a: Score, b: Score | None) -> bool:
    """Higher accuracy wins, then lower loss; an exact tie keeps the earlier candidate."""
    return b is None or a[0] > b[0] or (a[0] == b[0] and a[1] < b[1])


def _select_iterate(
    stats: SufficientStatistics,
    wbar: torch.Tensor,
    method: ProjectionMethod,
    config: ProjectionConfig,
    scorer: Scorer,
    info: SolveInfo,
) -> torch.Tensor:
    """Early stopping as the regulariser: one CG solve from zero at the fixed damping, the
    iterates of ``config.iterates`` and ``Wbar`` (iteration 0) scored, the best kept."""
    fsum = stats.fisher_sum
    assert fsum is not None and stats.b is not None  # project() solves only with a Fisher sum
    op = _damped_operator(stats, config.damping * fsum.trace() / stats.dim, fast=config.fast_products)
    r = fsum.matvec(wbar) - stats.b
    if method is ProjectionMethod.CG_F2:
        system, rhs, products_per_it = (lambda v: op(op(v))), 2.0 * r, 2

        def correction(y: torch.Tensor) -> torch.Tensor:
            return 0.5 * op(y)
    else:
        system, rhs, products_per_it = op, r, 1

        def correction(y: torch.Tensor) -> torch.Tensor:
            return y

    best: dict = {}

    def visit(t: int, y: torch.Tensor) -> None:
        w = wbar if t == 0 else wbar - correction(y)
        score = scorer(w.float())
        info.candidates.append(
            {
                "damping": config.damping,
                "iteration": t,
                "stop_reason": "validation",
                "residual": None,
                "val_accuracy": score[0],
                "val_loss": score[1],
            }
        )
        if _better(score, best.get("score")):
            best.update(score=score, w=w, t=t, y=None if t == 0 else y.clone())

    visit(0, torch.zeros_like(r))
    checks = set(config.iterates)
    y, last, _ = conjugate_gradient(
        system, rhs, config.tol, max(checks), callback=lambda t, x: visit(t, x) if t in checks else None
    )
    if 0 < last < max(checks) and last not in checks:  # converged (or hit the null space) before the last check
        visit(last, y)
    rnorm = _norm(rhs)
    info.iterations, info.damping, info.validation = best["t"], config.damping, best["score"]
    info.residual = 1.0 if best["y"] is None else (_norm(rhs - system(best["y"])) / rnorm if rnorm else 0.0)
    info.products = products_per_it * (last + 1) + len(info.candidates)
    info.stop_reason = "validation"
    return best["w"]


def _adam(
    stats: SufficientStatistics, wbar: torch.Tensor, config: ProjectionConfig, scorer: Scorer | None, info: SolveInfo
) -> torch.Tensor:
    """FedFisher's server step: Adam on the Fisher-weighted objective, best validated iterate."""
    fsum, scale = stats.fisher_sum, 1.0 / stats.total_weight
    assert fsum is not None and stats.b is not None  # project() solves only with a Fisher sum
    w = wbar.clone()
    m, v = torch.zeros_like(w), torch.zeros_like(w)
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    best_w, best_score, best_step = w.clone(), scorer(w) if scorer else None, 0
    for t in range(1, config.max_iter + 1):
        g = (fsum.matvec(w) - stats.b) * scale
        m.mul_(beta1).add_(g, alpha=1 - beta1)
        v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
        step = (m / (1 - beta1**t)) / ((v / (1 - beta2**t)).sqrt_().add_(eps))
        w.add_(step, alpha=-config.adam_lr)
        if scorer and (t % config.check_every == 0 or t == config.max_iter):
            s = scorer(w)
            if _better(s, best_score):
                best_w, best_score, best_step = w.clone(), s, t
    if scorer is None:
        best_w, best_step = w, config.max_iter
    info.iterations, info.products, info.validation = best_step, config.max_iter, best_score
    info.stop_reason = "validation" if scorer else "max_iter"
    return best_w


def project(
    stats: SufficientStatistics,
    config: ProjectionConfig = ProjectionConfig(),
    warm: torch.Tensor | None = None,
    scorer: Scorer | None = None,
    choose: float | None = None,
) -> tuple[torch.Tensor, SolveInfo]:
    """The merged model (float32) for the current statistics, and how the solve went.

    ``scorer`` maps a model to its (accuracy, loss) on the server's validation set; with it and
    more than one candidate damping the damping is selected (module docstring). Without it,
    ``warm`` (the correction ``Wbar - W`` of a previous solve) may start CG on F when damping > 0;
    the answer is the same to the solver tolerance.

    ``choose`` replays a recorded selection without scoring (``vmc certify``): the candidates of
    ``config.dampings`` down to ``choose`` are solved as the selection solves them (each started
    from the one before) and ``choose``'s solution is kept, so the result is the selection's own
    arithmetic at the damping it picked."""
    t0 = time.perf_counter()
    wbar = stats.mean()
    fsum = stats.fisher_sum
    if fsum is None:
        return wbar.float(), SolveInfo("mean", seconds=time.perf_counter() - t0)
    assert stats.b is not None  # kept exactly when there is a Fisher sum
    method = config.method
    if method is ProjectionMethod.AUTO:
        method = ProjectionMethod.CLOSED_FORM if fsum.diagonal() is not None else ProjectionMethod.CG_F
    info = SolveInfo(method.value)
    if method is ProjectionMethod.ADAM:
        w = _adam(stats, wbar, config, scorer, info)
    elif config.iterates:
        if method not in (ProjectionMethod.CG_F, ProjectionMethod.CG_F2) or scorer is None:
            raise ValueError(
                f"projection.iterates selects CG iterates on a validation set: it needs method cg_f or "
                f"cg_f2 (this merge resolves to {method.value}) and a validation set"
                + ("" if scorer is not None else " (none was given)")
            )
        w = _select_iterate(stats, wbar, method, config, scorer, info)
    else:
        replay = choose is not None
        selecting = (scorer is not None or replay) and len(config.dampings) > 1
        dampings = config.dampings if (scorer is not None or replay) else (config.damping,)
        if replay:
            if choose not in dampings:
                raise ValueError(f"damping {choose:g} is not a candidate of projection.dampings {dampings}")
            dampings = dampings[: dampings.index(choose) + 1]
        scale = fsum.trace() / stats.dim
        r = fsum.matvec(wbar) - stats.b if method is not ProjectionMethod.CLOSED_FORM else None
        best: tuple[Score | None, torch.Tensor, float, _Solve | None, int] = (None, wbar, dampings[0], None, 0)
        previous: torch.Tensor | None = None
        for damping in dampings:
            lam, floored = damping * scale, 0
            if math.isinf(lam):
                w, solve = wbar, None
            elif method is ProjectionMethod.CLOSED_FORM:
                (w, floored), solve = _closed_form(stats, wbar, lam, config), None
            else:
                assert r is not None  # computed for every method but the closed form
                if method is ProjectionMethod.CG_F:
                    x0 = (
                        previous
                        if selecting
                        else (
                            warm
                            if (warm is not None and lam > 0 and config.warm_start and warm.shape == r.shape)
                            else None
                        )
                    )
                    solve = _solve_cg_f(stats, r, lam, config, x0)
                    info.method = (
                        "cg_f"
                        + ("+warm" if x0 is not None and not selecting else "")
                        + ("+pcg" if solve.preconditioned else "")
                    )
                else:
                    solve = _solve_cg_f2(stats, r, lam, config)
                previous = solve.x
                info.products += solve.products
                w = wbar - solve.x
            score = scorer(w.float()) if scorer is not None and not replay else None
            if selecting and not replay:
                assert score is not None  # selecting needs a scorer
                info.candidates.append(
                    {
                        "damping": damping,
                        "iterations": solve.iterations if solve else 0,
                        "residual": solve.residual if solve else 0.0,
                        "stop_reason": solve.stop_reason if solve else "closed_form",
                        "val_accuracy": score[0],
                        "val_loss": score[1],
                    }
                )
            if replay or not selecting or _better(cast(Score, score), best[0]):  # selecting: scored
                best = (score, w, damping, solve, floored)
        info.validation, w, info.damping, solve, info.floored = best
        if solve is not None:
            info.iterations, info.residual, info.stop_reason = solve.iterations, solve.residual, solve.stop_reason
        for c in info.candidates:
            if c["stop_reason"] in STOPPED_SHORT:
                _warn(method, c["damping"], c["residual"], c["iterations"], config.tol)
        if not info.candidates and info.stop_reason != "converged":
            _warn(method, info.damping, info.residual, info.iterations, config.tol)
    info.converged = info.stop_reason in ("converged", "validation") and not any(
        c["stop_reason"] in STOPPED_SHORT for c in info.candidates
    )
    bnorm = _norm(stats.b)
    info.constraint_residual = _norm(fsum.matvec(w) - stats.b) / bnorm if bnorm else 0.0
    info.seconds = time.perf_counter() - t0
    return w.float(), info


def _warn(method: ProjectionMethod, damping: float, residual: float, iterations: int, tol: float) -> None:
    warnings.warn(
        f"projection {method.value} (damping {damping:g}) stopped at relative residual {residual:.2e} "
        f"after {iterations} iterations, above its tolerance {tol:.0e}",
        SolveWarning,
        stacklevel=3,
    )


__all__ = [
    "DEFAULT_DAMPINGS",
    "FAST_TOL",
    "SOLVER_VERSION",
    "STOPPED_SHORT",
    "ProjectionConfig",
    "ProjectionMethod",
    "Score",
    "Scorer",
    "SolveInfo",
    "SolveWarning",
    "project",
]
