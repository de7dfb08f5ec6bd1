"""Many runs of one model as one program: stacked parameters, and every run evaluated at once.

The three papers report averages over seeds and sweeps over settings (Makkuva et al. 2024,
Figs. 3-4: five runs per ``(p, q)`` cell; Varre et al. 2025, Sec. 5: several seeds). The
book stacks the parameters of ``R`` copies of a model along a new leading axis and
evaluates all of them at once with :func:`torch.func.vmap` over
:func:`torch.func.functional_call` (:func:`~ccmc_lite.core.over_runs`): the program
:func:`~ccmc_lite.core.train_runs` trains, and a :class:`TrainResult` is what it returns.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.func import functional_call, vmap

from .train_config import TrainConfig
from .validation import check_choice, check_int

__all__ = ["TrainResult", "over_runs"]


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


@dataclass
class TrainResult:
    """What :func:`train_runs` returns; the leading axis ``R`` is the run everywhere.

    Attributes
    ----------
    params, buffers : dict
        Final stacked parameters and buffers, ``name -> (R, ...)``.
    loss, grad_norm : Tensor
        ``(R, steps)``: the training loss of each update's forward pass and the gradient norm
        before clipping (``(R, stop_after)`` for a prefix).
    eval_steps : list of int
        Steps at which ``evals`` (``name -> (R, len(eval_steps))``) were recorded.
    evals, checkpoints : dict
        The evaluations, and ``step -> {name: (R, ...)}``.
    seconds : float
        Wall-clock training time.
    config : TrainConfig
        The settings the runs trained with.
    template : nn.Module
        A model of the runs' architecture (its parameters are not the runs').
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

    @property
    def n_runs(self) -> int:
        return int(self.loss.shape[0])

    def params_at(self, step: int | None = None) -> dict[str, torch.Tensor]:
        """Stacked parameters ``name -> (R, ...)`` after ``step`` updates (default: final)."""
        if step is None:
            return self.params
        if check_int("step", step, minimum=0) not in self.checkpoints:
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
        for i, arg in enumerate(args):
            if isinstance(arg, torch.Tensor) and (arg.ndim == 0 or arg.shape[0] != self.n_runs):
                raise ValueError(
                    f"args[{i}] must have a leading run axis of {self.n_runs}; "
                    f"got shape {tuple(arg.shape)}"
                )
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
