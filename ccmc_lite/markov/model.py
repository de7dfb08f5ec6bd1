"""The transformer of Makkuva et al. (2024, Sec. 2.1 and App. A), written plainly.

For each position ``n`` of an input ``x_1, ..., x_N`` (tokens in ``0..K-1``)::

    x_n  = emb(x_n) + p_n                                   (Embedding)
    y_n  = x_n + W_O sum_{i<=n} att_{n,i} W_V x_i            (Attention, skip)
    z_n  = y_n + W_2 ReLU(W_1 y_n)                           (FF, skip)
    logit_n = <a, z_n> + b,  f(x_1^n) = sigmoid(logit_n)     (K = 2)
    logits_n = A z_n + b,    softmax(logits_n)               (K > 2)

with ``att_{n,.} = softmax(<W_Q x_n, W_K x_i> / sqrt(m), i <= n)``. For ``K = 2`` the
embedding is the paper's *uni-embedding* ``x_n e + p_n`` (Sec. 3): one vector ``e`` and
positional vectors ``p_n`` that absorb ``e_0``. Weight tying sets ``a = e`` (``A = E``).
Optional pre-layer-norm blocks (as in GPT-2, Table 1 of the paper) and depth ``ℓ``
(several attention + FF blocks) are switched on by options.

The module is plain PyTorch without in-place operations on parameters and without
data-dependent control flow, so :func:`ccmc_lite.core.train_runs` can train ``R``
stacked copies of it as one vmapped program.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..core.validation import (
    DEFAULT_LIMITS,
    as_tensor,
    check_callable,
    check_choice,
    check_finite_result,
    check_float,
    check_int,
    check_model_tokens,
    check_size,
    check_stochastic_matrix,
    check_tokens,
    is_traced,
)
from .blocked_attention import ATTENTION_BLOCK, blocked_causal_attention, check_attention_inputs

__all__ = [
    "ACTIVATIONS",
    "MODEL_OPTIONS",
    "TABLE1_OPTIONS",
    "MarkovTransformer",
    "build_model",
    "causal_attention",
    "check_model_options",
    "kernel_loss",
    "next_token_loss",
]

#: The options of :class:`MarkovTransformer` with their defaults (``None``: derived from ``d``).
MODEL_OPTIONS: dict[str, Any] = {
    "K": 2,
    "d": 4,
    "N": 64,
    "depth": 1,
    "tied": True,
    "layer_norm": False,
    "ff_width": None,
    "attn_dim": None,
    "init_std": 0.02,
    "attention": True,
    "feed_forward": True,
    "activation": "relu",
}

#: The options that make :class:`MarkovTransformer` the paper's Table 1 model (GPT-2 as in
#: Pagliardini (2023)): pre-layer-norm blocks, a final layer norm, GELU in the FF layer.
#: Combine with the paper's sizes, e.g. ``build_model(d=4, N=1024, **TABLE1_OPTIONS)``.
TABLE1_OPTIONS: dict[str, Any] = {"layer_norm": True, "activation": "gelu"}

#: Activations of the FF layer: the paper's equations use ReLU (Sec. 2.1), its code GELU.
ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": torch.relu,
    "gelu": F.gelu,
}


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``softmax(q kᵀ + causal mask) v`` over the last two axes (Makkuva et al. 2024, App. A).

    Position ``n`` attends to the positions ``i <= n``: the mask puts ``-inf`` above the
    diagonal of the ``T x T`` score matrix. ``q`` must already carry the ``1/sqrt(m)``
    scale. Inputs ``(..., T, m)``; returns ``(..., T, m)``. Raises ``ValueError`` when
    finite inputs overflow (scores of ``inf``), instead of returning NaN. The model runs
    long inputs through :func:`~ccmc_lite.markov.blocked_causal_attention`, the same sums
    without the masked half.
    """
    q, k, v = check_attention_inputs(q, k, v)
    T = q.shape[-2]
    scores = q @ k.transpose(-1, -2)  # (..., T, T)
    mask = torch.full((T, T), float("-inf"), dtype=q.dtype, device=q.device).triu(1)
    out = torch.softmax(scores + mask, dim=-1) @ v  # (..., T, m)
    return check_finite_result(out, "the attention", "q, k, v")


