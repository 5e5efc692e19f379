"""The editor interface every method sits behind, and the report every edit returns.

An editor holds a model that tracks a changing client set. ``fit`` trains on an initial set;
``remove``, ``add`` and ``batch`` apply requests. The template methods here validate the
request against the current client set first (unknown client, duplicate, empty set) and time
the edit; subclasses implement ``_fit`` and ``_edit``. A request that raises leaves the
editor as it was.

Quarantine. A client whose fresh upload is unusable (NaN/Inf, wrong shape or dtype: an
:class:`InvalidContributionError` naming it) never blocks the request that drew it: it is taken
out of the client set as if it had left (or, if it was arriving, as if it had not come), its
reason kept in ``quarantined`` and in the report, and the request completes. The sampling
editors (F-SOSA family) do this inside the edit, with the departure coupling applied to the
subset just drawn (see ``FSOSAEditor._apply_quarantining``); editors whose every client
contributes retry the request without that client here.
If the request cannot be applied without that client (a fixed subset size ``P`` and fewer than
``P`` clients left), it is refused as it would be had the client left, the error naming both.
"""

from __future__ import annotations

import functools
import time
from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import torch

from ..errors import DuplicateClientError, EditError, EmptyPopulationError, InvalidContributionError, UnknownClientError
from ..payload import ByteAccount, zero_bytes
from ..projection import SolveInfo
from ..sampler import ordered


