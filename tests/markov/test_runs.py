"""Tests for ccmc_lite.markov.runs: batched training on Markov chains and its evaluation."""

from __future__ import annotations

import math

import matplotlib
import pytest
import torch

from ccmc_lite.markov import (
    MarkovTransformer,
    attention_ratio,
    binary_kernel,
    entropy_rate,
    kernel_loss,
    markov_config,
    plot_pq_grid,
    symmetric_kernel,
    theta_pi,
    threshold_bracket,
    train_markov,
    unigram_entropy,
    unigram_gap,
    zero_position_probs,
)
from ccmc_lite.markov import runs as markov_runs

matplotlib.use("Agg")

KERNELS = torch.stack([binary_kernel(0.5, 0.8), binary_kernel(0.2, 0.3), binary_kernel(0.9, 0.9)])


def test_markov_config_uses_the_paper_optimiser():
    c = markov_config(100, eval_every=30)
    assert c.optimizer == "adamw" and c.betas == (0.9, 0.95) and c.schedule == "cosine"
    assert c.weight_decay == 1e-3 and c.checkpoint_steps == (0, 30, 60, 90, 100)
    assert markov_config(10).checkpoint_steps == (0, 10)
    with pytest.raises(ValueError, match="steps"):
        markov_config(0)


def test_train_markov_shapes_and_evaluation():
    runs = train_markov(
        KERNELS,
        model_options=dict(K=2, d=3, N=8),
        config=markov_config(6, eval_every=3, progress=False),
        seed=0,
        batch_size=4,
    )
    assert runs.n_runs == 3 and runs.result.loss.shape == (3, 6)
    steps, L = runs.test_losses(n_test=8)
    assert steps == [0, 3, 6] and L.shape == (3, 3) and bool(torch.isfinite(L).all())
    x, probs = runs.probabilities(n_test=5)
    assert x.shape == (3, 5, 8) and probs.shape == (3, 5, 8, 2)
    assert torch.allclose(probs.sum(-1), torch.ones(3, 5, 8, dtype=torch.float64), atol=1e-5)
    m = runs.module(1, step=3)
    assert isinstance(m, MarkovTransformer) and not m.e.requires_grad
    # the vmapped evaluation is each run's own model at that step, on its own chain's sequences
    x_test = runs.test_sequences(8, 0)  # (R, 8, N)
    for r in range(3):
        for j, step in enumerate(steps):
            own = kernel_loss(runs.module(r, step=step), x_test[r], KERNELS[r].float())
            assert abs(float(L[r, j]) - float(own)) < 1e-5
        with torch.no_grad():
            own_probs = runs.module(r)(x[r]).exp()
        torch.testing.assert_close(probs[r], own_probs.double(), atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="step"):
        runs.params_at(4)


def test_train_markov_is_reproducible_and_runs_are_independent():
    kw = dict(
        model_options=dict(K=2, d=3, N=6),
        config=markov_config(5, progress=False),
        seed=4,
        batch_size=3,
    )
    a = train_markov(KERNELS, **kw)
    b = train_markov(KERNELS, **kw)
    assert torch.equal(a.result.loss, b.result.loss)
    # run r is initialised from derive_seed(seed, r, 0): the same whatever R is
    c = train_markov(KERNELS[:1], **kw)
    assert torch.equal(a.params_at(0)["e"][0], c.params_at(0)["e"][0])


def test_train_markov_passes_and_kstate():
    kernels = torch.stack([symmetric_kernel(3, 0.3)] * 5)
    runs = train_markov(
        kernels,
        model_options=dict(K=3, d=2, N=5),
        config=markov_config(3, runs_per_pass=2, progress=False),
        seed=1,
        batch_size=2,
    )
    assert runs.result.loss.shape == (5, 3) and runs.params_at(0)["E"].shape == (5, 3, 2)
    # passes of 2 + 3 runs: the same numbers as one pass of all five
    whole = train_markov(
        kernels,
        model_options=dict(K=3, d=2, N=5),
        config=markov_config(3, progress=False),
        seed=1,
        batch_size=2,
    )
    assert torch.equal(runs.result.loss, whole.result.loss)
    for name, value in whole.params_at(3).items():
        assert torch.equal(runs.params_at(3)[name], value), name


def test_train_markov_bad_inputs():
    with pytest.raises(ValueError, match="K=3"):
        train_markov(
            KERNELS,
            model_options=dict(K=3),
            config=markov_config(2, progress=False),
            seed=0,
            batch_size=2,
        )
    with pytest.raises(ValueError, match="kernels"):
        train_markov(
            binary_kernel(0.2, 0.3),
            model_options={},
            config=markov_config(2, progress=False),
            seed=0,
            batch_size=2,
        )
    with pytest.raises(ValueError, match="row"):
        train_markov(
            torch.tensor([[[0.5, 0.4], [0.3, 0.7]]]),
            model_options={},
            config=markov_config(2, progress=False),
            seed=0,
            batch_size=2,
        )
    with pytest.raises(ValueError, match="unknown model option"):
        train_markov(
            KERNELS,
            model_options={"width": 3},
            config=markov_config(2, progress=False),
            seed=0,
            batch_size=2,
        )
    with pytest.raises(ValueError, match="batch_size"):
        train_markov(
            KERNELS,
            model_options={},
            config=markov_config(2, progress=False),
            seed=0,
            batch_size=0,
        )


