"""A membership-inference audit: every attack of :mod:`fl_core.mia`, on every model, over one set of
members (a removed client's samples) and non-members drawn with the members' label histogram."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from .data import ArrayDataset
from .mia import (
    AttackKind,
    AttackResult,
    ShadowAttacker,
    check_sizes,
    confidence_threshold_attack,
    loss_threshold_attack,
    train_shadow_attacker,
)
from .rng import Streams
from .training import TrainConfig

PURPOSE = "mia"
TOP_K = 10  # sorted softmax entries the shadow attack classifier sees


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
    members: ArrayDataset,
    unseen: ArrayDataset,
    rng: np.random.Generator,
    max_samples: int | None = None,
    match_labels: bool = True,
) -> AuditSets:
    """Equally many members and non-members (from ``unseen``); the unused unseen samples as ``rest``.

    With ``match_labels`` both sides get the same number of samples of every class (the smaller
    of the two counts), so a label-skewed client is compared with unseen data of its labels.
    At most ``max_samples`` per side, drawn uniformly (per class in proportion)."""
    check_sizes(len(members), len(unseen), need=1)
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
        return {
            "n_members": self.n_members,
            "n_nonmembers": self.n_nonmembers,
            "shadow_pool": self.shadow_pool,
            "notes": list(self.notes),
            "results": self.rows(),
        }

    def table(self) -> str:
        """A plain-text table (percentages)."""
        lines = [f"{'model':<12} {'attack':<11} {'acc %':>6} {'prec %':>7} {'AUC %':>6} {'+-2se':>6} {'n':>6}"]
        for row in self.rows():
            prec = "-" if row["precision"] is None else f"{100 * row['precision']:.2f}"
            se = row["extra"].get("auc_null_se")
            lines.append(
                f"{row['model']:<12} {row['attack']:<11} {100 * row['accuracy']:>6.2f} {prec:>7} "
                f"{100 * row['auc']:>6.2f} {'' if se is None else f'{200 * se:.2f}':>6} "
                f"{row['n_members']:>6}"
            )
        return "\n".join(lines + [f"note: {n}" for n in self.notes])


def audit(
    model_fn: Callable[[], nn.Module],
    models: Mapping[str, torch.Tensor],
    members: ArrayDataset,
    unseen: ArrayDataset,
    train: TrainConfig,
    config: AuditConfig = AuditConfig(),
    shadow_data: ArrayDataset | None = None,
    attacker: ShadowAttacker | None = None,
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
        notes.append(
            f"non-members limited to {max_samples}, half of the {len(unseen)} unseen samples: the other "
            f"half is the shadow models' pool"
        )
    sets = audit_sets(members, unseen, streams.numpy(PURPOSE, "sets"), max_samples, config.match_labels)
    pool = sets.rest if shadow_data is None else concat([sets.rest, shadow_data])
    if wants_shadows:
        if len(pool) >= config.min_shadow_pool:
            size = config.shadow_size or len(sets.members)
            attacker = train_shadow_attacker(
                model_fn,
                pool,
                train,
                num_shadows=config.num_shadows,
                shadow_size=size,
                epochs=config.shadow_epochs,
                seed=config.seed,
            )
            if attacker.shadow_size < size:
                notes.append(
                    f"shadow models trained on {attacker.shadow_size} samples each (the pool of "
                    f"{len(pool)} unseen samples allows no more), fewer than the {size} asked"
                )
        else:
            notes.append(
                f"shadow attack skipped: only {len(pool)} unseen samples are left for shadow models "
                f"(need {config.min_shadow_pool})"
            )
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
    return ArrayDataset(
        torch.cat([p.x for p in parts]), torch.cat([p.y for p in parts]), parts[0].num_classes, parts[0].name
    )
