"""A run directory as pandas DataFrames, for analysis in a notebook: :func:`open_run`.

``records`` is ``records.jsonl`` (one row per request and method; list- and dict-valued fields such
as ``members`` or ``bytes`` stay Python objects: ``pandas.json_normalize`` flattens them), ``trace``
the mobility trace (its join/leave events and the members' state samples, one row per position),
``contributions`` one row per contribution the records name and what became of it (the rows
``vmc export availability`` writes to its contributions CSV: :func:`vmc_sim.rundir.export.load_availability`),
and ``totals`` the per-method totals ``vmc run`` prints. Everything is verified before it is read:
the records and the trace against the fingerprints a completed run's manifest keeps, a replayed
trace against the digest of the run's inputs, the trace against the run's manifest.

pandas is an optional extra (``pip install 'vmc-sim[pandas]'``, which brings pyarrow for Parquet).
"""

from __future__ import annotations

import importlib
import os
from functools import cached_property
from pathlib import Path
from typing import Any

from mobility.trace import read_trace

from .directory import RunDir, read_manifest
from .export import CONTRIBUTION_COLUMNS, load_availability
from .summary import method_totals

TRACE_COLUMNS = ("time", "type", "kind", "vehicle", "rsu", "x", "y", "speed")
"""The ``trace`` frame's columns: ``type`` is ``event`` (``kind`` join or leave) or ``state`` (a
member's position at a state sample, ``kind`` empty)."""


def require_pandas(what: str = "a run as DataFrames") -> Any:
    """The pandas module, or an ImportError naming the extra that installs it."""
    try:
        return importlib.import_module("pandas")
    except ImportError:
        raise ImportError(
            f"{what} needs pandas, an optional extra of vmc-sim: pip install 'vmc-sim[pandas]' "
            "(or pip install -e '.[pandas]' in a clone)"
        ) from None


class Run:
    """A verified run directory, read as DataFrames on first use (:func:`open_run`)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._run = RunDir(self.path, create=False)
        self.manifest: dict[str, Any] = read_manifest(self.path / "manifest.json")
        """The run's manifest (scenario, seeds, versions, summary)."""
        self._pd = require_pandas()

    def __repr__(self) -> str:
        return f"Run({str(self.path)!r}, status={self.status!r})"

    @property
    def status(self) -> str | None:
        """How the run ended (``complete``, ``interrupted: ...``), or ``running``."""
        return self.manifest.get("status")

    @cached_property
    def records(self) -> Any:
        """One row per request and method, in the file's order."""
        return self._pd.DataFrame(list(self._run.records()))

    @cached_property
    def totals(self) -> Any:
        """Per method the totals ``vmc run`` prints (:func:`vmc_sim.rundir.summary.method_totals`)."""
        return self._pd.DataFrame(list(method_totals(self._run.records()).values()))

    @cached_property
    def _availability(self) -> Any:
        return load_availability(self.path)

    @cached_property
    def trace(self) -> Any:
        """The mobility trace: every event and every state sample's member, by time."""
        trace = read_trace(self._availability.meta["trace"]["path"], with_states=True)
        rows: list[tuple[Any, ...]] = [
            (e.time, "event", e.kind, e.vehicle, e.rsu, e.x, e.y, e.speed) for e in trace.events
        ]
        rows += [
            (t, "state", None, m.vehicle, m.rsu, m.x, m.y, m.speed) for t, members in trace.states for m in members
        ]
        frame = self._pd.DataFrame(rows, columns=list(TRACE_COLUMNS))
        return frame.sort_values("time", kind="stable", ignore_index=True)

    @cached_property
    def contributions(self) -> Any:
        """One row per contribution the records name: client, its integer id, method, record, kind,
        request and done time, ``outcome`` (``arrived`` or ``not_arrived``), ``failure`` (why it did
        not arrive), ``work`` (sample-epochs)."""
        return self._pd.DataFrame(self._availability.contributions or [], columns=list(CONTRIBUTION_COLUMNS))


def open_run(path: str | os.PathLike[str]) -> Run:
    """The run directory at ``path`` as DataFrames (``records``, ``trace``, ``contributions``,
    ``totals``), verified before each is read. Raises ImportError naming the ``[pandas]`` extra when
    pandas is missing, FileNotFoundError for a path that is not a run directory."""
    return Run(path)
