"""Book tooling: the table of contents, student notebooks, the instructors' chapter table.

This is tooling for the book's authors and instructors, not part of the runtime package
``ccmc_lite``; it needs the ``book`` extra (``pyyaml``, ``jupytext``, ``nbformat``).

* :func:`toc_entries` reads ``_toc.yml`` — the one place the table of contents is parsed
  (the Sphinx extension, the tests and the benchmarks all call it).
* :func:`write_student_notebook` turns a chapter into a student notebook::

    python3 book/_ext/booktools.py book/part1/01_attention_is_a_ccmc.md --out student_notebooks
    python3 dev.py student            # every chapter listed in _toc.yml

* :func:`chapter_overview` gives the rows of the table on the instructors' page.
* :func:`patch_kernel_polling` keeps ``nbclient`` from missing a kernel's reply; every
  program here that executes notebooks (the build, the tests, the benchmarks) calls it.
* :func:`chapter_code_sha256` fingerprints a chapter's code, so that a stored paper-profile
  snapshot of the chapter (``python3 dev.py paper-chapters``) can be checked against it.

Solutions in the book are written with sphinx-exercise's gated directives, so they may
contain code cells::

    ```{solution-start} p1-ex-transition
    :class: dropdown
    ```
    ... markdown and code cells of the solution ...
    ```{solution-end}
    ```

Everything from a ``solution-start`` fence to the end of the matching ``solution-end``
block is removed, as are plain ``{solution}`` directive blocks. Exercises, stubs and the
checker cells stay, so a student runs the checker on their own code. The notebook gets
the book's set-up cell (installs ``ccmc_lite`` when missing) at the top and no outputs.
Needs ``jupytext`` (installed with the book's environment).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "TocEntry",
    "chapter_notebooks",
    "chapter_overview",
    "count_blocks",
    "is_notebook",
    "patch_kernel_polling",
    "strip_solutions",
    "taught_chapters",
    "toc_entries",
    "write_student_notebook",
]

_FENCE = re.compile(r"^(?P<fence>`{3,}|:{3,})\s*\{(?P<name>[a-z:-]+)\}")


@dataclass(frozen=True)
class TocEntry:
    """One page listed in ``_toc.yml``: its source ``path``, part ``caption`` and kind."""

    path: Path
    caption: str
    notebook: bool  # executable (a MyST notebook with a kernelspec, or an .ipynb)
    taught: bool  # a chapter of Parts I-III or the closing chapter (it has exercises)


def is_notebook(path: Path) -> bool:
    """True for ``.ipynb`` files and MyST Markdown notebooks (a ``kernelspec`` front matter)."""
    if path.suffix == ".ipynb":
        return True
    text = path.read_text(encoding="utf-8")
    front = re.match(r"^---\n(.*?)\n---", text, re.S)
    return bool(front and re.search(r"^kernelspec:", front.group(1), re.M))


def toc_entries(root: Path | str) -> list[TocEntry]:
    """Every page of ``root/_toc.yml`` in reading order (the root page first).

    Raises ``FileNotFoundError`` when the toc lists a page with no ``.md``/``.ipynb`` file.
    """
    import yaml

    root = Path(root)
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    found: list[TocEntry] = []

    def add(name: str, caption: str) -> None:
        candidates = [root / f"{name}{ext}" for ext in (".md", ".ipynb")]
        paths = [c for c in candidates if c.exists()]
        if not paths:
            raise FileNotFoundError(f"_toc.yml lists {name!r} but no .md/.ipynb file exists")
        rel = paths[0].relative_to(root).as_posix()
        taught = bool(re.match(r"book/(part\d+|closing)/[^/]+$", rel))
        found.append(TocEntry(paths[0], caption, is_notebook(paths[0]), taught))

    def walk(entries: list[dict[str, Any]], caption: str) -> None:
        for entry in entries:
            if "file" in entry:
                add(entry["file"], caption)
            for key in ("chapters", "sections"):
                walk(entry.get(key, []), caption)

    add(toc["root"], "")
    for part in toc.get("parts", []):
        walk(part.get("chapters", []), part.get("caption", ""))
    walk(toc.get("chapters", []), "")
    return found


def chapter_notebooks(root: Path | str) -> list[Path]:
    """The executable pages of the book, in reading order."""
    return [e.path for e in toc_entries(root) if e.notebook]


def taught_chapters(root: Path | str) -> list[Path]:
    """The chapters of Parts I-III and the closing chapter (each has exercises)."""
    return [e.path for e in toc_entries(root) if e.taught]


def _block_end(lines: list[str], start: int, fence: str) -> int:
    """Index of the line closing the directive opened at ``lines[start]``."""
    for j in range(start + 1, len(lines)):
        stripped = lines[j].strip()
        if stripped == fence or (
            stripped.startswith(fence[0])
            and set(stripped) == {fence[0]}
            and len(stripped) >= len(fence)
        ):
            return j
    raise ValueError(f"unclosed directive opened on line {start + 1}: {lines[start].strip()}")


def count_blocks(text: str, name: str) -> int:
    """Number of ``{name}`` directive openings in a MyST text."""
    return sum(1 for line in text.splitlines() if (m := _FENCE.match(line)) and m["name"] == name)


def strip_solutions(text: str) -> str:
    """Remove every solution (gated or plain) from a MyST Markdown chapter.

    Raises ``ValueError`` for a ``solution-start`` without a ``solution-end``.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str; got {type(text).__name__}")
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m and m["name"] == "solution":
            i = _block_end(lines, i, m["fence"]) + 1
            continue
        if m and m["name"] == "solution-start":
            j = i + 1
            while j < len(lines):
                m2 = _FENCE.match(lines[j])
                if m2 and m2["name"] == "solution-end":
                    break
                j += 1
            else:
                raise ValueError(f"solution-start on line {i + 1} has no solution-end")
            i = _block_end(lines, j, _FENCE.match(lines[j])["fence"]) + 1
            continue
        out.append(lines[i])
        i += 1
    return re.sub(r"\n{3,}", "\n\n", "".join(out))


