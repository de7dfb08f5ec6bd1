"""Tests for the closing chapter's exercise checkers (ccmc_lite.lens.exercises).

``test_exercises_contract.py`` holds what every checker must do (the reference and the
chapter's solution pass; a stub, a raising or input-changing answer fails; bad arguments
raise). Here: the package functions pass, and deliberately wrong answers fail with a
message that names the failing input, the expected and the returned value.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ccmc_lite.lens import coarse_gap, coarse_predictor, ngram_levels
from ccmc_lite.lens import exercises as closing
from ccmc_lite.lens.exercises import (
    check_coarse_gap,
    check_coarse_predictor,
    check_ngram_levels,
    check_statistic_ranking,
)
from ccmc_lite.markov import binary_kernel, mutual_information

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


def test_statistic_ranking_last_token_is_sufficient_and_nothing_costs_most(capsys):
    assert check_statistic_ranking([2, 1, 0])
    assert capsys.readouterr().out.startswith("✅ ranking of the three statistics")
    # the ranks follow from the chain: x_n is sufficient (gap 0); forgetting everything
    # costs I(x_n; x_n+1), more than forgetting x_n given x_n-1
    assert float(mutual_information(binary_kernel(0.5, 0.8))) > 0
    wrong = check_statistic_ranking([2, 0, 1], quiet=True)  # "recent is not better"
    assert not wrong and "2 of 3 cases failed" in wrong.message
    assert not check_statistic_ranking([1, 2], quiet=True)
