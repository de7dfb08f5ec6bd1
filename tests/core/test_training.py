"""Tests for the batched trainer: it must equal R separate ordinary training runs
(``tests/reference_training.py``)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
from reference_training import train_looped
from torch import nn

from ccmc_lite.core import TrainConfig, lr_schedule, over_runs, train_runs

TRAINERS = {True: train_runs, False: train_looped}  # batched, and the per-run reference

D_IN, N_DATA = 3, 32
# A fixed data set per run, so batched and looped training see identical batches.
X_ALL = torch.randn(8, N_DATA, D_IN, generator=torch.Generator().manual_seed(0))
Y_ALL = (X_ALL @ torch.tensor([1.0, -2.0, 0.5])).unsqueeze(-1)


class TiedMLP(nn.Module):
    """Small model with a tied weight (like weight tying a = e in Makkuva et al.)."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(D_IN, 4)
        self.hidden = nn.Linear(4, 4)
        self.out = nn.Linear(4, 1)
        self.register_buffer("scale", torch.tensor(1.0))

    def forward(self, x):
        h = torch.tanh(self.inp(x))
        h = h + torch.relu(self.hidden(h)) @ self.hidden.weight  # uses the weight twice
        return self.out(h) * self.scale


def batch_fn(step, runs, gen):
    idx = (torch.arange(8) + step) % N_DATA
    return X_ALL[runs][:, idx], Y_ALL[runs][:, idx]  # (R, 8, D_IN), (R, 8, 1)


def loss_fn(model, batch):
    x, y = batch
    return ((model(x) - y) ** 2).mean()


def eval_fn(model, step):
    return {"mse": ((model(X_ALL[0]) - Y_ALL[0]) ** 2).mean()}


CFG = TrainConfig(
    steps=25,
    lr=3e-2,
    optimizer="adamw",
    weight_decay=1e-2,
    schedule="cosine",
    warmup_steps=3,
    eval_every=10,
    checkpoint_steps=(0, 10),
    grad_clip=1.0,
    progress=False,
)


@pytest.fixture(scope="module")
def both():
    kw = dict(n_runs=4, config=CFG, seed=5, eval_fn=eval_fn)
    return train_runs(TiedMLP, loss_fn, batch_fn, **kw), train_looped(
        TiedMLP, loss_fn, batch_fn, **kw
    )


