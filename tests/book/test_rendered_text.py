"""What a reader sees on every rendered page of the book.

A chapter's prose quotes numbers, never the machinery that produced them: no glue key
(``p1c2_slope``), no JSON key (``part2.fig4_speedup``) and no file name shown as text. Its
code cells — visible or behind a "show code" toggle — are at most 20 lines of at most
88 characters, so they fit the reading column and can be copied into coursework. Checked on
the built HTML, which is what the reader gets.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from bs4 import BeautifulSoup

from book_tools import ROOT

pytestmark = pytest.mark.book


def _toc_pages() -> list[Path]:
    """Every page of the book, in the order of ``_toc.yml``."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    files = [toc["root"]] + [c["file"] for part in toc["parts"] for c in part["chapters"]]
    return [Path(f).with_suffix(".md") for f in files]


#: Every page of the book: chapters, front and back matter, Reproduction and reference.
PAGES = _toc_pages()
#: Pages whose subject is the repository's files (commands to run, notebooks to hand out,
#: the benchmark scripts and the package's modules): they may name a file, never a glue or
#: JSON key.
FILE_PAGES = {Path("book/instructors.md"), Path("book/running.md"), Path("book/api.md")}
MAX_CELL_LINES = 20
MAX_LINE = 88

GLUE_KEY = re.compile(r"\b(?:p\d+c\d+|cl)_[a-z0-9_]+\b")
JSON_KEY = re.compile(r"\b(?:part\d|closing)\.[a-z0-9_]+\b")
FILE_NAME = re.compile(r"\b[\w./-]+\.(?:json|py|md|ipynb|npz|pt|yml|yaml|toml|txt|csv)\b")


def prose(html: str) -> str:
    """The text of a page's article, inline literals included, without code cells, math,
    commands to run (an inline literal starting with ``python3``) and the navigation."""
    soup = BeautifulSoup(html, "html.parser")
    article = soup.select_one("article") or soup
    for node in article.select("pre, .math, script, style, .cell_input, .headerlink"):
        node.decompose()
    for node in article.select("code"):
        if node.get_text().startswith("python3 "):
            node.decompose()
    return article.get_text(" ")


def code_cells(html: str) -> list[str]:
    """The source of every code cell the page shows, including those behind a toggle."""
    soup = BeautifulSoup(html, "html.parser")
    return [pre.get_text() for pre in soup.select(".cell_input pre")]


def machinery(text: str, *, files: bool = True) -> list[str]:
    """Glue keys, JSON keys and (unless ``files`` is false) file names in ``text``."""
    found = GLUE_KEY.findall(text) + JSON_KEY.findall(text)
    if files:
        found += FILE_NAME.findall(text)
    return sorted(set(found))


def test_caption_counter_counts_words_not_numbers_or_formulas():
    html = (
        '<figure><figcaption><p><span class="caption-number">Fig. 2.1 </span>'
        'Loss against <span class="math">\\(c\\)</span> at T = 32.</p></figcaption></figure>'
    )
    assert caption_lengths(html) == {"Fig. 2.1": 6}  # Loss against x at T 32


def test_machinery_detector_finds_keys_and_file_names():
    text = "slope p1c2_slope in part2.fig4_speedup from benchmarks/results.json, cl_x; Fig. 2.3"
    assert machinery(text) == [
        "benchmarks/results.json",
        "cl_x",
        "p1c2_slope",
        "part2.fig4_speedup",
    ]
    assert machinery("The paper's Fig. 4 (Sec. 2.3) and e.g. 0.5 nats.") == []
    page = "<article><p>x <code>part2.a_b</code></p><pre>p1c1_x</pre>"
    page += "<p><code>python3 dev.py paper-chapters part1/02_x</code></p></article>"
    assert machinery(prose(page)) == ["part2.a_b"]
    assert machinery("run dev.py; p2c1_x", files=False) == ["p2c1_x"]


def test_every_page_of_the_book_is_checked():
    assert len(PAGES) == len(set(PAGES)) > 25
    assert {Path("book/intro.md"), Path("book/running.md"), Path("book/findings.md")} <= set(PAGES)
    assert FILE_PAGES <= set(PAGES) and all((ROOT / page).exists() for page in PAGES)


@pytest.mark.parametrize("page", PAGES, ids=str)
def test_page_prose_shows_no_machinery(built_book, page):
    html = (built_book / page.with_suffix(".html")).read_text(encoding="utf-8")
    assert machinery(prose(html), files=page not in FILE_PAGES) == []


@pytest.mark.parametrize("page", PAGES, ids=str)
def test_page_code_cells_fit_the_column(built_book, page):
    html = (built_book / page.with_suffix(".html")).read_text(encoding="utf-8")
    cells = code_cells(html)
    too_long = [c.splitlines()[0] for c in cells if len(c.rstrip().splitlines()) > MAX_CELL_LINES]
    too_wide = [line for c in cells for line in c.splitlines() if len(line) > MAX_LINE]
    assert too_long == [] and too_wide == []


MAX_CAPTION_WORDS = 40


def caption_lengths(html: str) -> dict[str, int]:
    """Words of every figure caption (a formula counts as one), by the figure's number."""
    soup = BeautifulSoup(html, "html.parser")
    out = {}
    for caption in soup.select("figure figcaption, div.figure p.caption"):
        number = caption.select_one(".caption-number")
        label = number.get_text(strip=True) if number else caption.get_text()[:30]
        if number:
            number.decompose()
        for node in caption.select(".math"):
            node.replace_with("x")
        text = caption.get_text(" ", strip=True)
        out[label] = len(re.findall(r"[A-Za-z0-9][\w.'-]*", text))
    return out


@pytest.mark.parametrize("page", PAGES, ids=str)
def test_figure_captions_are_short(built_book, page):
    html = (built_book / page.with_suffix(".html")).read_text(encoding="utf-8")
    long = {k: n for k, n in caption_lengths(html).items() if n > MAX_CAPTION_WORDS}
    assert long == {}
