"""One training loop for the whole book: R independent runs trained as one batched program.

The three papers report averages over seeds and sweeps over settings (Makkuva et al. 2024, Figs.
3–4: five runs per (p, q) cell; Varre et al. 2025, Sec. 5: several seeds). Training them one after
another in a Python loop wastes most of the time in per-step overhead on tiny models.
:func:`~ccmc_lite.core.train_runs` instead stacks the parameters of ``R`` copies of a model along a
new leading axis (:func:`torch.func.stack_module_state`) and evaluates all of them at once with
:func:`torch.func.vmap` over :func:`torch.func.functional_call`.

Because Adam, AdamW and SGD update every parameter entry independently, one optimiser on
the stacked tensors performs exactly the ``R`` separate updates: the runs stay independent.
Each of their updates, given the optimiser's state, is the learning rate times a direction
that does not depend on it, so runs with different learning rates (``lr_scale``) still share
one program: the trainer rescales each run's update after the optimiser's step.
``batched=False`` trains the same runs with an ordinary loop (same initialisations), which
the tests use to check that both paths agree and the benchmarks use as the baseline. The two
paths seed the data differently (below), so they give the same numbers, to rounding, only for
a ``batch_fn`` whose data depend on the run indices alone.

Conventions
-----------
``make_model()``
    builds one freshly initialised :class:`torch.nn.Module`; run ``r`` is built under the
    seed ``derive_seed(seed, r, 0)``, so a run's initialisation does not depend on ``R``.
``batch_fn(step, runs, generator)``
    returns the training batch for all runs in ``runs`` (a CPU ``long`` tensor of run
    indices, shape ``(R,)``, counted from ``first_run``; ``generator`` is a CPU generator,
    so the data are the same on every device): a tensor, or a tuple/dict of tensors, each
    with leading dimension ``R``. The trainer moves the batch to the training device. The
    batched path passes one generator for the whole program, seeded
    ``derive_seed(seed, first_run, 1)``; the loop passes each run ``r`` its own, seeded
    ``derive_seed(seed, r, 1)``. Data drawn from ``generator`` therefore depend on the path
    and on how runs are split into programs (shards); their initialisations do not.
    Randomness inside a model (dropout, noise layers) draws from torch's global generators,
    which the trainer seeds with ``derive_seed(seed, first_run, 2)`` for the call and
    restores afterwards: same seed, same numbers, and the caller's global state untouched.
``loss_fn(model, batch)``
    the loss of one run on its slice of the batch (leading ``R`` axis removed); ``model``
    is callable like the module. It must return a scalar tensor.
``eval_fn(model, step)`` (optional)
    a dict of scalar tensors evaluated every ``config.eval_every`` steps without gradients.
    With ``eval_data`` (a tensor or tuple/dict of tensors with leading dimension ``R``: a
    fixed evaluation set per run, e.g. sequences from that run's own Markov kernel) it is
    called as ``eval_fn(model, step, data)`` with the run's slice of ``eval_data``.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap

from .devices import resolve_device
from .progress import TextProgress
from .seeding import derive_seed
from .validation import (
    DivergenceError,
    check_bool,
    check_callable,
    check_choice,
    check_float,
    check_instance,
    check_int,
    check_numbers,
    check_seed,
    check_size,
)

__all__ = ["TrainConfig", "TrainResult", "lr_schedule", "over_runs", "train_runs"]

ModelCall = Callable[..., Any]
Batch = Any  # tensor or (nested) tuple/list/dict of tensors with leading run axis
# what _train_batched / _train_looped return: params, buffers, loss, grad_norm, evals, checkpoints
_RunnerOutput = tuple[
    dict[str, torch.Tensor],
    dict[str, torch.Tensor],
    torch.Tensor,
    torch.Tensor,
    dict[str, torch.Tensor],
    dict[int, dict[str, torch.Tensor]],
]


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings shared by all runs of one call to :func:`train_runs`.

    Attributes
    ----------
    steps : int
        Number of optimiser updates.
    lr : float
        Peak learning rate.
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
    eval_every : int
        Call ``eval_fn`` every this many steps (0: only at the start and the end).
    checkpoint_steps : tuple of int
        Steps after which all parameters are saved (0 is the initialisation).
    progress_updates : int
        How many progress lines to print.
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
    eval_every: int = 0
    checkpoint_steps: tuple[int, ...] = field(default_factory=tuple)
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
        check_size("progress_updates", self.progress_updates, limit=10**4)
        if self.max_loss_rise is not None:
            check_float("max_loss_rise", self.max_loss_rise, minimum=0.0, open_lower=True)

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


@dataclass
class TrainResult:
    """What :func:`train_runs` returns. The leading axis ``R`` is the run index everywhere.

    Attributes
    ----------
    params, buffers : dict
        Final stacked parameters and buffers, ``name -> (R, ...)``.
    loss : Tensor
        Training loss of each update's forward pass, shape ``(R, steps)`` (``(R, stop_after)``
        for a prefix).
    grad_norm : Tensor
        Each run's gradient norm before clipping, shape ``(R, steps)``.
    eval_steps : list of int
        Steps at which ``evals`` were recorded.
    evals : dict
        ``name -> (R, len(eval_steps))``.
    checkpoints : dict
        ``step -> {name: (R, ...)}``.
    seconds : float
        Wall-clock training time.
    lr_scale : tuple of float, optional
        Each run's learning rate relative to ``config.lr`` (``None``: all 1).
    """

    params: dict[str, torch.Tensor]
    buffers: dict[str, torch.Tensor]
    loss: torch.Tensor
    grad_norm: torch.Tensor
    eval_steps: list[int]
    evals: dict[str, torch.Tensor]
    checkpoints: dict[int, dict[str, torch.Tensor]]
    seconds: float
    config: TrainConfig
    template: nn.Module = field(repr=False)
    lr_scale: tuple[float, ...] | None = None

    @property
    def n_runs(self) -> int:
        return int(self.loss.shape[0])

    def params_at(self, step: int | None = None) -> dict[str, torch.Tensor]:
        """Stacked parameters ``name -> (R, ...)`` after ``step`` updates (default: final)."""
        if step is None:
            return self.params
        if step not in self.checkpoints:
            raise ValueError(
                f"step must be one of the checkpoint steps {sorted(self.checkpoints)}; got {step}"
            )
        return self.checkpoints[step]

    def map_runs(
        self,
        fn: Callable[..., Any],
        *args: Any,
        step: int | None = None,
        dtype: torch.dtype | None = None,
    ) -> Any:
        """``fn(model, *args)`` for every run at once (see :func:`over_runs`), without gradients.

        ``args`` carry a leading run axis ``R``; ``step`` picks a checkpoint (default: the
        final parameters); ``dtype`` converts the parameters first (e.g. ``torch.float32``).
        """
        params = self.params_at(step)
        if dtype is not None:
            params = {k: v.to(dtype) for k, v in params.items()}
        with torch.no_grad():
            return over_runs(self.template, fn)(params, self.buffers, *args)

    def module(self, run: int, step: int | None = None) -> nn.Module:
        """A standalone copy of run ``run``'s model (at checkpoint ``step`` if given)."""
        run = check_int("run", run, minimum=0, maximum=self.n_runs - 1)
        params = self.params_at(step)
        model = copy.deepcopy(self.template)
        with torch.no_grad():
            for name, p in model.named_parameters():
                p.copy_(params[name][run])
            for name, b in model.named_buffers():
                if name in self.buffers:
                    b.copy_(self.buffers[name][run])
        return model