def test_batched_equals_looped(both):
    batched, looped = both
    torch.testing.assert_close(batched.loss, looped.loss, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(batched.grad_norm, looped.grad_norm, rtol=1e-4, atol=1e-5)
    for name in batched.params:
        torch.testing.assert_close(batched.params[name], looped.params[name], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(batched.evals["mse"], looped.evals["mse"], rtol=1e-4, atol=1e-5)
    for step in (0, 10):
        for name, value in batched.checkpoints[step].items():
            torch.testing.assert_close(value, looped.checkpoints[step][name])


def test_shapes_and_records(both):
    batched, looped = both
    assert looped.seconds > 0  # the benchmarks' per-run baseline times itself
    assert batched.loss.shape == (4, 25)
    assert batched.grad_norm.shape == (4, 25)
    assert batched.eval_steps == [0, 10, 20, 25]
    assert batched.evals["mse"].shape == (4, 4)
    assert sorted(batched.checkpoints) == [0, 10]
    assert batched.n_runs == 4
    assert set(batched.params) == {n for n, _ in TiedMLP().named_parameters()}
    assert batched.seconds > 0


def test_training_reduces_the_loss():
    result = train_runs(
        TiedMLP,
        loss_fn,
        batch_fn,
        n_runs=3,
        config=TrainConfig(steps=150, lr=3e-2, progress=False),
        seed=0,
        eval_fn=eval_fn,
    )
    first, last = result.evals["mse"][:, 0], result.evals["mse"][:, -1]
    assert (last < 0.2 * first).all(), (first, last)


def test_runs_are_independent_of_how_many_are_trained():
    kw = dict(config=CFG, seed=5)
    two = train_runs(TiedMLP, loss_fn, batch_fn, n_runs=2, **kw)
    four = train_runs(TiedMLP, loss_fn, batch_fn, n_runs=4, **kw)
    torch.testing.assert_close(two.loss, four.loss[:2], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("batched", [True, False])
def test_initialisation_is_the_runs_seed_alone_and_global_state_is_kept(batched):
    """Run r is make_model() under torch.manual_seed(derive_seed(seed, r, 0)), whatever the
    global generator's state; the caller's global state is what it was."""
    from ccmc_lite.core import derive_seed

    torch.manual_seed(123)
    cfg = TrainConfig(steps=1, lr=1e-2, checkpoint_steps=(0,), progress=False)
    kw = dict(n_runs=3, config=cfg, seed=4)
    state = torch.get_rng_state()
    result = TRAINERS[batched](TiedMLP, loss_fn, batch_fn, **kw)
    assert torch.equal(torch.get_rng_state(), state)
    torch.manual_seed(999)  # another global state: the same initialisations
    again = TRAINERS[batched](TiedMLP, loss_fn, batch_fn, **kw)
    for r in range(3):
        torch.manual_seed(derive_seed(4, r, 0))
        expected = dict(TiedMLP().named_parameters())
        for name, value in expected.items():
            assert torch.equal(result.params_at(0)[name][r], value), (r, name)
            assert torch.equal(again.params_at(0)[name][r], value), (r, name)


def test_same_seed_same_numbers_and_different_seed_differs():
    kw = dict(n_runs=2, config=TrainConfig(steps=5, lr=1e-2, progress=False))
    a = train_runs(TiedMLP, loss_fn, batch_fn, seed=1, **kw)
    b = train_runs(TiedMLP, loss_fn, batch_fn, seed=1, **kw)
    c = train_runs(TiedMLP, loss_fn, batch_fn, seed=2, **kw)
    assert torch.equal(a.loss, b.loss)
    assert not torch.equal(a.loss, c.loss)


def test_module_reconstructs_a_run(both):
    batched, _ = both
    model = batched.module(2)
    expected = batched.evals["mse"][2, -1]
    torch.testing.assert_close(eval_fn(model, 25)["mse"].detach(), expected)
    early = batched.module(1, step=0)
    torch.testing.assert_close(early.out.weight.detach(), batched.checkpoints[0]["out.weight"][1])
    with pytest.raises(ValueError, match="step must be one of the checkpoint steps"):
        batched.module(0, step=5)
    with pytest.raises(ValueError, match="run must be <= 3"):
        batched.module(4)


def test_generator_drives_random_batches_reproducibly():
    def random_batch(step, runs, gen):
        x = torch.randn(len(runs), 8, D_IN, generator=gen)
        return x, x.sum(-1, keepdim=True)

    kw = dict(n_runs=3, config=TrainConfig(steps=4, lr=1e-2, progress=False), seed=0)
    a = train_runs(TiedMLP, loss_fn, random_batch, **kw)
    b = train_runs(TiedMLP, loss_fn, random_batch, **kw)
    assert torch.equal(a.loss, b.loss)


def test_non_finite_loss_stops_with_step_and_setting():
    def poisoned(step, runs, gen):
        x, y = batch_fn(step, runs, gen)
        if step == 3:
            y = y.clone()
            y[-1] = float("nan")
        return x, y

    with pytest.raises(
        FloatingPointError, match=r"non-finite training loss at step 3.*toy.*lr=0\.01"
    ):
        train_runs(
            TiedMLP,
            loss_fn,
            poisoned,
            n_runs=2,
            config=TrainConfig(steps=6, lr=1e-2, label="toy", progress=False),
            seed=0,
        )


def test_progress_prints_text_lines(capsys):
    train_runs(
        TiedMLP,
        loss_fn,
        batch_fn,
        n_runs=2,
        config=TrainConfig(steps=10, lr=1e-2, progress_updates=2, label="demo"),
        seed=0,
    )
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2
    assert lines[-1].startswith("demo [####################] 100% step 10/10 | loss ")


def test_lr_schedule_shapes():
    cos = lr_schedule(TrainConfig(steps=100, schedule="cosine", min_lr_ratio=0.1))
    assert cos(0) == pytest.approx(1.0)
    assert cos(50) == pytest.approx(0.1 + 0.9 * 0.5)
    assert cos(100) == pytest.approx(0.1)
    warm = lr_schedule(TrainConfig(steps=100, warmup_steps=10))
    assert warm(0) == pytest.approx(0.1)
    assert warm(9) == pytest.approx(1.0)
    assert warm(50) == 1.0
    mid = lr_schedule(TrainConfig(steps=20, schedule="cosine", warmup_steps=10))
    assert mid(15) == pytest.approx(0.5 * (1 + math.cos(math.pi * 0.5)))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(steps=0), "steps must be >= 1"),
        (dict(steps=5, lr=0.0), "lr must lie in"),
        (dict(steps=5, optimizer="rmsprop"), "optimizer must be one of"),
        (dict(steps=5, schedule="linear"), "schedule must be one of"),
        (dict(steps=5, betas=(0.9,)), "betas must be a pair"),
        (dict(steps=5, betas=(0.9, 1.0)), r"betas\[1\] must lie in"),
        (dict(steps=5, warmup_steps=6), "warmup_steps must be <= 5"),
        (dict(steps=5, grad_clip=0.0), "grad_clip must lie in"),
        (dict(steps=5, checkpoint_steps=(7,)), "checkpoint_steps entry must be <= 5"),
    ],
)
def test_train_config_rejects_bad_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TrainConfig(**kwargs)


