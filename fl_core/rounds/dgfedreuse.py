"""DG-FedReuse (seed 002): Top-K FedAvg (:mod:`.topk`) with a gate that lets selected clients
contribute an age-decayed cached update instead of training.

DG-FedReuse, one round ``t`` (seed 002, section 4):

1. ``m`` clients are selected and receive ``w_t``.
2. Every selected client with a cached update computes a head-gradient proxy ``p`` at ``w_t``
   (gradients of the parameters whose names contain ``classifier`` or ``fc``, summed over up to
   five shuffled mini-batches of 64, model in training mode) and its discrepancy with its
   signature ``h``: ``D = 1 - clip(<p, h> / (|p| |h| + 1e-12), -1, 1)`` (Eq. 2). A cacheless client
   has ``D = 1``. It is active if cacheless, if ``D >= tau_t = max(tau_min, tau0 exp(-gamma t))``
   (Eq. 3), or if its cache age ``a = t - r_i`` is at least ``S`` (Eq. 4).
3. While fewer than ``ceil(q m)`` are active, the non-active client with the largest ``D`` is
   promoted (ties: selection order).
4. An active client trains with the proximal term ``mu/2 |w - w_t|^2`` (Eq. 5), sends its Top-K
   update, and refreshes its signature with a second, separately shuffled proxy at ``w_t``:
   ``h <- 0.9 h + 0.1 p_ref`` (Eq. 6; set directly the first time). The server caches the
   received sparse update and its round.
5. A reused client contributes ``rho^a`` times its cached update (Eq. 7), with its sample weight
   (Eq. 8); ``0 < rho < 1`` so its norm never exceeds the cached one (Eq. 17).

Choices where the seed is open or where this toolkit differs, stated:

- ``t`` is the 0-based round index of the strategy; ``ceil(q m)`` is computed exactly in decimal
  (0.3 x 10 is 3, where the float product's ceiling would be 4).
- A model with no parameter named like a head (``mlp``: ``layers.*``) uses its last parameter
  tensor (the output layer) as the head.
- The score goes up and the decision comes down as small real control messages (charged as
  ``control`` bytes); the signature and the error-feedback residual stay on the client and the
  update cache on the server, following the seed's logical mapping (its Fig. 1).
- The update cache is refreshed only by an update that arrived; a participant dropped from the
  round (left coverage) contributes nothing that round, fresh or reused, as in the base.
- Local training has no weight decay (the base's ``local_update`` has none; the seed uses 1e-4).
- ``schedule``: the name whose ``select`` stream draws the participants (default the method's own
  name); giving several methods the same name pairs their client schedules.

Random streams (purposes): ``select`` (keyed by schedule name and round) and ``train`` (keyed by
client and round) as in the base, and ``proxy`` keyed by (client, round, ``"gate"`` |
``"refresh"`` | ``"repeat"``, repeat index): the shuffles of the proxy mini-batches.
"""

from __future__ import annotations

import math
import time
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from enum import Enum
from typing import Any, cast

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import EditError
from ..models import load_flat
from ..payload import ByteKind
from ..sampler import ordered
from .accounting import REUSE_EVENT_BYTES, decision_message, message_bytes, score_message
from .local import ClientUpdate, local_update
from .strategy import Encoded, RoundReport, StrategyInputs
from .topk import VALUE_BYTES, TopKConfig, TopKStrategy, strategy_options


