"""PDF (seed 003): path-dependent client selection for federated unlearning.

Training stage (target-agnostic). During ordinary FedAvg rounds the server keeps, per client,
one accumulated classification-layer direction ``H_i`` and two scalars, the accumulated
alignment ``A_i`` and the accumulated weight ``W_i``, plus a critical-learning-period (CLP)
detector with O(1) state. Storage is O(N x d_cls) whatever the number of rounds.

Round t, with the aggregated client update ``Delta_t`` (the federated gradient-norm proxy is
``g_t = ||Delta_t||`` over the whole model), the realized global update ``G_t`` restricted to
the classification layer, and participant i's classification-layer update ``u_i``:

- critical iff ``(g_t - g_{t-1}) / g_{t-1} >= tau_clp`` (an increase only);
- weight ``w_t = 1 + lambda`` if critical, else 1;
- ``a_i = (1 + cos(u_i, G_t)) / 2`` (normalized cosine, in [0, 1]);
- ``H_i += w_t u_i / ||u_i||``, ``A_i += w_t a_i``, ``W_i += w_t``.

Unlearning stage (request-conditioned). For targets T: ``r = mean_{j in T} H_j / ||H_j||``;
for a retained client i, alignment ``A_i / W_i`` and coherence ``c_i = (1 + cos(H_i, r)) / 2``;
``score_i = beta * A_i / W_i + (1 - beta) * (1 - c_i)``; the top-k retained clients by score
then run ``unlearn_rounds`` rounds of retraining from the initial weights W0, all k every round.

Choices where the seed leaves details open (each is ours):

- the classification layer is the last ``nn.Linear`` of the model (all its parameters);
- the first observed round has no predecessor and counts as critical (early training is the
  classic CLP); a zero previous norm never triggers a division, the round is then critical
  iff its norm is positive;
- target coherence is normalized to [0, 1] like the alignment, so that beta weighs two terms
  on the same scale;
- a retained client that never participated has no history: it ranks after every client that
  has one (in canonical client order); if no target has history the coherence is neutral
  (1/2) for all and the score reduces to the alignment;
- ties are broken by canonical client order (:func:`fl_core.sampler.ordered`);
- unlearning restarts from W0 with a fresh server optimizer; the history is frozen during the
  unlearning rounds, and the targets' rows are erased afterwards (they derive from the
  targets' data); ordinary rounds after that keep recording.

:func:`retrain_reference` is the Retrain baseline: retraining from W0 without the targets, by
default with every retained client in every round.

Random streams: none of its own; rounds draw from ``select`` (keyed by method name and round)
and ``train`` (keyed by client and round), as every :class:`RoundStrategy` does.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from ..data import ClientData
from ..errors import EmptyPopulationError, UnknownClientError
from ..payload import serialize
from ..rng import Streams
from ..sampler import ordered
from .config import RoundConfig
from .local import ClientUpdate
from .server import build_server
from .strategy import RoundReport, RoundStrategy, StrategyInputs

HISTORY_TENSORS = "pdf_history.safetensors"
HISTORY_META = "pdf_history.json"


@dataclass(frozen=True)
class PDFConfig:
    """PDF's settings (seed 003 defaults: tau_CLP 0.01, lambda 0.7, k = 25, T_unlearn = 20)."""

    tau_clp: float = 0.01
    lam: float = 0.7
    beta: float = 0.5
    k: int = 25
    unlearn_rounds: int = 20
    first_round_critical: bool = True

    def __post_init__(self) -> None:
        if not self.tau_clp >= 0:
            raise ValueError(f"pdf.tau_clp must be >= 0, got {self.tau_clp}")
        if not self.lam >= 0:
            raise ValueError(f"pdf.lam must be >= 0, got {self.lam}")
        if not 0 <= self.beta <= 1:
            raise ValueError(f"pdf.beta must lie in [0, 1], got {self.beta}")
        for name in ("k", "unlearn_rounds"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"pdf.{name} must be >= 1, got {getattr(self, name)}")


