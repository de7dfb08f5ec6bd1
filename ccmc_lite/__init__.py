"""ccmc_lite — transformers seen through Markov chains.

The package behind the executable book. Foundation modules (shared by every part):

- :mod:`ccmc_lite.validation` — argument checks with clear errors;
- :mod:`ccmc_lite.seeding` — the ``seed`` convention and derived streams;
- :mod:`ccmc_lite.devices` — CPU by default, CUDA when present;
- :mod:`ccmc_lite.profiles` — the ``book``/``paper`` profile switch;
- :mod:`ccmc_lite.training` — R independent runs trained as one batched program;
- :mod:`ccmc_lite.progress` — a text progress bar;
- :mod:`ccmc_lite.plotting` — one plotting style.
"""

from .devices import default_device, resolve_device
from .profiles import PROFILE_ENV, by_profile, current_profile, profile_banner
from .seeding import derive_seed, numpy_rng, seed_everything, torch_generator
from .training import TrainConfig, TrainResult, train_runs

__version__ = "0.1.0"

__all__ = [
    "PROFILE_ENV",
    "TrainConfig",
    "TrainResult",
    "__version__",
    "by_profile",
    "current_profile",
    "default_device",
    "derive_seed",
    "numpy_rng",
    "profile_banner",
    "resolve_device",
    "seed_everything",
    "torch_generator",
    "train_runs",
]
