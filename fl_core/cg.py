"""Preconditioned conjugate gradient for a symmetric positive semi-definite operator given as a
matrix-vector product (the Fisher merges' solves, :mod:`fl_core.projection`, FedLPA)."""

from __future__ import annotations

from collections.abc import Callable

import torch


def conjugate_gradient(
    matvec: Callable[[torch.Tensor], torch.Tensor],
    rhs: torch.Tensor,
    tol: float,
    max_iter: int,
    precond: Callable[[torch.Tensor], torch.Tensor] | None = None,
    x0: torch.Tensor | None = None,
    callback: Callable[[int, torch.Tensor], None] | None = None,
) -> tuple[torch.Tensor, int, float]:
    """CG for a symmetric PSD operator; returns (x, iterations, relative residual).

    The recursive residual is used; the iterate with the smallest residual is returned, so a
    solve that stalls in floating point (singular F) never ends worse than its best point.
    ``callback(t, x_t)`` sees every iterate (``x_t`` is the live vector: copy what you keep)."""
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
        if callback is not None:
            callback(it, x)
        if rr_new < best_rr:
            best_x, best_rr = x.clone(), rr_new
        if rr_new**0.5 <= tol * norm0:
            break
        z = precond(r) if precond else r
        rz_new = float(r @ z)
        p.mul_(rz_new / rz).add_(z)
        rz, rr = rz_new, rr_new
    return best_x, it, best_rr**0.5 / norm0
