"""Part II benchmark: the Fig. 4 (p, q) sweep as one batched program versus a loop over runs.

Makkuva et al. (2024, Fig. 4) train several runs per (p, q) cell, tied and untied. The book
trains every run of one architecture as one vmapped program
(:func:`ccmc_lite.markov.train_markov`, on top of
:func:`ccmc_lite.core.train_runs`). This script times exactly that sweep (the book
profile's grid: 6 x 6 cells x 3 seeds, tied and untied, N = 32, batch 16) for a fixed number
of steps in both modes — ``batched=True`` and the per-run loop ``batched=False`` — in one
process, after a warm-up, best of ``REPEATS`` interleaved repeats each, and reports the
ratio. It also measures the full book-profile sweep (800 steps) and a few steps of the paper
profile (N = 1024) to estimate its cost.
The FLOP limit of one run-step (the model's forward and backward on its batch at this
machine's matmul peak, ``bench_limits.run_step_limit``) plus the time to draw that run's batch
bounds the ratio any batched path can reach against the loop here (``fig4_ratio_ceiling``);
the roofline (FLOPs or bytes moved without cache reuse, whichever is slower) is reported too.
Last, the same sweep runs in fresh processes without dev.py's MALLOC_* variables, as a reader
runs it in Binder or Colab: glibc's default allocator against the package's settings
(``allocator_*``; ``tools/allocator.py``, which ``dev.py`` applies to every process).

    python benchmarks/bench_part2.py            # full: about 5 minutes on 2 CPU cores
    python -c "import bench_part2; print(bench_part2.run(quick=True))"
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch
from bench_limits import run_step_limit
from profiling import round_ratios, timed_rounds, train_looped

from ccmc_lite.markov import (
    binary_kernel,
    build_model,
    markov_config,
    next_token_loss,
    sample_chains,
    train_markov,
)

GRID = (0.1, 0.25, 0.4, 0.55, 0.7, 0.85)  # book profile of chapter "The (p, q) phase diagram"
SEEDS = 3
REPEATS = 3  # interleaved repeats of each timed path; the best counts
N, BATCH, LR, BOOK_STEPS = 32, 16, 2e-3, 800
PAPER = dict(cells=81, seeds=5, N=1024, batch=16, steps=8000, chunk=9)


def _grid_kernels(grid=GRID, seeds=SEEDS) -> torch.Tensor:
    return torch.stack([binary_kernel(p, q) for p in grid for q in grid for _ in range(seeds)])


def _sweep_seconds(
    kernels: torch.Tensor, steps: int, *, batched: bool, N: int = N, batch: int = BATCH
) -> float:
    """Wall time of the tied + untied sweep (two programs) for ``steps`` steps; the per-run
    baseline trains the same models and data with ``tests/reference_training.py``."""
    total = 0.0
    config = markov_config(steps, lr=LR, progress=False)
    for tied in (True, False):
        if batched:
            runs = train_markov(
                kernels,
                model_options=dict(K=2, d=4, N=N, tied=tied),
                config=config,
                seed=11,
                batch_size=batch,
            )
            total += runs.result.seconds
            continue
        start = time.perf_counter()
        train_looped(
            lambda tied=tied: build_model(K=2, d=4, N=N, tied=tied),
            next_token_loss,
            lambda step, r, g: sample_chains(kernels[r], batch, N + 1, generator=g),
            n_runs=len(kernels),
            config=config,
            seed=11,
        )
        total += time.perf_counter() - start
    return total


# One fresh process: the book-profile sweep for ``steps`` steps (after a warm-up), best of 2,
# and the minor page faults per program-step of the last one. It inherits no MALLOC_*
# variable: the allocator is glibc's default, or what tools.allocator.tune_allocator sets.
_ALLOCATOR_PROBE = """
import json, resource, sys, torch
import bench_part2 as b
from tools.allocator import tune_allocator
tuned = tune_allocator()  # {} with CCMC_ALLOCATOR=system
torch.set_num_threads(1)
steps = int(sys.argv[1])
k = b._grid_kernels()
b._sweep_seconds(k[:4], 2, batched=True)
best = float("inf")
for _ in range(2):
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    best = min(best, b._sweep_seconds(k, steps, batched=True))
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) / (2 * steps)
print(json.dumps({"s": best, "faults": faults, "tuned": tuned}))
"""


def allocator_effect(steps: int, repeats: int = 2) -> dict:
    """The sweep in fresh processes as a reader runs it (no MALLOC_* variables): glibc's
    default allocator (``CCMC_ALLOCATOR=system``) against the package's settings
    (``tools.allocator.tune_allocator``); interleaved, best of
    ``repeats`` processes each. Linux with glibc only (elsewhere both are the default)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env.pop("GLIBC_TUNABLES", None)
    here = Path(__file__).parent  # bench_part2 itself, and the repository's tools/
    env["PYTHONPATH"] = os.pathsep.join([str(here), str(here.parent), env.get("PYTHONPATH", "")])
    best: dict[str, dict] = {}
    for _ in range(repeats):
        for name, choice in (("default", "system"), ("tuned", "book")):
            out = subprocess.run(
                [sys.executable, "-c", _ALLOCATOR_PROBE, str(steps)],
                env={**env, "CCMC_ALLOCATOR": choice},
                check=True,
                capture_output=True,
                text=True,
            )
            res = json.loads(out.stdout.strip().splitlines()[-1])
            if name not in best or res["s"] < best[name]["s"]:
                best[name] = res
    default, tuned = best["default"], best["tuned"]
    return {
        "allocator_steps_timed": steps,
        "allocator_default_s": round(default["s"], 3),
        "allocator_tuned_s": round(tuned["s"], 3),
        "allocator_speedup": round(default["s"] / tuned["s"], 2),
        "allocator_default_page_faults_per_step": round(default["faults"]),
        "allocator_tuned_page_faults_per_step": round(tuned["faults"]),
        "allocator_tuned_settings": tuned["tuned"],
    }


