"""Tests for the exercise-checker engine (ccmc_lite.teaching.checking) and the student notebooks.

The engine's promises, each tested so that it can fail: the reference passes; a wrong
answer fails naming the input, the expected and the returned value; every exception of the
learner's code is reported (SystemExit included, KeyboardInterrupt not); a learner that
changes its inputs fails and cannot corrupt the reference or a later case; an endless loop
stops at the time limit (SIGALRM in the main thread, a worker thread elsewhere); bad
arguments raise TypeError naming them; a result shows its message once in a notebook.
"""

from __future__ import annotations

import inspect
import json
import signal
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from booktools import (
    chapter_overview,
    count_blocks,
    main,
    patch_kernel_polling,
    strip_solutions,
    student_name,
    student_notebook,
    write_published,
)

from ccmc_lite.teaching import (
    Case,
    CheckResult,
    Exercise,
    describe,
    function_checker,
    value_checker,
)


def ref_softmax(x):
    x = np.asarray(x, dtype=float)
    e = np.exp(x - x.max())
    return e / e.sum()


CASES = [([0.0, 1.0],), ([3.0, -1.0, 2.0],), ([1000.0, 1000.0],)]


@function_checker(ref_softmax, CASES, name="softmax")
def check_softmax(my_softmax, *, seed=0, quiet=False):
    """Check ``my_softmax(x)``: the softmax of a list of numbers."""


def tensor_cases(seed):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(5, generator=gen, dtype=torch.float64)
    return [Case(x), Case(x[:3]), (torch.zeros(2, dtype=torch.float64),)]  # x[:3] shares x


@function_checker(lambda x: torch.softmax(x, 0), tensor_cases, name="tensor softmax", atol=1e-9)
def check_tensor_softmax(my_softmax, *, seed=0, quiet=False):
    """Check ``my_softmax(x)`` on float64 tensors."""


# ----------------------------------------------------------------- passing and failing


def test_reference_passes_with_one_line(capsys):
    result = check_softmax(ref_softmax)
    assert result and result.passed and result.failures == []
    assert capsys.readouterr().out == "✅ softmax: all 3 cases passed\n"
    assert check_tensor_softmax(lambda x: torch.softmax(x, 0), seed=5)


def test_wrong_answer_names_input_expected_and_returned(capsys):
    def unstable(x):
        e = np.exp(np.asarray(x, dtype=float))
        return e / e.sum()  # overflows on the third case

    result = check_softmax(unstable)
    assert not result
    out = capsys.readouterr().out
    assert out.startswith("❌ softmax: 1 of 3 cases failed.\n")
    assert "input [1000, 1000]: contains NaN or inf; expected array(2,) [0.5, 0.5]" in out


def test_shape_and_value_mistakes_are_explained():
    res = check_softmax(lambda x: np.ones(5), quiet=True)
    assert "shape (5,) instead of (2,)" in res.message and len(res.failures) == 3
    res = check_softmax(lambda x: ref_softmax(x) + 0.1, quiet=True)
    assert "largest difference 0.1 at index (0,) (expected 0.2689414214, returned" in res.message
    assert "expected array(2,) [0.2689, 0.7311]" in res.message
    assert "(+2 more failing case(s))" in res.message
    res = check_softmax(lambda x: "softmax", quiet=True)
    assert "expected a number/array, got str" in res.message


def test_exceptions_are_reported_not_raised():
    def broken(x):
        raise KeyError("oops")

    res = check_softmax(broken, quiet=True)
    assert not res and len(res.failures) == 3
    assert res.failures[0] == "input [0, 1] raised KeyError: 'oops'"

    def exits(x):
        sys.exit(3)  # a script habit: must not end the notebook's kernel

    res = check_softmax(exits, quiet=True)
    assert not res and res.failures[0] == "input [0, 1] raised SystemExit: 3"

    def interrupted(x):
        raise KeyboardInterrupt  # the user pressed stop: that must still stop

    with pytest.raises(KeyboardInterrupt):
        check_softmax(interrupted, quiet=True)


def test_a_stub_is_not_implemented_yet(capsys):
    def stub(x):
        raise NotImplementedError

    res = check_softmax(stub)
    assert not res
    assert res.failures == ["not implemented yet: write your solution in the cell above"]
    assert capsys.readouterr().out == (
        "❌ softmax: not implemented yet: write your solution in the cell above\n"
    )


