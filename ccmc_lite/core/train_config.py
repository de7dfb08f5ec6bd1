"""What a training call does, in one record: the optimiser, its schedule, and the run's bookkeeping.

A :class:`TrainConfig` is to :func:`~ccmc_lite.core.train_runs` what minGPT's trainer
config is to its loop: every setting in one frozen, checked dataclass, so the trainer takes
few arguments and a chapter states its whole training setup in one visible cell. Makkuva et
al. (2024, Table 2) train with AdamW (0.9, 0.95) under a cosine schedule
(:func:`ccmc_lite.markov.markov_config`); Varre et al. (2025, Sec. 5) with Adam at a constant
rate.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .devices import resolve_device
from .validation import (
    check_bool,
    check_choice,
    check_float,
    check_instance,
    check_int,
    check_numbers,
    check_size,
)

__all__ = ["TrainConfig", "lr_schedule"]


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings and bookkeeping shared by the runs of one training call.

    Attributes
    ----------
    steps, lr : int, float
        Number of optimiser updates, and the peak learning rate.
    optimizer : str
        ``"adam"``, ``"adamw"`` or ``"sgd"``.
    betas : tuple of float
        Adam moment coefficients (Makkuva et al. 2024 use ``(0.9, 0.95)``).
    weight_decay : float
        Decoupled weight decay for AdamW, an L2 penalty for Adam and SGD.
    schedule : str
        ``"constant"`` or ``"cosine"`` (decays to ``min_lr_ratio * lr``).
    warmup_steps : int
        Length of the linear warm-up before the schedule.
    min_lr_ratio : float
        Final learning rate of the cosine schedule, relative to ``lr``.
    grad_clip : float or None
        Clip each run's gradient to this global norm (``None``: no clipping).
    lr_scale : tuple of float or None
        One positive factor per run: run ``r`` trains at ``lr_scale[r] * lr`` (its whole
        schedule scaled) in the same program as the others, so a learning-rate sweep is one
        program. Runs with factor 1 are bit for bit what they are without it.
    eval_every : int
        Call ``eval_fn`` every this many steps (0: only at the start and the end).
    checkpoint_steps : tuple of int
        Steps after which all parameters are saved (0 is the initialisation).
    runs_per_pass : int or None
        Runs per forward and backward pass within a step: the runs' gradients are the same
        sums however the runs are split, so this changes speed and memory, and at most the
        last bits (where a pass's size selects another BLAS kernel).
        ``None`` chooses it on the CPU so that the attention scores of a pass stay in the
        cache (:func:`~ccmc_lite.core.train_runs`).
    first_run : int
        Index of the first run of this call in a larger sweep: run ``first_run + r`` keeps
        its initialisation whichever call (shard) trains it.
    stop_after : int or None
        Train only the first ``stop_after`` updates of the schedule (which still follows
        ``steps``): a prefix of a long run, to check that a stored run still reproduces.
    device : str or None
        ``"cpu"`` (default), ``"cuda"``, or ``None`` for CUDA when available.
    label : str
        Names the experiment in progress lines and error messages.
    progress, progress_updates : bool, int
        Print progress lines, this many of them.
    max_loss_rise : float or None
        Divergence guard: a run whose loss exceeds its first loss by more than
        ``max_loss_rise * max(|first loss|, 1)`` stops training with
        :class:`~ccmc_lite.core.DivergenceError` (``None``: no such check; non-finite
        losses and parameters always stop it).
    """

    steps: int
    lr: float = 1e-3
    optimizer: str = "adamw"
    betas: tuple[float, float] = (0.9, 0.999)
    weight_decay: float = 0.0
    schedule: str = "constant"
    warmup_steps: int = 0
    min_lr_ratio: float = 0.0
    grad_clip: float | None = None
    lr_scale: tuple[float, ...] | None = None
    eval_every: int = 0
    checkpoint_steps: tuple[int, ...] = ()
    runs_per_pass: int | None = None
    first_run: int = 0
    stop_after: int | None = None
    device: str | None = "cpu"
    label: str = ""
    progress: bool = True
    progress_updates: int = 5
    max_loss_rise: float | None = 100.0

    def __post_init__(self) -> None:
        check_size("steps", self.steps)
        check_float("lr", self.lr, minimum=0.0, open_lower=True)
        check_choice("optimizer", self.optimizer, ("adam", "adamw", "sgd"))
        if not isinstance(self.betas, (tuple, list)) or len(self.betas) != 2:
            raise ValueError(f"betas must be a pair of floats in [0, 1); got {self.betas!r}")
        for i, b in enumerate(self.betas):
            check_float(f"betas[{i}]", b, minimum=0.0, maximum=1.0, open_upper=True)
        check_float("weight_decay", self.weight_decay, minimum=0.0)
        check_choice("schedule", self.schedule, ("constant", "cosine"))
        check_int("warmup_steps", self.warmup_steps, minimum=0, maximum=self.steps)
        check_float("min_lr_ratio", self.min_lr_ratio, minimum=0.0, maximum=1.0)
        if self.grad_clip is not None:
            check_float("grad_clip", self.grad_clip, minimum=0.0, open_lower=True)
        if self.lr_scale is not None:
            object.__setattr__(self, "lr_scale", check_numbers("lr_scale", self.lr_scale))
        check_size("eval_every", self.eval_every, minimum=0)
        if isinstance(self.checkpoint_steps, (str, bytes)) or not isinstance(
            self.checkpoint_steps, (tuple, list, range)
        ):
            raise TypeError(
                "checkpoint_steps must be a tuple of steps, e.g. checkpoint_steps=(5,) for "
                f"one checkpoint after 5 updates; got {self.checkpoint_steps!r}"
            )
        for s in self.checkpoint_steps:
            check_int("checkpoint_steps entry", s, minimum=0, maximum=self.steps)
        object.__setattr__(self, "checkpoint_steps", tuple(self.checkpoint_steps))
        if self.runs_per_pass is not None:
            check_size("runs_per_pass", self.runs_per_pass)
        check_int("first_run", self.first_run, minimum=0)
        resolve_device(self.device)  # an unknown or absent device is named here, not mid-run
        if self.stop_after is not None:
            check_int("stop_after", self.stop_after, minimum=1, maximum=self.steps)
        check_instance("label", self.label, str)
        check_bool("progress", self.progress)
        check_size("progress_updates", self.progress_updates, limit=10**4)
        if self.max_loss_rise is not None:
            check_float("max_loss_rise", self.max_loss_rise, minimum=0.0, open_lower=True)

    @property
    def n_steps(self) -> int:
        """Number of updates this call trains (``stop_after`` if set, else ``steps``)."""
        return self.steps if self.stop_after is None else self.stop_after

    def make_optimizer(self, params: list[torch.Tensor]) -> torch.optim.Optimizer:
        """This config's optimiser over ``params``; ``foreach``: one fused update of all."""
        if isinstance(params, torch.Tensor) or not hasattr(params, "__iter__"):
            raise TypeError(f"params must be a list of tensors; got {type(params).__name__}")
        if self.optimizer == "sgd":
            return torch.optim.SGD(params, lr=self.lr, weight_decay=self.weight_decay, foreach=True)
        adam = torch.optim.AdamW if self.optimizer == "adamw" else torch.optim.Adam
        return adam(
            params, lr=self.lr, betas=self.betas, weight_decay=self.weight_decay, foreach=True
        )

    def eval_steps(self) -> list[int]:
        """Steps (number of updates done) at which ``eval_fn`` is called."""
        if self.eval_every == 0:
            return [0, self.steps]
        steps = list(range(0, self.steps + 1, self.eval_every))
        return steps if steps[-1] == self.steps else [*steps, self.steps]


def lr_schedule(config: TrainConfig) -> Callable[[int], float]:
    """The learning-rate multiplier after ``step`` updates (a ``LambdaLR`` factor)."""
    check_instance("config", config, TrainConfig)

    def factor(step: int) -> float:
        if config.warmup_steps and step < config.warmup_steps:
            return (step + 1) / config.warmup_steps
        if config.schedule == "constant":
            return 1.0
        span = max(config.steps - config.warmup_steps, 1)
        progress = min((step - config.warmup_steps) / span, 1.0)
        cosine = 0.5 * (1.0 + math.cos(math.pi * progress))
        return config.min_lr_ratio + (1.0 - config.min_lr_ratio) * cosine

    return factor