#: Cells with this tag compare the page with its paper-profile snapshot: they are left out of
#: the snapshot run and of the code fingerprint.
SNAPSHOT_TAG = "paper-snapshot"


def chapter_code_sha256(chapter: Path) -> str:
    """SHA-256 of what a chapter's code does, leaving out cells tagged ``paper-snapshot``.

    The code cells are joined in order and parsed; the digest is taken of the syntax tree
    (:func:`ast.dump`), so formatting, comments and where the cell boundaries fall do not
    change it, while any change to a statement, a name or a constant does.
    """
    import ast
    import hashlib

    import jupytext

    nb = jupytext.reads(Path(chapter).read_text(encoding="utf-8"), fmt="md:myst")
    code = "\n".join(
        cell.source
        for cell in nb.cells
        if cell.cell_type == "code" and SNAPSHOT_TAG not in cell.metadata.get("tags", [])
    )
    tree = ast.parse(code, filename=str(chapter))
    return hashlib.sha256(ast.dump(tree).encode("utf-8")).hexdigest()


def write_student_notebook(chapter: Path, out_dir: Path, setup_cell: str | None = None) -> Path:
    """Write ``out_dir/<chapter>.ipynb`` without solutions and outputs; return its path."""
    try:
        import jupytext
        import nbformat
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("the student command needs jupytext: pip install jupytext") from err
    chapter = Path(chapter)
    if not chapter.exists():
        raise ValueError(f"chapter must be an existing file; got {chapter}")
    text = strip_solutions(chapter.read_text(encoding="utf-8"))
    nb = jupytext.reads(text, fmt="md:myst")
    if setup_cell:
        cell = nbformat.v4.new_code_cell(setup_cell.rstrip() + "\n")
        cell.metadata["tags"] = ["ccmc-setup"]
        nb.cells.insert(0, cell)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / (chapter.stem + ".ipynb")
    nbformat.write(nb, str(target))
    return target


#: Longest single wait on a kernel socket, in seconds (:func:`patch_kernel_polling`).
POLL_SLICE_S = 0.5


