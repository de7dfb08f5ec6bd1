"""Tests for ccmc_lite.markov.model: the Makkuva et al. model and its losses."""

from __future__ import annotations

import functools

import pytest
import torch
from reference_training import train_looped

from ccmc_lite.core import TrainConfig, torch_generator, train_runs
from ccmc_lite.markov import (
    MODEL_OPTIONS,
    MarkovTransformer,
    binary_kernel,
    build_model,
    check_model_options,
    kernel_loss,
    next_token_loss,
    sample_chains,
    symmetric_kernel,
)


def test_binary_model_parameters_and_output():
    torch.manual_seed(0)
    m = MarkovTransformer(K=2, d=4, N=8)
    names = dict(m.named_parameters())
    assert names["e"].shape == (4,) and names["b"].shape == () and "a" not in names
    assert names["pos"].shape == (8, 4) and names["blocks.0.W_1"].shape == (16, 4)
    x = torch.randint(0, 2, (3, 8))
    logp = m(x)
    assert logp.shape == (3, 8, 2)
    assert torch.allclose(logp.exp().sum(-1), torch.ones(3, 8), atol=1e-6)
    assert m(x, output="logits").shape == (3, 8)
    untied = MarkovTransformer(K=2, d=4, N=8, tied=False)
    assert "a" in dict(untied.named_parameters())


def test_kstate_model_parameters_and_output():
    m = MarkovTransformer(K=5, d=3, N=6, tied=False, depth=2, layer_norm=True)
    names = dict(m.named_parameters())
    assert names["E"].shape == (5, 3) and names["A"].shape == (5, 3) and names["b"].shape == (5,)
    assert "blocks.1.W_Q" in names and "lnf_w" in names
    out = m(torch.randint(0, 5, (2, 6)))
    assert out.shape == (2, 6, 5)
    assert torch.allclose(out.exp().sum(-1), torch.ones(2, 6), atol=1e-6)


def test_tied_readout_is_the_embedding_and_sigmoid_matches():
    torch.manual_seed(1)
    m = MarkovTransformer(K=2, d=3, N=5)
    assert m.readout_weight() is m.e
    x = torch.randint(0, 2, (2, 5))
    parts = m(x, output="parts")
    logit = parts["z"][-1] @ m.e + m.b
    assert torch.allclose(parts["logits"], logit)
    assert torch.allclose(m(x)[..., 1].exp(), torch.sigmoid(logit), atol=1e-6)


def test_model_is_causal():
    torch.manual_seed(2)
    m = MarkovTransformer(K=3, d=4, N=10)
    x = torch.randint(0, 3, (1, 10))
    y = x.clone()
    y[0, 6:] = (y[0, 6:] + 1) % 3  # change the future only
    assert torch.allclose(m(x)[0, :6], m(y)[0, :6], atol=1e-6)
    assert not torch.allclose(m(x)[0, 6:], m(y)[0, 6:])


def test_ablation_options_remove_components():
    m = MarkovTransformer(K=3, d=4, N=5, attention=False, feed_forward=False)
    names = dict(m.named_parameters())
    assert not any("W_" in n for n in names)
    x = torch.randint(0, 3, (2, 5))
    parts = m(x, output="parts")
    assert torch.equal(parts["z"][0], parts["x"])  # both blocks are the identity


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"K": 1}, "K"),
        ({"d": 0}, "d"),
        ({"N": 0}, "N"),
        ({"depth": 0}, "depth"),
        ({"ff_width": 0}, "ff_width"),
        ({"init_std": 0.0}, "init_std"),
        ({"tide": True}, "unknown model option"),
    ],
)
def test_bad_options_raise_value_error(options, match):
    with pytest.raises(ValueError, match=match):
        check_model_options(options)
    with pytest.raises(ValueError, match=match):
        build_model(**options)


def test_option_types_and_defaults():
    with pytest.raises(TypeError, match="tied"):
        check_model_options({"tied": "yes"})
    opts = check_model_options({"d": 6})
    assert opts["ff_width"] == 24 and opts["attn_dim"] == 6
    assert set(opts) == set(MODEL_OPTIONS)
    make = functools.partial(MarkovTransformer, K=3, d=2, N=4)
    assert isinstance(make(), MarkovTransformer) and make().K == 3