def over_runs(
    template: nn.Module, fn: Callable[..., Any], *, randomness: str = "error"
) -> Callable[..., Any]:
    """Vectorise ``fn(model, *args)`` over the runs of a stacked parameter set.

    Returns ``g(params, buffers, *args)``: ``params``/``buffers`` map names to tensors with
    a leading run axis ``R`` (as :class:`TrainResult` holds them) and every ``args`` entry
    has leading axis ``R``; ``g`` evaluates ``fn`` for every run in one vectorised program
    (:func:`torch.func.vmap` over :func:`torch.func.functional_call`) and stacks the results
    along a new leading axis. ``model`` is callable like ``template``. This is the batched
    step :func:`train_runs` trains with; :meth:`TrainResult.map_runs` evaluates trained runs
    with it.
    """
    if not isinstance(template, nn.Module):
        raise TypeError(f"template must be a torch.nn.Module; got {type(template).__name__}")
    if not callable(fn):
        raise TypeError(f"fn must be callable; got {type(fn).__name__}")
    check_choice("randomness", randomness, ("error", "different", "same"))
    base = copy.deepcopy(template).to("meta")  # structure only: parameters come per run

    def one(params: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor], *args: Any) -> Any:
        def call(*a: Any, **k: Any) -> Any:
            return functional_call(base, (params, buffers), a, k)

        return fn(call, *args)

    return vmap(one, randomness=randomness)


