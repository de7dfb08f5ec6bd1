"""One test per chapter: its downloadable notebook runs in the reader's environment.

Each chapter is executed as the book's download button gives it (the set-up cell, then the
chapter) in a kernel of ``_build/venvs/reader``, which holds only what ``pip install <repo>``
installs. A failure names the notebook and the cell. The test also fails on any error or
warning the chapter prints.

The executed notebooks go into the build's jupyter-cache, so ``test_book.py`` (which runs
after these tests) renders them without executing them again (see ``book_tools``).
"""

from __future__ import annotations

import ast
import re
import sys

import pytest

from book_tools import ROOT, chapter_notebooks, notebook_result

sys.path.insert(0, str(ROOT / "book" / "_ext"))
import chapter_code

CHAPTERS = chapter_notebooks()

# Text a chapter must never print: tracebacks, warnings and NaN results.
FORBIDDEN_STDERR = re.compile(r"Traceback|Warning|Error", re.IGNORECASE)
FORBIDDEN_STDOUT = re.compile(r"\bnan\b|Traceback", re.IGNORECASE)


@pytest.mark.chapter
@pytest.mark.parametrize(
    "chapter", CHAPTERS, ids=[str(p.relative_to(ROOT).with_suffix("")) for p in CHAPTERS]
)
def test_chapter_executes_cleanly(chapter, chapter_timings):
    path = chapter
    executed = notebook_result("chapter", path).check()
    chapter_timings[str(path.relative_to(ROOT))] = executed.seconds
    stderr = executed.stream_text("stderr")
    assert not FORBIDDEN_STDERR.search(stderr), f"{path.name} wrote to stderr:\n{stderr}"
    stdout = executed.stream_text("stdout")
    # The pool's result cache is for the student notebooks: a chapter's published output
    # must come from its own training (no two chapters make the same training call).
    assert "replayed from the result cache" not in stdout, f"{path.name} replayed a run"
    match = FORBIDDEN_STDOUT.search(stdout)
    assert match is None, f"{path.name} printed {match.group(0)!r}:\n{stdout[-2000:]}"
    # Every chapter imports the package it teaches from.
    code = "\n".join(c.source for c in executed.code_cells()[1:])  # after the set-up cell
    assert "ccmc_lite" in code, f"{path.name} never imports ccmc_lite"


def test_chapter_list_is_not_empty():
    assert CHAPTERS, "no executable chapters found in _toc.yml"


GLUE_KEY = re.compile(r"""\bglue\(\s*f?(["'])(.*?)\1""")
KEY_STYLE = re.compile(r"^(p[1-3]c\d|cl|run)_(?:[A-Za-z0-9_]|\{[^}]*\})+$")  # {...}: f-string parts


@pytest.mark.parametrize(
    "path", CHAPTERS, ids=[str(p.relative_to(ROOT).with_suffix("")) for p in CHAPTERS]
)
def test_chapter_follows_the_cell_and_glue_policies(path):
    """Removed cells only keep the books (nothing visible needs them), tools.gluing.glue (not
    myst-nb), one glue key style."""
    text = path.read_text(encoding="utf-8")
    assert "remove-input" not in text, f"{path.name} shows output without its code"
    hidden_names: set[str] = set()
    for cell in chapter_code.code_cells(text):
        tree = ast.parse(cell.source)
        if "remove-cell" in cell.tags:  # glue, asserts: what the reader need not see
            hidden_names |= _bound_names(tree)
        else:
            used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
            leaked = sorted(used & hidden_names - _bound_names(tree))
            assert not leaked, f"{path.name}: a visible cell uses {leaked} from a removed cell"
    assert "myst_nb" not in text, f"{path.name} imports myst_nb; use tools.gluing.glue"
    keys = [m.group(2) for m in GLUE_KEY.finditer(text)]
    bad = [k for k in keys if not KEY_STYLE.match(k)]
    assert not bad, f"{path.name}: glue keys not in the p<part>c<chapter>_name style: {bad}"
    if keys:
        prefixes = {k.split("_", 1)[0] for k in keys}
        if path.parent.name == "reproduction":  # one page per part: that part's chapters
            parts = {p[:2] for p in prefixes}
            assert len(parts) == 1, f"{path.name} mixes parts' glue prefixes {sorted(prefixes)}"
        else:
            assert len(prefixes) == 1, f"{path.name} mixes glue prefixes {sorted(prefixes)}"


def _bound_names(tree: ast.AST) -> set[str]:
    """Names a cell binds: assignments, loop targets, definitions, arguments and imports."""
    names = {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def test_book_tools_agree_with_the_book_extension():
    """``book_tools`` repeats names of the book extension so that it imports without Sphinx."""
    import booktools
    import ccmc_book
    import plain_notebooks

    import book_tools
    from tools import gluing

    assert book_tools.SETUP_TAG == plain_notebooks.SETUP_TAG == booktools.SETUP_TAG
    assert book_tools.NOTEBOOK_ONLY_TAG == plain_notebooks.NOTEBOOK_ONLY_TAG
    assert booktools.SOLUTION_TAG == plain_notebooks.SOLUTION_TAG
    assert book_tools.BOOK_BUILD_ENV == ccmc_book.BOOK_BUILD_ENV == gluing.BOOK_BUILD_ENV
