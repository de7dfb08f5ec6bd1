"""Part III — in-context n-grams and sub-n-gram plateaus (Varre, Yüce & Flammarion 2025).

Modules, in the order of the chapters: :mod:`~ccmc_lite.ngram.data` (n-gram tasks and
sampling), :mod:`~ccmc_lite.ngram.estimators` (k-gram estimators, Def. 2.1),
:mod:`~ccmc_lite.ngram.models` (the disentangled transformers and θ*^k, Sec. 2.3 and 4.1),
:mod:`~ccmc_lite.ngram.landscape` (gradients at k-gram points, Lemma 3.1, Thm. 4.2),
:mod:`~ccmc_lite.ngram.stagewise` (the Sec. 5 experiment) and
:mod:`~ccmc_lite.ngram.plateaus` (stage detection). Exercise checkers:
:mod:`ccmc_lite.ngram.exercises`.

The chain quantities shared with the other parts (:func:`~ccmc_lite.core.entropy`,
:func:`~ccmc_lite.core.stationary_distribution`) live in :mod:`ccmc_lite.core.chains`; they
are importable from here too.
"""

from __future__ import annotations

from ..core.chains import (
    entropy as entropy,
)
from ..core.chains import (
    stationary_distribution as stationary_distribution,
)
from .data import (
    NGramBatch,
    NGramTask,
    dirichlet,
    dirichlet_mean_entropy,
    flatten_transitions,
    history_codes,
    lifted_stationary,
    lifted_transition_matrix,
    log_uniform,
    next_token_probs,
    sample_batch,
    sample_sequences,
    sample_transitions,
    sample_urn,
    suffix_conditional,
)
from .estimators import (
    bayes_predictor,
    contiguous_offsets,
    cross_entropy,
    estimator_losses,
    kgram_counts,
    kgram_estimator,
    subset_counts,
    subset_estimator,
)
from .landscape import (
    GradientNorm,
    SuffixModel,
    exact_population_gradient,
    fit_theorem42,
    flat_gradient,
    gradient_blocks,
    gradient_norm,
    lemma31_gradient,
    next_token_loss,
    sequence_law,
    statistical_term,
    suffix_law,
    theorem42_trend,
)
from .models import (
    AttentionOnlyTransformer,
    SimplifiedTransformer,
    causal_softmax,
    construction_limit,
    first_layer_attention,
    load_parameters,
    offsets_for_k,
    theta_star,
    theta_star_all_heads,
    theta_star_subset,
)
from .plateaus import (
    Plateau,
    detect_plateaus,
    escape_step,
    first_offsets,
    formation_step,
    moving_average,
    nearest_level,
    offset_attention,
)
from .stagewise import (
    NGramStream,
    checkpoint_gradient_norms,
    kgram_levels,
    make_eval_fn,
    make_loss_fn,
    make_test_set,
    plot_attention_maps,
)

__all__ = [
    # data
    "NGramBatch",
    "NGramTask",
    "dirichlet",
    "dirichlet_mean_entropy",
    "flatten_transitions",
    "history_codes",
    "lifted_stationary",
    "lifted_transition_matrix",
    "log_uniform",
    "next_token_probs",
    "sample_batch",
    "sample_sequences",
    "sample_transitions",
    "sample_urn",
    "suffix_conditional",
    # estimators
    "bayes_predictor",
    "contiguous_offsets",
    "cross_entropy",
    "estimator_losses",
    "kgram_counts",
    "kgram_estimator",
    "subset_counts",
    "subset_estimator",
    # models
    "AttentionOnlyTransformer",
    "SimplifiedTransformer",
    "causal_softmax",
    "construction_limit",
    "first_layer_attention",
    "load_parameters",
    "offsets_for_k",
    "theta_star",
    "theta_star_all_heads",
    "theta_star_subset",
    # landscape
    "GradientNorm",
    "SuffixModel",
    "exact_population_gradient",
    "fit_theorem42",
    "flat_gradient",
    "gradient_blocks",
    "gradient_norm",
    "lemma31_gradient",
    "next_token_loss",
    "sequence_law",
    "statistical_term",
    "suffix_law",
    "theorem42_trend",
    # stagewise
    "NGramStream",
    "checkpoint_gradient_norms",
    "kgram_levels",
    "make_eval_fn",
    "make_loss_fn",
    "make_test_set",
    "plot_attention_maps",
    # plateaus
    "Plateau",
    "detect_plateaus",
    "escape_step",
    "first_offsets",
    "formation_step",
    "moving_average",
    "nearest_level",
    "offset_attention",
]
