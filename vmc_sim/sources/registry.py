"""The mobility sources by name: one file per kind, one table here (:data:`SOURCES`). A source of
your own is a :class:`vmc_sim.sources.base.SourceKind` in a file of yours, added with
``SOURCES.add(name, kind)`` by a module the scenario names under ``plugins``."""

from __future__ import annotations

from fl_core.registry import Registry

from .base import SourceKind
from .city import CityKind
from .fcd import FcdKind
from .files import FilesKind
from .lust import LustKind
from .trace import TraceKind

SOURCES: Registry[SourceKind] = Registry(
    "mobility source",
    {kind.name: kind for kind in (CityKind(), FilesKind(), LustKind(), TraceKind(), FcdKind())},
)