def test_train_runs_rejects_bad_arguments():
    cfg = TrainConfig(steps=2)
    with pytest.raises(ValueError, match="n_runs must be >= 1"):
        train_runs(TiedMLP, loss_fn, batch_fn, n_runs=0, config=cfg, seed=0)
    with pytest.raises(TypeError, match="config must be a TrainConfig"):
        train_runs(TiedMLP, loss_fn, batch_fn, n_runs=1, config={"steps": 2}, seed=0)
    with pytest.raises(TypeError, match="loss_fn must be callable"):
        train_runs(TiedMLP, None, batch_fn, n_runs=1, config=cfg, seed=0)
    with pytest.raises(TypeError, match=r"make_model must return a torch\.nn\.Module"):
        train_runs(lambda: 3, loss_fn, batch_fn, n_runs=1, config=cfg, seed=0)
    with pytest.raises(ValueError, match="leading dimension n_runs=2"):
        train_runs(
            TiedMLP,
            loss_fn,
            lambda s, r, g: batch_fn(s, r[:1], g),
            n_runs=2,
            config=cfg,
            seed=0,
        )


@pytest.mark.parametrize("optimizer", ["adamw", "adam", "sgd"])
def test_lr_scale_trains_each_run_at_its_own_rate_in_one_program(optimizer, both):
    """Run r of one program with ``lr_scale`` is the ordinary run at ``lr_scale[r] * lr``."""
    cfg = CFG if optimizer == "adamw" else TrainConfig(
        steps=25, lr=1e-2, optimizer=optimizer, schedule="cosine", warmup_steps=3,
        weight_decay=1e-2, checkpoint_steps=(0,), progress=False,
    )  # fmt: skip
    scales = (1.0, 0.25, 3.0, 1.0)
    kw = dict(n_runs=4, seed=5)
    batched = train_runs(TiedMLP, loss_fn, batch_fn, config=replace(cfg, lr_scale=scales), **kw)
    assert batched.config.lr_scale == scales
    for r, s in enumerate(scales):
        alone = train_looped(TiedMLP, loss_fn, batch_fn, config=replace(cfg, lr=cfg.lr * s), **kw)
        for name, value in batched.params.items():
            torch.testing.assert_close(value[r], alone.params[name][r], rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(batched.loss[r], alone.loss[r], rtol=1e-4, atol=1e-5)
    if optimizer == "adamw":  # factor 1 leaves a run's numbers exactly as they were
        plain = both[0]
        for r in (0, 3):
            assert torch.equal(batched.loss[r], plain.loss[r])
            for name, value in batched.params.items():
                assert torch.equal(value[r], plain.params[name][r]), name
    # the runs really moved at different rates: distance travelled from the initialisation
    start = batched.params_at(0)
    moved = sum((batched.params[n] - start[n]).flatten(1).norm(dim=1) for n in start)
    assert moved[2] > moved[0] > moved[1]


def test_lr_scale_is_per_run_in_the_loop_too():
    kw = dict(n_runs=2, seed=5)
    looped = train_looped(TiedMLP, loss_fn, batch_fn, config=replace(CFG, lr_scale=(1, 2)), **kw)
    fast = train_looped(TiedMLP, loss_fn, batch_fn, config=replace(CFG, lr=2 * CFG.lr), **kw)
    plain = train_looped(TiedMLP, loss_fn, batch_fn, config=CFG, **kw)
    assert torch.equal(looped.loss[0], plain.loss[0])
    assert torch.equal(looped.loss[1], fast.loss[1])
    assert not torch.equal(looped.loss[1], plain.loss[1])


@pytest.mark.parametrize(
    ("lr_scale", "error", "match"),
    [
        ([1.0, 2.0], ValueError, r"config\.lr_scale must hold one factor per run \(3\); got 2"),
        ([1.0, 0.0, 1.0], ValueError, r"lr_scale\[1\] must lie in \(0\.0, inf\]; got 0\.0"),
        ([1.0, -1.0, 1.0], ValueError, r"lr_scale\[1\] must lie in"),
        ([1.0, float("nan"), 1.0], ValueError, r"lr_scale\[1\] must be finite"),
        ([1.0, "2", 1.0], TypeError, r"lr_scale\[1\] must be a real number"),
        ("123", TypeError, r"lr_scale must be a sequence of numbers"),
        (2.0, TypeError, r"lr_scale must be a sequence of numbers"),
        (torch.ones(3, 1), ValueError, r"lr_scale must be one-dimensional; got shape \(3, 1\)"),
    ],
)
def test_lr_scale_rejects_bad_factors(lr_scale, error, match):
    with pytest.raises(error, match=match):
        train_runs(TiedMLP, loss_fn, batch_fn, n_runs=3, config=replace(CFG, lr_scale=lr_scale),
                   seed=0)  # fmt: skip


@pytest.mark.parametrize("runs_per_pass", [2, 3, 4, 6, None])
def test_passes_split_a_step_without_changing_a_bit(runs_per_pass):
    """runs_per_pass: the runs of a step go through forward and backward a few at a time;
    each run's gradient is the same sum, so every number equals the one-pass program's."""

    def random_batch(step, runs, gen):
        x = torch.randn(len(runs), 8, D_IN, generator=gen)
        return x, x.sum(-1, keepdim=True)

    cfg = replace(CFG, lr_scale=(1.0, 2.0, 0.5, 1.0, 1.5, 0.7, 1.0), checkpoint_steps=(1,))
    whole = train_runs(TiedMLP, loss_fn, random_batch, n_runs=7, config=cfg, seed=5,
                       eval_fn=lambda m, step: {"out": m(torch.ones(2, D_IN)).sum()})  # fmt: skip
    split = train_runs(
        TiedMLP, loss_fn, random_batch, n_runs=7, seed=5,
        config=replace(cfg, runs_per_pass=runs_per_pass),
        eval_fn=lambda m, step: {"out": m(torch.ones(2, D_IN)).sum()},
    )  # fmt: skip
    assert torch.equal(split.loss, whole.loss) and torch.equal(split.grad_norm, whole.grad_norm)
    for name, value in whole.params.items():
        assert torch.equal(split.params[name], value), name
        assert torch.equal(split.checkpoints[1][name], whole.checkpoints[1][name]), name
    assert torch.equal(split.evals["out"], whole.evals["out"])


@pytest.mark.parametrize(
    ("runs_per_pass", "n_runs", "sizes"),
    [(2, 5, [2, 3]), (3, 7, [3, 4]), (1, 3, [3]), (4, 4, [4]), (8, 3, [3]), (1, 1, [1])],
)
def test_passes_never_leave_one_run_alone(runs_per_pass, n_runs, sizes):
    """A pass of one run takes other kernels than a pass of several (other rounding), so
    the split never makes one, unless the program has a single run."""
    from ccmc_lite.core.training import _passes

    got = _passes(runs_per_pass, 3, n_runs, torch.device("cpu"), TiedMLP())
    assert [s.stop - s.start for s in got] == sizes
    assert got[0].start == 0 and got[-1].stop == n_runs


def test_default_passes_hold_the_attention_scores_of_a_cache_budget():
    """None: as many runs per pass as keep 4 * 64 bytes per token of a run's batch within
    PASS_BYTES (32 MiB): at the paper's Part II batch (16 x 1025 tokens), 7 runs."""
    from ccmc_lite.core.training import PASS_BYTES, _passes

    got = _passes(None, 16 * 1025, 81, torch.device("cpu"), TiedMLP())
    assert PASS_BYTES // (4 * 64 * 16 * 1025) == 7
    assert [s.stop - s.start for s in got] == [7] * 11 + [4]
    small = _passes(None, 8 * 33, 81, torch.device("cpu"), TiedMLP())
    assert small == [slice(0, 81)]  # short sequences: every run in one pass
    dropout = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.1))
    assert _passes(None, 16 * 1025, 81, torch.device("cpu"), dropout) == [slice(0, 81)]


