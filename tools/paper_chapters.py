"""Execute chapters at the ``paper`` profile and store the numbers they quote.

    python3 dev.py paper-chapters                  # every chapter listed below
    python3 dev.py paper-chapters part3/02_near_stationarity [...]
    python3 dev.py paper-chapters --list

A chapter listed here is executed once with ``CCMC_PROFILE=paper`` (in a fresh kernel, like a
reader's notebook; the cells tagged ``paper-snapshot``, which compare the page with the
snapshot, are left out). Everything it glues is written with its provenance and the SHA-256
of the chapter's code to ``tools/data/paper_chapters/`` by
:func:`tools.snapshots.save_snapshot`; the wall time is part of that provenance, where the
instructors' chapter table reads it. A hidden cell at the chapter's end loads the snapshot
and glues both profiles' values and verdicts for its part's Reproduction page;
``tests/tooling/test_snapshots.py`` fails when a chapter's code has changed since its
snapshot was taken.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))

import booktools  # noqa: E402

from tools.snapshots import save_snapshot  # noqa: E402

MARK = "@@ccmc-snapshot@@"

#: Chapters with a paper profile (``by_profile``) that runs in minutes here, stored as a
#: snapshot; the training sweeps of Parts II and III are stored runs instead
#: (tools/paper_runs.py). Chapters without ``by_profile`` run the same in both profiles.
CHAPTERS = (
    "part1/02_learning_by_prompting",
    "part1/03_trajectory_collapse",
    "part1/04_one_trajectory",
    "part3/01_incontext_ngrams",
    "part3/02_near_stationarity",
    "closing/one_lens",
)


def take(chapter: str) -> tuple[dict, float]:
    """Execute ``chapter`` at the paper profile; return its glued values and the seconds."""
    import jupytext
    import nbformat
    from nbclient import NotebookClient

    path = ROOT / "book" / f"{chapter}.md"
    nb = jupytext.reads(path.read_text(encoding="utf-8"), fmt="md:myst")
    nb.cells = [c for c in nb.cells if booktools.SNAPSHOT_TAG not in c.metadata.get("tags", [])]
    dump = (
        "import json\nfrom tools.gluing import glued_values\n"
        f"print({MARK!r} + json.dumps(glued_values()))"
    )
    nb.cells.append(nbformat.v4.new_code_cell(dump))
    os.environ["CCMC_PROFILE"] = "paper"  # the kernel inherits it
    booktools.put_on_kernel_path(ROOT)  # its build-only cells glue with tools/
    booktools.patch_kernel_polling()  # as the build and the tests do
    start = time.perf_counter()
    NotebookClient(
        nb, timeout=None, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    seconds = time.perf_counter() - start
    text = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.get("name") == "stdout")
    line = next(ln for ln in text.splitlines() if ln.startswith(MARK))
    return json.loads(line[len(MARK) :]), seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", help="chapters to run (default: all listed)")
    parser.add_argument("--list", action="store_true", help="list the chapters and exit")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(CHAPTERS))
        return 0
    unknown = [c for c in args.chapters if c not in CHAPTERS]
    if unknown:
        parser.error(f"unknown chapters {unknown}; known: {list(CHAPTERS)}")
    for chapter in args.chapters or CHAPTERS:
        print(f"[paper-chapters] {chapter}: executing at the paper profile", flush=True)
        values, seconds = take(chapter)
        path = save_snapshot(
            chapter,
            values,
            code_sha256=booktools.chapter_code_sha256(ROOT / "book" / f"{chapter}.md"),
            wall_seconds=seconds,
            command=f"python3 dev.py paper-chapters {chapter}",
        )
        print(f"[paper-chapters] {chapter}: {len(values)} values, {seconds:.0f} s -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
