"""The reference the batched trainer is checked against: each run trained on its own.

:func:`train_looped` trains the runs of a :func:`ccmc_lite.core.train_runs` call one after
another, one model and one optimiser each, with ordinary autograd. It follows the same
conventions (run ``r`` initialised under ``derive_seed(seed, r, 0)``; the global generator
forked under ``derive_seed(seed, first_run, 2)``) except one: run ``r`` draws its data from
its own generator, ``derive_seed(seed, r, 1)``, so the two agree (to rounding) for a
``batch_fn`` whose data depend on the run indices alone. The benchmarks use it as the
per-run baseline.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any, cast

import torch
from torch import nn

from ccmc_lite.core import TrainConfig, TrainResult, derive_seed, lr_schedule, resolve_device

__all__ = ["train_looped"]


def _slice(batch: Any, i: int) -> Any:
    if isinstance(batch, torch.Tensor):
        return batch[i]
    if isinstance(batch, dict):
        return {k: _slice(v, i) for k, v in batch.items()}
    return type(batch)(_slice(v, i) for v in batch)


def train_looped(
    make_model: Callable[[], nn.Module],
    loss_fn: Callable[..., torch.Tensor],
    batch_fn: Callable[[int, torch.Tensor, torch.Generator], Any],
    *,
    n_runs: int,
    config: TrainConfig,
    seed: int,
    eval_fn: Callable[..., dict[str, torch.Tensor]] | None = None,
) -> TrainResult:
    """Train the runs one after another; the result has the batched trainer's layout."""
    first, n_steps, dev = config.first_run, config.n_steps, resolve_device(config.device)
    start_time = time.perf_counter()
    eval_steps = [s for s in config.eval_steps() if s <= n_steps]
    loss_hist, gnorm_hist = torch.empty(n_runs, n_steps), torch.empty(n_runs, n_steps)
    models, evals, ckpts = [], [], []
    with torch.random.fork_rng(devices=[]):
        for r in range(first, first + n_runs):
            torch.random.default_generator.manual_seed(derive_seed(seed, r, 0))
            models.append(make_model().to(dev))
        torch.random.default_generator.manual_seed(derive_seed(seed, first, 2))
        for i, model in enumerate(models):
            own = config
            if config.lr_scale is not None:
                own = dataclasses.replace(config, lr=config.lr * config.lr_scale[i])
            named = dict(model.named_parameters())
            opt = own.make_optimizer(list(named.values()))
            sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_schedule(own))
            gen = torch.Generator().manual_seed(derive_seed(seed, first + i, 1))
            runs = torch.tensor([first + i])
            run_evals: list[dict[str, torch.Tensor]] = []
            run_ckpts: dict[int, dict[str, torch.Tensor]] = {}

            def record(step: int, model: nn.Module = model, evs: list = run_evals,
                       cks: dict = run_ckpts, named: dict = named) -> None:  # fmt: skip
                if eval_fn is not None and step in eval_steps:
                    with torch.no_grad():
                        evs.append({k: v.detach() for k, v in eval_fn(model, step).items()})
                if step in config.checkpoint_steps:
                    cks[step] = {n: t.detach().cpu().clone() for n, t in named.items()}

            record(0)
            for step in range(n_steps):
                batch = _slice(batch_fn(step, runs, gen), 0)
                loss = loss_fn(model, batch)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                grads = [p.grad for p in named.values() if p.grad is not None]
                gnorm = torch.sqrt(cast(torch.Tensor, sum(g.pow(2).sum() for g in grads)))
                if config.grad_clip is not None:
                    for g in grads:
                        g.mul_(min(1.0, config.grad_clip / (float(gnorm) + 1e-12)))
                opt.step()
                sched.step()
                loss_hist[i, step], gnorm_hist[i, step] = loss.detach(), gnorm.detach()
                record(step + 1)
            evals.append(run_evals)
            ckpts.append(run_ckpts)
    stack = torch.stack
    return TrainResult(
        params={n: stack([dict(m.named_parameters())[n].detach().cpu() for m in models])
                for n in dict(models[0].named_parameters())},
        buffers={n: stack([dict(m.named_buffers())[n].detach().cpu() for m in models])
                 for n in dict(models[0].named_buffers())},
        loss=loss_hist,
        grad_norm=gnorm_hist,
        eval_steps=eval_steps,
        evals={k: stack([stack([e[k] for e in run]) for run in evals]).cpu()
               for k in (evals[0][0] if evals and evals[0] else {})},
        checkpoints={s: {n: stack([c[s][n] for c in ckpts]) for n in ckpts[0][s]}
                     for s in ckpts[0]},
        seconds=time.perf_counter() - start_time,
        config=config,
        template=models[0],
    )  # fmt: skip
