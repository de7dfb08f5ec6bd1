"""Results that ship with the package: runs at the papers' settings and chapter snapshots.

:mod:`~ccmc_lite.stored.runs` loads the sweeps trained once at the papers' settings
(:func:`~ccmc_lite.stored.load_stored`), :mod:`~ccmc_lite.stored.snapshots` the numbers a
chapter quotes when run at the paper profile (:func:`~ccmc_lite.stored.load_snapshot`).
Both read JSON files of ``ccmc_lite/data/``; the repository's ``tools/`` writes them.
"""

# The public names of every module, in the order of the API page.
from . import runs, snapshots
from .runs import *  # noqa: F403
from .snapshots import *  # noqa: F403

__all__ = [*runs.__all__, *snapshots.__all__]