class _Block(nn.Module):
    """One attention + feed-forward block with skip connections (paper, App. A)."""

    def __init__(
        self,
        d: int,
        m: int,
        r: int,
        layer_norm: bool,
        init_std: float,
        depth: int,
        attention: bool = True,
        feed_forward: bool = True,
        activation: str = "relu",
    ) -> None:
        super().__init__()
        self.act = ACTIVATIONS[activation]
        proj_std = init_std / math.sqrt(2 * depth)  # GPT-2: scaled init of residual outputs
        self.attention, self.feed_forward = attention, feed_forward
        if attention:
            self.W_Q = nn.Parameter(torch.randn(m, d) * init_std)
            self.W_K = nn.Parameter(torch.randn(m, d) * init_std)
            self.W_V = nn.Parameter(torch.randn(m, d) * init_std)
            self.W_O = nn.Parameter(torch.randn(d, m) * proj_std)
        if feed_forward:
            self.W_1 = nn.Parameter(torch.randn(r, d) * init_std)
            self.W_2 = nn.Parameter(torch.randn(d, r) * proj_std)
        self.layer_norm = layer_norm
        if layer_norm:
            self.ln1_w = nn.Parameter(torch.ones(d))
            self.ln1_b = nn.Parameter(torch.zeros(d))
            self.ln2_w = nn.Parameter(torch.ones(d))
            self.ln2_b = nn.Parameter(torch.zeros(d))

    def forward(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # h: (B, T, d). Returns (z, attention contribution), both (B, T, d).
        d = h.shape[-1]
        if self.attention:
            u = F.layer_norm(h, (d,), self.ln1_w, self.ln1_b) if self.layer_norm else h
            q = (u @ self.W_Q.T) / math.sqrt(self.W_Q.shape[0])  # (B, T, m), scaled by 1/sqrt(m)
            k = u @ self.W_K.T
            v = u @ self.W_V.T
            long_input = q.shape[-2] > ATTENTION_BLOCK  # the fast path: same sums
            attend = blocked_causal_attention if long_input else causal_attention
            contribution = attend(q, k, v) @ self.W_O.T  # (B, T, d)
        else:
            contribution = torch.zeros_like(h)
        y = h + contribution
        if not self.feed_forward:
            return y, contribution
        u2 = F.layer_norm(y, (d,), self.ln2_w, self.ln2_b) if self.layer_norm else y
        z = y + self.act(u2 @ self.W_1.T) @ self.W_2.T
        return z, contribution


class MarkovTransformer(nn.Module):
    """Single-head transformer of Makkuva et al. (2024, Sec. 2.1, App. A).

    Parameters
    ----------
    K : int
        Vocabulary size (number of Markov states), ``>= 2``. ``K = 2`` uses the
        uni-embedding ``x_n e + p_n`` and a sigmoid output; ``K > 2`` token embeddings
        ``E`` (``K x d``) and a softmax output.
    d : int
        Embedding dimension.
    N : int
        Number of positions (length of the longest input).
    depth : int
        Number of attention + FF blocks (``ℓ`` in the paper).
    tied : bool
        Weight tying ``a = e`` (``A = E``).
    layer_norm : bool
        Pre-layer-norm in every block and before the readout (GPT-2 style).
    ff_width : int, optional
        Hidden width ``r`` of the FF layer (default ``4 d``, as in GPT-2).
    attn_dim : int, optional
        Attention dimension ``m`` (default ``d``).
    init_std : float
        Standard deviation of the Gaussian initialisation (GPT-2: 0.02).
    attention, feed_forward : bool
        Switch the attention or the FF layer off (ablations; both on in the paper).
    activation : str
        ``"relu"`` (the paper's Sec. 2.1, the default) or ``"gelu"`` (its code, Table 1;
        :data:`TABLE1_OPTIONS`).

    Attributes
    ----------
    e, a : torch.nn.Parameter
        ``K = 2``: token embedding ``e`` (``d``) and, untied, readout ``a`` (``d``).
    E, A : torch.nn.Parameter
        ``K > 2``: token embeddings (``K x d``) and, untied, readout (``K x d``).
    b : torch.nn.Parameter
        Readout bias: a scalar for ``K = 2``, shape ``(K,)`` otherwise.
    pos : torch.nn.Parameter
        Positional embeddings ``p_n``, shape ``(N, d)``.
    blocks : torch.nn.ModuleList
        The attention + FF blocks, parameters ``W_Q, W_K, W_V`` (``m x d``),
        ``W_O`` (``d x m``), ``W_1`` (``r x d``), ``W_2`` (``d x r``).

    Notes
    -----
    ``model(x)`` returns next-token **log-probabilities** of shape ``(B, T, K)`` (also for
    ``K = 2``); ``model(x, output="logits")`` the raw logits (``(B, T)`` for ``K = 2``)
    and ``model(x, output="parts")`` a dict with the embeddings, attention contributions,
    ``y``, ``z`` and logits, for interpretation (Makkuva et al. 2024, Sec. 3.1 and App. D).
    """

    def __init__(
        self,
        K: int = 2,
        d: int = 4,
        N: int = 64,
        depth: int = 1,
        tied: bool = True,
        layer_norm: bool = False,
        ff_width: int | None = None,
        attn_dim: int | None = None,
        init_std: float = 0.02,
        attention: bool = True,
        feed_forward: bool = True,
        activation: str = "relu",
    ) -> None:
        super().__init__()
        opts = check_model_options(
            {
                "K": K,
                "d": d,
                "N": N,
                "depth": depth,
                "tied": tied,
                "layer_norm": layer_norm,
                "ff_width": ff_width,
                "attn_dim": attn_dim,
                "init_std": init_std,
                "attention": attention,
                "feed_forward": feed_forward,
                "activation": activation,
            }
        )
        self.K, self.d, self.N = opts["K"], opts["d"], opts["N"]
        self.depth, self.tied, self.layer_norm = opts["depth"], opts["tied"], opts["layer_norm"]
        self.ff_width, self.attn_dim = opts["ff_width"], opts["attn_dim"]
        self.attention, self.feed_forward = opts["attention"], opts["feed_forward"]
        self.activation = opts["activation"]
        std = opts["init_std"]
        if self.K == 2:
            self.e = nn.Parameter(torch.randn(d) * std)
            if not self.tied:
                self.a = nn.Parameter(torch.randn(d) * std)
            self.b = nn.Parameter(torch.zeros(()))
        else:
            self.E = nn.Parameter(torch.randn(self.K, d) * std)
            if not self.tied:
                self.A = nn.Parameter(torch.randn(self.K, d) * std)
            self.b = nn.Parameter(torch.zeros(self.K))
        self.pos = nn.Parameter(torch.randn(self.N, d) * std)
        self.blocks = nn.ModuleList(
            _Block(
                d,
                self.attn_dim,
                self.ff_width,
                self.layer_norm,
                std,
                self.depth,
                self.attention,
                self.feed_forward,
                self.activation,
            )
            for _ in range(self.depth)
        )
        if self.layer_norm:
            self.lnf_w = nn.Parameter(torch.ones(d))
            self.lnf_b = nn.Parameter(torch.zeros(d))

    @property
    def options(self) -> dict[str, Any]:
        """The options this model was built with (enough to rebuild it)."""
        return {
            "K": self.K,
            "d": self.d,
            "N": self.N,
            "depth": self.depth,
            "tied": self.tied,
            "layer_norm": self.layer_norm,
            "ff_width": self.ff_width,
            "attn_dim": self.attn_dim,
            "attention": self.attention,
            "feed_forward": self.feed_forward,
            "activation": self.activation,
        }

    def readout_weight(self) -> torch.Tensor:
        """``a`` (``K = 2``, shape ``(d,)``) or ``A`` (``(K, d)``); the embedding when tied."""
        if self.K == 2:
            return self.e if self.tied else self.a
        return self.E if self.tied else self.A

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """Token + positional embedding ``x_n`` of tokens ``x`` (``(B, T)``) -> ``(B, T, d)``."""
        return self._embed(check_model_tokens("x", x, self, ndim=(1, 2, 3)))

    def _embed(self, x: torch.Tensor) -> torch.Tensor:
        T = x.shape[-1]
        if self.K == 2:
            tok = x.unsqueeze(-1).to(self.e.dtype) * self.e  # x_n e  (uni-embedding)
        else:
            tok = F.embedding(x, self.E)  # e_{x_n}
        return tok + self.pos[:T]

    def forward(self, x: torch.Tensor, output: str = "log_probs") -> Any:
        """Next-token predictions for every prefix of ``x`` (``(B, T)`` or ``(T,)`` tokens)."""
        if output not in ("log_probs", "logits", "parts"):
            raise ValueError(f"output must be 'log_probs', 'logits' or 'parts'; got {output!r}")
        x = check_model_tokens("x", x, self, ndim=(1, 2, 3))
        h = self._embed(x)  # (B, T, d)
        parts: dict[str, Any] = {"x": h, "attention": [], "y": [], "z": []}
        for block in self.blocks:
            z, contribution = block(h)
            parts["attention"].append(contribution)
            parts["y"].append(h + contribution)
            parts["z"].append(z)
            h = z
        if self.layer_norm:
            h = F.layer_norm(h, (self.d,), self.lnf_w, self.lnf_b)
        w = self.readout_weight()
        logits = h @ w + self.b if self.K == 2 else h @ w.T + self.b  # (B, T) or (B, T, K)
        if output == "logits":
            return logits
        if output == "parts":
            parts["logits"] = logits
            return parts
        if self.K == 2:
            return torch.stack([F.logsigmoid(-logits), F.logsigmoid(logits)], -1)
        return torch.log_softmax(logits, -1)

    def predict_proba(self, x: Any) -> torch.Tensor:
        """Next-token probabilities ``(B, T, K)`` of tokens ``x`` (validated), no gradients."""
        tokens = check_tokens("x", x, self.K, ndim=(1, 2))
        with torch.no_grad():
            return self(tokens).exp()


def check_model_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Validate options of :class:`MarkovTransformer`; fill defaults; return a new dict.

    Raises
    ------
    ValueError
        For an unknown option name, ``K < 2``, ``d < 1``, ``N < 1``, ``depth < 1``,
        non-positive widths or a non-positive ``init_std``.
    TypeError
        For options of the wrong type (e.g. ``tied="yes"``).
    """
    if not isinstance(options, Mapping):
        raise TypeError(f"options must be a mapping; got {type(options).__name__}")
    unknown = sorted(set(options) - set(MODEL_OPTIONS))
    if unknown:
        raise ValueError(
            f"unknown model option(s) {unknown}; expected names among {sorted(MODEL_OPTIONS)}"
        )
    opts = {**MODEL_OPTIONS, **options}
    opts["K"] = check_size("K", opts["K"], minimum=2, limit=DEFAULT_LIMITS["vocab"])
    opts["d"] = check_size("d", opts["d"], minimum=1)
    opts["N"] = check_size("N", opts["N"], minimum=1)
    opts["depth"] = check_size("depth", opts["depth"], minimum=1, limit=1024)
    for flag in ("tied", "layer_norm", "attention", "feed_forward"):
        if not isinstance(opts[flag], bool):
            raise TypeError(f"{flag} must be True or False; got {opts[flag]!r}")
    opts["ff_width"] = check_int(
        "ff_width", 4 * opts["d"] if opts["ff_width"] is None else opts["ff_width"], minimum=1
    )
    opts["attn_dim"] = check_int(
        "attn_dim", opts["d"] if opts["attn_dim"] is None else opts["attn_dim"], minimum=1
    )
    opts["init_std"] = check_float("init_std", opts["init_std"], minimum=0.0, open_lower=True)
    opts["activation"] = check_choice("activation", opts["activation"], tuple(ACTIVATIONS))
    return opts


def build_model(**options: Any) -> MarkovTransformer:
    """A new :class:`MarkovTransformer`; an unknown option name raises ``ValueError``."""
    return MarkovTransformer(**check_model_options(options))


def next_token_loss(model: Callable[..., torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of eq. (1) of Makkuva et al. (2024) on sequences ``x`` ``(B, N + 1)``.

    ``model`` (a :class:`MarkovTransformer`, or the functional stand-in ``train_runs`` passes)
    reads ``x_1..x_N`` and returns log-probabilities ``(B, N, K)``, scored on ``x_2..x_{N+1}``.
    """
    check_callable("model", model)
    if isinstance(model, MarkovTransformer):
        x = check_model_tokens("x", x, model, ndim=(1, 2, 3), extra=1)
    else:
        x = as_tensor("x", x, dtype=torch.long, ndim=(1, 2, 3))
    if x.shape[-1] < 2:
        raise ValueError(f"x must hold at least 2 tokens per sequence; got shape {tuple(x.shape)}")
    logp = model(x[..., :-1])  # (B, N, K)
    return -logp.gather(-1, x[..., 1:].unsqueeze(-1)).mean()


def kernel_loss(
    model: Callable[..., torch.Tensor], x: torch.Tensor, P: torch.Tensor
) -> torch.Tensor:
    """Lower-variance estimate of eq. (1): score each prefix against the true next-token law.

    ``E[ -log f(x_{n+1} | x_1^n) | x_1^n ] = sum_j P[x_n, j] (-log f(j | x_1^n))`` (the
    conditional expectation used in the proof of Lemma 1, Makkuva et al. 2024, App. B.6),
    averaged over positions and over the sequences ``x`` (``(B, N)``, all fed to the model).
    """
    check_callable("model", model)
    P = check_stochastic_matrix("P", P)
    if P.ndim != 2 and not is_traced(P):
        raise ValueError(
            f"P must be one (K, K) kernel; got a stack of shape {tuple(P.shape)}: call "
            "kernel_loss once per kernel (its x holds sequences of one chain)"
        )
    if isinstance(model, MarkovTransformer):
        if P.shape[-1] != model.K:
            raise ValueError(
                f"P must be {model.K} x {model.K} for a model with K={model.K}; "
                f"got {tuple(P.shape)}"
            )
        x = check_model_tokens("x", x, model, ndim=(1, 2, 3))
    else:
        x = check_tokens("x", x, P.shape[-1], ndim=(1, 2, 3))
    logp = model(x)  # (B, N, K)
    if logp.shape[-1] != P.shape[-1]:
        raise ValueError(
            f"model must return log-probabilities over the {P.shape[-1]} states of P; "
            f"got shape {tuple(logp.shape)}"
        )
    rows = P.to(logp.dtype)[x]  # (B, N, K): P(x_{n+1} = . | x_n)
    return -(rows * logp).sum(-1).mean()
