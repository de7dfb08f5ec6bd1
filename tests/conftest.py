"""Shared pytest configuration.

* The book and Binder tests (markers ``book``, ``binder``) run after the chapter tests
  (marker ``chapter``): the build they use renders from the cache those fill. They run
  before the student-notebook tests (marker ``student``), so that the build and the
  browser work while the kernels still execute student notebooks. The Binder test comes
  first: it starts the build in the background and drives JupyterLab while Sphinx works.
  The minimum versions tests (marker ``floor``) run after the unit tests, before the
  chapters; their subprocesses start right after collection, in a background thread.
* The chapter and student-notebook tests (markers ``chapter`` and ``student``) that survive
  selection are handed to ``book_tools``, whose pool starts executing them in the reader's
  environment right after collection, while the unit tests run: chapters two kernels at a
  time, each student notebook after its chapter, at the lowest CPU priority.
* Chapter run times are written to ``_build/chapter_timings.json`` for the benchmarks and
  the instructor page; student-notebook run times to ``_build/student_timings.json``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

sys.path.insert(0, str(Path(__file__).parent))

# Property tests draw the same examples in every run ("ci", the default): a failure seen once
# is seen every time. HYPOTHESIS_PROFILE=explore draws new random examples (use it to hunt).
settings.register_profile(
    "ci", derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("explore", deadline=None, max_examples=500)
# The minimum-versions run (tests/book/test_floor.py) checks that the API works at the lower bounds;
# a few examples per property are enough there.
settings.register_profile(
    "floor",
    derandomize=True,
    deadline=None,
    max_examples=5,
    suppress_health_check=list(HealthCheck),
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

import book_tools  # noqa: E402 (needs the sys.path entry above)
from book_tools import BUILD_DIR, HTML_DIR  # noqa: E402


def pytest_collection_modifyitems(session, config, items):
    def rank(item):
        if item.get_closest_marker("student"):
            return 4  # last: the pool runs them after every chapter
        if item.get_closest_marker("binder"):
            return 3  # after the chapters (the build renders from the cache they fill)
        if item.get_closest_marker("book"):
            return 3.5  # after Binder's test, which overlaps the build with its own work
        if any(item.get_closest_marker(m) for m in ("chapter", "reader")):
            return 2
        if item.get_closest_marker("floor"):
            return 1
        return 0

    items.sort(key=rank)  # stable: keeps file order within each group
    # A test that needs the built book but runs among the unit tests would hold them up
    # until every chapter has run and the book is built.
    unmarked = [
        i.nodeid
        for i in items
        if "built_book" in getattr(i, "fixturenames", ())
        and not (i.get_closest_marker("book") or i.get_closest_marker("binder"))
    ]
    if unmarked:
        raise pytest.UsageError(f"mark these tests book, they need the built book: {unmarked}")


#: The module of tests/book/test_floor.py once its background runs were started.
FLOOR_MODULES: list = []


def pytest_collection_finish(session):
    """Tell the notebook pool which notebooks the selected tests need (after ``-k``/``-m``)."""
    for item in session.items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        for kind in ("chapter", "student"):  # both parametrized on ``chapter``
            if item.get_closest_marker(kind) and isinstance(params.get("chapter"), Path):
                book_tools.SELECTED.append((kind, params["chapter"]))
        if item.get_closest_marker("book") or item.get_closest_marker("binder"):
            book_tools.BUILD_WANTED = True
    early = os.environ.get("CCMC_TEST_EARLY_POOL", "1") != "0"
    if book_tools.SELECTED and early:
        book_tools.start_pool()  # the kernels work while the unit tests run
    floor = next((i for i in session.items if i.get_closest_marker("floor")), None)
    if floor is not None and early:
        FLOOR_MODULES.append(floor.module)
        floor.module.start_floor_runs()  # the floor's subprocesses too (tests/book/test_floor.py)


def pytest_sessionfinish(session, exitstatus):
    book_tools.shutdown_pool()
    book_tools.stop_book_build()  # started by the pool but never waited for
    for module in FLOOR_MODULES:
        module.shutdown_floor_runs()


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The fuzz harness's cases per family and verdict (set by tests/test_fuzz.py)."""
    report = getattr(config, "ccmc_fuzz_report", None)
    if report:
        terminalreporter.section("bad input: fuzz harness, cases per family")
        for line in report:
            terminalreporter.write_line(line)


def _recorded_timings(name: str):
    """Collect ``{notebook: seconds}`` during the session; merge them into ``_build/<name>``."""
    timings: dict[str, float] = {}
    yield timings
    if timings:
        BUILD_DIR.mkdir(exist_ok=True)
        path = BUILD_DIR / name
        old = json.loads(path.read_text()) if path.exists() else {}
        old.update({k: round(v, 2) for k, v in timings.items()})
        path.write_text(json.dumps(old, indent=2, sort_keys=True))


@pytest.fixture(scope="session")
def chapter_timings():
    yield from _recorded_timings("chapter_timings.json")


@pytest.fixture(scope="session")
def student_timings():
    yield from _recorded_timings("student_timings.json")


@pytest.fixture(scope="session")
def book_build():
    """The book's ``-W -n`` build, running in the background (``book_tools.start_book_build``).

    It starts as soon as every chapter of the notebook pool has run, or here at the latest.
    :func:`built_book` waits for it. The Binder test (``tests/book/test_binder.py``, which runs
    before the browser tests) drives JupyterLab while Sphinx works.
    """
    yield book_tools.start_book_build()
    book_tools.stop_book_build()


@pytest.fixture(scope="session")
def built_book(book_build) -> Path:
    """The built book (``_build/html``), once its build succeeded without a warning."""
    try:
        returncode = book_build.wait(timeout=3600)
        book_build.ended_at = time.time()  # at the latest (for _build/pool_timeline.json)
    except subprocess.TimeoutExpired:
        book_build.kill()
        pytest.fail("book build took more than an hour")
    log = (BUILD_DIR / "build.log").read_text()
    warned = "\n".join(line for line in log.splitlines() if "WARNING" in line)
    assert returncode == 0, f"book build failed:\n{warned}\n...\n{log[-3000:]}"
    warnings = [line for line in log.splitlines() if "WARNING" in line]
    assert not warnings, "book build printed warnings:\n" + "\n".join(warnings)
    assert (HTML_DIR / "index.html").exists()
    return HTML_DIR
