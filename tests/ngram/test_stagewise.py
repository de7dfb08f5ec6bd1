"""Tests for ccmc_lite.ngram.stagewise.

The data, loss and evaluation of Varre et al. 2025, Sec. 5.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from ccmc_lite.core import TrainConfig, train_runs
from ccmc_lite.ngram import (
    NGramStream,
    NGramTask,
    SimplifiedTransformer,
    kgram_levels,
    make_eval_fn,
    make_loss_fn,
    make_test_set,
)


def test_stream_shapes_and_reproducibility():
    task = NGramTask(S=4, n=3, T=10)
    stream = NGramStream(task, 6, chunk=4)
    g1 = torch.Generator().manual_seed(0)
    first = [stream(s, torch.arange(3), g1) for s in range(6)]
    assert first[0][0].shape == (3, 6, 10) and first[0][1].shape == (3, 6, 4)
    g2 = torch.Generator().manual_seed(0)
    stream2 = NGramStream(task, 6, chunk=4)
    again = [stream2(s, torch.arange(3), g2) for s in range(6)]
    for a, b in zip(first, again, strict=False):
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    # consecutive steps get different batches
    assert not torch.equal(first[0][0], first[1][0])


def test_stream_per_run_alpha_and_lengths():
    task = NGramTask(S=3, n=3, T=12)
    stream = NGramStream(task, 5, alpha=[0.5, 2.0], lengths=[6, 12])
    tokens, _target, qpos = stream(0, torch.arange(2), torch.Generator().manual_seed(1))
    assert tokens.shape == (2, 5, 12) and qpos.tolist() == [[5] * 5, [11] * 5]
    with pytest.raises(ValueError, match="lengths"):
        NGramStream(task, 5, lengths=[2])
    with pytest.raises(ValueError, match="alpha"):
        NGramStream(task, 5, alpha=[0.0])
    with pytest.raises(ValueError, match="runs"):
        NGramStream(task, 5, alpha=[1.0])(0, torch.arange(2), torch.Generator())


def test_levels_loss_and_eval():
    task = NGramTask(S=3, n=2, T=16, alpha=1.0)
    tx, ty = make_test_set(task, 2000, seed=0)
    levels = kgram_levels(tx, ty, 3, (1, 2), smoothing=1.0)
    assert list(levels) == ["uniform", "1-gram", "2-gram"]
    assert levels["uniform"] == pytest.approx(math.log(3))
    assert levels["2-gram"] < levels["uniform"]
    # the add-1 unigram level by hand: (count of each token + 1) / (T + S) in each sequence
    counts = torch.nn.functional.one_hot(tx, 3).sum(1).double()  # (B, S)
    unigram = (counts + 1) / (counts.sum(1, keepdim=True) + 3)
    by_hand = -(ty.double() * unigram.log()).sum(1).mean()
    assert levels["1-gram"] == pytest.approx(float(by_hand), rel=1e-6)
    m = SimplifiedTransformer(3, 16, 1)
    with torch.no_grad():
        ev = make_eval_fn(tx, ty, chunk=700)(m, 0)["test_loss"]
        direct = make_loss_fn()(m, (tx, ty))
    assert float(ev) == pytest.approx(float(direct), rel=1e-5)
    # the captured test set moves to the models' device once; None leaves it where it is
    with torch.no_grad():
        on_cpu = make_eval_fn(tx, ty, chunk=700, device="cpu")(m, 0)["test_loss"]
    assert float(on_cpu) == float(ev)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            make_eval_fn(tx, ty, device="cuda")
    with pytest.raises(TypeError, match=r"device must be a str or torch\.device"):
        make_eval_fn(tx, ty, device=0)


def test_short_batched_training_run():
    task = NGramTask(S=3, n=3, T=8, alpha=1.0)
    tx, ty = make_test_set(task, 256, seed=1)
    cfg = TrainConfig(steps=20, lr=0.01, optimizer="adam", eval_every=10)
    res = train_runs(
        lambda: SimplifiedTransformer(3, 8, 2),
        make_loss_fn(),
        NGramStream(task, 16, alpha=[0.5, 1.0], lengths=[6, 8]),
        n_runs=2,
        config=dataclasses.replace(cfg, progress=False),
        seed=0,
        eval_fn=make_eval_fn(tx, ty),
    )
    assert res.loss.shape == (2, 20) and bool(torch.isfinite(res.loss).all())
    assert res.evals["test_loss"].shape == (2, 3)


def test_attention_maps_are_plotted_with_labelled_axes():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ccmc_lite.ngram import first_layer_attention, plot_attention_maps

    fig, axes = plt.subplots(1, 2)
    plot_attention_maps(axes, first_layer_attention(torch.zeros(2, 6, 6)), last=4)
    assert axes[0].get_xlabel() == "key position"
    with pytest.raises(ValueError, match="axes"):
        plot_attention_maps(axes[:1], torch.zeros(2, 6, 6))
    plt.close(fig)


def test_the_part3_trainer_splits_a_step_into_passes_without_changing_the_sums():
    """Six runs of the simplified transformer at T = 64, batch 128 (the paper's plateau
    sweep): passes of 2, 3 or the default give the one-pass numbers. Each run's gradient
    is the same sum; only the last bits may differ, where the size of a pass selects another
    BLAS kernel (passes of 3 on an AMD EPYC, AVX2: V1 differs by about 1e-8 after 3 steps),
    so a lost or doubled pass would show and rounding does not."""
    task = NGramTask(S=5, n=3, T=64, alpha=1.0)

    def train(runs_per_pass):
        cfg = TrainConfig(steps=3, lr=1e-2, optimizer="adam", progress=False,
                          runs_per_pass=runs_per_pass)  # fmt: skip
        return train_runs(lambda: SimplifiedTransformer(5, 64, 2), make_loss_fn(eps=1e-8),
                          NGramStream(task, 128), n_runs=6, config=cfg, seed=1)  # fmt: skip

    whole = train(6)
    for runs_per_pass in (2, 3, None):
        split = train(runs_per_pass)
        torch.testing.assert_close(split.loss, whole.loss, rtol=1e-6, atol=0.0)
        for name, value in whole.params.items():
            torch.testing.assert_close(split.params[name], value, rtol=1e-6, atol=1e-7)
