"""How far is one Part II training step at the paper's settings from this machine's limit?

Makkuva et al. (2024, Table 1) train a one-layer transformer with ``d = 4`` on sequences of
``N = 1024`` binary tokens, batch 16. The step is dominated by causal attention over 1024
positions with a head size of 4: tiny matrix products (inner dimension 4) and many
exponentials, so it is far from a large matmul's throughput by construction. This script
measures, in one process and interleaved so that machine load affects all of them alike:

* the step itself (``ccmc_lite.markov.train_markov``, one run, forward + backward + Adam);
* the machine's *compute peak*: a large float32 matmul (GFLOP/s);
* the machine's *memory peak*: a large tensor copy (GB/s, read + write);
* the step's work, counted by running one forward + backward under
  ``tools.costs.count_work`` (counters over every ATen operation): FLOPs of the matrix
  products (``torch.utils.flop_counter``), element-wise operations (one FLOP per output element,
  exponentials included) and bytes moved (every operand read once and every result written
  once, i.e. no cache reuse: an upper bound on the traffic of this implementation).

The step's largest operations, by input shape, are reported too (``paper_step_top_ops_by_shape``),
and so is what the width ``N = 1024`` itself costs: the last attention block's score matrix has
rows 4096 bytes apart, and two of its products run several times slower per column than at
widths 1008 or 1040 (``row_stride_penalty``, measured on bare products). Computing them
transposed, or padding the block with masked zero keys, changes the rounding of the products
that sum over keys on some CPUs, and with it the stored Part II runs, so
:func:`ccmc_lite.markov.blocked_causal_attention` leaves the block as it is.

The *limit* of the step is ``max(FLOPs / compute peak, bytes / memory peak)`` (a roofline
bound); the *achieved fraction* is limit / measured step time. A fused attention kernel would
move far fewer bytes; the *ideal* line uses the minimum work of exact causal attention
(scores, softmax and weighted sum each computed once, nothing but inputs and outputs moved).

    python benchmarks/bench_limits.py
"""

from __future__ import annotations

import json
import math
import os
import time

import torch
from profiling import top_ops

from ccmc_lite.markov import (
    ATTENTION_BLOCK,
    binary_kernel,
    build_model,
    next_token_loss,
    sample_chains,
)
from tools.costs import Hardware, Work, count_work, roofline_seconds, roofline_terms

PAPER = dict(K=2, d=4, N=1024, batch=16)


def _best_of(fn, repeats: int) -> float:
    """Smallest CPU time of ``repeats`` calls (seconds of this process, one thread)."""
    best = math.inf
    for _ in range(repeats):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def matmul_peak(n: int = 2048, repeats: int = 5) -> float:
    """Measured float32 matmul throughput of an ``n x n`` product (FLOP/s)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)  # warm-up
    return 2 * n**3 / _best_of(lambda: torch.mm(a, b), repeats)


def copy_peak(n_bytes: int = 256 * 2**20, repeats: int = 5) -> float:
    """Measured memory bandwidth of a large copy, bytes read + written per second."""
    src = torch.empty(n_bytes // 4).uniform_()
    dst = torch.empty_like(src)
    dst.copy_(src)
    return 2 * n_bytes / _best_of(lambda: dst.copy_(src), repeats)


def this_machine(flops_peak: float, bytes_peak: float) -> Hardware:
    """This machine's measured peaks as a ``Hardware`` (no per-operation cost counted)."""
    return Hardware("this machine, one core", flops_peak, bytes_peak, 0.0, "measured here")


def run_step_limit(fn, repeats: int = 3) -> dict[str, object]:
    """Roofline limit of ``fn()`` on this machine (one core): seconds, and the work counted.

    ``limit_s = max(FLOPs / matmul peak, bytes / copy peak)``; the bytes assume no cache
    reuse, so a fused implementation could go below it, never below ``flop_limit_s``.
    """
    work = count_work(fn)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        flops_peak = max(matmul_peak(2048) for _ in range(repeats))
        bytes_peak = max(copy_peak() for _ in range(repeats))
    finally:
        torch.set_num_threads(threads)
    terms = roofline_terms(work, this_machine(flops_peak, bytes_peak))
    return {"work": work, "flop_limit_s": terms["arithmetic"], "limit_s": max(terms.values())}


def step_work(model: torch.nn.Module, x: torch.Tensor) -> Work:
    """The work of one forward + backward of ``model`` on the batch ``x``."""
    return count_work(lambda: next_token_loss(model, x).backward())


