"""The foundation every part stands on: checked arguments, seeds, chains, one training loop.

Modules: :mod:`~ccmc_lite.core.validation` (argument checks with clear errors),
:mod:`~ccmc_lite.core.seeding` (the ``seed`` convention), :mod:`~ccmc_lite.core.devices`
(CPU by default, CUDA when present), :mod:`~ccmc_lite.core.profiles` (the ``book``/``paper``
switch), :mod:`~ccmc_lite.core.chains` (stationary law, entropies: one copy for all parts),
:mod:`~ccmc_lite.core.train_config` (what a training call does),
:mod:`~ccmc_lite.core.batched` (many runs of a model as one program, and their results),
:mod:`~ccmc_lite.core.training` (the training loop: R independent runs at once) and
:mod:`~ccmc_lite.core.progress` (a text progress bar). ``core`` imports nothing else of the
package.
"""

# The public names of every module, in the order of the book (and of the API page).
from . import (
    validation,
    seeding,
    devices,
    profiles,
    chains,
    train_config,
    batched,
    training,
    progress,
)
from .validation import *  # noqa: F403
from .seeding import *  # noqa: F403
from .devices import *  # noqa: F403
from .profiles import *  # noqa: F403
from .chains import *  # noqa: F403
from .train_config import *  # noqa: F403
from .batched import *  # noqa: F403
from .training import *  # noqa: F403
from .progress import *  # noqa: F403

__all__ = [
    *validation.__all__,
    *seeding.__all__,
    *devices.__all__,
    *profiles.__all__,
    *chains.__all__,
    *train_config.__all__,
    *batched.__all__,
    *training.__all__,
    *progress.__all__,
]
