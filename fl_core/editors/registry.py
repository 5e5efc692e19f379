"""The request-driven editors by name: one file per method, one table here (:data:`EDITORS`).

Each entry is an :class:`EditorKind`: how the editor is built from :class:`EditorInputs`, and the
dataclass of its typed options (None when it takes none), so that a scenario can set them
(``federated.editor_options``) and have them checked by the editor's own class. An editor of your
own is ``EDITORS.add(name, EditorKind(build, options))`` in a module of yours."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np

from ..clients import ClientPool
from ..fisher import FisherKind, FisherSum, new_sum
from ..projection_config import ProjectionConfig
from ..registry import Registry
from ..rounds import RoundConfig
from ..sampler import FixedRatio, SizeRule
from .base import Editor
from .dense import DenseConfig, DenseEditor
from .fats import FATSConfig, FATSEditor
from .federaser import FedEraserConfig, FedEraserEditor
from .fedlpa import FedLPAConfig, FedLPAEditor
from .fedrr import FedRRConfig, FedRREditor
from .finetune import FineTuneConfig, FineTuneEditor
from .fsosa import FSOSAEditor
from .multiround import FedAvgRetrainEditor, MultiRoundEditor
from .retrain import RetrainEditor


@dataclass(frozen=True)
class EditorInputs:
    """What an editor is built from (see :func:`build_editor`)."""

    pool: ClientPool
    rng: np.random.Generator
    rule: SizeRule
    projection: ProjectionConfig
    model_fn: Callable
    rounds: RoundConfig | None
    options: Any
    validator: Any

    @property
    def fisher_kind(self) -> FisherKind:
        return self.pool.trainer.config.fisher

    def fisher_sum(self) -> FisherSum | None:
        """An empty coordinator-side Fisher sum of the pool's representation."""
        return new_sum(self.fisher_kind, self.model_fn())


def _fsosa(i: EditorInputs) -> Editor:
    return FSOSAEditor(i.pool, i.rule, i.rng, i.fisher_sum, i.projection, validator=i.validator)


def _retrain(i: EditorInputs) -> Editor:
    return RetrainEditor(i.pool, i.rule, i.rng, i.fisher_sum, i.projection, validator=i.validator)


def _fedfisher(i: EditorInputs) -> Editor:
    if i.fisher_kind is FisherKind.NONE:
        raise ValueError("fedfisher needs a Fisher representation (train.fisher)")
    return FSOSAEditor(
        i.pool, FixedRatio(1.0), i.rng, i.fisher_sum, i.projection, name="fedfisher", validator=i.validator
    )


def _fedavg(i: EditorInputs) -> Editor:
    return FSOSAEditor(i.pool, FixedRatio(1.0), i.rng, lambda: None, i.projection, name="fedavg")


def _multiround(cls: type[MultiRoundEditor]) -> Callable[[EditorInputs], Editor]:
    def build(i: EditorInputs) -> Editor:
        extra = {} if i.options is None else {"options": i.options}
        return cls.from_pool(i.pool, i.rounds, i.model_fn, **extra)

    return build


def _finetune(i: EditorInputs) -> Editor:
    return FineTuneEditor.from_pool(i.pool, _fsosa(i), i.model_fn, i.options)


class Exactness(str, Enum):
    """What a method claims of the model it releases after a request (what ``vmc certify`` checks).

    - ``distribution``: the model is the merge of its recorded subset (the record's ``members``), and
      the subset is distributed as retraining's (F-SOSA's couplings, Retrain's fresh draw: tested
      statistically, not per run);
    - ``exact``: the model is the merge of every current client;
    - ``rerun``: the model is the method's own fresh fit on its clients (a deterministic function of
      them: it reruns, or recomputes exactly what rerunning gives);
    - ``none``: no exactness is claimed; its distance to ``reference``'s fresh fit is reported."""

    DISTRIBUTION = "distribution"
    EXACT = "exact"
    RERUN = "rerun"
    NONE = "none"


@dataclass(frozen=True)
class EditorKind:
    """One editor: ``build`` makes it from its inputs; ``options`` is the dataclass its ``options``
    take (None: it takes none); ``exactness`` what it claims of a released model, and for a method
    that claims none, ``reference``: the editor whose fresh fit on the same clients is its exact
    refit (None: none is named)."""

    build: Callable[[EditorInputs], Editor]
    options: type | None = None
    exactness: Exactness = Exactness.NONE
    reference: str | None = None


def _with_config(cls: Callable[..., Editor]) -> Callable[[EditorInputs], Editor]:
    return lambda i: cls(i.pool) if i.options is None else cls(i.pool, i.options)


EDITORS: Registry[EditorKind] = Registry(
    "editor",
    {
        "fsosa": EditorKind(_fsosa, exactness=Exactness.DISTRIBUTION),
        "retrain": EditorKind(_retrain, exactness=Exactness.DISTRIBUTION),
        "fedfisher": EditorKind(_fedfisher, exactness=Exactness.EXACT),
        "fedavg": EditorKind(_fedavg, exactness=Exactness.EXACT),
        "fedlpa": EditorKind(_with_config(FedLPAEditor), FedLPAConfig, Exactness.RERUN),
        "dense": EditorKind(_with_config(DenseEditor), DenseConfig, Exactness.RERUN),
        "retrain_fedavg": EditorKind(_multiround(FedAvgRetrainEditor), exactness=Exactness.RERUN),
        "federaser": EditorKind(_multiround(FedEraserEditor), FedEraserConfig, reference="retrain_fedavg"),
        "fedrr": EditorKind(_multiround(FedRREditor), FedRRConfig, reference="retrain_fedavg"),
        "fats": EditorKind(_multiround(FATSEditor), FATSConfig, Exactness.RERUN),
        "finetune": EditorKind(_finetune, FineTuneConfig, reference="fsosa"),
    },
)


def editor_options(name: str, options: Any) -> Any:
    """``options`` for editor ``name`` as its typed options: a mapping is built into the editor's
    options dataclass (which refuses a bad value naming it); an instance or None is kept; an editor
    that takes no options refuses any."""
    kind = EDITORS[name]
    if options is None:
        return None
    if kind.options is None:
        raise ValueError(f"editor {name!r} takes no options")
    if isinstance(options, dict):
        known = {f.name for f in dataclasses.fields(kind.options)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ValueError(f"unknown option(s) {unknown} of editor {name!r}; it takes {sorted(known)}")
        return kind.options(**options)
    return options


def build_editor(
    name: str,
    pool: ClientPool,
    rng: np.random.Generator,
    rule: SizeRule = FixedRatio(0.5),
    projection: ProjectionConfig = ProjectionConfig(),
    model_fn: Callable | None = None,
    rounds: RoundConfig | None = None,
    options: Any = None,
    validator: Any = None,
) -> Editor:
    """The editor ``name`` over ``pool``; ``rng`` is its subset-sampling stream; ``rounds`` and
    ``options`` configure the editors that take them (their options dataclass, or a mapping of its
    fields; see the table in :mod:`fl_core.editors`). ``validator`` scores a model on the server's held-out set and lets the
    Fisher merges select their damping (``fl_core.projection``); by default the pool's
    (``OneShotSetup.pool`` attaches one), None for a pool without."""
    kind = EDITORS[name]
    if validator is None:
        validator = getattr(pool, "validator", None)
    options = editor_options(name, options)
    return kind.build(
        EditorInputs(pool, rng, rule, projection, model_fn or pool.trainer.model_fn, rounds, options, validator)
    )
