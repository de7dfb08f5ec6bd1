"""Tests for the Part I exercise checkers (ccmc_lite.exercises.part1).

Every checker is tested both ways: the reference (the package function, and the solution
printed in the chapter) passes; deliberately wrong answers fail with a message that names
the failing input, the expected and the returned value; a stub is reported as "not
implemented yet"; a wrong kind of argument raises ``TypeError`` naming it.
"""

from __future__ import annotations

import ast
import re

import numpy as np
import pytest
import torch
from booktools import strip_solutions

from book_tools import ROOT
from ccmc_lite.ccmc import (
    ccmc_distribution,
    coverage_report,
    predicted_decay_exponents,
    stationary_of_reweighted,
    weights_from_transition,
)
from ccmc_lite.ccmc import exercises as part1
from ccmc_lite.ccmc.exercises import (
    check_ccmc_transition,
    check_cooccurrence_components,
    check_decay_exponents,
    check_hessian_logits,
    check_stationary_of_reweighted,
    check_weights_from_transition,
)

FUNCTION_CHECKERS = {
    check_ccmc_transition: "my_ccmc_transition",
    check_weights_from_transition: "my_weights_from_transition",
    check_cooccurrence_components: "my_components",
    check_hessian_logits: "my_hessian_logits",
    check_decay_exponents: "my_decay_exponents",
    check_stationary_of_reweighted: "my_stationary_of_reweighted",
}

FIG1 = "input array(3, 3) [[0.2, 0.3, 0.5],  [0.5, 0.1, 0.4],  [0.1, 0.6, 0.3]]"  # as shown


# ----------------------------------------------------------------- references (package)


def ref_components(prompts, K, variant):
    return coverage_report(prompts, K, variant=variant).components


def ref_hessian(Theta, prompts, weights):
    return part1._hessian_reference(Theta, prompts, weights)


def ref_decay(P, m):
    alpha = predicted_decay_exponents(P, m)
    return torch.nan_to_num(alpha, nan=0.0)  # 0 on the winners


REFERENCES = {
    check_ccmc_transition: ccmc_distribution,
    check_weights_from_transition: weights_from_transition,
    check_cooccurrence_components: ref_components,
    check_hessian_logits: ref_hessian,
    check_decay_exponents: ref_decay,
    check_stationary_of_reweighted: stationary_of_reweighted,
}


@pytest.mark.parametrize("checker", list(REFERENCES), ids=lambda c: c.__name__)
def test_package_reference_passes(checker, capsys):
    result = checker(REFERENCES[checker])
    assert result and result.passed and not result.failures
    out = capsys.readouterr().out
    assert out.startswith("✅") and "cases passed" in out
    assert out.count("\n") == 1  # one line


def test_every_checker_is_public_and_tested():
    assert set(REFERENCES) == set(FUNCTION_CHECKERS)
    assert {c.__name__ for c in FUNCTION_CHECKERS} == set(part1.__all__)


# ----------------------------------------------------------------- the chapters' solutions


def _chapter_solutions() -> list[tuple[str, str, str, str]]:
    """``(chapter, label, solution code, checker call)`` for every Part I exercise."""
    found = []
    for path in sorted((ROOT / "book" / "part1").glob("*.md")):
        text = path.read_text(encoding="utf-8")
        pattern = re.compile(
            r"```\{solution-start\} (?P<label>\S+)\n(?P<body>.*?)```\{solution-end\}\n```\n\n"
            r"```\{code-cell\} ipython3\nexercises\.(?P<call>check_\w+\(\w+\));?\n```",
            re.S,
        )
        for m in pattern.finditer(text):
            cells = re.findall(r"```\{code-cell\} ipython3\n(.*?)```", m["body"], re.S)
            found.append((path.name, m["label"], "\n".join(cells), m["call"]))
    return found


SOLUTIONS = _chapter_solutions()


def test_every_part1_chapter_has_two_checked_exercises():
    per_chapter: dict[str, int] = {}
    for chapter, *_ in SOLUTIONS:
        per_chapter[chapter] = per_chapter.get(chapter, 0) + 1
    chapters = sorted(p.name for p in (ROOT / "book" / "part1").glob("*.md"))
    assert chapters and all(per_chapter.get(c, 0) >= 2 for c in chapters), per_chapter
    labels = [label for _, label, _, _ in SOLUTIONS]
    assert len(labels) == len(set(labels))
    assert all(re.fullmatch(r"p1c\d-ex-[a-z0-9-]+", label) for label in labels)
    used = {call.split("(")[0] for *_, call in SOLUTIONS}
    assert used == set(part1.__all__)  # every checker is used by a chapter
    for path in (ROOT / "book" / "part1").glob("*.md"):  # ... and imported where it is used
        text = path.read_text(encoding="utf-8")
        if re.search(r"^exercises\.check_\w+\(", text, re.M):
            assert "from ccmc_lite.ccmc import exercises" in text


