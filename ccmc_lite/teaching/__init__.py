"""What the chapters teach with: one figure style and the exercise checkers.

Modules: :mod:`~ccmc_lite.teaching.plotting` (the book's figure style and shared plots) and
:mod:`~ccmc_lite.teaching.checking` (the engine behind every part's ``exercises`` module).
``teaching`` imports only :mod:`ccmc_lite.core`.
"""

# The public names of every module, in the order of the API page.
from . import plotting, checking
from .plotting import *  # noqa: F403
from .checking import *  # noqa: F403

__all__ = [*plotting.__all__, *checking.__all__]
