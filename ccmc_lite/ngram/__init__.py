"""Part III — in-context n-grams and sub-n-gram plateaus (Varre, Yüce & Flammarion 2025).

Modules, in the order of the chapters: :mod:`~ccmc_lite.ngram.data` (n-gram tasks and
sampling), :mod:`~ccmc_lite.ngram.estimators` (k-gram estimators, Def. 2.1),
:mod:`~ccmc_lite.ngram.models` (the disentangled transformers and θ*^k, Sec. 2.3 and 4.1),
:mod:`~ccmc_lite.ngram.landscape` (gradients at k-gram points, Lemma 3.1, Thm. 4.2),
:mod:`~ccmc_lite.ngram.stagewise` (the Sec. 5 experiment),
:mod:`~ccmc_lite.ngram.plateaus` (stage detection),
:mod:`~ccmc_lite.ngram.plateau_sweep` (plateau lengths across a sweep, beyond the paper)
and :mod:`~ccmc_lite.ngram.stage_reading` (stages of the stored runs at the paper's
settings). Exercise checkers:
:mod:`ccmc_lite.ngram.exercises`.

The chain quantities shared with the other parts (:func:`~ccmc_lite.core.entropy`,
:func:`~ccmc_lite.core.stationary_distribution`) live in :mod:`ccmc_lite.core.chains`; they
are importable from here too.
"""

# The public names of every module, in the order of the book (and of the API page).
from ..core.chains import entropy as entropy, stationary_distribution as stationary_distribution
from . import data, estimators, models, landscape, stagewise, plateaus, plateau_sweep, stage_reading
from .data import *  # noqa: F403
from .estimators import *  # noqa: F403
from .models import *  # noqa: F403
from .landscape import *  # noqa: F403
from .stagewise import *  # noqa: F403
from .plateaus import *  # noqa: F403
from .plateau_sweep import *  # noqa: F403
from .stage_reading import *  # noqa: F403

__all__ = [
    *data.__all__,
    *estimators.__all__,
    *models.__all__,
    *landscape.__all__,
    *stagewise.__all__,
    *plateaus.__all__,
    *plateau_sweep.__all__,
    *stage_reading.__all__,
]
