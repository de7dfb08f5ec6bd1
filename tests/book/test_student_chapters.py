"""The student command on the book's real chapters.

Every taught chapter has at least two exercises, one hidden solution per exercise and a
checker call after it. The student notebook keeps the exercises, stubs and checker calls,
loses every line of solution code, and runs from top to bottom in the reader's environment
(only ``pip install <repo>``) with the checkers reporting "not implemented yet" instead of
raising.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from booktools import count_blocks, strip_solutions

from book_tools import ROOT, cell_text, notebook_result, student_notebook, taught_chapters

CHAPTERS = taught_chapters()
SETUP = (ROOT / "book" / "_colab_setup.py").read_text(encoding="utf-8")
CHECK_CALL = re.compile(r"^exercises\.check_\w+\(", re.M)


def _solution_only_lines(text: str) -> set[str]:
    """Substantial lines that occur inside solution blocks and nowhere else in the chapter."""
    inside: set[str] = set()
    outside: set[str] = set()
    in_solution = False
    for line in text.splitlines():
        if re.match(r"^`{3,}\{solution-start\}", line):
            in_solution = True
        elif re.match(r"^`{3,}\{solution-end\}", line):
            in_solution = False
        (inside if in_solution else outside).add(line.strip())
    return {ln for ln in inside - outside if len(ln) > 30 and not ln.startswith(("#", "`", ":"))}


def test_every_taught_chapter_is_listed():
    names = {p.relative_to(ROOT).as_posix() for p in CHAPTERS}
    for part in ("part1", "part2", "part3"):
        assert any(n.startswith(f"book/{part}/") for n in names), f"no {part} chapter in the toc"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_student_version_of_chapter(chapter: Path, tmp_path: Path):
    text = chapter.read_text(encoding="utf-8")
    n_ex = count_blocks(text, "exercise-start")
    assert n_ex >= 2, f"{chapter.name}: {n_ex} exercises (each chapter needs at least two)"
    assert count_blocks(text, "solution-start") == n_ex, f"{chapter.name}: one solution each"
    n_checks = len(CHECK_CALL.findall(text))
    assert n_checks >= n_ex, f"{chapter.name}: {n_checks} checker calls for {n_ex} exercises"
    secret = _solution_only_lines(text)
    assert secret, f"{chapter.name}: solutions contain no code or text of their own"

    student = strip_solutions(text)
    assert count_blocks(student, "solution-start") == 0
    assert count_blocks(student, "solution-end") == 0
    assert count_blocks(student, "exercise-start") == n_ex
    assert len(CHECK_CALL.findall(student)) == n_checks
    leaked = sorted(ln for ln in secret if ln in student)
    assert not leaked, f"{chapter.name}: solution lines left in the student version: {leaked[:3]}"

    target = student_notebook(chapter, tmp_path)
    assert target.name == f"{chapter.parent.name}_{chapter.stem}.ipynb"
    nb = json.loads(target.read_text(encoding="utf-8"))
    assert "".join(nb["cells"][0]["source"]).strip() == SETUP.strip()
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(c["outputs"] == [] and c["execution_count"] is None for c in code)
    assert sum(bool(CHECK_CALL.search("".join(c["source"]))) for c in code) == n_checks


@pytest.mark.student
@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_student_notebook_runs_in_the_readers_environment(chapter: Path, student_timings):
    """The student notebook as handed out runs top to bottom where only ``pip install`` ran.

    It runs in ``_build/venvs/reader`` without ``CCMC_BOOK_BUILD`` (as on a student's
    machine), and every checker says that the exercise is not solved yet. Its training calls
    replay what its chapter's run stored when their inputs are identical (``book_tools``).
    """
    executed = notebook_result("student", chapter).check()
    student_timings[str(chapter.relative_to(ROOT))] = executed.seconds
    reports = [cell_text(c) for c in executed.code_cells() if CHECK_CALL.search(c.source)]
    assert reports, f"{chapter.name}: no checker cells were executed"
    for report in reports:
        assert "❌" in report, f"{chapter.name}: an unsolved exercise did not fail: {report!r}"
    assert any("not implemented yet" in r for r in reports), reports
    if "train_runs(" in chapter.read_text(encoding="utf-8"):
        # the kernel's replay cache (tools/replay.py, installed by the kernel's configuration)
        # served its chapter's training: the student notebook did not train again
        replayed = executed.stream_text("stdout")
        assert "(replayed from the result cache:" in replayed, f"{chapter.name} trained again"
