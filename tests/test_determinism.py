"""Determinism across processes: the same seed gives bit-identical numbers in two
fresh interpreters, for one seeded computation per part (stationary laws included)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = r"""
import hashlib, torch
torch.set_num_threads(1)
from ccmc_lite import ccmc, core, lens, markov, ngram, TrainConfig

def digest(*tensors):
    h = hashlib.sha256()
    for t in tensors:
        h.update(torch.as_tensor(t).detach().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]

P = markov.random_kernel(4, 7)
out = {"core": digest(P, core.stationary_distribution(P), core.entropy_rate(P))}
tr = ccmc.sample_trajectories(ccmc.random_chain(3, seed=1), [0, 1, 2], 50, seed=2, n_traj=3)
out["ccmc"] = digest(tr.tokens, tr.counts)
runs = markov.train_markov(
    torch.stack([markov.binary_kernel(0.3, 0.4)] * 2),
    model_options={"K": 2, "d": 4, "N": 16},
    config=markov.markov_config(5, progress=False),
    seed=3,
    batch_size=4,
)
out["markov"] = digest(runs.result.loss, *runs.result.params.values())
batch = ngram.sample_batch(ngram.NGramTask(S=3, n=2, T=12), 8, seed=4)
out["ngram"] = digest(batch.tokens, batch.next_probs, ngram.kgram_estimator(batch.tokens, 3, 2))
out["lens"] = digest(lens.ngram_levels(batch.transitions[0], 3, 2))
print(out)
"""


def _run() -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "random"}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


# Two fresh interpreters, ~11 s: "slow", so the floor run (tests/book/test_floor.py) skips it.
@pytest.mark.slow
def test_same_seed_gives_identical_bits_in_two_fresh_processes() -> None:
    first, second = _run(), _run()
    assert first == second
    assert all(part in first for part in ("core", "ccmc", "markov", "ngram", "lens"))
