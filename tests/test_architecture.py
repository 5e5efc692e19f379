"""The house rules a reader relies on: layers import downwards only, no import circle, modules a
reader can take in, shared code imported rather than reached through ``sys.path``, and a
repository that speaks of the project rather than of how it was made."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("fl_core", "mobility", "vmc_sim")
MAX_LINES = 500
PROCESS_WORDS = re.compile(
    r"\b(session|issue)s? #?\d+|\bsession-\d+|\bhelper-?\d+|\bhelper sessions?\b|\blent\s+to\s+this|"
    r"\b(this|next|earlier|previous|later) (session|task)s?\b",
    re.IGNORECASE,
)
BINARY = {".png", ".safetensors", ".gz", ".xz", ".npy", ".pdf"}


def _tracked() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
        return [ROOT / line for line in out.splitlines() if line]
    except (OSError, subprocess.CalledProcessError):  # an exported tree without git
        return [p for p in ROOT.rglob("*") if p.is_file() and ".git" not in p.parts]


def _modules() -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            mods[name] = path
    return mods


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The package modules ``name`` imports (at any depth of its code)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for cand in (target, *(f"{target}.{a.name}" for a in node.names)):
                if cand in known and cand != name:
                    out.add(cand)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in known and a.name != name)
    return out


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def _package_graph() -> dict[str, set[str]]:
    mods = _modules()
    known = set(mods)
    return {name: _imports(name, path, known) for name, path in mods.items()}


def test_no_import_circle_in_the_packages():
    assert _cycles(_package_graph()) == []


@pytest.mark.parametrize(
    ("lower", "upper"), [("fl_core", ("mobility", "vmc_sim")), ("mobility", ("fl_core", "vmc_sim"))]
)
def test_layers_import_downwards_only(lower, upper):
    bad = sorted(
        f"{m} -> {t}"
        for m, ts in _package_graph().items()
        if m.split(".")[0] == lower
        for t in ts
        if t.split(".")[0] in upper
    )
    assert bad == []


ROOMS = (
    "radio",
    "compute",
    "sources",
    "scenario",
    "rundir",
    "engine",
    "cosim",
    "oneshot",
    "sweep",
    "flower",
    "reproduction",
)
"""vmc_sim's rooms from the bottom up: each imports only rooms before it (radio, compute and sources
are independent of each other), besides fl_core and mobility; the command line and the package's
public names (``vmc_sim/__init__.py``) stand above them all."""
BESIDE = {
    ("compute", "radio"),
    ("sources", "compute"),
    ("sources", "radio"),
    ("flower", "sweep"),
    ("reproduction", "flower"),
}
"""Pairs of rooms at one level: neither imports the other."""


def _room(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "vmc_sim" or len(parts) < 2 or parts[1] in ("cli", "__init__"):
        return None
    return parts[1]


def test_vmc_sim_rooms_import_downwards_only():
    assert {p.name for p in (ROOT / "vmc_sim").iterdir() if p.is_dir() and (p / "__init__.py").is_file()} | {
        "cosim",
        "oneshot",
    } == set(ROOMS)
    bad = []
    for m, ts in _package_graph().items():
        here = _room(m)
        if here is None:
            continue
        for t in ts:
            there = _room(t)
            if there is None and t.split(".")[0] == "vmc_sim":
                bad.append(f"{m} -> {t} (the command line or the public names)")
            elif (
                there is not None
                and there != here
                and ((here, there) in BESIDE or ROOMS.index(there) > ROOMS.index(here))
            ):
                bad.append(f"{m} -> {t}")
    assert bad == []


def test_every_room_says_what_it_owns_and_may_import():
    for room in ROOMS:
        init = ROOT / "vmc_sim" / room / "__init__.py"
        if init.is_file():
            doc = ast.get_docstring(ast.parse(init.read_text())) or ""
            assert "Imports" in doc and len(doc.split()) > 20, room


def test_every_module_is_under_500_lines():
    too_long = []
    for folder in (*PACKAGES, "tools", "bench"):
        for path in (ROOT / folder).rglob("*.py"):
            n = len(path.read_text().splitlines())
            if n >= MAX_LINES:
                too_long.append(f"{path.relative_to(ROOT)}: {n}")
    assert too_long == []


def test_no_file_edits_sys_path():
    edits = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in _tracked()
        if p.suffix == ".py" and p.is_file()
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(r"sys\.path\.(insert|append)|sys\.path\[|sys\.path\s*=", line)
    ]
    assert edits == []


def test_the_repository_speaks_of_the_project_not_of_its_making():
    hits = []
    for path in _tracked():
        if path.suffix in BINARY or not path.is_file():
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for i, line in enumerate(text.splitlines(), 1):
            if PROCESS_WORDS.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()[:100]}")
    assert hits == [], f"{len(hits)} lines, e.g.\n" + "\n".join(hits[:20])


def test_commands_that_train_nothing_import_no_torch():
    """``vmc --help`` and ``vmc status`` build the whole parser and read a run without torch (an
    import of torch alone takes seconds)."""
    code = (
        "import sys\n"
        "from vmc_sim.cli import build_parser\n"
        "build_parser().parse_args(['status', '.'])\n"
        "import vmc_sim, fl_core, mobility\n"
        "heavy = sorted(m for m in ('torch', 'torchvision', 'ray', 'flwr', 'matplotlib', 'libsumo') if m in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout.strip() == ""
