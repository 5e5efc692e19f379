"""Membership inference: does a model still carry traces of a removed client's samples?

An audit compares the model's behaviour on *members* (the removed client's training samples)
with *non-members* (samples the model never saw). After a correct unlearning request the two
are indistinguishable: accuracy, precision and AUC near 50 % (seed 000, Table IV).

Attacks (each returns an :class:`AttackResult`):

- ``loss``: the per-sample cross-entropy as score (Yeom et al.): a member has a lower loss.
- ``confidence``: the largest softmax probability as score, without the label (Salem et al.).
- ``shadow``: shadow models trained by the attacker on data disjoint from the target's,
  then an attack classifier on their outputs (Shokri et al.).

Choices the papers leave open, written down here:

- Balanced sets. Every attack is scored on as many members as non-members (the larger set is
  subsampled), so 50 % accuracy is the chance level.
- Threshold of the loss/confidence attacks: chosen on a *calibration half* of the (balanced)
  samples, as the accuracy-maximising cut, and applied to the other half, which gives the
  reported accuracy and precision. This is an oracle-calibrated attack (the auditor knows the
  labels of the calibration half), so it upper-bounds what a real attacker with the same score
  achieves. The AUC needs no threshold and uses all samples.
- Shadow attack: ``num_shadows`` models of the target's architecture are trained by the run's
  local-training recipe (SGD, epochs, learning rate, batch) from seeded random inits, each on a
  random "in" half of the attacker's pool and evaluated on an equally large disjoint "out"
  half. One attack classifier (standardised logistic regression) serves all classes; its
  features are the logs of the sorted softmax vector (top 10) and the log-probability of the
  true label. A per-class classifier (Shokri et al.) needs many samples of every class, which
  one client's data does not give. Accuracy and precision use the classifier's 0.5 cut (it was
  trained on balanced shadow records, so no target labels are used), the AUC its probability.
  Shadows mimic one client's local model trained centrally, not the whole federated pipeline,
  so they tend to be more overfit than the fused target; the attack is a probe, not a bound.
- :func:`audit_sets` draws non-members with the members' label histogram (per class, as many as
  both sides have), because a client's data is label-skewed and a model's loss differs by class:
  without matching, even a retrained model that never saw the client would look "leaky".
- :func:`auc_null_se` is the standard error of the AUC when members and non-members come from
  the same distribution (Mann-Whitney), ``sqrt((n1 + n0 + 1) / (12 n1 n0))``: the scale against
  which a distance from 50 % is judged.

Random draws come from the stream purpose ``"mia"`` (:mod:`fl_core.rng`) with keys ``"balance"``,
``"split"``, ``"sets"``, ``"shadow-split"``, ``"shadow-init"`` and ``"shadow-train"``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .data import ArrayDataset
from .models import load_flat
from .rng import Streams
from .training import TrainConfig, sgd_epochs

PURPOSE = "mia"
TOP_K = 10  # sorted softmax entries the shadow attack classifier sees


class AttackKind(str, Enum):
    LOSS = "loss"
    CONFIDENCE = "confidence"
    SHADOW = "shadow"


@dataclass(frozen=True)
class AttackResult:
    """One attack on one model: accuracy, precision and AUC in [0, 1] (0.5 = chance)."""

    attack: str
    accuracy: float
    precision: float  # NaN when the attack predicts no member at all
    auc: float
    n_members: int
    n_nonmembers: int
    threshold: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (NaN as None)."""
        out = {k: getattr(self, k) for k in ("attack", "accuracy", "precision", "auc", "n_members", "n_nonmembers",
                                              "threshold")}
        out["extra"] = dict(self.extra)
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()}


# ---------------------------------------------------------------------------------------------
# Scores and metrics
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outputs:
    """A model's per-sample outputs on a data set: cross-entropy and softmax probabilities."""

    loss: np.ndarray  # (N,)
    probs: np.ndarray  # (N, classes)
    labels: np.ndarray  # (N,)