def test_forward_rejects_long_inputs_and_bad_output():
    m = MarkovTransformer(K=2, d=2, N=4)
    with pytest.raises(ValueError, match="N=4"):
        m(torch.zeros(1, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="output"):
        m(torch.zeros(1, 4, dtype=torch.long), output="probs")
    with pytest.raises(ValueError, match="x"):
        m.predict_proba([[0, 2]])


def test_next_token_loss_matches_manual_cross_entropy():
    torch.manual_seed(3)
    m = MarkovTransformer(K=3, d=2, N=4)
    x = torch.randint(0, 3, (5, 5))
    logp = m(x[:, :-1])
    manual = -torch.stack([logp[b, n, x[b, n + 1]] for b in range(5) for n in range(4)]).mean()
    assert torch.allclose(next_token_loss(m, x), manual)


def test_kernel_loss_is_the_conditional_expectation_of_the_loss():
    torch.manual_seed(4)
    m = MarkovTransformer(K=2, d=3, N=6, init_std=0.5)
    P = binary_kernel(0.3, 0.6)
    x = sample_chains(P, 4000, 7, generator=torch_generator(0))
    with torch.no_grad():
        sampled = float(next_token_loss(m, x))
        expected = float(kernel_loss(m, x[:, :-1], P))
        logp = m(x[:, :-1])
        manual = float(-(P[x[:, :-1]] * logp.double()).sum(-1).mean())
    assert abs(expected - manual) < 1e-6
    assert abs(sampled - expected) < 0.01  # same expectation, different noise


def test_model_trains_as_one_run_and_as_stacked_runs():
    P = symmetric_kernel(3, 0.4)

    def batch_fn(step, runs, gen):
        return sample_chains(torch.stack([P] * len(runs)), 4, 7, generator=gen)

    config = TrainConfig(steps=3, lr=1e-2, checkpoint_steps=(0,), progress=False)
    make = functools.partial(MarkovTransformer, K=3, d=4, N=6)
    batched = train_runs(make, next_token_loss, batch_fn, n_runs=2, config=config, seed=1)
    looped = train_looped(make, next_token_loss, batch_fn, n_runs=2, config=config, seed=1)
    for name in batched.checkpoints[0]:  # same initialisations in both modes
        assert torch.equal(batched.checkpoints[0][name], looped.checkpoints[0][name])
    assert batched.loss.shape == looped.loss.shape == (2, 3)
    assert bool(torch.isfinite(batched.loss).all())


def test_batched_and_looped_training_agree_on_the_same_data():
    data = sample_chains(
        torch.stack([binary_kernel(0.3, 0.8)] * 2), 4, 7, generator=torch_generator(9)
    )  # (R, B, N+1), fixed

    def batch_fn(step, runs, gen):
        return data[runs]

    config = TrainConfig(steps=4, lr=1e-2, optimizer="adamw", betas=(0.9, 0.95), progress=False)
    make = functools.partial(MarkovTransformer, K=2, d=4, N=6, tied=False, layer_norm=True, depth=2)
    a = train_runs(make, next_token_loss, batch_fn, n_runs=2, config=config, seed=3)
    b = train_looped(make, next_token_loss, batch_fn, n_runs=2, config=config, seed=3)
    assert torch.allclose(a.loss, b.loss, atol=1e-5)
    for name in a.params:
        assert torch.allclose(a.params[name], b.params[name], atol=1e-5)


def _full_attention(q, k, v):
    T = q.shape[-2]
    mask = torch.full((T, T), float("-inf"), dtype=q.dtype).triu(1)
    return torch.softmax(q @ k.transpose(-1, -2) + mask, dim=-1) @ v


@pytest.mark.parametrize("T", [1, 5, 64, 65, 130, 300])
def test_blocked_causal_attention_equals_the_full_matrix_and_sdpa(T):
    from ccmc_lite.markov import blocked_causal_attention, causal_attention

    g = torch.Generator().manual_seed(T)
    q, k, v = (torch.randn(3, T, 4, generator=g, dtype=torch.float64) for _ in range(3))
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    blocked = blocked_causal_attention(q, k, v, block=64)
    full = _full_attention(q, k, v)
    taught = causal_attention(q, k, v)  # the plain masked softmax
    torch.testing.assert_close(taught, full, rtol=0, atol=0)
    if T <= 64:  # one block: the fast path is the plain computation, bit for bit
        torch.testing.assert_close(blocked, taught, rtol=0, atol=0)
    fused = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0)
    torch.testing.assert_close(blocked, full, rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(fused, full, rtol=1e-13, atol=1e-13)
    w = torch.randn(3, T, 4, generator=g, dtype=torch.float64)
    grads_blocked = torch.autograd.grad((blocked * w).sum(), (q, k, v))
    grads_full = torch.autograd.grad((full * w).sum(), (q, k, v))
    for a, b in zip(grads_blocked, grads_full, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def _attention_and_grads(q, k, v, w, batched=False):
    from torch.func import vmap

    from ccmc_lite.markov import blocked_causal_attention

    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    out = (vmap(blocked_causal_attention) if batched else blocked_causal_attention)(q, k, v)
    return (out.detach(), *torch.autograd.grad((out * w).sum(), (q, k, v)))


def test_blocked_attention_under_vmap_matches_each_run():
    from torch.func import vmap

    from ccmc_lite.markov import blocked_causal_attention

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 150, 4, generator=g) for _ in range(3))  # (R, B, T, m)
    batched = vmap(lambda a, b, c: blocked_causal_attention(a, b, c, block=32))(q, k, v)
    for r in range(2):
        torch.testing.assert_close(batched[r], _full_attention(q[r], k[r], v[r]))


