"""Shared pytest configuration.

* The book tests (marker ``book``) run last: they render from the cache that the chapter
  tests (marker ``chapter``) fill.
* Chapter run times are written to ``_build/chapter_timings.json`` for the benchmarks and
  the instructor page.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from book_tools import BUILD_DIR


def pytest_collection_modifyitems(session, config, items):
    def rank(item):
        if item.get_closest_marker("book"):
            return 2
        if item.get_closest_marker("chapter"):
            return 1
        return 0

    items.sort(key=rank)  # stable: keeps file order within each group


@pytest.fixture(scope="session")
def chapter_timings():
    timings: dict[str, float] = {}
    yield timings
    if timings:
        BUILD_DIR.mkdir(exist_ok=True)
        path = BUILD_DIR / "chapter_timings.json"
        old = json.loads(path.read_text()) if path.exists() else {}
        old.update({k: round(v, 2) for k, v in timings.items()})
        path.write_text(json.dumps(old, indent=2, sort_keys=True))
