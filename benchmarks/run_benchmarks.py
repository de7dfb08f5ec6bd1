#!/usr/bin/env python3
"""Run every benchmark in one process and write the numbers to ``benchmarks/results.json``.

    python3 dev.py bench            # all bench_*.py modules + the cold build/test timing
    python3 dev.py bench --quick    # shorter runs, no cold build/test
    python3 dev.py bench --no-cold  # full benchmarks, skip the cold build/test
    python3 dev.py bench --cold-only  # only the cold build/test (and per-chapter times)

Each ``bench_<name>.py`` module exposes ``run(quick: bool) -> dict`` of named numbers.
The cold measurement clones the repository into a temporary folder and times, there,
``python3 dev.py env`` (environment from the lock file), ``python3 dev.py book`` (empty
execution cache: every chapter executes) and ``python3 dev.py test`` (the whole suite).
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


def cold_build_and_test() -> dict[str, float]:
    """Fresh clone: environment, cold book build, whole test suite."""
    with tempfile.TemporaryDirectory(prefix="ccmc-cold-") as tmp:
        clone = Path(tmp) / "fresh"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        py = sys.executable if sys.version_info >= (3, 10) else "python3"
        env_s = _timed([py, "dev.py", "env"], clone)
        book_s = _timed([py, "dev.py", "book"], clone)
        test_s = _timed([py, "dev.py", "test"], clone)
        timings = {}
        tfile = clone / "_build" / "chapter_timings.json"
        if tfile.exists():
            timings = json.loads(tfile.read_text())
    out = {
        "cold_env_s": env_s,
        "cold_book_build_s": book_s,
        "cold_test_suite_s": test_s,
    }
    for chapter, seconds in sorted(timings.items()):  # book profile, from the chapter tests
        out[f"chapter_book_s[{chapter}]"] = seconds
    if timings:
        out["chapter_book_date"] = time.strftime("%Y-%m-%d %H:%M")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short runs, no cold build")
    parser.add_argument("--no-cold", action="store_true", help="skip the cold build/test")
    parser.add_argument("--only", default="", help="comma-separated bench names to run")
    parser.add_argument("--cold-only", action="store_true", help="only the cold build/test")
    args = parser.parse_args()
    only = {s for s in args.only.split(",") if s}
    results: dict[str, object] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}",
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "quick": args.quick,
    }
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
    if not (args.quick or args.no_cold or only):
        results.update(cold_build_and_test())
    old = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    old.update(results)
    RESULTS.write_text(json.dumps(old, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    print(f"[bench] wrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
