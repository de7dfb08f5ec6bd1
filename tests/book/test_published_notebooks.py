"""The notebooks readers download, open in Colab, or get as student notebooks.

Each is written by the build from the resolved page (``book/_ext/plain_notebooks.py``), so
it must read as the page does: no MyST markup in any markdown cell, the page's numbers
where the page shows glued values, the page's figures, the executed outputs. Its code is
the code the reader tests executed before the build (``book_tools.shown_cells``), and its
set-up cell installs the commit that built it.
"""

from __future__ import annotations

import html as html_lib
import json
import re
import subprocess
from pathlib import Path

import pytest
from booktools import has_exercises, student_name

from book_tools import ROOT, chapter_notebooks, rel, shown_cells, taught_chapters

#: MyST that only Sphinx understands: roles, directive fences, directive options, targets.
RAW_MYST = re.compile(
    r"\{(?:glue|prf:|cite|ref|doc|func|numref|eq|class|meth|mod|data|attr|term|download"
    r"|math|exercise|solution|dropdown|admonition|note|tip|warning|figure)[^}\s]*\}"
    r"|^\s*(?:>\s*)*(?:`{3,}|:{3,})\s*\{"
    r"|^\s*(?:>\s*)*:(?:label|nonumber|class|name|tags|width|align):"
    r"|^\s*\([\w-]+\)=\s*$",
    re.M,
)


def raw_markup(text: str) -> list[str]:
    """The pieces of raw MyST markup in a markdown text."""
    return [m.group(0).strip() for m in RAW_MYST.finditer(text)]


def test_the_raw_markup_detector():
    found = raw_markup(
        "A {glue:text}`p1c2_slope:.2f` and {cite:t}`ildiz2024` and {numref}`fig-x`.\n"
        "```{prf:theorem} T\n:label: thm-x\n```\n"
        "> :::{admonition} Tip\n(sec-intro)=\n{func}`ccmc_lite.train_runs`"
    )
    assert len(found) == 8, found
    plain = (
        "A 0.57 slope, **Lemma 3.1** (Ildiz et al. [2024](https://x/bib.html#id3)), "
        "$\\{x\\}$, `dict = {}` and ```python\nprint({1: 2})\n```\n> **Hint**\n"
    )
    assert raw_markup(plain) == []


def test_figure_descriptions_are_plain_first_sentences():
    from ccmc_book import figure_description
    from plain_notebooks import _image_alt

    caption = (
        r"Smallest eigenvalue of $\mathbf H_\alpha$ at $\theta_\pi$ over $(p, q)$, as in "
        r"Makkuva et al. (2024, Fig. 2). Dashed: $p + q = 1$."
    ).replace("$", "")  # as the caption's text in the doctree
    assert figure_description(caption) == (
        "Smallest eigenvalue of H_α at θ_π over (p, q), as in Makkuva et al. (2024, Fig. 2)."
    )
    assert figure_description(r"c \to \infty at \Gamma(q)") == "c → ∞ at Γ(q)."
    assert _image_alt("prompt [0, 1, 0]") == "prompt [0, 1, 0]"  # Markdown keeps pairs
    assert _image_alt("prompt [0, 1, 0") == "prompt (0, 1, 0"  # an unpaired one breaks it


