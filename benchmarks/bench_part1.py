"""Part I benchmarks (Ildiz et al. 2024): trajectory sampling and the MLE solver.

Two targets from the Part I issue:

1. **Lemma 5.3 sampling.** 10^4 trajectories of length 10^4 for ``K = 2``, generated as one
   vectorised program (:func:`ccmc_lite.ccmc.sample_trajectories`). Baseline: the same
   sampler called once per trajectory (a Python loop over trajectories), timed on a few
   trajectories and extrapolated linearly to 10^4.
2. **MLE solver.** ``K = 10`` and ``n = 10^5`` (prompt, next-token) samples with distinct
   prompts; damped Newton (:func:`ccmc_lite.ccmc.fit_newton`) to a gradient norm below
   1e-8. Baseline: plain gradient descent from zero (:func:`ccmc_lite.ccmc.fit_gd`, step
   ``1/L``) run for the same wall-clock time; we report the gradient norm it reaches.

Each measurement is preceded by a small warm-up call. ``run(quick=True)`` uses smaller
sizes (for CI smoke tests); the keys say which sizes were used.
"""

from __future__ import annotations

import json
import time

import torch

from ccmc_lite.ccmc import (
    binary_collapse_chain,
    fit_gd,
    fit_newton,
    project_onto_subspace,
    prompt_data,
    sample_next,
    sample_trajectories,
    transition_from_weights,
)
from ccmc_lite.core import torch_generator


def _sampling(n_traj: int, length: int, n_loop: int) -> dict:
    P = binary_collapse_chain(0.3)
    sample_trajectories(P, [0, 1], 200, seed=0, n_traj=n_traj, keep_tokens=False)  # warm-up
    start = time.perf_counter()
    out = sample_trajectories(
        P, [0, 1], length, seed=1, n_traj=n_traj, keep_tokens=False, record_at=[length]
    )
    batched = time.perf_counter() - start
    assert out.counts.shape == (n_traj, 1, 2)
    start = time.perf_counter()
    for r in range(n_loop):  # the unbatched baseline: one trajectory per call
        sample_trajectories(P, [0, 1], length, seed=2 + r, n_traj=1, keep_tokens=False)
    per_traj = (time.perf_counter() - start) / n_loop
    looped = per_traj * n_traj
    return {
        "lemma53_n_traj": n_traj,
        "lemma53_length": length,
        "lemma53_sampling_s": round(batched, 3),
        "lemma53_tokens_per_s": round(n_traj * length / batched),
        "lemma53_looped_extrapolated_s": round(looped, 1),
        "lemma53_looped_measured_traj": n_loop,
        "lemma53_speedup_batched_vs_looped": round(looped / batched, 1),
    }


def _mle_problem(K: int, n: int, L: int) -> tuple:
    g = torch_generator(0)
    E = torch.eye(K, dtype=torch.float64)
    W_gt = project_onto_subspace(torch.randn(K, K, generator=g, dtype=torch.float64), E)
    X = torch.randint(0, K, (n, L), generator=g)
    y = sample_next(transition_from_weights(W_gt, E), X, seed=1)[:, 0]
    return prompt_data(X, y, K), E, W_gt


def _mle(K: int, n: int, L: int) -> dict:
    warm, E_w, _ = _mle_problem(K, 2000, L)
    fit_newton(warm, E_w, tol=1e-8)  # warm-up
    data, E, W_gt = _mle_problem(K, n, L)
    start = time.perf_counter()
    fit = fit_newton(data, E, tol=1e-8)
    newton = time.perf_counter() - start
    # GD from zero for the same wall-clock time: how far does it get?
    probe = fit_gd(data, E, steps=5)
    per_step = probe.seconds / 6  # 6 gradient evaluations (t = 0..5)
    steps = max(1, int(newton / per_step))
    gd = fit_gd(data, E, steps=steps)
    return {
        "mle_K": K,
        "mle_n": n,
        "mle_newton_s": round(newton, 3),
        "mle_newton_iterations": int(fit.iterations),
        "mle_newton_grad_norm": float(fit.grad_norm),
        "mle_newton_converged_below_1e-8": bool(fit.converged),
        "mle_error_sq_frobenius": float(((fit.W - W_gt) ** 2).sum()),
        "mle_gd_steps_in_same_time": steps,
        "mle_gd_grad_norm_in_same_time": float(gd.grad_norm),
        "mle_gd_s_per_step": round(per_step, 4),
    }


def run(quick: bool = False) -> dict:
    """Run the Part I benchmarks; returns a flat dict (units in the key names)."""
    threads = torch.get_num_threads()
    if quick:
        result = _sampling(n_traj=2000, length=2000, n_loop=2)
        result.update(_mle(K=10, n=20_000, L=12))
    else:
        result = _sampling(n_traj=10_000, length=10_000, n_loop=3)
        result.update(_mle(K=10, n=100_000, L=12))
    result["torch_threads"] = threads
    result["quick"] = quick
    return result


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
