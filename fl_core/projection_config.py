"""The projection's settings and the record of one solve: methods, dampings, tolerances, :class:`SolveInfo`."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from enum import Enum

import torch

from .devices import resolve_device
from .fisher.base import Preconditioner
from .solve_stops import STOPPED_SHORT  # noqa: F401 - re-exported, as before
from .stats import Weighting


class ProjectionMethod(str, Enum):
    AUTO = "auto"
    CLOSED_FORM = "closed_form"
    CG_F = "cg_f"
    CG_F2 = "cg_f2"
    ADAM = "adam"


class SolveWarning(UserWarning):
    """A projection solve stopped before reaching its tolerance."""


#: Bumped whenever a change here makes a CG solve take a different host time per product (the
#: calibration's ``solve_s_per_unit``); part of the calibration key of every setup that solves by CG
#: (``vmc_sim.compute.calibration``), so a machine's cached costs are measured anew. 2: the float32 phase
#: runs in the preconditioner's eigenbasis.
SOLVER_VERSION = 2


#: Float32 products carry ~1e-7 relative error per product; CG on them stops at this residual at
#: the latest and the float64 finish takes the rest.
FAST_TOL = 1e-6


#: Candidate relative dampings tried when a validator is given: the weighted mean (inf) down to
#: 1e-3. Below 1e-3 the K-FAC merge of the two-layer CNN never won on MNIST and its solves take
#: several hundred iterations.
DEFAULT_DAMPINGS = (math.inf, 1.0, 0.1, 0.01, 0.001)


Score = tuple[float, float]  # (accuracy, loss) on the server's validation set


Scorer = Callable[[torch.Tensor], Score]


@dataclass(frozen=True)
class ProjectionConfig:
    method: ProjectionMethod = ProjectionMethod.AUTO
    tol: float = 1e-6  # relative residual of the CG system (per block)
    max_iter: int = 1000  # per CG solve and block (a cold K=50 K-FAC block at damping 1 needs 300-600); Adam: steps
    curvature_floor: float = 1e-12  # closed form without damping: relative to the largest entry
    damping: float = 1e-4  # fixed relative damping when no validator selects one (0 = undamped)
    dampings: tuple[float, ...] = DEFAULT_DAMPINGS  # candidates selected on the validation set
    precondition: bool = True  # cg_f with damping > 0: the block preconditioner where available
    preconditioner: Preconditioner = Preconditioner.KRONECKER  # which one (fl_core.fisher.base.Preconditioner)
    warm_start: bool = True  # without selection, edits start CG from the previous solution
    weighting: Weighting = Weighting.SAMPLES  # members' aggregation weight (fl_core.stats)
    fast_products: bool = True  # float32 K-FAC products, finished in float64
    adam_lr: float = 1e-3
    check_every: int = 100  # adam: validation checks
    iterates: tuple[int, ...] = ()  # CG iterates selected on the validation set (early stopping); empty: dampings
    device: str = "cpu"  # where a block solve's float32 products run: cpu, cuda, or auto (the GPU when present)

    def __post_init__(self) -> None:
        object.__setattr__(self, "method", ProjectionMethod(self.method))
        object.__setattr__(self, "weighting", Weighting(self.weighting))
        try:
            object.__setattr__(self, "preconditioner", Preconditioner(self.preconditioner))
        except ValueError:
            raise ValueError(
                f"projection.preconditioner must be one of {[p.value for p in Preconditioner]}, "
                f"got {self.preconditioner!r}"
            ) from None
        object.__setattr__(self, "dampings", tuple(sorted((float(d) for d in self.dampings), reverse=True)))
        if any(int(t) != t or t < 1 for t in self.iterates):
            raise ValueError(f"projection.iterates must be positive iteration counts, got {self.iterates}")
        object.__setattr__(self, "iterates", tuple(sorted({int(t) for t in self.iterates})))
        if self.iterates and self.method in (ProjectionMethod.ADAM, ProjectionMethod.CLOSED_FORM):
            raise ValueError(
                f"projection.iterates selects CG iterates: it needs method cg_f, cg_f2 or auto, not {self.method.value}"
            )
        try:
            resolve_device(self.device)
        except (RuntimeError, TypeError):
            raise ValueError(f"projection.device must be cpu, cuda (or cuda:N) or auto, got {self.device!r}") from None
        if not self.tol > 0:
            raise ValueError(f"projection.tol must be > 0, got {self.tol}")
        if self.damping < 0 or math.isnan(self.damping):
            raise ValueError(f"projection.damping must be >= 0, got {self.damping}")
        if not self.dampings or any(d < 0 or math.isnan(d) for d in self.dampings):
            raise ValueError(f"projection.dampings must be a non-empty list of values >= 0, got {self.dampings}")
        if self.max_iter < 1:
            raise ValueError(f"projection.max_iter must be >= 1, got {self.max_iter}")
        if not self.adam_lr > 0:
            raise ValueError(f"projection.adam_lr must be > 0, got {self.adam_lr}")
        if self.check_every < 1:
            raise ValueError(f"projection.check_every must be >= 1, got {self.check_every}")


@dataclass
class SolveInfo:
    method: str
    iterations: int = 0  # of the chosen solve (largest over blocks); Adam: the kept step
    residual: float = 0.0  # true relative residual of the chosen solve
    constraint_residual: float = 0.0
    converged: bool = True
    stop_reason: str = "converged"  # converged | max_iter | stalled | validation
    seconds: float = 0.0
    damping: float | None = None  # the relative damping used (selected or fixed)
    products: int = 0  # operator products over every solve (block products count their share)
    validation: Score | None = None  # (accuracy, loss) of the chosen model, when scored
    candidates: list[dict] = field(default_factory=list)  # every damping tried, when selecting
    floored: int = 0  # closed form at damping 0: coordinates left at the mean (curvature under the floor)

    def as_dict(self) -> dict:
        """JSON-ready (the weighted mean's infinite damping is written ``"mean"``)."""
        d = asdict(self)
        d["damping"] = recorded_damping(d["damping"])
        for c in d["candidates"]:
            c["damping"] = recorded_damping(c["damping"])
        return d


def recorded_damping(damping: float | None) -> float | str | None:
    return "mean" if damping is not None and math.isinf(damping) else damping