@dataclass(frozen=True)
class FedReuseConfig:
    """The gate and reuse rule; defaults are seed 002's frozen values (section 5.2)."""

    tau0: float = 0.9116988
    tau_min: float = 0.8134931
    gamma: float = 0.01
    max_age: int = 4  # S
    decay: float = 0.7279635  # rho
    fresh_quota: float = 0.30  # q
    prox_mu: float = 3.4156e-4  # mu of the fresh path
    signature_momentum: float = 0.9  # h <- 0.9 h + 0.1 p_ref
    proxy_batches: int = 5
    proxy_batch_size: int = 64
    reuse_event_bytes: int = REUSE_EVENT_BYTES
    head_keys: tuple[str, ...] = ("classifier", "fc")

    def __post_init__(self) -> None:
        object.__setattr__(self, "head_keys", tuple(self.head_keys))
        if not 0 < self.tau_min <= self.tau0 <= 2:
            raise ValueError(
                f"reuse.tau_min/tau0 must satisfy 0 < tau_min <= tau0 <= 2, got {self.tau_min}, {self.tau0}"
            )
        if self.gamma < 0:
            raise ValueError(f"reuse.gamma must be >= 0, got {self.gamma}")
        if int(self.max_age) < 1:
            raise ValueError(f"reuse.max_age must be >= 1, got {self.max_age}")
        if not 0 < self.decay < 1:
            raise ValueError(f"reuse.decay must lie in (0, 1), got {self.decay}")
        if not 0 <= self.fresh_quota <= 1:
            raise ValueError(f"reuse.fresh_quota must lie in [0, 1], got {self.fresh_quota}")
        if self.prox_mu < 0:
            raise ValueError(f"reuse.prox_mu must be >= 0, got {self.prox_mu}")
        if not 0 <= self.signature_momentum < 1:
            raise ValueError(f"reuse.signature_momentum must lie in [0, 1), got {self.signature_momentum}")
        for name in ("proxy_batches", "proxy_batch_size"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"reuse.{name} must be >= 1, got {getattr(self, name)}")
        if self.reuse_event_bytes < 0:
            raise ValueError(f"reuse.reuse_event_bytes must be >= 0, got {self.reuse_event_bytes}")

    def threshold(self, t: int) -> float:
        """Eq. 3: ``tau_t = max(tau_min, tau0 exp(-gamma t))``."""
        return max(self.tau_min, self.tau0 * math.exp(-self.gamma * t))

    def quota(self, selected: int) -> int:
        """``ceil(q m)``, exact for decimal ``q``."""
        return math.ceil(Decimal(repr(self.fresh_quota)) * int(selected))


def discrepancy(proxy: torch.Tensor, signature: torch.Tensor) -> float:
    """Eq. 2: clipped cosine distance ``1 - clip(cos, -1, 1)`` in [0, 2]."""
    p, h = proxy.double().reshape(-1), signature.double().reshape(-1)
    cos = float(torch.dot(p, h) / (p.norm() * h.norm() + 1e-12))
    return 1.0 - min(1.0, max(-1.0, cos))


class GateReason(str, Enum):
    """Why a selected client trained fresh (or was reused)."""

    CACHELESS = "cacheless"
    THRESHOLD = "threshold"
    AGE = "age"
    PROMOTED = "promoted"
    REUSED = "reused"


@dataclass
class GateDecision:
    """One selected client's gate outcome in one round."""

    client: Hashable
    score: float  # D_{i,t} (1 for a cacheless client)
    age: int | None  # t - r_i (None when cacheless)
    reason: GateReason
    proxy_s: float = 0.0

    @property
    def active(self) -> bool:
        return self.reason is not GateReason.REUSED

    def as_dict(self) -> dict[str, Any]:
        return {
            "client": self.client,
            "score": self.score,
            "age": self.age,
            "active": self.active,
            "reason": self.reason.value,
        }


@dataclass
class Repeatability:
    """Gate reliability at a fixed state: each client's proxy re-evaluated ``repeats`` times."""

    round: int
    tau: float
    repeats: int
    clients: list[dict[str, Any]] = field(default_factory=list)

    @property
    def mean_score(self) -> float:
        return float(np.mean([c["score_mean"] for c in self.clients]))

    @property
    def mean_score_sd(self) -> float:
        return float(np.mean([c["score_sd"] for c in self.clients]))

    @property
    def mean_flip_rate(self) -> float:
        return float(np.mean([c["flip_rate"] for c in self.clients]))

    @property
    def clients_with_flips(self) -> float:
        """Share of clients whose threshold decision was not the same in every repeat."""
        return float(np.mean([c["flip_rate"] > 0 for c in self.clients]))

    def summary(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "tau": self.tau,
            "repeats": self.repeats,
            "clients": len(self.clients),
            "mean_score": self.mean_score,
            "mean_score_sd": self.mean_score_sd,
            "mean_flip_rate": self.mean_flip_rate,
            "clients_with_flips": self.clients_with_flips,
        }


