"""What the chapters teach with: one figure style, exercise checkers, numbers in the prose.

Modules: :mod:`~ccmc_lite.teaching.plotting` (the book's figure style and shared plots),
:mod:`~ccmc_lite.teaching.checking` (the engine behind every part's ``exercises`` module)
and :mod:`~ccmc_lite.teaching.gluing` (values from executed code into the book's prose).
``teaching`` imports only :mod:`ccmc_lite.core`.
"""

# The public names of every module, in the order of the API page.
from . import plotting, checking, gluing
from .plotting import *  # noqa: F403
from .checking import *  # noqa: F403
from .gluing import *  # noqa: F403

__all__ = [*plotting.__all__, *checking.__all__, *gluing.__all__]