# ----------------------------------------------------------------- inputs are protected


def test_changing_an_input_fails_without_corrupting_the_check():
    seen = []

    def scrambles(x):
        seen.append(x.clone())
        out = torch.softmax(x, 0)
        x.mul_(-3.0).add_(1.0)  # the right answer, but the caller's data is destroyed
        return out

    res = check_tensor_softmax(scrambles, quiet=True)
    assert not res and len(res.failures) == 3
    assert all("the right answer, but your function changed x in place" in f for f in res.failures)
    # every call saw the original inputs: x[:3] was not destroyed by the call on x
    originals = [c.args[0] for c in check_tensor_softmax.exercise.cases_for(0)]
    assert all(torch.equal(a, b) for a, b in zip(seen, originals, strict=True))
    # ... and the message shows the input as it was, not as the learner left it
    assert f"input {describe(originals[0])}: the right answer" in res.failures[0]
    assert check_tensor_softmax(lambda x: torch.softmax(x, 0), quiet=True)


def test_each_reference_is_computed_after_the_learner_on_its_own_copy():
    order = []

    def reference(x):
        order.append("reference")
        return x.sum()

    def learner(x):
        order.append("learner")
        out = x.sum()
        x.zero_()
        return out

    shared = torch.ones(3, dtype=torch.float64)
    exercise = Exercise("sum", reference=reference, cases=[(shared,), (shared,)])
    res = exercise.check(learner, argument="my_sum", quiet=True)
    # no reference answer exists while the learner's code runs (a frame could hold it)
    assert order == ["learner", "reference", "learner", "reference"]
    assert torch.equal(shared, torch.ones(3, dtype=torch.float64))
    assert len(res.failures) == 2 and all("changed x in place" in f for f in res.failures)


def test_a_reference_that_changes_its_input_cannot_mislead_the_learner():
    def normalises_in_place(x):  # a careless reference
        return x.div_(x.sum())

    seen = []
    exercise = Exercise("norm", reference=normalises_in_place, cases=[(torch.ones(2),)])
    assert exercise.check(lambda x: seen.append(x.clone()) or x / x.sum(), quiet=True)
    assert torch.equal(seen[0], torch.ones(2))


def test_in_place_changes_are_found_in_every_kind_of_input():
    model = torch.nn.Linear(2, 2).double()
    inputs = ([[1, 2], [3]], {"a": np.ones(2)}, np.arange(3.0), model, (torch.ones(2),))
    exercise = Exercise("kinds", reference=lambda *a: 1.0, cases=[inputs])
    assert exercise.check(lambda *a: 1.0, quiet=True)  # reading is fine
    mutations = [
        lambda a: a[0][0].append(7),
        lambda a: a[1]["a"].__setitem__(0, 5.0),
        lambda a: a[2].__imul__(-1),
        lambda a: torch.nn.init.zeros_(a[3].weight),
        lambda a: a[4][0].add_(1),
    ]
    for k, mutate in enumerate(mutations):

        def learner(*args, mutate=mutate):
            mutate(args)
            return 1.0

        res = exercise.check(learner, quiet=True)
        assert not res and f"changed argument {k + 1} in place" in res.message, (k, res.message)


# ----------------------------------------------------------------- the time limit


def slow_exercise(limit=0.3):
    return Exercise("slow", reference=lambda n: n, cases=[(1,), (2,), (3,)], time_limit=limit)


def endless(n):
    while True:
        pass


def test_an_endless_loop_stops_at_the_time_limit():
    handler = signal.getsignal(signal.SIGALRM)
    start = time.monotonic()
    res = slow_exercise().check(endless, quiet=True)
    assert time.monotonic() - start < 5
    assert not res and "3 of 3 cases failed" in res.message
    assert "input 1: stopped after 0.3 s, the time limit of this exercise" in res.message
    assert "2 more case(s) not run" in res.message
    assert signal.getsignal(signal.SIGALRM) is handler  # the handler is restored
    assert signal.getitimer(signal.ITIMER_REAL)[0] == 0 or handler is not signal.SIG_DFL


