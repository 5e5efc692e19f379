"""K-FAC: per layer, ``F_l ~ G_l (x) A_l`` with ``A = E[a a^T]`` over inputs (patches for
convolutions, averaged over positions) and ``G = E[sum_positions g g^T]`` over output
gradients (the "expand" convention). With the weight flattened row-major as (out, in),
``F_l vec(V) = vec(G V A)``.

A sum of Kronecker products is not a Kronecker product, so the coordinator keeps each
member's factors (:class:`KFACSum`); its state is bounded by the subset size P, not by how
many clients ever took part, and no dense d x d matrix is ever formed.
"""

from __future__ import annotations

from typing import Hashable

import torch
from torch import nn

from .base import FisherKind, FisherRep, FisherSum
from .capture import LayerSpec, iterate_layer_batches, layer_specs


def _pack(m: torch.Tensor) -> torch.Tensor:
    i, j = torch.triu_indices(m.shape[0], m.shape[0])
    return m[i, j]


def _unpack(v: torch.Tensor, n: int) -> torch.Tensor:
    i, j = torch.triu_indices(n, n)
    m = torch.zeros(n, n, dtype=v.dtype)
    m[i, j] = v
    m[j, i] = v
    return m


class KFACFisher(FisherRep):
    kind = FisherKind.KFAC

    def __init__(self, specs: list[LayerSpec], factors: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        self.specs = specs
        self.factors = factors  # per layer (A: in x in, G: out x out)

    @property
    def dim(self) -> int:
        return sum(s.size for s in self.specs)

    def matvec(self, v: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(v)
        for s, (a, g) in zip(self.specs, self.factors):
            block = v[s.offset : s.offset + s.size].view(s.out_features, s.in_features)
            out[s.offset : s.offset + s.size] = (g.to(v.dtype) @ block @ a.to(v.dtype)).reshape(-1)
        return out

    def tensors(self) -> dict[str, torch.Tensor]:
        """Upper triangles of the symmetric factors (what a client uploads)."""
        t = {}
        for s, (a, g) in zip(self.specs, self.factors):
            t[f"{s.name}.A"] = _pack(a)
            t[f"{s.name}.G"] = _pack(g)
        return t

    @classmethod
    def from_tensors(cls, tensors: dict[str, torch.Tensor], like: FisherRep) -> "KFACFisher":
        return cls(like.specs, [
            (_unpack(tensors[f"{s.name}.A"], s.in_features), _unpack(tensors[f"{s.name}.G"], s.out_features))
            for s in like.specs
        ])

    @classmethod
    def compute(cls, model: nn.Module, x: torch.Tensor, batch_size: int, generator: torch.Generator) -> "KFACFisher":
        specs = layer_specs(model)
        acc = [
            (torch.zeros(s.in_features, s.in_features, dtype=torch.float64),
             torch.zeros(s.out_features, s.out_features, dtype=torch.float64))
            for s in specs
        ]
        positions = [1] * len(specs)
        for layers in iterate_layer_batches(model, x, batch_size, generator):
            for i, lb in enumerate(layers):
                a, g = lb.a.double(), lb.g.double()
                positions[i] = a.shape[-1]
                acc[i][0].add_(torch.einsum("nil,njl->ij", a, a))
                acc[i][1].add_(torch.einsum("nol,npl->op", g, g))
        n = x.shape[0]
        factors = [((a / (n * pos)).float(), (g / n).float()) for (a, g), pos in zip(acc, positions)]
        return cls(specs, factors)


class KFACSum(FisherSum):
    """Per-member K-FAC factors; ``matvec`` sums the members' Kronecker products layer by
    layer with batched matrix products."""

    def __init__(self, specs: list[LayerSpec]) -> None:
        self.specs = specs
        self.members: dict[Hashable, KFACFisher] = {}
        self._stacked: list[tuple[torch.Tensor, torch.Tensor]] | None = None

    @property
    def keeps_members(self) -> bool:
        return True

    def add(self, member: Hashable, rep: FisherRep) -> None:
        if member in self.members:
            raise ValueError(f"client {member!r} is already in the K-FAC sum")
        self.members[member] = rep
        self._stacked = None

    def remove(self, member: Hashable, rep: FisherRep | None) -> None:
        if member not in self.members:
            raise KeyError(f"client {member!r} is not in the K-FAC sum")
        del self.members[member]
        self._stacked = None

    def _stack(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        if self._stacked is None:
            reps = [self.members[k] for k in sorted(self.members, key=lambda c: (type(c).__name__, c))]
            self._stacked = [
                (torch.stack([r.factors[i][0] for r in reps]).double(),
                 torch.stack([r.factors[i][1] for r in reps]).double())
                for i in range(len(self.specs))
            ] if reps else []
        return self._stacked

    def matvec(self, v: torch.Tensor) -> torch.Tensor:
        if not self.members:
            return torch.zeros_like(v)
        out = torch.empty_like(v)
        for s, (a, g) in zip(self.specs, self._stack()):
            block = v[s.offset : s.offset + s.size].view(1, s.out_features, s.in_features).to(a.dtype)
            out[s.offset : s.offset + s.size] = torch.matmul(torch.matmul(g, block), a).sum(0).reshape(-1)
        return out

    def preconditioner(self, damping: float):
        """Inverse of ``F~ + damping I`` with ``F~ = mean_i(A_i) (x) sum_i(G_i)`` per layer (exact
        when all members share their A factor), applied through the factors' eigenbases."""
        if not self.members:
            return None
        bases = []
        for a, g in self._stack():
            ea, qa = torch.linalg.eigh(a.mean(0))
            eg, qg = torch.linalg.eigh(g.sum(0))
            denom = eg.clamp_min(0).unsqueeze(1) * ea.clamp_min(0).unsqueeze(0) + damping
            bases.append((qa, qg, denom))

        def apply(v: torch.Tensor) -> torch.Tensor:
            out = torch.empty_like(v)
            for s, (qa, qg, denom) in zip(self.specs, bases):
                block = v[s.offset : s.offset + s.size].view(s.out_features, s.in_features)
                out[s.offset : s.offset + s.size] = (qg @ ((qg.T @ block @ qa) / denom) @ qa.T).reshape(-1)
            return out

        return apply

    def trace(self) -> float:
        return float(sum(
            torch.diagonal(a, dim1=-2, dim2=-1).sum(-1) @ torch.diagonal(g, dim1=-2, dim2=-1).sum(-1)
            for a, g in self._stack()
        )) if self.members else 0.0

    def state_tensors(self) -> dict[str, torch.Tensor]:
        t = {}
        for k, (member, rep) in enumerate(sorted(self.members.items(), key=lambda kv: repr(kv[0]))):
            for name, tensor in rep.tensors().items():  # packed upper triangles
                t[f"fisher_sum.{k}.{name}"] = tensor
        return t