def _solution_namespace(chapter: str, label: str, code: str) -> dict:
    # keep the definitions (imports, functions and my_* values); demo lines use chapter
    # variables
    tree = ast.parse(code)
    tree.body = [
        node
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.Import, ast.ImportFrom))
        or (
            isinstance(node, ast.Assign)
            and all(isinstance(t, ast.Name) and t.id.startswith("my_") for t in node.targets)
        )
    ]
    namespace = {"torch": torch, "np": np}
    exec(compile(tree, f"{chapter}:{label}", "exec"), namespace)
    return namespace


@pytest.mark.parametrize(
    ("chapter", "label", "code", "call"), SOLUTIONS, ids=[s[1] for s in SOLUTIONS]
)
def test_chapter_solution_passes(chapter, label, code, call):
    namespace = _solution_namespace(chapter, label, code)
    checker_name, arg = re.fullmatch(r"(\w+)\((\w+)\)", call).groups()
    assert arg in namespace, f"{label}: the solution does not define {arg}"
    for seed in (0, 1, 2):  # the solution is right, not tuned to one draw of the cases
        result = getattr(part1, checker_name)(namespace[arg], seed=seed, quiet=True)
        assert result, result.message
    # the solution must not import the package's implementation of what it is asked
    assert "ccmc_lite" not in code, f"{label}: the solution imports from ccmc_lite"


@pytest.mark.parametrize("path", sorted((ROOT / "book" / "part1").glob("*.md")), ids=str)
def test_student_version_keeps_stubs_and_checks_but_no_solutions(path):
    text = path.read_text(encoding="utf-8")
    student = strip_solutions(text)
    assert "solution-start" not in student and "solution-end" not in student
    for _, label, code, call in (s for s in SOLUTIONS if s[0] == path.name):
        assert code not in student and call in student
        assert f":label: {label}" in student  # the exercise itself stays
    assert student.count("raise NotImplementedError") >= 2


# ----------------------------------------------------------------- stubs and bad arguments


def _stub(*args):
    raise NotImplementedError


@pytest.mark.parametrize("checker", list(FUNCTION_CHECKERS), ids=lambda c: c.__name__)
def test_stub_is_reported_as_not_implemented(checker, capsys):
    result = checker(_stub)
    assert not result
    assert len(result.failures) == 1
    assert "not implemented yet: write your solution in the cell above" in result.message
    out = capsys.readouterr().out
    assert out.startswith("❌") and "not implemented yet" in out


@pytest.mark.parametrize("checker", list(FUNCTION_CHECKERS), ids=lambda c: c.__name__)
@pytest.mark.parametrize("bad", [42, None, "my_function", [1, 2]])
def test_non_callable_raises_type_error_naming_the_argument(checker, bad):
    with pytest.raises(TypeError, match=rf"{FUNCTION_CHECKERS[checker]} must be a function"):
        checker(bad)


def test_checker_settings_are_validated():
    with pytest.raises(ValueError, match="seed"):
        check_ccmc_transition(ccmc_distribution, seed=-1)
    with pytest.raises(TypeError, match="seed"):
        check_stationary_of_reweighted(stationary_of_reweighted, seed=1.5)


def test_other_exceptions_are_reported_with_the_input():
    def crashes_on_short_prompts(P, X):  # reads the token before the query
        row = P[X[-1]] * (X[-2] >= 0)
        return row / row.sum()

    result = check_ccmc_transition(crashes_on_short_prompts, quiet=True)
    assert not result
    crash = f"input {FIG1[6:]}, array(1,) [2] raised IndexError"
    assert any(f.startswith(crash) for f in result.failures), result.failures


def test_checkers_are_deterministic_and_leave_the_global_rng_alone():
    state = torch.get_rng_state()
    np_state = np.random.get_state()[1].copy()  # noqa: NPY002 (the legacy global stream)
    for checker, reference in REFERENCES.items():
        assert checker(reference, seed=3, quiet=True)
    assert torch.equal(state, torch.get_rng_state())
    assert np.array_equal(np_state, np.random.get_state()[1])  # noqa: NPY002
    # a different seed changes the random cases, never the edge cases
    cases0, cases1 = part1._ccmc_cases(0), part1._ccmc_cases(1)
    same = [
        torch.equal(a[1], b[1]) and torch.equal(a[0], b[0])
        for a, b in zip(cases0, cases1, strict=True)
    ]
    assert all(same[:6]) and not any(same[6:])
    again = part1._hessian_cases(0)
    for a, b in zip(part1._hessian_cases(0), again, strict=True):
        assert torch.equal(a[0], b[0]) and a[1] == b[1] and torch.equal(a[2], b[2])


