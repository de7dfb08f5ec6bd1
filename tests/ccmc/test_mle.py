"""Tests for ccmc_lite.ccmc.mle (Ildiz et al. 2024, eq. (5)/(7)-(8), Lemma 3.7, Cor 3.5/3.8)."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ccmc_lite.ccmc import (
    AttentionMLE,
    asymptotic_error,
    coverage_report,
    fit_gd,
    fit_newton,
    gd_step_size,
    gd_with_trainer,
    gradient,
    hessian_logits,
    hessian_on_subspace,
    log_likelihood,
    mle_exists,
    nll,
    population_data,
    project_onto_subspace,
    prompt_data,
    random_embeddings,
    random_prompts,
    restricted_distribution,
    sample_prompt_data,
    subspace_basis,
    transition_from_weights,
    weights_from_transition,
)
from ccmc_lite.ccmc.mle import _hessian_weights, _nll_of_logits


def problem(K=4, d=5, n_prompts=40, L=5, seed=0, identity=False):
    g = torch.Generator().manual_seed(seed)
    E = torch.eye(K, dtype=torch.float64) if identity else random_embeddings(K, d, seed=seed)
    dd = E.shape[1]
    W_gt = project_onto_subspace(torch.randn(dd, dd, generator=g, dtype=torch.float64), E)
    P_gt = transition_from_weights(W_gt, E)
    prompts = torch.randint(0, K, (n_prompts, L), generator=g)
    return E, W_gt, P_gt, prompts


def test_nll_is_minus_average_log_likelihood():
    E, W, P, prompts = problem()
    data = prompt_data(prompts, prompts[:, 0], 4)  # first token is always a key
    val = nll(W, E, data)
    assert math.isclose(float(val), -float(log_likelihood(P, data, average=True)), rel_tol=1e-12)
    Theta = (E @ W @ E.T).T
    assert math.isclose(float(_nll_of_logits(Theta, data)), float(val), rel_tol=1e-12)


def test_gradient_matches_autograd():
    E, _W, P, prompts = problem(seed=1)
    data = population_data(P, prompts)
    Wr = torch.randn(5, 5, dtype=torch.float64, requires_grad=True)
    nll(Wr, E, data).backward()
    torch.testing.assert_close(gradient(Wr.detach(), E, data), Wr.grad)
    # the gradient lies in S_E (so GD from 0 stays there)
    g = gradient(Wr.detach(), E, data)
    torch.testing.assert_close(project_onto_subspace(g, E), g)


def test_one_w_meets_a_batch_of_data_sets_and_contradicting_runs_are_named():
    """Run axes broadcast: one W against three weightings is the three answers stacked;
    two runs of W against three weightings contradict each other and raise, naming both."""
    E, _W, P, prompts = problem(K=3, d=4, seed=5)
    data = population_data(P, prompts)
    weights = torch.rand(3, data.n_rows, dtype=torch.float64) + 0.1
    batch = data.with_weights(weights)
    W = torch.randn(4, 4, dtype=torch.float64)
    singles = [data.with_weights(w) for w in weights]
    torch.testing.assert_close(nll(W, E, batch), torch.stack([nll(W, E, d) for d in singles]))
    torch.testing.assert_close(
        gradient(W, E, batch), torch.stack([gradient(W, E, d) for d in singles])
    )
    Theta = torch.randn(3, 3, dtype=torch.float64)
    torch.testing.assert_close(
        hessian_logits(Theta, batch), torch.stack([hessian_logits(Theta, d) for d in singles])
    )
    two = torch.stack([W, -W])
    for call, name in [
        (lambda: nll(two, E, batch), "W"),
        (lambda: gradient(two, E, batch), "W"),
        (lambda: hessian_logits(torch.stack([Theta, Theta]), batch), "Theta"),
        (lambda: log_likelihood(torch.stack([P, P]), batch), "P"),
    ]:
        with pytest.raises(ValueError, match=rf"{name} and data must have the same run axes"):
            call()
    with pytest.raises(ValueError, match=r"data must be one data set \(no run axes\)"):
        hessian_on_subspace(W, E, batch)
    with pytest.raises(ValueError, match=r"population must be one data set"):
        asymptotic_error(W, E, batch)


def test_hessians_match_autograd_and_are_psd():
    E, _W, P, prompts = problem(K=3, d=4, seed=2)
    data = population_data(P, prompts)
    Theta = torch.randn(3, 3, dtype=torch.float64)
    H_auto = torch.autograd.functional.hessian(lambda T: _nll_of_logits(T, data), Theta)
    H_blocks = hessian_logits(Theta, data)
    for k in range(3):
        torch.testing.assert_close(H_blocks[k], H_auto[k, :, k, :])
        assert float(torch.linalg.eigvalsh(H_blocks[k]).min()) > -1e-12
        # the row shift Theta[k] + c is a null direction
        torch.testing.assert_close(
            H_blocks[k] @ torch.ones(3, dtype=torch.float64), torch.zeros(3, dtype=torch.float64)
        )
    Wr = torch.randn(4, 4, dtype=torch.float64)
    H_w = _hessian_weights(Wr, E, data)
    H_w_auto = torch.autograd.functional.hessian(lambda V: nll(V, E, data), Wr).reshape(16, 16)
    torch.testing.assert_close(H_w, H_w_auto)


def test_strict_convexity_on_subspace_iff_connected():
    """Lemma 3.7: positive definite on S_E when every G^(k) is connected."""
    K, d = 3, 3
    E = torch.eye(K, dtype=torch.float64)
    P = torch.softmax(torch.randn(K, K, generator=torch.Generator().manual_seed(0)), -1)
    B = subspace_basis(E).reshape(K * (K - 1), -1)
    covering = [[a, b, k] for k in range(K) for a in range(K) for b in range(K)]
    missing = [p for p in covering if not (p[-1] == 0 and 2 in p[:-1])]  # G^(0) cut in CA
    for prompts, connected in ((covering, True), (missing, False)):
        data = population_data(P, prompts, variant="cross")
        assert coverage_report(prompts, K, variant="cross").consistent == connected
        H = _hessian_weights(torch.zeros(d, d, dtype=torch.float64), E, data)
        eig = torch.linalg.eigvalsh(B @ H @ B.T)
        assert (float(eig.min()) > 1e-6) == connected


def test_newton_recovers_ground_truth_population():
    """Thm 3.4 / Cor 3.6: connected graphs -> the population minimiser is W^GT."""
    E, W, P, prompts = problem(seed=3)
    data = population_data(P, prompts)
    assert coverage_report(prompts, 4).consistent
    fit = fit_newton(data, E, tol=1e-11)
    assert bool(fit.converged)
    assert float((fit.W - W).norm()) < 1e-8
    torch.testing.assert_close(fit.P, P, rtol=1e-8, atol=1e-10)
    assert int(fit.iterations) < 20


def test_disconnected_recovers_only_subdistributions():
    """Cor 3.5: with G^(k) disconnected only pi_{k, C} on each component is recovered."""
    K = 4
    E = torch.eye(K, dtype=torch.float64)
    P = torch.softmax(torch.randn(K, K, generator=torch.Generator().manual_seed(4)), -1)
    prompts = [[a, b, k] for k in range(K) for a in range(K) for b in range(K)]
    prompts = [p for p in prompts if not (p[-1] == 1 and 3 in p)]  # token 3 never with query 1
    rep = coverage_report(prompts, K, variant="self")
    assert rep.disconnected_queries == [1]
    fit = fit_newton(population_data(P, prompts), E, tol=1e-11)
    assert bool(fit.converged)
    for k in (0, 2, 3):
        torch.testing.assert_close(fit.P[k], P[k].double(), rtol=1e-7, atol=1e-9)
    comp = max(rep.components[1], key=len)
    assert comp == frozenset({0, 1, 2})
    torch.testing.assert_close(
        restricted_distribution(fit.P, 1, comp), restricted_distribution(P, 1, comp)
    )
    assert float((fit.P[1] - P[1]).abs().max()) > 1e-3


def test_gd_from_zero_converges_and_trainer_agrees():
    """Cor 3.8 with E = I; the closed-form GD equals autograd GD through train_runs."""
    E, W, P, prompts = problem(K=3, n_prompts=30, seed=5, identity=True)
    data = population_data(P, prompts)
    lr = gd_step_size(data, E)
    fit = fit_gd(data, E, steps=20_000, tol=1e-6)
    assert bool(fit.converged)
    assert float((fit.W - W).norm()) < 1e-4
    hist = fit.loss_history[: int(fit.iterations) + 1]
    assert bool((hist[1:] <= hist[:-1] + 1e-15).all())  # monotone with step 1/L
    short = fit_gd(data, E, steps=30, lr=lr)
    tr = gd_with_trainer(data, E, steps=30, lr=lr)
    torch.testing.assert_close(tr.params["W"][0], short.W)
    torch.testing.assert_close(tr.loss[0].double(), short.loss_history[:30], rtol=1e-6, atol=1e-7)


def test_batched_fits_equal_separate_fits():
    E, _W, P, prompts = problem(seed=6)
    pop = population_data(P, prompts)
    samples = sample_prompt_data(pop, 5000, seed=1, n_runs=3)
    batched = fit_newton(samples, E)
    for r in range(3):
        single = fit_newton(pop.with_weights(samples.weights[r]), E)
        torch.testing.assert_close(batched.W[r], single.W, rtol=1e-8, atol=1e-9)
    assert batched.W.shape == (3, 5, 5)
    assert bool(batched.converged.all())


@settings(max_examples=15, deadline=None)
@given(st.integers(2, 5), st.integers(0, 10_000))
def test_newton_minimises_random_problems(K, seed):
    E, _W, P, prompts = problem(K=K, d=K + 1, n_prompts=6 * K, seed=seed)
    data = sample_prompt_data(population_data(P, prompts), 2000, seed=seed)
    fit = fit_newton(data, E, max_iter=200)
    # Newton converges exactly when a minimiser exists (Ford's condition, mle_exists)
    assert bool(fit.converged) == bool(mle_exists(data))
    if not bool(fit.converged):  # no minimiser: nothing to check at the returned point
        return
    # first-order optimality and no better point nearby in S_E
    assert float(gradient(fit.W, E, data).norm()) < 1e-9
    B = subspace_basis(E)
    for b in B[:3]:
        assert float(nll(fit.W + 1e-3 * b, E, data)) >= float(fit.loss) - 1e-12


def test_bad_arguments():
    E, _W, P, prompts = problem()
    data = population_data(P, prompts)
    with pytest.raises(TypeError, match="PromptData"):
        fit_newton("data", E)
    with pytest.raises(ValueError, match="K=4 rows"):
        fit_newton(data, torch.eye(5))
    with pytest.raises(ValueError, match="W must have shape"):
        nll(torch.zeros(3, 3), E, data)
    with pytest.raises(ValueError, match="linearly independent"):
        fit_gd(data, torch.ones(4, 5), steps=1)
    with pytest.raises(ValueError, match="d >= K"):
        AttentionMLE(torch.randn(4, 2))
    with pytest.raises(ValueError, match="steps"):
        fit_gd(data, E, steps=0)
    with pytest.raises(ValueError, match="Theta must have shape"):
        _nll_of_logits(torch.zeros(3, 3), data)


def test_hessian_on_subspace_null_space_counts_components():
    """Zero eigenvalues on S_E = sum_k (#components of G^(k) - 1) (Cor. 3.5 / Lemma 3.7)."""
    K = 4
    E = random_embeddings(K, 5, seed=7)
    P = torch.softmax(torch.randn(K, K, generator=torch.Generator().manual_seed(7)), -1).double()
    W = weights_from_transition(P, E)
    prompts = [[a, b, k] for k in range(K) for a in range(K) for b in range(K) if k not in (a, b)]
    for variant in ("self", "cross"):
        H = hessian_on_subspace(W, E, population_data(P, prompts, variant=variant))
        eig = torch.linalg.eigvalsh(H)
        n_zero = int((eig < 1e-10 * eig.max()).sum())
        rep = coverage_report(prompts, K, variant=variant)
        assert n_zero == sum(len(c) - 1 for c in rep.components)
        assert n_zero == (0 if variant == "self" else K)


def test_asymptotic_error_matches_simulation():
    E, W, P, prompts = problem(K=3, d=3, n_prompts=30, seed=8, identity=True)
    pop = population_data(P, prompts)
    const = asymptotic_error(W, E, pop)
    fits = fit_newton(sample_prompt_data(pop, 50_000, seed=8, n_runs=60), E)
    measured = 50_000 * float(((fits.W - W) ** 2).sum((-1, -2)).mean())
    assert 0.7 < measured / const < 1.3
    gap = [p for p in prompts if not (p[-1] == 0 and 1 in p)]
    with pytest.raises(ValueError, match="singular"):
        asymptotic_error(W, E, population_data(P, gap))


def test_batched_rows_hessian_matches_per_run():
    """Per-run rows (trajectory data) take a different code path than shared rows."""
    from ccmc_lite.ccmc import sample_trajectories, trajectory_data

    P = torch.softmax(torch.randn(3, 3, generator=torch.Generator().manual_seed(9)), -1).double()
    tr = sample_trajectories(P, [0, 1, 2], 40, seed=9, n_traj=4)
    data = trajectory_data(tr.tokens, 3, 3)  # counts (4, 40, 3)
    Theta = torch.randn(4, 3, 3, dtype=torch.float64)
    H = hessian_logits(Theta, data)
    for r in range(4):
        single = trajectory_data(tr.tokens[r], 3, 3)
        torch.testing.assert_close(H[r], hessian_logits(Theta[r], single))


def test_random_prompts():
    prompts = random_prompts(5, 50, min_length=2, max_length=4, seed=0)
    assert len(prompts) == 50
    assert all(2 <= len(p) <= 4 and all(0 <= t < 5 for t in p) for p in prompts)
    assert prompts == random_prompts(5, 50, min_length=2, max_length=4, seed=0)
    with pytest.raises(ValueError, match="max_length"):
        random_prompts(5, 3, min_length=4, max_length=2, seed=0)


def test_mle_exists_detects_weights_running_off():
    """Ford's condition: without a weak->weak pair the weak row's MLE does not exist."""
    from ccmc_lite.ccmc import PromptData, mle_exists

    counts = torch.tensor([[3.0, 1.0], [3.0, 1.0], [3.0, 1.0], [2.0, 2.0]], dtype=torch.float64)
    query = torch.tensor([0, 0, 1, 1])
    y = torch.tensor([0, 1, 0, 1])
    E = torch.eye(2, dtype=torch.float64)
    both = PromptData(counts, query, y, torch.ones(4, dtype=torch.float64), 2)
    no_ww = PromptData(counts, query, y, torch.tensor([1.0, 1.0, 1.0, 0.0]), 2)
    assert bool(mle_exists(both)) and not bool(mle_exists(no_ww))
    good, bad = fit_newton(both, E, tol=1e-10), fit_newton(no_ww, E, tol=1e-10, max_iter=40)
    assert bool(good.converged) and bool(good.mle_exists)
    # the gradient vanishes (the old criterion) but the weights run off: not converged
    assert float(bad.grad_norm) < 1e-6 and float(bad.W.abs().max()) > 5
    assert not bool(bad.converged) and not bool(bad.mle_exists)
    assert float(bad.P[1, 1]) < 1e-4
    # batched weights and batched rows give the same answer
    batched = PromptData(counts, query, y, torch.stack([both.weights, no_ww.weights]), 2)
    assert mle_exists(batched).tolist() == [True, False]
    rows = PromptData(
        counts.expand(2, 4, 2), query.expand(2, 4), y.expand(2, 4), batched.weights, 2
    )
    assert mle_exists(rows).tolist() == [True, False]
    assert fit_newton(batched, E, max_iter=40).converged.tolist() == [True, False]
    assert not bool(fit_gd(no_ww, E, steps=50).converged)


def test_mle_exists_on_population_and_samples():
    """Population data always has a minimiser; tiny samples often do not."""
    from ccmc_lite.ccmc import mle_exists

    E, _W, P, prompts = problem(seed=5, identity=True)
    pop = population_data(P, prompts)
    assert bool(mle_exists(pop))
    small = sample_prompt_data(pop, 10, seed=0, n_runs=20)
    large = sample_prompt_data(pop, 200_000, seed=0, n_runs=3)
    ex_small, ex_large = mle_exists(small), mle_exists(large)
    assert not bool(ex_small.all()) and bool(ex_large.all())
    fit = fit_newton(small, E, max_iter=30)
    assert not bool((fit.converged & ~ex_small).any())


def test_fit_gd_checks_its_embeddings_and_start_and_keeps_w_in_s_e():
    E, _W, P, prompts = problem(K=3, d=4)
    pop = population_data(P, prompts)
    for call in (
        lambda: fit_gd(pop, torch.eye(4), steps=5),
        lambda: gd_step_size(pop, torch.eye(4)),
        lambda: fit_newton(pop, torch.eye(4)),
    ):
        with pytest.raises(ValueError, match="E must have K=3 rows to match the data; got 4"):
            call()
    with pytest.raises(ValueError, match=r"W0 must have shape \(4, 4\); got \(3,\)"):
        fit_gd(pop, E, steps=3, W0=torch.ones(3))
    # a start outside S_E: the fit is the same as from its projection, and stays in S_E
    fit = fit_gd(pop, E, steps=3, W0=torch.eye(4))
    torch.testing.assert_close(fit.W, project_onto_subspace(fit.W, E))
    torch.testing.assert_close(
        fit.W, fit_gd(pop, E, steps=3, W0=project_onto_subspace(torch.eye(4), E)).W
    )


def test_fits_stop_on_divergence_by_these_rules():
    """The divergence guard of fit_gd and fit_newton (a private helper of mle)."""
    from ccmc_lite.ccmc.mle import _check_fit as check_fit
    from ccmc_lite.core import DivergenceError

    ok = torch.zeros(3)
    check_fit("fit", torch.tensor([1.0, float("nan"), 2.0]), ok)  # NaN: a step not taken
    check_fit("fit", torch.tensor([1.0, 101.0]), torch.zeros(1))  # rise of 100 x max(|1|, 1)
    with pytest.raises(DivergenceError, match="step 1"):  # ... but the last step is checked
        check_fit("fit", torch.tensor([1.0, float("nan")]), torch.zeros(1))
    with pytest.raises(DivergenceError, match="step 1"):
        check_fit("fit", torch.tensor([1.0, float("inf")]), torch.zeros(1))
    with pytest.raises(DivergenceError, match=r"fit diverged at step 2 \(run \(1,\)\)"):
        check_fit("fit", torch.tensor([[1.0, 1.0, 1.0], [2.0, 1.0, 203.0]]), torch.zeros(2, 4))
    check_fit("fit", torch.tensor([2.0, 201.0]), torch.zeros(1))  # threshold scales with |first|
    check_fit("fit", torch.tensor([1.0, 1e6]), torch.zeros(1), max_loss_rise=None)
    with pytest.raises(DivergenceError, match=r"non-finite parameters .*run \(1,\)"):
        check_fit("fit", torch.zeros(2, 2), torch.tensor([[0.0], [float("nan")]]))
    with pytest.raises(ValueError, match="params must have the run axes"):
        check_fit("fit", torch.zeros(2, 2), torch.zeros(3))
    with pytest.raises(ValueError, match="loss_history must not be empty"):
        check_fit("fit", torch.zeros(0), torch.zeros(1))