def is_critical(norm: float, previous: float | None, tau: float, first_critical: bool = True) -> bool:
    """Whether a round with gradient-norm proxy ``norm`` after ``previous`` is a CLP round."""
    if previous is None or math.isnan(previous):
        return first_critical
    if previous <= 0:
        return norm > 0
    return (norm - previous) / previous >= tau


def detect_clp(norms: Sequence[float], tau: float, first_critical: bool = True) -> list[bool]:
    """CLP flags of a whole gradient-norm sequence (what :class:`PathHistory` does online)."""
    flags, previous = [], None
    for g in norms:
        flags.append(is_critical(float(g), previous, tau, first_critical))
        previous = float(g)
    return flags


def normalized_cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    """``(1 + cos(a, b)) / 2`` in [0, 1]; 1/2 (no information) when either vector is zero."""
    na, nb = float(a.double().norm()), float(b.double().norm())
    if na == 0 or nb == 0:
        return 0.5
    cos = float(a.double() @ b.double()) / (na * nb)
    return (1.0 + max(-1.0, min(1.0, cos))) / 2.0


def classifier_slice(model: nn.Module) -> tuple[str, slice]:
    """Name and flat-vector slice of the model's classification layer (its last ``nn.Linear``)."""
    offset, found = 0, None
    spans: dict[int, tuple[int, int]] = {}
    for p in model.parameters():
        spans[id(p)] = (offset, offset + p.numel())
        offset += p.numel()
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear):
            found = (name, module)
    if found is None:
        raise ValueError(f"{type(model).__name__} has no nn.Linear layer to serve as the classification layer")
    name, module = found
    bounds = sorted(spans[id(p)] for p in module.parameters(recurse=False))
    start, stop = bounds[0][0], bounds[-1][1]
    if stop - start != sum(p.numel() for p in module.parameters(recurse=False)):
        raise ValueError(f"parameters of layer {name!r} are not contiguous in the flat vector")
    return name, slice(start, stop)


