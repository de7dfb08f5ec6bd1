"""What a training step costs: its work counted per operation, and a roofline lower bound.

A step of the book's models is a few hundred small tensor operations. Three numbers
bound how fast any machine can run it (the *roofline* model, Williams, Waterman and
Patterson 2009, extended by a per-operation cost):

* its floating-point operations against the machine's arithmetic peak;
* the bytes its operations read and write against the machine's memory bandwidth;
* the number of operations against the fixed cost of starting one (on a GPU, eager
  PyTorch's dispatch and kernel launch: microseconds per operation however small it is).

:func:`count_work` runs a step once under two ``TorchDispatchMode``
counters and returns a :class:`Work`;
:func:`roofline_seconds` turns it into the time below which ``runs`` copies
of the step, batched into one program of the same operations, cannot run on a
:class:`Hardware`. The benchmarks use the same counter for this machine's
limit (``benchmarks/bench_limits.py``); the running page uses it to estimate the papers'
sweeps on one GPU, where no GPU was available to measure them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import FlopCounterMode

from ccmc_lite.core.validation import (
    check_callable,
    check_float,
    check_instance,
    check_int,
    check_size,
)

__all__ = ["H100_SXM", "Hardware", "Work", "count_work", "roofline_seconds", "roofline_terms"]


@dataclass(frozen=True)
class Work:
    """The work of one call, counted per ATen operation.

    Attributes
    ----------
    matmul_flops : float
        FLOPs of the matrix products (``torch.utils.flop_counter``: ``2 m n k`` each).
    elementwise_flops : float
        One FLOP per output element of every other operation (exponentials included).
    bytes : float
        Every operand read once and every result written once: no cache reuse, so an
        upper bound on the traffic of this implementation (a fused kernel moves less).
    ops : int
        Operations that compute something (views and aliases are not counted): on a GPU,
        about one kernel launch each.
    """

    matmul_flops: float
    elementwise_flops: float
    bytes: float
    ops: int

    def __post_init__(self) -> None:
        for name in ("matmul_flops", "elementwise_flops", "bytes"):
            object.__setattr__(self, name, check_float(name, getattr(self, name), minimum=0.0))
        object.__setattr__(self, "ops", check_int("ops", self.ops, minimum=0))

    @property
    def flops(self) -> float:
        """All floating-point operations, ``matmul_flops + elementwise_flops``."""
        return self.matmul_flops + self.elementwise_flops


@dataclass(frozen=True)
class Hardware:
    """Peaks of a machine, for :func:`roofline_seconds`.

    Attributes
    ----------
    name : str
        What the numbers describe.
    flops_per_s : float
        Arithmetic peak for the step's precision (float32), FLOP/s.
    bytes_per_s : float
        Memory bandwidth, bytes/s.
    seconds_per_op : float
        Fixed cost of one operation, however small (dispatch and launch).
    source : str
        Where each number comes from.
    """

    name: str
    flops_per_s: float
    bytes_per_s: float
    seconds_per_op: float
    source: str

    def __post_init__(self) -> None:
        check_instance("name", self.name, str)
        check_instance("source", self.source, str)
        check_float("flops_per_s", self.flops_per_s, minimum=0.0, open_lower=True)
        check_float("bytes_per_s", self.bytes_per_s, minimum=0.0, open_lower=True)
        check_float("seconds_per_op", self.seconds_per_op, minimum=0.0)


#: NVIDIA H100 SXM5 (80 GB), the GPU the book's device tests would use: float32 without
#: tensor cores and HBM3 bandwidth from NVIDIA's H100 datasheet; 5 µs per operation is an
#: assumption (eager PyTorch: Python dispatch plus a kernel launch), not a measurement.
H100_SXM = Hardware(
    name="NVIDIA H100 SXM",
    flops_per_s=67e12,
    bytes_per_s=3.35e12,
    seconds_per_op=5e-6,
    source="NVIDIA H100 datasheet (FP32 67 TFLOP/s, HBM3 3.35 TB/s); 5 µs/op assumed",
)


class _Traffic(TorchDispatchMode):
    """Count operations, element-wise FLOPs and the bytes every ATen operation moves."""

    MATMUL_OPS = ("mm", "bmm", "addmm", "baddbmm", "matmul", "_scaled_dot_product")
    METADATA_OPS = (torch.ops.aten.detach.default, torch.ops.aten.alias.default)

    def __init__(self) -> None:
        super().__init__()
        self.bytes = 0
        self.elementwise_flops = 0
        self.ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        if getattr(func, "is_view", False) or func in self.METADATA_OPS:
            return out  # no data moved
        tensors = [t for t in tree_leaves((args, kwargs, out)) if isinstance(t, torch.Tensor)]
        self.ops += 1
        self.bytes += sum(t.numel() * t.element_size() for t in tensors)
        if not any(op in str(func) for op in self.MATMUL_OPS):
            results = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
            self.elementwise_flops += sum(t.numel() for t in results)
        return out


def count_work(fn: Callable[[], Any]) -> Work:
    """Run ``fn()`` once and count its work (e.g. one forward and backward of a model).

    Returns a :class:`Work`. ``fn`` runs for real, so a backward pass accumulates
    gradients as usual.
    """
    check_callable("fn", fn)
    flops = FlopCounterMode(display=False)
    traffic = _Traffic()
    with flops, traffic:
        fn()
    return Work(
        matmul_flops=float(flops.get_total_flops()),
        elementwise_flops=float(traffic.elementwise_flops),
        bytes=float(traffic.bytes),
        ops=traffic.ops,
    )


def roofline_terms(work: Work, hardware: Hardware, runs: int = 1) -> dict[str, float]:
    """The three times that bound ``runs`` batched copies of ``work`` on ``hardware`` (s).

    ``{"arithmetic": runs * flops / flops_per_s, "memory traffic": runs * bytes /
    bytes_per_s, "launches": ops * seconds_per_op}``: batching multiplies the arithmetic and
    the traffic by ``runs`` but keeps the number of operations. The largest term is what
    bounds the step (:func:`roofline_seconds`).
    """
    check_instance("work", work, Work)
    check_instance("hardware", hardware, Hardware)
    runs = check_size("runs", runs)
    return {
        "arithmetic": runs * work.flops / hardware.flops_per_s,
        "memory traffic": runs * work.bytes / hardware.bytes_per_s,
        "launches": work.ops * hardware.seconds_per_op,
    }


def roofline_seconds(work: Work, hardware: Hardware, runs: int = 1) -> float:
    """Seconds below which ``runs`` copies of ``work``, batched into one program, cannot run.

    The largest of :func:`roofline_terms`. It is a lower bound: a real
    implementation also waits on memory latency, small-kernel inefficiency and
    synchronisation.
    """
    return max(roofline_terms(work, hardware, runs).values())