def test_the_time_limit_covers_the_whole_exercise():
    def sleepy(n):
        time.sleep(0.2)  # each case is fast, all of them together are not
        return n

    res = slow_exercise(0.5).check(sleepy, quiet=True)
    assert not res and "input 3: stopped after 0.5 s" in res.message
    assert slow_exercise(2.0).check(sleepy, quiet=True)


def test_catching_the_timeout_does_not_escape_it():
    def stubborn(n):
        try:
            endless(n)
        except BaseException:  # swallows the engine's CheckTimeout too
            pass
        return n

    res = slow_exercise().check(stubborn, quiet=True)
    assert not res and "input 1: stopped after 0.3 s" in res.message


def test_an_outer_timer_survives_the_check():
    fired = []
    previous = signal.signal(signal.SIGALRM, lambda *a: fired.append(time.monotonic()))
    try:
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        assert slow_exercise(5.0).check(lambda n: n, quiet=True)
        assert 0.5 < signal.getitimer(signal.ITIMER_REAL)[0] <= 1.0  # re-armed, not reset
        time.sleep(1.2)
        assert len(fired) == 1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_an_outer_timer_due_first_fires_once_during_the_check():
    fired = []
    previous = signal.signal(signal.SIGALRM, lambda *a: fired.append(time.monotonic()))

    def sleepy(n):
        time.sleep(0.1)
        return n

    try:
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        assert slow_exercise(5.0).check(sleepy, quiet=True)  # not stopped by the outer alarm
        time.sleep(0.2)
        assert len(fired) == 1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_outside_the_main_thread_a_worker_thread_enforces_the_limit():
    out = {}

    def run():
        out["slow"] = slow_exercise().check(endless, quiet=True)
        out["fast"] = slow_exercise().check(lambda n: n, quiet=True)
        out["error"] = slow_exercise().check(lambda n: 1 / 0, quiet=True)

    before = threading.active_count()
    thread = threading.Thread(target=run)
    thread.start()
    thread.join(10)
    assert not out["slow"] and "stopped after 0.3 s" in out["slow"].message
    assert out["fast"] and "raised ZeroDivisionError" in out["error"].message
    for _ in range(50):  # the abandoned worker was asked to stop, and stops
        if threading.active_count() <= before:
            break
        time.sleep(0.1)
    assert threading.active_count() <= before


def test_checker_arguments_are_checked():
    res = check_softmax(ref_softmax([1.0]), quiet=True)  # called instead of passed: a ❌
    assert not res and "my_softmax must be a function (define it with def" in res.message
    res = check_softmax(None, quiet=True)
    assert not res and res.message.startswith("❌") and "got NoneType" in res.message
    with pytest.raises(ValueError, match="seed"):
        check_softmax(ref_softmax, seed=-1)
    with pytest.raises(TypeError, match="quiet must be True or False"):
        check_softmax(ref_softmax, quiet="yes")
    with pytest.raises(TypeError, match="positional"):
        check_softmax(ref_softmax, 3)  # seed and quiet are keyword-only
    with pytest.raises(TypeError, match="exactly one of reference= and expected="):
        Exercise("x")
    with pytest.raises(ValueError, match="time_limit"):
        Exercise("x", reference=abs, time_limit=0)


def test_a_checker_has_the_one_signature_and_documents_it():
    sig = inspect.signature(check_softmax)
    assert list(sig.parameters) == ["my_softmax", "seed", "quiet"]
    assert "*, seed: int = 0, quiet: bool = False" in str(sig)
    assert sig.return_annotation is CheckResult
    doc = check_softmax.__doc__
    assert doc.startswith("Check ``my_softmax(x)``")
    for entry in ("my_softmax : callable", "seed : int", "quiet : bool", "Returns", "TypeError"):
        assert entry in doc
    for bad in (
        lambda my, seed=0, quiet=False: None,  # seed not keyword-only
        lambda my, *, quiet=False: None,  # no seed
        lambda my, *, seed=1, quiet=False: None,  # another default
        lambda my, *, grid, seed=0, quiet=False: None,  # settings only for values
    ):
        with pytest.raises(TypeError, match="a checker's signature is"):
            function_checker(abs, [(1,)], name="x")(bad)


# ----------------------------------------------------------------- value checkers