def _tensors(model: nn.Module) -> Any:
    yield from model.parameters()
    yield from model.buffers()


def _build_models(
    make_model: Callable[[], nn.Module],
    n_runs: int,
    seed: int,
    device: torch.device,
    first_run: int = 0,
) -> list[nn.Module]:
    models = []
    # one fork of the global generators for all runs (restored after the loop)
    with _forked_global_rng() as reseed:
        for r in range(first_run, first_run + n_runs):
            reseed(derive_seed(seed, r, 0))
            model = make_model()
            if not isinstance(model, nn.Module):
                raise TypeError(f"make_model must return a torch.nn.Module; got {type(model)}")
            on_device = all(t.device == device for t in _tensors(model))
            models.append(model if on_device else model.to(device))
    if not list(models[0].parameters()):
        raise ValueError("make_model returned a module without parameters")
    return models


@contextlib.contextmanager
def _forked_global_rng() -> Iterator[Callable[[int], None]]:
    """Fork torch's global generators (their states are restored on exit); yields ``reseed``.

    ``reseed(seed)`` seeds the CPU generator, and CUDA's where CUDA is present, directly:
    torch.manual_seed also seeds the lazily initialised CUDA, XPU and MTIA generators, which
    on a machine without them records a stack trace each time (most of the cost of
    building many small models) for generators no model here can draw from. The trainer seeds
    models' initialisation this way, and the randomness a model draws while it trains
    (dropout, noise layers), so the same seed gives the same numbers and the caller's global
    state is left as it was.
    """
    cuda = torch.cuda.is_available()
    with torch.random.fork_rng(devices=[torch.cuda.current_device()] if cuda else []):

        def reseed(seed: int) -> None:
            torch.random.default_generator.manual_seed(seed)
            if cuda:
                torch.cuda.manual_seed_all(seed)

        yield reseed


def _make_optimizer(params: Sequence[torch.Tensor], config: TrainConfig) -> torch.optim.Optimizer:
    # foreach=True: one fused update over all tensors (the default only on CUDA); it makes
    # the per-run loop ~25% faster on the CPU, so the batched-vs-loop ratio stays honest.
    if config.optimizer == "sgd":
        return torch.optim.SGD(params, lr=config.lr, weight_decay=config.weight_decay, foreach=True)
    adam = torch.optim.AdamW if config.optimizer == "adamw" else torch.optim.Adam
    return adam(
        params, lr=config.lr, betas=config.betas, weight_decay=config.weight_decay, foreach=True
    )


def _diverged(what: str, step: int, runs: list[int], label: str, config: TrainConfig) -> None:
    raise DivergenceError(
        f"{what} at step {step} in run(s) {runs[:10]}"
        f"{' of ' + label if label else ''}; setting: lr={config.lr}, "
        f"optimizer={config.optimizer}, schedule={config.schedule}, "
        f"weight_decay={config.weight_decay}. Lower the learning rate (lr, or lr_scale of "
        "these runs) or check the model."
    )


def _check_finite(
    losses: torch.Tensor,
    step: int,
    label: str,
    config: TrainConfig,
    start: torch.Tensor | None = None,
    first_run: int = 0,
) -> None:
    """Stop on a non-finite loss, or on a loss far above the run's first loss (``start``)."""
    finite = torch.isfinite(losses)
    if not bool(finite.all()):
        bad = ((~finite).nonzero().flatten() + first_run).tolist()
        _diverged("non-finite training loss", step, bad, label, config)
    if start is not None and config.max_loss_rise is not None:
        rise = losses - start
        risen = rise > config.max_loss_rise * start.abs().clamp(min=1.0)
        if bool(risen.any()):
            bad = (risen.nonzero().flatten() + first_run).tolist()
            _diverged(
                f"training loss rose more than max_loss_rise={config.max_loss_rise} times "
                "its first value",
                step,
                bad,
                label,
                config,
            )


def _check_params(
    params: dict[str, torch.Tensor], step: int, label: str, config: TrainConfig, first_run: int
) -> None:
    """Stop when any run's parameters are non-finite (checked after the last update too)."""
    for name, t in params.items():
        finite = torch.isfinite(t.detach()).reshape(t.shape[0], -1).all(1)
        if not bool(finite.all()):
            bad = ((~finite).nonzero().flatten() + first_run).tolist()
            _diverged(f"non-finite parameter {name!r}", step, bad, label, config)