class DGFedReuseStrategy(TopKStrategy):
    """DG-FedReuse: a proxy-gradient gate chooses, per selected client, a fresh proximal Top-K
    update or its age-decayed cached one (see the module docstring)."""

    name = "dgfedreuse"

    def __init__(
        self,
        inputs: StrategyInputs,
        topk: TopKConfig | None = None,
        reuse: FedReuseConfig | None = None,
        schedule: str | None = None,
    ) -> None:
        super().__init__(inputs, topk, schedule)
        self.reuse = reuse or FedReuseConfig()
        named = list(self.model().named_parameters())
        head = [i for i, (n, _) in enumerate(named) if any(k in n for k in self.reuse.head_keys)]
        self.head_index = head or [len(named) - 1]
        self.head_names = [named[i][0] for i in self.head_index]
        self.cache: dict[Hashable, torch.Tensor] = {}  # server: last received sparse update
        self.cache_round: dict[Hashable, int] = {}  # server: r_i
        self.signature: dict[Hashable, torch.Tensor] = {}  # client: h_i
        self._gate: dict[Hashable, GateDecision] = {}

    # -- the proxy -------------------------------------------------------------------------------
    def proxy(self, client: Hashable, *key: Any) -> torch.Tensor:
        """Head gradient at the current global weights, summed over up to ``proxy_batches``
        shuffled mini-batches (stream ``proxy/<client>/<round>/<key>``)."""
        model = load_flat(self.model(), self.weights)
        model.train()
        model.zero_grad(set_to_none=True)
        data = self.data_of(client)
        device = next(model.parameters()).device
        gen = self.streams.torch("proxy", client, self.round, *key)
        order = torch.randperm(len(data), generator=gen)
        bs = self.reuse.proxy_batch_size
        params = list(model.parameters())
        head = set(self.head_index)
        frozen = [p for i, p in enumerate(params) if i not in head and p.requires_grad]
        for p in frozen:  # the head's gradients only: backward stops at the head
            p.requires_grad_(False)
        try:
            for b in range(min(self.reuse.proxy_batches, math.ceil(len(data) / bs))):
                idx = order[b * bs : (b + 1) * bs]
                F.cross_entropy(model(data.x[idx].to(device)), data.y[idx].to(device)).backward()
        finally:
            for p in frozen:
                p.requires_grad_(True)
        grads = [
            cast(torch.Tensor, params[i].grad) if params[i].grad is not None else torch.zeros_like(params[i])
            for i in self.head_index
        ]
        out = torch.cat([g.detach().reshape(-1) for g in grads]).float().cpu()
        model.zero_grad(set_to_none=True)
        return out

    def _score(self, client: Hashable, *key: Any) -> tuple[float, float]:
        t0 = time.perf_counter()
        score = discrepancy(self.proxy(client, *key), self.signature[client])
        return score, time.perf_counter() - t0

    # -- the round -------------------------------------------------------------------------------
    def begin(self, available: Iterable[Hashable]) -> RoundReport:
        """Select, broadcast, then run the gate (Eq. 2-4) and the quota promotion."""
        report = super().begin(available)
        cfg, tau = self.reuse, self.reuse.threshold(self.round)
        gate: dict[Hashable, GateDecision] = {}
        for c in report.selected:
            if c not in self.cache or c not in self.signature:
                gate[c] = GateDecision(c, 1.0, None, GateReason.CACHELESS)
                continue
            score, proxy_s = self._score(c, "gate")
            age = self.round - self.cache_round[c]
            reason = (
                GateReason.AGE if age >= cfg.max_age else (GateReason.THRESHOLD if score >= tau else GateReason.REUSED)
            )
            gate[c] = GateDecision(c, score, age, reason, proxy_s)
            self._charge_control(report, c, score_message(score), "control_uplink")
        need = cfg.quota(len(report.selected))
        active = sum(d.active for d in gate.values())
        order = {c: i for i, c in enumerate(report.selected)}
        waiting = sorted((d for d in gate.values() if not d.active), key=lambda d: (-d.score, order[d.client]))
        for d in waiting[: max(0, need - active)]:
            d.reason = GateReason.PROMOTED
        for c, d in gate.items():
            if d.age is not None:
                self._charge_control(report, c, decision_message(d.active), "control_downlink")
        self._gate = gate
        report.extra.update(tau=tau, quota=need, gate=[d.as_dict() for d in gate.values()])
        return report

    def _charge_control(self, report: RoundReport, client: Hashable, message: dict, direction: str) -> None:
        nbytes = message_bytes(message)
        report.charge(ByteKind.CONTROL, nbytes, client)
        self._acct[direction] += nbytes

    def train(self, client: Hashable) -> ClientUpdate:
        """Fresh path (proximal SGD, then a refresh proxy for the signature) or reused path."""
        decision = self._gate.get(client)
        if decision is None:
            raise EditError(f"{self.name}: client {client!r} has no gate decision in round {self.round}")
        if not decision.active:
            age = decision.age
            assert age is not None  # a reused update comes from the cache, which has an age
            delta = (self.reuse.decay**age) * self.cache[client]
            n = len(self.data_of(client))
            return ClientUpdate(
                client, self.round, delta, n, float("nan"), decision.proxy_s, extra={"path": "reused", "age": age}
            )
        gen = self.streams.torch("train", client, self.round)
        update = local_update(
            self.model(),
            self.weights,
            self.data_of(client),
            self.config,
            gen,
            client,
            self.round,
            prox_mu=self.reuse.prox_mu,
        )
        t0 = time.perf_counter()
        ref = self.proxy(client, "refresh")
        h = self.signature.get(client)
        m = self.reuse.signature_momentum
        self.signature[client] = ref if h is None else m * h + (1 - m) * ref
        update.compute_s += decision.proxy_s + time.perf_counter() - t0
        update.extra.update(path="fresh", reason=decision.reason.value)
        return update

    def encode(self, update: ClientUpdate) -> Encoded:
        """A reused client sends no model update: the seed's 16-byte event in the modelled count."""
        if update.extra.get("path") != "reused":
            return super().encode(update)
        self._acct["reused"] += 1
        self._acct["modelled_uplink"] += self.reuse.reuse_event_bytes
        return Encoded(update.delta, 0, self.reuse.reuse_event_bytes / VALUE_BYTES, "reused")

    def after_round(self, report: RoundReport, arrived: Sequence[ClientUpdate]) -> None:
        """Cache the fresh updates that arrived; the training loss is that of the fresh ones."""
        fresh = [u for u in arrived if u.extra.get("path") == "fresh"]
        for u in fresh:
            self.cache[u.client] = u.delta.detach().clone()
            self.cache_round[u.client] = self.round
        n = sum(u.num_samples for u in fresh)
        report.train_loss = sum(u.loss * u.num_samples for u in fresh) / n if n else float("nan")
        report.extra["active"] = [u.client for u in fresh]
        report.extra["reused"] = [u.client for u in arrived if u.extra.get("path") == "reused"]
        self._gate = {}

    # -- gate reliability --------------------------------------------------------------------------
    def repeatability(self, repeats: int = 10, clients: Iterable[Hashable] | None = None) -> Repeatability:
        """Re-evaluate the proxy ``repeats`` times per cacheful client at the current state
        (weights, signatures, round) without changing it.

        Per client: mean and sample SD of ``D``; the threshold decision ``D >= tau_t`` of each
        repeat (age and quota left out) and its flip rate, the share of pairs of repeats that
        disagree, ``2 a (R - a) / (R (R - 1))`` with ``a`` of ``R`` repeats active.
        """
        if self._open is not None:
            raise EditError(f"{self.name}: measure repeatability between rounds, round {self.round} is open")
        if repeats < 2:
            raise ValueError(f"repeats must be >= 2, got {repeats}")
        clients = ordered(self.signature) if clients is None else list(clients)
        missing = [c for c in clients if c not in self.signature]
        if missing or not clients:
            raise ValueError(f"repeatability needs clients with a signature; without one: {missing or 'none given'}")
        tau = self.reuse.threshold(self.round)
        out = Repeatability(self.round, tau, repeats)
        for c in clients:
            scores = np.array([self._score(c, "repeat", j)[0] for j in range(repeats)])
            a = int((scores >= tau).sum())
            out.clients.append(
                {
                    "client": c,
                    "score_mean": float(scores.mean()),
                    "score_sd": float(scores.std(ddof=1)),
                    "active_share": a / repeats,
                    "flip_rate": 2 * a * (repeats - a) / (repeats * (repeats - 1)),
                }
            )
        return out


def build_dgfedreuse(inputs: StrategyInputs, **options: Any) -> DGFedReuseStrategy:
    """Strategy ``dgfedreuse`` (options: those of ``topk`` and ``reuse``)."""
    opts = strategy_options("dgfedreuse", options, {"topk", "ratio", "error_feedback", "schedule", "reuse"})
    return DGFedReuseStrategy(inputs, **opts)
