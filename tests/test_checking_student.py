"""Tests for the exercise-checker helpers and the student-notebook command."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from booktools import (
    chapter_overview,
    count_blocks,
    main,
    strip_solutions,
    write_student_notebook,
)

from ccmc_lite.core import check_function, check_value, describe


def ref_softmax(x):
    x = np.asarray(x, dtype=float)
    e = np.exp(x - x.max())
    return e / e.sum()


CASES = [([0.0, 1.0],), ([3.0, -1.0, 2.0],), ([1000.0, 1000.0],)]


def test_reference_passes(capsys):
    result = check_function(ref_softmax, ref_softmax, CASES, name="softmax")
    assert result and result.passed
    assert capsys.readouterr().out.strip() == "✅ softmax: all 3 cases passed"


def test_wrong_answer_names_input_expected_and_returned(capsys):
    def unstable(x):
        e = np.exp(np.asarray(x, dtype=float))
        return e / e.sum()  # overflows on the third case

    result = check_function(unstable, ref_softmax, CASES, name="softmax")
    assert not result
    out = capsys.readouterr().out
    assert "❌ softmax: 1 of 3 cases failed." in out
    assert "input [1000, 1000]: contains NaN or inf" in out
    assert "contains NaN or inf" in out


def test_shape_and_value_mistakes_are_explained():
    res = check_function(lambda x: np.ones(5), ref_softmax, CASES[:1], name="s", quiet=True)
    assert "shape (5,) instead of (2,)" in res.message
    res = check_function(
        lambda x: ref_softmax(x) + 0.1, ref_softmax, CASES[:1], name="s", quiet=True
    )
    assert "largest difference 0.1 exceeds the tolerance" in res.message
    assert "expected array(2,) [0.2689, 0.7311]" in res.message


def test_exceptions_and_stubs_are_reported_not_raised():
    def broken(x):
        raise KeyError("oops")

    res = check_function(broken, ref_softmax, CASES, name="s", quiet=True)
    assert "raised KeyError" in res.message and len(res.failures) == 3

    def stub(x):
        raise NotImplementedError

    res = check_function(stub, ref_softmax, CASES, name="s", quiet=True)
    assert "not implemented yet" in res.message and len(res.failures) == 1
    with pytest.raises(TypeError, match="learner must be a function"):
        check_function(3, ref_softmax, CASES, name="s")


def test_check_value():
    assert check_value(0.5, 0.5, name="v", quiet=True)
    res = check_value(None, 0.5, name="v", quiet=True)
    assert "expected a number/array, got NoneType" in res.message
    res = check_value([[1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]], name="H", quiet=True)
    assert "shape (1, 2) instead of (2, 2)" in res.message
    assert describe(1 / 3) == "0.333333"


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


def test_write_student_notebook(tmp_path):
    chapter = tmp_path / "ch.md"
    chapter.write_text(CHAPTER)
    target = write_student_notebook(chapter, tmp_path / "out", setup_cell="print('setup')")
    nb = json.loads(target.read_text())
    sources = ["".join(c["source"]) for c in nb["cells"]]
    assert sources[0] == "print('setup')\n"
    assert not any("SECRET_SOLUTION" in s for s in sources)
    assert any("check(my_softmax)" in s for s in sources)
    assert all(c.get("outputs", []) == [] for c in nb["cells"] if c["cell_type"] == "code")
    with pytest.raises(ValueError, match="chapter must be an existing file"):
        write_student_notebook(tmp_path / "missing.md", tmp_path)


def test_student_command_line(tmp_path, capsys):
    chapter = tmp_path / "ch.md"
    chapter.write_text(CHAPTER)
    assert main([str(chapter), "--out", str(tmp_path / "nbs"), "--root", str(tmp_path)]) == 0
    assert (tmp_path / "nbs" / "ch.ipynb").exists()
    assert "1 solution(s) removed" in capsys.readouterr().out


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
    }
    assert chapter_overview(tmp_path)[0]["book_s"] is None
    with pytest.raises(ValueError, match=r"root must be a book folder containing _toc\.yml"):
        chapter_overview(tmp_path / "book")
    with pytest.raises(TypeError, match="results must be a mapping; got list"):
        chapter_overview(tmp_path, [1, 2])


def test_chapter_overview_of_this_book():
    root = Path(__file__).resolve().parents[1]
    rows = chapter_overview(root)
    assert [r["path"].split("/")[1] for r in rows][:1] == ["part1"]
    assert rows[-1]["path"] == "book/closing/one_lens.md"
    assert all(r["exercises"] >= 2 for r in rows), [(r["path"], r["exercises"]) for r in rows]


def test_require_callable_names_the_argument():
    from ccmc_lite.core import require_callable

    require_callable("my_fn", len)
    with pytest.raises(TypeError, match=r"my_fn must be a function .*; got int"):
        require_callable("my_fn", 3)
