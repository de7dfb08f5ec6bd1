#!/usr/bin/env python3
"""Time every chapter in a given profile and record it in ``benchmarks/results.json``.

    python benchmarks/chapter_times.py --profile book
    python benchmarks/chapter_times.py --profile paper --cap 600
    python benchmarks/chapter_times.py --from-test-run _build/chapter_timings.json

Each chapter is executed in a fresh kernel with ``CCMC_PROFILE`` set, **without** touching
the book's execution cache (the cache is keyed by code only, so a paper-profile result
must never be rendered as the book profile). A chapter that runs longer than ``--cap``
seconds is stopped and recorded as ``">cap"``; the chapter itself states the estimated
cost of its paper profile.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))

from book_tools import booktools, chapter_notebooks  # noqa: E402

RESULTS = HERE / "results.json"


def _execute(path: Path) -> float:
    """Execute one chapter (in this process's environment); return the seconds taken."""
    from myst_nb.core.read import myst_nb_reader_plugin
    from nbclient import NotebookClient

    booktools.patch_kernel_polling()  # as the build and the tests do
    nb = myst_nb_reader_plugin(str(path))
    start = time.perf_counter()
    NotebookClient(
        nb,
        timeout=None,
        kernel_name="python3",
        record_timing=False,
        resources={"metadata": {"path": str(path.parent)}},
    ).execute()
    return time.perf_counter() - start


def time_chapter(path: Path, profile: str, cap: float) -> float | str:
    """Seconds to execute ``path`` in ``profile``, or ``">cap"`` when stopped at the cap."""
    env = {**os.environ, "CCMC_PROFILE": profile}
    cmd = [sys.executable, __file__, "--one", str(path)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=cap)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the kernel is in the same session
        proc.communicate()
        return f">{int(cap)}"
    if proc.returncode != 0:
        return "failed"
    return round(float(out.strip().splitlines()[-1]), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=("book", "paper"), default="book")
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--cap", type=float, default=600.0, help="seconds per chapter")
    parser.add_argument("--only", default="", help="substring filter on chapter paths")
    parser.add_argument(
        "--from-test-run",
        type=Path,
        help="record the book-profile times of a test run (_build/chapter_timings.json)",
    )
    args = parser.parse_args()
    if args.one:
        print(f"{_execute(args.one):.3f}")
        return
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    if args.from_test_run:
        timings = json.loads(args.from_test_run.read_text())
        for path in chapter_notebooks():
            rel = path.relative_to(ROOT).as_posix()
            if rel in timings:
                results[f"chapter_book_s[{rel}]"] = timings[rel]
        stamp = time.localtime(args.from_test_run.stat().st_mtime)
        results["chapter_book_date"] = time.strftime("%Y-%m-%d %H:%M", stamp)
        RESULTS.write_text(json.dumps(results, indent=2) + "\n")
        return
    for path in chapter_notebooks():
        rel = path.relative_to(ROOT).as_posix()
        if args.only and args.only not in rel:
            continue
        seconds = time_chapter(path, args.profile, args.cap)
        key = f"chapter_{args.profile}_s[{rel}]"
        results[key] = seconds
        print(f"{key} = {seconds}", flush=True)
        RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    results[f"chapter_{args.profile}_date"] = time.strftime("%Y-%m-%d %H:%M")
    results[f"chapter_{args.profile}_cap_s"] = args.cap
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
