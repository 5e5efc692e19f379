"""A git worktree of an older commit: the "before" side of a before/after benchmark, imported
through ``PYTHONPATH`` by the processes that measure it."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def add(root: Path, commit: str, path: Path) -> bool:
    """Check out ``commit`` of the repository at ``root`` in ``path``; True if this call created it
    (and so must remove it), False if ``path`` already is a worktree of ``commit``."""
    if path.exists():
        head = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True)
        want = subprocess.run(["git", "-C", str(root), "rev-parse", commit], capture_output=True, text=True)
        if head.returncode != 0 or head.stdout.strip() != want.stdout.strip():
            raise SystemExit(f"{path} exists and is not a worktree of {commit}")
        return False
    subprocess.run(
        ["git", "-C", str(root), "worktree", "add", "-q", "--detach", str(path), commit],
        check=True,
        capture_output=True,
    )
    return True


def remove(root: Path, path: Path) -> None:
    """Remove a worktree made by :func:`add` (forced if git finds files it did not write)."""
    done = subprocess.run(["git", "-C", str(root), "worktree", "remove", str(path)], capture_output=True)
    if done.returncode != 0:
        subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force", str(path)], check=True)


@contextmanager
def checkout(root: Path, commit: str) -> Iterator[Path]:
    """A temporary worktree of ``commit``, removed on exit."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "before"
        add(root, commit, path)
        try:
            yield path
        finally:
            remove(root, path)