def expected_table(grid):
    g = np.asarray(grid, dtype=float)
    if g.ndim != 1:
        raise ValueError("grid must be 1-D")
    return np.add.outer(g, g)


@value_checker(
    expected_table,
    name=lambda grid: f"sum table on {len(grid)} points",
    entries=lambda grid: [
        (f"at ({a:g}, {b:g})", (i, j)) for i, a in enumerate(grid) for j, b in enumerate(grid)
    ],
)
def check_sum_table(my_table, *, grid, seed=0, quiet=False):
    """Check ``my_table[i, j] = grid[i] + grid[j]``.

    Parameters
    ----------
    grid : list of float
        The points.
    """


def test_value_checker(capsys):
    grid = [0.1, 0.2]
    assert check_sum_table(np.add.outer(grid, grid), grid=grid)
    assert capsys.readouterr().out == "✅ sum table on 2 points: all 4 cases passed\n"
    assert check_sum_table(torch.tensor([[0.2, 0.3], [0.3, 0.4]]), grid=grid, quiet=True)
    res = check_sum_table(np.array([[0.2, 0.3], [0.3, 0.5]]), grid=grid, quiet=True)
    assert res.message.startswith("❌ sum table on 2 points: 1 of 4 cases failed.")
    assert "at (0.2, 0.2): largest difference 0.1" in res.message
    assert "expected 0.4, got 0.5" in res.message
    res = check_sum_table(np.zeros(3), grid=grid, quiet=True)
    assert "shape (3,) instead of (2, 2)" in res.message
    res = check_sum_table(None, grid=grid, quiet=True)
    assert res.message == (
        "❌ sum table on 2 points: not implemented yet: set my_table to your answer in the cell"
        " above"
    )
    for bad in ("0.3", True, print, {1: 2}):  # a ❌, like every other wrong answer
        res = check_sum_table(bad, grid=grid, quiet=True)
        assert not res and "my_table must be a number or an array" in res.message
    with pytest.raises(ValueError, match="grid"):
        check_sum_table(0.1, grid=[[0.1]])
    with pytest.raises(TypeError, match="grid"):
        check_sum_table(0.1)  # the setting is required
    assert list(inspect.signature(check_sum_table).parameters) == [
        "my_table",
        "grid",
        "seed",
        "quiet",
    ]
    doc = check_sum_table.__doc__
    assert doc.index("my_table : ") < doc.index("grid : ") < doc.index("seed : int")


# ----------------------------------------------------------------- shown once in a notebook


def test_displaying_a_result_adds_nothing_in_the_cell_that_printed_it(capsys, monkeypatch):
    import IPython
    from IPython.core.formatters import DisplayFormatter

    cell = {"n": 1}

    class Shell:
        @property
        def execution_count(self):
            return cell["n"]

    monkeypatch.setattr(IPython, "get_ipython", lambda: Shell())
    result = check_softmax(ref_softmax)  # printed in cell 1
    assert DisplayFormatter().format(result) == ({}, {})  # and no repr as the cell's output
    assert capsys.readouterr().out == "✅ softmax: all 3 cases passed\n"
    cell["n"] = 2  # shown again in a later cell: printed again
    DisplayFormatter().format(result)
    assert capsys.readouterr().out == "✅ softmax: all 3 cases passed\n"
    quiet = check_softmax(ref_softmax, quiet=True)  # quiet, then displayed: printed once
    assert capsys.readouterr().out == ""
    DisplayFormatter().format(quiet)
    assert capsys.readouterr().out == "✅ softmax: all 3 cases passed\n"
    assert "passed=True" in repr(result)


