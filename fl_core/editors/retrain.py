"""Retrain: on every request, rerun F-SOSA from scratch on the updated client set.

A fresh uniform subset of the current target size is drawn, every member trains from W0 and
uploads its model and Fisher, and the statistics and projection are rebuilt. This is the
reference that F-SOSA-I/U must match in distribution (seed 000, VI-A) and the cost they save.
Contributions are deterministic, so a member that trained before may hand over the same
tensors; its measured compute time is charged again all the same.
"""

from __future__ import annotations

from collections.abc import Hashable

from ..payload import ByteKind, control_size
from ..sampler import SubsetChange, ordered
from .base import EditReport
from .fsosa import FSOSAEditor


class RetrainEditor(FSOSAEditor):
    name = "retrain"
    reuses_held = False  # retraining means every member trains again

    def _refit(self, clients: set[Hashable], report: EditReport) -> None:
        snapshot = self._snapshot()
        try:
            members = self.sampler.fresh(clients)
            self.sampler.clients, self.sampler.members = set(clients), set()
            self.stats = self._new_stats()
            change = SubsetChange(left=(), joined=tuple(ordered(members)))
            self.sampler.members = set(members)
            self._apply_quarantining(change, report, removed=[], before=set())
        except Exception:
            self._restore(snapshot)
            raise

    def _fit(self, clients: list[Hashable], report: EditReport) -> None:
        self._refit(set(clients), report)
        self.clients = set(clients) - set(report.quarantined)

    def _edit(self, removed: list[Hashable], added: list[Hashable], report: EditReport) -> None:
        old = set(self.sampler.members)
        new_clients = (self.clients - set(removed)) | set(added)
        report.charge(ByteKind.CONTROL, control_size({"removed": removed, "added": added}))
        self._refit(new_clients, report)
        report.left = tuple(ordered(old - self.sampler.members))
        report.joined = tuple(ordered(self.sampler.members - old))
        self.clients = new_clients - set(report.quarantined)
        for c in removed:
            self.pool.forget(c)