class PathHistory:
    """Per-client CLP-weighted training histories: O(N x d_cls), independent of the rounds."""

    def __init__(self, clients: Iterable[Hashable], d_cls: int, config: PDFConfig = PDFConfig()) -> None:
        if int(d_cls) < 1:
            raise ValueError(f"pdf history: d_cls must be >= 1, got {d_cls}")
        self.config = config
        self.d_cls = int(d_cls)
        self.clients: list[Hashable] = []
        self._row: dict[Hashable, int] = {}
        self.directions = torch.zeros(0, self.d_cls, dtype=torch.float64)
        self.align_sum = torch.zeros(0, dtype=torch.float64)
        self.weight_sum = torch.zeros(0, dtype=torch.float64)
        self.participations = torch.zeros(0, dtype=torch.int64)
        self.previous_norm: float | None = None
        self.rounds = 0
        self.critical_rounds = 0
        for c in ordered(clients):
            self.register(c)

    # -- bookkeeping -------------------------------------------------------------------------
    def register(self, client: Hashable) -> int:
        """Row of ``client``, allocating one (zero history) on first sight."""
        row = self._row.get(client)
        if row is None:
            if not isinstance(client, (int, str)) or isinstance(client, bool):
                raise ValueError(f"pdf history: client id {client!r} must be an int or a str (it is saved as JSON)")
            row = self._row[client] = len(self.clients)
            self.clients.append(client)
            self.directions = torch.cat([self.directions, torch.zeros(1, self.d_cls, dtype=torch.float64)])
            self.align_sum = torch.cat([self.align_sum, torch.zeros(1, dtype=torch.float64)])
            self.weight_sum = torch.cat([self.weight_sum, torch.zeros(1, dtype=torch.float64)])
            self.participations = torch.cat([self.participations, torch.zeros(1, dtype=torch.int64)])
        return row

    def row(self, client: Hashable) -> int:
        try:
            return self._row[client]
        except KeyError:
            raise UnknownClientError(f"pdf history: client {client!r} is unknown") from None

    def record_round(
        self, norm: float, global_cls: torch.Tensor, updates: Sequence[tuple[Hashable, torch.Tensor]]
    ) -> bool:
        """Fold one round in: gradient-norm proxy ``norm``, realized global classification-layer
        update ``global_cls`` and each participant's classification-layer update. Returns
        whether the round was critical."""
        if global_cls.numel() != self.d_cls:
            raise ValueError(f"pdf history: global update has {global_cls.numel()} values, expected {self.d_cls}")
        critical = is_critical(float(norm), self.previous_norm, self.config.tau_clp, self.config.first_round_critical)
        weight = 1.0 + self.config.lam if critical else 1.0
        g = global_cls.reshape(-1).double()
        for client, u in updates:
            if u.numel() != self.d_cls:
                raise ValueError(
                    f"pdf history: update of client {client!r} has {u.numel()} values, expected {self.d_cls}"
                )
            i = self.register(client)
            u = u.reshape(-1).double()
            nu = float(u.norm())
            if nu > 0:
                self.directions[i] += weight * u / nu
            self.align_sum[i] += weight * normalized_cosine(u, g)
            self.weight_sum[i] += weight
            self.participations[i] += 1
        self.previous_norm = float(norm)
        self.rounds += 1
        self.critical_rounds += int(critical)
        return critical

    def forget(self, clients: Iterable[Hashable]) -> None:
        """Erase the history rows of ``clients`` (after they were unlearned)."""
        for c in clients:
            i = self.row(c)
            self.directions[i] = 0
            self.align_sum[i] = self.weight_sum[i] = 0
            self.participations[i] = 0

    # -- request time ------------------------------------------------------------------------
    def alignment(self, client: Hashable) -> float | None:
        """Historical global alignment ``A_i / W_i`` (None without history)."""
        i = self.row(client)
        w = float(self.weight_sum[i])
        return None if w == 0 else float(self.align_sum[i]) / w

    def reference(self, targets: Iterable[Hashable]) -> torch.Tensor | None:
        """Mean of the targets' unit historical directions (None if no target has history)."""
        units = []
        for t in targets:
            h = self.directions[self.row(t)]
            n = float(h.norm())
            if n > 0:
                units.append(h / n)
        return torch.stack(units).mean(0) if units else None

    def scores(
        self, targets: Iterable[Hashable], beta: float | None = None, candidates: Iterable[Hashable] | None = None
    ) -> dict[Hashable, float]:
        """``beta * alignment + (1 - beta) * (1 - coherence)`` of every candidate with history
        (default candidates: every known client that is not a target)."""
        targets = list(dict.fromkeys(targets))
        for t in targets:
            self.row(t)
        beta = self.config.beta if beta is None else float(beta)
        if not 0 <= beta <= 1:
            raise ValueError(f"pdf.beta must lie in [0, 1], got {beta}")
        ref = self.reference(targets)
        pool = self.clients if candidates is None else list(candidates)
        out: dict[Hashable, float] = {}
        for c in ordered(set(pool) - set(targets)):
            a = self.alignment(c)
            if a is None:
                continue
            coherence = 0.5 if ref is None else normalized_cosine(self.directions[self.row(c)], ref)
            out[c] = beta * a + (1.0 - beta) * (1.0 - coherence)
        return out

    def select(
        self,
        targets: Iterable[Hashable],
        k: int | None = None,
        beta: float | None = None,
        candidates: Iterable[Hashable] | None = None,
    ) -> list[Hashable]:
        """The top-``k`` retained candidates by score (clients without history rank last)."""
        targets = list(dict.fromkeys(targets))
        k = self.config.k if k is None else int(k)
        if k < 1:
            raise ValueError(f"pdf.k must be >= 1, got {k}")
        pool = ordered(set(self.clients if candidates is None else candidates) - set(targets))
        if not pool:
            raise EmptyPopulationError(f"pdf: no retained client is left after removing {targets}")
        scores = self.scores(targets, beta, pool)
        rank = {c: i for i, c in enumerate(pool)}
        scored = sorted(scores, key=lambda c: (-scores[c], rank[c]))
        unscored = [c for c in pool if c not in scores]
        return (scored + unscored)[:k]

    # -- persistence -------------------------------------------------------------------------
    def tensors(self) -> dict[str, torch.Tensor]:
        """The O(N x d_cls) state as tensors (scalars included, so the size never changes)."""
        prev = float("nan") if self.previous_norm is None else self.previous_norm
        return {
            "directions": self.directions.contiguous(),
            "align_sum": self.align_sum,
            "weight_sum": self.weight_sum,
            "participations": self.participations,
            "detector": torch.tensor([prev, float(self.rounds), float(self.critical_rounds)], dtype=torch.float64),
        }

    def meta(self) -> dict[str, Any]:
        return {"format": "pdf-history/1", "config": asdict(self.config), "d_cls": self.d_cls, "clients": self.clients}

    def nbytes(self) -> int:
        """Bytes of the persisted form (safetensors + JSON)."""
        return len(serialize(self.tensors())) + len(json.dumps(self.meta(), sort_keys=True).encode())

    def save(self, directory: str | Path) -> Path:
        """Write ``pdf_history.safetensors`` and ``pdf_history.json`` into ``directory``."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        save_file(self.tensors(), str(d / HISTORY_TENSORS))
        (d / HISTORY_META).write_text(json.dumps(self.meta(), sort_keys=True))
        return d

    @classmethod
    def load(cls, directory: str | Path) -> PathHistory:
        """The history saved by :meth:`save` in ``directory``."""
        d = Path(directory)
        meta = json.loads((d / HISTORY_META).read_text())
        if meta.get("format") != "pdf-history/1":
            raise ValueError(f"{d / HISTORY_META}: not a PDF history (format {meta.get('format')!r})")
        t = load_file(str(d / HISTORY_TENSORS))
        n = len(meta["clients"])
        if t["directions"].shape != (n, meta["d_cls"]):
            raise ValueError(
                f"{d / HISTORY_TENSORS}: directions have shape {tuple(t['directions'].shape)}, "
                f"expected ({n}, {meta['d_cls']})"
            )
        h = cls([], meta["d_cls"], PDFConfig(**meta["config"]))
        h.clients = list(meta["clients"])
        h._row = {c: i for i, c in enumerate(h.clients)}
        h.directions, h.align_sum, h.weight_sum = t["directions"], t["align_sum"], t["weight_sum"]
        h.participations = t["participations"]
        prev, rounds, critical = t["detector"].tolist()
        h.previous_norm = None if math.isnan(prev) else prev
        h.rounds, h.critical_rounds = int(rounds), int(critical)
        return h


@dataclass
class UnlearnResult:
    """What an unlearning request did: the ranking, the chosen clients and the rounds run."""

    targets: list
    selected: list
    scores: dict
    reports: list[RoundReport]


class PDFStrategy(RoundStrategy):
    """FedAvg that records PDF's path histories and unlearns with the top-k retained clients."""

    name = "pdf"

    def __init__(self, inputs: StrategyInputs, pdf: PDFConfig = PDFConfig()) -> None:
        super().__init__(inputs)
        self.pdf = pdf
        self.cls_name, self.cls_slice = classifier_slice(self.model())
        known = list(inputs.data) if isinstance(inputs.data, Mapping) else []
        self.history = PathHistory(known, self.cls_slice.stop - self.cls_slice.start, pdf)
        self.tracking = True
        self._before: torch.Tensor | None = None
        self._aggregate: torch.Tensor | None = None

    def aggregate(self, updates: Sequence[ClientUpdate]) -> torch.Tensor:
        self._before = self.weights
        self._aggregate = super().aggregate(updates)
        return self._aggregate

    def after_round(self, report: RoundReport, arrived: Sequence[ClientUpdate]) -> None:
        """Fold the round into the histories (ordinary training rounds only)."""
        if not self.tracking or not arrived:
            return
        assert self._before is not None and self._aggregate is not None  # set by aggregate() this round
        realized = (self.weights - self._before)[self.cls_slice]
        norm = float(self._aggregate.double().norm())
        critical = self.history.record_round(norm, realized, [(u.client, u.delta[self.cls_slice]) for u in arrived])
        report.extra["pdf"] = {"critical": critical, "fgn": norm}

    def unlearn(
        self,
        targets: Iterable[Hashable],
        available: Iterable[Hashable] | None = None,
        beta: float | None = None,
        k: int | None = None,
        rounds: int | None = None,
        clients: Sequence[Hashable] | None = None,
        on_round: Callable[[RoundStrategy, RoundReport], None] | None = None,
    ) -> UnlearnResult:
        """Forget ``targets``: rank the retained ``available`` clients (default: every known
        client), keep the top ``k`` and retrain from W0 with them for ``rounds`` rounds.
        ``clients`` replaces the ranking by a given selection (for ablations); ``on_round(self, report)``
        is called after every unlearning round (for learning curves)."""
        targets = list(dict.fromkeys(targets))
        if not targets:
            raise ValueError("pdf.unlearn: no target client given")
        for t in targets:
            self.history.row(t)
        pool = ordered(set(self.history.clients if available is None else available) - set(targets))
        scores = self.history.scores(targets, beta, pool)
        if clients is None:
            selected = self.history.select(targets, k, beta, pool)
        else:
            selected = list(dict.fromkeys(clients))
            bad = [c for c in selected if c in targets or c not in pool]
            if bad:
                raise UnknownClientError(f"pdf.unlearn: clients {bad} are targets or not available")
        self.weights = self.w0.clone()
        self.server = build_server(self.config)
        saved_config, self.config = self.config, replace(self.config, clients_per_round=len(selected))
        self.tracking = False
        reports = []
        try:
            for _ in range(self.pdf.unlearn_rounds if rounds is None else rounds):
                reports.append(self.run_round(selected))
                if on_round is not None:
                    on_round(self, reports[-1])
        finally:
            self.config, self.tracking = saved_config, True
        self.history.forget(targets)
        return UnlearnResult(targets, selected, scores, reports)

    def save_history(self, directory: str | Path) -> Path:
        return self.history.save(directory)


