"""The package is shaped like the book: a core, one subpackage per part, no cross-imports.

* ``ccmc_lite.core`` imports nothing else of the package; ``teaching`` (plots, exercise
  checking, glue) imports only ``core``; ``stored`` (the shipped results) ``core`` and
  ``teaching``;
* the parts (``ccmc``, ``markov``, ``ngram``) never import each other;
* ``ccmc_lite.lens`` (the closing chapter) may import every part;
* every subpackage exposes its public names in ``__all__``, each importable from it,
  and each module's ``__all__`` is exported by its subpackage.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from book_tools import ROOT

PACKAGE = ROOT / "ccmc_lite"
PARTS = ("ccmc", "markov", "ngram")
SUBPACKAGES = ("core", "teaching", "stored", *PARTS, "lens")


def _imported_subpackages(path: Path) -> set[str]:
    """The ``ccmc_lite`` subpackages a module imports (absolute or relative imports)."""
    rel = path.relative_to(ROOT).with_suffix("").parts  # e.g. ("ccmc_lite", "markov", "runs")
    here = list(rel[:-1])
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                target = [*base, *(node.module.split(".") if node.module else [])]
                names = [a.name for a in node.names] if not node.module and len(base) == 1 else []
            else:
                target = (node.module or "").split(".")
                names = []
            if target[:1] == ["ccmc_lite"]:
                if len(target) > 1:
                    found.add(target[1])
                found.update(n for n in names if n in SUBPACKAGES)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "ccmc_lite" and len(parts) > 1:
                    found.add(parts[1])
    return found & set(SUBPACKAGES)


def _modules(sub: str) -> list[Path]:
    return sorted((PACKAGE / sub).glob("*.py"))


@pytest.mark.parametrize("sub", SUBPACKAGES)
def test_import_rules(sub):
    allowed = {
        "core": {"core"},
        "teaching": {"core", "teaching"},
        "stored": {"core", "teaching", "stored"},
        "lens": set(SUBPACKAGES),
    }.get(sub, {"core", "teaching", "stored", sub})
    for module in _modules(sub):
        imported = _imported_subpackages(module)
        assert imported <= allowed, (
            f"{module.relative_to(ROOT)} imports {sorted(imported - allowed)}; "
            f"{sub} may import only {sorted(allowed)}"
        )


def test_import_rule_checker_sees_cross_imports(tmp_path):
    """The rule above can fail: a relative import of another part is detected."""
    fake = PACKAGE / "markov" / "_probe_for_test.py"
    try:
        fake.write_text("from ..ngram.data import NGramTask\nfrom . import kernels\n")
        assert _imported_subpackages(fake) == {"ngram", "markov"}
    finally:
        fake.unlink()


def test_top_level_package_is_only_modules_of_the_tree():
    loose = sorted(p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py")
    assert loose == [], f"modules belong in a subpackage: {loose}"


@pytest.mark.parametrize("sub", SUBPACKAGES)
def test_subpackage_exports_every_public_name_of_its_modules(sub):
    package = importlib.import_module(f"ccmc_lite.{sub}")
    exported = list(package.__all__)
    assert len(exported) == len(set(exported)), "a name is exported twice"
    for name in exported:
        assert hasattr(package, name), f"ccmc_lite.{sub}.{name} is in __all__ but missing"
    for module in _modules(sub):
        if module.name == "__init__.py" or module.stem == "exercises":
            continue
        mod = importlib.import_module(f"ccmc_lite.{sub}.{module.stem}")
        missing = [n for n in getattr(mod, "__all__", []) if n not in exported]
        assert not missing, f"ccmc_lite.{sub} does not export {missing} of {module.stem}"
        assert hasattr(mod, "__all__"), f"{module.relative_to(ROOT)} has no __all__"


def test_parts_are_reachable_from_the_top_level():
    import ccmc_lite

    for sub in SUBPACKAGES:
        assert getattr(ccmc_lite, sub).__name__ == f"ccmc_lite.{sub}"
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        ccmc_lite.nope  # noqa: B018


#: Top-level modules of the repository that are not the runtime package: tooling, tests,
#: benchmarks and the book's build. Readers have only ``pip install``-ed ccmc_lite.
NOT_RUNTIME = {"tools", "benchmarks", "tests", "dev", "book_tools", "booktools", "fuzzkit"}
#: Pages of the evidence layer: they measure the book with the repository's tools.
EVIDENCE_PAGES = ("book/running.md", "book/reproduction/")


def _top_level_imports(source: str) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
    return found


#: The modules of the build and evidence tooling (tools/): none of them lives in the package.
TOOLING_MODULES = {"replay", "snapshots", "sweeps", "costs", "allocator", "mkl_dispatch",
                   "paper_runs", "paper_chapters", "gpu_runs", "gluing"}  # fmt: skip


def test_no_tooling_module_lives_in_the_package():
    """Result replay, snapshots, the sweep executor, cost models, allocator tuning and run
    writers are in tools/; the package keeps what readers' notebooks import (``stored`` only
    reads the runs that chapters show)."""
    for module in sorted(PACKAGE.rglob("*.py")):
        assert module.stem not in TOOLING_MODULES, f"{module.relative_to(ROOT)}: move it to tools/"
    assert {p.stem for p in (ROOT / "tools").glob("*.py")} >= TOOLING_MODULES
    data = sorted(p.name for p in (PACKAGE / "data").iterdir())
    assert data == ["paper_runs"], (
        f"only the runs chapters show ship; evidence is in tools/data/: {data}"
    )


def test_the_package_never_imports_the_tooling():
    for module in sorted(PACKAGE.rglob("*.py")):
        wrong = _top_level_imports(module.read_text(encoding="utf-8")) & NOT_RUNTIME
        assert not wrong, f"{module.relative_to(ROOT)} imports {sorted(wrong)}"


def test_chapters_import_only_the_package_and_its_dependencies():
    """Every code cell of a teaching page that reaches readers (shown, or hidden but kept in
    their notebooks: ``notebook-only``) imports nothing of the repository but ccmc_lite. Its
    build-only cells (hidden and left out of every reader's notebook, e.g. the paper-snapshot
    cells) may import ``tools``; only evidence pages import tools/ in shown cells."""
    import jupytext

    from book_tools import NOTEBOOK_ONLY_TAG, chapter_notebooks, rel

    checked = build_only = 0
    for page in chapter_notebooks():
        if rel(page).startswith(EVIDENCE_PAGES):
            continue
        for cell in jupytext.read(page).cells:
            if cell.cell_type == "code":
                source = "\n".join(
                    line for line in cell.source.splitlines() if not line.startswith(("%", "!"))
                )
                tags = cell.metadata.get("tags", [])
                allowed = NOT_RUNTIME
                if "remove-cell" in tags and NOTEBOOK_ONLY_TAG not in tags:
                    allowed = NOT_RUNTIME - {"tools"}
                    build_only += "tools" in _top_level_imports(source)
                wrong = _top_level_imports(source) & allowed
                assert not wrong, f"{rel(page)} imports {sorted(wrong)}:\n{cell.source[:300]}"
                checked += 1
    assert checked > 300  # every teaching page was read
    assert build_only >= 6  # the paper-snapshot cells read their snapshots with tools/


def test_the_import_check_sees_the_tooling():
    assert _top_level_imports("from tools import costs\nimport tools.sweeps as s\n") == {"tools"}
    assert _top_level_imports("from . import tools") == set()  # a relative import is not it


PROJECT = ("ccmc_lite", "tools", "benchmarks", "booktools", "book_tools", "fuzzkit")


def _private_crossings(path: Path) -> list[str]:
    """``_names`` a module takes from another module of the project: imported by name, or
    read as ``module._name`` from a module it imported."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    modules: set[str] = set()  # local names bound to project modules
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            ours = node.level > 0 or (node.module or "").split(".")[0] in PROJECT
            for alias in node.names if ours else []:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    source = "." * node.level + (node.module or "")
                    found.append(f"line {node.lineno}: from {source} import {alias.name}")
                modules.add(alias.asname or alias.name)  # may be a module: checked below
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in PROJECT:
                    modules.add(alias.asname or alias.name.split(".")[0])
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_no_private_name_crosses_a_module_boundary():
    """A leading underscore means "this module only": the package, the tooling and the
    benchmarks never reach into another module's private names."""
    paths = [*PACKAGE.rglob("*.py"), *(ROOT / "tools").rglob("*.py")]
    paths += [*(ROOT / "benchmarks").glob("*.py"), *(ROOT / "book" / "_ext").glob("*.py")]
    crossings = {p.relative_to(ROOT).as_posix(): _private_crossings(p) for p in paths}
    offenders = {path: found for path, found in crossings.items() if found}
    assert not offenders, offenders


