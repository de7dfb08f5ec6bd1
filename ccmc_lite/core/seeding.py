"""One seeding convention for the whole book.

Every random function of :mod:`ccmc_lite` takes a ``seed`` argument: a non-negative ``int``. The
same seed gives the same numbers on the same machine and library versions. Independent streams (one
per training run, one per experiment cell) are derived from a base seed and a tuple of integer keys
with :func:`~ccmc_lite.core.derive_seed`, so results do not depend on the order in which streams are
created.
"""

from __future__ import annotations

import random

import numpy as np
import torch

from .devices import resolve_device
from .validation import check_seed

__all__ = ["derive_seed", "numpy_rng", "seed_everything", "torch_generator"]


def derive_seed(seed: int, *keys: int) -> int:
    """A new seed that depends on ``seed`` and on the integer ``keys`` only.

    Uses :class:`numpy.random.SeedSequence`, so ``derive_seed(s, r)`` for runs
    ``r = 0, 1, ...`` gives statistically independent streams.

    >>> derive_seed(0, 1) == derive_seed(0, 1) != derive_seed(0, 2)
    True
    """
    seed = check_seed(seed)
    keys = tuple(check_seed(k, f"keys[{i}]") for i, k in enumerate(keys))
    state = np.random.SeedSequence([seed, *keys]).generate_state(2, dtype=np.uint32)
    return int(state[0]) << 31 | int(state[1]) >> 1


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's global generators.

    Chapters call this once at the top, often as a cell's last line: it returns nothing, so
    the notebook shows no output under it. Library functions never rely on global state;
    they take their own ``seed``.
    """
    seed = check_seed(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)  # noqa: NPY002 (seeding the legacy global stream is the point)
    torch.manual_seed(seed)


def torch_generator(seed: int, device: torch.device | str | None = None) -> torch.Generator:
    """A :class:`torch.Generator` on ``device`` (CPU by default) seeded with ``seed``."""
    seed = check_seed(seed)
    device = torch.device("cpu") if device is None else resolve_device(device)
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    return gen


def numpy_rng(seed: int) -> np.random.Generator:
    """A :class:`numpy.random.Generator` (PCG64) seeded with ``seed``."""
    return np.random.default_rng(check_seed(seed))
