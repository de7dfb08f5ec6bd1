"""The contract every exercise checker of the book keeps, and the exercises in the chapters.

One table (every ``check_*`` of every part's ``exercises`` module) and one set of tests:
the one signature; the reference passes; a wrong answer, a raising answer and an answer
that changes its inputs fail, each with its own message, without corrupting the other cases;
a stub is "not implemented yet"; an answer of the wrong kind is a failure naming it; bad
settings raise ``TypeError``/``ValueError`` naming them; the global random state is left
alone. Then the chapters: every exercise has a stub,
a solution and a checker call, the solution passes (for several seeds), the stub does not,
and the student version keeps the stub and the call but not the solution.

The parts' own test modules (``test_exercises_part1.py`` ...) test each checker's wrong
answers and messages in detail.
"""

from __future__ import annotations

import ast
import copy
import inspect
import random
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
from booktools import strip_solutions

from book_tools import ROOT
from ccmc_lite import ccmc, lens, markov, ngram
from ccmc_lite.ccmc import exercises as part1
from ccmc_lite.lens import exercises as closing
from ccmc_lite.markov import exercises as part2
from ccmc_lite.ngram import exercises as part3
from ccmc_lite.teaching import CheckResult

#: Each part's folder of chapters, its exercises module and the import its chapters use.
PARTS = {
    "part1": (part1, "from ccmc_lite.ccmc import exercises", r"p1c\d"),
    "part2": (part2, "from ccmc_lite.markov import exercises", r"p2c\d"),
    "part3": (part3, "from ccmc_lite.ngram import exercises", r"p3c\d"),
    "closing": (closing, "from ccmc_lite.lens import exercises", "cl"),
}
CHECKERS = [getattr(mod, name) for mod, _, _ in PARTS.values() for name in mod.__all__]
FUNCTION_CHECKERS = [c for c in CHECKERS if c.exercise.is_function]
VALUE_CHECKERS = [c for c in CHECKERS if not c.exercise.is_function]
PACKAGES = {"ccmc": ccmc, "markov": markov, "ngram": ngram, "lens": lens}  # as chapters import
GRID = (0.1, 0.25, 0.4, 0.55, 0.7, 0.85)  # the book profile's grid of Part II, chapter 5
SETTINGS = {"check_phase_prediction": {"grid": GRID}}  # value checkers' required settings
ids = [c.__name__ for c in CHECKERS]


def name_of(checker):
    return checker.__name__


def answer_name(checker) -> str:
    return next(iter(inspect.signature(checker).parameters))


def run(checker, answer, **kwargs) -> CheckResult:
    return checker(answer, **SETTINGS.get(checker.__name__, {}), quiet=True, **kwargs)


# ----------------------------------------------------------------- the table


def test_the_table_holds_every_checker_once():
    assert len(CHECKERS) == len(set(CHECKERS)) == 41
    assert len(VALUE_CHECKERS) == 12  # the rest take the learner's function


@pytest.mark.parametrize("checker", CHECKERS, ids=name_of)
def test_one_signature(checker):
    params = list(inspect.signature(checker).parameters.values())
    assert params[0].name.startswith("my_") and params[0].kind is params[0].POSITIONAL_OR_KEYWORD
    assert [(p.name, p.default, p.kind) for p in params[-2:]] == [
        ("seed", 0, inspect.Parameter.KEYWORD_ONLY),
        ("quiet", False, inspect.Parameter.KEYWORD_ONLY),
    ]
    assert all(p.kind is p.KEYWORD_ONLY for p in params[1:])
    assert inspect.signature(checker).return_annotation is CheckResult
    assert checker.__module__.endswith(".exercises") and checker.__doc__.count("Parameters") == 1
    assert f"{params[0].name} : " in checker.__doc__ and "seed : int" in checker.__doc__


# ----------------------------------------------------------------- function checkers


def reference(checker):
    return checker.exercise.reference


