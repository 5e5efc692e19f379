"""The record writer: every world's records, in simulated-time order, into the run directory; and
the vocabulary of their fields that writers and readers share (why a model was withdrawn).

Rows of one simulated instant are written by method name, so a file's row order does not depend
on the order of the scenario's methods. On resume the writer checks each recomputed row against
the one on disk instead of writing it, and holds every new row (and the contribution store's
writes) back until the recorded run is re-verified and simulated time is past ``commit_after``:
a resume that fails leaves the run directory as it was.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from enum import Enum
from typing import TYPE_CHECKING, Any

from .directory import RunDir
from .released import ReleasedModels

if TYPE_CHECKING:  # the writer only calls them: no torch for a reader of records
    import torch

    from fl_core.store import ContributionStore

VERIFIED_KEYS = ("index", "kind", "triggered", "left", "joined")
"""The fields a resumed run's recomputed rows must share with the rows on disk."""


def progress_line(row: dict[str, Any]) -> str:
    """One line per record for a log (``vmc run`` with its output piped)."""
    kind = row.get("kind") or row.get("note", "")
    parts = [f"[t={row.get('done_time', 0.0):.0f} s] {row.get('method')} #{row.get('index')} {kind}"]
    if row.get("triggered") is not None:
        parts.append("triggered" if row.get("triggered") else "no change")
    solve = row.get("solve")
    if isinstance(solve, dict) and not solve.get("converged", True):
        parts.append(f"solve stopped before its tolerance (residual {solve.get('residual', float('nan')):.1e})")
    if row.get("accuracy") is not None:
        parts.append(f"acc {100 * row['accuracy']:.2f} %")
    if row.get("host_edit_s") is not None:
        parts.append(f"host {row['host_edit_s']:.2f} s")
    return ", ".join(parts)


class RecordWriter:
    """Orders, verifies (on resume) and appends the records of one run."""

    def __init__(
        self,
        run: RunDir,
        store: ContributionStore,
        progress_lines: bool = False,
        on_record: Callable[[dict], None] | None = None,
        existing: dict[str, list[dict]] | None = None,
        commit_after: float | None = None,
        on_commit: Callable[[], None] | None = None,
        released: ReleasedModels | None = None,
    ) -> None:
        self.run_dir, self.store, self.released = run, store, released
        self.progress_lines, self.on_record = progress_lines, on_record
        self.existing = existing or {}
        self.commit_after, self._on_commit = commit_after, on_commit
        self._held: list[dict[str, Any]] | None = [] if commit_after is not None else None
        if self._held is not None:
            store.hold()
            if released is not None:
                released.hold()
        self._written: dict[str, int] = {}
        self._pending: list[tuple[str, dict[str, Any], torch.Tensor | None]] = []
        self.records = 0

    def emit(self, method: str, row: dict[str, Any], model: torch.Tensor | None = None) -> None:
        """Queue one record of ``method`` (with ``model``, the model it released, if it released one);
        the rows of an instant are written once time moves on."""
        if self._pending and self._pending[0][1].get("done_time") != row.get("done_time"):
            self.flush()
        self._pending.append((method, row, model))

    def flush(self) -> None:
        """Write every queued record (the rows of one simulated instant)."""
        pending, self._pending = sorted(self._pending, key=lambda mr: mr[0]), []
        for method, row, model in pending:
            self._write(method, row, model)

    def _write(self, method: str, row: dict[str, Any], model: torch.Tensor | None = None) -> None:
        """Append one record of ``method`` (on resume: check it against the one on disk instead),
        its released model first (a resume keeps one a killed attempt did not)."""
        k = self._written.get(method, 0)
        self._written[method] = k + 1
        if model is not None and self.released is not None:
            self.released.put(method, k, row, model)
        old = self.existing.get(method, [])
        if k < len(old):
            for key in VERIFIED_KEYS:
                if old[k].get(key) != row.get(key):
                    raise RuntimeError(
                        f"resume diverged from the recorded run: {method} record {k} has {key}="
                        f"{old[k].get(key)!r} on disk and {row.get(key)!r} now"
                    )
            return
        if self._held is not None:
            self._held.append(row)
        else:
            self.run_dir.append_record(row)
        self.records += 1
        if self.progress_lines:
            print(progress_line(row), file=sys.stderr, flush=True)
        if self.on_record:
            self.on_record(row)

    @property
    def committed(self) -> bool:
        """False while a resume still holds its writes back (the run directory is untouched)."""
        return self._held is None

    def maybe_commit(self, now: float, final: bool = False) -> None:
        """On resume: once every recorded row is re-verified and simulated time ``now`` is past
        ``commit_after`` (or the run is over), write what was held back."""
        if self._held is None:
            return
        assert self.commit_after is not None  # writes are held back only with a commit_after
        short = {
            m: (self._written.get(m, 0), len(v)) for m, v in self.existing.items() if self._written.get(m, 0) < len(v)
        }
        if short:
            if final:
                m, (got, want) = next(iter(short.items()))
                raise RuntimeError(
                    f"resume diverged from the recorded run: {m} produced {got} records, {want} are on disk"
                )
            return
        if not final and now <= self.commit_after:
            return
        if self._on_commit is not None:
            self._on_commit()
        self.store.release()
        if self.released is not None:
            self.released.release()
        rows, self._held = self._held, None
        for row in rows:
            self.run_dir.append_record(row)


class WithdrawalCause(str, Enum):
    """Why a model was withdrawn: a ``suspend`` record's ``cause``."""

    COVERAGE = "coverage"  # fewer than coordinator.min_clients vehicles would remain
    NOT_ARRIVED = "not_arrived"  # contributions that never arrived could not be taken out
    POPULATION = "population"  # too few clients for the method (e.g. a fixed subset size)

    @property
    def words(self) -> str:
        """The cause as ``vmc run``'s summary says it."""
        return {
            "coverage": "coverage fell below coordinator.min_clients",
            "not_arrived": "contributions that never arrived could not be taken out",
            "population": "too few clients remained for the method",
        }[self.value]
