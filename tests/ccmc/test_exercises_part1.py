"""Tests for the Part I exercise checkers (ccmc_lite.ccmc.exercises).

``test_exercises_contract.py`` holds what every checker must do (the reference and the
chapter's solution pass; a stub, a raising or input-changing answer fails; bad arguments
raise). Here: the package functions pass, and deliberately wrong answers fail with a
message that names the failing input, the expected and the returned value.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

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


def test_decay_checker_accepts_the_stated_formula_whatever_the_seed():
    """The exercise's formula, written from its text (alpha_j = 1 - sum_i m_i P_ij / D_i), passes
    the checker whatever the seed: its fixed points are exact (they were not: 12 of 60 seeds
    failed the book's own solution)."""
    from ccmc_lite.ccmc.exercises import check_decay_exponents

    def stated(P, m):
        P, m = torch.as_tensor(P, dtype=torch.float64), torch.as_tensor(m, dtype=torch.float64)
        S = m > 0
        D = (m[S][None, :] * P[:, S]).sum(1)  # D_i = sum over the support of m_k P_ik
        share = m[S][:, None] * P[S] / D[S][:, None]  # rows i in the support only
        return torch.where(S, torch.zeros(len(m), dtype=torch.float64), 1 - share.sum(0))

    seeds = (0, 10, 23, 25, 35, 50, 55)  # 0, and seeds whose cases were not exact before
    failing = [s for s in seeds if not check_decay_exponents(stated, seed=s, quiet=True)]
    assert failing == []


def test_collapse_limits_checker_accepts_the_formula_and_names_a_wrong_prompt():
    from math import gamma

    from ccmc_lite.ccmc.exercises import COLLAPSE_PROMPTS, check_collapse_limits

    pbar = 0.3 / 0.7

    def limits(n_of):  # S0 Gamma(N - pbar) / Gamma(N) with N = n_of(L0, S0)
        return [S * gamma(n_of(L, S) - pbar) / gamma(n_of(L, S)) for L, S in COLLAPSE_PROMPTS]

    assert check_collapse_limits(limits(lambda L, S: L - S), quiet=True)
    wrong = check_collapse_limits(limits(lambda L, S: L), quiet=True)  # L0 in place of N0
    assert not wrong and len(wrong.failures) == 4
    assert wrong.failures[0].startswith("prompt of length 2 with 1 weak token(s)")
    bound = check_collapse_limits([1.0] * 4, quiet=True)  # Lemma 5.3's constant
    assert not bound and "expected 1.55858, got 1" in bound.failures[0]


def test_return_visits_checker_wants_the_column_minimum_times_ln_10():
    from ccmc_lite.ccmc.exercises import FIG1_P, check_return_visits

    P = torch.tensor(FIG1_P, dtype=torch.float64)
    assert check_return_visits(P.min(0).values * np.log(10), quiet=True)
    rows = check_return_visits(P.min(1).values * np.log(10), quiet=True)  # rows, not columns
    assert not rows and rows.failures[0].startswith("token 0")
    log10 = check_return_visits(P.min(0).values * np.log10(10), quiet=True)  # log base 10
    assert not log10 and len(log10.failures) == 3


def test_visible_parameters_checker_wants_K_times_K_minus_1_twice():
    from ccmc_lite.ccmc.exercises import check_visible_parameters

    assert check_visible_parameters([64, 20, 20], quiet=True)
    d_squared = check_visible_parameters([64, 64, 25], quiet=True)  # all of W, K^2
    assert not d_squared and len(d_squared.failures) == 2
    assert d_squared.failures[0].startswith("dimension of S_E")


def test_prompt_set_checker_separates_self_from_cross_attention():
    from ccmc_lite.ccmc.exercises import check_consistent_prompt_sets

    assert check_consistent_prompt_sets([True, False, True, False], quiet=True)
    same = check_consistent_prompt_sets([True, False, True, True], quiet=True)
    assert not same and same.failures[0].startswith("prompt set D")
