"""A sweep directory as pandas DataFrames (:func:`open_sweep`), and ``results.parquet``.

``results`` is ``results.csv`` (one row per run and method: the grid's values, the replicate's
seed, the totals ``vmc run`` prints, the run directory), ``summary`` is ``summary.csv`` (with
several replicates: per point and method each figure's mean, standard deviation, 95 % interval and
count), and :meth:`Sweep.run` opens one of its runs (:func:`vmc_sim.rundir.frames.open_run`). List
cells (a grid value such as ``[fsosa, retrain]``) are JSON text, as in the CSV.

Whenever a sweep writes its tables it also writes ``results.parquet`` (the same table, typed), when
pandas and pyarrow are installed (the ``[pandas]`` extra), and keeps the fingerprint (SHA-256,
lines, bytes) of each table in ``sweep.json`` (``tables``); a reader refuses a table of a finished
sweep that is not the one fingerprinted, naming it. A sweep still being written (or one written
before fingerprints were kept) is read as it is.
"""

from __future__ import annotations

import importlib.util
import json
import os
from functools import cached_property
from pathlib import Path
from typing import Any

from fl_core.errors import CorruptFileError

from ..rundir.directory import file_fingerprint
from ..rundir.frames import Run, require_pandas

TABLES = ("results.csv", "summary.csv", "results.parquet")
"""The tables a sweep directory may hold, fingerprinted in its ``sweep.json`` under ``tables``."""


def parquet_available() -> bool:
    """Whether ``results.parquet`` can be written here (pandas and pyarrow are installed)."""
    return all(importlib.util.find_spec(name) is not None for name in ("pandas", "pyarrow"))


def read_table(path: Path) -> Any:
    """A sweep's CSV table as a DataFrame (empty cells are missing values)."""
    return require_pandas("a sweep's tables as DataFrames").read_csv(path)


def seal_tables(path: Path) -> dict[str, dict[str, Any]]:
    """Write ``results.parquet`` from ``results.csv`` when :func:`parquet_available` (through a
    temporary file), and return the fingerprint of each table of :data:`TABLES` the directory holds."""
    if parquet_available() and (path / "results.csv").is_file():
        tmp = path / "results.parquet.tmp"
        read_table(path / "results.csv").to_parquet(tmp, index=False)
        os.replace(tmp, path / "results.parquet")
    return {name: file_fingerprint(path / name) for name in TABLES if (path / name).is_file()}


class Sweep:
    """A verified sweep directory, its tables read as DataFrames on first use (:func:`open_sweep`)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        state = self.path / "sweep.json"
        if not state.is_file():
            raise FileNotFoundError(f"{self.path}: not a sweep directory (no sweep.json)")
        try:
            manifest = json.loads(state.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise CorruptFileError(f"{state}: not valid JSON ({e}); the file is cut or damaged") from None
        if not isinstance(manifest, dict) or not isinstance(manifest.get("points"), list):
            raise CorruptFileError(f"{state}: not a sweep's state (no 'points' list)")
        self.manifest: dict[str, Any] = manifest
        """The sweep's ``sweep.json``: spec, points and their status, replicates."""
        require_pandas("a sweep's tables as DataFrames")

    def __repr__(self) -> str:
        return f"Sweep({str(self.path)!r}, status={self.manifest.get('status')!r})"

    def verify(self, name: str) -> Path:
        """``name`` (of :data:`TABLES`) in the sweep directory, refused (:class:`CorruptFileError`,
        naming it) if the finished sweep fingerprinted another file; a missing table is a
        FileNotFoundError."""
        path = self.path / name
        expected = (self.manifest.get("tables") or {}).get(name)
        if self.manifest.get("status") != "running" and isinstance(expected, dict):
            found = file_fingerprint(path)
            if found != expected:
                what = "missing" if not path.is_file() else f"{found['lines']} lines, sha256 {found['sha256'][:12]}"
                raise CorruptFileError(
                    f"{path}: not the table this sweep wrote ({what}; sweep.json recorded {expected.get('lines')} "
                    f"lines, sha256 {str(expected.get('sha256'))[:12]}): cut or changed since"
                )
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such table in the sweep directory")
        return path

    @cached_property
    def results(self) -> Any:
        """``results.csv``: one row per run and method."""
        return read_table(self.verify("results.csv"))

    @cached_property
    def summary(self) -> Any:
        """``summary.csv`` (a sweep with several replicates), else None."""
        return read_table(self.verify("summary.csv")) if (self.path / "summary.csv").is_file() else None

    def run(self, run_id: str) -> Run:
        """One of the sweep's runs (a point's id, or ``<point>-rep<seed>``) as DataFrames."""
        ids = [p.get("id") for p in self.manifest["points"]]
        if run_id not in ids:
            raise KeyError(f"{run_id!r}: not a run of the sweep {self.path} (its runs: {', '.join(map(str, ids))})")
        return Run(self.path / run_id)


def open_sweep(path: str | os.PathLike[str]) -> Sweep:
    """The sweep directory at ``path`` as DataFrames (``results``, ``summary``, ``run(id)``), each
    table verified before it is read. Raises ImportError naming the ``[pandas]`` extra when pandas
    is missing, FileNotFoundError for a path that is not a sweep directory."""
    return Sweep(path)
