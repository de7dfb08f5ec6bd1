"""The shared machinery every part of the book uses.

Modules: :mod:`~ccmc_lite.core.validation` (argument checks with clear errors),
:mod:`~ccmc_lite.core.seeding` (the ``seed`` convention), :mod:`~ccmc_lite.core.devices`
(CPU by default, CUDA when present), :mod:`~ccmc_lite.core.profiles` (the ``book``/``paper``
switch), :mod:`~ccmc_lite.core.chains` (stationary law, entropies: one copy for all parts),
:mod:`~ccmc_lite.core.train_config` (what a training call does),
:mod:`~ccmc_lite.core.batched` (many runs of a model as one program, and their results),
:mod:`~ccmc_lite.core.training` (the training loop: R independent runs at once),
:mod:`~ccmc_lite.core.stored` (paper-setting results shipped with the package, and the
sweeps that made them),
:mod:`~ccmc_lite.core.snapshots` (chapters run at the paper profile: the numbers they quote),
:mod:`~ccmc_lite.core.progress` (a text progress bar), :mod:`~ccmc_lite.core.plotting`
(one figure style), :mod:`~ccmc_lite.core.checking` (the exercise-checker engine) and
:mod:`~ccmc_lite.core.gluing` (numbers from code into the book's prose).

``core`` imports nothing from the parts of the book.
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
    stored,
    snapshots,
    progress,
    plotting,
    checking,
    gluing,
)
from .validation import *  # noqa: F403
from .seeding import *  # noqa: F403
from .devices import *  # noqa: F403
from .profiles import *  # noqa: F403
from .chains import *  # noqa: F403
from .train_config import *  # noqa: F403
from .batched import *  # noqa: F403
from .training import *  # noqa: F403
from .stored import *  # noqa: F403
from .snapshots import *  # noqa: F403
from .progress import *  # noqa: F403
from .plotting import *  # noqa: F403
from .checking import *  # noqa: F403
from .gluing import *  # noqa: F403

__all__ = [
    *validation.__all__,
    *seeding.__all__,
    *devices.__all__,
    *profiles.__all__,
    *chains.__all__,
    *train_config.__all__,
    *batched.__all__,
    *training.__all__,
    *stored.__all__,
    *snapshots.__all__,
    *progress.__all__,
    *plotting.__all__,
    *checking.__all__,
    *gluing.__all__,
]