def test_non_finite_loss_stops_with_step_and_setting(monkeypatch):
    real = markov_runs.next_token_loss

    def exploding(model, x):
        return real(model, x) * float("inf")

    monkeypatch.setattr(markov_runs, "next_token_loss", exploding)
    with pytest.raises(FloatingPointError, match=r"step 0.*grid cell.*tied=True"):
        train_markov(
            KERNELS,
            model_options=dict(N=4),
            config=markov_config(3, label="grid cell", progress=False),
            seed=0,
            batch_size=2,
        )


def test_unigram_gap_endpoints_and_independence():
    rate = entropy_rate(KERNELS)
    uni = unigram_entropy(KERNELS)
    gap = unigram_gap(torch.stack([rate, uni], 1), KERNELS)
    assert torch.allclose(gap, torch.tensor([[0.0, 1.0]] * 3, dtype=torch.float64), atol=1e-12)
    flat = torch.stack([binary_kernel(0.3, 0.7)])
    with pytest.raises(ValueError, match="independent"):
        unigram_gap(torch.tensor([0.6]), flat)
    assert float(unigram_gap(torch.tensor([0.6]), flat, undefined=-1.0)[0]) == -1.0


def test_zero_position_probs_reading_order():
    x = torch.tensor([[[0, 1, 0], [1, 0, 0]]])  # (R=1, S=2, N=3)
    probs = torch.zeros(1, 2, 3, 2)
    probs[..., 1] = torch.tensor([[[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]]])
    probs[..., 0] = 1 - probs[..., 1]  # a distribution over K = 2 tokens
    out = zero_position_probs(x, probs, count=4)
    assert torch.allclose(out, torch.tensor([[0.1, 0.3, 0.5, 0.6]], dtype=torch.float64))
    with pytest.raises(ValueError, match="count"):
        zero_position_probs(x, probs, count=5)


def test_attention_ratio():
    P = binary_kernel(0.5, 0.8)
    point = theta_pi(MarkovTransformer(K=2, d=3, N=6), P)
    x = torch.randint(0, 2, (4, 6))
    assert attention_ratio(point, x) == 0.0  # W_O = 0
    torch.manual_seed(0)
    assert attention_ratio(MarkovTransformer(K=2, d=3, N=6, init_std=0.5), x) > 0
    with pytest.raises(TypeError, match="model"):
        attention_ratio(object(), x)


def test_plot_pq_grid():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    grid = (0.2, 0.4, 0.6, 0.8)
    values = torch.tensor([[p for q in grid] for p in grid])
    im = plot_pq_grid(ax, values, grid, mask=values > 0.7)
    assert im.get_array().shape == (4, 4)
    assert math.isclose(
        float(im.get_array()[3, 1]), 0.4, rel_tol=1e-6
    )  # transposed: row = q, column = p
    with pytest.raises(ValueError, match="shape"):
        plot_pq_grid(ax, values[:3], grid)
    with pytest.raises(ValueError, match="evenly"):
        plot_pq_grid(ax, values, (0.1, 0.2, 0.5, 0.9))
    plt.close(fig)


def test_train_markov_start_from():
    opts = dict(K=2, d=3, N=8)
    start = theta_pi(MarkovTransformer(**opts), binary_kernel(0.5, 0.8))
    runs = train_markov(
        KERNELS,
        model_options=opts,
        config=markov_config(4, eval_every=2, progress=False),
        seed=0,
        batch_size=4,
        start_from=start,
    )
    for r in range(runs.n_runs):
        m = runs.module(r, step=0)
        for name, value in start.state_dict().items():
            assert torch.equal(m.state_dict()[name], value), name
    with pytest.raises(ValueError, match="start_from"):
        train_markov(
            KERNELS,
            model_options=dict(K=2, d=4, N=8),
            config=markov_config(2, progress=False),
            seed=0,
            batch_size=4,
            start_from=start,
        )
    with pytest.raises(TypeError, match="start_from"):
        train_markov(
            KERNELS,
            model_options=opts,
            config=markov_config(2, progress=False),
            seed=0,
            batch_size=4,
            start_from="theta_pi",
        )


def test_threshold_bracket():
    ps = [0.7, 0.5, 0.6, 0.65, 0.8]  # unsorted on purpose
    gaps = [[1.0, 1.0], [0.0, 0.1], [0.2, 0.1], [0.3, 0.9], [1.0, 1.1]]
    assert threshold_bracket(ps, gaps) == (0.6, 0.7)
    lo, hi = threshold_bracket([0.5, 0.6], [[0.0], [0.1]])
    assert lo == 0.6 and math.isnan(hi)
    lo, hi = threshold_bracket([0.5, 0.6], [[1.0], [0.9]])
    assert math.isnan(lo) and hi == 0.5
    # a stuck p below an escaped one does not count as the upper end
    assert threshold_bracket([0.5, 0.6, 0.7], [[0.9], [0.1], [1.0]]) == (0.6, 0.7)
    with pytest.raises(ValueError):
        threshold_bracket([0.5, 0.6], [[0.0], [0.1], [0.2]])
    with pytest.raises(ValueError):
        threshold_bracket([0.5, 0.5], [[0.0], [0.1]])
