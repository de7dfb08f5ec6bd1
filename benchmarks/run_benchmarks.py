#!/usr/bin/env python3
"""Run every benchmark in one process and write the numbers to ``benchmarks/results.json``.

    python3 dev.py bench            # all bench_*.py modules, then the cold CI run
    python3 dev.py bench --quick    # shorter runs, no cold CI run
    python3 dev.py bench --no-cold  # full benchmarks, skip the cold CI run
    python3 dev.py bench --cold-only  # only the cold CI run (and per-chapter times)

Each ``bench_<name>.py`` module exposes ``run(quick: bool) -> dict`` of named numbers.
The cold measurement clones the repository into a temporary folder and times ``.ci/run``
there, exactly as CI runs it: the environment from the lock file, the reader's
environment, every chapter executed (empty cache), the ``-W`` book build and every test.
One run of the script (without flags) writes every figure the Reproduction pages and the
running page quote — the three batched-vs-loop ratios, the Part II paper step against this
machine's limit and the cold CI time — into ``benchmarks/results.json`` together.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))  # the repository's tools/ (not installed with the package)

from tools.stored import machine_description  # noqa: E402

RESULTS = HERE / "results.json"


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def _timed(cmd: list[str], cwd: Path) -> float:
    print(f"[bench] $ {' '.join(cmd)}  (in {cwd})", flush=True)
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True)
    return round(time.perf_counter() - start, 1)


def cold_ci_run() -> dict[str, object]:
    """Fresh clone: time ``.ci/run`` there, as CI runs it (environment, book, every test)."""
    with tempfile.TemporaryDirectory(prefix="ccmc-cold-") as tmp:
        clone = Path(tmp) / "fresh"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True, text=True
        ).stdout.strip()
        ci_s = _timed(["bash", ".ci/run"], clone)
        timings, students = {}, {}
        tfile = clone / "_build" / "chapter_timings.json"
        if tfile.exists():
            timings = json.loads(tfile.read_text())
        sfile = clone / "_build" / "student_timings.json"  # they replay their chapter's training
        if sfile.exists():
            students = json.loads(sfile.read_text())
    out: dict[str, object] = {
        "cold_ci_run_s": ci_s,
        "cold_ci_run_min": round(ci_s / 60, 1),
        "cold_ci_commit": commit,
        "cold_ci_machine": machine_description(),  # the file mixes runs of several machines
    }
    for chapter, seconds in sorted(timings.items()):  # book profile, from the chapter tests
        out[f"chapter_book_s[{chapter}]"] = seconds
    for chapter, seconds in sorted(students.items()):
        out[f"student_notebook_s[{chapter}]"] = seconds
    if timings:  # measured inside the cold run: every test process shares the two cores
        out["chapter_book_date"] = time.strftime("%Y-%m-%d %H:%M")
        out["chapter_book_machine"] = f"{machine_description()}, during the cold test run"
    return out


def _write(results: dict[str, object]) -> None:
    old = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    old.update(results)
    RESULTS.write_text(json.dumps(old, indent=2) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short runs, no cold build")
    parser.add_argument("--no-cold", action="store_true", help="skip the cold build/test")
    parser.add_argument("--only", default="", help="comma-separated bench names to run")
    parser.add_argument("--cold-only", action="store_true", help="only the cold build/test")
    args = parser.parse_args()
    only = {s for s in args.only.split(",") if s}
    results: dict[str, object] = {}
    if not args.cold_only:  # what every benchmark below shares (the cold run names its own)
        results["machine"] = f"{machine_description()}, Python {platform.python_version()}"
        # glibc allocator tunables (dev.py sets them): they change speed, never numbers
        env = sorted(os.environ.items())
        results["allocator_env"] = {k: v for k, v in env if k.startswith("MALLOC_")}
        results["date"] = time.strftime("%Y-%m-%d %H:%M")
        results["quick"] = args.quick
        import torch

        results["torch"] = torch.__version__
        results["torch_threads"] = torch.get_num_threads()
    for path in sorted(HERE.glob("bench_*.py")):
        name = path.stem.removeprefix("bench_")
        if args.cold_only or (only and name not in only):
            continue
        print(f"[bench] {name} ...", flush=True)
        start = time.perf_counter()
        numbers = _load(path).run(quick=args.quick)
        results.update({f"{name}.{k}": v for k, v in numbers.items()})
        results[f"{name}.wall_s"] = round(time.perf_counter() - start, 1)
        results[f"{name}.machine"] = machine_description()
    _write(results)  # the benchmarks are kept even if the cold run below fails
    if not (args.quick or args.no_cold or only):
        try:
            results.update(cold_ci_run())
        except subprocess.CalledProcessError:
            results["cold_ci_run_s"] = "failed"
            _write(results)
            raise
        _write(results)
    print(json.dumps(results, indent=2))
    print(f"[bench] wrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
