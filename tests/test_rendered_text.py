"""What a reader sees on the rendered pages rewritten for the learner.

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
from bs4 import BeautifulSoup

from book_tools import ROOT

pytestmark = pytest.mark.book

#: Pages rewritten for the learner (issue "the book teaches"); the list grows part by part.
PAGES = [
    *sorted(p.relative_to(ROOT) for p in (ROOT / "book" / "part1").glob("*.md")),
    Path("book/reproduction/part1.md"),
    Path("book/part2/01_markov_data_and_target.md"),
    Path("book/part2/02_unigram_trap.md"),
    Path("book/part2/03_training_dynamics.md"),
    Path("book/part2/04_depth.md"),
    Path("book/part2/05_phase_diagram.md"),
    Path("book/part2/06_beyond_two_states.md"),
    Path("book/reproduction/part2.md"),
    Path("book/part3/01_incontext_ngrams.md"),
    Path("book/part3/02_near_stationarity.md"),
    Path("book/part3/03_stagewise_training.md"),
    Path("book/part3/04_attention_only.md"),
    Path("book/part3/05_beyond_the_paper.md"),
    Path("book/reproduction/part3.md"),
    Path("book/closing/one_lens.md"),
    Path("book/reproduction/closing.md"),
]
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


def machinery(text: str) -> list[str]:
    found = GLUE_KEY.findall(text) + JSON_KEY.findall(text) + FILE_NAME.findall(text)
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


@pytest.mark.parametrize("page", PAGES, ids=str)
def test_page_prose_shows_no_machinery(built_book, page):
    html = (built_book / page.with_suffix(".html")).read_text(encoding="utf-8")
    assert machinery(prose(html)) == []


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
