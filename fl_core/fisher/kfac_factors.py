"""Kronecker factors as they travel and are kept: packed triangles, PSD repair, low-rank form, balancing of the two factors."""

from __future__ import annotations

import math

import torch


def pack(m: torch.Tensor) -> torch.Tensor:
    i, j = torch.triu_indices(m.shape[0], m.shape[0])
    return m[i, j]


def unpack(v: torch.Tensor, n: int) -> torch.Tensor:
    i, j = torch.triu_indices(n, n)
    m = torch.zeros(n, n, dtype=v.dtype)
    m[i, j] = v
    m[j, i] = v
    return m


def psd(m: torch.Tensor) -> torch.Tensor | None:
    """None if ``m`` passes a Cholesky test (with a jitter of 1e-9 of its largest diagonal entry),
    else ``m`` with its negative eigenvalues set to zero (computed in float64, stored float32)."""
    d = m.double()
    scale = float(torch.diagonal(d).abs().max()) if d.numel() else 0.0
    if scale == 0.0 or int(torch.linalg.cholesky_ex(d + 1e-9 * scale * torch.eye(d.shape[0], dtype=d.dtype)).info) == 0:
        return None
    e, q = torch.linalg.eigh(d)
    return ((q * e.clamp_min(0)) @ q.T).float()


def low_rank_factors(m: torch.Tensor, rank: int) -> dict[str, torch.Tensor]:
    """``m``'s top-``rank`` eigenpairs and the mean of its other eigenvalues (float64 eigh)."""
    e, q = torch.linalg.eigh(m.double())
    e = e.clamp_min(0)
    return {"U": q[:, -rank:].contiguous(), "s": e[-rank:].contiguous(), "tail": e[:-rank].mean().reshape(1)}


def from_low_rank(u: torch.Tensor, s: torch.Tensor, tail: torch.Tensor) -> torch.Tensor:
    """``U diag(s) U^T + tail (I - U U^T)``: the factor a low-rank upload stands for (float32)."""
    u, s, tail = u.double(), s.double(), tail.double()
    eye = torch.eye(u.shape[0], dtype=torch.float64)
    return symmetric((u * s) @ u.T + tail * (eye - u @ u.T)).float()


#: Upload dtypes whose exponent range is narrower than float32's: a K-FAC factor pair is balanced
#: before it is cast to one of these.
NARROW_RANGE = (torch.float16,)


def balanced(a: torch.Tensor, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(A / 2^k, G * 2^k)`` with ``2^k`` the power of two nearest ``sqrt(max|A| / max|G|)``: the
    same Kronecker product (a power-of-two scaling is exact), with both factors' largest entries
    near their geometric mean. A trained model's G entries are tiny (1e-8 to 1e-5 on MNIST, most
    below float16's smallest normal number, 6e-5) while A's are O(1-100): cast as they are, G
    underflows and the merge is ruined; balanced, both sit well inside float16's range."""
    amax, gmax = float(a.abs().max()), float(g.abs().max())
    if amax == 0.0 or gmax == 0.0:
        return a, g
    k = round(0.5 * (math.log2(amax) - math.log2(gmax)))
    return torch.ldexp(a, torch.tensor(-k)), torch.ldexp(g, torch.tensor(k))


def low_rank_pays(n: int, rank: int) -> bool:
    """Whether ``rank`` eigenpairs plus a tail value are fewer numbers than an n x n triangle."""
    return rank < n and n * rank + rank + 1 < n * (n + 1) // 2


def gram(m: torch.Tensor) -> torch.Tensor:
    """``m m^T`` (rows x columns in, rows x rows out) as one matrix product: the same contraction
    written as ``einsum("nil,njl->ij")`` (and ``"snol,snpl->op"`` for G) made a whole K-FAC capture
    of the MNIST CNN 1.5-2.1x slower on one CPU thread (bench/RESULTS.md)."""
    return m @ m.T


def symmetric(m: torch.Tensor) -> torch.Tensor:
    """``m``'s symmetric part: float32 batch products are symmetric only to rounding, uploads pack a triangle."""
    return 0.5 * (m + m.T)


def symmetric_batch(m: torch.Tensor) -> torch.Tensor:
    """The symmetric part of each matrix of a stack (members, n, n)."""
    return 0.5 * (m + m.transpose(-2, -1))
