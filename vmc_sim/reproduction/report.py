"""Shared output of the reproduction scripts: CSV, a markdown table with the paper's numbers
beside ours, a PNG, and the machine line every report carries.

Scripts write into ``--out`` (default ``tools/out/<name>``, not committed); the reports of the
sizes this machine can run are copied under ``reports/`` and committed.
"""

from __future__ import annotations

import csv
import io
import os
import platform
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from vmc_sim.compute.host import cpu_model
from vmc_sim.rundir.outputs import claim_parent


def host() -> str:
    """The architecture and CPU model, e.g. ``x86_64 Intel(R) Xeon(R) Processor``."""
    return f"{platform.machine()} {cpu_model()}"


def machine() -> str:
    """One line naming the host: CPU, cores, torch version and threads."""
    import torch

    return (
        host()
        + f", {os.cpu_count()} cores, torch {torch.__version__} ({torch.get_num_threads()} threads)"
        + (f", GPU {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else ", no GPU")
    )


def out_dir(path: str | Path) -> Path:
    """``path`` created if needed: a reproduction's own report directory, which a rerun writes anew;
    refused inside a run or sweep directory (:func:`vmc_sim.rundir.outputs.claim_parent`)."""
    p = claim_parent(path)
    p.mkdir(parents=True, exist_ok=True)
    return p


_IMPORTED = time.perf_counter()


def process_wall_s() -> float:
    """Wall-clock seconds since this process started (Linux ``/proc``: interpreter start and imports
    included), else since this module was imported."""
    try:
        ticks = os.sysconf("SC_CLK_TCK")
        with open("/proc/self/stat") as f:
            started = int(f.read().rsplit(")", 1)[1].split()[19]) / ticks
        with open("/proc/uptime") as f:
            return float(f.read().split()[0]) - started
    except (OSError, ValueError, IndexError):
        return time.perf_counter() - _IMPORTED


def replace_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` whole or not at all (a temporary file beside it, then a rename),
    so a script stopped while writing never leaves a half-written report."""
    return replace_bytes(path, text.encode())


def replace_bytes(path: str | Path, data: bytes) -> Path:
    """:func:`replace_text` for bytes."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return path


def write_csv(path: str | Path, rows: Sequence[dict[str, Any]]) -> Path:
    """Rows as CSV (columns: the union of keys in first-seen order), replaced whole; gzip-compressed
    where ``path`` ends in ``.gz``."""
    columns: list[str] = []
    for r in rows:
        columns += [k for k in r if k not in columns]
    table = io.StringIO(newline="")
    w = csv.DictWriter(table, fieldnames=columns)
    w.writeheader()
    w.writerows(rows)
    if str(path).endswith(".gz"):  # large tables: compressed, with no timestamp, so the bytes are the data's
        import gzip

        return replace_bytes(path, gzip.compress(table.getvalue().encode(), mtime=0))
    return replace_text(path, table.getvalue())


def fmt(value: Any, digits: int = 2) -> str:
    """A cell: floats rounded, None as '-'."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def md_table(
    rows: Iterable[dict[str, Any]], columns: Sequence[str], headers: Sequence[str] | None = None, digits: int = 2
) -> str:
    """A markdown table of ``columns`` (missing cells as '-')."""
    headers = list(headers or columns)
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for r in rows:
        lines.append("| " + " | ".join(fmt(r.get(c), digits) for c in columns) + " |")
    return "\n".join(lines)


def pct_diff(ours: float | None, paper: float | None) -> float | None:
    """ours - paper in points (None when either is missing)."""
    if ours is None or paper is None:
        return None
    return float(ours) - float(paper)


def provenance() -> str:
    """When and from which code a report is made: the UTC date and the checkout's commit (``+changes``
    when the working tree differs from it), e.g. ``2026-12-06, commit ee73fd6``."""
    import subprocess
    from datetime import datetime, timezone

    root = Path(__file__).resolve().parents[2]
    date = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
        )
    except OSError:
        return f"{date}, commit unknown (git is not installed)"
    if head.returncode != 0:
        return f"{date}, commit unknown (not a git checkout)"
    return f"{date}, commit {head.stdout.strip()}" + (" +changes" if dirty.stdout.strip() else "")


def write_markdown(path: str | Path, title: str, command: str, size: str, body: str) -> Path:
    """A short report: title, date and commit, the command, the size and the machine, then ``body``."""
    text = (
        f"# {title}\n\nMade: {provenance()}  \nCommand: `{command}`  \nSize: {size}  \nMachine: {machine()}\n\n"
        f"{body.rstrip()}\n"
    )
    return replace_text(path, text)
