"""Part III benchmarks: the stage-wise run of Varre et al. 2025, Sec. 5.

Measures, on the paper's setting (S = 5, n = 3, T = 32, alpha = 0.5, two heads, d = 5,
Adam lr 0.01, batch 128):

* steps per second of one run (data sampling included) and the implied cost of the
  2^14-step run of the paper;
* batched against looped seeds: R seeds trained as one vmapped program
  (``train_runs(batched=True)``) versus the plain loop over runs (``batched=False``), with the
  same number of optimiser steps per seed, measured in the same process after a warm-up,
  best of ``REPEATS`` interleaved repeats each;
* throughput of the exact fast sampler (:func:`ccmc_lite.ngram.sample_urn`), best of
  ``REPEATS`` draws of 32768 sequences;
* the FLOP limit of one run-step (forward and backward of one model on its batch of 128 at
  the matmul peak, ``bench_limits.run_step_limit``) and the sampler's share of a run-step:
  together they bound the ratio any batched path can reach against the loop on this machine
  (``part3_ratio_ceiling``); the roofline with bytes moved is reported too;
* the bound that per-step overhead sets at a small number of runs: the batched program's
  step at R = 1 costs more than one looped run-step (vmap adds work per operation), and a
  step at R runs costs at least that much, so the ratio at R runs cannot exceed
  ``R * looped run-step / batched step at R = 1`` (``part3_overhead_bound``). At the book's
  R = 4 seeds this bound, not the FLOPs, is what limits the ratio; the ratio is therefore
  also measured at ``R = 25``, the size of ch. 5's sweep at the paper's settings
  (``part3_ratio_by_runs``).

Run standalone: ``python benchmarks/bench_part3.py`` (``--quick`` for a short run).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time

import torch
from bench_limits import run_step_limit
from profiling import round_ratios, timed_rounds, top_ops, train_looped

from ccmc_lite.core import TrainConfig, train_runs
from ccmc_lite.ngram import NGramStream, NGramTask, SimplifiedTransformer, make_loss_fn, sample_urn

TASK = NGramTask(S=5, n=3, T=32, alpha=0.5)
REPEATS = 3  # interleaved repeats of each timed path; the best counts


def train_seconds(n_runs: int, steps: int, batched: bool, device: str = "cpu") -> float:
    """Seconds of ``train_runs`` for ``n_runs`` runs of ``steps`` steps at Sec. 5's settings."""
    config = TrainConfig(steps=steps, lr=0.01, optimizer="adam")
    result = (train_runs if batched else train_looped)(
        lambda: SimplifiedTransformer(5, 32, 2),
        make_loss_fn(),
        NGramStream(TASK, 128),
        n_runs=n_runs,
        config=dataclasses.replace(config, progress=False, device=device),
        seed=0,
    )
    return result.seconds  # ends with the final weights copied back to the CPU (a sync)


def run(quick: bool = False) -> dict:
    """Measure the Part III stage-wise training; returns a flat dict of named numbers."""
    torch.set_num_threads(1)  # tiny tensors: one thread is fastest (and comparable)
    steps = 60 if quick else 400
    seeds = 4
    train_seconds(1, 10, True)  # warm-up (allocator, vmap tracing)
    train_seconds(1, 10, False)
    times = timed_rounds(
        REPEATS,
        one=lambda: train_seconds(1, steps, True),
        batched=lambda: train_seconds(seeds, steps, True),
        looped=lambda: train_seconds(seeds, steps, False),
    )
    one, batched, looped = (min(times[k]) for k in ("one", "batched", "looped"))
    ratio_by_runs = {seeds: round(looped / batched, 2)}
    many, few = 25, max(steps // 4, 20)  # ch. 5's (T, alpha) sweep at paper settings: 5 x 5
    many_times = timed_rounds(
        REPEATS,
        batched=lambda: train_seconds(many, few, True),
        looped=lambda: train_seconds(many, few, False),
    )
    ratio_by_runs[many] = round(min(many_times["looped"]) / min(many_times["batched"]), 2)
    per_round = {
        seeds: round_ratios(times, "looped", "batched"),
        many: round_ratios(many_times, "looped", "batched"),
    }
    n_seq = 4096 if quick else 32768

    def draw() -> float:
        gen = torch.Generator().manual_seed(0)
        start = time.perf_counter()
        sample_urn(TASK, (n_seq,), generator=gen)
        return time.perf_counter() - start

    sampling = min(timed_rounds(REPEATS, draw=draw)["draw"])  # best of REPEATS, like the rest
    steps_per_s = steps / one
    top = top_ops(lambda: train_seconds(seeds, 20, True))
    model, loss_fn = SimplifiedTransformer(5, 32, 2), make_loss_fn()
    gen = torch.Generator().manual_seed(0)
    batch = tuple(t[0] for t in NGramStream(TASK, 128)(0, torch.arange(1), gen))
    limit = run_step_limit(lambda: loss_fn(model, batch).backward())
    looped_ms = 1000 * looped / (seeds * steps)
    sample_ms = 1000 * sampling / n_seq * 128  # drawing one run's batch of 128 sequences
    return {
        "part3_steps_timed": steps,
        "part3_single_run_steps_per_s": round(steps_per_s, 2),
        "part3_paper_run_2p14_steps_estimated_s": round(2**14 / steps_per_s, 1),
        "part3_seeds": seeds,
        "part3_repeats": REPEATS,
        "part3_batched_seeds_steps_per_s": round(steps / batched, 2),
        "part3_looped_seeds_steps_per_s": round(steps / looped, 2),
        "part3_batched_vs_looped_speedup": round(looped / batched, 2),
        "part3_batched_seed_steps_per_s": round(seeds * steps / batched, 2),
        "part3_urn_sampler_sequences_per_s": round(n_seq / sampling, 0),
        "part3_batched_top_ops": top,
        "part3_batched_ms_per_run_step": round(1000 * batched / (seeds * steps), 4),
        "part3_looped_ms_per_run_step": round(looped_ms, 4),
        "part3_run_step_gflop": round(limit["work"].flops / 1e9, 5),
        "part3_run_step_roofline_ms": round(1000 * limit["limit_s"], 4),
        "part3_run_step_flop_limit_ms": round(1000 * limit["flop_limit_s"], 4),
        "part3_sampling_ms_per_run_step": round(sample_ms, 4),
        "part3_ratio_ceiling": round(looped_ms / (1000 * limit["flop_limit_s"] + sample_ms), 1),
        "part3_batched_ms_per_step_one_run": round(1000 * one / steps, 4),
        "part3_overhead_bound": round(seeds * looped_ms / (1000 * one / steps), 2),
        "part3_ratio_by_runs": ratio_by_runs,
        "part3_ratio_per_round_by_runs": per_round,
        "part3_threads": torch.get_num_threads(),
    }


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
