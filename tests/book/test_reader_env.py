"""The reader's environment itself: what ``pip install <repo>`` gives, and how failures read.

The chapter and student-notebook tests run in ``_build/venvs/reader`` (see ``book_tools``).
These tests check that it holds the runtime dependencies and none of the book's tooling,
and that a failing cell is reported with the notebook's name, the cell and the error.
"""

from __future__ import annotations

import subprocess

import nbformat
import pytest

from book_tools import (
    ROOT,
    NotebookFailed,
    ensure_reader_venv,
    execute_in_reader_kernel,
    reader_env,
)

pytestmark = pytest.mark.reader


@pytest.fixture(scope="module")
def reader_python():
    return ensure_reader_venv()


def _imports(python, module: str) -> bool:
    code = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    return subprocess.run([str(python), "-c", code], cwd="/", env=reader_env(False)).returncode == 0


def test_the_reader_env_has_the_runtime_dependencies_only(reader_python):
    for module in ("ccmc_lite", "torch", "numpy", "scipy", "sympy", "matplotlib", "ipywidgets"):
        assert _imports(reader_python, module), f"the reader's environment lacks {module}"
    for module in ("myst_nb", "jupytext", "yaml", "jupyter_book", "pytest", "nbclient"):
        assert not _imports(reader_python, module), (
            f"{module} is in the reader's environment: pip install <repo> should not bring it"
        )
    # The package is installed (not this checkout on sys.path).
    where = subprocess.run(
        [str(reader_python), "-c", "import ccmc_lite; print(ccmc_lite.__file__)"],
        cwd="/",
        env=reader_env(book_build=False),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert str(ROOT / "ccmc_lite") not in where, where


def test_a_failing_cell_is_named(reader_python, tmp_path):
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("# a notebook"),
            nbformat.v4.new_code_cell("import ccmc_lite"),
            nbformat.v4.new_code_cell("import myst_nb  # a book-only dependency"),
        ]
    )
    done = execute_in_reader_kernel(nb, "broken.ipynb", tmp_path, book_build=False)
    with pytest.raises(NotebookFailed) as err:
        done.check()
    message = str(err.value)
    assert "broken.ipynb" in message and "cell 2" in message, message
    assert "import myst_nb" in message and "ModuleNotFoundError" in message, message