def row_stride_penalty(calls: int = 20, repeats: int = 5) -> dict:
    """Cost per column of the last attention block's products, at and around width ``N``.

    The blocked attention's last block multiplies ``ATTENTION_BLOCK`` queries by all ``N``
    keys (the paper's batch and head size). At ``N = 1024`` its score matrix has rows 4096
    bytes apart, a multiple of the CPU cache's set stride, and two of its products run
    several times slower per column than at widths 16 smaller or larger: ``q @ kᵀ``
    (forward, the ``block x w`` result) and ``attᵀ @ g`` (the gradient of ``v``, reading
    the scores by columns). Returns µs per call for each width and the ratio of the
    per-column cost at ``N`` to the mean of the others.
    """
    B, N, m, b = PAPER["batch"], PAPER["N"], PAPER["d"], ATTENTION_BLOCK
    widths = (N - 16, N, N + 16)
    products = {  # the two products, as functions of (q, k, att)
        "scores": lambda q, k, att: q @ k.transpose(-1, -2),  # (B, b, w)
        "grad_v": lambda q, k, att: att.transpose(-1, -2) @ q,  # (B, w, m)
    }
    gen = torch.Generator().manual_seed(0)
    out: dict[str, object] = {}
    for name, product in products.items():
        per_call = {}
        for w in widths:
            args = (
                torch.randn(B, b, m, generator=gen),  # q
                torch.randn(B, w, m, generator=gen),  # k
                torch.randn(B, b, w, generator=gen),  # att
            )

            def many(product=product, args=args) -> None:
                for _ in range(calls):
                    product(*args)

            many()  # warm-up
            per_call[w] = 1e6 * _best_of(many, repeats) / calls
        per_column = {w: t / w for w, t in per_call.items()}
        others = [v for w, v in per_column.items() if w != N]
        penalty = per_column[N] / (sum(others) / len(others))
        out[f"{name}_product_us_by_width"] = {str(w): round(t, 1) for w, t in per_call.items()}
        out[f"{name}_product_penalty_at_{N}"] = round(penalty, 2)
    return out


def ideal_attention_work(batch: int, n: int, head: int) -> Work:
    """Minimum work of exact causal attention, forward + backward (about 3x the forward).

    Forward: ``n(n+1)/2`` scores per sequence, each a ``head``-long dot product (2·head FLOPs),
    one exponential and a division, and a weighted sum (2·head FLOPs per pair). Bytes: the
    inputs ``Q, K, V`` and output, float32, read/written once (a fused kernel never stores the
    scores).
    """
    pairs = batch * n * (n + 1) / 2
    forward = pairs * (4 * head + 3)
    return Work(matmul_flops=3 * forward, elementwise_flops=0.0,
                bytes=3 * 4 * 4 * batch * n * head, ops=0)  # fmt: skip


def run(quick: bool = False) -> dict[str, float]:
    """Measure the paper-setting step against the machine's compute and memory peaks."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one core, CPU time: other processes on the machine do not count
    try:
        return _measure(quick)
    finally:
        torch.set_num_threads(threads)


def _measure(quick: bool) -> dict[str, float]:
    torch.manual_seed(0)
    steps = 2 if quick else 5
    repeats = 2 if quick else 3
    options = dict(K=PAPER["K"], d=PAPER["d"], N=PAPER["N"], tied=True)
    model = build_model(**options)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(0)
    x = sample_chains(binary_kernel(0.2, 0.3), PAPER["batch"], PAPER["N"] + 1, generator=gen)

    def step() -> None:  # forward, backward and AdamW update of the paper's model
        optimizer.zero_grad()
        next_token_loss(model, x).backward()
        optimizer.step()

    step()  # warm-up
    rounds, flops_peak, bytes_peak = [], 0.0, 0.0
    for _ in range(repeats):  # interleaved, best of each
        rounds.append(_best_of(step, steps))
        flops_peak = max(flops_peak, matmul_peak(1024 if quick else 2048))
        bytes_peak = max(bytes_peak, copy_peak())
    step_s = min(rounds)
    top = top_ops(lambda: [step() for _ in range(2)], n=8, by_shape=True)
    penalty = row_stride_penalty() if not quick else {}
    work = step_work(model, x)
    machine = this_machine(flops_peak, bytes_peak)
    terms = roofline_terms(work, machine)
    limit = max(terms.values())
    ideal = ideal_attention_work(PAPER["batch"], PAPER["N"], PAPER["d"])
    ideal_limit = roofline_seconds(ideal, machine)
    return {
        "paper_step_s": round(step_s, 4),
        "matmul_peak_gflops": round(flops_peak / 1e9, 1),
        "copy_peak_gb_s": round(bytes_peak / 1e9, 1),
        "step_matmul_gflop": round(work.matmul_flops / 1e9, 4),
        "step_elementwise_gflop": round(work.elementwise_flops / 1e9, 4),
        "step_gb_moved": round(work.bytes / 1e9, 3),
        "step_limit_s": round(limit, 4),
        "step_bound": "memory" if terms["memory traffic"] > terms["arithmetic"] else "compute",
        "achieved_fraction_of_limit": round(limit / step_s, 3),
        "times_from_limit": round(step_s / limit, 2),
        "times_from_limit_per_round": [round(s / limit, 2) for s in rounds],
        "ideal_fused_attention_limit_s": round(ideal_limit, 5),
        "times_from_ideal_fused": round(step_s / ideal_limit, 1),
        "paper_step_top_ops_by_shape": top,
        **penalty,
        "threads": 1,
        "timing": "CPU time of this process, best of repeats",
        "load_avg_1min_at_end": round(os.getloadavg()[0], 2),
    }


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
