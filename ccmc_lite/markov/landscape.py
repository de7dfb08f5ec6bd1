"""The loss landscape of the Markov transformer: constructions, exact losses, Hessians.

Makkuva et al. (2024) build explicit parameters: the bigram (global-minimum) points
``θ_*`` of eq. (7) (``p + q <= 1``) and eq. (10) (``p + q > 1``), and the unigram point
``θ_π`` of eq. (11), whose Hessian (eq. (12)) decides whether it is a bad local minimum
(weight tying, Thm. 2) or a saddle (no tying, Thm. 3). This module

* sets a :class:`~ccmc_lite.markov.MarkovTransformer` to those points
  (:func:`~ccmc_lite.markov.theta_star`, :func:`~ccmc_lite.markov.theta_pi`; also for ``K > 2``
  states);
* computes the **exact** population loss (eq. (1)) of a model on a stationary Markov source, either
  by enumerating all ``K^N`` sequences or, for models whose attention is switched off (``W_O = 0``),
  from the ``K`` constant sequences (the output at position ``n`` then depends on ``x_n`` and ``n``
  only) — :func:`~ccmc_lite.markov.population_loss`;
* differentiates it twice with autograd (:func:`~ccmc_lite.markov.population_hessian`) and gives the
  closed-form Hessians to compare with: eq. (12), its untied version (proof of Thm. 3), and their
  ``K``-state generalisation (:func:`~ccmc_lite.markov.unigram_hessian`);
* evaluates the loss on planes through a point (:func:`~ccmc_lite.markov.loss_plane`) and the
  empirical formula of App. D (:func:`~ccmc_lite.markov.appendix_d_logits`,
  :func:`~ccmc_lite.markov.fit_appendix_d`).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from typing import Any, cast

import torch
from torch.func import functional_call, vmap

from ..core.chains import stationary_distribution
from ..core.validation import (
    DEFAULT_LIMITS,
    as_tensor,
    check_bool,
    check_choice,
    check_finite_result,
    check_float,
    check_int,
    check_probability,
    check_size,
)
from .kernels import check_kernel, enumerate_chains, lag_one_covariance
from .model import MarkovTransformer

__all__ = [
    "appendix_d_logits",
    "binary_unigram_hessian",
    "fit_appendix_d",
    "gauge_restrict",
    "layer_norm_unigram_hessian",
    "loss_plane",
    "low_rank_summary",
    "population_hessian",
    "population_loss",
    "symbolic_unigram_hessian",
    "symmetric_threshold",
    "theta_pi",
    "theta_star",
    "unigram_curvature",
    "unigram_hessian",
    "unigram_inputs",
]


def _check_model(model: Any) -> MarkovTransformer:
    if not isinstance(model, MarkovTransformer):
        raise TypeError(f"model must be a MarkovTransformer; got {type(model).__name__}")
    return model


def _kernel_for(model: MarkovTransformer, P: Any) -> torch.Tensor:
    P = check_kernel(P)
    if P.ndim != 2:
        raise ValueError(f"P must be one kernel of shape (K, K); got {tuple(P.shape)}")
    if P.shape[0] != model.K:
        raise ValueError(f"P has K={P.shape[0]} states but the model has K={model.K}")
    return P


def _weight(model: MarkovTransformer, name: str, block: int = 0) -> torch.nn.Parameter:
    """The weight ``name`` (``"W_O"``, ``"W_1"``, ...) of block ``block``, by its parameter name."""
    return model.get_parameter(f"blocks.{block}.{name}")


def _zero_attention_and_ff(model: MarkovTransformer) -> None:
    with torch.no_grad():
        for block in range(model.depth):
            if model.attention:
                _weight(model, "W_O", block).zero_()
            if model.feed_forward:
                _weight(model, "W_2", block).zero_()


def theta_star(model: MarkovTransformer, p: float, q: float) -> MarkovTransformer:
    """A copy of ``model`` set to the bigram construction of Thm. 1 (Makkuva et al. 2024).

    For ``p + q <= 1`` eq. (7): ``e = a = 1 sqrt(log((1-p)(1-q)/(pq)) / d)``, ``p_n = 0``,
    ``W_O = W_2 = 0``, ``b = log(p/(1-p))``. For ``p + q > 1`` eq. (10): ``e = a = 1``,
    ``p_n = -1/2``, ``W_O = 0``, ``W_1 = w_* 1 1^T``, ``W_2 = -W_1^T``,
    ``b = log(p/(1-p)) + d/2`` with ``w_*^2 = 2 (1 - log((1-p)(1-q)/(pq)) / d) / (d r)``
    (the paper's formula has ``r = d``; ``r`` is the FF width). Parameters the construction
    leaves free keep their values; without tying ``a = e`` (App. B.3's ``(θ_*, a_*)``); extra
    blocks (depth > 1) are the identity. Binary models without layer norm only (the model of
    Sec. 3), ``p, q`` in ``(0, 1)``.
    """
    model = _check_model(model)
    p = check_probability("p", p)
    q = check_probability("q", q)
    if model.K != 2:
        raise ValueError(f"theta_star is the binary construction; the model has K={model.K}")
    if model.layer_norm:
        raise ValueError("theta_star needs a model without layer norm (layer_norm=False)")
    if p + q > 1 and not model.feed_forward:
        raise ValueError("theta_star for p + q > 1 (eq. (10)) needs the FF layer")
    out = copy.deepcopy(model)
    d, r = out.d, out.ff_width
    if p * q < 1e-300:
        raise ValueError(f"p={p:g} and q={q:g} are too close to 0: log((1-p)(1-q)/(pq)) overflows")
    gap = math.log((1 - p) * (1 - q) / (p * q))  # > 0 iff p + q < 1
    _zero_attention_and_ff(out)
    with torch.no_grad():
        if p + q <= 1:
            out.e.fill_(math.sqrt(max(gap, 0.0) / d))
            out.pos.zero_()
            out.b.fill_(math.log(p / (1 - p)))
        else:
            w = math.sqrt(2.0 * (1.0 - gap / d) / (d * r))
            out.e.fill_(1.0)
            out.pos.fill_(-0.5)
            W1 = _weight(out, "W_1")
            W1.fill_(w)
            _weight(out, "W_2").copy_(-W1.T)
            out.b.fill_(math.log(p / (1 - p)) + d / 2)
        if not out.tied:
            out.a.copy_(out.e)
    return out


def theta_pi(model: MarkovTransformer, P: Any) -> MarkovTransformer:
    """A copy of ``model`` set to the unigram point ``θ_π`` (Makkuva et al. 2024, eq. (11)).

    ``e = a = 0`` (``E = A = 0`` for ``K > 2``), ``W_O = W_2 = 0`` in every block and the
    bias chosen so that the prediction is the stationary law: ``b = log(p/q)`` for
    ``K = 2`` and ``b = log π`` for ``K > 2``. Positional embeddings, ``W_Q, W_K, W_V, W_1``
    keep their (arbitrary) values.
    """
    model = _check_model(model)
    P = _kernel_for(model, P)
    pi = stationary_distribution(P)
    if bool((pi <= 0).any()):
        zero = int((pi <= 0).nonzero()[0])
        raise ValueError(
            f"P's stationary law puts no mass on state {zero} (pi = {pi.tolist()}): the "
            "unigram point theta_pi needs the bias log pi, which is -inf there; use a P "
            "whose chain visits every state"
        )
    out = copy.deepcopy(model)
    _zero_attention_and_ff(out)
    with torch.no_grad():
        if out.K == 2:
            out.e.zero_()
            if not out.tied:
                out.a.zero_()
            out.b.fill_(math.log(float(pi[1] / pi[0])))
        else:
            out.E.zero_()
            if not out.tied:
                out.A.zero_()
            out.b.copy_(pi.log().to(out.b.dtype))
    return out


def _attention_off(model: MarkovTransformer) -> bool:
    W_O = [_weight(model, "W_O", block) for block in range(model.depth) if model.attention]
    return all(bool((w == 0).all()) for w in W_O)


def _exact_loss(
    call: Callable[[torch.Tensor], torch.Tensor], P: torch.Tensor, N: int, method: str
) -> torch.Tensor:
    """Exact eq. (1) for a callable ``tokens (B, N) -> log-probs (B, N, K)``."""
    K = P.shape[0]
    pi = stationary_distribution(P).to(P.dtype)
    if method == "current":
        x = torch.arange(K).unsqueeze(1).expand(K, N)  # constant sequences i, i, ..., i
        logp = call(x)  # (K, N, K): log f(j | x_n = i) at every position n
        return -(pi[:, None, None] * P[:, None, :] * logp).sum() / N
    seqs, weights = enumerate_chains(P, N, max_sequences=K**N)  # (K^N, N), (K^N,)
    weights = weights.to(P.dtype)
    logp = call(seqs)  # (K^N, N, K)
    rows = P[seqs]  # (K^N, N, K): law of the next token given the current one
    return -(weights[:, None, None] * rows * logp).sum() / N


def _choose_method(model: MarkovTransformer, method: str, varied: Sequence[str], limit: int) -> str:
    method = check_choice("method", method, ("auto", "current", "enumerate"))
    attention_fixed_off = _attention_off(model) and not any("W_O" in n for n in varied)
    if method == "current" and not attention_fixed_off:
        raise ValueError(
            "method='current' needs W_O = 0 in every block (attention switched off) and W_O "
            "not among the varied parameters; use method='enumerate' for small K**N"
        )
    if method == "auto":
        method = "current" if attention_fixed_off else "enumerate"
    if method == "enumerate" and model.K**model.N > limit:
        raise ValueError(
            f"enumerating K**N = {model.K}**{model.N} sequences exceeds max_sequences={limit}; "
            "use a model with smaller N or switch attention off (W_O = 0)"
        )
    return method


def population_loss(
    model: MarkovTransformer, P: Any, *, method: str = "auto", max_sequences: int = 2**16
) -> torch.Tensor:
    """The exact population loss ``L(θ)`` of eq. (1) on the stationary chain ``(π, P)``, a scalar.

    Lemma 1's conditional form: every prefix ``x_1^n`` (of the model's length ``N``) is scored
    against the true next-token law ``P[x_n]`` and weighted by its probability.
    ``method="current"``: with the attention off (``W_O = 0`` in every block) the output at
    ``n`` depends on ``(x_n, n)`` only, so ``K`` constant sequences give the exact loss at any
    ``N``; ``"enumerate"`` sums over all ``K^N`` sequences (at most ``max_sequences``);
    ``"auto"`` picks ``"current"`` where valid. Differentiable, in the model's dtype.
    """
    model = _check_model(model)
    dtype = next(model.parameters()).dtype
    P = _kernel_for(model, P).to(dtype)
    max_sequences = check_int("max_sequences", max_sequences, minimum=1)
    method = _choose_method(model, method, (), max_sequences)
    return _exact_loss(model, P, model.N, method)


def _param_layout(model: MarkovTransformer, names: Sequence[str] | None = None) -> list[tuple]:
    """``[(name, slice, shape), ...]``: where each named parameter sits in a flat vector."""
    model = _check_model(model)
    params = dict(model.named_parameters())
    names = list(params) if names is None else list(names)
    unknown = [n for n in names if n not in params]
    if unknown:
        raise ValueError(f"unknown parameter name(s) {unknown}; the model has {list(params)}")
    layout, start = [], 0
    for n in names:
        size = params[n].numel()
        layout.append((n, slice(start, start + size), tuple(params[n].shape)))
        start += size
    return layout


def population_hessian(
    model: MarkovTransformer,
    P: Any,
    names: Sequence[str] | None = None,
    *,
    method: str = "auto",
    max_sequences: int = 2**12,
) -> tuple[torch.Tensor, list[tuple]]:
    """Autograd Hessian of the exact population loss in the named parameters (float64).

    Returns ``(H, layout)``: ``H`` ``(D, D)`` over the parameters flattened in the order of
    ``names`` (default: all, in registration order), and the layout ``(name, shape, offset)``
    per parameter. :func:`torch.autograd.functional.hessian` on a float64 copy of ``model``.
    """
    model = copy.deepcopy(_check_model(model)).to(torch.float64)
    P = _kernel_for(model, P).to(torch.float64)
    layout = _param_layout(model, names)
    max_sequences = check_int("max_sequences", max_sequences, minimum=1)
    method = _choose_method(model, method, [n for n, _, _ in layout], max_sequences)
    fixed = {n: t.detach() for n, t in model.named_parameters()}
    flat0 = torch.cat([fixed[n].reshape(-1) for n, _, _ in layout])

    def loss_of(flat: torch.Tensor) -> torch.Tensor:
        params = dict(fixed)
        for n, sl, shape in layout:
            params[n] = flat[sl].reshape(shape)

        def call(x: torch.Tensor) -> torch.Tensor:
            return cast(torch.Tensor, functional_call(model, params, (x,)))

        return _exact_loss(call, P, model.N, method)

    H = torch.autograd.functional.hessian(loss_of, flat0)
    return H.detach(), layout


def _pos_moments(pos: Any) -> tuple[torch.Tensor, torch.Tensor]:
    pos = as_tensor("pos", pos, ndim=2).detach()
    u = pos.mean(0)  # (d,)
    V0 = pos.T @ pos / pos.shape[0]  # (d, d): sum_n p_n p_n^T / N
    check_finite_result(V0, "the second moment of the positional embeddings", "pos")
    return u, V0


def binary_unigram_hessian(p: float, q: float, pos: Any, *, tied: bool = True) -> torch.Tensor:
    """Closed-form Hessian at ``θ_π`` w.r.t. ``α`` (Makkuva et al. 2024, eq. (12); Thm. 3).

    Tied, ``α = (b, e)`` (``a = e``): ``H_α = π0 π1 [[1, uᵀ], [u, V]]``, ``u = Σ p_n / N``,
    ``V = Σ p_n p_nᵀ / N + 2 (p + q - 1) I``. Untied, ``α = (b, a, e)`` (proof of Thm. 3):
    ``H_α = π0 π1 [[1, uᵀ, 0], [u, Σ p_n p_nᵀ / N, (p+q-1) I], [0, (p+q-1) I, 0]]``.
    ``pos``: the positional embeddings ``p_n``, ``(N, d)``; ``p, q`` in ``(0, 1)``.
    """
    p = check_probability("p", p)
    q = check_probability("q", q)
    u, V0 = _pos_moments(pos)
    d = u.shape[0]
    s = p + q - 1.0
    scale = p * q / (p + q) ** 2  # π0 π1
    eye = torch.eye(d, dtype=torch.float64)
    if tied:
        H = torch.zeros(1 + d, 1 + d, dtype=torch.float64)
        H[0, 0] = 1.0
        H[0, 1:] = u
        H[1:, 0] = u
        H[1:, 1:] = V0 + 2 * s * eye
    else:
        H = torch.zeros(1 + 2 * d, 1 + 2 * d, dtype=torch.float64)
        H[0, 0] = 1.0
        H[0, 1 : 1 + d] = u
        H[1 : 1 + d, 0] = u
        H[1 : 1 + d, 1 : 1 + d] = V0
        H[1 : 1 + d, 1 + d :] = s * eye
        H[1 + d :, 1 : 1 + d] = s * eye
    return scale * H


def layer_norm_unigram_hessian(
    p: float,
    q: float,
    pos: Any,
    *,
    tied: bool = True,
    weight: Any = None,
    bias: Any = None,
    eps: float = 1e-5,
) -> torch.Tensor:
    """Hessian at ``θ_π`` w.r.t. ``α`` for the binary model **with** a final layer norm.

    Makkuva et al. (2024) leave the layer norm out of the theory (Sec. 2.1: "its influence is
    marginal") although their runs use it (Table 1). At ``θ_π`` (eq. (11)) the blocks are off,
    so ``z_n = x_n e + p_n`` and the logit is ``⟨a, LN(z_n)⟩ + b`` with gain ``weight`` and
    shift ``bias`` (``(d,)``, default ones and zeros) and the layer norm's ``eps``. The point
    is still critical and ``β`` still flat (every ``β`` derivative carries ``a = 0``); with
    ``ℓ_n = LN(p_n)``, ``J_n = ∂LN/∂z (p_n)``, ``u = Σ ℓ_n / N``, ``V0 = Σ ℓ_n ℓ_nᵀ / N``,
    ``J = Σ J_n / N`` and ``s = p + q - 1`` the ``α`` block of eq. (12) becomes

    * tied, ``α = (b, e)``: ``π0 π1 [[1, uᵀ], [u, V0 + s (J + Jᵀ)]]``;
    * untied, ``α = (b, a, e)``: ``π0 π1 [[1, uᵀ, 0], [u, V0, s J], [0, s Jᵀ, 0]]``.

    Without layer norm ``ℓ_n = p_n`` and ``J = I``: eq. (12), :func:`binary_unigram_hessian`.
    ``J_n`` scales like ``1 / std(p_n)``, so at small positional embeddings the switching term
    is much larger than without layer norm.
    """
    p = check_probability("p", p)
    q = check_probability("q", q)
    pos = as_tensor("pos", pos, ndim=2).detach().to(torch.float64)
    _pos_moments(pos)  # the moments must be finite (checked, with the message, there)
    tied = check_bool("tied", tied)
    eps = check_float("eps", eps, minimum=0.0, open_lower=True)
    N, d = pos.shape
    gain = torch.ones(d) if weight is None else as_tensor("weight", weight, ndim=1)
    shift = torch.zeros(d) if bias is None else as_tensor("bias", bias, ndim=1)
    gain, shift = gain.detach().to(torch.float64), shift.detach().to(torch.float64)
    if gain.shape != (d,) or shift.shape != (d,):
        raise ValueError(f"weight and bias must have shape ({d},) to match pos of shape {(N, d)}")

    def norm(z: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.layer_norm(z, (d,), gain, shift, eps)

    ell = norm(pos)  # (N, d): ℓ_n
    J = vmap(torch.func.jacrev(norm))(pos).mean(0)  # (d, d): mean of ∂LN/∂z at p_n
    u, V0 = ell.mean(0), ell.T @ ell / N
    s = p + q - 1.0
    scale = p * q / (p + q) ** 2  # π0 π1
    if tied:
        H = torch.zeros(1 + d, 1 + d, dtype=torch.float64)
        H[0, 0] = 1.0
        H[0, 1:] = u
        H[1:, 0] = u
        H[1:, 1:] = V0 + s * (J + J.T)
    else:
        H = torch.zeros(1 + 2 * d, 1 + 2 * d, dtype=torch.float64)
        H[0, 0] = 1.0
        H[0, 1 : 1 + d] = u
        H[1 : 1 + d, 0] = u
        H[1 : 1 + d, 1 : 1 + d] = V0
        H[1 : 1 + d, 1 + d :] = s * J
        H[1 + d :, 1 : 1 + d] = s * J.T
    return scale * H


def unigram_hessian(
    P: Any, pos: Any, *, tied: bool = True, ff_jacobian: Any = None
) -> torch.Tensor:
    """Closed-form Hessian at the ``K``-state unigram point w.r.t. ``α`` (``K > 2`` model).

    With ``Σ_π = diag(π) - π πᵀ`` (the log-softmax Hessian at ``π``), ``C = diag(π) P - π πᵀ``
    (:func:`ccmc_lite.markov.lag_one_covariance`), its symmetric part ``C_s``,
    ``u = Σ p_n / N`` and ``V_0 = Σ p_n p_nᵀ / N``, the Hessian of the exact loss at
    ``E = A = 0``, ``b = log π``, ``W_O = W_2 = 0`` is, in ``α = (b, vec E)`` (tied; ``E``
    row by row)::

        [[Σ_π,          Σ_π ⊗ uᵀ              ],
         [Σ_π ⊗ u,      Σ_π ⊗ V_0 - 2 C_s ⊗ I_d]]

    and in ``α = (b, vec A, vec E)`` (untied)::

        [[Σ_π,       Σ_π ⊗ uᵀ,    0        ],
         [Σ_π ⊗ u,   Σ_π ⊗ V_0,   -Cᵀ ⊗ I_d],
         [0,         -C ⊗ I_d,    0        ]]

    For ``K = 2`` these are eq. (12) and the Thm. 3 block of Makkuva et al. (2024) (derived
    in Part II, "Beyond two states"). ``pos`` ``(N, d)``: the ``p_n``, or with a non-zero FF
    layer the activations ``q_n`` at ``E = 0`` (:func:`unigram_inputs`). ``ff_jacobian``:
    ``M̄ = (1/N) Σ_n ∂z_n/∂y_n`` (``d x d``; ``I`` when ``W_2 = 0``) replaces ``I_d`` in the
    bilinear term: ``-(Cᵀ ⊗ M̄ + C ⊗ M̄ᵀ)`` (tied) and ``-Cᵀ ⊗ M̄`` (untied).
    """
    P = check_kernel(P)
    if P.ndim != 2:
        raise ValueError(f"P must be one kernel of shape (K, K); got {tuple(P.shape)}")
    u, V0 = _pos_moments(pos)
    d = u.shape[0]
    if ff_jacobian is None:
        M = torch.eye(d, dtype=torch.float64)
    else:
        M = as_tensor("ff_jacobian", ff_jacobian, ndim=2).detach()
        if tuple(M.shape) != (d, d):
            raise ValueError(f"ff_jacobian must have shape ({d}, {d}); got {tuple(M.shape)}")
    pi = stationary_distribution(P)
    K = pi.shape[0]
    Sigma = torch.diag(pi) - torch.outer(pi, pi)
    C = lag_one_covariance(P)
    CT = C.T.contiguous()
    H_bb = Sigma
    H_bW = torch.kron(Sigma, u.unsqueeze(0))  # (K, K d)
    H_WW = torch.kron(Sigma, V0)  # (K d, K d)
    if tied:
        top = torch.cat([H_bb, H_bW], 1)
        bilinear = torch.kron(CT, M) + torch.kron(C, M.T.contiguous())
        bottom = torch.cat([H_bW.T, H_WW - bilinear], 1)
        return torch.cat([top, bottom], 0)
    Kd = K * d
    H = torch.zeros(K + 2 * Kd, K + 2 * Kd, dtype=torch.float64)
    H[:K, :K] = H_bb
    H[:K, K : K + Kd] = H_bW
    H[K : K + Kd, :K] = H_bW.T
    H[K : K + Kd, K : K + Kd] = H_WW
    H[K : K + Kd, K + Kd :] = -torch.kron(CT, M)
    H[K + Kd :, K : K + Kd] = -torch.kron(CT, M).T
    return H


def unigram_inputs(model: MarkovTransformer) -> tuple[torch.Tensor, torch.Tensor]:
    """What the blocks make of position ``n`` at ``E = 0``: ``q_n`` and the mean Jacobian ``M̄``.

    With the attention switched off (``W_O = 0``) and no layer norm, block ``ℓ`` maps
    ``y -> y + W_2 ReLU(W_1 y)``; at ``E = 0`` the input is ``p_n``. Returns
    ``q = (z(p_n))_n`` of shape ``(N, d)`` and ``M̄ = (1/N) Σ_n ∂z/∂y (p_n)`` of shape
    ``(d, d)``, the two inputs of :func:`unigram_hessian` on the whole set of unigram
    points ``{E = 0, b = log π}`` (float64).
    """
    model = copy.deepcopy(_check_model(model)).to(torch.float64)
    if model.layer_norm:
        raise ValueError("unigram_inputs needs a model without layer norm")
    if not _attention_off(model):
        raise ValueError("unigram_inputs needs the attention switched off (W_O = 0)")

    def blocks(y: torch.Tensor) -> torch.Tensor:  # (d,) -> (d,)
        h = y.reshape(1, 1, -1)
        for block in model.blocks:
            h, _ = block(h)
        return h.reshape(-1)

    pos = model.pos.detach()
    q = torch.stack([blocks(p_n) for p_n in pos]).detach()
    jac = torch.stack([torch.autograd.functional.jacobian(blocks, p_n) for p_n in pos])
    return q, jac.mean(0).detach()


def _ones_complement(K: int) -> torch.Tensor:
    """Orthonormal basis of the subspace orthogonal to ``1`` in ``R^K``: shape ``(K, K-1)``."""
    ones = torch.ones(K, 1, dtype=torch.float64) / math.sqrt(K)
    Q, _ = torch.linalg.qr(torch.cat([ones, torch.eye(K, dtype=torch.float64)], 1))
    # a copy, not .contiguous(): for K = 2 the (2, 1) slice counts as contiguous but keeps
    # the stride of Q, which torch.kron cannot view (gauge_restrict failed for K = 2)
    return torch.empty(K, K - 1, dtype=torch.float64).copy_(Q[:, 1:K])


def gauge_restrict(H: Any, K: int, d: int) -> torch.Tensor:
    """Restrict a tied ``(b, vec E)`` Hessian to the slice ``1ᵀb = const``, ``1ᵀE = 0``.

    The loss of the tied model is exactly invariant under ``b -> b + c 1`` and
    ``(E, p_n) -> (E + 1 wᵀ, p_n - w)``, so these directions are always flat; the slice
    removes them. Returns ``Bᵀ H B`` of shape ``(K-1 + (K-1) d)²``, whose smallest
    eigenvalue decides (together with the flat non-readout directions) whether the
    unigram point is a local minimum (Part II, "Beyond two states").
    """
    K = check_size("K", K, minimum=2, limit=DEFAULT_LIMITS["vocab"])
    d = check_size("d", d, minimum=1)
    H = as_tensor("H", H, ndim=2)
    if tuple(H.shape) != (K + K * d, K + K * d):
        raise ValueError(f"H must have shape ({K + K * d}, {K + K * d}); got {tuple(H.shape)}")
    B1 = _ones_complement(K)
    B = torch.block_diag(B1, torch.kron(B1, torch.eye(d, dtype=torch.float64)))
    return B.T @ H @ B


def unigram_curvature(P: Any) -> torch.Tensor:
    """Eigenvalues of ``-C_s`` on the subspace orthogonal to ``1`` (ascending), ``(..., K-1)``.

    ``C_s`` is the symmetric part of :func:`ccmc_lite.markov.lag_one_covariance`. All
    eigenvalues ``> 0`` (every non-constant function of the state is negatively
    autocorrelated at lag one) is the condition under which the tied model's unigram point
    has a positive semi-definite Hessian for *every* choice of positional embeddings; a
    negative one gives a descent direction when the positional embeddings are constant.
    For ``P(p, q)`` the single eigenvalue is ``2 π0 π1 (p + q - 1)``.
    """
    C = lag_one_covariance(P)
    Cs = (C + C.transpose(-1, -2)) / 2
    B = _ones_complement(Cs.shape[-1])  # (K, K-1)
    return torch.linalg.eigvalsh(-(B.T @ Cs @ B))


def symmetric_threshold(K: int) -> float:
    """Switching probability ``(K - 1) / K`` above which the symmetric ``K``-state chain makes
    the tied unigram point a local minimum (Part II, "Beyond two states"); ``1/2`` for ``K = 2``."""
    K = check_size("K", K, minimum=2, limit=DEFAULT_LIMITS["vocab"])
    return (K - 1) / K


def loss_plane(
    model: MarkovTransformer,
    P: Any,
    directions: Sequence[dict[str, torch.Tensor]],
    s: Any,
    t: Any,
    *,
    method: str = "auto",
) -> torch.Tensor:
    """Exact population loss ``(len(s), len(t))`` on the plane ``θ + s D_1 + t D_2`` (float64).

    ``θ`` is ``model`` (e.g. :func:`theta_pi`); ``directions``: two dicts ``{parameter name:
    tensor of its shape}`` (missing names: 0); ``s, t``: 1-D grids.
    """
    model = copy.deepcopy(_check_model(model)).to(torch.float64)
    P = _kernel_for(model, P).to(torch.float64)
    if not isinstance(directions, (list, tuple)):
        raise TypeError(f"directions must be a list of two dicts; got {type(directions).__name__}")
    if len(directions) != 2:
        raise ValueError(f"directions must hold two dicts; got {len(directions)}")
    params = {n: p.detach() for n, p in model.named_parameters()}
    for D in directions:
        for n, v in D.items():
            if n not in params:
                raise ValueError(f"unknown parameter name {n!r} in directions")
            if tuple(torch.as_tensor(v).shape) != tuple(params[n].shape):
                raise ValueError(f"direction for {n!r} must have shape {tuple(params[n].shape)}")
    varied = [n for D in directions for n in D]
    method = _choose_method(model, method, varied, 2**12)
    s = as_tensor("s", s, ndim=1)
    t = as_tensor("t", t, ndim=1)
    S, T = torch.meshgrid(s, t, indexing="ij")
    grid = {}
    for n, base in params.items():
        d1 = torch.as_tensor(directions[0].get(n, torch.zeros_like(base)), dtype=torch.float64)
        d2 = torch.as_tensor(directions[1].get(n, torch.zeros_like(base)), dtype=torch.float64)
        extra = (1,) * base.ndim
        grid[n] = base + S.reshape(-1, *extra) * d1 + T.reshape(-1, *extra) * d2  # (G, ...)

    def one(p: dict[str, torch.Tensor]) -> torch.Tensor:
        return _exact_loss(lambda x: functional_call(model, p, (x,)), P, model.N, method)

    with torch.no_grad():
        values = vmap(one)(grid)
    check_finite_result(values, "the loss on the plane", "t (the plane's coordinates)")
    return values.reshape(S.shape)


def appendix_d_logits(
    e: float, p: float, w1: float, b: float, beta: int, *, d: int = 4, r: int = 16
) -> tuple[float, float]:
    """Logits of the low-rank solution of App. D (Makkuva et al. 2024, eqs. (20)–(26)).

    With ``e = e v``, ``p_n = p v`` (``v ∈ {±1}^d``), ``W_1 = w_1 w vᵀ`` (``w ∈ {±1}^r``
    with ``β`` entries ``+1``), ``W_2 = W_1ᵀ``, tied readout and negligible attention,
    ``logit = e d s (1 + w_1² d n(s)) + b`` with ``s = e x_n + p`` and ``n(s) = β`` if
    ``w_1 s > 0`` and ``r - β`` otherwise. For the paper's signs (``p < 0 < e + p``,
    ``w_1 > 0``) this is eq. (26). Returns ``(logit at x_n = 1, logit at x_n = 0)``.
    """
    vals = {k: check_float(k, v) for k, v in {"e": e, "p": p, "w1": w1, "b": b}.items()}
    d = check_size("d", d, minimum=1)
    r = check_size("r", r, minimum=1)
    beta = check_int("beta", beta, minimum=0, maximum=r)
    out = []
    for x in (1, 0):
        s = vals["e"] * x + vals["p"]
        n_active = beta if vals["w1"] * s > 0 else r - beta
        try:
            logit = vals["e"] * d * s * (1 + vals["w1"] ** 2 * d * n_active) + vals["b"]
        except OverflowError:
            logit = math.inf
        if not math.isfinite(logit):
            raise ValueError(
                f"the logit overflows for e={vals['e']:g}, p={vals['p']:g}, "
                f"w1={vals['w1']:g}, b={vals['b']:g}: these values are too large in magnitude"
            )
        out.append(logit)
    return out[0], out[1]


def low_rank_summary(model: MarkovTransformer, block: int = 0) -> dict[str, torch.Tensor]:
    """Singular values of every weight matrix of one block (App. D: "low-rank weights")."""
    model = _check_model(model)
    block = check_int("block", block, minimum=0, maximum=model.depth - 1)
    blk = model.blocks[block]
    out = {}
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_1", "W_2"):
        if hasattr(blk, name):
            out[name] = torch.linalg.svdvals(getattr(blk, name).detach().to(torch.float64))
    out["pos (centred)"] = torch.linalg.svdvals(
        (model.pos - model.pos.mean(0)).detach().to(torch.float64)
    )
    return out


def fit_appendix_d(model: MarkovTransformer) -> dict[str, float]:
    """Read the constants of App. D off a trained binary tied model.

    ``v = sign(e)``; ``e = mean |e_i|``; ``p = mean_n <p_n, v> / d``; the rank-one fit of
    ``W_1 = σ u vᵀ`` gives ``w = sign(u)``, ``w_1 = σ <u, w>/sqrt(d r)·sign`` aligned with
    ``v`` and ``β = #{w_i = +1}``. Also returned: how well the assumptions hold —
    ``e_spread`` (std/mean of ``|e_i|``), ``pos_spread`` (relative variation of ``p_n``
    across positions), ``W1_rank1`` (share of the top singular value in the Frobenius
    norm) and ``W2_vs_W1T`` (cosine similarity of ``W_2`` and ``W_1ᵀ``).
    """
    model = _check_model(model)
    if model.K != 2 or not model.tied or not model.feed_forward:
        raise ValueError("fit_appendix_d needs a binary (K=2) weight-tied model with FF layer")
    with torch.no_grad():
        e_vec = model.e.detach().to(torch.float64)
        v = torch.sign(e_vec)
        v[v == 0] = 1.0
        d = model.d
        e = float(e_vec.abs().mean())
        pos = model.pos.detach().to(torch.float64)
        p = float((pos @ v).mean() / d)
        W1 = _weight(model, "W_1").detach().to(torch.float64)
        W2 = _weight(model, "W_2").detach().to(torch.float64)
        U, S, Vh = torch.linalg.svd(W1)
        u1, v1 = U[:, 0], Vh[0]
        sign = float(torch.sign(v1 @ v)) or 1.0
        u1, v1 = u1 * sign, v1 * sign  # align the right factor with v
        r = W1.shape[0]
        w = torch.sign(u1)
        w1 = float(S[0] * (u1 @ w) * (v1 @ v) / (r * d))
        beta = int((w > 0).sum())
        cos = float((W2 * W1.T).sum() / (W2.norm() * W1.norm()).clamp_min(1e-12))
        return {
            "e": e,
            "p": p,
            "w1": w1,
            "b": float(model.b),
            "beta": beta,
            "r": r,
            "d": d,
            "e_spread": float(e_vec.abs().std() / e_vec.abs().mean()),
            "pos_spread": float((pos - pos.mean(0)).norm() / pos.norm().clamp_min(1e-12)),
            "W1_rank1": float(S[0] / S.norm()),
            "W2_vs_W1T": cos,
        }


def symbolic_unigram_hessian(K: int, d: int = 2, N: int = 2, *, tied: bool = True) -> tuple:
    """Derive in SymPy the Hessian of the exact loss at the ``K``-state unigram point.

    Everything is symbolic: the kernel entries ``P_ij`` (rows sum to one), ``π`` (sums to one),
    the ``N`` positional embeddings in ``R^d``. At ``θ_π`` (``W_O = W_2 = 0``) the logits of
    context ``x_n = i`` are ``A (e_i + p_n) + b`` (``A = E`` when tied) and the loss is
    ``-(1/N) Σ_n Σ_i π_i Σ_j P_ij log softmax_j``; the Hessian follows by the chain rule,
    ``Σ π_i (Jᵀ ∇²ℓ J + Σ_j ∂ℓ/∂z_j ∇² z_j) / N``, with ``ℓ``'s derivatives at ``z = log π``.
    Returns ``(derived, formula, symbols)``: two SymPy matrices in ``(b, vec A, vec E)``
    (untied) or ``(b, vec E)`` (tied), and the symbols; ``formula`` is
    :func:`unigram_hessian` written symbolically.
    """
    import sympy as sp
    from sympy.physics.quantum import TensorProduct

    # SymPy's cost grows steeply: the book derives K = 2, 3 with d = N = 2
    K = check_size("K", K, minimum=2, limit=6)
    d = check_size("d", d, minimum=1, limit=4)
    N = check_size("N", N, minimum=1, limit=8)
    P = sp.Matrix(K, K, lambda i, j: sp.Symbol(f"P{i}{j}"))
    P = P.subs({P[i, K - 1]: 1 - sum(P[i, j] for j in range(K - 1)) for i in range(K)})
    free_pi = [sp.Symbol(f"pi{i}", positive=True) for i in range(K - 1)]
    pi = sp.Matrix([*free_pi, 1 - sum(free_pi)])
    b = sp.Matrix(sp.symbols(f"b0:{K}"))
    E = sp.Matrix(K, d, lambda k, c: sp.Symbol(f"E{k}{c}"))
    A = E if tied else sp.Matrix(K, d, lambda k, c: sp.Symbol(f"A{k}{c}"))
    pos = [sp.Matrix(sp.symbols(f"p{n}_0:{d}")) for n in range(N)]
    coords = [*b, *([] if tied else list(A)), *E]
    at = {**{s: 0 for s in [*E, *A]}, **{b[k]: sp.log(pi[k]) for k in range(K)}}
    z = sp.Matrix(sp.symbols(f"z0:{K}"))
    at_z = {z[k]: sp.log(pi[k]) for k in range(K)}
    H = sp.zeros(len(coords), len(coords))
    for i in range(K):
        ell = -sum(P[i, j] * (z[j] - sp.log(sum(sp.exp(zk) for zk in z))) for j in range(K))
        grad_ell = [sp.diff(ell, zj).subs(at_z) for zj in z]
        hess_ell = sp.hessian(ell, list(z)).subs(at_z)
        for n in range(N):
            logits = A * (E[i, :].T + pos[n]) + b  # (K, 1), polynomial in the parameters
            J = logits.jacobian(coords).subs(at)
            second = sum(
                (grad_ell[j] * sp.hessian(logits[j], coords).subs(at) for j in range(K)),
                sp.zeros(len(coords), len(coords)),
            )
            H += pi[i] * (J.T * hess_ell * J + second) / N
    H = H.applyfunc(lambda e: sp.cancel(sp.expand(e)))
    Sigma = sp.diag(*pi) - pi * pi.T
    C = sp.diag(*pi) * P - pi * pi.T
    Cs = (C + C.T) / 2
    u = sum(pos, sp.zeros(d, 1)) / N
    V0 = sum((pn * pn.T for pn in pos), sp.zeros(d, d)) / N
    kron = TensorProduct
    if tied:
        blocks = [
            [Sigma, kron(Sigma, u.T)],
            [kron(Sigma, u), kron(Sigma, V0) - 2 * kron(Cs, sp.eye(d))],
        ]
    else:
        Z = sp.zeros(K * d, K * d)
        blocks = [
            [Sigma, kron(Sigma, u.T), sp.zeros(K, K * d)],
            [kron(Sigma, u), kron(Sigma, V0), -kron(C.T, sp.eye(d))],
            [sp.zeros(K * d, K), -kron(C, sp.eye(d)), Z],
        ]
    formula = sp.BlockMatrix(blocks).as_explicit()
    symbols = {"P": P, "pi": pi, "pos": pos, "coords": coords, "C": C, "Sigma": Sigma}
    return H, formula, symbols
