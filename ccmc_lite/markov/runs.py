"""Training sweeps on Markov data: many runs, many kernels, one batched program.

Makkuva et al. (2024) average every curve over several runs (Fig. 3: five runs; Fig. 4: five
runs per ``(p, q)`` cell). Here every run ``r`` has its own kernel ``P_r`` (so a whole
``(p, q)`` grid times seeds is one call) and all runs train together through
:func:`ccmc_lite.core.train_runs`. Parameters are checkpointed during training and
evaluated afterwards, also vmapped over runs, on fixed test sequences drawn from each run's
own chain, with the low-variance loss :func:`ccmc_lite.markov.kernel_loss`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from matplotlib.axes import Axes

from ..core.batched import TrainResult
from ..core.chains import entropy_rate, stationary_distribution, unigram_entropy
from ..core.seeding import derive_seed, torch_generator
from ..core.train_config import TrainConfig
from ..core.training import train_runs
from ..core.validation import (
    as_tensor,
    check_float,
    check_instance,
    check_int,
    check_model_tokens,
    check_prob_vector,
    check_seed,
    check_size,
    check_tokens,
)
from .kernels import check_kernel, sample_chains
from .model import (
    MarkovTransformer,
    check_model_options,
    kernel_loss,
    next_token_loss,
)

__all__ = [
    "MarkovRuns",
    "attention_ratio",
    "markov_config",
    "plot_pq_grid",
    "threshold_bracket",
    "train_markov",
    "unigram_gap",
    "zero_position_probs",
]


def markov_config(
    steps: int,
    *,
    lr: float = 1e-3,
    eval_every: int = 0,
    weight_decay: float = 1e-3,
    progress_updates: int = 4,
    **bookkeeping: Any,
) -> TrainConfig:
    """The optimiser of Makkuva et al. (2024, Table 2): AdamW(0.9, 0.95), cosine schedule.

    Checkpoints are taken every ``eval_every`` steps (and at the first and last step) so
    that :meth:`MarkovRuns.test_losses` can draw test-loss curves afterwards. Other
    :class:`~ccmc_lite.core.TrainConfig` fields (``label``, ``lr_scale``,
    ``device``, ``progress``, ...) pass through ``bookkeeping``.
    """
    steps = check_size("steps", steps, minimum=1)
    eval_every = check_size("eval_every", eval_every, minimum=0)
    ckpts = {0, steps} if eval_every == 0 else {*range(0, steps + 1, eval_every), steps}
    return TrainConfig(
        steps=steps,
        lr=lr,
        optimizer="adamw",
        betas=(0.9, 0.95),
        weight_decay=weight_decay,
        schedule="cosine",
        eval_every=eval_every,
        checkpoint_steps=tuple(sorted(ckpts)),
        progress_updates=progress_updates,
        **bookkeeping,
    )


@dataclass
class MarkovRuns:
    """Runs trained by :func:`train_markov`: the trainer's result plus each run's kernel.

    Attributes
    ----------
    result : TrainResult
        Stacked parameters, training losses, checkpoints (leading axis: run).
    kernels : Tensor
        ``(R, K, K)``: the kernel each run was trained on.
    options : dict
        Model options (see :data:`ccmc_lite.markov.MODEL_OPTIONS`).
    batch_size : int
        Sequences per run per step.
    """

    result: TrainResult
    kernels: torch.Tensor
    options: dict[str, Any]
    batch_size: int

    @property
    def n_runs(self) -> int:
        return int(self.kernels.shape[0])

    @property
    def checkpoint_steps(self) -> list[int]:
        return sorted(self.result.checkpoints)

    def params_at(self, step: int | None = None) -> dict[str, torch.Tensor]:
        """Stacked parameters ``name -> (R, ...)`` after ``step`` updates (default: final)."""
        return self.result.params_at(step)

    def module(self, run: int, step: int | None = None) -> MarkovTransformer:
        """A standalone copy of one run's model, for inspection (no gradients)."""
        model = self.result.module(run, step)
        model.requires_grad_(False)
        return model  # type: ignore[return-value]

    def test_sequences(self, n_test: int, seed: int) -> torch.Tensor:
        """``n_test`` sequences of length ``N`` per run from its own chain: ``(R, n_test, N)``."""
        n_test = check_size("n_test", n_test, minimum=1)
        gen = torch_generator(derive_seed(check_seed(seed), 7))
        return sample_chains(self.kernels, n_test, self.options["N"], generator=gen)

    def test_losses(
        self, *, n_test: int = 64, seed: int = 0, steps: Sequence[int] | None = None
    ) -> tuple[list[int], torch.Tensor]:
        """Test loss (eq. (1), scored against the true kernel) at checkpoints: ``(R, S)``."""
        if steps is None:
            steps = self.checkpoint_steps
        elif isinstance(steps, (str, bytes)) or not hasattr(steps, "__iter__"):
            raise TypeError(f"steps must be a sequence of checkpoint steps; got {steps!r:.60}")
        else:
            steps = [check_int("steps", s, minimum=0) for s in steps]
        x = self.test_sequences(n_test, seed)  # (R, n_test, N)
        P = self.kernels.to(torch.float32)  # (R, K, K)
        out = [self.result.map_runs(kernel_loss, x, P, step=s, dtype=torch.float32) for s in steps]
        return steps, torch.stack(out, -1).to(torch.float64)  # (R, S)

    def probabilities(
        self, *, n_test: int = 16, seed: int = 0, step: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Predicted next-token laws on test sequences: ``(x, probs)`` of shapes
        ``(R, n_test, N)`` and ``(R, n_test, N, K)``."""
        x = self.test_sequences(n_test, seed)  # (R, n_test, N)
        probs = self.result.map_runs(lambda call, xs: call(xs).exp(), x, step=step)
        return x, probs.to(torch.float64)  # (R, n_test, N, K)


def train_markov(
    kernels: Any,
    *,
    model_options: dict[str, Any],
    config: TrainConfig,
    seed: int,
    batch_size: int,
    start_from: MarkovTransformer | None = None,
) -> MarkovRuns:
    """Train one model per kernel (``R`` runs) on sequences from its own Markov chain.

    ``kernels`` ``(R, K, K)``: run ``r`` sees ``batch_size`` sequences of ``N + 1`` tokens per
    step from ``(π_r, P_r)``, started at the stationary law (Makkuva et al. 2024, Sec. 3);
    repeat a kernel for several seeds of one setting. ``model_options``: those of
    :class:`~ccmc_lite.markov.MarkovTransformer` (``K`` matching the kernels). ``config``: the
    optimiser (:func:`markov_config` gives the paper's) and the call's bookkeeping (``label``,
    ``lr_scale`` — one factor per kernel, e.g. Sec. 4's learning-rate comparison as one program
    —, ``device``, ``first_run``, ``stop_after``, ``progress``). Run ``r`` is initialised from
    ``derive_seed(seed, r, 0)``, or every run from a copy of ``start_from`` (e.g. the unigram
    point ``θ_π`` of eq. (11), to see whether training leaves it; its options must equal
    ``model_options``). A loss that becomes NaN/inf raises
    :class:`~ccmc_lite.core.DivergenceError` naming the step, the runs and the setting.
    """
    P = check_kernel(kernels, "kernels")
    if P.ndim != 3:
        raise ValueError(f"kernels must have shape (R, K, K); got {tuple(P.shape)}")
    check_instance("model_options", model_options, Mapping)
    check_instance("config", config, TrainConfig)
    opts = check_model_options(model_options)
    if opts["K"] != P.shape[-1]:
        raise ValueError(f"model_options K={opts['K']} does not match kernels with K={P.shape[-1]}")
    batch_size = check_size("batch_size", batch_size, minimum=1)
    N, first_run = opts["N"], config.first_run
    pi = stationary_distribution(P)  # (R, K): each chain starts at its stationary law

    if start_from is not None:
        if not isinstance(start_from, MarkovTransformer):
            kind = type(start_from).__name__
            raise TypeError(f"start_from must be a MarkovTransformer; got {kind}")
        theirs = {**start_from.options, "init_std": opts["init_std"]}
        if theirs != {k: opts[k] for k in theirs}:
            raise ValueError(f"start_from has options {start_from.options}, model_options {opts}")
        start_state = {k: v.detach().float().clone() for k, v in start_from.state_dict().items()}

    def make_model() -> MarkovTransformer:
        model = MarkovTransformer(**opts)
        if start_from is not None:
            model.load_state_dict(start_state)
        return model

    def batch_fn(step: int, runs: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        idx = runs.cpu() - first_run  # (R,) global run indices -> rows of the kernels
        return sample_chains(P[idx], batch_size, N + 1, generator=gen, init=pi[idx])

    setting = f"{config.label} (K={opts['K']}, d={opts['d']}, N={N}, tied={opts['tied']})"
    result = train_runs(
        make_model,
        next_token_loss,
        batch_fn,
        n_runs=int(P.shape[0]),
        config=dataclasses.replace(config, label=setting.strip()),
        seed=seed,
    )
    return MarkovRuns(
        result=result, kernels=P.to(torch.float32), options=opts, batch_size=batch_size
    )


def threshold_bracket(ps: Any, gaps: Any, *, level: float = 0.5) -> tuple[float, float]:
    """Bracket a switching threshold ``(p_lo, p_hi)`` from where training runs end.

    For the symmetric ``K``-state chain the tied unigram point turns from saddle into bad local
    minimum at ``p* = (K - 1) / K`` (the ``K``-state version of Makkuva et al. 2024, Thm. 2,
    proved in the book). From the final :func:`unigram_gap` of several seeds (``gaps``,
    ``(M, seeds)``) at each of the distinct switching probabilities ``ps`` ``(M,)``: ``p_lo``
    is the largest ``p`` below ``p_hi`` at which every run left the unigram (gap ``< level``),
    ``p_hi`` the smallest ``p`` from which on every run is stuck (gap ``> level``). Mixed
    outcomes stay inside the bracket; a side that does not exist is ``nan``.
    """
    if isinstance(ps, (list, tuple)):
        ps = torch.tensor(ps, dtype=torch.float64)  # keep the given decimals exactly
    ps = as_tensor("ps", ps, ndim=1)
    if bool(((ps <= 0) | (ps >= 1)).any()):
        raise ValueError(f"ps must be switching probabilities in (0, 1); got {ps.tolist()}")
    gaps = as_tensor("gaps", gaps, ndim=2)
    level = check_float("level", level)
    if gaps.shape[0] != ps.shape[0] or gaps.shape[1] < 1:
        raise ValueError(f"gaps must have shape ({ps.shape[0]}, seeds); got {tuple(gaps.shape)}")
    if len(set(ps.tolist())) != ps.shape[0]:
        raise ValueError("ps must be distinct")
    order = torch.argsort(ps)
    ps, gaps = ps[order], gaps[order]
    stuck = (gaps > level).all(1)
    left = (gaps < level).all(1)
    p_hi = math.nan
    for i in range(len(ps) - 1, -1, -1):  # the run of all-stuck probabilities at the top
        if not stuck[i]:
            break
        p_hi = float(ps[i])
    below = [float(p) for p, ok in zip(ps, left, strict=True) if ok and not p >= p_hi]
    p_lo = max(below) if below else math.nan
    return p_lo, p_hi


def unigram_gap(loss: Any, kernels: Any, *, undefined: float | None = None) -> torch.Tensor:
    """Where a loss sits between bigram and unigram: ``(L - H_rate) / I(x_n; x_{n+1})``.

    0 is the entropy rate (global minimum, Thm. 1), 1 the unigram loss ``H(π)`` (Thm. 2).
    ``loss``: ``(R, ...)``; ``kernels``: ``(R, K, K)``. Runs whose chain has ``I = 0``
    (independent ``x_n``, ``x_{n+1}``, e.g. ``p + q = 1``), where the gap is 0/0, get
    ``undefined``; by default they raise ``ValueError``.
    """
    P = check_kernel(kernels, "kernels")
    L = as_tensor("loss", loss, ndim=(0, 1, 2))
    R = 1 if P.ndim == 2 else P.shape[0]
    if L.ndim == 0 or L.shape[0] != R:
        raise ValueError(
            f"loss must have one row per kernel (leading dimension {R}); got shape {tuple(L.shape)}"
        )
    rate = entropy_rate(P)
    gap = unigram_entropy(P) - rate  # mutual information, (R,)
    flat = gap <= 1e-12
    if bool(flat.any()) and undefined is None:
        raise ValueError(
            "unigram_gap is undefined where x_n and x_{n+1} are independent "
            f"(runs {flat.nonzero().flatten().tolist()[:10]}); pass undefined=<value>"
        )
    shape = (-1, *([1] * (L.ndim - 1)))
    out = (L - rate.reshape(shape)) / gap.clamp_min(1e-12).reshape(shape)
    if bool(flat.any()) and undefined is not None:  # undefined is set whenever flat.any()
        out = torch.where(flat.reshape(shape), torch.full_like(out, float(undefined)), out)
    return out


def zero_position_probs(x: Any, probs: Any, *, count: int, token: int = 0) -> torch.Tensor:
    """Predicted ``P(x_{n+1} = 1 | x_1^n)`` at the first ``count`` positions with ``x_n = token``.

    This is what Fig. 3(c, d) of Makkuva et al. (2024) plots (``token = 0``). ``x`` is
    ``(R, S, N)`` and ``probs`` ``(R, S, N, K)``; positions are taken in reading order over
    the ``S`` test sequences. Returns ``(R, count)``.
    """
    probs = check_prob_vector("probs", probs, atol=1e-4)
    if probs.ndim != 4 or probs.shape[-1] < 2:
        raise ValueError(f"probs must have shape (R, S, N, K); got {tuple(probs.shape)}")
    x = check_tokens("x", x, probs.shape[-1], ndim=3)
    if tuple(x.shape) != tuple(probs.shape[:-1]):
        raise ValueError(f"x must have shape {tuple(probs.shape[:-1])}; got {tuple(x.shape)}")
    token = check_int("token", token, minimum=0, maximum=probs.shape[-1] - 1)
    count = check_size("count", count, minimum=1, limit=x[0].numel())
    R = x.shape[0]
    flat_x = x.reshape(R, -1)
    flat_p = probs[..., 1].reshape(R, -1)
    out = torch.empty(R, count, dtype=torch.float64)
    for r in range(R):  # bookkeeping over runs only; no training here
        hits = (flat_x[r] == token).nonzero().flatten()
        if hits.numel() < count:
            raise ValueError(
                f"run {r} has only {hits.numel()} positions with x_n={token}; "
                f"use more test sequences or a smaller count (got count={count})"
            )
        out[r] = flat_p[r, hits[:count]].to(torch.float64)
    return out


def attention_ratio(model: MarkovTransformer, x: Any) -> float:
    """Mean ``||W_O sum_i att_{n,i} W_V x_i|| / ||y_n||`` of the first block (paper: ≈ 0.01).

    Makkuva et al. (2024, Sec. 3.1) use this ratio to argue that the trained single-layer
    model ignores the past and implements the kernel through the skip connection.
    """
    if not isinstance(model, MarkovTransformer):
        raise TypeError(f"model must be a MarkovTransformer; got {type(model).__name__}")
    tokens = check_model_tokens("x", x, model, ndim=(1, 2))
    with torch.no_grad():
        parts = model(tokens, output="parts")
        num = parts["attention"][0].norm(dim=-1)
        den = parts["y"][0].norm(dim=-1).clamp_min(1e-12)
    return float((num / den).mean())


def plot_pq_grid(
    ax: Any,
    values: Any,
    grid: Sequence[float],
    *,
    title: str = "",
    cmap: str = "viridis",
    vmin: float | None = None,
    vmax: float | None = None,
    mask: Any = None,
    fmt: str = "{:.2f}",
    colorbar_label: str | None = None,
) -> Any:
    """Heat map of ``values[i, j]`` at ``(p, q) = (grid[i], grid[j])`` (Fig. 4 layout).

    ``p`` runs along the x-axis and ``q`` up the y-axis; each cell is annotated; the line
    ``p + q = 1`` is dashed; cells where ``mask`` is true are greyed out and marked "–".
    The grid must be evenly spaced.
    """
    check_instance("ax", ax, Axes)
    import matplotlib.pyplot as plt
    import numpy as np

    V = np.asarray(torch.as_tensor(values, dtype=torch.float64))
    g = np.asarray(grid, dtype=float)
    G = len(g)
    if V.shape != (G, G):
        raise ValueError(f"values must have shape ({G}, {G}) to match grid; got {V.shape}")
    step = np.diff(g)
    if G < 2 or not np.allclose(step, step[0]):
        raise ValueError("grid must hold at least two evenly spaced values")
    M = np.zeros_like(V, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    shown = np.ma.masked_array(V, mask=M)
    im = ax.imshow(shown.T, origin="lower", cmap=cmap, vmin=vmin, vmax=vmax, aspect="equal")
    ax.set_facecolor("0.85")
    labels = [f"{v:g}" for v in g]
    ax.set_xticks(range(G), labels)
    ax.set_yticks(range(G), labels)
    ax.set(xlabel="$p$", ylabel="$q$", title=title)
    ax.grid(False)
    c = (1.0 - 2.0 * g[0]) / step[0]  # p + q = 1  <=>  i + j = c
    ax.plot([-0.5, G - 0.5], [c + 0.5, c - G + 0.5], "w--", lw=1.5)
    ax.set_xlim(-0.5, G - 0.5)
    ax.set_ylim(-0.5, G - 0.5)
    for i in range(G):
        for j in range(G):
            if M[i, j]:
                ax.text(i, j, "–", ha="center", va="center", fontsize=7, color="black")
                continue
            r, gr, b, _ = im.cmap(im.norm(V[i, j]))
            light = 0.299 * r + 0.587 * gr + 0.114 * b > 0.5  # text colour by cell luminance
            ax.text(
                i,
                j,
                fmt.format(V[i, j]),
                ha="center",
                va="center",
                fontsize=7,
                color="black" if light else "white",
            )
    cb = plt.colorbar(im, ax=ax, shrink=0.8)
    if colorbar_label:
        cb.set_label(colorbar_label)
    return im