@pytest.mark.slow
def test_a_checker_cell_prints_once_in_a_real_notebook():
    import nbformat
    from nbclient import NotebookClient

    setup = (
        "from ccmc_lite.teaching import function_checker\n"
        "@function_checker(abs, [(-1,), (2,)], name='abs')\n"
        "def check_abs(my_abs, *, seed=0, quiet=False):\n"
        '    """Check abs."""'
    )
    cells = [setup, "check_abs(abs)", "r = check_abs(abs, quiet=True)\nr", "r"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    patch_kernel_polling()  # as the build does
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    for cell in nb.cells[1:]:
        assert [o.output_type for o in cell.outputs] == ["stream"], cell.outputs
        assert cell.outputs[0]["text"] == "✅ abs: all 2 cases passed\n"


def test_describe():
    assert describe(1 / 3) == "0.333333"
    assert describe(torch.ones(2)) == "array(2,) [1., 1.]"
    assert describe(torch.nn.Linear(2, 2)) == "Linear(...)"
    assert describe(np.False_) == "False" and describe(np.float64(1 / 3)) == "0.333333"
    assert len(describe("x" * 500)) == 160 and describe("x" * 500).endswith("...")


# ----------------------------------------------------------------- student notebooks

CHAPTER = """---
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---
# A chapter

:::{exercise} Softmax
:label: ex-softmax
Implement it.
:::

```{code-cell} ipython3
def my_softmax(x):
    raise NotImplementedError
```

```{solution-start} ex-softmax
:class: dropdown
```

The trick is to subtract the maximum.

```{code-cell} ipython3
def my_softmax(x):
    return SECRET_SOLUTION(x)
```

```{solution-end}
```

```{code-cell} ipython3
check(my_softmax)
```

::::{solution} ex-other
:class: dropdown
Another SECRET_SOLUTION.
::::

The end.
"""


def test_strip_solutions_keeps_exercise_and_check():
    out = strip_solutions(CHAPTER)
    assert "SECRET_SOLUTION" not in out
    assert "solution" not in out.replace("your solution", "")
    assert "{exercise} Softmax" in out and "raise NotImplementedError" in out
    assert "check(my_softmax)" in out and "The end." in out
    assert count_blocks(CHAPTER, "solution-start") == 1
    assert count_blocks(out, "exercise") == 1


def test_unterminated_solution_is_an_error():
    with pytest.raises(ValueError, match="has no solution-end"):
        strip_solutions("```{solution-start} x\n```\ntext\n")
    with pytest.raises(TypeError, match="text must be a str"):
        strip_solutions(b"bytes")


def _published() -> dict:
    """A published notebook as the build writes it (tags from ``plain_notebooks``)."""

    def cell(kind, source, tags=(), outputs=()):
        c = {"cell_type": kind, "metadata": {"tags": list(tags)} if tags else {}, "source": source}
        if kind == "code":
            c.update(execution_count=1 if outputs else None, outputs=list(outputs))
        return c

    out = {"output_type": "stream", "name": "stdout", "text": "7\n"}
    return {
        "cells": [
            cell("code", "print('setup')", ["ccmc-setup"]),
            cell("markdown", "**Exercise 1.1**\n\n> write `my_softmax`"),
            cell("code", "def my_softmax(x):\n    raise NotImplementedError", outputs=[out]),
            cell("markdown", "**Solution to Exercise 1.1**\n\n> SECRET_SOLUTION", ["solution"]),
            cell("code", "def my_softmax(x):\n    return SECRET_SOLUTION", ["solution"], [out]),
            cell("code", "check(my_softmax)", outputs=[out]),
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def test_student_notebook_drops_solutions_and_outputs():
    published = _published()
    nb = student_notebook(published)
    sources = ["".join(c["source"]) for c in nb["cells"]]
    assert sources[0] == "print('setup')"
    assert not any("SECRET_SOLUTION" in s for s in sources)
    assert sources[-1] == "check(my_softmax)" and len(sources) == 4
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(c["outputs"] == [] and c["execution_count"] is None for c in code)
    assert len(published["cells"]) == 6, "the published notebook itself is not modified"
    with pytest.raises(ValueError, match="published has no solution cells"):
        student_notebook({"cells": published["cells"][:3]})
    with pytest.raises(ValueError, match="published must be a notebook"):
        student_notebook({"cells": "not a list"})


def test_student_names_keep_the_part():
    assert student_name("book/part2/01_markov_data_and_target") == "part2_01_markov_data_and_target"
    assert student_name("book/closing/one_lens") == "closing_one_lens"
    with pytest.raises(ValueError, match="docname must be a chapter"):
        student_name("intro")


def test_write_published_and_the_student_command_line(tmp_path, capsys):
    site = tmp_path / "html"
    written = write_published(site, "book/part1/01_x", _published())
    assert written == [
        site / "_sources" / "book" / "part1" / "01_x.ipynb",
        site / "student_notebooks" / "part1_01_x.ipynb",
    ]
    no_exercise = {**_published(), "cells": _published()["cells"][:3]}
    assert write_published(site, "book/part1/02_y", no_exercise) == [
        site / "_sources" / "book" / "part1" / "02_y.ipynb"
    ]
    out = tmp_path / "nbs"
    assert main(["--published", str(site / "_sources"), "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["part1_01_x.ipynb"]
    assert json.loads((out / "part1_01_x.ipynb").read_text()) == student_notebook(_published())
    assert "part1_01_x.ipynb" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["--published", str(tmp_path / "empty"), "--out", str(out)])


def test_chapter_overview(tmp_path):
    (tmp_path / "book" / "part1").mkdir(parents=True)
    (tmp_path / "book" / "part1" / "ch.md").write_text(CHAPTER)
    (tmp_path / "book" / "notes.md").write_text(CHAPTER)  # front matter: not a taught chapter
    (tmp_path / "book" / "intro.md").write_text("# Intro\n")
    (tmp_path / "_toc.yml").write_text(
        "format: jb-book\nroot: book/intro\nparts:\n"
        "  - caption: Front\n    chapters:\n      - file: book/notes\n"
        "  - caption: Part I — X\n    chapters:\n      - file: book/part1/ch\n"
    )
    results = {
        "chapter_book_s[book/part1/ch.md]": 12.5,
        "chapter_paper_s[book/part1/ch.md]": ">240",
    }
    (row,) = chapter_overview(tmp_path, results)
    assert row == {
        "part": "Part I — X",
        "title": "A chapter",
        "path": "book/part1/ch.md",
        "exercises": 1,
        "book_s": 12.5,
        "paper_s": ">240",
        "paper_from_snapshot": False,
    }
    # a snapshot of the chapter is the one record of its paper-profile run
    snapshots = tmp_path / "tools" / "data" / "paper_chapters"
    snapshots.mkdir(parents=True)
    run = {"wall_seconds": 93.5, "created": "2026-11-29 05:46:53 UTC", "machine": "m"}
    blob = {"chapter": "part1/ch", "values": {}, "code_sha256": "0", "provenance": run}
    (snapshots / "part1__ch.json").write_text(json.dumps(blob))
    (row,) = chapter_overview(tmp_path, results)
    assert (row["paper_s"], row["paper_from_snapshot"], row["book_s"]) == (93.5, True, 12.5)
    assert chapter_overview(tmp_path)[0]["book_s"] is None
    with pytest.raises(ValueError, match=r"root must be a book folder containing _toc\.yml"):
        chapter_overview(tmp_path / "book")
    with pytest.raises(TypeError, match="results must be a mapping; got list"):
        chapter_overview(tmp_path, [1, 2])


def test_chapter_overview_of_this_book():
    root = Path(__file__).resolve().parents[2]
    rows = chapter_overview(root)
    assert [r["path"].split("/")[1] for r in rows][:1] == ["part1"]
    assert rows[-1]["path"] == "book/closing/one_lens.md"
    assert all(r["exercises"] >= 2 for r in rows), [(r["path"], r["exercises"]) for r in rows]


# --- a checker cannot be hung, crashed, left in a changed state or read from a frame ------


def test_a_bare_except_loop_cannot_outlast_the_time_limit():
    def hides(n):
        while True:  # a common beginner pattern: retry whatever happens
            try:
                time.sleep(0.01)
            except:  # noqa: E722 (the point of the test)
                pass

    def hides_in_handler(n):
        while True:
            try:
                endless(n)
            except BaseException:
                try:
                    endless(n)
                except BaseException:
                    continue

    for learner in (hides, hides_in_handler):
        start = time.monotonic()
        res = slow_exercise().check(learner, quiet=True)
        assert time.monotonic() - start < 3, learner.__name__
        assert not res and "stopped after 0.3 s" in res.message
        assert sys.gettrace() is None  # the engine's trace function is gone again


class _Blocks:
    """A result whose conversion to a number never returns."""

    def __float__(self):
        while True:
            time.sleep(0.01)

    def __array__(self, dtype=None, copy=None):
        while True:
            time.sleep(0.01)


class _BlockingFloat(float):
    """A float whose conversion to a plain float never returns."""

    def __float__(self):
        while True:
            pass


class _Explodes(torch.Tensor):
    """A tensor subclass whose detach raises."""

    def detach(self):
        raise RuntimeError("no detaching me")


def test_reading_the_learners_result_is_limited_and_cannot_crash_the_checker():
    start = time.monotonic()
    res = slow_exercise(0.5).check(lambda n: _Blocks(), quiet=True)
    assert time.monotonic() - start < 20 and not res  # refused unread: not a number
    assert "expected a number/array, got _Blocks" in res.message
    start = time.monotonic()
    res = slow_exercise(0.5).check(lambda n: _BlockingFloat(n), quiet=True)
    assert time.monotonic() - start < 5 and not res
    assert "stopped after 0.5 s" in res.message
    res = slow_exercise(2.0).check(
        lambda n: torch.tensor(float(n)).as_subclass(_Explodes), quiet=True
    )
    assert not res and "RuntimeError: no detaching me" in res.message
    value = check_value_exercise().check(_Blocks(), quiet=True)
    assert not value and "expected a number/array, got _Blocks" in value.message
    start = time.monotonic()
    value = check_value_exercise().check(_BlockingFloat(0.5), quiet=True)
    assert time.monotonic() - start < 10 and not value and "could not be read" in value.message


def check_value_exercise():
    return Exercise("a value", expected=lambda: 0.5)


def test_global_torch_numpy_and_python_state_is_restored_after_a_check():
    import random

    def meddles(n):
        torch.set_default_dtype(torch.float32 if n % 2 else torch.float64)
        torch.set_num_threads(1)
        torch.manual_seed(123)
        torch.set_grad_enabled(False)
        np.random.seed(5)  # noqa: NPY002 (the legacy global generator, on purpose)
        random.seed(7)
        return n

    before = (
        torch.get_default_dtype(),
        torch.get_num_threads(),
        torch.random.get_rng_state(),
        torch.is_grad_enabled(),
        np.random.get_state()[1].copy(),  # noqa: NPY002
        random.getstate(),
    )
    assert slow_exercise(5.0).check(meddles, quiet=True)
    after = (
        torch.get_default_dtype(),
        torch.get_num_threads(),
        torch.random.get_rng_state(),
        torch.is_grad_enabled(),
        np.random.get_state()[1].copy(),  # noqa: NPY002
        random.getstate(),
    )
    assert before[:2] == after[:2] and before[3] == after[3] and before[5] == after[5]
    assert torch.equal(before[2], after[2]) and np.array_equal(before[4], after[4])


def _values_in_frames(frame):
    """Every number, array and tensor in the locals of ``frame`` and its callers."""
    found = []

    def walk(value, depth=0):
        if isinstance(value, (torch.Tensor, np.ndarray, float)):
            found.append(value)
        elif depth < 2 and isinstance(value, (list, tuple)):
            for v in value:
                walk(v, depth + 1)
        elif depth < 2 and isinstance(value, dict):
            for v in value.values():
                walk(v, depth + 1)

    while frame is not None:
        for value in frame.f_locals.values():
            walk(value)
        frame = frame.f_back
    return found


@pytest.mark.parametrize("which", ["softmax", "kgram"])
def test_no_frame_holds_a_reference_answer_while_the_learners_code_runs(which):
    from ccmc_lite.ngram.exercises import check_kgram_estimator

    check = check_tensor_softmax if which == "softmax" else check_kgram_estimator
    exercise = check.exercise
    seen = []

    def snoop(*args):
        seen.append(_values_in_frames(inspect.currentframe().f_back))
        return exercise.reference(*args)

    assert exercise.check(snoop, quiet=True)
    cases = exercise.cases_for(0)  # the answers, computed only now
    answers = [exercise._view(exercise.reference(*c.args), c) for c in cases]
    assert len(seen) == len(answers) > 1
    for k, (answer, values) in enumerate(zip(answers, seen, strict=True)):
        if any(torch.equal(answer, earlier) for earlier in answers[:k]):
            continue  # the learner's own earlier answer may equal it
        for v in values:
            same = (
                isinstance(v, torch.Tensor)
                and v.shape == answer.shape
                and v.dtype == answer.dtype
                and torch.equal(v, answer)
            )
            assert not same, "a frame held the reference answer of the current case"