@pytest.mark.parametrize("checker", FUNCTION_CHECKERS, ids=name_of)
def test_reference_passes_for_every_seed(checker, capsys):
    result = checker(reference(checker))
    assert result and result.failures == []
    out = capsys.readouterr().out
    assert out.startswith("✅") and out.count("\n") == 1  # one line
    for seed in (1, 2):
        assert checker(reference(checker), seed=seed, quiet=True)
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("checker", FUNCTION_CHECKERS, ids=name_of)
def test_one_wrong_case_fails_and_names_its_input(checker):
    cases = checker.exercise.cases_for(0)
    calls = []

    def wrong_on_the_last_case(*args):
        calls.append(1)
        return None if len(calls) == len(cases) else reference(checker)(*args)

    result = checker(wrong_on_the_last_case, quiet=True)
    assert not result and len(result.failures) == 1, result.message
    assert result.failures[0].startswith(f"input {cases[-1].show}")
    assert f"1 of {len(cases)} case" in result.message


@pytest.mark.parametrize("checker", FUNCTION_CHECKERS, ids=name_of)
def test_a_raising_solution_fails_on_every_case(checker):
    def raises(*args):
        raise ValueError("my bug")

    result = checker(raises, quiet=True)
    n = len(checker.exercise.cases_for(0))
    assert not result and len(result.failures) == n
    assert all(f.endswith("raised ValueError: my bug") for f in result.failures)

    def exits(*args):
        raise SystemExit(1)

    assert "raised SystemExit: 1" in checker(exits, quiet=True).message


def scramble(value) -> bool:
    """Change ``value`` in place if it can be changed; whether it was."""
    if isinstance(value, torch.Tensor):
        value.logical_not_() if value.dtype == torch.bool else value.add_(1)
    elif isinstance(value, np.ndarray):
        value += 1
    elif isinstance(value, list):
        value.append(copy.deepcopy(value[0]) if value else 0)
    elif isinstance(value, torch.nn.Module):
        with torch.no_grad():
            for p in value.parameters():
                p.add_(1)
    else:
        return False
    return True


@pytest.mark.parametrize("checker", FUNCTION_CHECKERS, ids=name_of)
def test_a_solution_that_changes_its_inputs_fails_without_corrupting_the_check(checker):
    """Right answers, inputs destroyed afterwards: every such case fails *for that* only."""
    mutable = [
        k
        for k, case in enumerate(checker.exercise.cases_for(0))
        if any(scramble(a) for a in copy.deepcopy(case.args))
    ]

    def right_then_scrambles(*args):
        out = copy.deepcopy(reference(checker)(*args))
        for a in args:
            scramble(a)
        return out

    result = checker(right_then_scrambles, quiet=True)
    assert len(result.failures) == len(mutable)
    assert all("the right answer, but your function changed" in f for f in result.failures)
    assert bool(result) == (not mutable)
    assert checker(reference(checker), quiet=True)  # nothing was left corrupted


def _stub(*args):
    raise NotImplementedError


@pytest.mark.parametrize("checker", FUNCTION_CHECKERS, ids=name_of)
def test_stub_is_reported_as_not_implemented(checker, capsys):
    result = checker(_stub)
    assert not result
    assert result.failures == ["not implemented yet: write your solution in the cell above"]
    assert capsys.readouterr().out.startswith("❌") and "not implemented yet" in result.message


@pytest.mark.parametrize("checker", FUNCTION_CHECKERS, ids=name_of)
@pytest.mark.parametrize("bad", [42, None, "my_function", [1, 2]])
def test_non_callable_is_a_failure_naming_the_argument(checker, bad, capsys):
    result = checker(bad)
    assert not result and result.failures[0].startswith(
        f"{answer_name(checker)} must be a function"
    )
    assert capsys.readouterr().out.startswith("❌")


# ----------------------------------------------------------------- value checkers


def expected(checker):
    """The expected value, for the checker's default settings (or those in SETTINGS)."""
    given = SETTINGS.get(checker.__name__, {})
    params = list(inspect.signature(checker).parameters.values())[1:-2]
    return checker.exercise.expected(**{p.name: given.get(p.name, p.default) for p in params})


@pytest.mark.parametrize("checker", VALUE_CHECKERS, ids=name_of)
def test_value_checker_contract(checker, capsys):
    right = expected(checker)
    assert checker(right, **SETTINGS.get(checker.__name__, {}))
    assert capsys.readouterr().out.startswith("✅")
    assert run(checker, torch.as_tensor(right))
    assert not run(checker, np.asarray(right) + 0.01)
    stub = run(checker, None)
    assert not stub
    assert f"not implemented yet: set {answer_name(checker)} to your answer" in stub.message
    for bad in ("2/3", lambda: 0.5, True):  # a wrong kind of answer is a ❌ with the reason
        result = run(checker, bad)
        assert not result
        assert result.failures[0].startswith(f"{answer_name(checker)} must be a number")


