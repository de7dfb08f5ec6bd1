"""The shared machinery every part of the book uses.

Modules: :mod:`~ccmc_lite.core.validation` (argument checks with clear errors),
:mod:`~ccmc_lite.core.seeding` (the ``seed`` convention), :mod:`~ccmc_lite.core.devices`
(CPU by default, CUDA when present), :mod:`~ccmc_lite.core.profiles` (the ``book``/``paper``
switch), :mod:`~ccmc_lite.core.chains` (stationary law, entropies: one copy for all parts),
:mod:`~ccmc_lite.core.training` (R independent runs as one batched program),
:mod:`~ccmc_lite.core.progress` (a text progress bar), :mod:`~ccmc_lite.core.plotting`
(one figure style), :mod:`~ccmc_lite.core.checking` (the exercise-checker engine) and
:mod:`~ccmc_lite.core.gluing` (numbers from code into the book's prose).

``core`` imports nothing from the parts of the book.
"""

from __future__ import annotations

from .chains import (
    entropy,
    entropy_rate,
    mutual_information,
    stationary_distribution,
    unigram_entropy,
)
from .checking import (
    CheckResult,
    check_function,
    check_value,
    describe,
    require_callable,
)
from .devices import (
    DEVICE_ENV,
    default_device,
    resolve_device,
)
from .gluing import (
    BOOK_BUILD_ENV,
    glue,
    in_book_build,
)
from .plotting import (
    PALETTE,
    LoglogFit,
    fig_axes,
    heatmap,
    loglog_fit,
    plot_loglog_fit,
    plot_reference_levels,
    plot_runs,
    use_book_style,
)
from .profiles import (
    PROFILE_ENV,
    PROFILES,
    by_profile,
    current_profile,
    profile_banner,
)
from .progress import (
    TextProgress,
)
from .seeding import (
    derive_seed,
    numpy_rng,
    seed_everything,
    torch_generator,
)
from .training import (
    TrainConfig,
    TrainResult,
    lr_schedule,
    train_runs,
)
from .validation import (
    as_tensor,
    check_choice,
    check_float,
    check_int,
    check_prob_vector,
    check_probability,
    check_seed,
    check_stochastic_matrix,
    check_tokens,
)

__all__ = [
    # validation
    "as_tensor",
    "check_choice",
    "check_float",
    "check_int",
    "check_prob_vector",
    "check_probability",
    "check_seed",
    "check_stochastic_matrix",
    "check_tokens",
    # seeding
    "derive_seed",
    "numpy_rng",
    "seed_everything",
    "torch_generator",
    # devices
    "DEVICE_ENV",
    "default_device",
    "resolve_device",
    # profiles
    "PROFILES",
    "PROFILE_ENV",
    "by_profile",
    "current_profile",
    "profile_banner",
    # chains
    "entropy",
    "entropy_rate",
    "mutual_information",
    "stationary_distribution",
    "unigram_entropy",
    # training
    "TrainConfig",
    "TrainResult",
    "lr_schedule",
    "train_runs",
    # progress
    "TextProgress",
    # plotting
    "PALETTE",
    "LoglogFit",
    "fig_axes",
    "heatmap",
    "loglog_fit",
    "plot_loglog_fit",
    "plot_reference_levels",
    "plot_runs",
    "use_book_style",
    # checking
    "CheckResult",
    "check_function",
    "check_value",
    "describe",
    "require_callable",
    # gluing
    "BOOK_BUILD_ENV",
    "glue",
    "in_book_build",
]