def test_the_private_name_check_sees_both_kinds(tmp_path):
    probe = tmp_path / "probe.py"
    lines = [
        "from .model import MarkovTransformer, _Block",
        "from tools import replay",
        "key = replay._environment()",
        "from ccmc_lite import core",
        "core.__all__",
    ]
    probe.write_text("\n".join(lines) + "\n")
    assert _private_crossings(probe) == [
        "line 1: from .model import _Block",
        "line 3: replay._environment",
    ]


def test_the_training_loop_is_short_and_its_callers_take_a_config():
    """One readable loop (<= 300 lines); every setting of a call is in its TrainConfig, so no
    training function takes more than 8 parameters (the Markov trainer at most 6)."""
    import inspect

    from ccmc_lite import core, markov

    assert len((PACKAGE / "core" / "training.py").read_text().splitlines()) <= 300
    from tools import markov_tasks, ngram_tasks

    limits = {core.train_runs: 8, markov.train_markov: 6, markov_tasks.sweep_task: 6}
    limits.update({getattr(ngram_tasks, n): 6 for n in ("sweep_task", "attention_only_task",
                                                        "plateau_task")})  # fmt: skip
    for fn, limit in limits.items():
        n = len(inspect.signature(fn).parameters)
        assert n <= limit, f"{fn.__qualname__} takes {n} parameters (at most {limit})"
        assert "config" in inspect.signature(fn).parameters or fn.__name__.endswith("_task")


