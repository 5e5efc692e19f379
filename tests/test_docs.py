"""The documentation stays true to the project: every relative link in the README and under
``docs/`` resolves (to a file, and to a heading where it names one), every ``vmc`` command they
show parses with the real command line, the README's test command is the one CI runs, the
README's scenario loads, and the generated table of training defaults is the code's."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
CI = ROOT / ".ci" / "run"

FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
SHELL = {"bash", "sh", "shell", "console"}
PLACEHOLDER = re.compile(r"<[^<>\s]+>")


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _prose(text: str) -> str:
    """The page without its fenced blocks and inline code, where links are not links."""
    text = FENCE.sub("", text)
    return re.sub(r"`[^`\n]*`", "", text)


def _blocks(path: Path, languages: set[str]) -> list[str]:
    return [body for lang, body in FENCE.findall(path.read_text()) if lang in languages]


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in FENCE.sub("", path.read_text()).splitlines():
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            slug = _slug(m.group(1))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _links() -> list[tuple[Path, str]]:
    return [(page, target) for page in PAGES for target in LINK.findall(_prose(page.read_text()))]


def _shell_lines(path: Path) -> list[str]:
    """Each command of the page's shell blocks, continuation lines joined, prompts dropped."""
    lines: list[str] = []
    for body in _blocks(path, SHELL):
        pending = ""
        for raw in body.splitlines():
            line = raw.strip()
            if line.startswith("$ "):
                line = line[2:]
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            line, pending = pending + line, ""
            if line:
                lines.append(line)
    return lines


def _vmc_commands() -> list[tuple[str, str]]:
    return [
        (_rel(page), line) for page in PAGES for line in _shell_lines(page) if line == "vmc" or line.startswith("vmc ")
    ]


def test_the_docs_exist_and_the_index_lists_every_page():
    assert (DOCS / "README.md").is_file() and len(PAGES) > 5
    index = _prose((DOCS / "README.md").read_text())
    unlisted = [p.name for p in PAGES[1:] if p.name != "README.md" and f"]({p.name})" not in index]
    assert unlisted == [], f"docs/README.md does not list {unlisted}"
    assert "](docs/README.md)" in _prose(README.read_text())


@pytest.mark.parametrize(("page", "target"), _links(), ids=lambda v: v if isinstance(v, str) else _rel(v))
def test_every_relative_link_resolves(page, target):
    if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:: not ours to check here
        return
    path, _, anchor = target.partition("#")
    dest = (page.parent / path).resolve() if path else page
    assert dest.exists(), f"{_rel(page)} links to {target}, which does not exist"
    assert dest == ROOT or ROOT in dest.parents, f"{_rel(page)} links outside the repository: {target}"
    if anchor and dest.suffix == ".md":
        assert anchor in _anchors(dest), f"{_rel(page)} links to #{anchor}, no heading of {_rel(dest)}"


def test_the_docs_show_vmc_commands():
    assert len(_vmc_commands()) >= 30


@pytest.mark.parametrize(("page", "line"), _vmc_commands(), ids=lambda v: v[:60])
def test_every_vmc_command_shown_parses(page, line):
    from vmc_sim.cli import build_parser

    argv = shlex.split(PLACEHOLDER.sub("x", line), comments=True)
    assert argv[0] == "vmc"
    try:
        build_parser().parse_args(argv[1:])
    except SystemExit as e:
        pytest.fail(f"{page}: `{line}` does not parse with vmc's command line (exit {e.code})")


def _ci_line(start: str) -> list[str]:
    return [line.strip() for line in CI.read_text().splitlines() if line.strip().startswith(start)]


def test_the_readme_test_command_is_the_one_ci_runs():
    ci = _ci_line("python -m pytest")
    assert len(ci) == 1, ".ci/run should run pytest in one line"
    shown = [line for line in _shell_lines(README) if "pytest" in line]
    assert shown == ci, f"the README shows {shown}, .ci/run runs {ci}"
    extras = re.search(r'-e "(\.\[[^\]]+\])"', " ".join(_ci_line("python -m pip install")))
    assert extras, ".ci/run installs the project with its extras"
    assert f'pip install -e "{extras.group(1)}"' in _shell_lines(README)


def test_the_contributing_guide_shows_ci_s_checks():
    guide = _shell_lines(DOCS / "contributing.md")
    checks = _ci_line("python -m ruff") + _ci_line("python -m mypy") + _ci_line("python -m pytest")
    assert len(checks) == 4 and [c for c in checks if c not in guide] == []


def test_the_readme_scenario_loads():
    import vmc_sim

    blocks = _blocks(README, {"yaml"})
    assert blocks, "the README shows no scenario"
    scenario = vmc_sim.load_scenario(yaml.safe_load(blocks[0]))
    assert scenario.name == yaml.safe_load(blocks[0])["name"]


def test_the_training_defaults_table_is_the_code_s():
    from vmc_sim.scenario.docs import training_defaults

    page = DOCS / "federated.md"
    block = re.search(
        r"<!-- training-defaults: begin -->\n(.*?)<!-- training-defaults: end -->", page.read_text(), re.S
    )
    assert block, "docs/federated.md lost its generated table of training defaults"
    assert block.group(1) == training_defaults(), (
        "regenerate the table in docs/federated.md: vmc_sim.scenario.docs.training_defaults()"
    )
