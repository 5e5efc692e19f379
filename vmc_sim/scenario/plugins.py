"""Modules of your own that a scenario names under ``plugins``: imported before the rest of the
scenario is read, so that what they register (a mobility source, a radio model, an editor, a
strategy, a Fisher representation, a data set, a model, a time model) can be named in it.

A plug-in is a module on the Python path (``PYTHONPATH``; on a cluster, on every node) that adds
its entries to the registries, e.g. ``SOURCES.add("mine", MySourceKind())``. Importing it twice
does nothing more (Python keeps a module once per process).
"""

from __future__ import annotations

import importlib
from typing import Any


def import_plugins(names: Any) -> list[str]:
    """Import every module in ``names`` (a list of dotted module names); ValueError naming the one
    that cannot be imported and why."""
    if names is None:
        return []
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        raise ValueError(f"plugins must be a list of module names, got {names!r}")
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as e:  # noqa: BLE001 - any failure of a user's module is named with the module
            raise ValueError(
                f"plugins: cannot import {name!r} ({type(e).__name__}: {e}); is it on PYTHONPATH?"
            ) from None
    return names
