"""ccmc_lite — transformers seen through Markov chains: the package behind the book.

The tree reads as the book does::

    ccmc_lite/
      core/     the foundation: validation, seeding, devices, profiles, chains,
                the training loop
      teaching/ plotting and exercise checking
      stored/   runs at the papers' settings, shipped as data
      ccmc/     Part I   — self-attention is a context-conditioned Markov chain
      markov/   Part II  — the single-layer Markov landscape
      ngram/    Part III — in-context n-grams and sub-n-gram plateaus
      lens/     the closing chapter's cross-part computations

A chapter imports a part by name and calls into it, so every name shows where it lives::

    from ccmc_lite import markov, plotting, seed_everything

    seed_everything(0)
    P = markov.binary_kernel(0.5, 0.8)

The names every chapter needs (seeding, profiles, training) are importable from the top
level, and ``ccmc_lite.plotting`` is :mod:`ccmc_lite.teaching.plotting`. Parts never
import each other; ``core`` imports nothing else; ``lens`` may import every part.
"""

from __future__ import annotations

import importlib
from typing import Any

from .teaching import plotting
from .core.devices import default_device, resolve_device
from .core.profiles import PROFILE_ENV, by_profile, current_profile
from .core.seeding import derive_seed, numpy_rng, seed_everything, torch_generator
from .core.batched import TrainResult
from .core.train_config import TrainConfig
from .core.training import train_runs

__version__ = "0.2.0"

PARTS = ("core", "teaching", "stored", "ccmc", "markov", "ngram", "lens")

__all__ = [
    "PROFILE_ENV",
    "TrainConfig",
    "TrainResult",
    "__version__",
    "by_profile",
    "current_profile",
    "default_device",
    "derive_seed",
    "numpy_rng",
    "plotting",
    "resolve_device",
    "seed_everything",
    "torch_generator",
    "train_runs",
]


def __getattr__(name: str) -> Any:
    """Import a part on first use, so ``import ccmc_lite; ccmc_lite.markov`` works."""
    if name in PARTS:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'ccmc_lite' has no attribute {name!r}")
