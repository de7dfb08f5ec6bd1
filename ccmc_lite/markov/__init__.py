"""Part II — the single-layer Markov landscape (Makkuva et al. 2024).

Modules, in the order of the chapters: :mod:`~ccmc_lite.markov.kernels` (binary and
``K``-state kernels, sampling), :mod:`~ccmc_lite.markov.model` (the transformer of Sec. 2.1 /
App. A; :mod:`~ccmc_lite.markov.blocked_attention` is its fast attention path),
:mod:`~ccmc_lite.markov.landscape` (constructions, exact losses, Hessians) and
:mod:`~ccmc_lite.markov.runs` (many runs as one batched program, and reading them).
Exercise checkers: :mod:`ccmc_lite.markov.exercises`.

The chain quantities shared with the other parts (:func:`~ccmc_lite.core.stationary_distribution`,
:func:`~ccmc_lite.core.entropy`, :func:`~ccmc_lite.core.entropy_rate`,
:func:`~ccmc_lite.core.unigram_entropy`, :func:`~ccmc_lite.core.mutual_information`) live in
:mod:`ccmc_lite.core.chains`; they are importable from here too, so a Part II cell reads
``markov.entropy_rate(P)``.
"""

# The public names of every module, in the order of the book (and of the API page).
from ..core.chains import (
    entropy as entropy,
    entropy_rate as entropy_rate,
    mutual_information as mutual_information,
    stationary_distribution as stationary_distribution,
    unigram_entropy as unigram_entropy,
)
from . import kernels, model, blocked_attention, landscape, runs
from .kernels import *  # noqa: F403
from .model import *  # noqa: F403
from .blocked_attention import *  # noqa: F403
from .landscape import *  # noqa: F403
from .runs import *  # noqa: F403

__all__ = [
    *kernels.__all__,
    *model.__all__,
    *blocked_attention.__all__,
    *landscape.__all__,
    *runs.__all__,
]
