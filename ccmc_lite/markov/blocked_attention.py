"""Causal attention one block of queries at a time: the fast path of the Part II model.

The attention the book teaches is :func:`ccmc_lite.markov.causal_attention`, the full
masked softmax ``softmax(q kᵀ + mask) v`` of Makkuva et al. (2024, App. A). At the paper's
``N = 1024`` that builds a ``1024 x 1024`` score matrix per sequence, half of it masked.
Here queries ``s..s+b-1`` meet only keys ``0..s+b-1``: the masked upper triangle is never
computed (about half the work at ``N = 1024``) and every ``(b, s+b)`` score block stays
small enough for the CPU caches. The sums are the same; the rounding may differ in the last
bits, so :class:`~ccmc_lite.markov.MarkovTransformer` takes this path for every input
longer than one block, as it did when the stored Part II runs were made (their re-runs are
compared bit for bit), and tests compare the two paths to rounding.
"""

from __future__ import annotations

from typing import Any

import torch

from ..core.training import ATTENTION_QUERIES
from ..core.validation import as_tensor, check_finite_result, check_size

__all__ = ["ATTENTION_BLOCK", "blocked_causal_attention", "check_attention_inputs"]

#: Query-block length of :func:`blocked_causal_attention` (32-64 is fastest on a CPU); the
#: trainer sizes its passes by the same block (``core.training.ATTENTION_QUERIES``).
ATTENTION_BLOCK = ATTENTION_QUERIES


def check_attention_inputs(
    q: Any, k: Any, v: Any
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``q, k, v`` as tensors ``(..., T, m)`` of one dtype with matching shapes."""
    q, k, v = (
        as_tensor(n, t, dtype=None, ndim=(2, 3, 4)) for n, t in (("q", q), ("k", k), ("v", v))
    )
    if (
        not (q.dtype == k.dtype == v.dtype)
        or q.shape[-1] != k.shape[-1]
        or k.shape[:-1] != v.shape[:-1]
    ):
        raise ValueError(
            f"q, k, v must share dtype and shapes (..., T, m); got q {tuple(q.shape)} {q.dtype}, "
            f"k {tuple(k.shape)} {k.dtype}, v {tuple(v.shape)} {v.dtype}"
        )
    return q, k, v


def blocked_causal_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, block: int = ATTENTION_BLOCK
) -> torch.Tensor:
    """:func:`~ccmc_lite.markov.causal_attention`, computed ``block`` queries at a time.

    Inputs ``(..., T, m)`` (``q`` already scaled by ``1/sqrt(m)``); returns ``(..., T, m)``.
    Raises ``ValueError`` when finite inputs overflow (scores of ``inf``), instead of
    returning NaN.
    """
    q, k, v = check_attention_inputs(q, k, v)
    block = check_size("block", block)
    T = q.shape[-2]
    outs = []
    for s in range(0, T, block):
        e = min(s + block, T)
        scores = q[..., s:e, :] @ k[..., :e, :].transpose(-1, -2)  # (..., e - s, e)
        mask = torch.full((e - s, e), float("-inf"), dtype=q.dtype, device=q.device)
        att = torch.softmax(scores + mask.triu(s + 1), dim=-1)
        outs.append(att @ v[..., :e, :])  # (..., e - s, m)
    return check_finite_result(torch.cat(outs, dim=-2), "the attention", "q, k, v")