@dataclass
class EditReport(ByteAccount):
    """What one request did and what it cost."""

    method: str
    kind: str  # fit | remove | add | batch
    removed: tuple = ()
    added: tuple = ()
    triggered: bool = False
    left: tuple = ()  # S-: members that left the subset
    joined: tuple = ()  # S+: members that joined it
    trained: tuple = ()  # clients that trained for this request
    population: int = 0
    subset_size: int = 0
    bytes: dict[str, int] = field(default_factory=zero_bytes)
    transfers: list[dict[str, Any]] = field(default_factory=list)
    compute_s: float = 0.0  # local training + Fisher, summed over the clients that trained
    max_client_compute_s: float = 0.0  # the slowest client (parallel on-board training)
    client_compute_s: dict = field(default_factory=dict)  # client -> its measured compute (when not pool-based)
    client_work: dict = field(
        default_factory=dict
    )  # client -> its local training in sample-epochs (when not pool-based)
    solve_s: float = 0.0
    wall_s: float = 0.0
    solve: SolveInfo | None = None
    quarantined: dict = field(default_factory=dict)  # client -> why its upload was refused

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready copy (``dataclasses.asdict`` deep-copies every leaf: 0.4 s of a 7 s ``vmc run``)."""
        d = {f.name: _copied(getattr(self, f.name)) for f in fields(self) if f.name != "solve"}
        d["solve"] = self.solve.as_dict() if self.solve else None
        d["total_bytes"] = self.total_bytes
        for key in ("removed", "added", "left", "joined", "trained"):
            d[key] = list(d[key])
        return d


def _copied(value: Any) -> Any:
    """``value`` with its dicts, lists and tuples copied (leaves are immutable: ids, numbers, strings)."""
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copied(v) for v in value]
    if type(value) is tuple:
        return tuple(_copied(v) for v in value)
    return value


class Editor(ABC):
    """A method that keeps a model in step with a changing client set."""

    name: str = "editor"

    def __init__(self) -> None:
        self.clients: set[Hashable] = set()
        self.model: torch.Tensor | None = None
        self.quarantined: dict[Hashable, str] = {}  # client -> why it was taken out

    # -- template ----------------------------------------------------------------------------
    def fit(self, clients: Iterable[Hashable]) -> EditReport:
        """Train on an initial client set (clients with unusable uploads are quarantined)."""
        clients = list(clients)
        if not clients:
            raise EmptyPopulationError(f"{self.name}: cannot fit on an empty client set")
        if len(set(clients)) != len(clients):
            raise DuplicateClientError(f"{self.name}: the initial client set lists a client twice")
        request = tuple(ordered(clients))
        quarantined: dict[Hashable, str] = {}
        while True:
            if not clients:
                raise EmptyPopulationError(f"{self.name}: every initial client was quarantined: {quarantined!r}")
            try:
                report = self._timed(EditReport(self.name, "fit", added=request), functools.partial(self._fit, clients))
            except InvalidContributionError as e:
                if e.client not in clients or e.client in quarantined:
                    raise
                clients = [c for c in clients if c != e.client]
                self._quarantine(e, quarantined)
                continue
            self._quarantined(report, quarantined)
            return report

    def remove(self, client: Hashable) -> EditReport:
        """A departing client withdraws its contribution."""
        return self.batch([client], [], kind="remove")

    def add(self, client: Hashable) -> EditReport:
        """A new client asks to contribute."""
        return self.batch([], [client], kind="add")

    def batch(self, removed: Sequence[Hashable], added: Sequence[Hashable], kind: str = "batch") -> EditReport:
        """Departures and arrivals handled together (one solve at most)."""
        removed, added = list(removed), list(added)
        self._validate(removed, added)
        quarantined: dict[Hashable, str] = {}
        while True:
            report = EditReport(self.name, kind, removed=tuple(removed), added=tuple(added))
            if not removed and not added:  # the request's only arrival was quarantined
                report.population = len(self.clients)
                report.subset_size = len(getattr(self, "members", ()))
            else:
                try:
                    report = self._timed(report, lambda r: self._edit(removed, added, r))
                except EditError as e:
                    if not quarantined:
                        raise
                    raise type(e)(f"{e} (with {self._named(quarantined)} quarantined)") from e
                except InvalidContributionError as e:
                    c = e.client
                    if c is None or c in removed or c in quarantined or not (c in added or c in self.clients):
                        raise
                    if c in added:
                        added.remove(c)
                    else:
                        removed.append(c)
                    self._quarantine(e, quarantined)
                    continue
            self._quarantined(report, quarantined)
            return report

    def _quarantined(self, report: EditReport, earlier: dict[Hashable, str]) -> None:
        """Record the clients quarantined by this request (by a retry here or by the editor)."""
        report.quarantined = {**earlier, **report.quarantined}
        self.quarantined.update(report.quarantined)
        pool = getattr(self, "pool", None)
        for c in report.quarantined:
            if pool is not None:
                pool.forget(c)

    @staticmethod
    def _named(quarantined: dict[Hashable, str]) -> str:
        return "; ".join(f"client {c!r}: {why}" for c, why in quarantined.items())

    def _quarantine(self, error: InvalidContributionError, into: dict[Hashable, str]) -> None:
        into[error.client] = str(error)

    # -- hooks -------------------------------------------------------------------------------
    @abstractmethod
    def _fit(self, clients: list[Hashable], report: EditReport) -> None: ...

    @abstractmethod
    def _edit(self, removed: list[Hashable], added: list[Hashable], report: EditReport) -> None: ...

    def state_bytes(self) -> int:
        """Bytes of the coordinator's persistent state between requests."""
        return 0

    def refit(self, members: Sequence[Hashable], solve: dict[str, Any] | None = None) -> torch.Tensor:
        """The model a fresh fit on exactly ``members`` gives: what ``vmc certify`` compares a released
        model with. Here this editor's own ``fit`` (call it on a fresh editor); an editor whose fit
        draws a subset merges the given members instead, at the recorded ``solve`` (a record's
        ``solve`` field) when it names one."""
        self.fit(members)
        assert self.model is not None  # fit sets it
        return self.model

    # -- helpers -------------------------------------------------------------------------------
    def _fitted(self) -> bool:
        """Whether ``fit`` has been called (an editor may hold no model yet after it)."""
        return self.model is not None

    def _validate(self, removed: list[Hashable], added: list[Hashable]) -> None:
        if not self._fitted():
            raise EditError(f"{self.name}: call fit() before editing")
        if not removed and not added:
            raise EditError(f"{self.name}: empty request")
        if len(set(removed)) != len(removed):
            raise UnknownClientError(f"{self.name}: removal lists a client twice: {removed!r}")
        if len(set(added)) != len(added):
            raise DuplicateClientError(f"{self.name}: addition lists a client twice: {added!r}")
        for c in removed:
            if c not in self.clients:
                why = f" (quarantined: {self.quarantined[c]})" if c in self.quarantined else ""
                raise UnknownClientError(f"{self.name}: client {c!r} is not in the current client set{why}")
        for c in added:
            if c in self.clients or c in removed:
                raise DuplicateClientError(f"{self.name}: client {c!r} is already in the client set")
        if not (self.clients - set(removed)) | set(added):
            raise EmptyPopulationError(f"{self.name}: the request would leave no client")

    def _timed(self, report: EditReport, body) -> EditReport:
        t0 = time.perf_counter()
        body(report)
        report.wall_s = time.perf_counter() - t0
        report.population = len(self.clients)
        return report
