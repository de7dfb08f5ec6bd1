"""The result cache (``tools/replay.py``): a replay is the real call, bit for bit."""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import ccmc_lite
from ccmc_lite import TrainConfig, ccmc, core, markov, ngram
from tools import replay
from tools.replay import RESULT_CACHE_ENV, fingerprint, replayable


@pytest.fixture(autouse=True, scope="module")
def installed():
    """The package's long computations replay here, as in the test session's kernels."""
    bound = replay.install()
    yield bound
    replay.uninstall()


def _train(T: int = 8, steps: int = 6):
    task = ngram.NGramTask(S=3, n=2, T=T, alpha=0.5)
    return ccmc_lite.train_runs(  # looked up at call time: the installed wrapper
        lambda: ngram.SimplifiedTransformer(3, T, 1),
        ngram.make_loss_fn(eps=1e-8),
        ngram.NGramStream(task, 8),
        n_runs=2,
        config=TrainConfig(steps=steps, lr=0.01, optimizer="adam", progress=False),
        seed=3,
    )


def test_a_replay_returns_the_same_result_and_leaves_the_same_random_state(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv(RESULT_CACHE_ENV, str(tmp_path))
    torch.manual_seed(1)
    first = _train()
    after_first = torch.rand(3)
    assert len(list(tmp_path.glob("train_runs-*.pt"))) == 1
    assert "replayed" not in capsys.readouterr().out
    torch.manual_seed(1)
    again = _train()
    after_again = torch.rand(3)
    assert "replayed from the result cache" in capsys.readouterr().out
    assert torch.equal(first.loss, again.loss)
    assert all(torch.equal(first.params[k], again.params[k]) for k in first.params)
    assert first.seconds == again.seconds  # the stored run's time, not the replay's
    assert torch.equal(after_first, after_again)
    # the replay is what an uncached run gives
    monkeypatch.delenv(RESULT_CACHE_ENV)
    torch.manual_seed(1)
    assert torch.equal(_train().loss, first.loss)


def test_other_inputs_are_a_miss_and_a_call_that_seeds_itself_ignores_the_global_state(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv(RESULT_CACHE_ENV, str(tmp_path))
    torch.manual_seed(1)
    first = _train(T=8)
    _train(T=9)  # a value the notebook's lambda reads from its closure
    _train(T=8, steps=7)  # a field of the config
    assert len(list(tmp_path.glob("train_runs-*.pt"))) == 3
    assert "replayed" not in capsys.readouterr().out
    torch.manual_seed(2)  # train_runs draws nothing from the global state: still a hit
    assert torch.equal(_train(T=8).loss, first.loss)
    assert "replayed" in capsys.readouterr().out


def test_part_one_simulations_and_fits_replay_and_a_figure_never_does(
    tmp_path, monkeypatch, capsys
):
    """Part I's long runs (trajectories, Newton fits) replay; draw_collapse samples afresh."""
    import matplotlib.pyplot as plt

    monkeypatch.setenv(RESULT_CACHE_ENV, str(tmp_path))
    P = ccmc.random_chain(3, seed=2)
    first = ccmc.sample_trajectories(P, [0, 1, 2], 200, seed=4, n_traj=3)
    data = ccmc.trajectory_data(first.tokens, 3, 3)
    fit = ccmc.fit_newton(data, torch.eye(3, dtype=torch.float64), max_iter=5)
    names = sorted(p.name.split("-")[0] for p in tmp_path.glob("*.pt"))
    assert names == ["fit_newton", "sample_trajectories"]
    assert "replayed" not in capsys.readouterr().out
    again = ccmc.sample_trajectories(P, [0, 1, 2], 200, seed=4, n_traj=3)
    refit = ccmc.fit_newton(data, torch.eye(3, dtype=torch.float64), max_iter=5)
    assert capsys.readouterr().out.count("replayed from the result cache") == 2
    assert torch.equal(first.tokens, again.tokens) and torch.equal(first.counts, again.counts)
    assert torch.equal(fit.W, refit.W) and torch.equal(fit.loss, refit.loss)
    other = ccmc.sample_trajectories(P, [0, 1, 2], 200, seed=5, n_traj=3)  # another seed
    assert "replayed" not in capsys.readouterr().out
    assert not torch.equal(first.tokens, other.tokens)
    # a figure's own short trajectory is neither stored nor replayed, even when it is the
    # very call a chapter made just before (the chapter's output must come from its own runs)
    ccmc.sample_trajectories(P, [0, 1, 2], 300, seed=0)
    stored = set(tmp_path.glob("*.pt"))
    plt.close(ccmc.draw_collapse(P, [0, 1, 2], 300, seed=0))
    assert "replayed" not in capsys.readouterr().out
    assert set(tmp_path.glob("*.pt")) == stored


def test_part_three_gradient_norms_replay_per_model(tmp_path, monkeypatch, capsys):
    """A gradient norm at a parameter point replays; another point's is computed."""
    from ccmc_lite import ngram

    monkeypatch.setenv(RESULT_CACHE_ENV, str(tmp_path))
    batch = ngram.sample_batch(ngram.NGramTask(S=5, n=3, T=16), 64, seed=1)

    def at(c):
        model = ngram.SimplifiedTransformer(5, 16, 2)
        ngram.load_parameters(model, ngram.theta_star(2, S=5, T=16, n_heads=2, c=c))
        return ngram.gradient_norm(model, batch.tokens, batch.target)

    first = at(4.0)
    assert "replayed" not in capsys.readouterr().out
    again = at(4.0)
    assert "replayed from the result cache" in capsys.readouterr().out
    assert again.estimate == first.estimate
    other = at(5.0)
    assert "replayed" not in capsys.readouterr().out and other.estimate != first.estimate


def test_a_call_that_draws_from_the_global_state_is_keyed_by_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(RESULT_CACHE_ENV, str(tmp_path))
    noisy = replayable(lambda n: (torch.rand(n), np.random.rand(), random.random()))  # noqa: NPY002
    torch.manual_seed(0)
    np.random.seed(0)  # noqa: NPY002
    random.seed(0)
    a = noisy(3)
    after = (torch.rand(1), np.random.rand(), random.random())  # noqa: NPY002
    torch.manual_seed(0)
    np.random.seed(0)  # noqa: NPY002
    random.seed(0)
    b = noisy(3)
    assert "replayed" in capsys.readouterr().out
    assert torch.equal(a[0], b[0]) and a[1:] == b[1:]
    again = (torch.rand(1), np.random.rand(), random.random())  # noqa: NPY002
    assert torch.equal(after[0], again[0]) and after[1:] == again[1:]
    torch.manual_seed(1)
    c = noisy(3)
    assert "replayed" not in capsys.readouterr().out
    assert not torch.equal(a[0], c[0])


def test_without_the_variable_nothing_is_read_or_written(tmp_path, monkeypatch):
    monkeypatch.delenv(RESULT_CACHE_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    _train()
    assert list(tmp_path.iterdir()) == []


def test_an_unidentifiable_input_runs_the_call_and_stores_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(RESULT_CACHE_ENV, str(tmp_path))

    class Opaque:  # a class defined outside the package, not a dataclass
        pass

    calls = []

    @replayable
    def double(x, extra=None):
        calls.append(x)
        return 2 * x

    assert double(3, extra=Opaque()) == 6
    assert double(3, extra=Opaque()) == 6
    assert calls == [3, 3] and list(tmp_path.iterdir()) == []
    assert double(3) == 6 and double(3) == 6
    assert calls == [3, 3, 3] and len(list(tmp_path.iterdir())) == 1


def test_fingerprint_identifies_functions_by_code_and_captured_values():
    n = 5
    f = lambda: n + 1  # noqa: E731
    g = lambda: n + 1  # noqa: E731 (same code, same global)
    h = lambda: n + 2  # noqa: E731
    assert fingerprint(f) == fingerprint(g) != fingerprint(h)

    def make(k):
        return lambda x: x * k

    assert fingerprint(make(2)) == fingerprint(make(2)) != fingerprint(make(3))
    assert fingerprint(ngram.make_loss_fn(eps=1e-8)) != fingerprint(ngram.make_loss_fn(eps=1e-6))

    def recursive(k):
        return 1 if k == 0 else recursive(k - 1)

    assert fingerprint(recursive) is not None  # a cycle through its globals


def test_fingerprint_of_package_objects_and_what_it_refuses():
    task = ngram.NGramTask(S=3, n=2, T=8, alpha=0.5)
    assert fingerprint(task) == fingerprint(ngram.NGramTask(S=3, n=2, T=8, alpha=0.5))
    assert fingerprint(task) != fingerprint(ngram.NGramTask(S=3, n=2, T=8, alpha=1.0))
    assert fingerprint(ngram.NGramStream(task, 8)) != fingerprint(ngram.NGramStream(task, 9))
    assert fingerprint(TrainConfig(steps=3)) != fingerprint(TrainConfig(steps=4))

    @dataclasses.dataclass
    class Local:
        x: int

    cycle: list = []
    cycle.append(cycle)
    assert fingerprint(cycle) is not None

    class LocalModel(torch.nn.Module):
        pass

    sparse = torch.eye(2).to_sparse()
    meta = torch.empty(2, device="meta")
    for refused in (Local(1), LocalModel(), torch.Generator(), np.array([None]), sparse, meta):
        assert fingerprint(refused) is None, refused
    assert fingerprint(random) is None  # a module outside the named ones
    assert fingerprint(torch, np, core) is not None


def test_fingerprint_of_a_model_is_its_type_settings_and_parameters():
    torch.manual_seed(0)
    a = markov.MarkovTransformer(K=2, d=3, N=4)
    torch.manual_seed(0)
    b = markov.MarkovTransformer(K=2, d=3, N=4)
    assert fingerprint(a) == fingerprint(b) is not None
    with torch.no_grad():
        b.pos[0, 0] += 1e-7
    assert fingerprint(a) != fingerprint(b)
    torch.manual_seed(0)
    assert fingerprint(a) != fingerprint(markov.MarkovTransformer(K=2, d=3, N=4, tied=False))
    assert fingerprint(torch.nn.Linear(2, 2)) is not None


def test_fingerprint_tells_apart_what_equality_of_values_would_merge():
    base = torch.zeros(3)
    assert fingerprint(base) != fingerprint(base.double())
    assert fingerprint(base) != fingerprint(base.reshape(1, 3))
    assert fingerprint(torch.tensor([0.0])) != fingerprint(torch.tensor([-0.0]))
    assert fingerprint(1) != fingerprint(1.0) != fingerprint(True)
    assert fingerprint((1, 2)) != fingerprint([1, 2])
    assert fingerprint({"a": 1, "b": 2}) == fingerprint({"b": 2, "a": 1})
    assert fingerprint(base.t()) == fingerprint(torch.zeros(3).t())
    z = torch.tensor([1 + 2j])
    assert fingerprint(z.conj()) == fingerprint(torch.tensor([1 - 2j])) != fingerprint(z)


@given(
    st.lists(st.floats(allow_nan=False, width=32), min_size=1, max_size=8),
    st.integers(0, 7),
    st.floats(allow_nan=False, width=32),
)
def test_fingerprint_changes_with_any_element_of_a_tensor(values, index, new):
    x = torch.tensor(values, dtype=torch.float32)
    y = x.clone()
    y[index % len(values)] = new
    same = torch.equal(x.view(torch.int32), y.view(torch.int32))
    assert (fingerprint(x) == fingerprint(y)) == same


def test_replayable_checks_its_argument():
    with pytest.raises(TypeError, match="fn"):
        replayable(3)


def test_a_store_that_fails_leaves_the_result_and_no_partial_file(tmp_path, monkeypatch):
    """E.g. a folder the user may read but not write (a class sharing an instructor's runs)."""
    monkeypatch.setenv(RESULT_CACHE_ENV, str(tmp_path))

    def refuse(*args, **kwargs):
        raise PermissionError("read-only folder")

    monkeypatch.setattr(torch, "save", refuse)
    assert replayable(lambda x: x + 1)(1) == 2
    assert list(tmp_path.iterdir()) == []


def test_install_binds_the_wrapper_wherever_the_function_is_reachable(installed):
    import ccmc_lite.markov.runs

    for where in ("ccmc_lite.train_runs", "ccmc_lite.core.train_runs",
                  "ccmc_lite.core.training.train_runs", "ccmc_lite.ccmc.sample_trajectories",
                  "ccmc_lite.ccmc.mle.fit_newton", "ccmc_lite.ngram.gradient_norm"):  # fmt: skip
        assert where in installed
    assert ccmc_lite.markov.runs.train_runs is ccmc_lite.train_runs  # one wrapper for all
    assert ccmc_lite.train_runs.__wrapped__.__module__ == "ccmc_lite.core.training"
    assert replay.install() == []  # a second call changes nothing


def test_uninstall_restores_the_package_as_it_ships():
    wrapper = ccmc_lite.train_runs
    try:
        restored = replay.uninstall()
        assert "ccmc_lite.train_runs" in restored
        assert ccmc_lite.train_runs is wrapper.__wrapped__
        assert not hasattr(ccmc_lite.train_runs, "__replays__")
    finally:
        replay.install()
