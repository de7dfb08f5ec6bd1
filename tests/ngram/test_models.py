"""Tests for ccmc_lite.ngram.models (Varre et al. 2025, Sec. 2.3, Sec. 4.1, App. F, App. I.1)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_training import train_looped

from ccmc_lite.core import TrainConfig, train_runs
from ccmc_lite.ngram import (
    AttentionOnlyTransformer,
    NGramTask,
    SimplifiedTransformer,
    construction_limit,
    first_layer_attention,
    kgram_counts,
    kgram_estimator,
    load_parameters,
    offsets_for_k,
    sample_urn,
    theta_star,
    theta_star_all_heads,
)
from ccmc_lite.ngram.estimators import _subset_counts
from ccmc_lite.ngram.models import _causal_softmax


def _tokens(S=5, T=32, B=64, seed=0, n=3):
    x, _ = sample_urn(NGramTask(S=S, n=n, T=T), (B,), seed=seed)
    return x


# ----------------------------------------------------------------------------- the model


def test_output_is_a_probability_vector_on_the_sequence_tokens():
    torch.manual_seed(0)
    m = SimplifiedTransformer(5, 16, 2)
    x = torch.tensor([[0, 1, 1, 0] * 4])  # tokens 2, 3, 4 never occur
    with torch.no_grad():
        p = m(x)
    assert p.shape == (1, 5)
    assert float(p.sum()) == pytest.approx(1.0)
    assert float(p[0, 2:].abs().sum()) == 0.0


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 1000), heads=st.integers(1, 3))
def test_fast_last_query_equals_full_second_layer(seed, heads):
    torch.manual_seed(seed)
    m = SimplifiedTransformer(4, 12, heads, init_scale=2.0)
    with torch.no_grad():
        m.A1.normal_()
    x = _tokens(S=4, T=12, B=16, seed=seed)
    full = m(x, all_positions=True)  # (B, T, S)
    torch.testing.assert_close(m(x), full[:, -1], atol=1e-5, rtol=0)
    qp = torch.randint(1, 12, (16,))
    torch.testing.assert_close(m(x, qp), full[torch.arange(16), qp], atol=1e-5, rtol=0)
    torch.testing.assert_close(m(x[:, :7]), full[:, 6], atol=1e-5, rtol=0)


@pytest.mark.parametrize("d", [None, 6])
def test_look_ups_and_one_hot_products_give_the_same_model(monkeypatch, d):
    # On the CPU the last-query path gathers and scatters by token; on other devices it
    # multiplies by the one-hot embeddings (deterministic there). Both are the same
    # function: outputs and gradients agree, batched over runs (vmap) as in training.
    from torch.func import functional_call, stack_module_state, vmap

    import ccmc_lite.ngram.models as models

    torch.manual_seed(3)
    runs = [SimplifiedTransformer(4, 12, 2, d=d, init_scale=2.0) for _ in range(3)]
    for m in runs:
        with torch.no_grad():
            m.A1.normal_()
    params, buffers = stack_module_state(runs)  # (3, ...) each
    x = torch.stack([_tokens(S=4, T=12, B=8, seed=s) for s in range(3)])  # (3, 8, 12)
    qp = torch.randint(1, 12, (3, 8), generator=torch.Generator().manual_seed(0))

    def outputs_and_grads() -> list[torch.Tensor]:
        def one(p, b, tokens, query):
            return functional_call(runs[0], (p, b), (tokens, query))

        out = vmap(one)(params, buffers, x, qp) + vmap(one, in_dims=(0, 0, 0, None))(
            params, buffers, x, None
        )  # (3, 8, 4)
        grads = torch.autograd.grad(out.pow(2).sum(), list(params.values()))
        return [out.detach(), *grads]

    by_lookup = outputs_and_grads()
    monkeypatch.setattr(models, "_by_lookup", lambda tokens: False)
    by_products = outputs_and_grads()
    for a, b in zip(by_lookup, by_products, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert float(by_lookup[1].abs().sum()) > 0  # the gradients are not trivially zero


def test_first_layer_attention_is_causal_and_normalised():
    A = torch.randn(2, 6, 6)
    att = first_layer_attention(A)
    torch.testing.assert_close(att.sum(-1), torch.ones(2, 6))
    assert float(att.triu(1).abs().sum()) == 0.0
    # by hand: position t attends to s <= t with weights exp(A[h, t, s]) / sum_{s' <= t}
    for h in range(2):
        for t in range(6):
            w = torch.exp(A[h, t, : t + 1])
            torch.testing.assert_close(att[h, t, : t + 1], w / w.sum())
    with pytest.raises(ValueError, match="A1"):
        first_layer_attention(torch.zeros(2, 3, 4))


def test_model_validates_arguments():
    with pytest.raises(ValueError, match="S"):
        SimplifiedTransformer(1, 8, 2)
    with pytest.raises(ValueError, match="d"):
        SimplifiedTransformer(5, 8, 2, d=4)
    with pytest.raises(ValueError, match="embedding"):
        AttentionOnlyTransformer(3, 8, embedding="sinusoidal")


# ----------------------------------------------------------------------------- θ*^k


@pytest.mark.parametrize("k", [1, 2, 3])
def test_theta_star_tends_to_its_hardmax_limit(k):
    x = _tokens(B=256)
    m = SimplifiedTransformer(5, 32, 2).double()
    lim = construction_limit(x, 5, offsets_for_k(k, 2))
    errs = []
    for c in (4.0, 12.0, 40.0):
        load_parameters(m, theta_star(k, S=5, T=32, n_heads=2, c=c))
        with torch.no_grad():
            errs.append(float((m(x) - lim).abs().max()))
    assert errs[-1] < 1e-9
    if k > 1:
        assert errs[0] > errs[1] > errs[2]
    else:  # θ*^1 is the unigram for every c
        assert max(errs) < 1e-12


@pytest.mark.parametrize("k", [2, 3])
def test_theta_star_implements_the_kgram_estimator_for_large_c(k):
    """Where some key matches and no clamped boundary key matches, θ*^k is Def. 2.1."""
    x = _tokens(B=400, seed=3)
    m = SimplifiedTransformer(5, 32, 2).double()
    load_parameters(m, theta_star(k, S=5, T=32, n_heads=2, c=40.0))
    with torch.no_grad():
        p = m(x)
    est = kgram_estimator(x, 5, k)
    has_match = kgram_counts(x, 5, k).sum(-1) > 0
    # boundary keys i < k-1 compare a history clamped to x_0 (eq. (8a)); skip sequences where
    # such a key would spuriously match the query's history
    boundary = torch.zeros(400, dtype=torch.bool)
    for i in range(k - 1):
        hist_i = [x[:, max(i - h, 0)] for h in range(1, k)]
        hist_q = [x[:, 32 - h] for h in range(1, k)]
        boundary |= torch.stack([a == b for a, b in zip(hist_i, hist_q, strict=False)]).all(0)
    keep = has_match & ~boundary
    assert int(keep.sum()) > 200
    torch.testing.assert_close(p[keep], est[keep], atol=1e-9, rtol=0)


def test_theta_star_unigram_and_all_heads_bigram():
    x = _tokens(B=128, seed=5)
    m = SimplifiedTransformer(5, 32, 2).double()
    load_parameters(m, theta_star(1, S=5, T=32, n_heads=2, c=3.0))
    with torch.no_grad():
        torch.testing.assert_close(m(x), kgram_estimator(x, 5, 1))
    load_parameters(m, theta_star_all_heads(S=5, T=32, n_heads=2, c=30.0))
    with torch.no_grad():
        p = m(x)
    torch.testing.assert_close(p, construction_limit(x, 5, (1, 1)), atol=1e-8, rtol=0)
    torch.testing.assert_close(
        construction_limit(x, 5, (1, 1)), construction_limit(x, 5, offsets_for_k(2, 2))
    )


def test_theta_star_structure():
    th = theta_star(2, S=3, T=5, n_heads=2, c=4.0)
    assert th["A1"].shape == (2, 5, 5) and th["Q2"].shape == (9, 9)
    # head 1 puts logit c on the previous token, head 2 is off
    assert float(th["A1"][0, 3, 2]) == 4.0 and float(th["A1"][0, 0, 0]) == 4.0
    assert float(th["A1"][1].abs().sum()) == 0.0 and float(th["V1"][1].abs().sum()) == 0.0
    # Q2^T K2 = c Σ_j s_j^0 (s_j^1)^T  (eq. (8c))
    M = th["Q2"].T @ th["K2"]
    expected = torch.zeros(9, 9)
    expected[0:3, 3:6] = 4.0 * torch.eye(3)
    torch.testing.assert_close(M, expected)


def test_construction_bad_input():
    with pytest.raises(ValueError, match="c"):
        theta_star(2, S=5, T=8, n_heads=2, c=0.0)
    with pytest.raises(ValueError, match="c"):
        theta_star(2, S=5, T=8, n_heads=2, c=-1.0)
    with pytest.raises(ValueError, match="k"):
        theta_star(0, S=5, T=8, n_heads=2, c=1.0)
    with pytest.raises(ValueError, match="k"):
        theta_star(4, S=5, T=8, n_heads=2, c=1.0)  # k > n with n - 1 = 2 heads
    with pytest.raises(ValueError, match="tokens"):
        construction_limit(torch.tensor([[0, 7]]), 5, (1,))
    m = SimplifiedTransformer(5, 8, 2)
    with pytest.raises(ValueError, match="shape"):
        load_parameters(m, theta_star(2, S=5, T=9, n_heads=2, c=1.0))


# ----------------------------------------------------------------------------- App I.1 model


@pytest.mark.parametrize("embedding", ["onehot", "learned"])
def test_attention_only_transformer(embedding):
    torch.manual_seed(0)
    m = AttentionOnlyTransformer(3, 10, (2, 1), embedding=embedding)
    x = _tokens(S=3, T=10, B=8)
    p = m(x)
    assert p.shape == (8, 3)
    torch.testing.assert_close(p.sum(-1), torch.ones(8))
    torch.testing.assert_close(p, torch.full((8, 3), 1 / 3))  # read-out starts at zero
    with torch.no_grad():
        maps = m.attention(x)
    assert [a.shape for a in maps] == [(8, 2, 10, 10), (8, 1, 10, 10)]
    assert float(maps[0].triu(1).abs().sum()) == 0.0
    assert m.d == 13


# ----------------------------------------------------------------------------- batched training


@pytest.mark.parametrize("model", ["simplified", "general"])
def test_models_train_batched_like_looped(model):
    """The models are vmap-safe: the batched trainer reproduces the plain loop."""
    x, y = sample_urn(NGramTask(S=3, n=3, T=8), (16,), seed=0)

    def batch_fn(step, runs, gen):
        return x.expand(len(runs), 16, 8), y.expand(len(runs), 16, 3)

    def make():
        if model == "simplified":
            return SimplifiedTransformer(3, 8, 2)
        return AttentionOnlyTransformer(3, 8, (2, 1))

    def loss_fn(mod, batch):
        tok, tgt = batch
        return -(tgt * torch.log(mod(tok) + 1e-8)).sum(-1).mean()

    cfg = TrainConfig(steps=5, lr=0.01, optimizer="adam", progress=False)
    a = train_runs(make, loss_fn, batch_fn, n_runs=2, config=cfg, seed=1)
    b = train_looped(make, loss_fn, batch_fn, n_runs=2, config=cfg, seed=1)
    torch.testing.assert_close(a.loss, b.loss, atol=1e-5, rtol=1e-5)


def test_attention_only_forward_matches_the_plain_formula():
    """The fast forward (last layer at the last query only) equals the textbook formula."""
    torch.manual_seed(0)
    m = AttentionOnlyTransformer(3, 12, (2, 1), embedding="learned", init_scale=2.0)
    with torch.no_grad():
        m.W.normal_()
    x = _tokens(S=3, T=12, B=8)
    r = m.embed(x)
    for Q, K, V in zip(m.Q, m.K, m.V, strict=True):
        q = torch.einsum("btd,hed->bhte", r, Q)
        k = torch.einsum("btd,hed->bhte", r, K)
        v = torch.einsum("btd,hed->bhte", r, V)
        r = r + (_causal_softmax(q @ k.transpose(-1, -2)) @ v).sum(1)
    with torch.no_grad():
        torch.testing.assert_close(m(x), torch.softmax(r[:, -1] @ m.W, -1), atol=1e-5, rtol=0)


def test_mlp_layers_follow_the_plain_formula():
    """With ``mlp`` hidden units, each layer adds ``W_out relu(W_in r + b_in) + b_out`` to
    the residual stream after its attention (App. I.3's "transformers with MLP layers")."""
    torch.manual_seed(1)
    m = AttentionOnlyTransformer(3, 12, (2, 1), embedding="onehot", mlp=7)
    with torch.no_grad():
        m.W.normal_()
    assert [tuple(mlp[0].weight.shape) for mlp in m.mlps] == [(7, 15), (7, 15)]
    x = _tokens(S=3, T=12, B=8)
    r = m.embed(x)
    for layer, (Q, K, V) in enumerate(zip(m.Q, m.K, m.V, strict=True)):
        q = torch.einsum("btd,hed->bhte", r, Q)
        k = torch.einsum("btd,hed->bhte", r, K)
        v = torch.einsum("btd,hed->bhte", r, V)
        r = r + (_causal_softmax(q @ k.transpose(-1, -2)) @ v).sum(1)
        W_in, b_in = m.mlps[layer][0].weight, m.mlps[layer][0].bias
        W_out, b_out = m.mlps[layer][2].weight, m.mlps[layer][2].bias
        r = r + torch.relu(r @ W_in.T + b_in) @ W_out.T + b_out
    with torch.no_grad():
        torch.testing.assert_close(m(x), torch.softmax(r[:, -1] @ m.W, -1), atol=1e-5, rtol=0)
        plain = AttentionOnlyTransformer(3, 12, (2, 1), embedding="onehot")
        assert len(plain.mlps) == 0 and plain.mlp == 0
        plain.load_state_dict(m.state_dict(), strict=False)  # same attention weights
        # the first layer's MLP changes what the second layer attends to, not the first
        with_mlp, without = m.attention(x), plain.attention(x)
        torch.testing.assert_close(with_mlp[0], without[0])
        assert not torch.allclose(with_mlp[1], without[1], atol=1e-3)


@pytest.mark.parametrize(
    "mlp, error, match",
    [(-1, ValueError, "mlp"), (2.5, TypeError, "mlp"), (True, TypeError, "mlp"),
     (10**8, ValueError, "mlp")],
)  # fmt: skip
def test_mlp_width_is_checked(mlp, error, match):
    with pytest.raises(error, match=match):
        AttentionOnlyTransformer(3, 12, (2, 1), mlp=mlp)


@pytest.mark.parametrize("offsets", [(1,), (2,), (1, 2)])
def test_subset_construction_tends_to_the_subset_estimator(offsets):
    from ccmc_lite.ngram import subset_estimator, theta_star_subset

    x = _tokens(B=300, seed=9)
    m = SimplifiedTransformer(5, 32, 2).double()
    load_parameters(m, theta_star_subset(offsets, S=5, T=32, n_heads=2, c=40.0))
    with torch.no_grad():
        p = m(x)
    lim = construction_limit(x, 5, offsets)
    torch.testing.assert_close(p, lim, atol=1e-9, rtol=0)
    # where keys match and no clamped boundary key interferes, it is the N-estimator (App. F.2):
    # keys i < max(N) compare a history clamped to x_0 (as for theta*^k above)
    has = _subset_counts(x, 5, offsets).sum(-1) > 0
    boundary = torch.zeros(x.shape[0], dtype=torch.bool)
    for i in range(max(offsets)):
        hist_i = [x[:, max(i - h, 0)] for h in offsets]
        hist_q = [x[:, 32 - h] for h in offsets]
        boundary |= torch.stack([a == b for a, b in zip(hist_i, hist_q, strict=True)]).all(0)
    keep = has & ~boundary
    assert int(keep.sum()) > 200
    torch.testing.assert_close(lim[keep], subset_estimator(x, 5, offsets)[keep], atol=1e-9, rtol=0)
    if offsets == (1,):  # N = {1} is the bigram construction theta*^2
        th = theta_star(2, S=5, T=32, n_heads=2, c=40.0)
        for name, value in theta_star_subset(offsets, S=5, T=32, n_heads=2, c=40.0).items():
            torch.testing.assert_close(value, th[name])
    with pytest.raises(ValueError, match="offsets"):
        theta_star_subset((), S=5, T=32, n_heads=2, c=1.0)
