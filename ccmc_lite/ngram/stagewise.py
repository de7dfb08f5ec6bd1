"""The stage-wise training experiment of Varre, Yüce & Flammarion 2025, Sec. 5 and App. I.

Glue between the in-context n-gram data (:mod:`ccmc_lite.ngram`), the models
(:mod:`ccmc_lite.ngram.models`) and the book's batched trainer
(:func:`ccmc_lite.core.train_runs`): a data stream usable as ``batch_fn`` for ``R``
runs at once (each run with its own prior concentration α and sequence length ``T`` if
wanted, so that seeds *and* sweeps train as one program), the training loss, the test-loss
``eval_fn``, and the k-gram reference levels drawn as dashed lines in Figs. 1 and 3a.

Paper setting (Sec. 5): trigram (``n = 3``), ``S = 5``, ``T = 32``, Dirichlet ``α = 0.5``,
two first-layer heads, ``d = 5`` one-hot embeddings, Adam with constant learning rate
0.01, batch 128, ``2^14`` steps, test loss on ``2^16`` sequences.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from ..core.devices import resolve_device
from ..core.validation import (
    DEFAULT_LIMITS,
    as_tensor,
    check_float,
    check_instance,
    check_int,
    check_prob_vector,
    check_size,
)
from .data import NGramTask, log_uniform, sample_urn
from .estimators import estimator_losses
from .landscape import next_token_loss

__all__ = [
    "NGramStream",
    "kgram_levels",
    "make_eval_fn",
    "make_loss_fn",
    "make_test_set",
    "plot_attention_maps",
]


class NGramStream:
    """A ``batch_fn`` for :func:`ccmc_lite.core.train_runs` that draws fresh sequences.

    Each call returns, for the runs in ``runs``, ``(tokens, target)`` of shapes ``(R, B, T)``
    and ``(R, B, S)`` (plus ``query_pos`` ``(R, B)`` when runs have different lengths), ``B =
    batch_size``, drawn by the exact fast sampler :func:`ccmc_lite.ngram.sample_urn` from
    ``task`` (``start="uniform"``). ``alpha``: one prior concentration per run (α-sweeps);
    ``lengths``: one sequence length per run (T-sweeps: sequences of the largest length, run
    ``r`` queried at ``lengths[r] - 1``, which the causal model makes exactly training on that
    length). The sampler draws ``chunk`` steps at a time; a new chunk starts at every multiple
    of ``chunk`` or when the generator or the set of runs changes, so the same generator state
    always gives the same batches.
    """

    def __init__(
        self,
        task: NGramTask,
        batch_size: int,
        *,
        alpha: Sequence[float] | None = None,
        lengths: Sequence[int] | None = None,
        chunk: int = 32,
    ) -> None:
        if not isinstance(task, NGramTask):
            raise TypeError(f"task must be an NGramTask; got {type(task).__name__}")
        self.task = task
        self.batch_size = check_size("batch_size", batch_size, minimum=1)
        self.chunk = check_int("chunk", chunk, minimum=1)
        self.alpha = None
        if alpha is not None:
            self.alpha = as_tensor("alpha", alpha, dtype=torch.float32, ndim=1)
            for a in self.alpha.tolist():
                check_float("alpha entry", a, minimum=0.0, open_lower=True)
        self.lengths = None
        if lengths is not None:
            self.lengths = as_tensor("lengths", lengths, dtype=torch.long, ndim=1)
            for L in self.lengths.tolist():
                check_int("lengths entry", L, minimum=task.n, maximum=task.T)
        self._key: tuple | None = None
        self._base = 0
        self._data: tuple[torch.Tensor, ...] = ()

    def _per_run(self, values: torch.Tensor | None, runs: torch.Tensor) -> torch.Tensor | None:
        if values is None:
            return None
        if int(runs.max()) >= values.shape[0]:
            raise ValueError(
                f"the stream has settings for {values.shape[0]} runs; got run {int(runs.max())}"
            )
        return values[runs]

    def __call__(
        self, step: int, runs: torch.Tensor, generator: torch.Generator
    ) -> tuple[torch.Tensor, ...]:
        key = (id(generator), tuple(runs.tolist()))
        if step % self.chunk == 0 or key != self._key or not (0 <= step - self._base < self.chunk):
            R, B, C = len(runs), self.batch_size, self.chunk
            alpha = self._per_run(self.alpha, runs)
            lengths = self._per_run(self.lengths, runs)
            a = None if alpha is None else alpha.reshape(R, 1, 1)
            q = None if lengths is None else (lengths - 1).reshape(R, 1, 1)
            tokens, target = sample_urn(
                self.task, (R, C, B), generator=generator, alpha=a, query_pos=q
            )
            data = [tokens, target]
            if q is not None:
                data.append(q.expand(R, C, B).clone())
            self._data, self._key, self._base = tuple(data), key, step
        i = step - self._base
        return tuple(t[:, i] for t in self._data)


def make_loss_fn(eps: float = 1e-8) -> Callable:
    """``loss_fn(model, batch)``: batch mean of :func:`~ccmc_lite.ngram.next_token_loss`.

    ``batch`` is ``(tokens, target)`` or ``(tokens, target, query_pos)``.
    """
    eps = check_float("eps", eps, minimum=0.0, open_lower=True)

    def loss_fn(model: Callable[..., Any], batch: Sequence[torch.Tensor]) -> torch.Tensor:
        if len(batch) == 3:
            tokens, target, query_pos = batch
            probs = model(tokens, query_pos)
        else:
            tokens, target = batch
            probs = model(tokens)
        return next_token_loss(probs, target, eps=eps)

    return loss_fn


def make_test_set(task: NGramTask, size: int, *, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A fixed test set: ``size`` sequences and the true law of their next token."""
    size = check_size("size", size, minimum=1)
    tokens, target = sample_urn(task, (size,), seed=seed)
    return tokens, target


