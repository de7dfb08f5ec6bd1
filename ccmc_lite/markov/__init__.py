"""Part II — the single-layer Markov landscape (Makkuva et al. 2024).

Modules, in the order of the chapters: :mod:`~ccmc_lite.markov.kernels` (binary and
``K``-state kernels, sampling), :mod:`~ccmc_lite.markov.model` (the transformer of Sec. 2.1 /
App. A), :mod:`~ccmc_lite.markov.landscape` (constructions, exact losses, Hessians) and
:mod:`~ccmc_lite.markov.runs` (many runs as one batched program). Exercise checkers:
:mod:`ccmc_lite.markov.exercises`.

The chain quantities shared with the other parts (:func:`~ccmc_lite.core.stationary_distribution`,
:func:`~ccmc_lite.core.entropy`, :func:`~ccmc_lite.core.entropy_rate`,
:func:`~ccmc_lite.core.unigram_entropy`, :func:`~ccmc_lite.core.mutual_information`) live in
:mod:`ccmc_lite.core.chains`; they are importable from here too, so a Part II cell reads
``markov.entropy_rate(P)``.
"""

from __future__ import annotations

from ..core.chains import (
    entropy as entropy,
)
from ..core.chains import (
    entropy_rate as entropy_rate,
)
from ..core.chains import (
    mutual_information as mutual_information,
)
from ..core.chains import (
    stationary_distribution as stationary_distribution,
)
from ..core.chains import (
    unigram_entropy as unigram_entropy,
)
from .kernels import (
    binary_entropy,
    binary_entropy_rate,
    binary_kernel,
    check_kernel,
    empirical_transitions,
    enumerate_chains,
    lag_one_covariance,
    random_kernel,
    sample_chains,
    symmetric_kernel,
)
from .landscape import (
    appendix_d_logits,
    binary_unigram_hessian,
    fit_appendix_d,
    gauge_restrict,
    loss_plane,
    low_rank_summary,
    param_layout,
    population_hessian,
    population_loss,
    symbolic_unigram_hessian,
    symmetric_threshold,
    theta_pi,
    theta_star,
    unigram_curvature,
    unigram_hessian,
    unigram_inputs,
)
from .model import (
    MODEL_OPTIONS,
    MarkovTransformer,
    build_model,
    check_model_options,
    kernel_loss,
    model_factory,
    next_token_loss,
)
from .runs import (
    MarkovRuns,
    attention_ratio,
    markov_config,
    plot_pq_grid,
    train_markov,
    unigram_gap,
    zero_position_probs,
)

__all__ = [
    # kernels
    "binary_entropy",
    "binary_entropy_rate",
    "binary_kernel",
    "check_kernel",
    "empirical_transitions",
    "enumerate_chains",
    "lag_one_covariance",
    "random_kernel",
    "sample_chains",
    "symmetric_kernel",
    # model
    "MODEL_OPTIONS",
    "MarkovTransformer",
    "build_model",
    "check_model_options",
    "kernel_loss",
    "model_factory",
    "next_token_loss",
    # landscape
    "appendix_d_logits",
    "binary_unigram_hessian",
    "fit_appendix_d",
    "gauge_restrict",
    "loss_plane",
    "low_rank_summary",
    "param_layout",
    "population_hessian",
    "population_loss",
    "symbolic_unigram_hessian",
    "symmetric_threshold",
    "theta_pi",
    "theta_star",
    "unigram_curvature",
    "unigram_hessian",
    "unigram_inputs",
    # runs
    "MarkovRuns",
    "attention_ratio",
    "markov_config",
    "plot_pq_grid",
    "train_markov",
    "unigram_gap",
    "zero_position_probs",
]
