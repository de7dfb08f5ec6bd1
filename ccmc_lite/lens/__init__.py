"""The closing chapter — one lens on three papers: prediction through a coarse statistic.

:mod:`~ccmc_lite.lens.coarse` holds the cross-part computations; it may use every part.
Exercise checkers: :mod:`ccmc_lite.lens.exercises`.
"""

# The public names of every module, in the order of the book (and of the API page).
from . import coarse
from .coarse import *  # noqa: F403

__all__ = [
    *coarse.__all__,
]
