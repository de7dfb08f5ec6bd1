"""The fuzz harness's valid calls of ccmc_lite.ngram (Part III)
(one entry or more per public callable).

``tests/fuzzkit.py`` derives the bad, extreme, relation and degenerate cases from each entry
(see its docstring) and gathers this table with the other parts'.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from fuzzkit import E, Entry, a


def entries() -> list[Entry]:
    """The valid calls of ccmc_lite.ngram (Part III)."""
    from ccmc_lite import core, markov, ngram
    from tools import ngram_tasks

    T: list[Entry] = []
    add = T.append
    P3 = markov.random_kernel(3, 0)
    p3 = core.stationary_distribution(P3)
    task = ngram.NGramTask(S=3, n=2, T=8)
    batch = ngram.sample_batch(task, 4, seed=0)
    tok = batch.tokens
    target = batch.next_probs[:, -1]
    st = ngram.SimplifiedTransformer(3, 8, 2)
    tokP = batch.transitions[0]
    loss1 = np.array([1.0, 0.9, 0.8, 0.7, 0.6, 0.5])
    add(
        E(
            "ngram.NGramTask",
            S=a(3, "int", min=2),
            n=a(2, "int"),
            T=a(8, "int"),
            alpha=a(0.5, "pos"),
            start=a("uniform", "choice"),
        )
    )
    add(E("ngram.NGramBatch", a(batch.tokens), a(batch.next_probs), a(batch.transitions)))
    add(
        E(
            "ngram.dirichlet",
            a(0.5, "pos", "alpha"),
            a((2,), "shape"),
            a(3, "int", min=2),
            seed=a(0, "seed", none_ok=True),
            dtype=a(torch.float64, "dtype"),
        )
    )
    add(E("ngram.dirichlet_mean_entropy", a(3, "int", min=2, huge=False), a(0.5, "pos")))
    add(E("ngram.flatten_transitions", a(tokP, "stoch", "P"), a(3, "int", min=2), a(2, "int")))
    add(
        E(
            "ngram.history_codes",
            a(tok, "tokens", K=3),
            a(3, "int", min=2),
            a(2, "count"),
            cases=[("relation", "length > T + 1", {2: tok.shape[-1] + 3}, "finite")],
        )
    )
    add(E("ngram.lifted_stationary", a(tokP, "stoch", "P"), a(3, "int", min=2), a(2, "int")))
    add(E("ngram.lifted_transition_matrix", a(tokP, "stoch", "P"), a(3, "int", min=2), a(2, "int")))
    add(E("ngram.log_uniform", a(3, "int", min=2, huge=False)))
    add(
        E(
            "ngram.sample_batch",
            a(task, "obj", "task"),
            a(4, "int"),
            seed=a(0, "seed", none_ok=True),
        )
    )
    add(
        E(
            "ngram.sample_sequences",
            a(batch.transitions, "stoch", "P"),
            a(6, "int"),
            seed=a(0, "seed", none_ok=True),
        )
    )
    add(
        E(
            "ngram.sample_sequences",
            a(tokP, "stoch", "P"),  # (3, 3): three unigram laws, which only n = 1 says
            a(6, "int"),
            seed=a(0, "seed", none_ok=True),
            n=a(1, "int", none_ok=True),
            label="n",
        )
    )
    add(
        E(
            "ngram.sample_transitions",
            a(task, "obj", "task"),
            a((2,), "shape"),
            seed=a(0, "seed", none_ok=True),
        )
    )
    add(
        E(
            "ngram.sample_urn",
            a(task, "obj", "task"),
            a((2,), "shape"),
            seed=a(0, "seed", none_ok=True),
        )
    )
    add(
        E(
            "ngram.suffix_conditional",
            a(batch.transitions, "stoch", "P"),
            a(1, "int"),
            a(4, "int"),
            n=a(2, "int", none_ok=True),
        )
    )
    add(
        E(
            "ngram.bayes_predictor",
            a(tok, "tokens", K=3),
            a(3, "int", min=2),
            a(2, "int"),
            a(0.5, "pos"),
            cases=[("relation", "n > T + 1", {2: tok.shape[-1] + 3}, "finite")],
        )
    )
    add(E("ngram.contiguous_offsets", a(2, "int")))
    add(
        E(
            "ngram.cross_entropy",
            a(target, "probvec", "pred"),
            a(target, "probvec", "target"),
            allow=("inf",),
        )
    )
    add(
        E(
            "ngram.estimator_losses",
            a(tok, "tokens", K=3),
            a(target, "probvec", "target"),
            a(3, "int", min=2),
            a([1, 2]),
            smoothing=a(0.5, "nonneg"),
            allow=("inf",),
        )
    )
    add(
        E(
            "ngram.smoothing_losses",
            a(tok, "tokens", K=3),
            a(target, "probvec", "target"),
            a(3, "int", min=2),
            a((1,)),
            a([0.0, 0.5, 2.0], "nonneg_values"),
            allow=("inf",),
        )
    )
    add(
        E(
            "ngram.kgram_counts",
            a(tok, "tokens", K=3),
            a(3, "int", min=2),
            a(1, "count"),
            positions=a("last", "choice"),
            chunk=a(64, "int", huge=False),
        )
    )
    add(
        E(
            "ngram.kgram_estimator",
            a(tok, "tokens", K=3),
            a(3, "int", min=2),
            a(1, "count"),
            smoothing=a(0.5, "nonneg"),
            cases=[("relation", "k > T + 1", {2: tok.shape[-1] + 3}, "finite")],
        )
    )
    add(
        E(
            "ngram.subset_estimator",
            a(tok, "tokens", K=3),
            a(3, "int", min=2),
            a([1]),
            smoothing=a(0.5, "nonneg"),
        )
    )
    add(
        E(
            "ngram.AttentionOnlyTransformer",
            a(3, "int", min=2),
            a(8, "int"),
            init_scale=a(1.0, "nonneg"),
        )
    )
    add(
        E(
            "ngram.SimplifiedTransformer",
            a(3, "int", min=2),
            a(8, "int"),
            a(2, "count"),
            init_scale=a(1.0, "nonneg"),
        )
    )
    nan_K2 = ngram.theta_star(1, S=3, T=8, n_heads=2, c=5.0)["K2"].clone()
    nan_K2[0, 0] = math.nan
    add(E("ngram.construction_limit", a(tok, "tokens", K=3), a(3, "int", min=2), a((1, None))))
    add(E("ngram.first_layer_attention", a(torch.randn(4, 4), "array", "A1", shape=False)))
    add(
        E(
            "ngram.load_parameters",
            a(st, "obj", "model"),
            a(ngram.theta_star(1, S=3, T=8, n_heads=2, c=5.0), "obj", "params"),
            cases=[
                (
                    "degenerate",
                    "NaN inside a loaded state",
                    {1: {**ngram.theta_star(1, S=3, T=8, n_heads=2, c=5.0), "K2": nan_K2}},
                    "raise",
                )
            ],
        )
    )
    add(E("ngram.offsets_for_k", a(1, "count"), a(2, "count")))
    add(
        E(
            "ngram.theta_star",
            a(1, "count"),
            S=a(3, "int", min=2),
            T=a(8, "int"),
            n_heads=a(2, "count"),
            c=a(5.0, "pos"),
        )
    )
    add(
        E(
            "ngram.theta_star_all_heads",
            S=a(3, "int", min=2),
            T=a(8, "int"),
            n_heads=a(2, "count"),
            c=a(5.0, "pos"),
        )
    )
    add(
        E(
            "ngram.theta_star_subset",
            a([1]),
            S=a(3, "int", min=2),
            T=a(8, "int"),
            n_heads=a(2, "count"),
            c=a(5.0, "pos"),
        )
    )
    add(E("ngram.GradientNorm", a(1.0), a(1.0), a(0.0)))
    add(E("ngram.SuffixModel", a(3, "int", min=2), a(1, "count")))
    add(E("ngram.sequence_law", a(tokP, "stoch", "P", one_d_ok=True), a(4, "int")))
    law = ngram.sequence_law(tokP, 4)
    add(
        E(
            "ngram.exact_population_gradient",
            a(ngram.SuffixModel(3, 1), "obj", "model"),
            a(law[0], "tokens", K=3),
            a(law[1], "probvec", "prob"),
            a(law[2], "probvec", "nxt"),
            label="law",
        )
    )
    add(
        E(
            "ngram.suffix_law",
            a(law[0], "tokens", K=3),
            a(law[1], "probvec", "prob"),
            a(law[2], "probvec", "nxt"),
            a(3, "int", min=2),
            a(1, "count"),
        )
    )
    for f in ("flat_gradient", "gradient_blocks", "gradient_norm", "lemma31_gradient"):
        add(
            E(
                f"ngram.{f}",
                a(st, "obj", "model"),
                a(tok, "tokens", K=3),
                a(target, "probvec", "target"),
            )
        )
    add(
        E(
            "ngram.next_token_loss",
            a(target, "probvec", "probs"),
            a(target, "probvec", "target"),
            eps=a(1e-8, "nonneg"),
            reduction=a("mean", "choice"),
        )
    )
    add(E("ngram.statistical_term", a(batch, "obj", "batch"), a(1, "count")))
    add(E("ngram.NGramStream", a(task, "obj", "task"), a(4, "int"), chunk=a(4, "int", huge=False)))
    add(
        E(
            "ngram.kgram_levels",
            a(tok, "tokens", K=3),
            a(target, "probvec", "target"),
            a(3, "int", min=2),
            a([1]),
            smoothing=a(0.5, "nonneg"),
            allow=("inf",),
        )
    )
    add(
        E(
            "ngram.make_eval_fn",
            a(tok, "array", "tokens", shape=False),
            a(target, "probvec", "target"),
            chunk=a(64, "int", huge=False),
            device=a("cpu", "choice", none_ok=True),
        )
    )
    add(E("ngram.make_loss_fn", a(1e-8, "nonneg", "eps")))
    add(E("ngram.make_test_set", a(task, "obj", "task"), a(4, "int"), seed=a(0, "seed")))
    add(
        E(
            "ngram.plot_attention_maps",
            a("skip", "obj", "axes"),
            a(torch.rand(4, 4)),
            label="bad only",
        )
    )
    add(E("ngram.Plateau", a(0), a(10), a(1.0), a(0.1)))
    gl = np.linspace(1, 0, 50)
    add(
        E(
            "ngram.detect_plateaus",
            a(gl, "array", "grad_norm", shape=False),
            a(gl, "array", "loss", shape=False),
            window=a(5, "int"),
            min_length=a(5, "int"),
        )
    )
    A1s = torch.rand(3, 1, 2, 6, 6)
    add(
        E(
            "ngram.first_offsets",
            a([0, 1, 2], "obj", "steps"),
            a(A1s, "array", "A1_by_step", "A1"),
            threshold=a(0.3, "prob"),
        )
    )
    add(
        E(
            "ngram.formation_step",
            a([0, 1, 2], "obj", "steps"),
            a(np.array([0.1, 0.2, 0.9]), "array", "weights", shape=False),
            a(0.3, "prob", "threshold"),
        )
    )
    add(E("ngram.moving_average", a(loss1, "array", "x", shape=False), a(2, "int", "window")))
    add(E("ngram.nearest_level", a(0.5, "real", "value"), a({"a": 0.4, "b": 0.9}, "obj", "levels")))
    add(
        E(
            "ngram.offset_attention",
            a(torch.rand(6, 6), "array", "A1", shape=False),
            a(1, "count", "offset"),
        )
    )
    cells_pt = [(16, 0.5), (32, 0.5)]
    ow = np.zeros((2, 3, 2, 2))
    ow[:, 1:, 0, 0] = 0.8  # the previous-token head forms at step 10
    ow[0, 2:, 1, 1] = 0.6  # the first run's two-back head at step 20
    add(
        E(
            "ngram.head_timing",
            a(cells_pt, "obj", "cells"),
            a([0, 10, 20], "array", "checkpoint_steps", shape=False),
            a(ow, "array", "offset_weight"),
            threshold=a(0.3, "prob"),
        )
    )
    timing_pt = ngram.head_timing(cells_pt, [0, 10, 20], ow)
    add(E("ngram.HeadTiming", a(32), a(0.5), a(10), a(20)))
    add(
        E(
            "ngram.plateau_lengths",
            a(timing_pt, "obj", "timing"),
            a(30, "int", "steps"),
            T=a(16, "int"),
            alpha=a(0.5, "pos"),
        )
    )
    add(E("ngram.first_heads", a(timing_pt, "obj", "timing")))
    add(
        E(
            "ngram.plateau_statistics",
            a(timing_pt, "obj", "timing"),
            a(30, "int", "steps"),
            Ts=a([16, 32], "obj"),
            alphas=a([0.5], "obj"),
            base_T=a(32, "int"),
            base_alpha=a(0.5, "pos"),
        )
    )
    add(
        E(
            "ngram.plot_plateau_sweep",
            a("skip", "obj", "axes"),
            a(timing_pt),
            a(30),
            Ts=a([16, 32]),
            alphas=a([0.5]),
            label="bad only",
        )
    )
    add(E("ngram.Stage", a(0), a(10), a(1.0), a("bigram")))
    add(E("ngram.absent_mass", a(tok, "tokens", K=3), a(target, "probvec", "target"), a(3, "int")))
    Ts = np.array([8.0, 16.0, 32.0, 64.0])
    add(
        E(
            "ngram.decay_fits",
            a(Ts, "array", "T", shape=False),
            a(np.array([0.5, 0.25, 0.12, 0.06]), "array", "values", shape=False),
        )
    )
    stair = np.concatenate([np.full(10, 1.6), np.linspace(1.6, 1.5, 5), np.full(10, 1.5)])
    add(
        E(
            "ngram.detect_stages",
            a(stair, "array", "loss", shape=False),
            window=a(1, "int"),
            span=a(5, "int", min=2),
            tol=a(0.005, "pos"),
            min_points=a(3, "int"),
            min_separation=a(0.02, "nonneg"),
            cases=[("degenerate", "one point", {0: np.array([1.6])}, "raise")],
        )
    )
    stages = ngram.detect_stages(stair)
    ck = np.arange(0, 25 * 10, 10)
    w1s, w2s = np.full((25, 2), 0.5), np.zeros((25, 2))
    add(
        E(
            "ngram.label_stages",
            a(stages, "obj", "stages"),
            a(ck, "array", "steps", shape=False),
            a(w1s, "array", "w1"),
            a(w2s, "array", "w2"),
            threshold=a(0.3, "prob"),
        )
    )
    add(
        E(
            "ngram.histogram_levels",
            a(tok, "tokens", K=3),
            a(target, "probvec", "target"),
            a(3, "int"),
            a((1, 2), "obj", "ks"),
            eps=a(1e-8, "pos"),
        )
    )
    add(E("ngram.unmatched_mass", a(batch, "obj", "batch"), a(2, "int", "k")))
    p3_settings = {
        "S": 3, "n": 3, "T": 8, "alpha": 0.5, "heads": 2, "steps": 4, "lr": 0.01,
        "batch": 4, "test_sequences": 8, "eval_every": 2,
    }  # fmt: skip
    p3 = ngram_tasks.sweep_task(p3_settings, [{"run": 0}], first_run=0, seed=0)
    p3_eval = np.asarray(p3["shared"]["eval_steps"])
    p3_ck = np.asarray(p3["shared"]["checkpoint_steps"])
    add(
        E(
            "ngram.stage_summary",
            a(np.asarray(p3["test_loss"]), "array", "test_loss"),
            a(p3_eval, "array", "eval_steps", shape=False),
            a(p3_ck, "array", "checkpoint_steps", shape=False),
            a(np.asarray(p3["offset_weight"]), "array", "offset_weight"),
            threshold=a(0.3, "prob"),
            span=a(2, "int", min=2, huge=False),
            tol=a(0.008, "pos"),
            min_separation=a(0.02, "nonneg"),
        )
    )
    p3_rows = ngram.stage_summary(
        np.asarray(p3["test_loss"]), p3_eval, p3_ck, np.asarray(p3["offset_weight"]), span=2
    )
    add(E("ngram.stage_counts", a(p3_rows, "obj", "rows"), a(0.03, "pos", "lr")))
    # the public methods, the instance first
    ao = ngram.AttentionOnlyTransformer(3, 8, [1])
    for name, m in (
        ("SimplifiedTransformer.embed", st),
        ("SimplifiedTransformer.first_layer", st),
        ("SimplifiedTransformer.second_layer_attention", st),
        ("AttentionOnlyTransformer.embed", ao),
        ("AttentionOnlyTransformer.attention", ao),
        ("AttentionOnlyTransformer.forward", ao),
        ("SuffixModel.forward", ngram.SuffixModel(3, 1)),
    ):
        add(E(f"ngram.{name}", a(m, "fixed"), a(tok, "tokens", "tokens", K=3)))
    add(
        E(
            "ngram.SimplifiedTransformer.forward",
            a(st, "fixed"),
            a(tok, "tokens", "tokens", K=3),
            all_positions=a(False, "bool"),
        )
    )
    add(
        E(
            "ngram.HeadTiming.plateau",
            a(ngram.HeadTiming(32, 0.5, 10, None), "fixed"),
            a(100, "count", huge=False),
        )
    )
    return T
