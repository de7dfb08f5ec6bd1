"""Minimum versions: the package works with every runtime dependency at its lower bound.

``pyproject.toml`` declares lower bounds only (Colab and other readers' environments keep
what they have when it is new enough), so the bounds must be true. ``_build/venvs/floor``
holds each runtime dependency pinned at its bound (``book_tools.floor_requirements``; torch
is the one exception, see ``book_tools.FLOOR_EXCEPTIONS``) plus the test tooling. There the
package's unit tests run (a few examples per property test, training included), and a
chapter with a widget runs top to bottom. The environment is cached, keyed on the bounds:
only a changed bound pays for a new one.
"""

from __future__ import annotations

import concurrent.futures
import json
import subprocess

import pytest

from book_tools import (
    BUILD_DIR,
    CELL_TIMEOUT_S,
    FLOOR_EXCEPTIONS,
    FLOOR_VENV,
    ROOT,
    _version_key,
    ensure_floor_venv,
    floor_env,
    runtime_bounds,
)

pytestmark = pytest.mark.floor

#: The runtime package's tests, one folder per subpackage, and its layout rules. Not here: the
#: book's and the tools' tests (tests/book, tests/tooling), the bad-input fuzzing and the
#: run-twice determinism check: the reader's runtime does not depend on them, and the main run
#: covers them.
UNIT_PATHS = (
    "core", "teaching", "stored", "ccmc", "markov", "ngram", "lens", "test_architecture.py"
)  # fmt: skip
#: The checkers' contract (every checker misused nine ways) and the time limits on a learner's
#: code test the checking machinery's control flow. Its comparisons, which use numpy and
#: torch, run at the floor in each part's exercise tests (every checker, right and wrong
#: answers).
NOT_UNIT = ("teaching/test_checking_student.py", "teaching/test_exercises_contract.py")
#: Floors that the locally installable torch lifts above the declared bound.
RAISED_BY_TORCH = {"sympy"}
#: A chapter whose explorer is an ``ipywidgets.interact``: notebook execution, figures and the
#: widget API at their floors. Training at the floors is the unit tests' (test_training,
#: test_runs (markov) and the parts' trainers run in the unit-test run above).
FLOOR_CHAPTERS = (ROOT / "book" / "part2" / "02_unigram_trap.md",)


@pytest.fixture(scope="module")
def floor_python():
    return ensure_floor_venv()


def test_the_floor_environment_has_the_lower_bounds(floor_python):
    """Each runtime dependency is at its bound, or at what an exception (torch) requires."""
    out = subprocess.run(
        [str(floor_python), "-m", "pip", "list", "--format=json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    installed = {p["name"].lower(): p["version"] for p in json.loads(out)}
    floors = dict(r.split("==") for r in json.loads((FLOOR_VENV / "floor.json").read_text()))
    bounds = runtime_bounds()
    assert set(floors) == set(bounds)

    def same(a: str, b: str) -> bool:
        ka, kb = _version_key(a), _version_key(b)
        n = max(len(ka), len(kb))
        return ka + (0,) * (n - len(ka)) == kb + (0,) * (n - len(kb))

    for name, floor in floors.items():
        assert same(installed.get(name, "0"), floor), f"{name}: {installed.get(name)} != {floor}"
        if name not in FLOOR_EXCEPTIONS and not same(floor, bounds[name]):
            # Only an exception may lift a floor (torch 2.13 needs sympy >= 1.13.3; the bound
            # stays lower for readers with an older torch, e.g. Colab's).
            assert name in RAISED_BY_TORCH, f"{name} floor {floor} above its bound {bounds[name]}"


def _unit_command(python) -> list[str]:
    ignore = [f"--ignore=tests/{name}" for name in NOT_UNIT]
    marks = "not (chapter or student or book or binder or floor or reader or slow)"
    paths = [f"tests/{name}" for name in UNIT_PATHS]
    return [str(python), "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-m", marks,
            *ignore, *paths]  # fmt: skip


DRIVER = """
import sys, jupytext
from nbclient import NotebookClient
sys.path.insert(0, sys.argv[4])
import booktools
booktools.patch_kernel_polling()  # as the build and the tests do (a widget chapter runs)
nb = jupytext.read(sys.argv[1])
NotebookClient(nb, timeout=int(sys.argv[2]), kernel_name="python3",
               resources={"metadata": {"path": sys.argv[3]}}).execute()
print("ran", sum(c.cell_type == "code" for c in nb.cells), "code cells")
"""


def _chapter_command(python, chapter) -> list[str]:
    ext = ROOT / "book" / "_ext"
    return [str(python), "-c", DRIVER, str(chapter), str(CELL_TIMEOUT_S), str(chapter.parent),
            str(ext)]  # fmt: skip


# The floor's runs are subprocesses of a few minutes: they start in a background thread as
# soon as the tests are collected (conftest.py), beside the notebook pool and the unit
# tests, and each test below waits for its own run. (The main process would otherwise run
# them one after the other after the unit tests, and start the book build later.)
_RUNS: dict[str, concurrent.futures.Future] = {}
_EXECUTOR: concurrent.futures.ThreadPoolExecutor | None = None


def _run(name: str) -> subprocess.CompletedProcess:
    python = ensure_floor_venv()
    if name == "unit":
        cmd = _unit_command(python)
    else:
        cmd = _chapter_command(python, next(c for c in FLOOR_CHAPTERS if c.stem == name))
    proc = subprocess.run(cmd, cwd=ROOT, env=floor_env(), capture_output=True, text=True)
    if name == "unit":
        (BUILD_DIR / "floor-unit-tests.log").write_text(proc.stdout + proc.stderr)
    return proc


def start_floor_runs() -> None:
    """Queue the floor's unit-test run and chapter runs (once), one subprocess at a time."""
    global _EXECUTOR
    if _EXECUTOR is not None:
        return
    _EXECUTOR = concurrent.futures.ThreadPoolExecutor(1, "ccmc-floor")
    for name in ("unit", *(c.stem for c in FLOOR_CHAPTERS)):
        _RUNS[name] = _EXECUTOR.submit(_run, name)


def shutdown_floor_runs() -> None:
    if _EXECUTOR is not None:
        _EXECUTOR.shutdown(wait=True, cancel_futures=True)


def _result(name: str) -> subprocess.CompletedProcess:
    start_floor_runs()
    return _RUNS[name].result()


def test_unit_tests_pass_at_the_floor():
    proc = _result("unit")
    assert proc.returncode == 0, (
        "unit tests fail with the runtime dependencies at their lower bounds "
        f"(raise the bound that is not true):\n{proc.stdout[-5000:]}{proc.stderr[-2000:]}"
    )


@pytest.mark.parametrize("chapter", FLOOR_CHAPTERS, ids=lambda p: p.stem)
def test_chapter_runs_at_the_floor(chapter):
    """The kernel is the floor environment's own Python (its ``python3`` kernelspec)."""
    proc = _result(chapter.stem)
    assert proc.returncode == 0, (
        f"{chapter.name} fails with the runtime dependencies at their lower bounds:\n"
        f"{proc.stdout[-3000:]}{proc.stderr[-5000:]}"
    )
