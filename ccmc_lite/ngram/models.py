"""Transformers for in-context n-grams and the k-gram constructions θ*^k (Varre et al. 2025).

* :class:`~ccmc_lite.ngram.SimplifiedTransformer` — the two-layer disentangled transformer of Sec.
  2.3: position-only first-layer attention ``A_1^(h)`` (a ``T x T`` matrix per head), values
  ``V_1^(h)``, orthogonal token embeddings, heads *concatenated* with the skip connection (eq. (3)),
  a second layer with key/query ``K_2, Q_2`` and the fixed value ``V_2 = [I; 0; ...]`` that reads
  the token block, and the fixed unembedding ``U = Σ_j e_j s_j^T`` (eq. (5)). Its output ``p_θ(x^T)
  = U r_2[T]`` is already a probability vector: an attention-weighted histogram of the tokens of the
  sequence.
* :class:`~ccmc_lite.ngram.AttentionOnlyTransformer` — the general (non-disentangled) attention-only
  transformer of App. I.1: one-hot or learned token and position embeddings, heads and skip
  connections *added*, a linear read-out and a softmax; optionally a ReLU MLP after each layer
  (``mlp``, the "transformers with MLP layers" of App. I.3, Fig. 7).
* :func:`~ccmc_lite.ngram.theta_star` — the construction θ*^k of eqs. (8a)–(8c) in the factorised
  form of App. A, eqs. (10a)–(10d), with scale ``c``: head ``h <= k-1`` copies the ``(-h)``-token
  and the second layer compares ``(k-1)``-histories, so ``p_θ`` tends to the k-gram estimator as ``c
  -> ∞`` (Lemma B.1). :func:`~ccmc_lite.ngram.theta_star_all_heads` is the App. F variant (eqs.
  (30a)–(30d)) in which *every* head copies the previous token.
* :func:`~ccmc_lite.ngram.construction_limit` — the exact ``c -> ∞`` output of a construction (a
  hard-max over the integer match scores), the reference the constructions are tested against.

Shapes: ``B`` batch, ``T`` positions, ``H`` first-layer heads, ``d`` embedding width,
``D = (H+1) d`` the width after the first layer, ``S`` vocabulary.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn

from ..core.validation import (
    DEFAULT_LIMITS,
    as_tensor,
    check_bool,
    check_choice,
    check_elements,
    check_float,
    check_instance,
    check_int,
    check_model_tokens,
    check_size,
    check_tokens,
    is_traced,
)

#: The largest ``init_scale`` a model accepts: beyond it the float32 weights and their
#: attention scores overflow, and no learning-rate schedule recovers from that.
INIT_SCALE_MAX = 1e6

__all__ = [
    "AttentionOnlyTransformer",
    "SimplifiedTransformer",
    "construction_limit",
    "first_layer_attention",
    "load_parameters",
    "offsets_for_k",
    "theta_star",
    "theta_star_all_heads",
    "theta_star_subset",
]


def _causal_softmax(scores: torch.Tensor) -> torch.Tensor:
    """Row-wise softmax over keys ``j <= i`` of the last two axes (masked softmax σ, Sec. 2.3)."""
    check_instance("scores", scores, torch.Tensor)
    if scores.ndim < 2 or scores.shape[-1] != scores.shape[-2]:
        raise ValueError(f"scores must have shape (..., T, T); got {tuple(scores.shape)}")
    if not is_traced(scores) and bool((torch.isnan(scores) | (scores == float("inf"))).any()):
        raise ValueError("scores must not contain NaN or +inf (-inf masks a key)")
    T = scores.shape[-1]
    mask = torch.ones(T, T, dtype=torch.bool, device=scores.device).tril()
    masked = scores.masked_fill(~mask, float("-inf"))
    if not is_traced(scores):
        empty = torch.isneginf(masked).all(-1)  # (..., T): a query with no key left
        if bool(empty.any()):
            row = tuple(int(i) for i in empty.nonzero()[0].tolist())
            raise ValueError(
                f"scores row {row} is -inf on every key j <= i: that query has no key to "
                "attend to, and its softmax would be 0/0"
            )
    return torch.softmax(masked, dim=-1)


def first_layer_attention(A1: torch.Tensor) -> torch.Tensor:
    """Attention maps σ(A_1^(h)) of the simplified model from its parameter ``A1``.

    ``A1`` has shape ``(..., H, T, T)`` (e.g. stacked checkpoints ``(R, H, T, T)``);
    the result has the same shape, rows sum to one over keys ``j <= i``.
    """
    A1 = as_tensor("A1", A1, dtype=None)
    if A1.ndim < 2 or A1.shape[-1] != A1.shape[-2]:
        raise ValueError(f"A1 must end with a square (T, T) block; got {tuple(A1.shape)}")
    return _causal_softmax(A1)


def _by_lookup(tokens: torch.Tensor) -> bool:
    """Whether products with one-hot embeddings are computed as look-ups (on the CPU)."""
    return tokens.device.type == "cpu"


def _orthonormal_embedding(S: int, d: int) -> torch.Tensor:
    """Rows ``s_0..s_{S-1}``: the first ``S`` standard basis vectors of R^d (one-hot)."""
    return torch.eye(d)[:S].clone()


def _check_query_pos(query_pos: Any, tokens: torch.Tensor) -> torch.Tensor:
    """Query positions ``(B,)``: integers in ``[0, T')`` for tokens ``(B, T')``."""
    if not isinstance(query_pos, torch.Tensor):
        query_pos = torch.as_tensor(query_pos)
    dtype = query_pos.dtype
    if dtype.is_floating_point or dtype.is_complex or dtype == torch.bool:
        raise TypeError(f"query_pos must hold integer positions; got dtype {dtype}")
    B, Tq = tokens.shape
    if query_pos.numel() != B:
        raise ValueError(
            f"query_pos must give one position per sequence, shape ({B},); "
            f"got {tuple(query_pos.shape)}"
        )
    if not is_traced(query_pos) and bool(((query_pos < 0) | (query_pos >= Tq)).any()):
        raise ValueError(
            f"query_pos must lie in [0, {Tq - 1}] for sequences of {Tq} tokens; got "
            f"{int(query_pos.min())}..{int(query_pos.max())}"
        )
    return query_pos.long()


class SimplifiedTransformer(nn.Module):
    """The simplified two-layer disentangled transformer (Varre et al. 2025, Sec. 2.3).

    Parameters
    ----------
    S : int
        Vocabulary size (``>= 2``).
    T : int
        Number of positions the first-layer matrices ``A_1^(h)`` cover (``T x T``).
    n_heads : int
        First-layer heads ``H`` (the paper uses ``n-1``).
    d : int, optional
        Embedding width, ``d >= S`` (default ``S``: one-hot embeddings as in Sec. 5).
    init_scale : float
        Standard deviation multiplier of the random initialisation of ``V_1``, ``Q_2``,
        ``K_2`` (entries ``N(0, init_scale^2 / fan_in)``); ``A_1`` starts at zero, i.e.
        uniform causal attention, as in the authors' code.

    Notes
    -----
    Parameters: ``A1`` ``(H, T, T)``, ``V1`` ``(H, d, d)``, ``Q2`` and ``K2`` ``(D, D)``
    with ``D = (H+1)d``; buffer ``E`` ``(S, d)`` holds the orthonormal token embeddings
    ``s_j``. The first layer gives ``r1^(h) = σ(A1[h]) r0 V1[h]^T`` (eq. (2)) and
    ``r1 = [r0, r1^(1), ..., r1^(H)]`` (eq. (3)); the second layer scores key ``i`` for
    query ``t`` with ``<K2 r1[i], Q2 r1[t]>`` and returns ``Σ_i a_(i,t) e_{x_i}`` (eq. (9)).
    """

    E: torch.Tensor  # buffer registered in __init__

    def __init__(
        self,
        S: int,
        T: int,
        n_heads: int,
        *,
        d: int | None = None,
        init_scale: float = 1.0,
    ) -> None:
        super().__init__()
        self.S = check_size("S", S, minimum=2, limit=DEFAULT_LIMITS["vocab"])
        self.T = check_size("T", T, minimum=1)
        self.H = check_size("n_heads", n_heads, minimum=0, limit=1024)
        self.d = self.S if d is None else check_size("d", d, minimum=self.S)
        init_scale = check_float("init_scale", init_scale, minimum=0.0, maximum=INIT_SCALE_MAX)
        D = (self.H + 1) * self.d
        self.D = D
        self.register_buffer("E", _orthonormal_embedding(self.S, self.d))  # (S, d)
        self.A1 = nn.Parameter(torch.zeros(self.H, self.T, self.T))
        self.V1 = nn.Parameter(init_scale * torch.randn(self.H, self.d, self.d) / math.sqrt(self.d))
        self.Q2 = nn.Parameter(init_scale * torch.randn(D, D) / math.sqrt(D))
        self.K2 = nn.Parameter(init_scale * torch.randn(D, D) / math.sqrt(D))

    def first_layer(self, tokens: torch.Tensor) -> torch.Tensor:
        """``r1``: the skip block and the ``H`` head outputs, concatenated; ``(B, T, D)``."""
        return self._first_layer(check_model_tokens("tokens", tokens, self))

    def _first_layer(self, tokens: torch.Tensor) -> torch.Tensor:
        T = tokens.shape[-1]
        r0 = self._embed(tokens)  # (B, T, d)
        att = _causal_softmax(self.A1[:, :T, :T])  # (H, T, T)
        heads = torch.einsum("htj,bjd,hed->bthe", att, r0, self.V1)  # (B, T, H, d)
        r1 = torch.cat([r0.unsqueeze(2), heads], dim=2)  # (B, T, H+1, d)
        return r1.reshape(*tokens.shape, self.D)

    def forward(
        self,
        tokens: torch.Tensor,
        query_pos: torch.Tensor | None = None,
        *,
        all_positions: bool = False,
    ) -> torch.Tensor:
        """Next-token probabilities ``p_θ``.

        ``tokens``: ``(B, T')`` with ``T' <= T``. By default returns ``(B, S)`` for the
        token after the last position; ``query_pos`` (``(B,)`` long) picks another query
        position per sequence (keys after it are masked, so later tokens are ignored);
        ``all_positions=True`` returns ``(B, T', S)``, the prediction after every position.
        """
        tokens = check_model_tokens("tokens", tokens, self)
        if check_bool("all_positions", all_positions):
            r1 = self._first_layer(tokens)  # (B, T', D)
            keys = r1 @ self.K2.T  # (B, T', D)
            queries = r1 @ self.Q2.T  # (B, T', D)
            att = _causal_softmax(queries @ keys.transpose(-1, -2))  # (B, T', T')
            return (att @ self._embed(tokens))[..., : self.S]  # (B, T', S)
        if query_pos is not None:
            query_pos = _check_query_pos(query_pos, tokens)
        return self._last_query(tokens, query_pos)

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """``r0``: the token embeddings ``s_{x_t}``, shape ``(B, T', d)``."""
        return self._embed(check_model_tokens("tokens", tokens, self))

    def _embed(self, tokens: torch.Tensor) -> torch.Tensor:
        # E holds the first S standard basis vectors of R^d, so s_{x_t} is a one-hot vector;
        # a comparison builds it faster than indexing (and stays vmap-friendly).
        return (tokens.unsqueeze(-1) == torch.arange(self.d, device=tokens.device)).to(self.E.dtype)

    def _last_query(self, tokens: torch.Tensor, query_pos: torch.Tensor | None) -> torch.Tensor:
        # Same function as the second layer of ``forward(all_positions=True)`` restricted to
        # one query, evaluated without materialising r1 for every key: the score of key i is
        # r1[i] . w with w = K2^T Q2 r1[t]; the head blocks of r1[i] are attention averages
        # of V1[h] r0[j], so r1[i] . w = r0[i] . w_0 + sum_h sum_j att_h[i, j] r0[j] . V1[h]^T w_h.
        # r0[j] is the one-hot vector of x_j, so every product with it is a look-up or a
        # scatter by token. On the CPU they are computed as such (gather, scatter_add): as
        # (B, T', d) matrix products they became B tiny products per run under vmap, and the
        # forward and backward of 25 batched runs took 2.6x as long (4 runs: 1.8x, one run:
        # 1.2x; the same function to rounding). Elsewhere the products stay: on CUDA,
        # scatter_add (and gather's gradient) add with atomics, in a varying order, and a
        # run would no longer give the same numbers twice.
        B, Tq = tokens.shape
        H, d = self.H, self.d
        r0 = None if _by_lookup(tokens) else self._embed(tokens)  # (B, T', d) or None

        def pool(weights: torch.Tensor, width: int) -> torch.Tensor:
            """``sum_j weights[b, k, j] s_{x_j}``, its first ``width`` entries; (B, K, width)."""
            if r0 is not None:
                return (weights @ r0)[..., :width]
            index = tokens.unsqueeze(1).expand_as(weights)
            return weights.new_zeros(*weights.shape[:-1], width).scatter_add(-1, index, weights)

        def look_up(values: torch.Tensor) -> torch.Tensor:
            """``values[b, k] . s_{x_j}`` for every key j: (B, K, d) -> (B, K, T')."""
            if r0 is not None:
                return values @ r0.transpose(1, 2)
            return torch.gather(values, 2, tokens.unsqueeze(1).expand(B, values.shape[1], Tq))

        att = _causal_softmax(self.A1[:, :Tq, :Tq])  # (H, T', T')
        if query_pos is None:
            att_q = att[:, -1].unsqueeze(0).expand(B, H, Tq)  # (B, H, T')
            x_q = tokens[:, -1]  # (B,)
        else:
            qp = query_pos.reshape(B)
            att_q = att[:, qp].transpose(0, 1)  # (B, H, T')
            x_q = torch.gather(tokens, 1, qp.reshape(B, 1)).squeeze(1)  # (B,)
        mixed = pool(att_q, d)  # (B, H, d): attention-averaged token embeddings at the query
        heads_q = torch.einsum("bhd,hed->bhe", mixed, self.V1)  # (B, H, d)
        r0_q = self._embed(x_q)  # (B, d)
        r1_q = torch.cat([r0_q.unsqueeze(1), heads_q], dim=1).reshape(B, self.D)  # (B, D)
        w = (r1_q @ (self.Q2.T @ self.K2)).reshape(B, H + 1, d)  # (B, H+1, d)
        u = torch.einsum("bhe,hed->bhd", w[:, 1:], self.V1)  # (B, H, d)
        z = look_up(torch.cat([w[:, :1], u], dim=1))  # (B, H+1, T')
        mix = att.permute(0, 2, 1).reshape(H * Tq, Tq)  # [(h, j), i] = att_h[i, j]
        scores = z[:, 0] + z[:, 1:].reshape(B, H * Tq) @ mix  # (B, T')
        if query_pos is not None:
            allowed = torch.arange(Tq, device=tokens.device) <= query_pos.reshape(B, 1)
            scores = scores.masked_fill(~allowed, float("-inf"))
        a = torch.softmax(scores, dim=-1)  # (B, T')
        return pool(a.unsqueeze(1), self.S).squeeze(1)  # (B, S) = sum_i a_i e_{x_i}

    def second_layer_attention(self, tokens: torch.Tensor) -> torch.Tensor:
        """Second-layer attention of the last query over all keys, ``(B, T')``."""
        r1 = self.first_layer(tokens)  # validates
        scores = (r1 @ self.K2.T) @ (r1[:, -1] @ self.Q2.T).unsqueeze(-1)
        return torch.softmax(scores.squeeze(-1), dim=-1)


class AttentionOnlyTransformer(nn.Module):
    """The general attention-only transformer of Varre et al. 2025, App. I.1 (Fig. 4).

    ``r_0 = embed(x)``; for each layer ``ℓ``:
    ``r_ℓ = r_{ℓ-1} + Σ_h σ(r_{ℓ-1} Q_h^T K_h r_{ℓ-1}^T) r_{ℓ-1} V_h^T`` (heads and skip
    added, not concatenated); ``p_θ = softmax(r_L[T] W)``.

    Parameters
    ----------
    S, T : int
        Vocabulary size and number of positions.
    heads : list of int
        Heads per layer (the paper: ``(n-1, 1)``).
    embedding : str
        ``"onehot"``: ``[e_{x_t}; e_t]`` (token one-hot and position one-hot, ``d = S+T``);
        ``"learned"``: ``wte[x_t] + wpe[t]`` with trainable tables of width ``d``.
    d : int, optional
        Width for learned embeddings (default ``S + T`` as in App. I.1).
    init_scale : float
        Initial ``Q, K, V`` entries are ``N(0, init_scale^2 / d)``; the read-out ``W``
        starts at zero (uniform prediction).
    mlp : int
        Hidden width of a ReLU MLP added after every attention layer,
        ``r_ℓ <- r_ℓ + W_out relu(W_in r_ℓ + b_in) + b_out`` (``nn.Linear``'s initialisation);
        0 (the default) keeps the model attention-only. App. I.3's Fig. 7 trains "transformers
        with MLP layers"; App. F.1 motivates them (an MLP can turn the counts that attention
        averages into logits).
    """

    onehot_table: torch.Tensor  # buffer registered in __init__ for one-hot embeddings

    def __init__(
        self,
        S: int,
        T: int,
        heads: Sequence[int] = (2, 1),
        *,
        embedding: str = "onehot",
        d: int | None = None,
        init_scale: float = 1.0,
        mlp: int = 0,
    ) -> None:
        super().__init__()
        self.S = check_size("S", S, minimum=2, limit=DEFAULT_LIMITS["vocab"])
        self.T = check_size("T", T, minimum=1)
        self.embedding = check_choice("embedding", embedding, ("onehot", "learned"))
        if isinstance(heads, (str, bytes)) or not isinstance(heads, Sequence) or not heads:
            raise ValueError(f"heads must be a non-empty sequence of ints; got {heads!r}")
        self.heads = tuple(check_size("heads entry", h, minimum=1, limit=1024) for h in heads)
        init_scale = check_float("init_scale", init_scale, minimum=0.0, maximum=INIT_SCALE_MAX)
        if self.embedding == "onehot":
            if d is not None and d != S + T:
                raise ValueError(f"d must be S+T={S + T} for one-hot embeddings; got {d}")
            self.d = S + T
            self.register_buffer("onehot_table", torch.eye(self.d))
        else:
            self.d = S + T if d is None else check_size("d", d, minimum=1)
            self.wte = nn.Parameter(torch.randn(S, self.d) / math.sqrt(self.d))
            self.wpe = nn.Parameter(torch.randn(T, self.d) / math.sqrt(self.d))
        sd = init_scale / math.sqrt(self.d)
        self.Q = nn.ParameterList(
            [nn.Parameter(sd * torch.randn(h, self.d, self.d)) for h in self.heads]
        )
        self.K = nn.ParameterList(
            [nn.Parameter(sd * torch.randn(h, self.d, self.d)) for h in self.heads]
        )
        self.V = nn.ParameterList(
            [nn.Parameter(sd * torch.randn(h, self.d, self.d)) for h in self.heads]
        )
        self.W = nn.Parameter(torch.zeros(self.d, S))
        self.mlp = check_size("mlp", mlp, minimum=0)
        check_elements("mlp * d * layers", self.mlp * self.d * len(self.heads))
        self.mlps = nn.ModuleList(
            [
                nn.Sequential(nn.Linear(self.d, self.mlp), nn.ReLU(), nn.Linear(self.mlp, self.d))
                for _ in self.heads
            ]
            if self.mlp
            else []
        )

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """``r_0``, shape ``(B, T', d)``."""
        return self._embed(check_model_tokens("tokens", tokens, self))

    def _embed(self, tokens: torch.Tensor) -> torch.Tensor:
        T = tokens.shape[-1]
        if self.embedding == "onehot":
            tok = self.onehot_table[tokens][..., : self.S]  # (B, T, S)
            pos = self.onehot_table[:T, : self.T].expand(*tokens.shape, self.T)  # (B, T, T)
            return torch.cat([tok, pos], dim=-1)
        return self.wte[tokens] + self.wpe[:T]

    def attention(self, tokens: torch.Tensor) -> list[torch.Tensor]:
        """Attention maps of every layer, each ``(B, H_ℓ, T', T')``."""
        r = self.embed(tokens)  # validates
        maps = []
        for layer, (Q, K, V) in enumerate(zip(self.Q, self.K, self.V, strict=True)):
            att, r = self._layer(r, Q, K, V)
            r = self._mlp(layer, r)
            maps.append(att)
        return maps

    def _mlp(self, layer: int, r: torch.Tensor) -> torch.Tensor:
        """``r + MLP_ℓ(r)`` when the model has MLP layers, else ``r``; shape kept."""
        return r + self.mlps[layer](r) if self.mlp else r

    @staticmethod
    def _layer(
        r: torch.Tensor, Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        # scores r Q^T K r^T computed as (r (Q^T K)) r^T: one projection instead of two
        H, d = Q.shape[0], Q.shape[-1]
        A = Q.transpose(1, 2) @ K  # (H, d, d): Q_h^T K_h
        W = torch.cat([A, V.transpose(1, 2)], dim=0)  # (2H, d, d)
        B, T = r.shape[0], r.shape[1]
        flat = r.reshape(B * T, d) @ W.permute(1, 0, 2).reshape(d, 2 * H * d)  # one GEMM
        proj = flat.reshape(B, T, 2 * H, d).permute(0, 2, 1, 3)  # (B, 2H, T, d)
        att = _causal_softmax(proj[:, :H] @ r.unsqueeze(1).transpose(-1, -2))  # (B, H, T, T)
        return att, r + (att @ proj[:, H:]).sum(1)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Next-token probabilities after the last position, ``(B, S)``."""
        tokens = check_model_tokens("tokens", tokens, self)
        r = self._embed(tokens)
        layers = list(zip(self.Q, self.K, self.V, strict=True))
        for layer, (Q, K, V) in enumerate(layers[:-1]):
            _, r = self._layer(r, Q, K, V)
            r = self._mlp(layer, r)
        # the last layer is only needed at the last query position
        Q, K, V = layers[-1]
        q = torch.einsum("bd,hde->bhe", r[:, -1], Q.transpose(1, 2) @ K)  # (B, H, d)
        att = torch.softmax(torch.einsum("bhe,bte->bht", q, r), dim=-1)  # (B, H, T)
        vals = torch.einsum("bht,btd,hed->be", att, r, V)  # (B, d): sum over heads
        last = self._mlp(len(layers) - 1, r[:, -1] + vals)  # (B, d)
        return torch.softmax(last @ self.W, dim=-1)


# --------------------------------------------------------------------------- constructions


def offsets_for_k(k: int, n_heads: int) -> tuple[int | None, ...]:
    """Head ``h`` (1-based) copies the ``(-h)``-token for ``h <= k-1``; the rest are off.

    This is the assignment of eqs. (8a)–(8b); ``None`` marks a deactivated head.
    """
    k = check_size("k", k, minimum=1)
    n_heads = check_size("n_heads", n_heads, minimum=0, limit=1024)
    if k - 1 > n_heads:
        raise ValueError(f"k must be <= n_heads + 1 = {n_heads + 1}; got k={k}")
    return tuple(h if h <= k - 1 else None for h in range(1, n_heads + 1))


def _check_c(c: float) -> float:
    return check_float("c", c, minimum=0.0, open_lower=True)


def _previous_token_rows(T: int, offset: int) -> torch.Tensor:
    """``(T, T)`` 0/1 matrix with a 1 at ``[l, l-offset]`` (``l >= offset``), else at ``[l, 0]``."""
    M = torch.zeros(T, T)
    for l in range(T):
        M[l, l - offset if l >= offset else 0] = 1.0
    return M


def _construction(
    offsets: Sequence[int | None],
    *,
    S: int,
    T: int,
    c: float,
    d: int | None,
    value_scale: float,
    query_blocks: Sequence[int] | None = None,
    compare: set[int] | None = None,
) -> dict[str, torch.Tensor]:
    S = check_size("S", S, minimum=2, limit=DEFAULT_LIMITS["vocab"])
    T = check_size("T", T, minimum=1)
    c = _check_c(c)
    d = S if d is None else check_size("d", d, minimum=S)
    H = len(offsets)
    D = (H + 1) * d
    E = _orthonormal_embedding(S, d)  # (S, d), rows s_j
    A1 = torch.zeros(H, T, T)
    V1 = torch.zeros(H, d, d)
    Q2 = torch.zeros(D, D)
    K2 = torch.zeros(D, D)
    proj = E.T @ E  # Σ_j s_j s_j^T, (d, d)
    blocks = []  # (query block, key block) pairs that the second layer compares
    for h, o in enumerate(offsets, start=1):
        if o is None:
            continue
        if o < 1 or o >= T:
            raise ValueError(f"head offsets must lie in [1, T-1]={1, T - 1}; got {o}")
        A1[h - 1] = c * _previous_token_rows(T, o)  # eq. (8a)
        V1[h - 1] = value_scale * proj  # eq. (8b)
        if query_blocks is not None:
            qb = query_blocks[h - 1]
        elif o == 1:
            qb = 0  # the query's own token sits in the skip block
        else:  # the query needs x_{t+1-o}: a head that copies the (-(o-1))-token
            cands = [g for g, og in enumerate(offsets, start=1) if og == o - 1]
            if not cands:
                raise ValueError(
                    f"head {h} copies offset {o} but no head copies offset {o - 1}; "
                    "a contiguous history needs every offset below k"
                )
            qb = cands[0]
        if compare is None or o in compare:
            blocks.append((qb, h))
    root_c = math.sqrt(c)
    for (
        qb,
        kb,
    ) in blocks:  # eqs. (10a)-(10b): Q2 = √c Σ_j s_j^kb (s_j^qb)^T, K2 = √c Σ_j s^kb s^kb^T
        Q2[kb * d : (kb + 1) * d, qb * d : (qb + 1) * d] += root_c * proj
        K2[kb * d : (kb + 1) * d, kb * d : (kb + 1) * d] = root_c * proj
    out = {"A1": A1, "V1": V1, "Q2": Q2, "K2": K2}
    for name, value in out.items():
        if not bool(torch.isfinite(value).all()):
            raise ValueError(
                f"c={c:g} is too large: the construction's {name} overflows "
                f"{str(value.dtype).replace('torch.', '')}"
            )
    return out


def theta_star(
    k: int, *, S: int, T: int, n_heads: int, c: float, d: int | None = None
) -> dict[str, torch.Tensor]:
    """The point θ*^k of Varre et al. 2025, eqs. (8a)–(8c) / (10a)–(10d), with scale ``c``.

    Heads ``h = 1..k-1`` attend to the ``(-h)``-token with logit ``c`` (eq. (8a); at the
    first ``h`` positions they attend to position 0) and copy it (``V_1^(h) = Σ_j s_j s_j^T``,
    eq. (8b)); the remaining heads are off (``A_1 = 0``, ``V_1 = 0``). The second layer
    has ``Q_2^T = √c Σ_j Σ_{h<k} s_j^{h-1} (s_j^h)^T`` and ``K_2 = √c Σ_j Σ_{h<k} s_j^h (s_j^h)^T``,
    so ``Q_2^T K_2`` is eq. (8c) and the score of key ``i`` for query ``t`` is
    ``c Σ_{h<k} 1{x_{i-h} = x_{t+1-h}}``. ``k = 1`` gives ``Q_2 = K_2 = 0``: uniform
    attention over the sequence, the in-context unigram.

    Returns a dict ``{"A1", "V1", "Q2", "K2"}`` for :func:`load_parameters`.

    Raises
    ------
    ValueError
        If ``k < 1``, ``k > n_heads + 1`` (the paper's ``k <= n`` with ``n-1`` heads) or
        ``c <= 0``.
    """
    return _construction(offsets_for_k(k, n_heads), S=S, T=T, c=c, d=d, value_scale=1.0)


def theta_star_all_heads(
    *, S: int, T: int, n_heads: int, c: float, d: int | None = None
) -> dict[str, torch.Tensor]:
    """The all-heads-on bigram point of Varre et al. 2025, App. F, eqs. (30a)–(30d).

    Every head attends to the previous token (eq. (30c), read with the row = query
    orientation of eq. (8a); as printed its indices are transposed, which the causal mask
    would zero out) and copies it with ``V_1^(h) = √c Σ_j s_j s_j^T`` (eq. (30d)); the query
    compares its own token with every head (``Q_2^T = √c Σ_j Σ_h s_j^0 (s_j^h)^T``,
    ``K_2 = √c Σ_j Σ_h s_j^h (s_j^h)^T``). The score of a matching key is
    ``c^{3/2} H`` and ``p_θ`` tends to the bigram estimator.
    """
    n_heads = check_size("n_heads", n_heads, minimum=1, limit=1024)
    c = _check_c(c)
    return _construction(
        (1,) * n_heads, S=S, T=T, c=c, d=d, value_scale=math.sqrt(c), query_blocks=(0,) * n_heads
    )


def theta_star_subset(
    offsets: Sequence[int], *, S: int, T: int, n_heads: int, c: float, d: int | None = None
) -> dict[str, torch.Tensor]:
    """A construction for the non-contiguous ``N``-history estimator (App. F.2).

    The ``N``-estimator matches the tokens at the offsets ``h ∈ N`` of the predicted token:
    key ``i`` counts when ``x_{i-h} = x_{T+1-h}`` for all ``h ∈ N``. The query therefore
    needs ``x_{T+1-h}``, the ``(-(h-1))``-token, which a suffix construction gets for free but
    a non-contiguous one does not. App. F.2 makes the last position "special" (eq. (36c));
    as printed that also changes the last position *as a key*, which then always matches
    itself. We use the other option the appendix mentions, additional heads: head ``g``
    copies the ``(-g)``-token for ``g = 1..max(N)`` (the first layer of
    :func:`theta_star` with ``k = max(N)+1``), and the second layer compares only the
    blocks of ``N``: ``Q_2 = √c Σ_{h∈N} Σ_j s_j^h (s_j^{h-1})^T``,
    ``K_2 = √c Σ_{h∈N} Σ_j s_j^h (s_j^h)^T``. As ``c -> ∞`` the output is
    :func:`construction_limit` with ``offsets = N``.
    """
    n_heads = check_size("n_heads", n_heads, minimum=1, limit=1024)
    offs = sorted({check_int("offsets entry", o, minimum=1, maximum=n_heads) for o in offsets})
    if not offs:
        raise ValueError("offsets must not be empty (the empty history is theta_star(1, ...))")
    heads = tuple(g if g <= max(offs) else None for g in range(1, n_heads + 1))
    return _construction(heads, S=S, T=T, c=c, d=d, value_scale=1.0, compare=set(offs))


def load_parameters(model: SimplifiedTransformer, params: dict[str, torch.Tensor]) -> None:
    """Copy a construction into ``model`` (shapes are checked; gradients stay enabled)."""
    if not isinstance(model, SimplifiedTransformer):
        raise TypeError(f"model must be a SimplifiedTransformer; got {type(model).__name__}")
    check_instance("params", params, Mapping)
    named = dict(model.named_parameters())
    missing = set(named) - set(params)
    if missing:
        raise ValueError(f"params is missing {sorted(missing)}")
    with torch.no_grad():
        for name, p in named.items():
            value = as_tensor(f"params[{name!r}]", params[name], dtype=p.dtype)
            if value.shape != p.shape:
                raise ValueError(
                    f"params[{name!r}] must have shape {tuple(p.shape)}; got {tuple(value.shape)}"
                )
            p.copy_(value)


def construction_limit(tokens: torch.Tensor, S: int, offsets: Sequence[int | None]) -> torch.Tensor:
    """Exact ``c -> ∞`` output of the construction with the given head offsets (Lemma B.1).

    In the limit each active head copies ``x_{max(i-o, 0)}`` (the ``(-o)``-token, clamped to
    the first position as eq. (8a) prescribes for the first ``o`` positions) and the second
    layer attends uniformly to the keys with the **largest** number of matching history
    tokens. When some key matches the whole history this is the k-gram estimator of
    Def. 2.1, except that keys in the first ``k-1`` positions compare a clamped history
    (a boundary effect that vanishes as ``T`` grows); when none does it backs off to the
    best partial matches. Returns ``(B, S)`` for the token after the last position.
    """
    S = check_size("S", S, minimum=2, limit=DEFAULT_LIMITS["vocab"])
    x = check_tokens("tokens", tokens, S, ndim=2)
    B, T = x.shape
    score = torch.zeros(B, T, dtype=torch.long)
    pos = torch.arange(T)
    active = [o for o in offsets if o is not None]
    for o in active:
        o = check_size("offset", o, minimum=1)
        key_tok = x[:, torch.clamp(pos - o, min=0)]  # (B, T): token copied at key i
        q_idx = T - 1 - (o - 1)
        query_tok = x[:, max(q_idx, 0)]  # x_{T+1-o} (0-based T-o)
        score = score + (key_tok == query_tok[:, None]).long()
    best = score.max(dim=-1, keepdim=True).values
    att = (score == best).to(torch.float64)
    att = att / att.sum(-1, keepdim=True)
    onehot = torch.nn.functional.one_hot(x, S).to(torch.float64)
    return (att.unsqueeze(-1) * onehot).sum(-2)