def passes_against_runs(quick: bool = False) -> dict:
    """Run-steps/s at the paper's settings (``N = 1024``, batch 16, tied) on one thread
    against the number of runs ``R`` of the program: all runs in one forward and backward
    pass (``runs_per_pass=R``) against the trainer's default, which splits a step into
    passes whose attention-score blocks fit the cache (``core.training.PASS_BYTES``). The
    two give the same numbers (``tests/core/test_training.py``); only the time differs."""
    out: dict[str, float] = {}
    warm = _grid_kernels(grid=(0.2, 0.5), seeds=1)  # (4, 2, 2)
    options = dict(K=2, d=4, N=PAPER["N"], tied=True)
    warm_config = markov_config(1, progress=False)
    train_markov(warm, model_options=options, config=warm_config, seed=0, batch_size=16)
    for R in (9, 27) if quick else (1, 9, 27, 81):
        kernels = _grid_kernels(grid=(0.2, 0.5, 0.8), seeds=R)[:R]  # (R, 2, 2)
        for name, rpp in (("one_pass", R), ("default", None)):
            steps = 1 if quick else 2
            result = train_markov(
                kernels,
                model_options=options,
                config=markov_config(steps, lr=1e-3, progress=False, runs_per_pass=rpp),
                seed=0,
                batch_size=PAPER["batch"],
            ).result
            out[f"paper_R{R}_{name}_run_steps_per_s"] = round(R * steps / result.seconds, 2)
        speedup = (
            out[f"paper_R{R}_default_run_steps_per_s"] / out[f"paper_R{R}_one_pass_run_steps_per_s"]
        )
        out[f"paper_R{R}_passes_speedup"] = round(speedup, 2)
    return out


