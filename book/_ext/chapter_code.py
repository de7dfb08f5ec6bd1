"""The chapters' code, formatted and linted with the package's tools.

A chapter is a MyST notebook: its code lives in ```` ```{code-cell} ```` fences between
prose. Readers copy that code, so it is held to the package's standard — ``ruff format``
and ``ruff check`` with the project's settings — at the reading column's width,
:data:`LINE_LENGTH` characters (the package itself uses 100)::

    python3 dev.py fmt            # format every chapter's code cells in place
    python3 dev.py fmt --check    # exit 1 and name the chapters that need it

Only the bodies of code cells change; prose, cell options and fences are left as written.
The code cells are handed to ruff as a notebook: each cell is formatted on its own, and the
lint sees the whole chapter, so a name imported in one cell and used in a later one is not
reported as unused.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "LINE_LENGTH",
    "LINT_IGNORE",
    "CodeCell",
    "code_cells",
    "format_chapter",
    "lint_chapter",
]

#: The widest code line a chapter may show: what fits the reading column at laptop width.
LINE_LENGTH = 88

#: Rules the chapters do not follow, beyond the package's own ignores: an exercise's stub
#: cell defines a function its solution cell redefines (F811), and ``zip(..., strict=True)``
#: in a three-line teaching loop is noise for the reader (B905).
LINT_IGNORE = ("F811", "B905")

_OPEN = re.compile(r"^(?P<fence>`{3,})\{code-cell\}")
_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class CodeCell:
    """A code cell of a MyST chapter: its body is ``lines[start:end]`` of the file."""

    start: int  # index of the body's first line
    end: int  # index of the closing fence
    source: str
    tags: tuple[str, ...]


def _tag_list(inside: str) -> tuple[str, ...]:
    """``"remove-cell, 'x'"`` (the inside of ``[...]``) -> ``("remove-cell", "x")``."""
    return tuple(t.strip().strip("'\"") for t in inside.split(",") if t.strip())


def code_cells(text: str) -> list[CodeCell]:
    """The code cells of a MyST notebook's ``text``, in order, with their bodies' line spans."""
    lines = text.splitlines()
    cells: list[CodeCell] = []
    i = 0
    while i < len(lines):
        match = _OPEN.match(lines[i])
        if not match:
            i += 1
            continue
        fence = match["fence"]
        j = i + 1
        tags: tuple[str, ...] = ()
        if j < len(lines) and lines[j].strip() == "---":  # a YAML options block
            j += 1
            while j < len(lines) and lines[j].strip() != "---":
                found = re.match(r"tags:\s*\[(.*)\]", lines[j])
                tags = _tag_list(found[1]) if found else tags
                j += 1
            j += 1
        while j < len(lines) and lines[j].startswith(":"):  # short options, e.g. :tags:
            found = re.match(r":tags:\s*\[(.*)\]", lines[j])
            tags = _tag_list(found[1]) if found else tags
            j += 1
        end = j
        while end < len(lines) and lines[end].rstrip() != fence:
            end += 1
        cells.append(CodeCell(j, end, "\n".join(lines[j:end]), tags))
        i = end + 1
    return cells


def _ruff(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args, "--config", str(_ROOT / "pyproject.toml")],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
    )


def _as_notebook(cells: list[CodeCell], folder: Path, stem: str) -> Path:
    """Write ``cells`` as the code cells of a notebook in ``folder``; return its path."""
    notebook = {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": None,
                "id": f"c{i}",
                "metadata": {},
                "outputs": [],
                "source": cell.source,
            }
            for i, cell in enumerate(cells)
        ],
        "metadata": {"language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    target = folder / f"{stem}.ipynb"
    target.write_text(json.dumps(notebook), encoding="utf-8")
    return target


def format_chapter(path: Path, check: bool = False) -> bool:
    """Format the code cells of the chapter at ``path``; return whether anything changed.

    With ``check=True`` the file is left as it is and only the answer is returned.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    cells = code_cells(text)
    with tempfile.TemporaryDirectory() as tmp:
        target = _as_notebook(cells, Path(tmp), path.stem)
        done = _ruff("format", f"--line-length={LINE_LENGTH}", str(target))
        if done.returncode != 0:
            raise ValueError(f"ruff cannot format the code of {path}:\n{done.stderr}")
        formatted = json.loads(target.read_text(encoding="utf-8"))["cells"]
    lines = text.splitlines()
    changed = False
    for cell, new in reversed(list(zip(cells, formatted, strict=True))):  # keep spans valid
        source = "".join(new["source"]).rstrip("\n")
        if source != cell.source.rstrip("\n"):
            changed = True
            lines[cell.start : cell.end] = source.splitlines()
    if changed and not check:
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return changed


def lint_chapter(path: Path) -> list[str]:
    """``ruff check`` findings for the chapter at ``path`` (empty when it is clean)."""
    cells = code_cells(Path(path).read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as tmp:
        target = _as_notebook(cells, Path(tmp), Path(path).stem)
        done = _ruff(
            "check",
            f"--line-length={LINE_LENGTH}",
            f"--extend-ignore={','.join(LINT_IGNORE)}",
            "--output-format=concise",
            str(target),
        )
    findings = [
        line.replace(str(target), str(path))
        for line in done.stdout.splitlines()
        if line.startswith(str(target))
    ]
    if done.returncode != 0 and not findings:
        raise RuntimeError(f"ruff check failed on {path}:\n{done.stderr}")
    return findings


def main(argv: list[str] | None = None) -> int:
    """Format every chapter of the book (or, with ``--check``, name those that need it)."""
    import argparse

    from booktools import chapter_notebooks

    parser = argparse.ArgumentParser(description="Format the chapters' code cells.")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if needed")
    args = parser.parse_args(argv)
    changed = [p for p in chapter_notebooks(_ROOT) if format_chapter(p, check=args.check)]
    for path in changed:
        print(f"{'would format' if args.check else 'formatted'} {path.relative_to(_ROOT)}")
    return 1 if (args.check and changed) else 0


if __name__ == "__main__":
    sys.exit(main())