# ----------------------------------------------------------------- wrong answers, chapter 1


def test_ccmc_transition_wrong_answers_fail_with_the_input():
    res = check_ccmc_transition(lambda P, X: P[X[-1]], quiet=True)  # no re-weighting by m
    assert not res
    assert f"{FIG1}, array(3,) [0, 1, 0]: largest difference 0.5" in res.message
    assert "expected array(3,) [0.5714, 0.4286, 0.    ]" in res.message
    assert "returned array(3,) [0.2, 0.3, 0.5]" in res.message

    def first_token_as_state(P, X):
        return ccmc_distribution(P, X.flip(0))

    res = check_ccmc_transition(first_token_as_state, quiet=True)
    assert not res
    assert "input array(2, 2) [[0.7, 0.3],  [0.4, 0.6]], array(2,) [1, 0]" in res.message
    assert "expected array(2,) [0.7, 0.3], returned array(2,) [0.4, 0.6]" in res.message

    def cross_attention_keys(P, X):  # the query is not a key: 0/0 for a prompt of length 1
        K = P.shape[0]
        m = torch.bincount(X[:-1], minlength=K).double()
        return m * P[X[-1]] / (m * P[X[-1]]).sum()

    res = check_ccmc_transition(cross_attention_keys, quiet=True)
    assert not res
    nan = [f for f in res.failures if f.startswith(f"{FIG1}, array(1,) [2]: contains NaN")]
    assert nan and "expected array(3,) [0., 0., 1.]" in nan[0]


def _inverse(P, E, *, project=True, pinv=True):
    E_plus = E.T @ torch.linalg.inv(E @ E.T) if pinv else E.T
    W = E_plus @ torch.log(P).T @ E_plus.T
    if project:
        D = E[1:] - E[0]
        W = D.T @ torch.linalg.solve(D @ D.T, D) @ W @ E.T @ torch.linalg.solve(E @ E.T, E)
    return W


def test_weights_from_transition_wrong_answers_fail_with_the_input():
    assert check_weights_from_transition(_inverse, quiet=True)  # the test's own version
    eye = "array(3, 3) [[1., 0., 0.],  [0., 1., 0.],  [0., 0., 1.]]"
    expected = "expected array(3, 3) [[-0.4406,  0.6109, -0.9635],"
    res = check_weights_from_transition(lambda P, E: _inverse(P, E, project=False), quiet=True)
    assert not res and f"{FIG1}, {eye}: largest difference 1.34" in res.message
    assert expected in res.message and "returned array(3, 3) [[-1.6094, -0.6931" in res.message

    res = check_weights_from_transition(lambda P, E: _inverse(P, E, pinv=False), quiet=True)
    assert not res
    assert f"{FIG1}, array(3, 3) [[2., 0., 0.],  [0., 2., 0.],  [0., 0., 2.]]" in res.message
    assert "expected array(3, 3) [[-0.1101,  0.1527, -0.2409]," in res.message

    res = check_weights_from_transition(lambda P, E: _inverse(P.T, E), quiet=True)
    assert not res and f"{FIG1}, {eye}: largest difference 1.24" in res.message
    assert expected in res.message


# ----------------------------------------------------------------- wrong answers, chapter 2


def test_components_wrong_answers_fail_with_the_input():
    def always_self(prompts, K, variant):
        return ref_components(prompts, K, "self")

    res = check_cooccurrence_components(always_self, quiet=True)
    assert not res
    assert "input [[1, 2, 0], [3, 0]], 4, 'cross': values differ" in res.message
    assert "expected ['{0} | {1, 2} | {3}', '{0} | {1} | {2} | {3}'," in res.message
    assert "returned ['{0, 1, 2, 3}', '{0} | {1} | {2} | {3}'," in res.message

    def forgets_unobserved_tokens(prompts, K, variant):  # only components with an edge
        return [[c for c in comps if len(c) > 1] for comps in ref_components(prompts, K, variant)]

    res = check_cooccurrence_components(forgets_unobserved_tokens, quiet=True)
    assert not res
    assert "input [[1, 2, 0], [3, 0]], 4, 'self': values differ" in res.message
    assert "returned ['{0, 1, 2, 3}', '', '', '']" in res.message

    def as_sets_in_any_order(prompts, K, variant):  # sets, shuffled: accepted
        return [set(map(frozenset, comps[::-1])) for comps in ref_components(prompts, K, variant)]

    assert check_cooccurrence_components(as_sets_in_any_order, quiet=True)

    res = check_cooccurrence_components(lambda *a: ref_components(*a)[::-1], quiet=True)
    assert not res and "returned ['{0} | {1} | {2} | {3}'," in res.message