def run(quick: bool = False) -> dict:
    """Time the Fig. 4 sweep batched vs looped; returns a flat dict of numbers."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in the chapters: tiny models, shared 2-core machine
    try:
        kernels = _grid_kernels()
        steps = 5 if quick else 20
        # warm-up: both code paths, a few runs, two steps
        _sweep_seconds(kernels[:4], 2, batched=True)
        _sweep_seconds(kernels[:4], 2, batched=False)
        times = timed_rounds(
            REPEATS,
            batched=lambda: _sweep_seconds(kernels, steps, batched=True),
            looped=lambda: _sweep_seconds(kernels, steps, batched=False),
        )
        batched, looped = min(times["batched"]), min(times["looped"])
        out = {
            "fig4_runs_total": 2 * len(kernels),
            "fig4_steps_timed": steps,
            "fig4_repeats": REPEATS,
            "fig4_batched_s": round(batched, 3),
            "fig4_looped_s": round(looped, 3),
            "fig4_batched_vs_looped_speedup": round(looped / batched, 2),
            "fig4_speedup_per_round": round_ratios(times, "looped", "batched"),
            "fig4_batched_ms_per_step_all_runs": round(1000 * batched / (2 * steps), 2),
        }
        # the hardware's share: one run-step's model work at its roofline, and its sampling
        model = build_model(K=2, d=4, N=N, tied=True)
        gen = torch.Generator().manual_seed(0)
        x = sample_chains(kernels[0], BATCH, N + 1, generator=gen)  # (batch, N + 1)
        limit = run_step_limit(lambda: next_token_loss(model, x).backward())
        limit_ms, flop_ms = 1000 * limit["limit_s"], 1000 * limit["flop_limit_s"]
        sample_s = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            sample_chains(kernels, BATCH, N + 1, generator=gen)  # every run's batch at once
            sample_s = min(sample_s, time.perf_counter() - start)
        sample_ms = 1000 * sample_s / len(kernels)
        looped_ms = 1000 * looped / (2 * len(kernels) * steps)
        out["fig4_batched_ms_per_run_step"] = round(1000 * batched / (2 * len(kernels) * steps), 4)
        out["fig4_looped_ms_per_run_step"] = round(looped_ms, 4)
        out["fig4_run_step_roofline_ms"] = round(limit_ms, 5)
        out["fig4_run_step_flop_limit_ms"] = round(flop_ms, 5)
        out["fig4_sampling_ms_per_run_step"] = round(sample_ms, 5)
        out["fig4_ratio_ceiling"] = round(looped_ms / (flop_ms + sample_ms), 1)
        if quick:
            out["fig4_book_profile_estimated_s"] = round(batched / steps * BOOK_STEPS, 1)
        else:
            out["fig4_book_profile_measured_s"] = round(
                _sweep_seconds(kernels, BOOK_STEPS, batched=True), 1
            )
        # paper profile: a few steps of one chunk of runs at N = 1024, scaled to the sweep
        probe_steps = 1 if quick else 2
        chunk = _grid_kernels(grid=(0.3, 0.5, 0.7), seeds=1)  # 9 runs
        probe = train_markov(
            chunk,
            model_options=dict(K=2, d=4, N=PAPER["N"], tied=True),
            config=markov_config(probe_steps, lr=1e-3, progress=False),
            seed=0,
            batch_size=PAPER["batch"],
        )
        per_run_step = probe.result.seconds / (probe_steps * len(chunk))
        paper_runs = 2 * PAPER["cells"] * PAPER["seeds"]
        out["paper_profile_s_per_run_step_N1024"] = round(per_run_step, 4)
        out["paper_profile_fig4_estimated_h"] = round(
            per_run_step * paper_runs * PAPER["steps"] / 3600, 1
        )
        out.update(passes_against_runs(quick))
        out.update(allocator_effect(steps))
        out["torch_threads"] = torch.get_num_threads()
        out["load_avg_1min_at_end"] = round(os.getloadavg()[0], 2)
        out["timestamp_unix"] = int(time.time())
        return out
    finally:
        torch.set_num_threads(threads)


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
