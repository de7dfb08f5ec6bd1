"""Helpers shared by the book tests: the chapter list and chapter execution.

Chapters are executed the way myst-nb executes them during the build (same reader, same
jupyter-cache), and the executed notebooks are stored in the build's cache. The book
build that runs later in the same test session then renders from the cache instead of
executing every chapter a second time.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD_DIR = ROOT / "_build"
HTML_DIR = BUILD_DIR / "html"
CACHE_DIR = BUILD_DIR / ".jupyter_cache"
CELL_TIMEOUT_S = 900

sys.path.insert(0, str(ROOT / "book" / "_ext"))
import booktools  # noqa: E402
from ccmc_book import BOOK_BUILD_ENV, patch_kernel_polling  # noqa: E402

patch_kernel_polling()  # the same fix the book build uses (see its docstring)


def toc_files() -> list[Path]:
    """Every source file listed in ``_toc.yml`` (root first), as absolute paths."""
    return [e.path for e in booktools.toc_entries(ROOT)]


def chapter_notebooks() -> list[Path]:
    """The executable pages of the book, in reading order."""
    return booktools.chapter_notebooks(ROOT)


def taught_chapters() -> list[Path]:
    """The chapters of Parts I-III and the closing chapter (each has exercises)."""
    return booktools.taught_chapters(ROOT)


@dataclass
class ExecutedChapter:
    path: Path
    seconds: float
    notebook: object  # nbformat.NotebookNode

    def stream_text(self, name: str) -> str:
        out = []
        for cell in self.notebook.cells:  # type: ignore[attr-defined]
            for o in cell.get("outputs", []):
                if o.get("output_type") == "stream" and o.get("name") == name:
                    out.append(o.get("text", ""))
        return "".join(out)


def execute_chapter(path: Path) -> ExecutedChapter:
    """Execute one chapter like myst-nb does and store the result in the build cache.

    Raises ``nbclient.exceptions.CellExecutionError`` (with the traceback of the failing
    cell) when a cell fails.
    """
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn
    from myst_nb.core.read import myst_nb_reader_plugin
    from nbclient import NotebookClient

    nb = myst_nb_reader_plugin(str(path))
    start = time.perf_counter()
    NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        allow_errors=False,
        record_timing=False,  # as myst-nb: timing metadata would change the cache hash
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    ).execute(env={**os.environ, BOOK_BUILD_ENV: "1"})  # glue() records values for the build
    seconds = time.perf_counter() - start
    CACHE_DIR.parent.mkdir(parents=True, exist_ok=True)
    cache = get_cache(str(CACHE_DIR))
    cache.cache_notebook_bundle(
        CacheBundleIn(nb, str(path), data={"execution_seconds": seconds}),
        check_validity=False,
        overwrite=True,
    )
    return ExecutedChapter(path, seconds, nb)
