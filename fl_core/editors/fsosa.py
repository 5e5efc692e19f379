"""F-SOSA (Algorithm 1) and its exact edits: F-SOSA-U (Alg. 2), F-SOSA-I (Alg. 3) and
F-SOSA-Batch (Alg. 4), for a fixed subset size or a fixed ratio ``P_t = floor(rho M(t))``.

A triggered edit trains and transfers only the clients that change: members that leave the
subset upload their original contribution again (for K-FAC, whose factors the coordinator
keeps per member, only their model), clients that join train from W0 and upload. A client that
joins while still holding the contribution it computed for this editor earlier (it was a member,
was swapped out by a coupling and never left) does not train again: it uploads what it holds,
and no W0 is broadcast for it. One solve per triggered request; an untriggered request reuses
the model and costs one control message.

The merge (``fl_core.projection``) weights members by sample count and, when the pool carries
the server's validator, selects its damping on the held-out validation set.

Uploads that never arrive. A pool whose ``train`` raises :class:`fl_core.errors.UploadLostError`
(a Flower node's reply lost on the radio) leaves the drawn client a member whose contribution is
not in the statistics (``unarrived``): the merge holds only what arrived (no solve while nothing
did), and removing the client later, as the caller must (F-SOSA-U's take-out), subtracts nothing
and asks nothing of it. The draws are those of an edit whose every upload arrived.

FedFisher (all clients, ``rho = 1``) and one-shot FedAvg (all clients, no Fisher: the fused
model is the plain mean of the members' weights) are this editor with other settings; see
``fl_core.editors.build_editor``.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import torch

from ..clients import ClientPool
from ..errors import EditError, InvalidContributionError, UploadLostError
from ..fisher import FisherSum
from ..payload import ByteKind, control_size
from ..projection import SolveInfo, project
from ..projection_config import ProjectionConfig
from ..sampler import SizeRule, SubsetChange, SubsetSampler, ordered
from ..stats import SufficientStatistics
from .base import Editor, EditReport


class FSOSAEditor(Editor):
    name = "fsosa"
    reuses_held = True  # a rejoining client uploads the contribution it holds instead of training

    def __init__(
        self,
        pool: ClientPool,
        rule: SizeRule,
        rng: np.random.Generator,
        fisher_sum_factory,
        projection: ProjectionConfig = ProjectionConfig(),
        name: str | None = None,
        validator=None,
    ) -> None:
        super().__init__()
        self.validator = validator  # the server's held-out scorer (selects the merge's damping)
        if name:
            self.name = name
        self.pool = pool
        self.rule = rule
        self.rng = rng
        self.projection = projection
        self._fisher_sum_factory = fisher_sum_factory
        self.sampler = SubsetSampler(rule, rng)
        self.holders: set[Hashable] = set()  # clients holding a contribution they computed for this editor
        self.unarrived: set[Hashable] = set()  # members whose upload never arrived (not in the statistics)
        self.stats: SufficientStatistics | None = None
        self.last_solve: SolveInfo | None = None
        self._previous_mean: torch.Tensor | None = None
        self._w0_bytes: int | None = None

    @property
    def members(self) -> set[Hashable]:
        return set(self.sampler.members)

    def _fitted(self) -> bool:
        return self.stats is not None  # a fit whose every upload was lost holds no model yet

    def _new_stats(self) -> SufficientStatistics:
        fsum: FisherSum | None = self._fisher_sum_factory()
        return SufficientStatistics(self.pool.trainer.w0.numel(), fsum, self.projection.weighting)

    def _model_bytes(self) -> int:
        """Bytes of one W0 broadcast (fixed for the run, so measured once)."""
        if self._w0_bytes is None:
            from ..payload import serialized_size

            self._w0_bytes = serialized_size({"weights": self.pool.trainer.w0})
        return self._w0_bytes

    # -- Algorithm 1 -----------------------------------------------------------------------
    def _fit(self, clients: list[Hashable], report: EditReport) -> None:
        snapshot = self._snapshot()
        try:
            change = self.sampler.initialize(clients)
            self.stats = self._new_stats()
            self._apply_quarantining(change, report, removed=[], before=set())
        except Exception:
            self._restore(snapshot)
            raise
        self.clients = set(clients) - set(report.quarantined)

    # -- Algorithms 2-4 ----------------------------------------------------------------------
    def _edit(self, removed: list[Hashable], added: list[Hashable], report: EditReport) -> None:
        snapshot = self._snapshot()
        try:
            if len(removed) == 1 and not added:
                change = self.sampler.remove(removed[0])
            elif len(added) == 1 and not removed:
                change = self.sampler.add(added[0])
            else:
                change = self.sampler.batch(removed, added)
            report.charge(ByteKind.CONTROL, control_size({"removed": removed, "added": added}))
            self._apply_quarantining(change, report, removed, before=snapshot[1])
        except Exception:
            self._restore(snapshot)
            raise
        self.clients = ((self.clients - set(removed)) | set(added)) - set(report.quarantined)
        self.holders -= set(removed)
        for c in removed:
            self.pool.forget(c)

    def _apply_quarantining(
        self, change: SubsetChange, report: EditReport, removed: list[Hashable], before: set[Hashable]
    ) -> None:
        """:meth:`_apply_change`, with a joining client whose upload is unusable quarantined: it
        leaves the subset just drawn by the departure coupling (exact for that uniform subset),
        and the net change from ``before`` is applied instead. The random state is not rewound:
        the quarantine depends on the draws, so reusing them would bias the next ones."""
        while True:
            snapshot = self._snapshot()
            sent = (dict(report.bytes), len(report.transfers), report.compute_s, report.max_client_compute_s)
            try:
                self._apply_change(change, report, removed)
                return
            except InvalidContributionError as e:
                c = e.client
                if c is None or c not in change.joined:
                    raise
                drawn = (set(self.sampler.clients), set(self.sampler.members), self.sampler.rng.bit_generator.state)
                self._restore(snapshot)
                self.sampler.clients, self.sampler.members, self.sampler.rng.bit_generator.state = drawn
                report.bytes, report.compute_s, report.max_client_compute_s = sent[0], sent[2], sent[3]
                del report.transfers[sent[1] :]
                try:
                    self.sampler.remove(c)
                except EditError as err:
                    raise type(err)(f"{err} (with client {c!r} quarantined: {e})") from err
                report.quarantined[c] = str(e)
                members = self.sampler.members
                change = SubsetChange(left=tuple(ordered(before - members)), joined=tuple(ordered(members - before)))

    def _apply_change(self, change: SubsetChange, report: EditReport, removed: list[Hashable]) -> None:
        report.left, report.joined = change.left, change.joined
        report.subset_size = len(self.sampler.members)
        if not change.triggered:
            return
        assert self.stats is not None  # set by _fit before any change is applied
        uses_fisher = self.stats.fisher_sum is not None
        keeps = (
            self.stats.fisher_sum is not None and self.stats.fisher_sum.keeps_members
        )  # uses_fisher, spelled out for mypy

        def shaped(contribution):
            return contribution if uses_fisher else contribution.model_only()

        leaving = []
        for c in change.left:
            if c in self.unarrived:  # nothing of it was aggregated: nothing to subtract, nothing to send
                self.unarrived.discard(c)
                continue
            contribution = shaped(self.pool.recall(c))
            leaving.append(contribution)
            report.charge(ByteKind.MODEL_UPLOAD, contribution.model_bytes, c)
            if contribution.fisher is not None and not keeps:
                report.charge(ByteKind.FISHER_UPLOAD, contribution.fisher_bytes, c)
        joining = []
        trainees = [c for c in change.joined if not (self.reuses_held and c in self.holders)]
        if trainees:
            report.charge(ByteKind.BROADCAST, self._model_bytes(), None)  # W0 to the trainees
        for c in change.joined:
            try:
                contribution = shaped(self.pool.train(c))
            except UploadLostError:
                self.unarrived.add(c)
                continue
            joining.append(contribution)
            if c in trainees:
                report.compute_s += contribution.compute_s
                report.max_client_compute_s = max(report.max_client_compute_s, contribution.compute_s)
            report.charge(ByteKind.MODEL_UPLOAD, contribution.model_bytes, c)
            if contribution.fisher is not None:
                report.charge(ByteKind.FISHER_UPLOAD, contribution.fisher_bytes, c)
        report.trained = tuple(trainees)
        self.stats.apply(leaving, joining)
        self.holders |= set(change.joined)
        report.triggered = True
        if self.unarrived and not self.stats.count:  # every upload of the subset was lost: no model until one arrives
            return
        warm = None
        if self.model is not None and self.stats.count and report.kind != "fit" and self.projection.warm_start:
            assert self._previous_mean is not None  # set together with self.model
            warm = self._previous_mean - self.model.double()
        self.model, report.solve = project(self.stats, self.projection, warm, self.validator)
        self._previous_mean = self.stats.mean()
        report.solve_s = report.solve.seconds
        self.last_solve = report.solve

    # -- atomicity ---------------------------------------------------------------------------
    def _snapshot(self):
        s = self.sampler
        stats_copy = None
        if self.stats is not None:
            st = self.stats
            stats_copy = (
                st.weight_sum.clone(),
                st.total_weight,
                None if st.b is None else st.b.clone(),
                dict(st.fingerprints),
                _copy_sum(st.fisher_sum),
            )
        return (
            set(s.clients),
            set(s.members),
            s.rng.bit_generator.state,
            stats_copy,
            self.model,
            self._previous_mean,
            set(self.holders),
            set(self.unarrived),
        )

    def _restore(self, snap) -> None:
        clients, members, rng_state, stats_copy, model, self._previous_mean, self.holders, self.unarrived = snap
        self.sampler.clients, self.sampler.members = clients, members
        self.sampler.rng.bit_generator.state = rng_state
        self.model = model
        if stats_copy is None:
            self.stats = None
        else:
            assert self.stats is not None  # it was when the snapshot was taken, and edits keep it
            (
                self.stats.weight_sum,
                self.stats.total_weight,
                self.stats.b,
                self.stats.fingerprints,
                self.stats.fisher_sum,
            ) = stats_copy

    def refit(self, members: Sequence[Hashable], solve: dict[str, Any] | None = None) -> torch.Tensor:
        """The merge of exactly ``members``' contributions (no subset is drawn), as a fresh fit on them
        computes it: summed in canonical order and projected from scratch. A recorded ``solve`` that
        selected its damping on the validation set is replayed at the damping it picked
        (:func:`fl_core.projection.project`'s ``choose``); otherwise the merge runs as a fresh fit does
        (the validation set selecting, or the fixed damping)."""
        stats = self._new_stats()
        uses_fisher = stats.fisher_sum is not None
        stats.apply([], [c if uses_fisher else c.model_only() for c in (self.pool.train(m) for m in ordered(members))])
        config = self.projection
        candidates = (solve or {}).get("candidates") or []
        damping = (solve or {}).get("damping")
        if candidates and damping is not None and not config.iterates and "iteration" not in candidates[0]:
            choose = math.inf if damping == "mean" else float(damping)
            return project(stats, config, None, None, choose=choose)[0]
        return project(stats, config, None, self.validator)[0]

    def state_bytes(self) -> int:
        """Sufficient statistics plus the member list; independent of past clients."""
        import json

        base = self.stats.state_bytes() if self.stats else 0
        return base + len(json.dumps([repr(c) for c in ordered(self.sampler.members)]).encode())


def _copy_sum(fsum: FisherSum | None) -> FisherSum | None:
    if fsum is None:
        return None
    import copy

    clone = copy.copy(fsum)
    for attr, value in vars(fsum).items():
        if isinstance(value, torch.Tensor):
            setattr(clone, attr, value.clone())
        elif isinstance(value, dict):
            setattr(clone, attr, dict(value))
    return clone
