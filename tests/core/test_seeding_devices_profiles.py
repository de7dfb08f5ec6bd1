"""Tests for seeding, device choice and the profile switch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ccmc_lite import (
    by_profile,
    current_profile,
    default_device,
    derive_seed,
    numpy_rng,
    resolve_device,
    seed_everything,
    torch_generator,
)


def test_derive_seed_is_deterministic_and_key_sensitive():
    assert derive_seed(0, 1) == derive_seed(0, 1)
    seeds = {derive_seed(0, r) for r in range(100)}
    assert len(seeds) == 100
    assert derive_seed(0, 1, 2) != derive_seed(0, 2, 1)
    assert 0 <= derive_seed(123) < 2**63


def test_derive_seed_rejects_bad_keys():
    with pytest.raises(ValueError, match=r"keys\[0\] must be >= 0"):
        derive_seed(0, -1)
    with pytest.raises(TypeError, match="seed must be an integer"):
        derive_seed(1.5)


def test_same_seed_same_numbers():
    a = torch.rand(5, generator=torch_generator(7))
    b = torch.rand(5, generator=torch_generator(7))
    assert torch.equal(a, b)
    assert np.array_equal(numpy_rng(3).random(4), numpy_rng(3).random(4))
    seed_everything(11)
    x = torch.rand(3)
    assert seed_everything(11) is None  # a chapter's cell ending with it shows no output
    assert torch.equal(x, torch.rand(3))


def test_default_device_is_cpu_without_cuda(monkeypatch):
    monkeypatch.delenv("CCMC_DEVICE", raising=False)
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert default_device().type == expected
    monkeypatch.setenv("CCMC_DEVICE", "cpu")
    assert default_device() == torch.device("cpu")


def test_resolve_device_errors():
    assert resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(ValueError, match="device must be"):
        resolve_device("tpu:0:x")
    with pytest.raises(TypeError, match="device must be a str"):
        resolve_device(3)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            resolve_device("cuda")


def test_profiles(monkeypatch):
    monkeypatch.delenv("CCMC_PROFILE", raising=False)
    assert current_profile() == "book"
    assert by_profile(book=1, paper=2) == 1
    monkeypatch.setenv("CCMC_PROFILE", "paper")
    assert current_profile() == "paper"
    assert by_profile(book=1, paper=2) == 2
    assert by_profile(book=1, paper=2, profile="book") == 1


def test_unknown_profile_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("CCMC_PROFILE", "papers")
    with pytest.raises(
        ValueError, match=r"CCMC_PROFILE must be one of \('book', 'paper'\); got 'papers'"
    ):
        current_profile()
    with pytest.raises(ValueError, match="profile must be one of"):
        by_profile(book=1, paper=2, profile="fast")