def _notebook(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _markdown(nb: dict) -> str:
    return "\n\n".join(_source(c) for c in nb["cells"] if c["cell_type"] == "markdown")


def _code(nb: dict) -> list[str]:
    return [_source(c).strip() for c in nb["cells"] if c["cell_type"] == "code"]


def _published(built: Path, chapter: Path) -> Path:
    return built / "_sources" / rel(chapter.with_suffix(".ipynb"))


@pytest.mark.book
def test_no_reader_notebook_shows_myst_markup(built_book):
    notebooks = [_published(built_book, c) for c in chapter_notebooks()]
    notebooks += sorted((built_book / "student_notebooks").glob("*.ipynb"))
    problems = {}
    for path in notebooks:
        found = raw_markup(_markdown(_notebook(path)))
        if found:
            problems[path.relative_to(built_book).as_posix()] = found[:5]
    assert len(notebooks) > len(chapter_notebooks())
    assert not problems, f"raw MyST markup in notebooks readers get: {problems}"


def _undescribed_attachments(name: str, nb: dict) -> list[str]:
    """Figures of the markdown cells that Markdown does not draw, or draws undescribed."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark")
    problems = []
    for cell in nb["cells"]:
        for attachment in cell.get("attachments", {}):
            html = md.render(_source(cell))
            found = re.search(rf'<img src="attachment:{re.escape(attachment)}" alt="([^"]*)"', html)
            if found is None:
                problems.append(f"{name}: {attachment} is not an image of its cell's Markdown")
            elif found.group(1) in ("", "figure"):
                problems.append(f"{name}: {attachment} has no description")
    return problems


@pytest.mark.book
def test_published_notebooks_show_the_pages_numbers_figures_and_outputs(built_book):
    from bs4 import BeautifulSoup

    problems = []
    for chapter in chapter_notebooks():
        nb = _notebook(_published(built_book, chapter))
        html = (built_book / rel(chapter.with_suffix(".html"))).read_text(encoding="utf-8")
        article = BeautifulSoup(html, "html.parser").select_one("article")
        text = html_lib.unescape(re.sub(r"\\(.)", r"\1", _markdown(nb)))  # as rendered
        for span in article.select(".pasted-text"):
            if span.get_text().strip() not in text:
                problems.append(f"{chapter.name}: glued {span.get_text()!r} is not in the text")
        code = [c for c in nb["cells"] if c["cell_type"] == "code"]
        if not any(c["outputs"] for c in code):
            problems.append(f"{chapter.name}: no code cell has outputs")
        images = sum(
            any(k.startswith("image/") for k in o.get("data", {}))
            for c in code
            for o in c["outputs"]
        )
        images += sum(len(c.get("attachments", {})) for c in nb["cells"])
        problems += _undescribed_attachments(chapter.name, nb)
        shown = len(article.select("img"))
        if images != shown:
            problems.append(
                f"{chapter.name}: {images} figures in the notebook, {shown} on the page"
            )
    assert not problems, "\n".join(problems)


@pytest.mark.book
def test_published_code_is_the_code_the_reader_tests_ran(built_book):
    """Before the build, the tests execute each chapter and its student notebook; the build
    publishes the same code cells (set-up cell, the cells the page shows, notebook-only)."""
    for chapter in chapter_notebooks():
        nb = _notebook(_published(built_book, chapter))
        want = [c.source.strip() for c in shown_cells(chapter) if c.cell_type == "code"]
        assert _code(nb)[1:] == want, chapter.name
        assert "ccmc-setup" in nb["cells"][0]["metadata"]["tags"], chapter.name


@pytest.mark.book
def test_the_cells_that_seed_a_chapter_show_no_value(built_book):
    """``seed_everything(0)`` often ends a chapter's first cell: it returns nothing, so no
    stray value sits under the imports a reader copies."""
    checked = 0
    for chapter in chapter_notebooks():
        for cell in _notebook(_published(built_book, chapter))["cells"]:
            if cell["cell_type"] == "code" and "seed_everything(" in _source(cell):
                results = [o for o in cell["outputs"] if o["output_type"] == "execute_result"]
                assert not results, f"{chapter.name}: {results[0]['data']}"
                checked += 1
    assert checked >= 10  # the chapters seed in their first cell


@pytest.mark.book
def test_student_notebooks_are_the_ones_the_tests_ran(built_book):
    folder = built_book / "student_notebooks"
    expected = {}
    for chapter in chapter_notebooks():
        if has_exercises(_notebook(_published(built_book, chapter))):
            expected[f"{student_name(rel(chapter.with_suffix('')))}.ipynb"] = chapter
    assert set(expected.values()) == set(taught_chapters()), "every taught chapter has one"
    assert sorted(p.name for p in folder.glob("*.ipynb")) == sorted(expected)
    for name, chapter in expected.items():
        nb = _notebook(folder / name)
        want = [c.source.strip() for c in shown_cells(chapter, False) if c.cell_type == "code"]
        assert _code(nb)[1:] == want, name
        for cell in nb["cells"]:
            assert "solution" not in cell.get("metadata", {}).get("tags", []), name
            assert cell["cell_type"] != "code" or cell["outputs"] == [], name


@pytest.mark.book
def test_the_set_up_cell_installs_the_commit_that_built_the_pages(built_book):
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    for chapter in chapter_notebooks():
        setup = _source(_notebook(_published(built_book, chapter))["cells"][0])
        assert f'REF = "{head}"' in setup, chapter.name
        assert "git+https://github.com/ccmc-lite/ccmc_lite@{REF}" in setup


@pytest.mark.book
def test_the_instructors_table_links_every_student_notebook(built_book):
    html = (built_book / "book" / "instructors.html").read_text(encoding="utf-8")
    links = re.findall(r'href="https://[^"]+/(student_notebooks/[\w.-]+\.ipynb)"', html)
    assert len(links) == len(taught_chapters()), links
    missing = [link for link in links if not (built_book / link).is_file()]
    assert not missing, f"the instructors' page links notebooks the build did not write: {missing}"
