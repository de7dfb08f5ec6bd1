"""Tests for ccmc_lite.core.validation: every check accepts good input and names bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from ccmc_lite.ccmc.chain import _ccmc_distribution_from_counts, _check_prompt_tokens
from ccmc_lite.core import (
    as_tensor,
    check_choice,
    check_float,
    check_int,
    check_prob_vector,
    check_probability,
    check_seed,
    check_stochastic_matrix,
    check_tokens,
)


def test_check_int_accepts_python_numpy_and_tensor_integers():
    assert check_int("K", 3) == 3
    assert check_int("K", np.int64(4)) == 4
    assert check_int("K", torch.tensor(5)) == 5
    assert isinstance(check_int("K", np.int32(2)), int)


@pytest.mark.parametrize("bad", [2.0, "3", None, True, torch.tensor(1.0)])
def test_check_int_rejects_non_integers_by_name(bad):
    with pytest.raises(TypeError, match="K must be an integer"):
        check_int("K", bad)


def test_check_int_range_errors_name_argument_and_value():
    with pytest.raises(ValueError, match=r"K must be >= 2; got 1"):
        check_int("K", 1, minimum=2)
    with pytest.raises(ValueError, match=r"depth must be <= 8; got 9"):
        check_int("depth", 9, maximum=8)


def test_check_float_intervals():
    assert check_float("lr", 1e-3, minimum=0, open_lower=True) == 1e-3
    with pytest.raises(ValueError, match=r"p must lie in \(0.0, 1.0\); got 1.0"):
        check_probability("p", 1.0)
    with pytest.raises(ValueError, match="p must lie in"):
        check_probability("p", 0)
    assert check_probability("p", 0, open_interval=False) == 0.0
    with pytest.raises(ValueError, match="x must be finite"):
        check_float("x", float("nan"))
    with pytest.raises(TypeError, match="x must be a real number"):
        check_float("x", "0.5")


def test_check_choice_and_seed():
    assert check_choice("mode", "sa", ("sa", "ca")) == "sa"
    with pytest.raises(ValueError, match=r"mode must be one of \('sa', 'ca'\); got 'xa'"):
        check_choice("mode", "xa", ("sa", "ca"))
    with pytest.raises(TypeError, match="mode must be a string"):
        check_choice("mode", 1, ("sa",))
    assert check_seed(0) == 0
    with pytest.raises(ValueError, match="seed must be >= 0"):
        check_seed(-1)


def test_as_tensor_dtype_ndim_and_finiteness():
    t = as_tensor("x", [[1, 2], [3, 4]])
    assert t.dtype == torch.float64 and t.shape == (2, 2)
    with pytest.raises(ValueError, match=r"x must have 1 dimension\(s\); got shape \(2, 2\)"):
        as_tensor("x", [[1, 2], [3, 4]], ndim=1)
    with pytest.raises(ValueError, match="x must contain only finite numbers"):
        as_tensor("x", [1.0, float("inf")])
    with pytest.raises(TypeError, match="x must hold integers"):
        as_tensor("x", [1.5], dtype=torch.long)
    with pytest.raises(TypeError, match="x must be an array"):
        as_tensor("x", "abc")
    with pytest.raises(TypeError, match="x must hold numbers, not booleans"):
        as_tensor("x", [True, False])


def test_prob_vector_checks():
    v = check_prob_vector("pi", [0.25, 0.75])
    assert torch.allclose(v, torch.tensor([0.25, 0.75], dtype=torch.float64))
    with pytest.raises(ValueError, match="pi must sum to 1"):
        check_prob_vector("pi", [0.2, 0.7])
    with pytest.raises(ValueError, match="pi must have non-negative entries"):
        check_prob_vector("pi", [-0.1, 1.1])
    with pytest.raises(ValueError, match="pi must have strictly positive entries"):
        check_prob_vector("pi", [0.0, 1.0], positive=True)


def test_stochastic_matrix_checks():
    P = check_stochastic_matrix("P", [[0.9, 0.1], [0.2, 0.8]])
    assert P.shape == (2, 2)
    with pytest.raises(ValueError, match="P must be square"):
        check_stochastic_matrix("P", [[0.5, 0.5, 0.0], [0.2, 0.3, 0.5]])
    with pytest.raises(ValueError, match=r"row \(1,\) sums to 0.7"):
        check_stochastic_matrix("P", [[0.5, 0.5], [0.3, 0.4]])
    with pytest.raises(ValueError, match="P must have non-negative entries"):
        check_stochastic_matrix("P", [[1.5, -0.5], [0.5, 0.5]])
    with pytest.raises(ValueError, match="P must contain only finite"):
        check_stochastic_matrix("P", [[float("nan"), 1.0], [0.5, 0.5]])
    with pytest.raises(ValueError, match=r"entry \(0, 1\) is 0"):
        check_stochastic_matrix("P", [[1.0, 0.0], [0.5, 0.5]], positive=True)
    with pytest.raises(ValueError, match="P must be a matrix"):
        check_stochastic_matrix("P", [1.0])


def test_tokens_checks():
    X = check_tokens("X", [0, 2, 1], K=3)
    assert X.dtype == torch.long
    with pytest.raises(ValueError, match=r"X must hold tokens in \[0, 3\) \(K=3\); found 3"):
        check_tokens("X", [0, 3], K=3)
    with pytest.raises(ValueError, match="X must not be empty"):
        check_tokens("X", [], K=3)
    with pytest.raises(ValueError, match="found -1"):
        check_tokens("X", [-1], K=3)


@given(st.integers(min_value=1, max_value=8), st.integers(min_value=0, max_value=2**31))
def test_random_stochastic_matrices_pass(K, seed):
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.ones(K), size=K)
    out = check_stochastic_matrix("P", P)
    assert out.dtype == torch.float64 and torch.equal(out, torch.from_numpy(P))


# --- the remaining shared checks, each with its rule ------------------------------------


def test_is_traced_inside_torch_func_only():
    from torch.func import vmap

    from ccmc_lite.core import is_traced

    x = torch.zeros(3, 2)
    assert not is_traced(x) and not is_traced(1.0)
    seen = []
    vmap(lambda row: seen.append(is_traced(row)) or row)(x)
    assert seen == [True]


def test_check_numbers_bool_callable_instance_elements():
    from ccmc_lite.core import (
        check_bool,
        check_callable,
        check_elements,
        check_instance,
        check_numbers,
    )

    assert check_numbers("lr", [1, 0.5]) == (1.0, 0.5)
    assert check_numbers("lr", np.array([2.0]), 1) == (2.0,)
    with pytest.raises(ValueError, match="lr"):
        check_numbers("lr", [1.0, 0.0])  # positive by default
    assert check_numbers("w", [0.0], minimum=0.0, open_lower=False) == (0.0,)
    with pytest.raises(ValueError, match="lr"):
        check_numbers("lr", [1.0], 2)
    with pytest.raises((TypeError, ValueError), match="lr"):
        check_numbers("lr", "1.0")
    assert check_bool("flag", np.bool_(True)) is True
    with pytest.raises(TypeError, match="flag must be True or False; got 1"):
        check_bool("flag", 1)
    assert check_callable("fn", len) is len
    with pytest.raises(TypeError, match="fn must be callable; got int"):
        check_callable("fn", 3)
    assert check_instance("x", 3, (int, float)) == 3
    with pytest.raises(TypeError, match="x must be a int or float; got str"):
        check_instance("x", "3", (int, float))
    assert check_elements("n * T", 10, limit=10) == 10
    with pytest.raises(ValueError, match=r"n \* T = 11 entries exceeds the limit 10"):
        check_elements("n * T", 11, limit=10)
    assert check_elements("n * T", 11, limit=10, allow_large=True) == 11


def test_check_model_tokens_and_prompt_tokens():
    from ccmc_lite.core import check_model_tokens
    from ccmc_lite.markov import MarkovTransformer

    m = MarkovTransformer(K=2, d=2, N=4)
    x = check_model_tokens("x", [[0, 1, 1]], m)
    assert x.dtype == torch.long and x.tolist() == [[0, 1, 1]]
    check_model_tokens("x", [[0, 1, 1, 0, 1]], m, extra=1)  # N + 1 with the target token
    with pytest.raises(ValueError, match="x has 5 positions but the model takes at most 4"):
        check_model_tokens("x", [[0, 1, 1, 0, 1]], m)
    with pytest.raises(ValueError, match="x"):
        check_model_tokens("x", [[0, 2]], m)  # token 2 with K = 2
    with pytest.raises(TypeError, match=r"model must be a torch\.nn\.Module"):
        check_model_tokens("x", [[0]], "model")
    assert _check_prompt_tokens("X", [2, 0], K=3).tolist() == [2, 0]
    with pytest.raises(ValueError, match="X must not be empty"):
        _check_prompt_tokens("X", [], K=3)
    with pytest.raises(ValueError, match="X"):
        _check_prompt_tokens("X", [3], K=3)


def test_large_allocations_are_refused_before_they_start():
    from ccmc_lite import ngram

    task = ngram.NGramTask(S=3, n=3, T=10)
    with pytest.raises(ValueError, match=r"prod\(shape\) \* 4 = 40000000000 entries"):
        ngram.dirichlet(0.5, (10**5, 10**5), 4, seed=0)
    with pytest.raises(ValueError, match=r"prod\(shape\) \* 10 = 100000000000 entries"):
        ngram.sample_urn(task, (10**5, 10**5), seed=0)
    with pytest.raises(ValueError, match=r"prod\(batch_shape\) \* 100000000"):
        ngram.sample_transitions(ngram.NGramTask(S=100, n=4, T=4), (10**4,), seed=0)
    with pytest.raises(ValueError, match=r"min\(chunk, sequences\) \* T \* T"):
        ngram.kgram_estimator(torch.zeros(1, 200_000, dtype=torch.long), 2, 2, positions="all")


def test_mismatched_shapes_get_named_errors():
    from ccmc_lite import markov, ngram

    m = markov.MarkovTransformer(K=2, d=2, N=4)
    with pytest.raises(ValueError, match=r"P must be 2 x 2 for a model with K=2; got \(3, 3\)"):
        markov.kernel_loss(m, torch.zeros(2, 4, dtype=torch.long), markov.symmetric_kernel(3, 0.3))
    P = markov.binary_kernel(0.2, 0.3)
    with pytest.raises(ValueError, match=r"init must have shape \(2,\).*got \(2, 2\)"):
        markov.sample_chains(P, 2, 3, seed=0, init=[[0.5, 0.5], [1.0, 0.0]])
    Ps = torch.stack([P, P])  # one law per kernel is allowed with several kernels
    assert markov.sample_chains(Ps, 2, 3, seed=0, init=[[0.5, 0.5], [1.0, 0.0]]).shape == (2, 2, 3)
    with pytest.raises(ValueError, match=r"query must have one token per count vector"):
        _ccmc_distribution_from_counts(torch.eye(3), [[1, 1, 0]] * 2, [0, 1, 2])
    model = ngram.SimplifiedTransformer(5, 8, 2)
    x = torch.zeros(2, 8, dtype=torch.long)
    assert model(x, torch.tensor([3, 7])).shape == (2, 5)
    with pytest.raises(ValueError, match=r"query_pos must give one position per sequence"):
        model(x, torch.tensor([7]))
    with pytest.raises(ValueError, match=r"query_pos must lie in \[0, 7\].*got 0\.\.8"):
        model(x, torch.tensor([0, 8]))
    with pytest.raises(TypeError, match="query_pos must hold integer positions"):
        model(x, torch.tensor([1.0, 2.0]))


def test_coarse_statistics_are_renumbered_not_sized_by_their_largest_id():
    from ccmc_lite.lens import coarse_predictor, conditional_entropy

    J = torch.tensor([[0.25, 0.25], [0.5, 0.0]], dtype=torch.float64)
    assert float(conditional_entropy([[0.5, 0.5]], [10**10])) == pytest.approx(np.log(2))
    torch.testing.assert_close(coarse_predictor(J, [7, 3]), coarse_predictor(J, [1, 0]))
    with pytest.raises(ValueError, match=r"non-negative entries .*got -0\.1 at \(0, 1\)"):
        conditional_entropy([[0.6, -0.1], [0.5, 0.0]])