def make_eval_fn(
    tokens: torch.Tensor,
    target: torch.Tensor,
    *,
    eps: float = 1e-8,
    chunk: int = 8192,
    device: torch.device | str | None = None,
) -> Callable:
    """``eval_fn(model, step)`` returning ``{"test_loss": ...}`` on a fixed test set.

    The test set is shared by all runs (it is captured, not batched, under ``vmap``), so it
    must live where the models train: ``device`` (e.g. ``"cuda"``, as passed to
    :func:`~ccmc_lite.core.train_runs`) moves it there once; ``None`` leaves it where it is.
    """
    eps = check_float("eps", eps, minimum=0.0, open_lower=True)
    chunk = check_int("chunk", chunk, minimum=1)
    tokens = as_tensor("tokens", tokens, dtype=torch.long, ndim=2)
    check_instance("target", target, torch.Tensor)
    check_prob_vector("target", target, atol=1e-4)
    if target.ndim != 2 or target.shape[0] != tokens.shape[0]:
        raise ValueError(
            f"target must have shape ({tokens.shape[0]}, S); got {tuple(target.shape)}"
        )
    if device is not None:
        dev = resolve_device(device)
        tokens, target = tokens.to(dev), target.to(dev)
    N = tokens.shape[0]

    def eval_fn(model: Callable[..., Any], step: int) -> dict[str, torch.Tensor | float]:
        total: torch.Tensor | float = 0.0
        for s in range(0, N, chunk):
            probs = model(tokens[s : s + chunk])
            total = (
                total
                + next_token_loss(probs, target[s : s + chunk], eps=eps, reduction="none").sum()
            )
        return {"test_loss": total / N}

    return eval_fn


def kgram_levels(
    tokens: torch.Tensor,
    target: torch.Tensor,
    S: int,
    ks: Sequence[int],
    *,
    smoothing: float,
) -> dict[str, float]:
    """Reference levels: the uniform predictor and the add-``β`` k-gram estimators.

    Returns ``{"uniform": log S, "1-gram": ..., "2-gram": ..., ...}`` in nats on the given
    test set (the dashed lines of Varre et al. 2025, Figs. 1 and 3a).
    """
    S = check_size("S", S, minimum=2, limit=DEFAULT_LIMITS["vocab"])
    y = check_prob_vector("target", target, atol=1e-4)
    losses = estimator_losses(tokens, y, S, ks, smoothing=smoothing)
    return {"uniform": log_uniform(S), **{f"{k}-gram": loss for k, loss in losses.items()}}


def plot_attention_maps(
    axes: Sequence,
    att: torch.Tensor,
    *,
    title: str = "",
    last: int | None = 12,
) -> None:
    """Draw the attention map of each head (Varre et al. 2025, Fig. 3b) on ``axes``.

    ``att``: ``(H, T, T)`` attention weights (rows: queries, columns: keys). ``last`` shows
    only the last ``last`` positions, where the diagonal structure is easiest to read.
    """
    from ..teaching.plotting import heatmap

    if not isinstance(axes, Sequence | np.ndarray) or isinstance(axes, str):
        raise TypeError(f"axes must be a sequence of matplotlib Axes; got {type(axes).__name__}")
    att = as_tensor("att", att, dtype=torch.float64, ndim=3)
    H, T = att.shape[0], att.shape[-1]
    if len(axes) != H:
        raise ValueError(f"axes must have one entry per head ({H}); got {len(axes)}")
    lo = 0 if last is None else max(T - check_size("last", last, minimum=1), 0)
    ticks = list(range(lo, T))
    for h, ax in enumerate(axes):
        heatmap(
            ax,
            att[h, lo:, lo:],
            vmin=0.0,
            vmax=1.0,
            colorbar=(h == H - 1),
            xlabels=[t if (t - lo) % 3 == 0 else "" for t in ticks],
            ylabels=[t if (t - lo) % 3 == 0 else "" for t in ticks],
        )
        ax.set_title(f"{title}head {h + 1}".strip(), fontsize=9)
        ax.set_xlabel("key position")
        if h == 0:
            ax.set_ylabel("query position")
