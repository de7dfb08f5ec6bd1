"""Tests for the closing chapter's exercise checkers (ccmc_lite.exercises.closing).

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

from book_tools import ROOT
from ccmc_lite import ngram
from ccmc_lite.lens import coarse_gap, coarse_predictor, ngram_levels
from ccmc_lite.lens import exercises as closing
from ccmc_lite.lens.exercises import check_coarse_gap, check_coarse_predictor, check_ngram_levels

FUNCTION_CHECKERS = {
    check_coarse_predictor: "my_coarse_predictor",
    check_coarse_gap: "my_coarse_gap",
    check_ngram_levels: "my_ngram_levels",
}

CHAIN = "input array(2, 2) [[0.3077, 0.3077],  [0.3077, 0.0769]], array(2,) [0, 0]"


def ref_levels(P):
    return ngram_levels(P, P.shape[-1], P.ndim)


REFERENCES = {
    check_coarse_predictor: coarse_predictor,
    check_coarse_gap: coarse_gap,
    check_ngram_levels: ref_levels,
}


@pytest.mark.parametrize("checker", list(REFERENCES), ids=lambda c: c.__name__)
def test_package_reference_passes(checker, capsys):
    result = checker(REFERENCES[checker])
    assert result and result.passed and not result.failures
    out = capsys.readouterr().out
    assert out.startswith("✅") and "cases passed" in out
    assert out.count("\n") == 1  # one line


# ----------------------------------------------------------------- the chapter's solutions


def _chapter_solutions() -> list[tuple[str, str, str]]:
    """``(label, solution code, checker call)`` for every exercise of the closing chapter."""
    text = (ROOT / "book" / "closing" / "one_lens.md").read_text(encoding="utf-8")
    pattern = re.compile(
        r"```\{solution-start\} (?P<label>\S+)\n(?P<body>.*?)```\{solution-end\}\n```\n\n"
        r"```\{code-cell\} ipython3\nexercises\.(?P<call>check_\w+\(\w+\))\n```",
        re.S,
    )
    found = []
    for m in pattern.finditer(text):
        cells = re.findall(r"```\{code-cell\} ipython3\n(.*?)```", m["body"], re.S)
        found.append((m["label"], "\n".join(cells), m["call"]))
    return found


SOLUTIONS = _chapter_solutions()


def test_the_chapter_has_checked_exercises_using_every_checker():
    labels = [label for label, _, _ in SOLUTIONS]
    assert len(labels) >= 2 and len(labels) == len(set(labels))
    assert all(re.fullmatch(r"cl-ex-[a-z0-9-]+", label) for label in labels)
    used = {call.split("(")[0] for *_, call in SOLUTIONS}
    assert used == set(closing.__all__)


def _solution_namespace() -> dict:
    """Execute the definitions of all solutions in order (later ones reuse earlier ones)."""
    namespace = {"torch": torch, "np": np, "ngram": ngram}
    for label, code, _ in SOLUTIONS:
        tree = ast.parse(code)
        tree.body = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
        exec(compile(tree, f"one_lens:{label}", "exec"), namespace)
        # the solution must not import the package's implementation of what it is asked
        assert "ccmc_lite" not in code, f"{label}: the solution imports from ccmc_lite"
    return namespace


@pytest.mark.parametrize(("label", "code", "call"), SOLUTIONS, ids=[s[0] for s in SOLUTIONS])
def test_chapter_solution_passes(label, code, call):
    namespace = _solution_namespace()
    checker_name, arg = re.fullmatch(r"(\w+)\((\w+)\)", call).groups()
    assert arg in namespace, f"{label}: the solution does not define {arg}"
    result = getattr(closing, checker_name)(namespace[arg], quiet=True)
    assert result, result.message


# ----------------------------------------------------------------- wrong answers


def test_predictor_that_forgets_the_zero_mass_case_fails_with_the_input():
    def divides_by_zero(joint, groups):  # 0/0 -> nan instead of the uniform law
        G = int(groups.max()) + 1
        law = torch.zeros(G, joint.shape[1], dtype=joint.dtype).index_add_(0, groups, joint)
        return (law / law.sum(1, keepdim=True))[groups]

    result = check_coarse_predictor(divides_by_zero, quiet=True)
    assert not result and len(result.failures) == 1  # the context of probability zero
    assert "input array(3, 2) [[0.4, 0.1],  [0. , 0. ],  [0.2, 0.3]]" in result.message
    assert "contains NaN or inf" in result.message


def test_predictor_that_returns_the_fine_law_fails():
    def fine(joint, groups):  # P(y | c) instead of P(y | s(c))
        return joint / joint.sum(1, keepdim=True).clamp_min(1e-300)

    result = check_coarse_predictor(fine, quiet=True)
    assert not result
    assert result.message.startswith("❌ best coarse predictor P(y | s(c)):")
    assert CHAIN in result.message and "expected array(2, 2)" in result.message


def test_gap_with_the_wrong_sign_or_log_base_fails_with_values(capsys):
    result = check_coarse_gap(lambda j, g: -coarse_gap(j, g))
    assert not result
    out = capsys.readouterr().out
    assert out.startswith("❌ coarse gap I(y; c | s):")
    assert CHAIN in out and "expected array() 0.0473, returned array() -0.0473" in out
    bits = check_coarse_gap(lambda j, g: coarse_gap(j, g) / np.log(2), quiet=True)
    assert not bits and "largest difference" in bits.message


def test_gap_that_is_the_mutual_information_without_conditioning_fails():
    def unconditional(joint, groups):  # I(y; c): forgets the statistic
        return coarse_gap(joint, torch.zeros_like(groups))

    result = check_coarse_gap(unconditional, quiet=True)
    assert not result and "input" in result.message and "expected" in result.message


def test_levels_in_the_wrong_order_or_without_stationarity_fail():
    flipped = check_ngram_levels(lambda P: ref_levels(P).flip(0), quiet=True)
    assert not flipped
    assert flipped.message.startswith("❌ n-gram levels (App. H, Lemma H.6):")
    assert "expected array(2,) [0.6663, 0.619 ]" in flipped.message

    def uniform_histories(P):  # weights histories uniformly instead of by pi
        S, n = P.shape[-1], P.ndim
        rows = P.reshape(-1, S)
        joint = rows / rows.shape[0]
        codes = torch.arange(rows.shape[0])
        return torch.stack(
            [
                coarse_gap(joint, codes % S ** (k - 1)) + coarse_gap(joint, codes) * 0
                for k in range(1, n + 1)
            ]
        )

    assert not check_ngram_levels(uniform_histories, quiet=True)


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
        check_coarse_gap(coarse_gap, seed=-1)
    with pytest.raises(TypeError, match="seed"):
        check_ngram_levels(ref_levels, seed=1.5)


def test_other_exceptions_are_reported_with_the_input():
    def forgets_n_equals_1(P):  # P.reshape(-1, S) is fine, but P[0] of a 1-D P is a number
        return ref_levels(P) if P.ndim > 1 else P[0].reshape(-1, 2)

    result = check_ngram_levels(forgets_n_equals_1, quiet=True)
    assert not result and len(result.failures) == 1
    assert "input array(3,) [0.2, 0.5, 0.3]" in result.message


def test_checkers_are_deterministic_and_leave_the_global_rng_alone():
    state = torch.get_rng_state()
    first = closing._joint_cases(0)
    assert torch.equal(state, torch.get_rng_state())
    again = closing._joint_cases(0)
    for a, b in zip(first, again, strict=True):
        assert torch.allclose(a[0], b[0], rtol=0, atol=1e-14) and torch.equal(a[1], b[1])
    # a different seed changes the random cases, never the edge cases
    cases1 = closing._joint_cases(1)
    same = [  # (the binary chain's stationary law may differ in the last bit between calls)
        a[0].shape == b[0].shape and torch.allclose(a[0], b[0], rtol=0, atol=1e-14)
        for a, b in zip(first, cases1, strict=True)
    ]
    assert all(same[:6]) and not any(same[6:])
    levels0, levels1 = closing._levels_cases(0), closing._levels_cases(1)
    same = [torch.equal(a[0], b[0]) for a, b in zip(levels0, levels1, strict=True)]
    assert all(same[:5]) and not any(same[5:])
    assert check_coarse_predictor(coarse_predictor, seed=7, quiet=True)