class _Table1Reference(torch.nn.Module):
    """Makkuva et al. (2024), Table 1, written from the table alone (GPT-2 as in Pagliardini,
    2023): ``wte`` (2 x d), ``wpe`` (N x d); per block ``ln_1``, ``c_attn`` (3d x d),
    ``c_proj`` (d x d), ``ln_2``, ``mlp.c_fc`` (4d x d), ``mlp.c_proj`` (d x 4d); ``ln_f``;
    the head tied to ``wte``; single-head causal attention, GELU."""

    def __init__(self, d: int, N: int, depth: int) -> None:
        super().__init__()
        self.d = d
        self.wte = torch.nn.Parameter(torch.zeros(2, d))
        self.wpe = torch.nn.Parameter(torch.zeros(N, d))
        self.h = torch.nn.ModuleList()
        for _ in range(depth):
            block = torch.nn.Module()
            block.ln_1, block.ln_2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
            block.c_attn = torch.nn.Linear(d, 3 * d, bias=False)
            block.c_proj = torch.nn.Linear(d, d, bias=False)
            block.c_fc = torch.nn.Linear(d, 4 * d, bias=False)
            block.mlp_proj = torch.nn.Linear(4 * d, d, bias=False)
            self.h.append(block)
        self.ln_f = torch.nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T) -> logits (B, T, 2)
        T = x.shape[1]
        h = self.wte[x] + self.wpe[:T]
        future = torch.ones(T, T, dtype=torch.bool).triu(1)
        for b in self.h:
            q, k, v = b.c_attn(b.ln_1(h)).split(self.d, dim=-1)
            scores = (q @ k.transpose(1, 2)) / self.d**0.5
            att = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
            h = h + b.c_proj(att @ v)
            h = h + b.mlp_proj(torch.nn.functional.gelu(b.c_fc(b.ln_2(h))))
        return self.ln_f(h) @ self.wte.T


@pytest.mark.parametrize(("depth", "N"), [(1, 40), (2, 100)])
def test_table1_option_equals_an_independent_gpt2_of_the_papers_table(depth, N):
    """``TABLE1_OPTIONS`` is the paper's Table 1 model: mapped onto a GPT-2 written from the
    table, every prediction agrees (the uni-embedding ``x e + p`` is ``wte = (0, e)``)."""
    from ccmc_lite.markov import TABLE1_OPTIONS, build_model

    torch.manual_seed(depth)
    model = build_model(K=2, d=4, N=N, depth=depth, tied=True, **TABLE1_OPTIONS)
    with torch.no_grad():
        for p in model.parameters():  # random everything, layer norms included
            p.copy_(torch.randn_like(p) * 0.5)
        model.b.zero_()  # GPT-2's head has no bias
    ref = _Table1Reference(4, N, depth)
    with torch.no_grad():
        ref.wte[1] = model.e
        ref.wpe.copy_(model.pos)
        for b, blk in zip(ref.h, model.blocks, strict=True):
            b.c_attn.weight.copy_(torch.cat([blk.W_Q, blk.W_K, blk.W_V]))
            b.c_proj.weight.copy_(blk.W_O)
            b.c_fc.weight.copy_(blk.W_1)
            b.mlp_proj.weight.copy_(blk.W_2)
            for ln, w, s in ((b.ln_1, blk.ln1_w, blk.ln1_b), (b.ln_2, blk.ln2_w, blk.ln2_b)):
                ln.weight.copy_(w)
                ln.bias.copy_(s)
        ref.ln_f.weight.copy_(model.lnf_w)
        ref.ln_f.bias.copy_(model.lnf_b)
        x = torch.randint(0, 2, (3, N))
        ours = model(x)  # log-probabilities (B, T, 2)
        theirs = torch.log_softmax(ref(x), dim=-1)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)
    assert model.options["activation"] == "gelu" and model.layer_norm
    relu = build_model(K=2, d=4, N=N, depth=depth, layer_norm=True)
    relu.load_state_dict(model.state_dict())
    with torch.no_grad():
        assert not torch.allclose(relu(x), ours)  # the activation matters
    with pytest.raises(ValueError, match="activation"):
        build_model(activation="tanh")
