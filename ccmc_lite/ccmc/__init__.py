"""Part I — one self-attention layer is a context-conditioned Markov chain (Ildiz et al. 2024).

Modules, in the order of the chapters: :mod:`~ccmc_lite.ccmc.chain` (the CCMC, Def. 2.1,
eq. (4)), :mod:`~ccmc_lite.ccmc.attention` (the attention layer and the bijection of
Thm. 2.6), :mod:`~ccmc_lite.ccmc.conventions` (the paper's column-stochastic layout),
:mod:`~ccmc_lite.ccmc.coverage` (co-occurrence graphs, Thm. 3.4),
:mod:`~ccmc_lite.ccmc.mle` (maximum likelihood, Sec. 3.1 and 4) and
:mod:`~ccmc_lite.ccmc.collapse` (single trajectories, Sec. 5). Exercise checkers:
:mod:`ccmc_lite.ccmc.exercises`.
"""

# The public names of every module, in the order of the book (and of the API page).
from . import chain, attention, conventions, coverage, mle, collapse
from .chain import *  # noqa: F403
from .attention import *  # noqa: F403
from .conventions import *  # noqa: F403
from .coverage import *  # noqa: F403
from .mle import *  # noqa: F403
from .collapse import *  # noqa: F403

__all__ = [
    *chain.__all__,
    *attention.__all__,
    *conventions.__all__,
    *coverage.__all__,
    *mle.__all__,
    *collapse.__all__,
]
