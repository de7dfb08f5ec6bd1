"""The examples in the package's docstrings run and print what they show."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import ccmc_lite

MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(ccmc_lite.__path__, prefix="ccmc_lite.")
    if not info.ispkg
)


def test_examples_exist():
    finder = doctest.DocTestFinder()
    examples = sum(
        len(t.examples) for m in MODULES for t in finder.find(importlib.import_module(m))
    )
    assert examples >= 5


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} docstring example(s) of {name} failed"
