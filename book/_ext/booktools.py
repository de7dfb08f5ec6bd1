"""Book tooling: the table of contents, student notebooks, the instructors' chapter table.

This is tooling for the book's authors and instructors, not part of the runtime package
``ccmc_lite``; it needs the ``book`` extra (``pyyaml``, ``jupytext``, ``nbformat``).

* :func:`toc_entries` reads ``_toc.yml`` — the one place the table of contents is parsed
  (the Sphinx extension, the tests and the benchmarks all call it).
* :func:`write_published` writes a chapter's published notebook (made by
  ``plain_notebooks`` during the build) and its student version, :func:`student_notebook`:
  the published notebook less its solution cells and outputs. With the standard library
  alone, from the published notebooks of a built book::

    python3 book/_ext/booktools.py --published _build/html/_sources --out student_notebooks
    python3 dev.py student            # the same

* :func:`chapter_overview` gives the rows of the table on the instructors' page; the
  chapters stored as paper-profile snapshots take their times from the snapshots
  (:func:`paper_snapshot_runs`).
* :func:`patch_kernel_polling` keeps ``nbclient`` from missing a kernel's reply; every
  program here that executes notebooks (the build, the tests, the benchmarks) calls it.
* :func:`chapter_code_sha256` fingerprints a chapter's code, so that a stored paper-profile
  snapshot of the chapter (``python3 dev.py paper-chapters``) can be checked against it.

Solutions in the book are written with sphinx-exercise's gated directives, so they may
contain code cells (``solution-start`` … ``solution-end``); :func:`strip_solutions` removes
them from a chapter's source (the tests use it to check that no solution line leaks).
"""

from __future__ import annotations

import argparse
import json
import os
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
    "has_exercises",
    "is_notebook",
    "paper_snapshot_runs",
    "patch_kernel_polling",
    "strip_solutions",
    "student_name",
    "student_notebook",
    "taught_chapters",
    "toc_entries",
    "write_published",
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
    return "".join(out)  # code cells keep their blank lines (formatted code has pairs)


#: Cells with this tag compare the page with its paper-profile snapshot: they are left out of
#: the snapshot run and of the code fingerprint.
SNAPSHOT_TAG = "paper-snapshot"
#: Where ``dev.py paper-chapters`` writes the chapter snapshots, relative to the book's root
#: (``tools.snapshots.SNAPSHOT_FOLDER``; a test keeps the two the same).
SNAPSHOT_FOLDER = Path("tools") / "data" / "paper_chapters"


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


#: Tags of the published notebooks' cells (``plain_notebooks`` writes them): a solution's
#: cells (student notebooks drop them), the set-up cell that installs ``ccmc_lite``, and a
#: cell hidden on the page but kept in notebooks (an explorer needs a live kernel).
SOLUTION_TAG = "solution"
SETUP_TAG = "ccmc-setup"
NOTEBOOK_ONLY_TAG = "notebook-only"


def student_name(docname: str) -> str:
    """File stem of a chapter's student notebook: ``book/part2/01_x`` → ``part2_01_x``."""
    parts = Path(docname).parts
    if len(parts) < 2:
        raise ValueError(f"docname must be a chapter under book/<part>/; got {docname!r}")
    return f"{parts[-2]}_{parts[-1]}"


def student_notebook(published: Mapping[str, Any]) -> dict[str, Any]:
    """The student version of a published notebook: no solution cells, no outputs.

    Needs only the standard library: an instructor makes the student notebooks from the
    published ones (the book's download buttons) without the book's environment.
    Raises ``ValueError`` when ``published`` has no ``cells`` list or no exercise.
    """
    import copy

    cells = published.get("cells") if isinstance(published, Mapping) else None
    if not isinstance(cells, list):
        raise ValueError("published must be a notebook (a mapping with a 'cells' list)")
    if not has_exercises(published):
        raise ValueError("published has no solution cells: the chapter has no exercises")
    nb = copy.deepcopy(dict(published))
    kept = []
    for cell in nb["cells"]:
        if SOLUTION_TAG in cell.get("metadata", {}).get("tags", []):
            continue
        if cell["cell_type"] == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
        kept.append(cell)
    nb["cells"] = kept
    return nb


def has_exercises(published: Mapping[str, Any]) -> bool:
    """True when a published notebook has solution cells (so a student version)."""
    return any(
        SOLUTION_TAG in c.get("metadata", {}).get("tags", []) for c in published.get("cells", [])
    )


