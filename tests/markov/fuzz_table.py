"""The fuzz harness's valid calls of ccmc_lite.markov (Part II)
(one entry or more per public callable).

``tests/fuzzkit.py`` derives the bad, extreme, relation and degenerate cases from each entry
(see its docstring) and gathers this table with the other parts'.
"""

from __future__ import annotations

import numpy as np
import torch
from fuzzkit import E, Entry, a


def entries() -> list[Entry]:
    """The valid calls of ccmc_lite.markov (Part II)."""
    from ccmc_lite import markov

    T: list[Entry] = []
    add = T.append
    P2 = markov.binary_kernel(0.3, 0.4)
    P3 = markov.random_kernel(3, 0)
    model = markov.MarkovTransformer(K=2, d=4, N=8)
    x2 = torch.tensor([[0, 1, 1, 0, 1, 0, 0, 1]] * 2)
    add(E("markov.binary_entropy_rate", a(0.3, "prob"), a(0.4, "prob")))
    add(E("markov.binary_kernel", a(0.3, "prob"), a(0.4, "prob")))
    add(E("markov.check_kernel", a(P2, "stoch")))
    add(E("markov.empirical_transitions", a(x2[0], "tokens", "x", K=2), a(2, "int", min=2)))
    add(
        E(
            "markov.enumerate_chains",
            a(P2, "stoch"),
            a(4, "int"),
            max_sequences=a(64, "int", huge=False),
        )
    )
    add(E("markov.lag_one_covariance", a(P2, "stoch")))
    add(E("markov.random_kernel", a(3, "int", min=2), a(0, "seed"), alpha=a(1.0, "pos")))
    add(E("markov.sample_chains", a(P2, "stoch", batched_ok=True), a(2, "int"), a(5, "int")))
    add(E("markov.symmetric_kernel", a(3, "int", min=2), a(0.3, "prob")))
    add(
        E(
            "markov.MarkovTransformer",
            K=a(2, "int", min=2),
            d=a(4, "int"),
            N=a(8, "int"),
            depth=a(1, "int"),
            tied=a(True, "bool"),
            layer_norm=a(False, "bool"),
        )
    )
    add(E("markov.build_model", K=a(2, "int", min=2), d=a(4, "int"), N=a(8, "int")))
    add(E("markov.check_model_options", a({"K": 2, "d": 4, "N": 8}, "obj", "options")))
    q = torch.randn(2, 8, 4)
    add(
        E(
            "markov.causal_attention",
            a(q, "array", "q", shape=False),
            a(q, "array", "k", shape=False),
            a(q, "array", "v", shape=False),
        )
    )
    add(
        E(
            "markov.blocked_causal_attention",
            a(q, "array", "q", shape=False),
            a(q, "array", "k", shape=False),
            a(q, "array", "v", shape=False),
            block=a(4, "int"),
        )
    )
    add(
        E(
            "markov.kernel_loss",
            a(model, "callable", "model"),
            a(x2, "tokens", "x", K=2),
            a(P2, "stoch"),
        )
    )
    add(E("markov.next_token_loss", a(model, "callable", "model"), a(x2, "tokens", "x", K=2)))
    add(E("markov.attention_ratio", a(model, "obj", "model"), a(x2, "tokens", "x", K=2)))
    add(E("markov.markov_config", a(3, "int"), lr=a(1e-3, "pos"), eval_every=a(0, "count")))
    add(
        E(
            "markov.plot_pq_grid",
            a("skip", "obj", "ax"),
            a(np.ones((2, 2))),
            a([0.2, 0.4]),
            label="bad only",
        )
    )
    add(
        E(
            "markov.appendix_d_logits",
            a(0.5, "real", "e"),
            a(0.3, "real", "p"),
            a(0.5, "real", "w1"),
            a(0.1, "real", "b"),
            a(2, "count", "beta"),
        )
    )
    add(
        E(
            "markov.binary_unigram_hessian",
            a(0.3, "prob"),
            a(0.4, "prob"),
            a(torch.zeros(2, 4), "array", "pos"),
        )
    )
    add(E("markov.fit_appendix_d", a(model, "obj", "model")))
    add(
        E(
            "markov.gauge_restrict",
            a(torch.eye(6, dtype=torch.float64), "array", "H"),
            a(2, "int", min=2),
            a(2, "int"),
        )
    )
    add(E("markov.low_rank_summary", a(model, "obj", "model")))
    add(
        E(
            "markov.population_hessian",
            a(model, "obj", "model"),
            a(P2, "stoch"),
            a(["b"]),
            max_sequences=a(4096, "int", huge=False),
        )
    )
    add(
        E(
            "markov.population_loss",
            a(model, "obj", "model"),
            a(P2, "stoch"),
            method=a("auto", "choice"),
            max_sequences=a(65536, "int", huge=False),
        )
    )
    add(E("markov.symbolic_unigram_hessian", a(2, "int", min=2), a(2, "int"), a(2, "int")))
    add(E("markov.symmetric_threshold", a(3, "int", min=2, huge=False)))
    add(E("markov.theta_pi", a(model, "obj", "model"), a(P2, "stoch")))
    add(E("markov.theta_star", a(model, "obj", "model"), a(0.3, "prob"), a(0.4, "prob")))
    add(E("markov.unigram_curvature", a(P2, "stoch")))
    add(E("markov.unigram_inputs", a(markov.theta_pi(model, P2), "obj", "model")))
    add(
        E(
            "markov.unigram_gap",
            a(torch.tensor([0.6, 0.5]), "array", "loss"),
            a(torch.stack([P2, P2]), "stoch", "kernels"),
        )
    )
    add(
        E(
            "markov.zero_position_probs",
            a(x2[None], "tokens", "x", K=2),
            a(torch.full((1, 2, 8, 2), 0.5), "probvec", "probs"),
            count=a(2, "int"),
        )
    )
    sm = markov.MarkovTransformer(K=3, d=4, N=8)
    q_in, m_in = markov.unigram_inputs(markov.theta_pi(sm, P3))
    add(E("markov.unigram_hessian", a(P3, "stoch"), a(q_in, "array", "pos"), ff_jacobian=a(m_in)))
    dirs = [{"b": torch.ones_like(model.b)}, {"e": torch.ones_like(model.e)}]
    grid = torch.linspace(-0.1, 0.1, 2)
    add(
        E(
            "markov.loss_plane",
            a(model, "obj", "model"),
            a(P2, "stoch"),
            a(dirs, "obj", "directions"),
            a(grid, "array", "s", shape=False),
            a(grid, "array", "t", shape=False),
        )
    )
    mcfg = markov.markov_config(2, progress=False)
    opts = {"K": 2, "d": 4, "N": 8}
    kern = torch.stack([P2, P2])
    add(
        E(
            "markov.train_markov",
            a(kern, "stoch", "kernels"),
            model_options=a(opts, "obj"),
            config=a(mcfg, "obj"),
            seed=a(0, "seed"),
            batch_size=a(2, "int"),
        )
    )
    mr = markov.train_markov(
        kern,
        model_options=opts,
        config=mcfg,
        seed=0,
        batch_size=2,
    )
    add(E("markov.MarkovRuns", a(mr.result), a(kern), a(opts), a(2)))
    pos = torch.randn(8, 4, dtype=torch.float64) * 0.1
    add(
        E(
            "markov.layer_norm_unigram_hessian",
            a(0.3, "prob"),
            a(0.4, "prob"),
            a(pos, "array", "pos"),
            tied=a(True, "bool"),
            eps=a(1e-5, "pos"),
        )
    )
    add(
        E(
            "markov.threshold_bracket",
            a(np.array([0.6, 0.65, 0.7]), "array", "ps"),
            a(np.array([[0.9, 0.8], [0.6, 0.4], [0.1, 0.0]]), "array", "gaps"),
            level=a(0.5, "real"),
            allow=("nan",),
        )
    )
    qkv = torch.randn(2, 8, 4)
    add(
        E(
            "markov.check_attention_inputs",
            a(qkv, "array", "q", shape=False),
            a(qkv, "array", "k", shape=False),
            a(qkv, "array", "v", shape=False),
        )
    )
    # the public methods, the instance first
    for method in ("embed", "predict_proba"):
        add(E(f"markov.MarkovTransformer.{method}", a(model, "fixed"), a(x2, "tokens", "x", K=2)))
    add(
        E(
            "markov.MarkovTransformer.forward",
            a(model, "fixed"),
            a(x2, "tokens", "x", K=2),
            output=a("log_probs", "choice"),
        )
    )
    add(E("markov.MarkovTransformer.readout_weight", a(model, "fixed")))
    last = mr.checkpoint_steps[-1]
    add(
        E("markov.MarkovRuns.params_at", a(mr, "fixed"), a(last, "count", huge=False, none_ok=True))
    )
    add(E("markov.MarkovRuns.module", a(mr, "fixed"), a(0, "count", huge=False)))
    add(E("markov.MarkovRuns.test_sequences", a(mr, "fixed"), a(4, "int"), a(0, "seed")))
    add(
        E(
            "markov.MarkovRuns.test_losses",
            a(mr, "fixed"),
            n_test=a(4, "int"),
            seed=a(0, "seed"),
            steps=a([last], "obj", none_ok=True),
            cases=[("relation", "a step that is not a checkpoint", {"steps": [last + 1]}, "raise")],
        )
    )
    add(
        E(
            "markov.MarkovRuns.probabilities",
            a(mr, "fixed"),
            n_test=a(4, "int"),
            seed=a(0, "seed"),
            step=a(last, "count", huge=False, none_ok=True),
        )
    )
    return T