def _slice_batch(batch: Batch, i: int) -> Batch:
    if isinstance(batch, torch.Tensor):
        return batch[i]
    if isinstance(batch, dict):
        return {k: _slice_batch(v, i) for k, v in batch.items()}
    if isinstance(batch, (tuple, list)):
        return type(batch)(_slice_batch(v, i) for v in batch)
    raise TypeError(f"batch_fn must return tensors (or tuples/dicts of them); got {type(batch)}")


def _to_device(batch: Batch, device: torch.device, source: str = "batch_fn") -> Batch:
    """``batch`` on ``device``; ``source`` names where it came from in errors."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, dict):
        return {k: _to_device(v, device, source) for k, v in batch.items()}
    if isinstance(batch, (tuple, list)):
        return type(batch)(_to_device(v, device, source) for v in batch)
    what = "eval_data must be" if source == "eval_data" else f"{source} must return"
    raise TypeError(
        f"{what} tensors (or tuples/dicts of tensors); found a {type(batch).__name__} "
        f"({batch!r:.60})"
    )


def _checked_loss(loss_fn: Callable[[ModelCall, Batch], torch.Tensor]) -> Callable[..., Any]:
    """``loss_fn`` whose result is checked: one scalar tensor that autograd can follow."""

    @functools.wraps(loss_fn)
    def checked(model: ModelCall, batch: Batch) -> torch.Tensor:
        try:
            loss = loss_fn(model, batch)
        except RuntimeError as err:
            if ".item()" in str(err):
                raise TypeError(
                    "loss_fn calls .item() (or float()) on a tensor: return the loss as a "
                    "tensor so that it can be differentiated and batched over runs"
                ) from None
            raise
        if not isinstance(loss, torch.Tensor):
            raise TypeError(
                "loss_fn must return the loss as a scalar tensor (not a Python number: do "
                f"not call .item() or float() on it); got {type(loss).__name__}"
            )
        if loss.numel() != 1:
            raise ValueError(
                f"loss_fn must return a scalar tensor, e.g. the mean over the batch; got "
                f"shape {tuple(loss.shape)}"
            )
        return loss

    return checked


def _leading_dim(batch: Batch) -> int:
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.ndim else -1
    if isinstance(batch, dict):
        batch = list(batch.values())
    if isinstance(batch, (tuple, list)) and batch:
        return _leading_dim(batch[0])
    raise TypeError(f"batch_fn must return tensors (or tuples/dicts of them); got {type(batch)}")


def train_runs(
    make_model: Callable[[], nn.Module],
    loss_fn: Callable[[ModelCall, Batch], torch.Tensor],
    batch_fn: Callable[[int, torch.Tensor, torch.Generator], Batch],
    *,
    n_runs: int,
    config: TrainConfig,
    seed: int,
    eval_fn: Callable[..., dict[str, torch.Tensor]] | None = None,
    eval_data: Batch | None = None,
    batched: bool = True,
    device: torch.device | str | None = "cpu",
    label: str = "",
    progress: bool = True,
    first_run: int = 0,
    stop_after: int | None = None,
    lr_scale: Sequence[float] | torch.Tensor | None = None,
) -> TrainResult:
    """Train ``n_runs`` independent copies of a model; see the module docstring.

    Parameters
    ----------
    make_model, loss_fn, batch_fn, eval_fn:
        See the module docstring for their signatures.
    n_runs:
        Number of independent runs ``R``.
    config:
        A :class:`TrainConfig`.
    seed:
        Base seed. Run ``r`` is initialised with ``derive_seed(seed, r, 0)``; the batched
        data stream uses ``derive_seed(seed, first_run, 1)``, run ``r`` of the loop uses
        ``derive_seed(seed, r, 1)``.
    eval_data:
        Optional per-run evaluation data (leading dimension ``n_runs``) passed to ``eval_fn``.
    batched:
        ``True`` (default) trains all runs as one vmapped program; ``False`` loops over
        runs with ordinary autograd (the reference and the benchmark baseline).
    device:
        ``"cpu"`` (default), ``"cuda"``, or ``None`` for :func:`ccmc_lite.core.default_device`.
    label:
        Names the experiment in progress lines and error messages.
    first_run:
        Index of the first run of this call among all runs of an experiment. A sweep split
        into shards (``first_run = 0, R_0, R_0 + R_1, ...``) initialises every run exactly as
        one unsharded call of all runs would.
    stop_after:
        Train only the first ``stop_after`` updates of the schedule (the learning rate
        still follows ``config.steps``): a short prefix of a long run, to check that a
        stored run still reproduces. ``None``: all ``config.steps``.
    lr_scale:
        ``n_runs`` positive factors: run ``r`` trains with the learning rate
        ``lr_scale[r] * config.lr`` (its whole schedule scaled), in the same program as the
        others. A learning-rate sweep is then one program, not one per rate. Runs with
        factor 1 are bit for bit what they are without ``lr_scale``; the others agree with
        a separate run at the scaled rate up to rounding. ``None``: every run at
        ``config.lr``.

    Raises
    ------
    DivergenceError
        (a ``FloatingPointError`` and a ``ValueError``) if any run's loss becomes NaN or
        infinite, rises more than ``config.max_loss_rise`` times above its first value, or
        its parameters are non-finite after the last update; the message names the step,
        the run and the setting.
    """
    n_runs = check_size("n_runs", n_runs, limit=10**5)
    first_run = check_int("first_run", first_run, minimum=0)
    seed = check_seed(seed)
    check_instance("config", config, TrainConfig)
    check_bool("batched", batched)
    check_bool("progress", progress)
    n_steps = config.steps
    scales = None if lr_scale is None else check_numbers("lr_scale", lr_scale, n_runs)
    if stop_after is not None:
        n_steps = check_int("stop_after", stop_after, minimum=1, maximum=config.steps)
    for name, fn in (("make_model", make_model), ("loss_fn", loss_fn), ("batch_fn", batch_fn)):
        check_callable(name, fn)
    if eval_fn is not None and not callable(eval_fn):
        raise TypeError(f"eval_fn must be callable or None; got {type(eval_fn).__name__}")
    if eval_data is not None:
        if eval_fn is None:
            raise ValueError("eval_data was given without an eval_fn to use it")
        if _leading_dim(eval_data) != n_runs:
            raise ValueError(
                f"eval_data must have leading dimension n_runs={n_runs}; "
                f"got {_leading_dim(eval_data)}"
            )
    dev = resolve_device(device)
    models = _build_models(make_model, n_runs, seed, dev, first_run)
    template = copy.deepcopy(models[0]).to("cpu")
    runner = _train_batched if batched else _train_looped
    start = time.perf_counter()
    if eval_data is not None:
        eval_data = _to_device(eval_data, dev, "eval_data")
    job = _Job(
        models,
        _checked_loss(loss_fn),
        batch_fn,
        eval_fn,
        eval_data,
        config,
        seed,
        dev,
        label,
        progress,
        first_run,
        n_steps,
        scales,
    )
    with _forked_global_rng() as reseed:
        reseed(derive_seed(seed, first_run, 2))  # randomness drawn inside the model
        out = runner(job)
    seconds = time.perf_counter() - start
    params, buffers, loss, gnorm, evals, checkpoints = out
    return TrainResult(
        params=params,
        buffers=buffers,
        loss=loss,
        grad_norm=gnorm,
        eval_steps=[s for s in config.eval_steps() if s <= n_steps],
        evals=evals,
        checkpoints=checkpoints,
        seconds=seconds,
        config=config,
        template=template,
        lr_scale=scales,
    )


def _stack_evals(records: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    if not records or not records[0]:
        return {}
    return {k: torch.stack([rec[k] for rec in records], dim=-1).cpu() for k in records[0]}


@dataclass(frozen=True)
class _Job:
    """What both runners need: the models, the callables, the settings, the run range."""

    models: list[nn.Module]
    loss_fn: Callable[[ModelCall, Batch], torch.Tensor]
    batch_fn: Callable[[int, torch.Tensor, torch.Generator], Batch]
    eval_fn: Callable[..., dict[str, torch.Tensor]] | None
    eval_data: Batch | None
    config: TrainConfig
    seed: int
    dev: torch.device
    label: str
    progress: bool
    first_run: int  # global index of models[0] (its seed stream)
    n_steps: int
    lr_scale: tuple[float, ...] | None  # (R,) per-run factors on config.lr


def _train_batched(job: _Job) -> _RunnerOutput:
    """Train the runs as one vmapped program (``batched=True``)."""
    n_runs = len(job.models)
    params, buffers = stack_module_state(job.models)  # name -> (R, ...), leaf tensors
    names = list(params)
    batched_loss = over_runs(job.models[0], job.loss_fn, randomness="different")
    leaves = [params[n] for n in names]
    opt = _make_optimizer(leaves, job.config)
    # Per-run learning rates: after a step from theta to theta', run r moves to
    # theta + s_r (theta' - theta), i.e. theta'.lerp_(theta, 1 - s_r); each (R, 1, ..., 1).
    lerp_weights = []
    if job.lr_scale is not None:
        s = torch.tensor(job.lr_scale, dtype=torch.float64, device=job.dev)  # (R,)
        lerp_weights = [(1 - s).to(t.dtype).view(-1, *([1] * (t.ndim - 1))) for t in leaves]
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_schedule(job.config))
    gen = torch.Generator()  # data are drawn on the CPU (same numbers on every device)
    gen.manual_seed(derive_seed(job.seed, job.first_run, 1))
    runs = torch.arange(job.first_run, job.first_run + n_runs)  # global run indices
    loss_hist = torch.empty(n_runs, job.n_steps)
    gnorm_hist = torch.empty(n_runs, job.n_steps)
    eval_steps = set(job.config.eval_steps())
    evals: list[dict[str, torch.Tensor]] = []
    checkpoints: dict[int, dict[str, torch.Tensor]] = {}
    bar = TextProgress(
        job.n_steps, label=job.label, updates=job.config.progress_updates, enabled=job.progress
    )

    def record(step: int) -> None:
        eval_fn = job.eval_fn
        if eval_fn is not None and step in eval_steps:
            batched_eval = over_runs(job.models[0], lambda call, *data: eval_fn(call, step, *data))
            with torch.no_grad():
                extra = () if job.eval_data is None else (job.eval_data,)
                evals.append(batched_eval(params, buffers, *extra))
        if step in job.config.checkpoint_steps:
            checkpoints[step] = {n: t.detach().cpu().clone() for n, t in params.items()}

    record(0)
    start = None
    for step in range(job.n_steps):
        batch = _to_device(job.batch_fn(step, runs, gen), job.dev)
        if _leading_dim(batch) != n_runs:
            raise ValueError(
                f"batch_fn must return tensors with leading dimension n_runs={n_runs}; "
                f"got {_leading_dim(batch)}"
            )
        losses = batched_loss(params, buffers, batch)  # (R,)
        if losses.shape != (n_runs,):
            raise ValueError(f"loss_fn must return a scalar; got shape {tuple(losses.shape[1:])}")
        _check_finite(losses.detach(), step, job.label, job.config, start, job.first_run)
        if start is None:
            start = losses.detach().clone()
        opt.zero_grad(set_to_none=True)
        losses.sum().backward()  # runs are independent: d(sum)/d(theta_r) = dL_r/d(theta_r)
        grads = [t.grad if t.grad is not None else torch.zeros_like(t) for t in leaves]
        sq = torch.stack([g.reshape(n_runs, -1).pow(2).sum(1) for g in grads]).sum(0)
        gnorm = sq.sqrt()  # (R,)
        if job.config.grad_clip is not None:
            scale = (job.config.grad_clip / (gnorm + 1e-12)).clamp(max=1.0)
            for g in grads:
                g.mul_(scale.view(-1, *([1] * (g.ndim - 1))))
        before = [t.detach().clone() for t in leaves] if lerp_weights else []
        opt.step()
        if lerp_weights:
            with torch.no_grad():
                for t, old, w in zip(leaves, before, lerp_weights, strict=True):
                    t.lerp_(old, w)
        sched.step()
        loss_hist[:, step] = losses.detach().cpu()
        gnorm_hist[:, step] = gnorm.detach().cpu()
        record(step + 1)
        bar.update(step + 1, loss=float(loss_hist[:, step].mean()))
    _check_params(params, job.n_steps, job.label, job.config, job.first_run)
    final = {n: t.detach().cpu() for n, t in params.items()}
    final_buffers = {n: t.detach().cpu() for n, t in buffers.items()}
    return final, final_buffers, loss_hist, gnorm_hist, _stack_evals(evals), checkpoints


def _train_looped(job: _Job) -> _RunnerOutput:
    """Train the runs one after another, one model and optimiser each (``batched=False``)."""
    n_runs = len(job.models)
    loss_hist = torch.empty(n_runs, job.n_steps)
    gnorm_hist = torch.empty(n_runs, job.n_steps)
    eval_steps = set(job.config.eval_steps())
    per_run_evals: list[list[dict[str, torch.Tensor]]] = []
    per_run_ckpt: list[dict[int, dict[str, torch.Tensor]]] = []
    bar = TextProgress(
        job.n_steps * n_runs,
        label=job.label,
        updates=job.config.progress_updates,
        enabled=job.progress,
    )
    for r, model in enumerate(job.models):
        named = dict(model.named_parameters())
        own = job.config
        if job.lr_scale is not None:
            own = dataclasses.replace(own, lr=own.lr * job.lr_scale[r])
        opt = _make_optimizer(list(named.values()), own)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_schedule(own))
        gen = torch.Generator()  # data are drawn on the CPU (same numbers on every device)
        gen.manual_seed(derive_seed(job.seed, job.first_run + r, 1))
        runs = torch.tensor([job.first_run + r])
        evals: list[dict[str, torch.Tensor]] = []
        ckpts: dict[int, dict[str, torch.Tensor]] = {}

        extra: tuple[Batch, ...] = (
            () if job.eval_data is None else (_slice_batch(job.eval_data, r),)
        )

        def record(
            step: int,
            model: nn.Module = model,
            named: dict[str, nn.Parameter] = named,
            evals: list[dict[str, torch.Tensor]] = evals,
            ckpts: dict[int, dict[str, torch.Tensor]] = ckpts,
            extra: tuple[Batch, ...] = extra,
        ) -> None:
            if job.eval_fn is not None and step in eval_steps:
                with torch.no_grad():
                    out = job.eval_fn(model, step, *extra)
                    evals.append({k: v.detach() for k, v in out.items()})
            if step in job.config.checkpoint_steps:
                ckpts[step] = {n: t.detach().cpu().clone() for n, t in named.items()}

        record(0)
        start = None
        for step in range(job.n_steps):
            batch = _to_device(_slice_batch(job.batch_fn(step, runs, gen), 0), job.dev)
            loss = job.loss_fn(model, batch)
            if loss.ndim != 0:
                raise ValueError(f"loss_fn must return a scalar; got shape {tuple(loss.shape)}")
            _check_finite(
                loss.detach().reshape(1), step, job.label, job.config, start, job.first_run + r
            )
            if start is None:
                start = loss.detach().reshape(1).clone()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            grads = [p.grad for p in named.values() if p.grad is not None]
            # grads is non-empty (backward() succeeded), so the sum is a tensor, never int 0
            gnorm = torch.sqrt(cast(torch.Tensor, sum(g.pow(2).sum() for g in grads)))
            if job.config.grad_clip is not None:
                scale = min(1.0, job.config.grad_clip / (float(gnorm) + 1e-12))
                for g in grads:
                    g.mul_(scale)
            opt.step()
            sched.step()
            loss_hist[r, step] = loss.detach().cpu()
            gnorm_hist[r, step] = gnorm.detach().cpu()
            record(step + 1)
            bar.update(r * job.n_steps + step + 1, loss=float(loss_hist[r, step]))
        final = {n: t.detach().unsqueeze(0) for n, t in named.items()}
        _check_params(final, job.n_steps, job.label, job.config, job.first_run + r)
        per_run_evals.append(evals)
        per_run_ckpt.append(ckpts)
    params = {
        n: torch.stack([dict(m.named_parameters())[n].detach().cpu() for m in job.models])
        for n in dict(job.models[0].named_parameters())
    }
    buffers = {
        n: torch.stack([dict(m.named_buffers())[n].detach().cpu() for m in job.models])
        for n in dict(job.models[0].named_buffers())
    }
    stacked: dict[str, torch.Tensor] = {}
    if job.eval_fn is not None and per_run_evals[0]:
        for k in per_run_evals[0][0]:
            stacked[k] = torch.stack(
                [torch.stack([rec[k] for rec in run]) for run in per_run_evals]
            ).cpu()
    checkpoints = {
        s: {n: torch.stack([c[s][n] for c in per_run_ckpt]) for n in per_run_ckpt[0][s]}
        for s in per_run_ckpt[0]
    }
    return params, buffers, loss_hist, gnorm_hist, stacked, checkpoints
