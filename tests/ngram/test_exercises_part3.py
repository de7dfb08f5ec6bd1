"""Tests for the Part III exercise checkers (ccmc_lite.ngram.exercises).

``test_exercises_contract.py`` holds what every checker must do (the reference and the
chapter's solution pass; a stub, a raising or input-changing answer fails; bad arguments
raise). Here: the package functions pass, and deliberately wrong answers fail with a
message that names the failing input, the expected and the returned value.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from ccmc_lite.ngram import (
    SuffixModel,
    construction_limit,
    detect_plateaus,
    exact_population_gradient,
    kgram_counts,
    kgram_estimator,
    lifted_transition_matrix,
    offset_attention,
    subset_estimator,
    suffix_law,
)
from ccmc_lite.ngram import exercises as part3
from ccmc_lite.ngram.exercises import (
    STAGE_CASES,
    check_attention_only_forward,
    check_construction_limit,
    check_detect_plateaus,
    check_entropy_floor,
    check_heads_needed,
    check_kgram_estimator,
    check_lifted_transition_matrix,
    check_offset_attention,
    check_stage_offsets,
    check_subset_estimator,
    check_suffix_gradient,
    check_suffix_law,
)

HAND = "input array(7,) [0, 1, 0, 2, 0, 1, 0], 3"  # the chapter's hand example, as shown


# ----------------------------------------------------------------- references (package)


def ref_kgram(x, S, k, beta):
    return kgram_estimator(x[None], S, k, smoothing=beta)[0]


def ref_lifted(P):
    return lifted_transition_matrix(P[None], P.shape[-1], P.ndim)[0]


def ref_suffix_gradient(W, tokens, prob, nxt, L):
    model = SuffixModel(W.shape[1], L)
    with torch.no_grad():
        model.W.copy_(W)
    return exact_population_gradient(model, tokens, prob, nxt).reshape(W.shape)


def ref_plateaus(g, loss, window, min_length):
    return [
        (p.start, p.end, p.loss)
        for p in detect_plateaus(g, loss, window=window, min_length=min_length)
    ]


def ref_forward(model, tokens):
    with torch.no_grad():
        return model(tokens)


def ref_subset(x, S, offsets, beta):
    return subset_estimator(x[None], S, offsets, smoothing=beta)[0]


def ref_limit(x, S, offsets):
    return construction_limit(x[None], S, offsets)[0]


REFERENCES = {
    check_kgram_estimator: ref_kgram,
    check_lifted_transition_matrix: ref_lifted,
    check_suffix_law: suffix_law,
    check_suffix_gradient: ref_suffix_gradient,
    check_offset_attention: offset_attention,
    check_detect_plateaus: ref_plateaus,
    check_attention_only_forward: ref_forward,
    check_subset_estimator: ref_subset,
    check_construction_limit: ref_limit,
}


@pytest.mark.parametrize("checker", list(REFERENCES), ids=lambda c: c.__name__)
def test_package_reference_passes(checker, capsys):
    result = checker(REFERENCES[checker])
    assert result and result.passed and not result.failures
    out = capsys.readouterr().out
    assert out.startswith("✅") and "cases passed" in out
    assert out.count("\n") == 1  # one line


def test_entropy_floor_reference_value_passes(capsys):
    assert check_entropy_floor(5 / 6)
    assert capsys.readouterr().out.strip() == (
        "✅ mean entropy of a Dirichlet row for S=3, alpha=1: all 1 case passed"
    )
    assert check_entropy_floor(0.8333)  # three decimals are enough
    assert check_entropy_floor(np.float64(math.fsum([1 / 2, 1 / 3, 1 / 4])), S=4, quiet=True)
    assert check_entropy_floor(torch.tensor(5 / 6), quiet=True)


def test_heads_needed_is_the_largest_offset(capsys):
    assert check_heads_needed([1, 2, 2, 3, 3])
    assert capsys.readouterr().out.startswith("✅ first-layer heads the construction")
    wrong = check_heads_needed([1, 1, 2, 1, 2], quiet=True)  # one head per offset in N
    assert not wrong and "N = {2}: " in wrong.failures[0] and "3 of 5 cases" in wrong.message
    assert not check_heads_needed([1, 2, 2, 3], quiet=True)  # one history missing


def test_stage_offsets_are_read_from_the_heads_not_the_loss(capsys):
    assert check_stage_offsets([1, 2, 0, 1])
    assert capsys.readouterr().out.startswith("✅ the stage of each snapshot")
    # snapshot 2 sits at the best-smoothed bigram level: a reading by loss says 1
    wrong = check_stage_offsets([1, 1, 0, 1], quiet=True)
    assert not wrong and wrong.failures[0].startswith("snapshot 2: ")
    assert not check_stage_offsets([1, 2, 0], quiet=True)  # one snapshot missing
    assert not check_stage_offsets([1, 2, 1, 1], quiet=True)  # no head above 0.3 in 3


def test_the_chapter_shows_the_stage_cases_the_checker_uses():
    root = Path(__file__).resolve().parents[2]
    text = (root / "book" / "part3" / "03_stagewise_training.md").read_text(encoding="utf-8")
    rows = re.findall(
        r"^\| (\d) \| ([\d.]+) \| ([\d.]+), ([\d.]+) \| ([\d.]+), ([\d.]+) \|$", text, re.M
    )
    shown = [(float(r[1]), (float(r[2]), float(r[3])), (float(r[4]), float(r[5]))) for r in rows]
    assert shown == list(STAGE_CASES)


# ----------------------------------------------------------------- stubs and bad arguments


def test_value_stub_is_reported_as_not_implemented(capsys):
    result = check_entropy_floor(None)
    assert not result and len(result.failures) == 1
    assert capsys.readouterr().out.strip() == (
        "❌ mean entropy of a Dirichlet row for S=3, alpha=1: not implemented yet: "
        "set my_row_entropy to your answer in the cell above"
    )


def test_entropy_floor_settings_are_validated():
    with pytest.raises(ValueError, match="S"):
        check_entropy_floor(0.5, S=1)
    with pytest.raises(ValueError, match="alpha"):
        check_entropy_floor(0.5, alpha=0.0)


def test_other_exceptions_are_reported_with_the_input():
    def forgets_n_equals_1(P):  # codes (h * S) % H + j overflow when H = 1
        S, n = P.shape[-1], P.ndim
        H = S ** (n - 1)
        M = torch.zeros(H, H, dtype=P.dtype)
        for h in range(H):
            for j in range(S):
                M[h, (h * S) % H + j] += P.reshape(H, S)[h, j]
        return M

    result = check_lifted_transition_matrix(forgets_n_equals_1, quiet=True)
    assert not result and len(result.failures) == 1
    assert "input array(3,) [0.2, 0.5, 0.3] raised IndexError" in result.message


def test_checkers_are_deterministic_and_leave_the_global_rng_alone():
    state = torch.get_rng_state()
    first = part3._forward_cases(0)
    assert torch.equal(state, torch.get_rng_state())
    again = part3._forward_cases(0)
    for c1, c2 in zip(first, again, strict=True):
        (m1, t1), (m2, t2) = c1.args, c2.args
        assert torch.equal(t1, t2) and torch.equal(m1.W, m2.W) and c1.show == c2.show
    # a different seed changes the random cases, never the edge cases
    cases0, cases1 = part3._kgram_cases(0), part3._kgram_cases(1)
    same = [torch.equal(a[0], b[0]) for a, b in zip(cases0, cases1, strict=True)]
    assert all(same[:9]) and not all(same[9:])
    assert check_kgram_estimator(ref_kgram, seed=7, quiet=True)


# ----------------------------------------------------------------- wrong answers, chapter 1


def test_kgram_wrong_answers_fail_with_the_input():
    def ignores_beta(x, S, k, beta):
        return ref_kgram(x, S, k, 0.0)

    res = check_kgram_estimator(ignores_beta, quiet=True)
    assert not res
    assert f"{HAND}, 2, 1: largest difference 0.167" in res.message
    assert "expected array(3,) [0.1667, 0.5   , 0.3333]" in res.message
    assert "returned array(3,) [0.    , 0.6667, 0.3333]" in res.message

    def divides_zero_by_zero(x, S, k, beta):
        counts = kgram_counts(x[None], S, k)[0]
        return (counts + beta) / (counts.sum() + S * beta)

    res = check_kgram_estimator(divides_zero_by_zero, quiet=True)
    assert not res
    assert "input array(1,) [2], 3, 2, 0: contains NaN or inf" in res.message
    assert "expected array(3,) [0.3333, 0.3333, 0.3333]" in res.message

    def history_one_too_long(x, S, k, beta):
        return ref_kgram(x, S, k + 1, beta)

    res = check_kgram_estimator(history_one_too_long, quiet=True)
    assert not res and f"{HAND}, 2, 0: largest difference" in res.message


def test_lifted_wrong_answers_fail_with_the_input():
    res = check_lifted_transition_matrix(lambda P: ref_lifted(P).T, quiet=True)
    assert not res
    assert "input array(2, 2) [[0.7, 0.3],  [0.4, 0.6]]" in res.message
    assert "expected array(2, 2) [[0.7, 0.3],  [0.4, 0.6]]" in res.message
    assert "returned array(2, 2) [[0.7, 0.4],  [0.3, 0.6]]" in res.message

    def appends_at_the_front(P):  # h' = (j, h_1, ..., h_{n-2}) instead of (h_2, ..., j)
        S, n = P.shape[-1], P.ndim
        H = S ** (n - 1)
        M = torch.zeros(H, H, dtype=P.dtype)
        for h in range(H):
            for j in range(S):
                M[h, (j * S ** (n - 2) + h // S) % H if n > 1 else 0] += P.reshape(H, S)[h, j]
        return M

    res = check_lifted_transition_matrix(appends_at_the_front, quiet=True)
    assert not res
    assert "input array(2, 2, 2) [[[0., 1.]" in res.message  # the chain with zero transitions
    assert "expected array(4, 4) [[0., 1., 0., 0.]" in res.message


# ----------------------------------------------------------------- wrong answers, chapter 2

BINARY_L1 = "array(8, 2) [[0.7, 0.3],  [0.4, 0.6],"  # the binary chain's next-token laws


def test_suffix_law_wrong_answers_fail_with_the_input():
    def unnormalised(tokens, prob, nxt, S, L):
        return suffix_law(tokens, prob, nxt, S, L) * 0.5

    res = check_suffix_law(unnormalised, quiet=True)
    assert not res and BINARY_L1 in res.message and ", 2, 1: largest difference" in res.message
    assert "expected array(2, 2) [[0.7, 0.3],  [0.4, 0.6]]" in res.message

    def no_uniform_row(tokens, prob, nxt, S, L):
        law = suffix_law(tokens, prob, nxt, S, L)
        code = tokens[:, tokens.shape[1] - L :] @ (S ** torch.arange(L - 1, -1, -1))
        seen = torch.zeros(S**L).index_add_(0, code, prob.float()) > 0
        return torch.where(seen[:, None], law, torch.nan)

    res = check_suffix_law(no_uniform_row, quiet=True)
    assert not res
    assert "array(8,) [0.5, 0. , 0. , 0. , 0.5, 0. , 0. , 0. ]" in res.message  # the stuck chain
    assert "contains NaN or inf; expected array(2, 2) [[1. , 0. ],  [0.5, 0.5]]" in res.message

    def first_tokens(tokens, prob, nxt, S, L):
        return suffix_law(tokens.flip(-1), prob, nxt, S, L)

    res = check_suffix_law(first_tokens, quiet=True)
    assert not res and ", 2, 1: largest difference" in res.message


def test_suffix_gradient_wrong_answers_fail_with_the_input():
    res = check_suffix_gradient(lambda *a: -ref_suffix_gradient(*a), quiet=True)
    assert not res
    assert "input array(2, 2) [[-2.1788,  0.5684],  [-1.0845, -1.3986]]" in res.message
    assert "expected array(2, 2) [[-0.3615,  0.3615],  [ 0.0774, -0.0774]]" in res.message
    assert "returned array(2, 2) [[ 0.3615, -0.3615],  [-0.0774,  0.0774]]" in res.message

    def forgets_prob(W, tokens, prob, nxt, L):  # an unweighted mean over sequences
        return ref_suffix_gradient(W, tokens, torch.full_like(prob, 1 / len(prob)), nxt, L)

    res = check_suffix_gradient(forgets_prob, quiet=True)
    assert not res and "array(8,) [0.245, 0.105," in res.message
    assert "expected array(2, 2) [[-0.3615,  0.3615]" in res.message


# ----------------------------------------------------------------- wrong answers, chapter 3


def test_offset_attention_wrong_answers_fail_with_the_input():
    def no_causal_mask(A1, offset):
        T = A1.shape[-1]
        att = torch.softmax(A1, dim=-1)
        rows = torch.arange(offset, T - 1)
        return att[:, rows, rows - offset].mean(-1)

    res = check_offset_attention(no_causal_mask, quiet=True)
    assert not res and "input array(2, 6, 6) [[[-2.3104" in res.message
    assert "expected array(2,) [0.2495, 0.1231], returned array(2,) [0.0775, 0.0714]" in (
        res.message
    )

    def includes_last_row(A1, offset):
        T = A1.shape[-1]
        att = torch.softmax(A1.masked_fill(~torch.ones(T, T).tril().bool(), -torch.inf), -1)
        rows = torch.arange(offset, T)
        return att[:, rows, rows - offset].mean(-1)

    res = check_offset_attention(includes_last_row, quiet=True)
    assert not res and "expected array(2,) [0.2495, 0.1231]" in res.message


def test_plateau_wrong_answers_fail_with_the_input():
    res = check_detect_plateaus(lambda g, loss, w, m: ref_plateaus(g, loss, 1, m), quiet=True)
    assert not res
    assert "input array(400,) [1.0063, 0.9934," in res.message and ", 20, 50:" in res.message
    assert "expected [(119, 299, 1.59364)], returned []" in res.message

    def end_exclusive(g, loss, w, m):
        return [(a, b + 1, c) for a, b, c in ref_plateaus(g, loss, w, m)]

    res = check_detect_plateaus(end_exclusive, quiet=True)
    assert not res
    assert "expected [(119, 299, 1.59364)], returned [(119, 300, 1.59364)]" in res.message


# ----------------------------------------------------------------- wrong answers, chapter 4


def _forward(model, tokens, *, skip=True, causal=True, softmax=True):
    r = model.embed(tokens)
    T = r.shape[1]
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    for Q, K, V in zip(model.Q, model.K, model.V, strict=True):
        update = torch.zeros_like(r)
        for h in range(Q.shape[0]):
            scores = (r @ Q[h].T) @ (r @ K[h].T).transpose(1, 2)
            if causal:
                scores = scores.masked_fill(~mask, float("-inf"))
            update = update + torch.softmax(scores, dim=-1) @ (r @ V[h].T)
        r = r + update if skip else update
    logits = r[:, -1] @ model.W
    return torch.softmax(logits, dim=-1) if softmax else logits


def test_forward_wrong_answers_fail_with_the_input():
    assert check_attention_only_forward(_forward, quiet=True)  # the test's own version is right
    model = "input AttentionOnlyTransformer(S=3, T=4, heads=(2, 1), embedding='onehot', d=7)"
    expected = "expected array(3, 3) [[0.0309, 0.8926, 0.0764],"
    for wrong in (
        lambda m, t: _forward(m, t, skip=False),
        lambda m, t: _forward(m, t, causal=False),
        lambda m, t: _forward(m, t, softmax=False),
    ):
        res = check_attention_only_forward(wrong, quiet=True)
        assert not res
        assert model in res.message and "array(3, 4) [[1, 1, 2, 1]," in res.message
        assert expected in res.message


def test_entropy_floor_wrong_values_fail_with_the_setting():
    res = check_entropy_floor(math.log(3), quiet=True)  # the uniform level, not the floor
    assert not res
    assert res.message.startswith("❌ mean entropy of a Dirichlet row for S=3, alpha=1")
    assert "expected 0.833333, got 1.09861" in res.message
    res = check_entropy_floor(1.5, quiet=True)  # psi(S alpha) - psi(alpha): off by one
    assert not res and "expected 0.833333, got 1.5" in res.message
    res = check_entropy_floor(5 / 6, S=5, alpha=0.5, quiet=True)  # right value, other setting
    assert not res and "S=5, alpha=0.5" in res.message and "expected 1.06667" in res.message


# ----------------------------------------------------------------- wrong answers, chapter 5


def test_subset_wrong_answers_fail_with_the_input():
    def contiguous_instead(x, S, offsets, beta):
        return ref_subset(x, S, list(range(1, max(offsets, default=0) + 1)), beta)

    res = check_subset_estimator(contiguous_instead, quiet=True)
    assert not res and f"{HAND}, [1, 3], 0.5: largest difference" in res.message
    assert "expected array(3,) [0.1429, 0.4286, 0.4286]" in res.message

    def wraps_around(x, S, offsets, beta):  # keys near the start use x[-1], x[-2], ...
        xs = x.tolist()
        T = len(xs)
        counts = torch.zeros(S, dtype=torch.float64)
        query = [xs[(T - h) % T] for h in offsets]
        for l in range(T):
            if [xs[l - h] for h in offsets] == query:
                counts[xs[l]] += 1
        total = counts.sum() + S * beta
        return torch.full((S,), 1 / S) if total == 0 else (counts + beta) / total

    res = check_subset_estimator(wraps_around, quiet=True)
    assert not res and f"{HAND}, [2], 0: largest difference 0.5" in res.message
    assert "expected array(3,) [0., 0., 1.], returned array(3,) [0.5, 0. , 0.5]" in res.message


def test_construction_limit_wrong_answers_fail_with_the_input():
    def first_best_key_only(x, S, offsets):
        xs = x.tolist()
        T = len(xs)
        scores = [sum(xs[max(i - o, 0)] == xs[max(T - o, 0)] for o in offsets) for i in range(T)]
        return torch.eye(S, dtype=torch.float64)[xs[int(np.argmax(scores))]]

    res = check_construction_limit(first_best_key_only, quiet=True)
    assert not res and f"{HAND}, [1]: largest difference 0.75" in res.message
    assert "expected array(3,) [0.25, 0.5 , 0.25], returned array(3,) [1., 0., 0.]" in (res.message)

    def kgram_instead(x, S, offsets):  # the estimator is not the limit: boundary and back-off
        return ref_subset(x, S, offsets, 0.0)

    res = check_construction_limit(kgram_instead, quiet=True)
    assert not res and f"{HAND}, [1]: largest difference" in res.message
    assert "expected array(3,) [0.25, 0.5 , 0.25]" in res.message