def write_published(outdir: Path, docname: str, notebook: Mapping[str, Any]) -> list[Path]:
    """Write a chapter's published notebook and, if it has exercises, its student version.

    The published notebook goes where the page's download and Colab buttons point
    (``outdir/_sources/<docname>.ipynb``); the student one to
    ``outdir/student_notebooks/<part>_<chapter>.ipynb``. Returns the paths written.
    """
    target = Path(outdir) / "_sources" / f"{docname}.ipynb"
    written = [_write_json(target, notebook)]
    if has_exercises(notebook):
        student = Path(outdir) / "student_notebooks" / f"{student_name(docname)}.ipynb"
        written.append(_write_json(student, student_notebook(notebook)))
    return written


def _write_json(path: Path, notebook: Mapping[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(notebook, indent=1, ensure_ascii=False, sort_keys=True)
    path.write_text(text + "\n", encoding="utf-8")
    return path


#: Longest single wait on a kernel socket, in seconds (:func:`patch_kernel_polling`).
POLL_SLICE_S = 0.5


def put_on_kernel_path(folder: Path) -> None:
    """Prepend ``folder`` to ``PYTHONPATH``, which every kernel started afterwards inherits.

    The build-only cells of the chapters (hidden, left out of every reader's notebook) and
    the evidence pages import the repository's ``tools/``; the kernels that execute them for
    the build or for a paper-profile snapshot find it there.
    """
    path = [str(Path(folder).resolve()), os.environ.get("PYTHONPATH", "")]
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in path if p)


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
    parser = argparse.ArgumentParser(
        description="Write student notebooks (no solutions, no outputs) from the published "
        "notebooks of a built book; needs only the standard library."
    )
    parser.add_argument(
        "--published",
        type=Path,
        default=Path("_build/html/_sources"),
        help="folder of published notebooks (the built book's _sources)",
    )
    parser.add_argument("--out", type=Path, default=Path("student_notebooks"))
    args = parser.parse_args(argv)
    found = sorted(args.published.glob("book/*/*.ipynb"))
    if not found:
        parser.error(f"no published notebooks under {args.published}/book/: build the book first")
    for path in found:
        published = json.loads(path.read_text(encoding="utf-8"))
        if not has_exercises(published):
            continue
        docname = path.relative_to(args.published).with_suffix("").as_posix()
        target = _write_json(
            args.out / f"{student_name(docname)}.ipynb", student_notebook(published)
        )
        print(f"{path} -> {target}")
    return 0


def paper_snapshot_runs(root: Path | str) -> dict[str, dict[str, Any]]:
    """The paper-profile run behind each chapter snapshot of the book at ``root``.

    Maps the chapter's path (``book/part1/02_x.md``) to the provenance its snapshot records
    (``wall_seconds``, ``created``, ``machine``, ...): the one record of when, where and how
    long that chapter ran at the paper profile.
    """
    runs = {}
    for path in sorted((Path(root) / SNAPSHOT_FOLDER).glob("*.json")):
        blob = json.loads(path.read_text(encoding="utf-8"))
        runs[f"book/{blob['chapter']}.md"] = dict(blob["provenance"])
    return runs


def chapter_overview(
    root: Path | str,
    results: Mapping[str, Any] | None = None,
    snapshots: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[dict]:
    """One row per taught chapter of the book at ``root``, in table-of-contents order.

    A taught chapter is a notebook under ``book/part<N>/`` or ``book/closing/``. Each row
    has the part caption (``part``), the chapter ``title`` (its first ``#`` heading), its
    ``path`` relative to ``root``, the number of ``exercises`` (gated ``exercise-start`` or
    plain ``exercise`` blocks) and the run time in seconds of each profile, ``book_s`` and
    ``paper_s``. A chapter with a snapshot takes ``paper_s`` from it (``snapshots``, by default
    :func:`paper_snapshot_runs`; ``paper_from_snapshot`` is then true); the other times are
    read from ``results`` (the keys ``chapter_<profile>_s[<path>]`` that
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
    snapshots = paper_snapshot_runs(root) if snapshots is None else snapshots
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
                "paper_s": snapshots[rel]["wall_seconds"]
                if rel in snapshots
                else results.get(f"chapter_paper_s[{rel}]"),
                "paper_from_snapshot": rel in snapshots,
            }
        )
    return rows


if __name__ == "__main__":
    sys.exit(main())
