"""A small keyed JSON file of cached results (one object of entries), read leniently and
written whole and atomically: the FLOP counts and the calibrated costs live in such files.

A missing, unreadable or malformed file reads as empty (the caller measures again and writes the
entry back); a write goes to a temporary file renamed over the old one, so a reader never sees
half a file, and a read-only cache leaves the caller with its in-memory result.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def read_entries(path: Path) -> dict[str, Any]:
    """Every entry of the file at ``path`` ({} when it is missing or not a JSON object)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_entry(path: Path, key: str, value: Any) -> None:
    """Set ``key`` to ``value`` in the file at ``path``, keeping its other entries (nothing on an OSError)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = read_entries(path)
        data[key] = value
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass
