"""A small content-addressed cache for generated SUMO inputs (networks, demand).

Each build lives in ``<root>/<kind>-<hash>/`` where the hash covers the build parameters, the
SUMO version and a builder version. A build is written into a temporary directory next to its
final place and renamed into place only when complete, so an interrupted build never leaves a
half-written entry and two processes building the same entry do not corrupt each other.
The manifest records the SHA-256 of every file the build wrote (``outputs``); a hit checks them
all and builds an entry again, with a warning, when one is missing or changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

MANIFEST = "build.json"


def cache_root(override: str | os.PathLike[str] | None = None) -> Path:
    """``override``, else ``$VMC_CACHE/sumo``, else ``~/.cache/vmc-sim/sumo``."""
    if override is not None:
        return Path(override).expanduser()
    env = os.environ.get("VMC_CACHE")
    if env:
        return Path(env).expanduser() / "sumo"
    return Path.home() / ".cache" / "vmc-sim" / "sumo"


def canonical(value: Any) -> Any:
    """``value`` with every number written one way, so equal parameters hash equally.

    An integer-valued float and the integer (``27000.0``, ``27000``) become the same value, other
    floats are rounded to 12 significant digits (``0.1 + 0.2`` and ``0.3`` agree), and strings
    that spell a number (a SUMO option value such as ``"600.0"``) are written like the number.
    Mappings and sequences are converted recursively; booleans and other strings are kept.
    """
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return _number_text(value)
    if isinstance(value, str):
        return _number_text(float(value)) if _NUMBER.fullmatch(value.strip()) else value
    if isinstance(value, dict):
        return {str(k): canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return value


_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def _number_text(v: float) -> str | float:
    f = float(v)
    if f != f or f in (float("inf"), float("-inf")):
        return repr(f)
    if f.is_integer() and abs(f) < 1e15:
        return str(int(f))
    return format(f, ".12g")


def params_key(params: dict[str, Any]) -> str:
    """Stable short hash of JSON-serialisable parameters (numbers canonicalised, see :func:`canonical`)."""
    blob = json.dumps(canonical(params), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def file_sha256(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def cached_build(
    kind: str,
    params: dict[str, Any],
    build: Callable[[Path], dict[str, Any]],
    *,
    root: str | os.PathLike[str] | None = None,
    force: bool = False,
) -> tuple[Path, dict[str, Any]]:
    """Return ``(directory, manifest)`` of the cached build for ``params``, building it if needed.

    ``build(tmpdir)`` writes its files into ``tmpdir`` and returns extra manifest entries; the
    manifest (``build.json``) also records the parameters and the key.
    """
    key = params_key(params)
    base = cache_root(root)
    final = base / f"{kind}-{key}"
    manifest_path = final / MANIFEST
    if not force and manifest_path.is_file():
        try:
            manifest = json.loads(manifest_path.read_text())
            damage = damaged(final, manifest)
        except (OSError, json.JSONDecodeError, AttributeError):
            damage = f"{MANIFEST} is unreadable"
        if damage is None:
            return final, manifest
        warnings.warn(f"{final}: {damage}; building it again", stacklevel=2)
        force = True  # replace the damaged entry below
    base.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{kind}-{key}-", dir=base))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)
    try:
        extra = build(tmp)
        manifest = {"kind": kind, "key": key, "params": params, **extra, "outputs": output_digests(tmp)}
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True, default=str) + "\n")
        if final.exists():
            if not force and manifest_path.is_file():
                shutil.rmtree(tmp, ignore_errors=True)
                return final, json.loads(manifest_path.read_text())
            stale = Path(tempfile.mkdtemp(prefix=f".stale-{kind}-{key}-", dir=base))
            os.replace(final, stale / "old")
            shutil.rmtree(stale, ignore_errors=True)
        try:
            os.replace(tmp, final)
        except OSError:
            if manifest_path.is_file():  # another process finished the same build first
                shutil.rmtree(tmp, ignore_errors=True)
                return final, json.loads(manifest_path.read_text())
            raise
        return final, manifest
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def entry_of(path: str | os.PathLike[str]) -> Path | None:
    """The cache entry (a build's directory, with its ``build.json``) that holds the file ``path``;
    None for a file that is not a build's."""
    parent = Path(path).resolve().parent
    return parent if (parent / MANIFEST).is_file() else None


def lookup(kind: str, params: dict[str, Any], root: str | os.PathLike[str] | None = None) -> Path | None:
    """The cached build of ``kind`` for ``params`` if it is there and undamaged (nothing is built)."""
    final = cache_root(root) / f"{kind}-{params_key(params)}"
    try:
        manifest = json.loads((final / MANIFEST).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return final if isinstance(manifest, dict) and damaged(final, manifest) is None else None


def install(name: str, files: dict[str, bytes], root: str | os.PathLike[str] | None = None) -> Path:
    """Put a build made elsewhere (its files by relative path, ``build.json`` among them) into this
    machine's cache as entry ``name``, whole or not at all; an entry already there and undamaged is
    kept. Raises ValueError for files that do not match their own manifest."""
    if "/" in name or name.startswith(".") or MANIFEST not in files:
        raise ValueError(f"{name!r} is not a cache entry (a directory name with its {MANIFEST})")
    base = cache_root(root)
    final = base / name
    try:
        if damaged(final, json.loads((final / MANIFEST).read_text())) is None:
            return final
    except (OSError, json.JSONDecodeError):
        pass
    base.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=base))
    try:
        for rel, data in files.items():
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        why = damaged(tmp, json.loads((tmp / MANIFEST).read_text()))
        if why is not None:
            raise ValueError(f"cache entry {name}: {why}")
        if final.exists():
            stale = Path(tempfile.mkdtemp(prefix=f".stale-{name}-", dir=base))
            os.replace(final, stale / "old")
            shutil.rmtree(stale, ignore_errors=True)
        os.replace(tmp, final)
        return final
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def output_digests(directory: Path) -> dict[str, str]:
    """SHA-256 of every file a build wrote into ``directory`` (its manifest aside), by relative path."""
    return {
        p.relative_to(directory).as_posix(): file_sha256(p)
        for p in sorted(directory.rglob("*"))
        if p.is_file() and p.name != MANIFEST
    }


def damaged(directory: Path, manifest: dict[str, Any]) -> str | None:
    """Why the cached build in ``directory`` cannot be trusted (an output missing or changed since
    it was built), or None. An entry built before outputs were recorded is trusted as it was then."""
    for name, digest in (manifest.get("outputs") or {}).items():
        path = directory / name
        if not path.is_file():
            return f"{name} is missing"
        if file_sha256(path) != digest:
            return f"{name} does not match the digest recorded when it was built"
    return None


_LEADING_COMMENTS = re.compile(rb"\A(\s*<\?xml[^>]*\?>)?(\s*<!--.*?-->)*\s*", re.S)


def strip_generated_header(path: str | os.PathLike[str]) -> None:
    """Drop the leading XML comments SUMO writes (they hold a timestamp) so builds are byte-reproducible."""
    p = Path(path)
    data = p.read_bytes()
    m = _LEADING_COMMENTS.match(data)
    if m is None:
        return
    decl = m.group(1) or b""
    rest = data[m.end() :]
    p.write_bytes((decl.strip() + b"\n" if decl else b"") + rest)
