"""The closing chapter — one lens on three papers: prediction through a coarse statistic.

:mod:`~ccmc_lite.lens.coarse` holds the cross-part computations; it may use every part.
Exercise checkers: :mod:`ccmc_lite.lens.exercises`.
"""

from __future__ import annotations

from .coarse import (
    coarse_gap,
    coarse_predictor,
    conditional_entropy,
    ngram_levels,
)

__all__ = [
    # coarse
    "coarse_gap",
    "coarse_predictor",
    "conditional_entropy",
    "ngram_levels",
]
