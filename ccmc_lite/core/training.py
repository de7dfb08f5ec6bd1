"""The book's one training loop: ``R`` independent runs of a model, trained as one program.

:func:`~ccmc_lite.core.train_runs` stacks the parameters of ``R`` freshly initialised models
and takes every step for all of them at once (:func:`~ccmc_lite.core.over_runs`). Adam, AdamW
and SGD update each parameter entry on its own, so one optimiser on the stacked tensors
performs exactly the ``R`` separate updates, and ``d(sum of losses)/d(theta_r) =
dL_r/d(theta_r)``: the runs stay independent. An update is the learning rate times a
direction that does not depend on it, so runs with their own rates (``config.lr_scale``)
share the program too.

* ``make_model()`` builds one model; run ``r`` is built under ``derive_seed(seed, r, 0)``,
  so its initialisation does not depend on ``R``.
* ``batch_fn(step, runs, generator)`` returns the batch of the runs ``runs`` (a CPU ``long``
  tensor of run indices counted from ``config.first_run``): a tensor, or a tuple/dict of
  tensors, with leading dimension ``R``. ``generator`` (CPU: the same data on every device)
  is seeded ``derive_seed(seed, first, 1)`` for a program whose first run is ``first``, so
  the data depend on how a sweep is split into programs (shards, ``config.first_run``).
* A step runs forward and backward a few runs at a time (``config.runs_per_pass``) to keep
  a pass's attention scores in cache; each run's gradient is the same sum, so the split
  changes at most the last bits (a pass's size may select another BLAS kernel).
* ``loss_fn(model, batch)`` is one run's loss on its slice of the batch, a scalar tensor.
* ``eval_fn(model, step)`` (optional) returns a dict of scalar tensors, evaluated without
  gradients at ``config.eval_steps()``.

Randomness drawn inside a model (dropout) comes from torch's global generator, seeded
``derive_seed(seed, first, 2)`` and restored afterwards: same seed, same numbers, and the
caller's global state left as it was.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import operator
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn
from torch.func import stack_module_state

from .batched import TrainResult, over_runs
from .devices import resolve_device
from .progress import TextProgress
from .seeding import derive_seed
from .train_config import TrainConfig, lr_schedule
from .validation import DivergenceError, check_callable, check_instance, check_seed, check_size

__all__ = ["train_runs"]

Batch = Any  # a tensor, or a (nested) tuple/list/dict of tensors with leading run axis
#: Bytes one pass's block of attention scores may take: the runs of a step are split into
#: passes (``TrainConfig.runs_per_pass``) so that the score blocks stay in the CPU's cache.
PASS_BYTES = 32 * 2**20
#: Queries per score block of the package's attention (``markov.ATTENTION_BLOCK`` is this).
ATTENTION_QUERIES = 64


def train_runs(
    make_model: Callable[[], nn.Module],
    loss_fn: Callable[..., torch.Tensor],
    batch_fn: Callable[[int, torch.Tensor, torch.Generator], Batch],
    *,
    n_runs: int,
    config: TrainConfig,
    seed: int,
    eval_fn: Callable[..., dict[str, torch.Tensor]] | None = None,
) -> TrainResult:
    """Train ``n_runs`` independent copies of a model (see the module docstring) with the
    settings of ``config`` (a :class:`~ccmc_lite.core.TrainConfig`); returns a
    :class:`~ccmc_lite.core.TrainResult` whose leading axis is the run.

    Raises :class:`~ccmc_lite.core.DivergenceError` (a ``FloatingPointError`` and a
    ``ValueError``) if a run's loss becomes NaN or infinite, rises more than
    ``config.max_loss_rise`` times above its first value, or its parameters are non-finite
    after the last update; the message names the step, the run and the setting.
    """
    n_runs = check_size("n_runs", n_runs, limit=10**5)
    seed = check_seed(seed)
    check_instance("config", config, TrainConfig)
    for name, fn in (("make_model", make_model), ("loss_fn", loss_fn), ("batch_fn", batch_fn)):
        check_callable(name, fn)
    if eval_fn is not None:
        check_callable("eval_fn", eval_fn)
    if config.lr_scale is not None and len(config.lr_scale) != n_runs:
        raise ValueError(
            f"config.lr_scale must hold one factor per run ({n_runs}); got {len(config.lr_scale)}"
        )
    first, n_steps, dev = config.first_run, config.n_steps, resolve_device(config.device)
    models = _build_models(make_model, n_runs, seed, dev, first)
    template = copy.deepcopy(models[0]).to("cpu")
    start_time = time.perf_counter()
    params, buffers = stack_module_state(models)  # name -> (R, ...), leaf tensors
    leaves = list(params.values())
    batched_loss = over_runs(models[0], _checked_loss(loss_fn), randomness="different")
    opt = config.make_optimizer(leaves)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_schedule(config))
    # lr_scale: after a step from theta to theta', run r moves to theta + s_r (theta' - theta)
    lerp = []  # per leaf, (R, 1, ..., 1) weights 1 - s_r of theta'.lerp_(theta, 1 - s_r)
    if config.lr_scale is not None:
        s = torch.tensor(config.lr_scale, dtype=torch.float64, device=dev)  # (R,)
        lerp = [(1 - s).to(t.dtype).view(-1, *([1] * (t.ndim - 1))) for t in leaves]
    gen = torch.Generator()  # data are drawn on the CPU: the same numbers on every device
    gen.manual_seed(derive_seed(seed, first, 1))
    runs = torch.arange(first, first + n_runs)  # (R,) global run indices
    loss_hist, gnorm_hist = torch.empty(n_runs, n_steps), torch.empty(n_runs, n_steps)
    eval_steps = [s for s in config.eval_steps() if s <= n_steps]
    evals: list[dict[str, torch.Tensor]] = []
    checkpoints: dict[int, dict[str, torch.Tensor]] = {}
    bar = TextProgress(
        n_steps, label=config.label, updates=config.progress_updates, enabled=config.progress
    )

    def record(step: int) -> None:
        if eval_fn is not None and step in eval_steps:
            batched_eval = over_runs(models[0], lambda call: eval_fn(call, step))
            with torch.no_grad():
                evals.append(batched_eval(params, buffers))
        if step in config.checkpoint_steps:
            checkpoints[step] = {n: t.detach().cpu().clone() for n, t in params.items()}

    with _forked_global_rng() as reseed:
        reseed(derive_seed(seed, first, 2))  # randomness drawn inside the model
        record(0)
        first_loss, passes = None, None
        for step in range(n_steps):
            batch = _map(lambda t: t.to(dev), batch_fn(step, runs, gen))
            lead = _leading_dims(batch)  # (first dimension, elements per run) of each tensor
            if not lead or lead[0][0] != n_runs:
                got = lead[0][0] if lead else -1
                what = "batch_fn must return tensors with leading dimension n_runs"
                raise ValueError(f"{what}={n_runs}; got {got}")
            if passes is None:  # chosen from the first batch
                tokens = max(per_run for _, per_run in lead)
                passes = _passes(config.runs_per_pass, tokens, n_runs, dev, template)
            opt.zero_grad(set_to_none=True)
            parts = []
            for sl in passes:  # one forward and backward per pass; gradients add up in place
                part = batched_loss(*_map(operator.itemgetter(sl), (params, buffers, batch)))
                if part.ndim != 1:
                    raise ValueError(f"loss_fn must return a scalar; got {tuple(part.shape[1:])}")
                part.sum().backward()  # runs are independent: d(sum)/d(theta_r) = dL_r/d(theta_r)
                parts.append(part.detach())
            losses = torch.cat(parts)  # (R,)
            _stop_if(~torch.isfinite(losses), "non-finite training loss", step, config)
            if first_loss is None:
                first_loss = losses.clone()
            elif config.max_loss_rise is not None:  # the divergence guard
                limit = config.max_loss_rise * first_loss.abs().clamp(min=1.0)
                what = f"training loss rose more than max_loss_rise={config.max_loss_rise} times"
                _stop_if(losses - first_loss > limit, f"{what} its first value", step, config)
            grads = [t.grad if t.grad is not None else torch.zeros_like(t) for t in leaves]
            sq = torch.stack([g.reshape(n_runs, -1).pow(2).sum(1) for g in grads]).sum(0)
            gnorm = sq.sqrt()  # (R,)
            if config.grad_clip is not None:
                scale = (config.grad_clip / (gnorm + 1e-12)).clamp(max=1.0)
                for g in grads:
                    g.mul_(scale.view(-1, *([1] * (g.ndim - 1))))
            before = [t.detach().clone() for t in leaves] if lerp else []
            opt.step()
            if lerp:
                with torch.no_grad():
                    for t, old, w in zip(leaves, before, lerp, strict=True):
                        t.lerp_(old, w)
            sched.step()
            loss_hist[:, step] = losses.cpu()
            gnorm_hist[:, step] = gnorm.detach().cpu()
            record(step + 1)
            bar.update(step + 1, loss=float(loss_hist[:, step].mean()))
    for name, t in params.items():  # non-finite parameters stop it after the last update too
        finite = torch.isfinite(t.detach()).reshape(n_runs, -1).all(1)
        _stop_if(~finite, f"non-finite parameter {name!r}", n_steps, config)
    stacked = {k: torch.stack([e[k] for e in evals], dim=-1).cpu() for k in (evals or [{}])[0]}
    return TrainResult(
        params={n: t.detach().cpu() for n, t in params.items()},
        buffers={n: t.detach().cpu() for n, t in buffers.items()},
        loss=loss_hist,
        grad_norm=gnorm_hist,
        eval_steps=eval_steps,
        evals=stacked,
        checkpoints=checkpoints,
        seconds=time.perf_counter() - start_time,
        config=config,
        template=template,
    )


def _build_models(
    make_model: Callable[[], nn.Module], n_runs: int, seed: int, device: torch.device, first: int
) -> list[nn.Module]:
    models = []
    with _forked_global_rng() as reseed:  # one fork for all runs, restored after the loop
        for r in range(first, first + n_runs):
            reseed(derive_seed(seed, r, 0))
            model = make_model()
            if not isinstance(model, nn.Module):
                raise TypeError(f"make_model must return a torch.nn.Module; got {type(model)}")
            tensors = [*model.parameters(), *model.buffers()]
            models.append(model if all(t.device == device for t in tensors) else model.to(device))
    if not list(models[0].parameters()):
        raise ValueError("make_model returned a module without parameters")
    return models


@contextlib.contextmanager
def _forked_global_rng() -> Iterator[Callable[[int], None]]:
    """Fork torch's global generators (restored on exit); yields ``reseed(seed)``, which
    seeds only the CPU's and CUDA's (``torch.manual_seed`` also seeds absent devices')."""
    cuda = torch.cuda.is_available()
    with torch.random.fork_rng(devices=[torch.cuda.current_device()] if cuda else []):

        def reseed(seed: int) -> None:
            torch.random.default_generator.manual_seed(seed)
            if cuda:
                torch.cuda.manual_seed_all(seed)

        yield reseed


def _stop_if(bad: torch.Tensor, what: str, step: int, config: TrainConfig) -> None:
    """Raise :class:`DivergenceError` naming the runs where ``bad`` (shape ``(R,)``) holds."""
    if bool(bad.any()):
        runs = (bad.nonzero().flatten() + config.first_run).tolist()
        raise DivergenceError(
            f"{what} at step {step} in run(s) {runs[:10]}"
            f"{' of ' + config.label if config.label else ''}; setting: lr={config.lr}, "
            f"optimizer={config.optimizer}, schedule={config.schedule}, "
            f"weight_decay={config.weight_decay}. Lower the learning rate (lr, or lr_scale "
            "of these runs) or check the model."
        )


def _passes(
    runs_per_pass: int | None, tokens: int, n_runs: int, device: torch.device, model: nn.Module
) -> list[slice]:
    """Slices of the run axis of ``runs_per_pass`` runs; ``None``: on the CPU, as many as
    keep a pass's block of attention scores (``4 * ATTENTION_QUERIES`` bytes per token of a
    run's batch, ``tokens``) in ``PASS_BYTES``; one pass for dropout, whose draws would
    depend on the split."""
    size = runs_per_pass
    if size is None:
        random = any(isinstance(m, nn.Dropout) and m.p > 0 for m in model.modules())
        if device.type != "cpu" or random:
            size = n_runs
        else:
            size = PASS_BYTES // (4 * ATTENTION_QUERIES * tokens)
    starts = list(range(0, n_runs, max(size, 2)))
    if len(starts) > 1 and n_runs - starts[-1] == 1:
        starts.pop()  # no pass of one run: a lone run takes other kernels (other rounding)
    return [slice(a, b) for a, b in zip(starts, [*starts[1:], n_runs], strict=True)]


def _map(fn: Callable[[torch.Tensor], Any], x: Batch) -> Batch:
    """``fn`` applied to every tensor of ``x`` (a tensor, or a dict/tuple/list of them)."""
    if isinstance(x, torch.Tensor):
        return fn(x)
    if isinstance(x, dict):
        return {k: _map(fn, v) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return type(x)(_map(fn, v) for v in x)
    raise TypeError(
        "batch_fn must return tensors (or tuples/dicts of tensors); found a "
        f"{type(x).__name__} ({x!r:.60})"
    )


def _leading_dims(batch: Batch) -> list[tuple[int, int]]:
    """``(first dimension, elements per run)`` of every tensor of ``batch``, in order."""
    out: list[tuple[int, int]] = []
    _map(lambda t: out.append((int(t.shape[0]), t[0].numel()) if t.ndim else (-1, 1)), batch)
    return out


def _checked_loss(loss_fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``loss_fn`` whose result is checked: one scalar tensor that autograd can follow."""

    @functools.wraps(loss_fn)
    def checked(model: Callable[..., Any], batch: Batch) -> torch.Tensor:
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
        if loss.numel() == 1:
            return loss
        shape = tuple(loss.shape)
        raise ValueError(f"loss_fn must return a scalar tensor (e.g. a mean); got shape {shape}")

    return checked