def patch_kernel_polling() -> None:
    """Poll kernel sockets in short slices instead of one long wait (idempotent).

    Executing chapters with widgets (``ipywidgets.interact``) occasionally deadlocked: the
    kernel had finished and replied, yet nbclient kept waiting in a single
    ``socket.poll(timeout)`` until the cell timeout (the readiness notification was
    missed; see jupyter/nbclient#312 and jupyter/nbconvert#2029). Re-polling every
    ``POLL_SLICE_S`` seconds sees the waiting message. Timeouts keep their meaning: the
    total wait is unchanged, and ``queue.Empty`` is raised when it runs out.

    Every notebook client needs it, not only the build's: the floor test's chapter run
    (a separate interpreter) lacked it, and a cold test run on the 2-core VM sat idle for
    760 s in that run's widget chapter before the reply was seen. Imports ``jupyter_client``
    when called, so this module still imports with the standard library alone.
    """
    from queue import Empty
    from time import monotonic

    from jupyter_client.channels import AsyncZMQSocketChannel

    if getattr(AsyncZMQSocketChannel.get_msg, "_ccmc_sliced", False):
        return

    async def get_msg(self, timeout: float | None = None) -> dict[str, Any]:
        assert self.socket is not None
        deadline = None if timeout is None else monotonic() + timeout
        while True:
            remaining = POLL_SLICE_S if deadline is None else max(0.0, deadline - monotonic())
            ready = await self.socket.poll(int(1000 * min(POLL_SLICE_S, remaining)))
            if ready:
                return await self._recv()
            if deadline is not None and monotonic() >= deadline:
                raise Empty

    get_msg._ccmc_sliced = True  # type: ignore[attr-defined]
    AsyncZMQSocketChannel.get_msg = get_msg  # type: ignore[method-assign]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write student notebooks without solutions.")
    parser.add_argument("chapters", nargs="*", type=Path, help="MyST chapters (default: the toc)")
    parser.add_argument("--out", type=Path, default=Path("student_notebooks"))
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="repository root")
    args = parser.parse_args(argv)
    chapters = list(args.chapters) or chapter_notebooks(args.root)
    setup = args.root / "book" / "_colab_setup.py"
    setup_cell = setup.read_text(encoding="utf-8") if setup.exists() else None
    for chapter in chapters:
        target = write_student_notebook(chapter, args.out, setup_cell)
        solutions = count_blocks(chapter.read_text(encoding="utf-8"), "solution-start")
        print(f"{chapter} -> {target} ({solutions} solution(s) removed)")
    return 0


def chapter_overview(root: Path | str, results: Mapping[str, Any] | None = None) -> list[dict]:
    """One row per taught chapter of the book at ``root``, in table-of-contents order.

    A taught chapter is a notebook under ``book/part<N>/`` or ``book/closing/``. Each row
    has the part caption (``part``), the chapter ``title`` (its first ``#`` heading), its
    ``path`` relative to ``root``, the number of ``exercises`` (gated ``exercise-start`` or
    plain ``exercise`` blocks) and the run time in seconds of each profile, ``book_s`` and
    ``paper_s``, read from ``results`` (the keys ``chapter_<profile>_s[<path>]`` that
    ``benchmarks/chapter_times.py`` writes; ``None`` when not measured; a string such as
    ``">240"`` when the run was stopped at a cap).

    Raises ``ValueError`` when ``root`` has no ``_toc.yml`` and ``TypeError`` when
    ``results`` is not a mapping.
    """
    root = Path(root)
    if not (root / "_toc.yml").is_file():
        raise ValueError(f"root must be a book folder containing _toc.yml; got {root}")
    if results is None:
        results = {}
    if not isinstance(results, Mapping):
        raise TypeError(f"results must be a mapping; got {type(results).__name__}")
    rows = []
    for entry in toc_entries(root):
        chapter, caption = entry.path, entry.caption
        rel = chapter.relative_to(root).as_posix()
        if not entry.taught:
            continue
        text = chapter.read_text(encoding="utf-8")
        title = re.search(r"^# (.+)$", text, re.M)
        rows.append(
            {
                "part": caption,
                "title": title.group(1).strip() if title else chapter.stem,
                "path": rel,
                "exercises": count_blocks(text, "exercise-start") + count_blocks(text, "exercise"),
                "book_s": results.get(f"chapter_book_s[{rel}]"),
                "paper_s": results.get(f"chapter_paper_s[{rel}]"),
            }
        )
    return rows


if __name__ == "__main__":
    sys.exit(main())
