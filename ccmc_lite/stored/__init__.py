"""Results that ship with the package: the runs trained once at the papers' settings.

:mod:`~ccmc_lite.stored.runs` loads them (:func:`~ccmc_lite.stored.load_stored`) from the
JSON files of ``ccmc_lite/data/``; the repository's ``tools/`` writes them.
"""

# The public names of every module, in the order of the API page.
from . import runs
from .runs import *  # noqa: F403

__all__ = [*runs.__all__]