def retrain_reference(
    model_fn: Callable[[], nn.Module],
    w0: torch.Tensor,
    data: ClientData,
    config: RoundConfig,
    streams: Streams,
    clients: Iterable[Hashable],
    targets: Iterable[Hashable],
    rounds: int | None = None,
    per_round: int | None = None,
    on_round: Callable[[RoundStrategy, RoundReport], None] | None = None,
) -> tuple[RoundStrategy, list[RoundReport]]:
    """Retrain: FedAvg from W0 on ``clients`` minus ``targets`` for ``rounds`` rounds (default
    ``config.rounds``) with ``per_round`` clients a round (default: every retained client);
    ``on_round(strategy, report)`` is called after every round."""
    targets = set(targets)
    retained = ordered(set(clients) - targets)
    if not retained:
        raise EmptyPopulationError(f"retrain: no retained client is left after removing {sorted(targets, key=str)}")
    cfg = replace(config, clients_per_round=per_round or len(retained))
    s = RoundStrategy(StrategyInputs(model_fn, w0, data, cfg, streams))
    s.name = "retrain"
    reports = []
    for _ in range(config.rounds if rounds is None else rounds):
        reports.append(s.run_round(retained))
        if on_round is not None:
            on_round(s, reports[-1])
    return s, reports


def build_pdf(inputs: StrategyInputs, **options: Any) -> PDFStrategy:
    """Strategy ``pdf``: ``pdf=PDFConfig(...)`` or its fields as keyword options."""
    pdf = options.pop("pdf", None) or PDFConfig()
    if options:
        pdf = replace(pdf, **options)
    return PDFStrategy(inputs, pdf)