# ----------------------------------------------------------------- settings and the RNG


@pytest.mark.parametrize("checker", CHECKERS, ids=name_of)
def test_checker_settings_are_validated(checker):
    answer = reference(checker) if checker.exercise.is_function else expected(checker)
    with pytest.raises(ValueError, match="seed"):
        run(checker, answer, seed=-1)
    with pytest.raises(TypeError, match="seed"):
        run(checker, answer, seed=1.5)
    with pytest.raises(TypeError, match="quiet"):
        checker(answer, **SETTINGS.get(checker.__name__, {}), quiet="no")


def flat(value) -> list:
    """The numbers in a case, for comparing cases (models by their parameters)."""
    if isinstance(value, torch.nn.Module):
        return flat(list(value.state_dict().values()))
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in flat(v)]
    return [np.asarray(value.detach() if isinstance(value, torch.Tensor) else value)]


def same(a, b) -> bool:
    """Equal cases (to 1e-12: a fixed point found by iteration may differ in the last bit)."""
    fa, fb = flat(a), flat(b)
    return len(fa) == len(fb) and all(
        x.shape == y.shape
        and (
            np.allclose(x, y, rtol=0, atol=1e-12) if x.dtype.kind in "fc" else np.array_equal(x, y)
        )
        for x, y in zip(fa, fb, strict=True)
    )


def test_checkers_leave_the_global_state_alone_and_are_deterministic(capsys):
    torch_state, np_state = torch.get_rng_state(), np.random.get_state()[1].copy()  # noqa: NPY002
    py_state, threads = random.getstate(), torch.get_num_threads()
    for checker in FUNCTION_CHECKERS:
        assert checker(reference(checker), seed=3, quiet=True)
        first, again = checker.exercise.cases_for(3), checker.exercise.cases_for(3)
        assert all(same(a.args, b.args) for a, b in zip(first, again, strict=True))
        if callable(checker.exercise.cases):  # another seed, other random cases
            other = checker.exercise.cases_for(4)
            assert not all(same(a.args, b.args) for a, b in zip(first, other, strict=True))
    assert torch.equal(torch_state, torch.get_rng_state())
    assert np.array_equal(np_state, np.random.get_state()[1])  # noqa: NPY002
    assert random.getstate() == py_state and torch.get_num_threads() == threads
    assert capsys.readouterr().out == ""


# ----------------------------------------------------------------- the chapters' exercises

CODE_CELL = re.compile(r"```\{code-cell\} ipython3\n(.*?)\n```", re.S)


@dataclass(frozen=True)
class ChapterExercise:
    part: str
    path: Path
    label: str
    stub: str  # the first code cell of the exercise
    solution: tuple[str, ...]  # the code cells of the solution
    check: str  # the checker cell: one call, exercises.check_x(my_x, ...)

    def __str__(self) -> str:
        return self.label


def chapters(part: str) -> list[Path]:
    folder = ROOT / "book" / part
    return sorted(p for p in folder.glob("*.md") if p.name[:2].isdigit() or part == "closing")


def chapter_exercises(part: str, path: Path) -> list[ChapterExercise]:
    """Each exercise of a chapter: label, stub cell, solution cells and checker cell."""
    text = path.read_text(encoding="utf-8")
    out = []
    for m in re.finditer(r"```\{exercise-start\} .+\n:label: (\S+)\n```", text):
        label = m.group(1)
        sol = text.index(f"```{{solution-start}} {label}\n", m.end())
        end = text.index("```{solution-end}", sol)
        stub = CODE_CELL.search(text, m.end())
        check = CODE_CELL.search(text, end)
        assert stub and stub.start() < sol and check, f"{path.name}: {label} is incomplete"
        solution = tuple(CODE_CELL.findall(text[sol:end]))
        out.append(ChapterExercise(part, path, label, stub[1], solution, check[1].strip()))
    return out


EXERCISES = [
    ex for part in PARTS for path in chapters(part) for ex in chapter_exercises(part, path)
]


