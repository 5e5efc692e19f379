"""The F-SOSA projection: the point of ``{W : F W = b}`` closest to ``Wbar``.

It is ``W = Wbar - F^+ (F Wbar - b)``. Methods:

- ``closed_form`` (diagonal F): ``W_j = b_j / F_j`` where ``F_j > floor``, else ``Wbar_j``,
  with ``floor = curvature_floor * max_j F_j`` (default 1e-12). ``b_j / F_j`` is a
  curvature-weighted mean of the members' weights, so small curvature is harmless; only
  coordinates with no curvature at all (or denormal) keep the mean.
- ``cg_f`` (default otherwise): conjugate gradient on ``F x = F Wbar - b`` from ``x0 = 0``; the
  iterates stay in range(F), so it converges to ``F^+ r`` with the condition number of F.
  Sampled-label Fishers are singular (a softmax gradient always sums to zero) and CG on a
  singular F stalls in floating point, so by default F is damped: ``F + lambda I`` with
  ``lambda = damping * tr(F) / d`` (``damping`` = 1e-4), which makes the solve well posed and,
  for K-FAC, allows a Kronecker preconditioner. ``damping = 0`` gives the undamped system.
- ``cg_f2``: the paper's form, CG on ``F^2 L = 2 (F Wbar - b)`` and ``W = Wbar - F L / 2``
  (condition number of F squared; two products per iteration).

Every solve reports iterations, relative residual, the constraint residual and seconds.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Callable

import torch

from .stats import SufficientStatistics


class ProjectionMethod(str, Enum):
    AUTO = "auto"
    CLOSED_FORM = "closed_form"
    CG_F = "cg_f"
    CG_F2 = "cg_f2"


@dataclass(frozen=True)
class ProjectionConfig:
    method: ProjectionMethod = ProjectionMethod.AUTO
    tol: float = 1e-6  # relative residual of the CG system
    max_iter: int = 500
    curvature_floor: float = 1e-12  # relative to the largest diagonal entry (closed form)
    damping: float = 1e-4  # CG methods: adds damping * tr(F)/d * I to F (0 = undamped)
    precondition: bool = True  # cg_f with damping > 0: Kronecker preconditioner where available
    warm_start: bool = True  # edits start CG from the previous solution (damping > 0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "method", ProjectionMethod(self.method))
        if not self.tol > 0:
            raise ValueError(f"projection.tol must be > 0, got {self.tol}")
        if self.damping < 0:
            raise ValueError(f"projection.damping must be >= 0, got {self.damping}")
        if self.max_iter < 1:
            raise ValueError(f"projection.max_iter must be >= 1, got {self.max_iter}")


@dataclass
class SolveInfo:
    method: str
    iterations: int = 0
    residual: float = 0.0
    constraint_residual: float = 0.0
    converged: bool = True
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return asdict(self)


def conjugate_gradient(
    matvec: Callable[[torch.Tensor], torch.Tensor],
    rhs: torch.Tensor,
    tol: float,
    max_iter: int,
    precond: Callable[[torch.Tensor], torch.Tensor] | None = None,
    x0: torch.Tensor | None = None,
) -> tuple[torch.Tensor, int, float]:
    """CG from zero for a symmetric PSD operator; returns (x, iterations, relative residual).

    The recursive residual is used; the iterate with the smallest residual is returned, so a
    solve that stalls in floating point (singular F) never ends worse than its best point."""
    norm0 = float(torch.linalg.vector_norm(rhs))
    if norm0 == 0.0:
        return torch.zeros_like(rhs), 0, 0.0
    if x0 is None:
        x, r = torch.zeros_like(rhs), rhs.clone()
    else:
        x = x0.clone()
        r = rhs - matvec(x)
        if float(torch.linalg.vector_norm(r)) <= tol * norm0:
            return x, 0, float(torch.linalg.vector_norm(r)) / norm0
    z = precond(r) if precond else r
    p = z.clone()
    rz = float(r @ z)
    rr = float(r @ r)
    best_x, best_rr = x.clone(), rr
    it = 0
    for it in range(1, max_iter + 1):
        ap = matvec(p)
        pap = float(p @ ap)
        if pap <= 0.0:  # direction in the null space: nothing more to gain
            it -= 1
            break
        alpha = rz / pap
        x.add_(p, alpha=alpha)
        r.add_(ap, alpha=-alpha)
        rr_new = float(r @ r)
        if rr_new < best_rr:
            best_x, best_rr = x.clone(), rr_new
        if rr_new ** 0.5 <= tol * norm0:
            break
        z = precond(r) if precond else r
        rz_new = float(r @ z)
        p.mul_(rz_new / rz).add_(z)
        rz, rr = rz_new, rr_new
    return best_x, it, best_rr ** 0.5 / norm0


def project(
    stats: SufficientStatistics, config: ProjectionConfig = ProjectionConfig(), warm: torch.Tensor | None = None
) -> tuple[torch.Tensor, SolveInfo]:
    """The fused model (float32) for the current statistics, and how the solve went.

    ``warm`` is the correction ``x = Wbar - W`` of a previous solve; with damping > 0 the
    system is nonsingular and CG on F may start from it (an edit changes few members, so the
    old solution is close). The answer is the same to the solver tolerance."""
    t0 = time.perf_counter()
    wbar = stats.mean()
    fsum = stats.fisher_sum
    if fsum is None:
        return wbar.float(), SolveInfo("mean", seconds=time.perf_counter() - t0)
    method = config.method
    diag = fsum.diagonal()
    if method is ProjectionMethod.AUTO:
        method = ProjectionMethod.CLOSED_FORM if diag is not None else ProjectionMethod.CG_F
    info = SolveInfo(method.value)
    if method is ProjectionMethod.CLOSED_FORM:
        if diag is None:
            raise ValueError("the closed-form projection needs a diagonal Fisher")
        floor = config.curvature_floor * float(diag.max()) if diag.numel() else 0.0
        ok = diag > floor
        w = wbar.clone()
        w[ok] = stats.b[ok] / diag[ok]
    else:
        r = fsum.matvec(wbar) - stats.b
        lam_d = config.damping * fsum.trace() / stats.dim

        def op(v: torch.Tensor) -> torch.Tensor:
            out = fsum.matvec(v)
            return out.add_(v, alpha=lam_d) if lam_d else out

        if method is ProjectionMethod.CG_F:
            pre = fsum.preconditioner(lam_d) if (config.precondition and lam_d > 0) else None
            start = warm if (warm is not None and lam_d > 0 and warm.shape == r.shape) else None
            x, info.iterations, info.residual = conjugate_gradient(op, r, config.tol, config.max_iter, pre, start)
            info.method += "+warm" if start is not None else ""
            info.method += "+pcg" if pre else ""
            w = wbar - x
        else:
            lam, info.iterations, info.residual = conjugate_gradient(
                lambda v: op(op(v)), 2.0 * r, config.tol, config.max_iter
            )
            w = wbar - 0.5 * op(lam)
        info.converged = info.residual <= config.tol
    bnorm = float(torch.linalg.vector_norm(stats.b))
    info.constraint_residual = float(torch.linalg.vector_norm(fsum.matvec(w) - stats.b)) / bnorm if bnorm else 0.0
    info.seconds = time.perf_counter() - t0
    return w.float(), info
