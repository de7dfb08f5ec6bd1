"""Tests for the Part II exercise checkers (ccmc_lite.markov.exercises).

``test_exercises_contract.py`` holds what every checker must do (the reference and the
chapter's solution pass; a stub, a raising or input-changing answer fails; bad arguments
raise). Here: the package functions pass, and deliberately wrong answers fail with a
message that names the failing input, the expected and the returned value.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch

from ccmc_lite.markov import (
    appendix_d_logits,
    attention_ratio,
    binary_unigram_hessian,
    entropy_rate,
    lag_one_covariance,
    stationary_distribution,
    theta_pi,
    unigram_curvature,
    unigram_entropy,
    unigram_gap,
)
from ccmc_lite.markov.exercises import (
    check_appendix_d_logits,
    check_attention_ratio,
    check_bigram_construction,
    check_cyclic_threshold,
    check_entropy_rate,
    check_lag_one_covariance,
    check_phase_prediction,
    check_stationary,
    check_theta_pi,
    check_tied_hessian,
    check_trap_curvature,
    check_unigram_curvature,
    check_unigram_gap,
    check_untied_min_eigenvalue,
    check_where_runs_stop,
)

GRID = (0.1, 0.25, 0.4, 0.55, 0.7, 0.85)  # the book profile's grid of chapter 5


def assert_fails(result, *fragments):
    """A failing result whose message names the input and the expected value."""
    assert not result
    assert result.message.startswith("❌")
    for fragment in fragments:
        assert fragment in result.message, (fragment, result.message)


# --------------------------------------------------------------- chapter 1: the data


def test_stationary(capsys):
    assert check_stationary(stationary_distribution)
    assert capsys.readouterr().out.startswith("✅ stationary law: all")
    # Iterating P fails on the periodic 3-cycle and on a slowly mixing chain.
    res = check_stationary(lambda P: torch.linalg.matrix_power(P, 200)[0], quiet=True)
    assert_fails(res, "input array(2, 2)", "expected array(2,)", "returned array(2,)")
    assert any("[[0., 1., 0.]" in f and "0.3333" in f for f in res.failures)
    # A uniform guess is right only for doubly stochastic kernels.
    res = check_stationary(lambda P: torch.full((P.shape[0],), 1 / P.shape[0]), quiet=True)
    assert_fails(res, "input array(2, 2) [[0.5, 0.5],  [0.8, 0.2]]", "expected array(2,) [0.6154")
    # The right eigenvector (of P, not of P^T) is the constant vector.
    res = check_stationary(lambda P: torch.ones(P.shape[0]), quiet=True)
    assert_fails(res, "largest difference", "returned array(2,) [1., 1.]")


def test_entropy_rate():
    assert check_entropy_rate(entropy_rate, quiet=True)

    def naive(P):  # 0 log 0 gives nan
        return float(-(stationary_distribution(P) * (P * P.log()).sum(1)).sum())

    res = check_entropy_rate(naive, quiet=True)
    assert_fails(res, "input array(2, 2) [[0. , 1. ]", "contains NaN or inf", "expected 0.462098")
    res = check_entropy_rate(lambda P: float(entropy_rate(P)) / math.log(2), quiet=True)  # bits
    assert_fails(res, "input array(2, 2) [[0.5, 0.5],  [0.8, 0.2]]", "expected 0.619015")
    res = check_entropy_rate(lambda P: float(unigram_entropy(P)), quiet=True)  # H(pi)
    assert_fails(res, "input array(2, 2)", "returned 0.666278")


# ------------------------------------------------------ chapter 2: minima and the trap


def reference_bigram(p, q, d):
    return (
        torch.full((d,), math.sqrt(max(math.log((1 - p) * (1 - q) / (p * q)), 0) / d)),
        math.log(p / (1 - p)),
    )


def test_bigram_construction():
    assert check_bigram_construction(reference_bigram, quiet=True)

    def no_split(p, q, d):  # every coordinate gets the whole norm: |e|^2 is d times too big
        return torch.full((d,), math.sqrt(math.log((1 - p) * (1 - q) / (p * q)))), math.log(
            p / (1 - p)
        )

    res = check_bigram_construction(no_split, quiet=True)
    assert_fails(res, "input 0.2, 0.3, 4", "expected array(2,) [ 2.2336, -1.3863]", "8.9344")
    assert len(res.failures) == 2  # d = 1 hides the mistake; p + q = 1 too (e = 0)
    res = check_bigram_construction(lambda p, q, d: (torch.ones(d), math.log(p / q)), quiet=True)
    assert_fails(res, "input 0.2, 0.3, 4", "returned array(2,) [ 4.    , -0.4055]")
    res = check_bigram_construction(lambda p, q, d: (1.0, 0.0), quiet=True)
    assert_fails(res, "input 0.2, 0.3, 4 raised ValueError: e must have shape (4,)")
    res = check_bigram_construction(lambda p, q, d: torch.ones(d), quiet=True)
    assert_fails(res, "raised ValueError: return a pair (e, b)")


def test_tied_hessian():
    assert check_tied_hessian(binary_unigram_hessian, quiet=True)

    def no_scale(p, q, pos):  # forgot pi0 pi1
        return binary_unigram_hessian(p, q, pos) * (p + q) ** 2 / (p * q)

    res = check_tied_hessian(no_scale, quiet=True)
    assert_fails(res, "input 0.5, 0.8, array(8, 3)", "expected array(4, 4) [[ 0.2367", "[[ 1.  ")
    assert len(res.failures) == 6

    def half_switch(p, q, pos):  # (p + q - 1) instead of 2 (p + q - 1)
        d = pos.shape[1]
        extra = torch.block_diag(torch.zeros(1, 1), torch.eye(d)).double()
        return binary_unigram_hessian(p, q, pos) - p * q / (p + q) ** 2 * (p + q - 1) * extra

    res = check_tied_hessian(half_switch, quiet=True)
    assert_fails(res, "input 0.5, 0.8", "largest difference 0.071")
    assert len(res.failures) == 5  # only p + q = 1 passes

    def outer_mean(p, q, pos):  # u u^T instead of the mean of p_n p_n^T
        u = pos.mean(0)
        H = binary_unigram_hessian(p, q, pos).clone()
        H[1:, 1:] -= p * q / (p + q) ** 2 * (pos.T @ pos / pos.shape[0] - torch.outer(u, u))
        return H

    res = check_tied_hessian(outer_mean, quiet=True)
    assert_fails(res, "input 0.5, 0.8, array(8, 3)", "expected array(4, 4)")
    assert not any("array(1, 2)" in f for f in res.failures)  # N = 1: the two agree


def test_untied_min_eigenvalue(capsys):
    exact = -(0.5 * 0.8 / 1.3**2) * 0.3
    assert check_untied_min_eigenvalue(exact)
    assert capsys.readouterr().out.startswith("✅")
    assert check_untied_min_eigenvalue(np.float64(exact), quiet=True)
    assert check_untied_min_eigenvalue(torch.tensor(exact), quiet=True)
    res = check_untied_min_eigenvalue(-exact, quiet=True)  # the sign of the saddle
    assert_fails(res, "expected -0.0710059, got 0.0710059")
    res = check_untied_min_eigenvalue(-0.3, quiet=True)  # forgot pi0 pi1
    assert_fails(res, "expected -0.0710059, got -0.3")


# --------------------------------------------------------- chapter 3: trained models


def first_block_parts(model, x):
    with torch.no_grad():
        parts = model(torch.as_tensor(x), output="parts")
    return parts


def test_attention_ratio():
    assert check_attention_ratio(attention_ratio, quiet=True)

    def last_block(model, x):
        parts = first_block_parts(model, x)
        return float((parts["attention"][-1].norm(dim=-1) / parts["y"][-1].norm(dim=-1)).mean())

    res = check_attention_ratio(last_block, quiet=True)
    assert_fails(
        res,
        "input MarkovTransformer(K=2, d=3, N=8, depth=2, tied=True) on P(0.5, 0.8), "
        "x of shape (3, 8)",
        "expected 0.130047, returned 0.389611",
    )
    assert len(res.failures) == 1  # only the depth-2 case can tell

    def ratio_of_means(model, x):
        parts = first_block_parts(model, x)
        return float(parts["attention"][0].norm(dim=-1).mean() / parts["y"][0].norm(dim=-1).mean())

    res = check_attention_ratio(ratio_of_means, quiet=True)
    assert_fails(res, "x of shape (8, 16)", "expected 0.236779, returned 0.216708")

    def over_embedding(model, x):  # |x_n| instead of |y_n|
        parts = first_block_parts(model, x)
        return float((parts["attention"][0].norm(dim=-1) / parts["x"].norm(dim=-1)).mean())

    assert_fails(check_attention_ratio(over_embedding, quiet=True), "expected 0.236779")


def test_appendix_d_logits():
    def reference(e, p, w1, b, beta, d, r):
        return appendix_d_logits(e, p, w1, b, beta, d=d, r=r)

    assert check_appendix_d_logits(reference, quiet=True)

    def eq26_as_printed(e, p, w1, b, beta, d, r):  # right only for p < 0 < e + p, w1 > 0
        return (
            e * d * (e + p) * (1 + w1**2 * d * beta) + b,
            e * d * p * (1 + w1**2 * d * (r - beta)) + b,
        )

    res = check_appendix_d_logits(eq26_as_printed, quiet=True)
    assert_fails(
        res, "input 0.5, 0.2, 0.3, 0.1, 5, 4, 16", "expected (4.02, 1.22), returned (4.02, 2.084)"
    )
    assert "0.3618, -0.1539, 0.3264" not in res.failures[0]  # the paper's case passes

    def no_skip(e, p, w1, b, beta, d, r):  # forgot the skip connection ("1 +")
        logits = []
        for x in (1, 0):
            s = e * x + p
            n = beta if w1 * s > 0 else r - beta
            logits.append(e * d * s * w1**2 * d * n + b)
        return tuple(logits)

    res = check_appendix_d_logits(no_skip, quiet=True)
    assert_fails(
        res, "input 0.3618, -0.1539, 0.3264, -0.1229, 5, 4, 16", "expected (0.819055, -1.38967)"
    )
    assert len(res.failures) == 8


# ------------------------------------------------------------------- chapter 4: depth


def unigram_point(first_only=False, keep_w2=False, flip_bias=False):
    def my_theta_pi(model, P):
        point = copy.deepcopy(model)
        pi = stationary_distribution(P)
        with torch.no_grad():
            for block in point.blocks[:1] if first_only else point.blocks:
                block.W_O.zero_()
                if not keep_w2:
                    block.W_2.zero_()
            for name in ("e", "a", "E", "A"):
                if hasattr(point, name):
                    getattr(point, name).zero_()
            b = (pi[1] / pi[0]).log() if point.K == 2 else pi.log()
            point.b.copy_(-b if flip_bias else b)
        return point

    return my_theta_pi


def test_theta_pi():
    assert check_theta_pi(theta_pi, quiet=True)
    assert check_theta_pi(unigram_point(), quiet=True)  # written out by hand, as in the chapter
    res = check_theta_pi(unigram_point(first_only=True), quiet=True)
    assert_fails(
        res,
        "input MarkovTransformer(K=2, d=2, N=3, depth=2, tied=True) on P(0.5, 0.8)",
        "expected array(5,) [0.6663, 0.    , 0.1373",
    )
    assert len(res.failures) == 4  # every deep model; the depth-1 model is right
    res = check_theta_pi(unigram_point(keep_w2=True), quiet=True)
    assert_fails(res, "depth=1, tied=True) on P(0.5, 0.8)", "expected array(5,)")
    res = check_theta_pi(unigram_point(flip_bias=True), quiet=True)
    assert_fails(res, "depth=1", "returned array(5,) [0.7747, 0.2308")  # loss and gradient
    res = check_theta_pi(lambda model, P: model.state_dict(), quiet=True)
    assert_fails(res, "raised TypeError: return a MarkovTransformer; got OrderedDict")


def test_unigram_gap():
    assert check_unigram_gap(unigram_gap, quiet=True)

    def over_unigram(loss, kernels):  # divided by H(pi) instead of the mutual information
        return (torch.as_tensor(loss) - entropy_rate(kernels)[:, None]) / unigram_entropy(kernels)[
            :, None
        ]

    res = check_unigram_gap(over_unigram, quiet=True)
    assert_fails(
        res,
        "input array(2, 2) [[0.619 , 0.6663],  [0.5446, 0.673 ]], array(2, 2, 2)",
        "expected array(2, 2) [[0., 1.],  [0., 1.]]",
    )

    def first_kernel(loss, kernels):  # every run measured against run 0's kernel
        return unigram_gap(loss, kernels[:1].expand_as(kernels).contiguous())

    res = check_unigram_gap(first_kernel, quiet=True)
    assert_fails(res, "returned array(2, 2) [[ 0.    ,  1.    ],  [-1.5747,  1.1425]]")
    assert len(res.failures) == 3  # single-run cases cannot tell


# ----------------------------------------------------------- chapter 5: phase diagram


def test_trap_curvature():
    assert check_trap_curvature(lambda p, q: 2 * p * q / (p + q) ** 2 * (p + q - 1), quiet=True)
    # the exercise asks for a function that also works elementwise on arrays
    scalar_only = check_trap_curvature(
        lambda p, q: float(unigram_curvature_binary(p, q)), quiet=True
    )
    assert_fails(scalar_only, "input array(3, 3)", "raised TypeError")
    assert len(scalar_only.failures) == 1
    res = check_trap_curvature(lambda p, q: p + q - 1, quiet=True)  # forgot 2 pi0 pi1
    assert_fails(res, "input 0.5, 0.8", "expected 0.142012, returned 0.3")
    res = check_trap_curvature(lambda p, q: p * q / (p + q) ** 2 * (p + q - 1), quiet=True)
    assert_fails(res, "input 0.5, 0.8", "expected 0.142012, returned 0.0710059")
    assert len(res.failures) == 7  # only p + q = 1 passes


def unigram_curvature_binary(p, q):
    from ccmc_lite.markov import binary_kernel

    return unigram_curvature(binary_kernel(p, q))[0]


def predicted_grid(grid):
    g = np.asarray(grid)
    P, Q = np.meshgrid(g, g, indexing="ij")
    return P, Q, np.where(P + Q > 1, P / (P + Q), P)


def test_phase_prediction(capsys):
    P, Q, right = predicted_grid(GRID)
    assert check_phase_prediction(right, grid=GRID)
    assert capsys.readouterr().out.startswith("✅ predicted Fig. 4 (tied): all 36 cases passed")
    assert check_phase_prediction(torch.as_tensor(right), grid=list(GRID), quiet=True)
    res = check_phase_prediction(right.T, grid=GRID, quiet=True)  # p and q swapped
    assert_fails(res, "at (p, q) = (0.1, 0.25): ", "expected 0.1, got 0.25")
    res = check_phase_prediction(P, grid=GRID, quiet=True)  # the untied picture: never stuck
    assert_fails(res, "at (p, q) = (0.25, 0.85): ", "expected 0.227273, got 0.25")
    res = check_phase_prediction(P / (P + Q), grid=GRID, quiet=True)  # stuck everywhere
    assert_fails(res, "21 of 36 cases failed", "(p, q) = (0.1, 0.1)", "expected 0.1, got 0.5")
    res = check_phase_prediction(right[:3, :3], grid=GRID, quiet=True)
    assert_fails(res, "shape (3, 3) instead of (6, 6)")
    with pytest.raises(ValueError, match="grid"):
        check_phase_prediction(right, grid=(0.0, 0.5))
    with pytest.raises(ValueError, match="grid"):
        check_phase_prediction(right, grid=[[0.1, 0.2]])
    with pytest.raises(TypeError, match="grid"):
        check_phase_prediction(right)  # the grid is required
    with pytest.raises(TypeError, match="positional"):
        check_phase_prediction(right, GRID)  # by keyword, like every setting


def test_where_runs_stop_is_a_minimum_only_tied_above_the_line(capsys):
    assert check_where_runs_stop([True, False, False, False])
    assert capsys.readouterr().out.startswith("✅ where the unigram point is a local minimum")
    assert check_where_runs_stop(np.array([1, 0, 0, 0], dtype=bool), quiet=True)
    res = check_where_runs_stop([True, False, True, False], quiet=True)  # untied "also trapped"
    assert_fails(res, "1 of 4 cases failed", "untied, p + q > 1")
    res = check_where_runs_stop([True, True, False, False], quiet=True)  # "always a minimum"
    assert_fails(res, "tied, p + q < 1")
    res = check_where_runs_stop([True, False, False], quiet=True)
    assert_fails(res, "shape")


# ------------------------------------------------------------- chapter 6: K states


def test_lag_one_covariance():
    assert check_lag_one_covariance(lag_one_covariance, quiet=True)
    res = check_lag_one_covariance(lambda P: lag_one_covariance(P).T, quiet=True)  # P^T diag(pi)
    assert_fails(res, "input array(4, 4)", "expected array(4, 4) [[ 0.1146, -0.0393")
    assert len(res.failures) == 3  # reversible kernels cannot tell
    res = check_lag_one_covariance(
        lambda P: stationary_distribution(P)[:, None] * P, quiet=True
    )  # forgot pi pi^T
    assert_fails(
        res, "input array(2, 2) [[0.5, 0.5],  [0.8, 0.2]]", "expected array(2, 2) [[-0.071"
    )


def test_unigram_curvature():
    assert check_unigram_curvature(unigram_curvature, quiet=True)

    def everywhere(P):  # eigenvalues on all of R^K, the constant direction included
        C = lag_one_covariance(P)
        return torch.linalg.eigvalsh(-(C + C.T) / 2)

    res = check_unigram_curvature(everywhere, quiet=True)
    assert_fails(res, "input array(2, 2) [[0.5, 0.5],  [0.8, 0.2]]", "shape (2,) instead of (1,)")

    def no_minus(P):
        return -unigram_curvature(P).flip(-1)

    assert_fails(check_unigram_curvature(no_minus, quiet=True), "expected array(1,) [0.142]")

    def not_symmetrised(P):  # eigenvalues of -C instead of -C_s: wrong for non-reversible P
        C = lag_one_covariance(P)
        K = C.shape[0]
        _, vecs = torch.linalg.eigh(torch.eye(K, dtype=torch.float64) - 1 / K)
        B = vecs[:, 1:]
        return torch.linalg.eigvals(-(B.T @ C @ B)).real.sort().values

    res = check_unigram_curvature(not_symmetrised, quiet=True)
    assert_fails(res, "input array(4, 4)", "expected array(3,)")
    assert len(res.failures) == 2


def test_cyclic_threshold():
    assert check_cyclic_threshold(2 / 3, quiet=True)
    res = check_cyclic_threshold(0.5, quiet=True)  # the two-state answer
    assert_fails(res, "expected 0.666667, got 0.5")
    res = check_cyclic_threshold(0.75, quiet=True)  # (K - 1) / K for K = 4
    assert_fails(res, "expected 0.666667, got 0.75")
