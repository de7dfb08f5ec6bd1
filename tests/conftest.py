"""Shared pytest configuration.

* The book tests (marker ``book``) run last: they render from the cache that the chapter
  tests (marker ``chapter``) fill.
* Chapter run times are written to ``_build/chapter_timings.json`` for the benchmarks and
  the instructor page.
"""

from __future__ import annotations

import json
import os
import sys
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
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

from book_tools import BUILD_DIR  # noqa: E402 (needs the sys.path entry above)


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