@torch.no_grad()
def model_outputs(model: nn.Module, weights: torch.Tensor | None, data: ArrayDataset, batch_size: int = 1000) -> Outputs:
    """Per-sample loss and softmax of ``model`` with ``weights`` (None: as it is) on ``data``."""
    if weights is not None:
        load_flat(model, weights)
    model.eval()
    device = next(model.parameters()).device
    losses, probs = [], []
    for start in range(0, len(data), batch_size):
        logits = model(data.x[start : start + batch_size].to(device)).double()
        y = data.y[start : start + batch_size].to(device)
        losses.append(F.cross_entropy(logits, y, reduction="none").cpu())
        probs.append(torch.softmax(logits, 1).cpu())
    if not losses:
        return Outputs(np.zeros(0), np.zeros((0, data.num_classes)), np.zeros(0, dtype=np.int64))
    return Outputs(torch.cat(losses).numpy(), torch.cat(probs).numpy(), data.y.numpy())


def auc_score(member_scores: np.ndarray, nonmember_scores: np.ndarray) -> float:
    """P(score of a random member > that of a random non-member), ties counted one half."""
    n1, n0 = len(member_scores), len(nonmember_scores)
    if n1 == 0 or n0 == 0:
        raise ValueError(f"AUC needs members and non-members, got {n1} and {n0}")
    from scipy.stats import rankdata  # here, not at import: scipy.stats costs every vmc command ~1-3 s

    ranks = rankdata(np.concatenate([member_scores, nonmember_scores]))
    return float((ranks[:n1].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def auc_null_se(n_members: int, n_nonmembers: int) -> float:
    """Standard error of the AUC when both sets come from one distribution (Mann-Whitney)."""
    return math.sqrt((n_members + n_nonmembers + 1) / (12.0 * n_members * n_nonmembers))


def _accuracy_precision(pred_members: np.ndarray, pred_nonmembers: np.ndarray) -> tuple[float, float]:
    """Accuracy and precision of boolean "is a member" predictions on members and non-members."""
    tp, fp = int(pred_members.sum()), int(pred_nonmembers.sum())
    tn = len(pred_nonmembers) - fp
    accuracy = (tp + tn) / (len(pred_members) + len(pred_nonmembers))
    precision = tp / (tp + fp) if tp + fp else float("nan")
    return accuracy, precision


def best_threshold(member_scores: np.ndarray, nonmember_scores: np.ndarray) -> float:
    """The cut t maximising accuracy of "member iff score >= t" (t = +inf: no member)."""
    scores = np.concatenate([member_scores, nonmember_scores])
    labels = np.concatenate([np.ones(len(member_scores)), np.zeros(len(nonmember_scores))])
    order = np.argsort(-scores, kind="stable")
    s, lab = scores[order], labels[order]
    tp, fp = np.cumsum(lab), np.cumsum(1 - lab)
    last_of_value = np.append(s[1:] != s[:-1], True)  # cut only between distinct scores
    correct = np.concatenate([[len(nonmember_scores)], (tp + (len(nonmember_scores) - fp))[last_of_value]])
    cuts = np.concatenate([[np.inf], s[last_of_value]])
    return float(cuts[int(np.argmax(correct))])


# ---------------------------------------------------------------------------------------------
# Threshold attacks
# ---------------------------------------------------------------------------------------------


def _balance(n_members: int, n_nonmembers: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Indices of equally many members and non-members (the larger side subsampled, sorted)."""
    n = min(n_members, n_nonmembers)
    pick = lambda total: np.sort(rng.choice(total, n, replace=False)) if total > n else np.arange(total)  # noqa: E731
    return pick(n_members), pick(n_nonmembers)


def _check_sizes(n_members: int, n_nonmembers: int, need: int = 2) -> None:
    if n_members < need:
        raise ValueError(f"membership inference needs at least {need} member samples, got {n_members}")
    if n_nonmembers < need:
        raise ValueError(f"membership inference needs at least {need} non-member samples, got {n_nonmembers}")


def threshold_attack(
    name: str, member_scores: np.ndarray, nonmember_scores: np.ndarray, *, seed: int = 0, balance: bool = True
) -> AttackResult:
    """Score-threshold attack ("member iff score >= t") on precomputed scores.

    Balanced, then split in halves per side (stream ``mia/split``): the threshold is fitted on
    the calibration half, accuracy/precision are measured on the evaluation half, the AUC on all.
    """
    _check_sizes(len(member_scores), len(nonmember_scores))
    streams = Streams(seed)
    if balance:
        im, inn = _balance(len(member_scores), len(nonmember_scores), streams.numpy(PURPOSE, "balance", name))
        member_scores, nonmember_scores = member_scores[im], nonmember_scores[inn]
    rng = streams.numpy(PURPOSE, "split", name)
    pm, pn = rng.permutation(len(member_scores)), rng.permutation(len(nonmember_scores))
    hm, hn = len(pm) // 2, len(pn) // 2
    cal_m, ev_m = member_scores[pm[:hm]], member_scores[pm[hm:]]
    cal_n, ev_n = nonmember_scores[pn[:hn]], nonmember_scores[pn[hn:]]
    t = best_threshold(cal_m, cal_n)
    accuracy, precision = _accuracy_precision(ev_m >= t, ev_n >= t)
    auc = auc_score(member_scores, nonmember_scores)
    n1, n0 = len(member_scores), len(nonmember_scores)
    return AttackResult(name, accuracy, precision, auc, n1, n0, threshold=t,
                        extra={"calibration": [hm, hn], "evaluation": [len(ev_m), len(ev_n)],
                               "predicted_members": int((ev_m >= t).sum() + (ev_n >= t).sum()),
                               "auc_null_se": auc_null_se(n1, n0)})


def loss_threshold_attack(
    model: nn.Module, weights: torch.Tensor | None, members: ArrayDataset, nonmembers: ArrayDataset,
    *, seed: int = 0, balance: bool = True,
) -> AttackResult:
    """Loss-threshold attack: "member iff cross-entropy <= t" (score = -loss).

    ``threshold`` in the result is on the score, i.e. minus the loss cut."""
    _check_sizes(len(members), len(nonmembers))
    m, n = model_outputs(model, weights, members), model_outputs(model, weights, nonmembers)
    result = threshold_attack(AttackKind.LOSS.value, -m.loss, -n.loss, seed=seed, balance=balance)
    extra = {**result.extra, "member_loss": float(m.loss.mean()), "nonmember_loss": float(n.loss.mean())}
    return replace(result, extra=extra)


def confidence_threshold_attack(
    model: nn.Module, weights: torch.Tensor | None, members: ArrayDataset, nonmembers: ArrayDataset,
    *, seed: int = 0, balance: bool = True,
) -> AttackResult:
    """Confidence-threshold attack: "member iff the largest softmax probability >= t" (no label)."""
    _check_sizes(len(members), len(nonmembers))
    m, n = model_outputs(model, weights, members), model_outputs(model, weights, nonmembers)
    return threshold_attack(AttackKind.CONFIDENCE.value, m.probs.max(1), n.probs.max(1), seed=seed, balance=balance)


# ---------------------------------------------------------------------------------------------
# Shadow-model attack
# ---------------------------------------------------------------------------------------------


def attack_features(out: Outputs) -> np.ndarray:
    """Logs of the sorted softmax vector (top 10) and of the true label's probability."""
    k = min(TOP_K, out.probs.shape[1])
    top = -np.sort(-out.probs, axis=1)[:, :k]
    true = out.probs[np.arange(len(out.labels)), out.labels][:, None]
    return np.log(np.clip(np.concatenate([top, true], axis=1), 1e-30, None))


@dataclass
class ShadowAttacker:
    """An attack classifier fitted on shadow models; reusable across target models."""

    classifier: Any  # a fitted sklearn pipeline
    num_shadows: int
    shadow_size: int
    shadow_train_accuracy: float  # attack accuracy on the shadow records it was fitted on
    epochs: int

    def attack(
        self, model: nn.Module, weights: torch.Tensor | None, members: ArrayDataset, nonmembers: ArrayDataset,
        *, seed: int = 0, balance: bool = True,
    ) -> AttackResult:
        """Apply the classifier to the target's outputs on members and non-members."""
        _check_sizes(len(members), len(nonmembers), need=1)
        if balance:
            im, inn = _balance(len(members), len(nonmembers),
                               Streams(seed).numpy(PURPOSE, "balance", AttackKind.SHADOW.value))
            members, nonmembers = members.subset(im), nonmembers.subset(inn)
        pm = self.classifier.predict_proba(attack_features(model_outputs(model, weights, members)))[:, 1]
        pn = self.classifier.predict_proba(attack_features(model_outputs(model, weights, nonmembers)))[:, 1]
        accuracy, precision = _accuracy_precision(pm >= 0.5, pn >= 0.5)
        predicted = int((pm >= 0.5).sum() + (pn >= 0.5).sum())
        return AttackResult(
            AttackKind.SHADOW.value, accuracy, precision, auc_score(pm, pn), len(pm), len(pn), threshold=0.5,
            extra={"num_shadows": self.num_shadows, "shadow_size": self.shadow_size, "shadow_epochs": self.epochs,
                   "shadow_fit_accuracy": self.shadow_train_accuracy, "predicted_members": predicted,
                   "auc_null_se": auc_null_se(len(pm), len(pn))},
        )


def train_shadow_attacker(
    model_fn: Callable[[], nn.Module], pool: ArrayDataset, train: TrainConfig, *, num_shadows: int = 4,
    shadow_size: int | None = None, epochs: int | None = None, seed: int = 0,
) -> ShadowAttacker:
    """Train ``num_shadows`` shadow models on the attacker's ``pool`` and fit the attack classifier.

    Shadow k trains on ``shadow_size`` samples of a random split of ``pool`` (default and
    maximum: half of it) and is evaluated on as many other samples of ``pool``: its records are
    (features, 1) for the in-samples and (features, 0) for the out-samples.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if num_shadows < 1:
        raise ValueError(f"num_shadows must be >= 1, got {num_shadows}")
    half = len(pool) // 2
    size = half if shadow_size is None else min(int(shadow_size), half)
    if size < 2:
        raise ValueError(f"the shadow pool has {len(pool)} samples: at least 4 are needed (2 in, 2 out)")
    epochs = train.epochs if epochs is None else int(epochs)
    streams = Streams(seed)
    feats, labels = [], []
    for k in range(num_shadows):
        perm = streams.numpy(PURPOSE, "shadow-split", k).permutation(len(pool))
        inside, outside = pool.subset(np.sort(perm[:size])), pool.subset(np.sort(perm[size : 2 * size]))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(streams.seed(PURPOSE, "shadow-init", k))
            model = model_fn()
        sgd_epochs(model, inside, train, streams.torch(PURPOSE, "shadow-train", k), epochs=epochs)
        for data, label in ((inside, 1), (outside, 0)):
            feats.append(attack_features(model_outputs(model, None, data)))
            labels.append(np.full(len(data), label))
    x, y = np.concatenate(feats), np.concatenate(labels)
    classifier = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    classifier.fit(x, y)
    fit_accuracy = float((classifier.predict(x) == y).mean())
    return ShadowAttacker(classifier, num_shadows, size, fit_accuracy, epochs)


def shadow_model_attack(
    model: nn.Module, weights: torch.Tensor | None, members: ArrayDataset, nonmembers: ArrayDataset,
    shadow_pool: ArrayDataset, train: TrainConfig, *, model_fn: Callable[[], nn.Module] | None = None,
    num_shadows: int = 4, shadow_size: int | None = None, epochs: int | None = None, seed: int = 0,
    balance: bool = True,
) -> AttackResult:
    """Shadow-model attack in one call (train the attacker on ``shadow_pool``, then attack).

    ``shadow_pool`` must be disjoint from the target's training data and from ``nonmembers``.
    ``model_fn`` builds a fresh model of the target's architecture (default: a deep copy of
    ``model``, re-initialised by its layers' ``reset_parameters``)."""
    attacker = train_shadow_attacker(model_fn or _copier(model), shadow_pool, train, num_shadows=num_shadows,
                                     shadow_size=shadow_size, epochs=epochs, seed=seed)
    return attacker.attack(model, weights, members, nonmembers, seed=seed, balance=balance)


def _copier(model: nn.Module) -> Callable[[], nn.Module]:
    import copy

    def fresh() -> nn.Module:
        m = copy.deepcopy(model)
        for layer in m.modules():
            if hasattr(layer, "reset_parameters"):
                layer.reset_parameters()
        return m

    return fresh


# ---------------------------------------------------------------------------------------------
# Audit: every attack, every model, one set of samples
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AuditConfig:
    """What an audit runs and on how many samples."""

    attacks: tuple[AttackKind, ...] = (AttackKind.LOSS, AttackKind.CONFIDENCE, AttackKind.SHADOW)
    max_samples: int | None = 2000  # per side (members, non-members)
    match_labels: bool = True
    num_shadows: int = 4
    shadow_size: int | None = None  # default: as many as the audited members
    shadow_epochs: int | None = None  # default: the run's local epochs
    min_shadow_pool: int = 20
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "attacks", tuple(AttackKind(a) for a in self.attacks))
        if not self.attacks:
            raise ValueError("audit.attacks: name at least one attack")
        if self.max_samples is not None and self.max_samples < 2:
            raise ValueError(f"audit.max_samples must be >= 2, got {self.max_samples}")
        if self.num_shadows < 1:
            raise ValueError(f"audit.num_shadows must be >= 1, got {self.num_shadows}")


@dataclass(frozen=True)
class AuditSets:
    """Balanced members and non-members, and the rest of the unseen data (the attacker's pool)."""

    members: ArrayDataset
    nonmembers: ArrayDataset
    rest: ArrayDataset


def audit_sets(
    members: ArrayDataset, unseen: ArrayDataset, rng: np.random.Generator, max_samples: int | None = None,
    match_labels: bool = True,
) -> AuditSets:
    """Equally many members and non-members (from ``unseen``); the unused unseen samples as ``rest``.

    With ``match_labels`` both sides get the same number of samples of every class (the smaller
    of the two counts), so a label-skewed client is compared with unseen data of its labels.
    At most ``max_samples`` per side, drawn uniformly (per class in proportion)."""
    _check_sizes(len(members), len(unseen), need=1)
    ym, yu = members.y.numpy(), unseen.y.numpy()
    if match_labels:
        pick_m, pick_u = [], []
        for c in np.unique(ym):
            im, iu = np.flatnonzero(ym == c), np.flatnonzero(yu == c)
            k = min(len(im), len(iu))
            pick_m.append(rng.choice(im, k, replace=False))
            pick_u.append(rng.choice(iu, k, replace=False))
        sel_m, sel_u = np.concatenate(pick_m), np.concatenate(pick_u)
    else:
        k = min(len(ym), len(yu))
        sel_m, sel_u = rng.choice(len(ym), k, replace=False), rng.choice(len(yu), k, replace=False)
    if len(sel_m) == 0:
        raise ValueError(f"no unseen sample shares a label with the {len(members)} member samples")
    if max_samples is not None and len(sel_m) > max_samples:
        keep = rng.choice(len(sel_m), max_samples, replace=False)  # same positions: classes stay matched
        sel_m, sel_u = sel_m[keep], sel_u[keep]
    rest = np.setdiff1d(np.arange(len(yu)), sel_u)
    return AuditSets(members.subset(np.sort(sel_m)), unseen.subset(np.sort(sel_u)), unseen.subset(rest))


@dataclass
class AuditReport:
    """Every attack on every model, with the sample counts and any attack that was skipped."""

    results: dict[str, list[AttackResult]]  # model name -> one result per attack
    n_members: int
    n_nonmembers: int
    shadow_pool: int
    notes: list[str] = field(default_factory=list)

    def rows(self) -> list[dict[str, Any]]:
        """One flat row per (model, attack)."""
        return [{"model": name, **r.as_dict()} for name, rs in self.results.items() for r in rs]

    def as_dict(self) -> dict[str, Any]:
        return {"n_members": self.n_members, "n_nonmembers": self.n_nonmembers, "shadow_pool": self.shadow_pool,
                "notes": list(self.notes), "results": self.rows()}

    def table(self) -> str:
        """A plain-text table (percentages)."""
        lines = [f"{'model':<12} {'attack':<11} {'acc %':>6} {'prec %':>7} {'AUC %':>6} {'+-2se':>6} {'n':>6}"]
        for row in self.rows():
            prec = "-" if row["precision"] is None else f"{100 * row['precision']:.2f}"
            se = row["extra"].get("auc_null_se")
            lines.append(f"{row['model']:<12} {row['attack']:<11} {100 * row['accuracy']:>6.2f} {prec:>7} "
                         f"{100 * row['auc']:>6.2f} {'' if se is None else f'{200 * se:.2f}':>6} "
                         f"{row['n_members']:>6}")
        return "\n".join(lines + [f"note: {n}" for n in self.notes])


def audit(
    model_fn: Callable[[], nn.Module], models: Mapping[str, torch.Tensor], members: ArrayDataset,
    unseen: ArrayDataset, train: TrainConfig, config: AuditConfig = AuditConfig(),
    shadow_data: ArrayDataset | None = None, attacker: ShadowAttacker | None = None,
) -> AuditReport:
    """Run the configured attacks against every model in ``models`` (name -> flat weights).

    ``members``: the removed client(s)' training samples; ``unseen``: data no model saw (the test
    set). The balanced member/non-member sets are drawn once (:func:`audit_sets`) and shared by
    all models and attacks. The shadow attacker trains once on the unseen samples left over
    (plus ``shadow_data``, which must also be unseen by every model), unless ``attacker`` is
    given; with fewer than ``config.min_shadow_pool`` samples the shadow attack is skipped."""
    if not models:
        raise ValueError("audit: no model to attack")
    streams = Streams(config.seed)
    notes: list[str] = []
    wants_shadows = AttackKind.SHADOW in config.attacks and attacker is None
    max_samples = config.max_samples
    if wants_shadows and shadow_data is None and len(unseen) // 2 < (max_samples or len(unseen)):
        max_samples = len(unseen) // 2  # keep half of the unseen data for the shadow models
        notes.append(f"non-members limited to {max_samples}, half of the {len(unseen)} unseen samples: the other "
                     f"half is the shadow models' pool")
    sets = audit_sets(members, unseen, streams.numpy(PURPOSE, "sets"), max_samples, config.match_labels)
    pool = sets.rest if shadow_data is None else concat([sets.rest, shadow_data])
    if wants_shadows:
        if len(pool) >= config.min_shadow_pool:
            size = config.shadow_size or len(sets.members)
            attacker = train_shadow_attacker(model_fn, pool, train, num_shadows=config.num_shadows,
                                             shadow_size=size, epochs=config.shadow_epochs, seed=config.seed)
            if attacker.shadow_size < size:
                notes.append(f"shadow models trained on {attacker.shadow_size} samples each (the pool of "
                             f"{len(pool)} unseen samples allows no more), fewer than the {size} asked")
        else:
            notes.append(f"shadow attack skipped: only {len(pool)} unseen samples are left for shadow models "
                         f"(need {config.min_shadow_pool})")
    model = model_fn()
    results: dict[str, list[AttackResult]] = {}
    for name, weights in models.items():
        rs = []
        for kind in config.attacks:
            if kind is AttackKind.LOSS:
                rs.append(loss_threshold_attack(model, weights, sets.members, sets.nonmembers, seed=config.seed))
            elif kind is AttackKind.CONFIDENCE:
                rs.append(confidence_threshold_attack(model, weights, sets.members, sets.nonmembers, seed=config.seed))
            elif attacker is not None:
                rs.append(attacker.attack(model, weights, sets.members, sets.nonmembers, seed=config.seed))
        results[name] = rs
    return AuditReport(results, len(sets.members), len(sets.nonmembers), len(pool), notes)


def concat(parts: Sequence[ArrayDataset]) -> ArrayDataset:
    """Several data sets of one kind as one, e.g. every removed client's samples (groups dropped)."""
    parts = [p for p in parts if len(p)]
    if not parts:
        raise ValueError("nothing to concatenate")
    return ArrayDataset(torch.cat([p.x for p in parts]), torch.cat([p.y for p in parts]), parts[0].num_classes,
                        parts[0].name)