def test_the_foundation_stays_small():
    """``core`` holds only the foundation (checks, seeds, chains, the training loop): a
    reader can read all of it."""
    lines = sum(len(p.read_text().splitlines()) for p in (PACKAGE / "core").glob("*.py"))
    assert lines <= 1500, f"ccmc_lite/core has {lines} lines"


#: Lines each subpackage may hold (docstrings included): the measured size, rounded up. A
#: ratchet, not a goal: lower a number when a subpackage shrinks. The package's target is
#: 9,000 lines; what it holds beyond that is the parts' exercise checkers (about 2,800 lines
#: with their engine), the bad-input checks and the beyond-the-paper analyses.
LINE_CAPS = {"core": 1500, "teaching": 1200, "stored": 250, "ccmc": 3550, "markov": 2600,
             "ngram": 3800, "lens": 350}  # fmt: skip
PACKAGE_LINE_CAP = 13_150


def test_the_package_does_not_grow():
    """Each subpackage stays within its cap, and the whole package within its own."""
    sizes = {
        sub: sum(len(p.read_text().splitlines()) for p in (PACKAGE / sub).rglob("*.py"))
        for sub in SUBPACKAGES
    }
    grown = {sub: (n, LINE_CAPS[sub]) for sub, n in sizes.items() if n > LINE_CAPS[sub]}
    assert not grown, f"subpackages over their line caps (lines, cap): {grown}"
    total = sum(len(p.read_text().splitlines()) for p in PACKAGE.rglob("*.py"))
    assert total <= PACKAGE_LINE_CAP, f"ccmc_lite has {total} lines (cap {PACKAGE_LINE_CAP})"


#: Test files that test a contract across modules rather than one module, and why.
ACROSS_MODULES = {
    "teaching/test_exercises_contract.py": "the one contract every part's checkers keep",
}


def test_unit_tests_mirror_the_package():
    """``tests/<subpackage>/test_<module>[_<what>].py``: each file names the module it tests.

    ``test_<subpackage>_<module>`` is allowed where two parts have a module of one name
    (pytest imports test files by their base name).
    """
    for sub in SUBPACKAGES:
        modules = {p.stem for p in (PACKAGE / sub).glob("*.py")} - {"__init__"}
        for path in sorted((ROOT / "tests" / sub).glob("test_*.py")):
            rel = path.relative_to(ROOT / "tests").as_posix()
            stem = path.stem.removeprefix("test_").removeprefix(f"{sub}_")
            named = any(stem == m or stem.startswith(f"{m}_") for m in modules)
            assert named or rel in ACROSS_MODULES, (
                f"tests/{rel} names no module of ccmc_lite.{sub} ({sorted(modules)})"
            )
