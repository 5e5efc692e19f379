"""The SHA-256 of every input file a scenario names, so a resume can refuse inputs that changed.

A run resumed on an edited route file, trace or FCD file would continue on other traffic than
the records before it came from; the manifest keeps each named file's digest (``inputs``) and a
resume compares them before it writes anything.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mobility.cache import file_sha256

from ..sources.registry import SOURCES
from .mobility_section import source_fields


def input_files(scenario: Any) -> list[str]:
    """Every input file ``scenario`` names, as its mobility source lists them
    (:meth:`vmc_sim.sources.base.SourceKind.input_files`) and the building footprints it names;
    generated inputs (the embedded city, LuST) are not listed."""
    m = scenario.mobility
    files = [*SOURCES[m.source].input_files(source_fields(m)), *m.buildings]
    return list(dict.fromkeys(str(f) for f in files if f))


def input_digests(scenario: Any) -> dict[str, str]:
    """``{path: sha256}`` of every existing input file of ``scenario`` (:func:`input_files`)."""
    return {f: file_sha256(f) for f in input_files(scenario) if Path(f).is_file()}


def changed_inputs(recorded: dict[str, str] | None, now: dict[str, str]) -> list[str]:
    """One line per recorded input whose digest differs now (or that is gone): file, digest then, now.
    A manifest written before digests were kept (``recorded`` None) has nothing to compare."""
    out = []
    for path, old in (recorded or {}).items():
        new = now.get(path)
        if new != old:
            out.append(f"{path} (sha256 {old[:12]} when the run began, {new[:12] if new else 'missing'} now)")
    return out
