"""The Fisher interface: one client's Fisher (:class:`FisherRep`) and the coordinator's sum
over the subset's members (:class:`FisherSum`).

All representations work on the flat parameter vector of a model (``models.flat_params``
order) and compute in float64, so that adding and later subtracting a contribution returns
the statistics to what a fresh fit would give, to float tolerance.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Generic, TypeVar

import torch

if TYPE_CHECKING:
    from typing import Self  # Python 3.11; annotations only (the package supports 3.10)


class FisherKind(str, Enum):
    """Which curvature representation clients compute and upload."""

    NONE = "none"  # no curvature: fusion is the plain mean (one-shot FedAvg)
    DIAGONAL = "diagonal"
    KFAC = "kfac"
    FULL = "full"


class FisherLabels(str, Enum):
    """Which labels the true Fisher averages over at each input.

    ``sampled``: one label drawn from the model's predictive distribution, an unbiased estimate
    at the cost of one backward pass a batch. ``expected``: every class, weighted by its
    predicted probability, the exact expectation (as nngeometry's ``FIM``, which FedFisher's
    code calls, computes it) at C cotangents a batch, sent through one batched backward pass.
    A confident local model puts nearly all its mass on one class, so a drawn label rarely lands
    where its curvature is; the expectation counts every class at its weight."""

    SAMPLED = "sampled"
    EXPECTED = "expected"


class Preconditioner(str, Enum):
    """How a K-FAC sum approximates the inverse of a layer's ``F_bb + damping I`` for CG.

    Both work in the eigenbases ``Qa`` of ``mean_i(A_i)`` and ``Qg`` of ``sum_i(w_i G_i)`` and
    differ in the curvature they divide by there (measured in bench/RESULTS.md: the Kronecker
    one needs fewer iterations on the MNIST CNN, so it is the default)."""

    KRONECKER = "kronecker"  # the products of the two factors' eigenvalues (exact for one shared A)
    EIGEN_DIAGONAL = "eigen_diagonal"  # the exact diagonal of F in that basis (EKFAC-style)


@dataclass(frozen=True)
class RotatedBlock:
    """One block's fast system in the orthonormal basis ``R`` where its preconditioner is
    diagonal: preconditioned CG on ``F_bb + damping I`` is, in exact arithmetic, CG on
    ``R^T F_bb R + damping I`` preconditioned by a division, so a solver that works in that basis
    pays no preconditioner products on any iteration (only ``rotate`` the right-hand side and
    ``unrotate`` the solution, once each).

    ``matvec`` multiplies in float32 and returns float64 (a fast product; the solver's float64
    finish still runs in the original basis); ``denom`` is the preconditioner's curvature plus the
    damping, one float64 entry per coordinate of the basis."""

    rotate: Callable[[torch.Tensor], torch.Tensor]  # v -> R^T v
    unrotate: Callable[[torch.Tensor], torch.Tensor]  # y -> R y
    matvec: Callable[[torch.Tensor], torch.Tensor]  # y -> R^T F_bb R y
    denom: torch.Tensor


class FisherRep(ABC):
    """One client's Fisher, evaluated at its trained weights with labels drawn from the model."""

    kind: FisherKind

    @property
    @abstractmethod
    def dim(self) -> int:
        """Number of model parameters it acts on."""

    @abstractmethod
    def matvec(self, v: torch.Tensor) -> torch.Tensor:
        """``F @ v`` for a flat float64 vector ``v``."""

    @abstractmethod
    def tensors(self) -> dict[str, torch.Tensor]:
        """The tensors that are uploaded (their safetensors form is what the channel carries)."""

    def check_finite(self, client: Hashable) -> None:
        """Raise if any uploaded value is NaN or infinite (names the client and tensor)."""
        from ..errors import InvalidContributionError

        for name, t in self.tensors().items():
            if not torch.isfinite(t).all():
                raise InvalidContributionError(f"client {client!r}: Fisher tensor {name!r} has NaN/Inf", client=client)

    def cast(self, dtype: torch.dtype) -> Self:
        """The same representation stored in ``dtype`` (the upload precision: a float16 upload is
        two bytes a value on the wire, and the coordinator computes with exactly those values)."""
        return self.from_tensors({k: t.to(dtype) for k, t in self.tensors().items()}, self)

    def compress(self, rank: int | None) -> FisherRep:
        """The low-rank upload of rank ``rank`` (K-FAC only; None returns the representation)."""
        if rank is None:
            return self
        raise ValueError(f"a low-rank upload (rank {rank}) applies to K-FAC factors, not to a {self.kind.value} Fisher")

    @classmethod
    @abstractmethod
    def from_tensors(cls, tensors: dict[str, torch.Tensor], like: FisherRep) -> Self:
        """Rebuild from uploaded tensors, taking the layout from ``like``."""


RepT = TypeVar("RepT", bound=FisherRep)


class FisherSum(ABC, Generic[RepT]):
    """The weighted sum of the members' Fishers, ``sum_i w_i F_i``, with exact add/remove of one
    member (``w_i`` is the member's aggregation weight, e.g. its sample count).

    A sum may split into independent diagonal blocks (K-FAC: one per layer); solvers then work
    block by block (:meth:`blocks`, :meth:`block_matvec`, :meth:`block_preconditioner`).
    """

    @abstractmethod
    def add(self, member: Hashable, rep: RepT, weight: float = 1.0) -> None: ...

    @abstractmethod
    def remove(self, member: Hashable, rep: RepT | None, weight: float = 1.0) -> None:
        """Subtract ``member``'s weighted Fisher (``rep`` is its re-uploaded Fisher when the sum
        keeps no per-member copy)."""

    @abstractmethod
    def matvec(self, v: torch.Tensor) -> torch.Tensor: ...

    @abstractmethod
    def state_tensors(self) -> dict[str, torch.Tensor]:
        """The persistent state the coordinator keeps (for checkpoints and its byte count)."""

    @abstractmethod
    def trace(self) -> float:
        """``tr(F)``: sets the scale of the relative damping of the projection."""

    def blocks(self, dim: int) -> list[slice]:
        """Index ranges of independent diagonal blocks of the sum (default: one block)."""
        return [slice(0, dim)]

    def block_matvec(self, block: int, v: torch.Tensor, fast: bool = False) -> torch.Tensor:
        """``F_bb @ v`` for block ``block`` (``fast``: float32 products where the sum supports
        them, returned in float64; the default block is the whole vector)."""
        return self.matvec(v)

    def block_preconditioner(self, block: int, damping: float, kind: Preconditioner = Preconditioner.KRONECKER):
        """An approximate inverse of ``F_bb + damping I`` of the given ``kind`` for preconditioned
        CG, or None where the sum has none."""
        return

    def block_rotated(
        self,
        block: int,
        damping: float,
        kind: Preconditioner = Preconditioner.KRONECKER,
        device: torch.device | None = None,
    ) -> RotatedBlock | None:
        """The block's fast products in the eigenbasis of its ``kind`` preconditioner
        (:class:`RotatedBlock`), computed on ``device`` (None: the CPU; vectors stay on the CPU),
        or None where the sum has no such basis."""
        return None

    def diagonal(self) -> torch.Tensor | None:
        """The summed diagonal when the sum is diagonal (enables the closed-form projection)."""
        return None

    @property
    def keeps_members(self) -> bool:
        """Whether the sum keeps each member's Fisher (then removal needs no re-upload)."""
        return False
