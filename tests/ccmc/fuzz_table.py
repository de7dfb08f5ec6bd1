"""The fuzz harness's valid calls of ccmc_lite.ccmc (Part I)
(one entry or more per public callable).

``tests/fuzzkit.py`` derives the bad, extreme, relation and degenerate cases from each entry
(see its docstring) and gathers this table with the other parts'.
"""

from __future__ import annotations

import numpy as np
import torch
from fuzzkit import E, Entry, a


def entries() -> list[Entry]:
    """The valid calls of ccmc_lite.ccmc (Part I)."""
    from ccmc_lite import ccmc, core, markov

    T: list[Entry] = []
    add = T.append
    P3 = markov.random_kernel(3, 0)
    p3 = core.stationary_distribution(P3)
    X = [0, 1, 2, 1, 0]
    E3 = ccmc.random_embeddings(3, 3, seed=0)
    W3 = torch.eye(3, dtype=torch.float64) * 0.3
    prompts = [[0, 1, 2], [1, 2, 0], [2, 0, 1], [0, 2, 1], [1, 0, 2], [2, 1, 0, 0]]
    pop = ccmc.population_data(P3, prompts)
    Ep, Up, *_ = ccmc.positional_embeddings(3, 5, 8, seed=0)
    W8 = torch.eye(8, dtype=torch.float64) * 0.3
    add(E("ccmc.PromptData", a(pop.counts), a(pop.query), a(pop.y), a(pop.weights), a(3)))
    tr = ccmc.sample_trajectories(P3, X, 3, seed=0)
    add(E("ccmc.Trajectories", a(5), a(tr.tokens), a(tr.times), a(tr.counts), a(tr.transitions)))
    add(
        E(
            "ccmc.ccmc_distribution",
            a(P3, "stoch"),
            a(X, "tokens", K=3),
            variant=a("self", "choice"),
        )
    )
    # A prompt on tokens {0, 1} ending in 1, and a P with P[1, 0] = P[1, 1] = 0: the CCMC
    # transition (Def. 2.1) has no mass to normalise, which each function must say.
    Xu = [0, 0, 1, 1, 1]
    Pu = torch.tensor([[1 / 3] * 3, [0.0, 0.0, 1.0], [1 / 3] * 3], dtype=torch.float64)
    seed0 = {"seed": a(0)}
    for name, rest, kw in (
        ("ccmc.ccmc_distribution", [a(Xu)], {}),
        ("ccmc.log_likelihood", [a(ccmc.population_data(P3, [Xu, [0, 1, 2]]))], {}),
        ("ccmc.population_data", [a([Xu, [0, 1, 2]])], {}),
        (
            "ccmc.positional_ccmc_distribution",
            [a(Xu), a(torch.ones(5)), a(torch.ones(3)), a(torch.ones(5, 3))],
            {},
        ),
        ("ccmc.sample_next", [a(Xu)], seed0),
        ("ccmc.sample_trajectories", [a(Xu), a(4)], seed0),
        ("ccmc.draw_collapse", [a(Xu), a(30)], seed0),
    ):
        add(E(name, a(P3, "undefined", P=Pu), *rest, label="undefined", **kw))
    add(E("ccmc.check_transition", a(P3, "stoch")))
    add(E("ccmc.frequencies", a(X, "tokens", K=3), a(3, "int", huge=False)))
    # two runs of the parameter against data weighted for three runs: contradictory
    pop3 = pop.with_weights(pop.weights.expand(3, -1))
    P2 = torch.stack([P3, 0.5 * P3 + 0.5 / 3])
    add(
        E(
            "ccmc.log_likelihood",
            a(P3, "stoch"),
            a(pop, "obj", "data"),
            allow=("inf",),
            cases=[("relation", "P of 2 runs, data of 3", {0: P2, 1: pop3}, "raise")],
        )
    )
    add(E("ccmc.population_data", a(P3, "stoch"), a(prompts, "obj", "prompts")))
    add(
        E(
            "ccmc.positional_ccmc_distribution",
            a(P3, "stoch"),
            a(X, "tokens", K=3),
            a(torch.ones(5, dtype=torch.float64), "array", "a"),
            a(torch.ones(3, dtype=torch.float64), "array", "b"),
            a(torch.ones(5, 3, dtype=torch.float64), "array", "V"),
        )
    )
    add(
        E(
            "ccmc.prompt_data",
            a([[0, 1], [1, 2]], "obj", "prompts"),
            a([1, 2], "tokens", "next_tokens", K=3),
            a(3, "int"),
        )
    )
    add(E("ccmc.prompt_statistics", a([[0, 1], [1, 2]], "obj", "prompts"), a(3, "int")))
    add(
        E(
            "ccmc.random_prompts",
            a(3, "int", min=2),
            a(4, "int"),
            min_length=a(2, "int"),
            max_length=a(3, "int"),
            seed=a(0, "seed"),
        )
    )
    add(
        E(
            "ccmc.sample_next",
            a(P3, "stoch"),
            a(X, "tokens", K=3),
            seed=a(0, "seed"),
            n_samples=a(2, "int"),
        )
    )
    add(E("ccmc.sample_prompt_data", a(pop, "obj", "population"), a(10, "int"), seed=a(0, "seed")))
    add(
        E(
            "ccmc.sample_trajectories",
            a(P3, "stoch", batched_ok=True),
            a(X, "tokens", "prompt", K=3),
            a(4, "int"),
            seed=a(0, "seed"),
            n_traj=a(2, "int", none_ok=True),
            chunk=a(16, "int", huge=False),
        )
    )
    add(E("ccmc.trajectory_data", a(tr.tokens, "tokens", K=3), a(5, "int"), a(3, "int")))
    add(E("ccmc.weighted_transition", a(P3, "stoch"), a(p3, "weights", "m")))
    add(
        E(
            "ccmc.attention_scores",
            a(W3, "array", "W", shape=False),
            a(E3, "array", "E"),
            a(X, "tokens", K=3),
        )
    )
    add(E("ccmc.check_embeddings", a(E3, "array", "E")))
    add(
        E(
            "ccmc.cross_attention",
            a(W3, "array", "W", shape=False),
            a(E3, "array", "E"),
            a(X, "tokens", K=3),
        )
    )
    add(E("ccmc.embed", a(E3, "array", "E"), a(X, "tokens", K=3)))
    add(E("ccmc.logits_from_weights", a(W3, "array", "W", shape=False), a(E3, "array", "E")))
    add(
        E(
            "ccmc.next_token_distribution",
            a(W3, "array", "W", shape=False),
            a(E3, "array", "E"),
            a(X, "tokens", K=3),
        )
    )
    add(E("ccmc.positional_embeddings", a(3, "int"), a(5, "int"), a(8, "int"), seed=a(0, "seed")))
    add(
        E(
            "ccmc.positional_factors",
            a(W8, "array", "W", shape=False),
            a(Ep, "array", "E"),
            a(Up, "array", "U"),
        )
    )
    add(E("ccmc.project_onto_subspace", a(W3, "array", "W", shape=False), a(E3, "array", "E")))
    add(E("ccmc.random_embeddings", a(3, "int"), a(3, "int"), seed=a(0, "seed")))
    add(
        E(
            "ccmc.self_attention",
            a(W3, "array", "W", shape=False),
            a(E3, "array", "E"),
            a(X, "tokens", K=3),
        )
    )
    add(E("ccmc.subspace_basis", a(E3, "array", "E")))
    add(E("ccmc.transition_from_weights", a(W3, "array", "W", shape=False), a(E3, "array", "E")))
    add(E("ccmc.weights_from_logits", a(W3, "array", "Theta", shape=False), a(E3, "array", "E")))
    add(E("ccmc.weights_from_transition", a(P3, "stoch"), a(E3, "array", "E")))
    add(
        E("ccmc.from_column_stochastic", a(P3.T.clone(), "stoch", "P_columns"), atol=a(1e-6, "pos"))
    )
    add(E("ccmc.to_column_stochastic", a(P3, "stoch"), atol=a(1e-6, "pos")))
    add(E("ccmc.from_one_based", a([1, 2, 3], "array", "tokens", shape=False)))
    rep = ccmc.coverage_report(prompts, 3)
    add(
        E(
            "ccmc.coverage_report",
            a(prompts, "obj", "prompts"),
            a(3, "int"),
            variant=a("self", "choice"),
        )
    )
    add(
        E(
            "ccmc.CoverageReport",
            *[a(getattr(rep, f.name)) for f in rep.__dataclass_fields__.values()],
        )
    )
    add(E("ccmc.draw_cooccurrence_graph", a("skip", "obj", "ax"), a(rep), a(0), label="bad only"))
    add(
        E(
            "ccmc.restricted_distribution",
            a(P3, "stoch"),
            a(0, "count", "k", huge=False),
            a([0, 1], "obj", "subset"),
        )
    )
    add(E("ccmc.AttentionMLE", a(E3, "array", "E")))
    fit = ccmc.fit_gd(pop, E3, steps=3)
    add(E("ccmc.FitResult", *[a(getattr(fit, f)) for f in fit.__dataclass_fields__]))
    add(
        E(
            "ccmc.asymptotic_error",
            a(W3, "array", "W", shape=False),
            a(E3, "array", "E"),
            a(pop, "obj", "population"),
            cases=[("relation", "population of 3 runs", {2: pop3}, "raise")],
        )
    )
    add(
        E(
            "ccmc.fit_gd",
            a(pop, "obj", "data"),
            a(E3, "array", "E"),
            steps=a(3, "int"),
            lr=a(0.5, "pos", none_ok=True),
            tol=a(0.0, "nonneg"),
            allow=("nan",),  # the histories after a run stopped
        )
    )
    add(
        E(
            "ccmc.fit_newton",
            a(pop, "obj", "data"),
            a(E3, "array", "E"),
            tol=a(1e-10, "nonneg"),
            max_iter=a(5, "int"),
            armijo=a(1e-4, "prob"),
            allow=("nan",),  # the histories after the fit stopped
        )
    )
    add(E("ccmc.gd_step_size", a(pop, "obj", "data"), a(E3, "array", "E")))
    add(
        E(
            "ccmc.gd_with_trainer",
            a(pop, "obj", "data"),
            a(E3, "array", "E"),
            steps=a(2, "int"),
            lr=a(0.5, "pos"),
            seed=a(0, "seed"),
        )
    )
    W2 = torch.stack([W3, -W3])
    for f in ("gradient", "hessian_on_subspace", "nll"):
        add(
            E(
                f"ccmc.{f}",
                a(W3, "array", "W", shape=False),
                a(E3, "array", "E"),
                a(pop, "obj", "data"),
                cases=[
                    ("relation", "W of 2 runs, data of 3", {0: W2, 2: pop3}, "raise"),
                    (
                        "relation",
                        "data of 3 runs",
                        {2: pop3},
                        "finite" if f != "hessian_on_subspace" else "raise",
                    ),
                ],
            )
        )
    add(
        E(
            "ccmc.hessian_logits",
            a(W3, "array", "Theta", shape=False),
            a(pop, "obj", "data"),
            cases=[("relation", "Theta of 2 runs, data of 3", {0: W2, 1: pop3}, "raise")],
        )
    )
    add(E("ccmc.binary_collapse_chain", a(0.3, "prob")))
    add(E("ccmc.collapse_explorer", label="widget"))
    add(E("ccmc.collapse_exponent", a(0.3, "prob")))
    add(E("ccmc.weak_weak_exponent", a(0.3, "prob")))
    tr2 = ccmc.sample_trajectories(P3, X, 40, seed=0, n_traj=2)
    freqs = torch.stack([ccmc.running_frequencies(t, 3) for t in tr2.tokens])
    times = torch.arange(1, freqs.shape[1] + 1, dtype=torch.float64)
    freqs = (freqs + 0.01) / 1.03
    m_fixed = ccmc.fixed_point(P3, p3, steps=10)
    add(
        E(
            "ccmc.compare_decay_exponents",
            a(freqs, "array", "freqs", shape=False),
            a(times, "array", "times", shape=False),
            a(P3, "stoch"),
            a(m_fixed, "weights", "m_fixed", "m"),
            t_min=a(2.0, "nonneg"),
        )
    )
    add(
        E(
            "ccmc.draw_collapse",
            a(P3, "stoch"),
            a(X, "tokens", "prompt", K=3),
            a(30, "int"),
            seed=a(0, "seed"),
            label="figure",
        )
    )
    add(E("ccmc.explorer_chain", a(3, "int", min=2), a("random", "choice"), seed=a(0, "seed")))
    add(
        E(
            "ccmc.fixed_point",
            a(P3, "stoch"),
            a(p3, "weights", "m0"),
            steps=a(10, "int"),
            dt=a(0.05, "pos"),
        )
    )
    add(E("ccmc.plot_frequency_curves", a("skip", "obj", "ax"), a(freqs[0]), label="bad only"))
    add(E("ccmc.plot_snapshots", a("skip", "obj", "ax"), a(X), a([0]), label="bad only"))
    add(
        E(
            "ccmc.predicted_decay_exponents",
            a(P3, "stoch"),
            a(m_fixed, "weights", "m"),
            allow=("nan",),
        )
    )
    add(E("ccmc.random_chain", a(3, "int", min=2), seed=a(0, "seed"), scale=a(1.0, "nonneg")))
    add(E("ccmc.running_frequencies", a(X, "tokens", K=3), a(3, "int", huge=False)))
    add(E("ccmc.self_reinforcing_tokens", a(P3, "stoch")))
    add(E("ccmc.stationary_of_reweighted", a(P3, "stoch"), a(p3, "weights", "m")))
    add(E("ccmc.zero_diagonal", a(P3, "stoch")))
    add(
        E(
            "ccmc.collapse_census",
            a([P3], "obj", "Ps"),
            a(20, "int", "length"),
            n_traj=a(4, "int"),
            seed=a(0, "seed"),
            tv=a(0.1, "prob"),
        )
    )
    add(
        E(
            "ccmc.collapse_limit_constant",
            a(0.3, "prob", max=0.49),
            prompt_length=a(3, "int", min=2, huge=False),
            prompt_weak=a(1, "int"),
        )
    )
    times = np.array([10.0, 20.0, 40.0])
    add(
        E(
            "ccmc.collapse_lower_bound",
            a(0.3, "prob"),
            a(times, "array", "t", shape=False),
            prompt_length=a(2, "int"),
            prompt_weak=a(1, "int"),
        )
    )
    fixed = ccmc.stable_fixed_points(P3)
    add(
        E(
            "ccmc.stable_fixed_points",
            a(P3, "stoch"),
            steps=a(50, "int"),
            dt=a(0.5, "pos"),
            tol=a(1e-7, "pos"),
            allow=("nan",),
        )
    )
    add(E("ccmc.interior_rates", a(P3, "stoch"), a(fixed[0][1], "probvec", "m"), h=a(1e-6, "pos")))
    add(E("ccmc.mle_exists", a(pop, "obj", "data")))
    add(E("ccmc.near_stability_boundary", a(P3, "stoch"), a(0.05, "pos", "delta")))
    add(
        E(
            "ccmc.weak_weak_exact",
            a(0.3, "prob"),
            a(30, "int", "length"),
            prompt=a([0, 1], "tokens", K=2),
            allow=("nan",),  # documented: nan below the prompt's length
        )
    )
    add(
        E(
            "ccmc.weak_frequency_exact",
            a(0.3, "prob"),
            a(30, "int", "length"),
            prompt=a([0, 1], "tokens", K=2),
            statistic=a("odds", "choice"),
            allow=("nan",),
        )
    )
    # the public methods, the instance first
    add(E("ccmc.PromptData.with_weights", a(pop, "fixed"), a(pop.weights, "weights")))
    add(E("ccmc.PromptData.total_weight", a(pop, "fixed")))
    add(
        E(
            "ccmc.PromptData.run_axes_with",
            a(pop, "fixed"),
            a("W", "fixed"),
            a((2,), "obj", "shape"),
        )
    )
    add(E("ccmc.CoverageReport.summary", a(rep, "fixed")))
    rows = [a(getattr(pop, f), "fixed") for f in ("counts", "query", "y", "weights")]
    longer = torch.ones(pop.n_rows + 1, dtype=torch.float64)
    add(
        E(
            "ccmc.AttentionMLE.forward",
            a(ccmc.AttentionMLE(E3), "fixed"),
            *rows,
            cases=[("relation", "weights of a longer data set", {4: longer}, "raise")],
        )
    )
    return T