def checker_call(ex: ChapterExercise) -> tuple[str, str, dict[str, str]]:
    """``exercises.check_x(my_x, k=v)`` -> ``("check_x", "my_x", {"k": "v"})``."""
    call = ast.parse(ex.check, mode="eval").body
    assert isinstance(call, ast.Call) and ast.unparse(call.func).startswith("exercises.check_")
    assert len(call.args) == 1 and isinstance(call.args[0], ast.Name), ex.check
    return call.func.attr, call.args[0].id, {k.arg: ast.unparse(k.value) for k in call.keywords}


def solution_namespace(ex: ChapterExercise) -> dict:
    """The definitions of this chapter's solutions up to ``ex`` (later ones reuse earlier).

    Definitions are functions, imports and assignments; a statement that needs one of the
    chapter's own variables (a demo line) is skipped, and so are prints and loops.
    """
    namespace = {"np": np, "torch": torch, "grid": GRID, **PACKAGES}
    for other in (e for e in EXERCISES if e.path == ex.path):
        for node in ast.parse("\n".join(other.solution)).body:
            if isinstance(node, (ast.FunctionDef, ast.Import, ast.ImportFrom, ast.Assign)):
                try:
                    exec(compile(ast.Module([node], []), other.label, "exec"), namespace)
                except NameError:
                    pass
        if other == ex:
            return namespace
    raise AssertionError(ex)


def test_every_chapter_has_checked_exercises_for_every_checker():
    labels = [ex.label for ex in EXERCISES]
    assert len(labels) == len(set(labels)) >= 33
    for part, (module, import_line, prefix) in PARTS.items():
        found = [ex for ex in EXERCISES if ex.part == part]
        for path in chapters(part):
            text = path.read_text(encoding="utf-8")
            assert sum(ex.path == path for ex in found) >= 2, path.name
            assert import_line in text, f"{path.name} does not import its exercises"
            section = text.index("\n## Exercises\n")  # one section, right before the end
            end = re.search(r"\n## (Summary|Takeaways)\n", text)
            assert end and "\n## " not in text[section + 5 : end.start()], path.name
        assert all(re.fullmatch(rf"{prefix}-ex-[a-z0-9-]+", ex.label) for ex in found)
        used = {checker_call(ex)[0] for ex in found}
        assert used == set(module.__all__), f"{part}: checkers without an exercise"


def test_exercise_labels_are_unique_across_the_book():
    labels = []
    for page in (ROOT / "book").rglob("*.md"):
        labels += re.findall(r"^:label: (\S+)$", page.read_text(encoding="utf-8"), re.M)
    assert len(labels) == len(set(labels)), sorted(x for x in labels if labels.count(x) > 1)


@pytest.mark.parametrize("ex", EXERCISES, ids=str)
def test_chapter_solution_passes_and_stub_does_not(ex, capsys):
    module = PARTS[ex.part][0]
    name, answer, settings = checker_call(ex)
    assert "ccmc_lite" not in "\n".join(ex.solution), "a solution must not import the package"
    namespace = solution_namespace(ex)
    assert answer in namespace, f"{ex.label}: the solution does not define {answer}"
    kwargs = {k: eval(v, namespace) for k, v in settings.items()}
    for seed in (0, 1, 2):  # the solution is right, not tuned to one draw of the cases
        result = getattr(module, name)(namespace[answer], seed=seed, quiet=True, **kwargs)
        assert result, result.message
    # the call exactly as the chapter writes it, after the stub (the student notebook)
    stub = {"np": np, "torch": torch, "grid": GRID, **PACKAGES, "exercises": module}
    exec(ex.stub, stub)
    result = eval(ex.check, stub)
    assert not result and "not implemented yet" in result.message, ex.label
    assert capsys.readouterr().out == result.message + "\n"  # printed once


@pytest.mark.parametrize("ex", EXERCISES, ids=str)
def test_student_version_keeps_stub_and_check_but_no_solution(ex):
    student = strip_solutions(ex.path.read_text(encoding="utf-8"))
    assert "solution-start" not in student and "solution-end" not in student
    assert ex.stub in student and ex.check in student and f":label: {ex.label}" in student
    assert not any(cell in student for cell in ex.solution)
    assert "raise NotImplementedError" in ex.stub or "= None" in ex.stub
