"""Foundation benchmarks: the batched trainer against a plain loop over the same runs.

Both paths train the same R runs (same initialisations, same optimiser, same number of
steps) of a small one-layer attention model on random binary sequences; the batched path
vmaps all runs into one program, the loop trains them one after another with ordinary
autograd. Both are warmed up first; the ratio is measured in one process, the two paths
interleaved, best of three repeats each (single short timings on this shared 2-core machine
vary by up to 50 %).

The roofline of one run-step (FLOPs and bytes of one model's forward and backward on its
batch, against this machine's matmul and copy peaks: ``bench_limits.run_step_limit``) says
how far each path is from the hardware; ``looped / FLOP limit`` is the ratio a batched path
doing nothing but the FLOPs at the matmul peak would reach (``trainer_ratio_ceiling``).
"""

from __future__ import annotations

import dataclasses
import json
import time

import torch
from bench_limits import run_step_limit
from profiling import round_ratios, timed_rounds, top_ops, train_looped
from torch import nn

from ccmc_lite.core import TrainConfig, train_runs


class SmallAttention(nn.Module):
    """A single-layer causal attention model with a ReLU feed-forward block (d = 8)."""

    def __init__(self, vocab: int = 2, d: int = 8, length: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(0.1 * torch.randn(length, d))
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.ReLU(), nn.Linear(4 * d, d))
        self.readout = nn.Linear(d, vocab)
        self.register_buffer("mask", torch.ones(length, length, dtype=torch.bool).tril())

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (B, T) -> logits (B, T, vocab)
        T = x.shape[-1]
        h = self.embed(x) + self.pos[:T]  # (B, T, d)
        q, k, v = self.qkv(h).chunk(3, dim=-1)
        scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5  # (B, T, T)
        att = scores.masked_fill(~self.mask[:T, :T], float("-inf")).softmax(-1)
        h = h + att @ v
        h = h + self.ff(h)
        return self.readout(h)


def _batch(step: int, runs: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    return torch.randint(0, 2, (len(runs), 8, 33), generator=gen)  # (R, B, T+1)


def _loss(model, x: torch.Tensor) -> torch.Tensor:
    logits = model(x[:, :-1])
    return nn.functional.cross_entropy(logits.reshape(-1, 2), x[:, 1:].reshape(-1))


def _timed(batched: bool, n_runs: int, steps: int) -> float:
    cfg = TrainConfig(steps=steps, lr=1e-3, progress=False)
    trainer = train_runs if batched else train_looped
    start = time.perf_counter()
    trainer(SmallAttention, _loss, _batch, n_runs=n_runs, config=cfg, seed=0)
    return time.perf_counter() - start


def trainer_ratio(n_runs: int = 64, steps: int = 40, repeats: int = 3) -> dict[str, float]:
    """Seconds for both paths (best of ``repeats``, interleaved), their ratio and the ceiling."""
    for batched in (True, False):  # warm-up
        _timed(batched, 2, 3)
    times = timed_rounds(
        repeats,
        batched=lambda: _timed(True, n_runs, steps),
        looped=lambda: _timed(False, n_runs, steps),
    )
    batched_s, looped_s = min(times["batched"]), min(times["looped"])
    short = TrainConfig(steps=5, lr=1e-3)
    top = top_ops(
        lambda: train_runs(
            SmallAttention,
            _loss,
            _batch,
            n_runs=n_runs,
            config=dataclasses.replace(short, progress=False),
            seed=0,
        )
    )
    torch.manual_seed(0)
    model = SmallAttention()
    x = _batch(0, torch.arange(1), torch.Generator().manual_seed(0))[0]  # (8, 33)
    limit = run_step_limit(lambda: _loss(model, x).backward())
    limit_ms, flop_ms = 1000 * limit["limit_s"], 1000 * limit["flop_limit_s"]
    to_ms = 1000 / (n_runs * steps)  # seconds of the whole call -> ms per run-step
    return {
        "trainer_runs": n_runs,
        "trainer_steps": steps,
        "trainer_repeats": repeats,
        "trainer_batched_s": round(batched_s, 3),
        "trainer_looped_s": round(looped_s, 3),
        "trainer_speedup_batched_vs_loop": round(looped_s / batched_s, 2),
        "trainer_speedup_per_round": round_ratios(times, "looped", "batched"),
        "trainer_batched_top_ops": top,
        "trainer_run_step_roofline_ms": round(limit_ms, 4),
        "trainer_run_step_flop_limit_ms": round(flop_ms, 4),
        "trainer_batched_ms_per_run_step": round(batched_s * to_ms, 4),
        "trainer_looped_ms_per_run_step": round(looped_s * to_ms, 4),
        "trainer_batched_times_from_roofline": round(batched_s * to_ms / limit_ms, 1),
        "trainer_ratio_ceiling": round(looped_s * to_ms / flop_ms, 1),
        "trainer_threads": torch.get_num_threads(),
    }


def run(quick: bool = False) -> dict[str, float]:
    return trainer_ratio(n_runs=64, steps=10 if quick else 40)


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