def test_shards_start_where_the_whole_sweep_starts():
    """first_run = offset: a shard initialises its runs as one call of all runs would."""
    whole = train_runs(TiedMLP, loss_fn, batch_fn, n_runs=4, config=CFG, seed=5)
    shard = train_runs(
        TiedMLP, loss_fn, batch_fn, n_runs=2, config=replace(CFG, first_run=2), seed=5
    )
    for name, value in whole.params_at(0).items():
        assert torch.equal(shard.params_at(0)[name], value[2:]), name
    # batch_fn sees global run indices, so run 2 of the shard trains on run 2's data
    seen = []
    train_runs(
        TiedMLP,
        loss_fn,
        lambda step, runs, gen: seen.append(runs.tolist()) or batch_fn(step, runs, gen),
        n_runs=2,
        config=TrainConfig(steps=1, first_run=2, progress=False),
        seed=5,
    )
    assert seen == [[2, 3]]
    with pytest.raises(ValueError, match="first_run must be >= 0"):
        replace(CFG, first_run=-1)


def test_map_runs_evaluates_every_run_like_its_own_module(both):
    result = both[0]
    x = X_ALL[:4]  # (R, N_DATA, D_IN): one input set per run
    out = result.map_runs(lambda model, xs: model(xs), x)  # (R, N_DATA, 1)
    for r in range(result.n_runs):
        torch.testing.assert_close(out[r], result.module(r)(x[r]).detach())
    at10 = result.map_runs(lambda model, xs: model(xs), x, step=10)
    torch.testing.assert_close(at10[1], result.module(1, step=10)(x[1]).detach())
    with pytest.raises(ValueError, match="step must be one of the checkpoint steps"):
        result.map_runs(lambda model, xs: model(xs), x, step=3)
    with pytest.raises(TypeError, match=r"template must be a torch\.nn\.Module"):
        over_runs(lambda: None, loss_fn)
    with pytest.raises(TypeError, match="fn must be callable"):
        over_runs(TiedMLP(), 3)


def test_randomness_inside_a_model_is_seeded_and_the_global_state_restored():
    """Dropout draws from torch's global generator: seeded by the training seed, so the same
    seed gives the same numbers whatever the caller did before, and left as it was."""

    class Dropped(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(4, 1)
            self.drop = nn.Dropout(0.5)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.lin(self.drop(x))

    def batch(step, runs, g):
        return torch.randn(len(runs), 8, 4, generator=g)

    def loss(m, b):
        return (m(b) ** 2).mean()

    cfg = TrainConfig(steps=3, lr=1e-2, progress=False)
    for batched in (True, False):
        losses = []
        for disturb in (1, 7):
            torch.randn(disturb)  # a different global state before each call
            before = torch.get_rng_state().clone()
            res = TRAINERS[batched](Dropped, loss, batch, n_runs=2, config=cfg, seed=5)
            assert torch.equal(before, torch.get_rng_state())
            losses.append(res.loss)
        assert torch.equal(losses[0], losses[1]), batched
