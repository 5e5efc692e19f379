"""K-FAC: per layer, ``F_l ~ G_l (x) A_l`` with ``A = E[a a^T]`` over inputs (patches for
convolutions, averaged over positions) and ``G = E[sum_positions g g^T]`` over output
gradients (the "expand" convention). With the weight flattened row-major as (out, in),
``F_l vec(V) = vec(G V A)``.

A sum of Kronecker products is not a Kronecker product, so the coordinator keeps each
member's factors (:class:`KFACSum`); its state is bounded by the subset size P, not by how
many clients ever took part, and no dense d x d matrix is ever formed.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, fields, replace
from typing import cast

import torch
from torch import nn

from .base import FisherKind, FisherLabels, FisherRep, FisherSum, Preconditioner, RotatedBlock
from .capture import LayerSpec, iterate_layer_batches, layer_specs
from .kfac_factors import (
    NARROW_RANGE,
    balanced,
    from_low_rank,
    gram,
    low_rank_factors,
    low_rank_pays,
    pack,
    psd,
    symmetric,
    symmetric_batch,
    unpack,
)


class KFACFisher(FisherRep):
    """Per layer the factors ``(A, G)``; uploaded as packed upper triangles, or, after
    :meth:`compress`, each large factor as its top-r eigenpairs plus the mean of its remaining
    eigenvalues (seed 000 compresses its K-FAC uploads this way, Table VII). The factors the
    coordinator computes with are rebuilt from exactly what was uploaded, so they are a
    deterministic function of the upload and edits stay exact."""

    kind = FisherKind.KFAC

    def __init__(
        self,
        specs: list[LayerSpec],
        factors: list[tuple[torch.Tensor, torch.Tensor]],
        upload: dict[str, torch.Tensor] | None = None,
    ) -> None:
        self.specs = specs
        self.factors = factors  # per layer (A: in x in, G: out x out)
        self._upload = upload  # the compressed upload the factors were rebuilt from, if any

    @property
    def dim(self) -> int:
        return sum(s.size for s in self.specs)

    def matvec(self, v: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(v)
        for s, (a, g) in zip(self.specs, self.factors, strict=True):
            block = v[s.offset : s.offset + s.size].view(s.out_features, s.in_features)
            out[s.offset : s.offset + s.size] = (g.to(v.dtype) @ block @ a.to(v.dtype)).reshape(-1)
        return out

    def tensors(self) -> dict[str, torch.Tensor]:
        """What a client uploads: upper triangles of the symmetric factors, or the low-rank form."""
        if self._upload is not None:
            return dict(self._upload)
        t = {}
        for s, (a, g) in zip(self.specs, self.factors, strict=True):
            t[f"{s.name}.A"] = pack(a)
            t[f"{s.name}.G"] = pack(g)
        return t

    def cast(self, dtype: torch.dtype) -> KFACFisher:
        """The factors stored in ``dtype``; for a float16 upload each layer's pair is first
        balanced by a power of two (:func:`balanced`), which leaves ``G (x) A`` unchanged."""
        if dtype in NARROW_RANGE and self._upload is None:
            return KFACFisher(self.specs, [balanced(a, g) for a, g in self.factors]).cast_as_is(dtype)
        return self.cast_as_is(dtype)

    def cast_as_is(self, dtype: torch.dtype) -> KFACFisher:
        """Every uploaded tensor converted to ``dtype``, nothing rescaled."""
        return super().cast(dtype)

    @classmethod
    def from_tensors(cls, tensors: dict[str, torch.Tensor], like: FisherRep) -> KFACFisher:
        def factor(key: str, n: int) -> torch.Tensor:
            if key in tensors:
                return unpack(tensors[key], n)
            return from_low_rank(tensors[f"{key}.U"], tensors[f"{key}.s"], tensors[f"{key}.tail"])

        compressed = any(k.endswith(".U") for k in tensors)
        specs = cast(KFACFisher, like).specs  # the layout comes from a K-FAC Fisher
        return cls(
            specs,
            [(factor(f"{s.name}.A", s.in_features), factor(f"{s.name}.G", s.out_features)) for s in specs],
            upload=dict(tensors) if compressed else None,
        )

    def compress(self, rank: int | None) -> KFACFisher:
        """The low-rank upload of rank ``rank`` (None: unchanged). A factor is sent as its top-r
        eigenpairs and the mean of its other eigenvalues where that is fewer numbers than its
        triangle; smaller factors go whole. The result computes with the rebuilt factors."""
        if rank is None:
            return self
        if rank < 1:
            raise ValueError(f"K-FAC upload rank must be >= 1, got {rank}")
        t: dict[str, torch.Tensor] = {}
        for s, pair in zip(self.specs, self.factors, strict=True):
            for name, m in zip(("A", "G"), pair, strict=True):
                key = f"{s.name}.{name}"
                if low_rank_pays(m.shape[0], rank):
                    dtype = m.dtype
                    t.update({f"{key}.{k}": v.to(dtype) for k, v in low_rank_factors(m, rank).items()})
                else:
                    t[key] = pack(m)
        return KFACFisher.from_tensors(t, self)

    def psd(self) -> KFACFisher:
        """The same factors made positive semidefinite (float64).

        Factors are PSD by construction, but an upload in float16 (or float32 rounding of a
        rank-deficient factor) can carry negative eigenvalues, and ``A (x) G`` with one negative
        eigenvalue in A and a large one in G is a direction of negative curvature that no small
        damping covers: CG then stops early. A factor that fails a Cholesky test has its negative
        eigenvalues set to zero; a deterministic function of the upload, so edits stay exact.

        A low-rank upload stays the repaired Fisher's upload: its form ``U diag(s) U^T + t (I -
        U U^T)`` is PSD exactly (``s, t >= 0``), only the float32 rebuild can dip below zero
        (where ``t`` is tiny), so float32 products may still go through it (:class:`KFACSum`)."""
        fixed = [tuple(psd(m) for m in pair) for pair in self.factors]
        if all(f is None for pair in fixed for f in pair):
            return self
        return KFACFisher(
            self.specs,
            [
                cast(
                    tuple[torch.Tensor, torch.Tensor],
                    tuple(m if f is None else f for m, f in zip(pair, fpair, strict=True)),
                )
                for pair, fpair in zip(self.factors, fixed, strict=True)
            ],
            upload=self._upload,
        )

    @classmethod
    def compute(
        cls,
        model: nn.Module,
        x: torch.Tensor,
        batch_size: int,
        generator: torch.Generator,
        labels: FisherLabels | str = FisherLabels.EXPECTED,
    ) -> KFACFisher:
        specs = layer_specs(model)
        acc = [
            (
                torch.zeros(s.in_features, s.in_features, dtype=torch.float64, device=x.device),
                torch.zeros(s.out_features, s.out_features, dtype=torch.float64, device=x.device),
            )
            for s in specs
        ]
        positions = [1] * len(specs)
        for layers in iterate_layer_batches(model, x, batch_size, generator, labels):
            for i, lb in enumerate(layers):
                a, g = lb.a, lb.g  # per-batch contractions in the model's dtype, running sums in float64
                positions[i] = a.shape[-1]
                acc[i][0].add_(gram(a.transpose(0, 1).reshape(a.shape[1], -1)).double())
                acc[i][1].add_(gram(g.permute(2, 0, 1, 3).reshape(g.shape[2], -1)).double())
        n = x.shape[0]
        factors = [
            (symmetric(a / (n * pos)).float().cpu(), symmetric(g / n).float().cpu())
            for (a, g), pos in zip(acc, positions, strict=True)
        ]
        return cls(specs, factors)


@dataclass(frozen=True)
class _LowRankLayer:
    """One layer whose A and G factors every member uploaded in low rank (``train.fisher_rank``),
    for float32 products: ``A_i = ta_i I + Ua_i diag(da_i) Ua_i^T`` and ``w_i G_i = tg_i I + Ug_i
    diag(dg_i) Ug_i^T`` (``d = s - tail``, the weight folded into G's terms), the members' bases
    also side by side (``ua_cat``: in x members*r, ``ug_cat``: out x members*r; the A bases are
    only needed that way)."""

    ug: torch.Tensor  # (members, out, r)
    da: torch.Tensor  # (members, r)
    dg: torch.Tensor  # (members, r)
    ta: torch.Tensor  # (members,)
    tg: torch.Tensor  # (members,)
    ua_cat: torch.Tensor
    ug_cat: torch.Tensor

    def times(self, v: torch.Tensor) -> torch.Tensor:
        """``sum_i w_i G_i V A_i`` for ``v`` (out x in, float32), as four products of the stacked
        bases (``4 r`` multiplications per entry and member against ``in + out`` through the
        rebuilt factors; no per-member out x in intermediate):
        ``G V A = tg ta V + ta Ug Dg (Ug^T V) + (tg P + Ug Dg (Ug^T P)) Ua^T`` with ``P = V Ua Da``."""
        m, r = self.da.shape
        out, n_in = v.shape
        p = (v @ self.ua_cat).view(out, m, r) * self.da  # P_i, side by side
        q = (self.ug_cat.T @ v).view(m, r, n_in)  # Ug_i^T V
        total = (self.ug_cat @ ((self.dg * self.ta.view(m, 1)).view(m, r, 1) * q).view(m * r, n_in)).add_(
            v, alpha=float((self.tg * self.ta).sum())
        )
        p_m = p.transpose(0, 1)  # (m, out, r)
        inner = torch.matmul(self.ug, self.dg.view(m, r, 1) * torch.matmul(self.ug.transpose(1, 2), p_m))
        left = (p_m * self.tg.view(m, 1, 1) + inner).transpose(0, 1).reshape(out, m * r)
        return total.add_(left @ self.ua_cat.T)

    def rotated(self, qa: torch.Tensor, qg: torch.Tensor) -> _LowRankLayer:
        """The same factors in the bases ``qa`` (in x in) and ``qg`` (out x out), orthonormal:
        ``Qa^T A_i Qa`` keeps the tail and the spectrum, with the members' bases rotated."""
        m, out, r = self.ug.shape
        ug = torch.matmul(qg.T, self.ug)
        return replace(
            self,
            ug=ug,
            ua_cat=(qa.T @ self.ua_cat).contiguous(),
            ug_cat=ug.permute(1, 0, 2).reshape(out, m * r).contiguous(),
        )

    def to(self, device: torch.device) -> _LowRankLayer:
        """The same factors on ``device``."""
        return replace(self, **{f.name: getattr(self, f.name).to(device) for f in fields(self)})


def _low_rank_layer(reps: list[KFACFisher], spec: LayerSpec, weights: torch.Tensor) -> _LowRankLayer | None:
    """The layer's factors in the members' low-rank upload form (float32), where every member
    uploaded both so at one rank and that form multiplies in fewer operations (``4 r < in + out``);
    None otherwise (the rebuilt factors are used)."""
    keys = (f"{spec.name}.A", f"{spec.name}.G")
    maybe_uploads = [rep._upload for rep in reps]
    if not maybe_uploads or not all(u is not None and all(f"{k}.U" in u for k in keys) for u in maybe_uploads):
        return None
    uploads = cast(list[dict[str, torch.Tensor]], maybe_uploads)  # every one present (checked above)
    ranks = {u[f"{k}.U"].shape[1] for u in uploads for k in keys}
    if len(ranks) != 1 or 4 * next(iter(ranks)) >= spec.in_features + spec.out_features:
        return None

    def side(key: str, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        u = torch.stack([up[f"{key}.U"] for up in uploads]).float()
        s = torch.stack([up[f"{key}.s"] for up in uploads]).double()
        t = torch.stack([up[f"{key}.tail"] for up in uploads]).double()  # (members, 1)
        return u, ((s - t) * w.view(-1, 1)).float(), (t.view(-1) * w).float()

    ua, da, ta = side(keys[0], torch.ones_like(weights))
    ug, dg, tg = side(keys[1], weights)
    m, r = da.shape
    return _LowRankLayer(
        ug,
        da,
        dg,
        ta,
        tg,
        ua.permute(1, 0, 2).reshape(spec.in_features, m * r).contiguous(),
        ug.permute(1, 0, 2).reshape(spec.out_features, m * r).contiguous(),
    )


def _times(
    factors: tuple[torch.Tensor, torch.Tensor] | _LowRankLayer, v: torch.Tensor, spec: LayerSpec
) -> torch.Tensor:
    """``sum_i w_i G_i V A_i`` for the flat ``v`` in the factors' precision, summed over members
    in float64 (flat float64; a float32 sum is 6 % faster a product but cost the solve more float64
    finishing work than it saved, bench/RESULTS.md)."""
    if isinstance(factors, _LowRankLayer):
        m = v.view(spec.out_features, spec.in_features).to(device=factors.da.device, dtype=torch.float32)
        return factors.times(m).to(device=v.device, dtype=torch.float64).reshape(-1)
    a, g = factors
    m = v.view(1, spec.out_features, spec.in_features).to(device=a.device, dtype=a.dtype)
    return torch.matmul(torch.matmul(g, m), a).sum(0, dtype=torch.float64).to(v.device).reshape(-1)


class KFACSum(FisherSum[KFACFisher]):
    """Per-member K-FAC factors and weights; ``matvec`` sums the members' weighted Kronecker
    products layer by layer with batched matrix products.

    The sum is block-diagonal by layer, so solvers treat each layer on its own
    (:meth:`blocks`). ``block_matvec(..., fast=True)`` multiplies in float32 (the uploaded
    factors are float32 already) and sums the members in float64: about twice as fast, with
    a relative error near float32's epsilon, which a solver removes by finishing in float64.
    Where every member uploaded a layer's factors in low rank (``train.fisher_rank``), the
    float32 products go through that form instead of the rebuilt factors (3.3-3.5x for the
    CNN's fc1 at rank 128, bench/kfac_low_rank.py); the float64 products, the solver's final word, keep the rebuilt ones.
    :meth:`block_rotated` gives the float32 products in the preconditioner's eigenbasis, where
    the preconditioner is a division: a solver's fast phase then pays no preconditioner products.
    """

    def __init__(self, specs: list[LayerSpec]) -> None:
        self.specs = specs
        self.members: dict[Hashable, KFACFisher] = {}
        self.weights: dict[Hashable, float] = {}
        self._stacked: list[tuple[torch.Tensor, torch.Tensor]] | None = None
        self._stacked32: list[tuple[torch.Tensor, torch.Tensor] | _LowRankLayer] | None = None
        self._eig: dict[int, tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]] = {}
        self._eig_diag: dict[int, torch.Tensor] = {}
        self._rotated: dict[tuple[int, str], tuple[torch.Tensor, torch.Tensor] | _LowRankLayer] = {}

    @property
    def keeps_members(self) -> bool:
        return True

    def add(self, member: Hashable, rep: KFACFisher, weight: float = 1.0) -> None:
        if member in self.members:
            raise ValueError(f"client {member!r} is already in the K-FAC sum")
        self.members[member] = rep.psd()
        self.weights[member] = float(weight)
        self._invalidate()

    def remove(self, member: Hashable, rep: KFACFisher | None, weight: float = 1.0) -> None:
        if member not in self.members:
            raise KeyError(f"client {member!r} is not in the K-FAC sum")
        del self.members[member]
        del self.weights[member]
        self._invalidate()

    def _invalidate(self) -> None:
        self._stacked = self._stacked32 = None
        self._eig = {}
        self._eig_diag = {}
        self._rotated = {}

    def _order(self) -> list[Hashable]:
        return sorted(self.members, key=lambda c: (type(c).__name__, c))

    def _stack(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer, the members' A factors and weighted G factors (float64), stacked."""
        if self._stacked is None:
            order = self._order()
            w = torch.tensor([self.weights[k] for k in order], dtype=torch.float64).view(-1, 1, 1)
            reps = [self.members[k] for k in order]
            self._stacked = (
                [
                    (
                        torch.stack([r.factors[i][0] for r in reps]).double(),
                        torch.stack([r.factors[i][1] for r in reps]).double() * w,
                    )
                    for i in range(len(self.specs))
                ]
                if reps
                else []
            )
        return self._stacked

    def _stack32(self) -> list[tuple[torch.Tensor, torch.Tensor] | _LowRankLayer]:
        """Per layer, what the float32 products multiply by: the stacked factors, or the members'
        low-rank uploads where every member sent the layer so (:func:`_low_rank_layer`)."""
        if self._stacked32 is None:
            order = self._order()
            reps = [self.members[k] for k in order]
            w = torch.tensor([self.weights[k] for k in order], dtype=torch.float64)
            self._stacked32 = [
                _low_rank_layer(reps, s, w) or (a.float(), g.float())
                for s, (a, g) in zip(self.specs, self._stack(), strict=True)
            ]
        return self._stacked32

    def matvec(self, v: torch.Tensor) -> torch.Tensor:
        if not self.members:
            return torch.zeros_like(v)
        out = torch.empty_like(v)
        for i, s in enumerate(self.specs):
            out[s.offset : s.offset + s.size] = self.block_matvec(i, v[s.offset : s.offset + s.size])
        return out

    def blocks(self, dim: int) -> list[slice]:
        return [slice(s.offset, s.offset + s.size) for s in self.specs]

    def block_matvec(self, block: int, v: torch.Tensor, fast: bool = False) -> torch.Tensor:
        s = self.specs[block]
        if not self.members:
            return torch.zeros_like(v)
        return _times((self._stack32() if fast else self._stack())[block], v, s)

    def _eigenbasis(self, block: int):
        """Eigen-decompositions of mean_i(A_i) and sum_i(w_i G_i) for ``block`` (cached)."""
        if block not in self._eig:
            a, g = self._stack()[block]
            ea, qa = torch.linalg.eigh(a.mean(0))
            eg, qg = torch.linalg.eigh(g.sum(0))
            self._eig[block] = (qa, qg, ea.clamp_min(0), eg.clamp_min(0))
        return self._eig[block]

    def _eigen_diagonal(self, block: int) -> torch.Tensor:
        """The diagonal of the layer's ``F = sum_i A_i (x) w_i G_i`` in the eigenbasis of
        :meth:`_eigenbasis`, as an (out, in) matrix (cached):
        ``d[k, j] = sum_i (qg_k^T w_i G_i qg_k) (qa_j^T A_i qa_j)``.

        Computed in float32 (the factors' upload precision): it only steers CG, which stops on
        the true residual, so its rounding changes iteration counts, not the solution."""
        if block not in self._eig_diag:
            a, g = (f.float() for f in self._stack()[block])
            qa, qg, _, _ = self._eigenbasis(block)
            qa32, qg32 = qa.float(), qg.float()
            da = (torch.matmul(a, qa32) * qa32).sum(-2, dtype=torch.float64)  # (members, in): q_j^T A_i q_j
            dg = (torch.matmul(g, qg32) * qg32).sum(-2, dtype=torch.float64)  # (members, out)
            self._eig_diag[block] = (dg.T @ da).clamp_min(0)
        return self._eig_diag[block]

    def block_preconditioner(self, block: int, damping: float, kind: Preconditioner = Preconditioner.KRONECKER):
        """Inverse of ``D + damping I`` in the eigenbases of ``mean_i(A_i)`` and ``sum_i(w_i G_i)``
        for the layer. ``kronecker``: ``D`` is the product of those factors' eigenvalues, i.e.
        ``F~ = mean_i(A_i) (x) sum_i(w_i G_i)`` (exact when all members share their A factor);
        ``eigen_diagonal``: ``D`` is the exact diagonal of ``F`` in that basis, which keeps each
        member's own A factor where the Kronecker form averages them away."""
        if not self.members:
            return None
        s = self.specs[block]
        qa, qg, _, _ = self._eigenbasis(block)
        denom = self._denominator(block, damping, kind)

        def apply(v: torch.Tensor) -> torch.Tensor:
            m = v.view(s.out_features, s.in_features)
            return (qg @ ((qg.T @ m @ qa) / denom) @ qa.T).reshape(-1)

        return apply

    def _denominator(self, block: int, damping: float, kind: Preconditioner) -> torch.Tensor:
        """The preconditioner's curvature in the layer's eigenbasis plus ``damping`` (out x in)."""
        if Preconditioner(kind) is Preconditioner.EIGEN_DIAGONAL:
            return self._eigen_diagonal(block) + damping
        _, _, ea, eg = self._eigenbasis(block)
        return eg.unsqueeze(1) * ea.unsqueeze(0) + damping

    def block_rotated(
        self,
        block: int,
        damping: float,
        kind: Preconditioner = Preconditioner.KRONECKER,
        device: torch.device | None = None,
    ) -> RotatedBlock | None:
        """The layer's float32 products in the eigenbases ``Qa``, ``Qg`` of its preconditioner:
        ``V -> sum_i (Qg^T w_i G_i Qg) V (Qa^T A_i Qa)`` on ``Y = Qg^T V Qa``. The rotated factors
        are computed once in float32 on the CPU (cached per device, one more float32 rounding of the
        same size as a product's) and kept on ``device``, where the products run; vectors and their
        rotation stay on the CPU in float64."""
        if not self.members:
            return None
        s = self.specs[block]
        device = torch.device("cpu") if device is None else torch.device(device)
        qa, qg, _, _ = self._eigenbasis(block)
        if (block, str(device)) not in self._rotated:
            qa32, qg32 = qa.float(), qg.float()
            factors = self._stack32()[block]
            rotated: tuple[torch.Tensor, torch.Tensor] | _LowRankLayer
            if isinstance(factors, _LowRankLayer):
                rotated = factors.rotated(qa32, qg32).to(device)
            else:
                a, g = factors
                rotated = (
                    symmetric_batch(qa32.T @ a @ qa32).to(device),
                    symmetric_batch(qg32.T @ g @ qg32).to(device),
                )
            self._rotated[(block, str(device))] = rotated
        factors = self._rotated[(block, str(device))]

        def rotate(v: torch.Tensor) -> torch.Tensor:
            return (qg.T @ v.view(s.out_features, s.in_features) @ qa).reshape(-1)

        def unrotate(y: torch.Tensor) -> torch.Tensor:
            return (qg @ y.view(s.out_features, s.in_features) @ qa.T).reshape(-1)

        return RotatedBlock(
            rotate, unrotate, lambda y: _times(factors, y, s), self._denominator(block, damping, kind).reshape(-1)
        )

    def trace(self) -> float:
        return (
            float(
                sum(
                    (torch.diagonal(a, dim1=-2, dim2=-1).sum(-1) * torch.diagonal(g, dim1=-2, dim2=-1).sum(-1)).sum()
                    for a, g in self._stack()
                )
            )
            if self.members
            else 0.0
        )

    def state_tensors(self) -> dict[str, torch.Tensor]:
        t = {}
        for k, (member, rep) in enumerate(sorted(self.members.items(), key=lambda kv: repr(kv[0]))):
            for name, tensor in rep.tensors().items():  # packed upper triangles
                t[f"fisher_sum.{k}.{name}"] = tensor
            t[f"fisher_sum.{k}.weight"] = torch.tensor([self.weights[member]], dtype=torch.float64)
        return t
