"""The README's Python snippets run as written (in a temporary working directory)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
SNIPPETS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def test_the_readme_shows_python():
    assert len(SNIPPETS) >= 2


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(SNIPPETS)))
def test_a_readme_snippet_runs(index, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    exec(compile(SNIPPETS[index], f"README.md snippet {index + 1}", "exec"), {"__name__": "__readme__"})
    assert capsys.readouterr().out.strip(), "the snippet printed nothing"