def test_hessian_wrong_answers_fail_with_the_input():
    res = check_hessian_logits(lambda T, pr, w: ref_hessian(T, pr, w) * w.sum(), quiet=True)
    assert not res  # forgot to normalise the weights
    assert "[[0, 1, 2], [1, 2], [2, 0, 0, 1]], array(3,) [2., 6., 2.]" in res.message
    assert "largest difference 1.76" in res.message

    def ignores_counts(Theta, prompts, weights):  # renormalises over the keys, not m(X)
        K = Theta.shape[0]
        w = weights / weights.sum()
        H = torch.zeros(K, K, K, dtype=torch.float64)
        for x, w_i in zip(prompts, w, strict=True):
            present = torch.zeros(K, dtype=torch.bool)
            present[x] = True
            pi = torch.softmax(Theta[x[-1]].masked_fill(~present, -torch.inf), 0)
            H[x[-1]] += w_i * (torch.diag(pi) - torch.outer(pi, pi))
        return H

    res = check_hessian_logits(ignores_counts, quiet=True)
    assert not res
    assert "input array(3, 3) [[0., 0., 0.],  [0., 0., 0.],  [0., 0., 0.]], [[0, 1, 0]]" in (
        res.message
    )
    assert "expected array(3, 3, 3) [[[ 0.2222, -0.2222,  0.    ]," in res.message
    assert "returned array(3, 3, 3) [[[ 0.25, -0.25,  0.  ]," in res.message

    res = check_hessian_logits(lambda *a: -ref_hessian(*a), quiet=True)
    assert not res and "largest difference 0.444" in res.message


# ----------------------------------------------------------------- wrong answers, chapter 3

BINARY_02 = "input array(2, 2) [[0.8, 0.2],  [0.8, 0.2]], array(2,) [1., 0.]"


def test_decay_exponents_wrong_answers_fail_with_the_input():
    def growth_not_decay(P, m):  # lambda_j instead of 1 - lambda_j
        return torch.where(m > 0, 0.0, 1.0 - ref_decay(P, m))

    res = check_decay_exponents(growth_not_decay, quiet=True)
    assert not res and f"{BINARY_02}: largest difference 0.5" in res.message
    assert "expected array(2,) [0.  , 0.75], returned array(2,) [0.  , 0.25]" in res.message

    def without_D(P, m):  # forgets to normalise by D_i = sum_k m_k P_ik
        m = m / m.sum()
        alpha = 1 - m @ P
        alpha[m > 0] = 0.0
        return alpha

    res = check_decay_exponents(without_D, quiet=True)
    assert not res and "returned array(2,) [0. , 0.8]" in res.message

    def single_winner_only(P, m):  # right for vertices, wrong for several winners
        w = int(m.argmax())
        alpha = 1 - P[w] / P[w, w]
        alpha[m > 0] = 0.0
        return alpha

    res = check_decay_exponents(single_winner_only, quiet=True)
    assert not res
    assert "array(3,) [0.5, 0.5, 0. ]: contains NaN or inf" in res.message  # P_ww = 0
    assert "expected array(3,) [ 0.    ,  0.    , -1.4667]" in res.message


def test_stationary_wrong_answers_fail_with_the_input():
    def power_iteration(P, m, steps=200):
        S = m > 0
        Pm = P * m
        Pm = Pm / Pm.sum(1, keepdim=True)
        mu = S.double() / S.sum()
        for _ in range(steps):
            mu = mu @ Pm
        return mu

    res = check_stationary_of_reweighted(power_iteration, quiet=True)
    assert not res and len(res.failures) == 1  # only the slowly mixing chain
    assert "input array(2, 2) [[0.999, 0.001],  [0.001, 0.999]], array(2,) [0.25, 0.75]" in (
        res.message
    )
    assert "expected array(2,) [0.1002, 0.8998], returned array(2,) [0.3055, 0.6945]" in (
        res.message
    )

    def ignores_the_weights(P, m):  # the stationary law of P restricted to supp(m)
        return stationary_of_reweighted(P, (m > 0).double())

    res = check_stationary_of_reweighted(ignores_the_weights, quiet=True)
    assert not res
    assert f"{FIG1}, array(3,) [2., 1., 0.]: largest difference 0.0982" in res.message
    assert "expected array(3,) [0.6796, 0.3204, 0.    ]" in res.message
