"""Divergence is never silent: training and fitting stop with a named error."""

from __future__ import annotations

import math

import pytest
import torch

from ccmc_lite import TrainConfig, ccmc, markov, train_runs
from ccmc_lite.core import DivergenceError


def _linear() -> torch.nn.Module:
    return torch.nn.Linear(2, 1)


def _loss(model, batch: torch.Tensor) -> torch.Tensor:
    return model(batch).pow(2).mean()


def _batch(step: int, runs: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    return torch.randn(len(runs), 8, 2, generator=gen)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_huge_learning_rate_stops_with_divergence_error(optimizer: str) -> None:
    config = TrainConfig(steps=30, lr=1e30, optimizer=optimizer, progress=False)
    with pytest.raises(DivergenceError, match=r"step \d+ in run\(s\) \[") as info:
        train_runs(_linear, _loss, _batch, n_runs=2, config=config, seed=0)
    assert "lr=1e+30" in str(info.value)
    assert isinstance(info.value, FloatingPointError) and isinstance(info.value, ValueError)


def test_non_finite_parameters_after_the_last_step_are_caught() -> None:
    # one SGD step at a huge rate: the loss before the update is finite, the weights are not
    config = TrainConfig(steps=1, lr=1e38, optimizer="sgd", max_loss_rise=None, progress=False)

    def batch(step, runs, gen):
        return torch.full((len(runs), 8, 2), 1e10)

    with pytest.raises(DivergenceError, match="non-finite parameter"):
        train_runs(_linear, _loss, batch, n_runs=2, config=config, seed=0)


def test_loss_rise_is_flagged_and_can_be_switched_off() -> None:
    def loss(model, batch):  # a loss that grows with the step, parameters stay finite
        return model(batch).pow(2).mean() * 0 + batch.abs().mean()

    def batch(step, runs, gen):
        return torch.full((len(runs), 4, 2), float(1 + 1000 * step))

    config = TrainConfig(steps=3, lr=1e-3, max_loss_rise=10.0, progress=False)
    with pytest.raises(DivergenceError, match=r"max_loss_rise=10\.0"):
        train_runs(_linear, loss, batch, n_runs=1, config=config, seed=0)
    quiet = TrainConfig(steps=3, lr=1e-3, max_loss_rise=None, progress=False)
    res = train_runs(_linear, loss, batch, n_runs=1, config=quiet, seed=0)
    assert torch.isfinite(res.loss).all()


def test_ordinary_training_is_unaffected() -> None:
    config = TrainConfig(steps=5, lr=1e-2, optimizer="adam", progress=False)
    res = train_runs(_linear, _loss, _batch, n_runs=2, config=config, seed=0)
    assert torch.isfinite(res.loss).all()


@pytest.fixture(scope="module")
def population():
    P = markov.random_kernel(3, 0)
    prompts = [[0, 1, 2], [1, 2, 0], [2, 0, 1], [0, 2, 1], [1, 0, 2], [2, 1, 0, 0]]
    return ccmc.population_data(P, prompts), ccmc.random_embeddings(3, 3, seed=0)


def test_fit_gd_with_a_huge_step_size_raises(population) -> None:
    data, E = population
    with pytest.raises(DivergenceError, match=r"fit_gd diverged at step \d+"):
        ccmc.fit_gd(data, E, steps=20, lr=1e300)
    fit = ccmc.fit_gd(data, E, steps=20)  # the default 1/L step converges
    assert math.isfinite(float(fit.loss))


def test_fit_newton_converges_without_divergence(population) -> None:
    data, E = population
    assert math.isfinite(float(ccmc.fit_newton(data, E).loss))


def test_gd_with_trainer_huge_rate_raises(population) -> None:
    data, E = population
    with pytest.raises(DivergenceError):
        ccmc.gd_with_trainer(data, E, steps=20, lr=1e300)
