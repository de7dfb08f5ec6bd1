"""The chapters' code: parsed as jupytext parses it, formatted, linted at 88 columns.

Readers copy the chapters' code cells, so they meet the package's own standard
(``book/_ext/chapter_code.py``; ``python3 dev.py fmt`` formats them).
"""

from __future__ import annotations

import sys
from pathlib import Path

import jupytext
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "book" / "_ext"))

import booktools  # noqa: E402
import chapter_code  # noqa: E402

# The minimum-versions environment (test_floor.py) holds the package's dependencies only.
pytest.importorskip("ruff", reason="ruff is a development tool, not a dependency")

CHAPTERS = booktools.chapter_notebooks(ROOT)
#: Every page with code cells is lint-clean, the running page's machinery included.
LINTED = CHAPTERS
HEAD = "---\njupytext:\n  text_representation:\n    format_name: myst\n---\n"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_code_cells_are_the_cells_jupytext_reads(path):
    text = path.read_text(encoding="utf-8")
    ours = chapter_code.code_cells(text)
    theirs = [c for c in jupytext.reads(text, fmt="md:myst").cells if c.cell_type == "code"]
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs, strict=True):
        assert a.source.strip() == b.source.strip()
        assert set(a.tags) == set(b.metadata.get("tags", []))


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_code_is_formatted(path):
    assert not chapter_code.format_chapter(path, check=True), (
        f"{path.relative_to(ROOT)} is not formatted; run `python3 dev.py fmt`"
    )


@pytest.mark.parametrize("path", LINTED, ids=lambda p: p.stem)
def test_chapter_code_is_lint_clean(path):
    assert chapter_code.lint_chapter(path) == []


def test_format_chapter_changes_only_code(tmp_path):
    prose = "# A title\n\nSome prose   with  spaces,x=1 and `f( a )`.\n\n"
    cell = "```{code-cell} ipython3\n:tags: [hide-input]\nx=f( 1,2 )\n```\n"
    path = tmp_path / "c.md"
    path.write_text(HEAD + prose + cell)
    assert chapter_code.format_chapter(path, check=True)
    assert "x=f( 1,2 )" in path.read_text()  # check=True writes nothing
    assert chapter_code.format_chapter(path)
    text = path.read_text()
    assert text == HEAD + prose + "```{code-cell} ipython3\n:tags: [hide-input]\nx = f(1, 2)\n```\n"
    assert not chapter_code.format_chapter(path)


def test_lint_chapter_reports_long_lines_and_unused_imports(tmp_path):
    long_line = "y = " + " + ".join(["1"] * 30)
    cells = ["import math\nimport os\n", f"{long_line}\nprint(math.pi)\n"]
    body = "".join(f"```{{code-cell}} ipython3\n{c}```\n\n" for c in cells)
    path = tmp_path / "c.md"
    path.write_text(HEAD + body)
    findings = chapter_code.lint_chapter(path)
    assert len(findings) == 2, findings
    assert "F401" in findings[0] and "`os`" in findings[0]  # math is used in the next cell
    assert "E501" in findings[1] and f"({len(long_line)} > 88)" in findings[1]
