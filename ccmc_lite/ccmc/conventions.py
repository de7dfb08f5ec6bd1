"""Conversions between the papers' notations and the book's one convention.

The book stores a transition matrix **row-wise**: ``P[i, j] = P(x_{t+1} = j | x_t = i)``,
every row sums to one, tokens are ``0, ..., K-1``. Ildiz et al. (2024, Sec. 2.1) store the
distributions as **columns** (``P = [π_1 ... π_K]``) and number tokens from 1; Makkuva
et al. (2024, Sec. 2.2) and Varre et al. (2025, Sec. 2.1) already use rows.
"""

from __future__ import annotations

from typing import Any

import torch

from ..core.validation import as_tensor, check_stochastic_matrix

__all__ = [
    "from_column_stochastic",
    "from_one_based",
    "to_column_stochastic",
]


def from_column_stochastic(P_columns: Any, *, atol: float = 1e-6) -> torch.Tensor:
    """Ildiz et al.'s column-stochastic ``P`` → the book's row-stochastic matrix (``Pᵀ``).

    Raises ``ValueError`` if the columns of ``P_columns`` are not probability vectors.
    """
    P = as_tensor("P_columns", P_columns, ndim=2)
    try:
        return check_stochastic_matrix("P_columns transposed", P.T, atol=atol).contiguous()
    except ValueError as err:
        raise ValueError(
            f"P_columns must be column-stochastic (each column sums to 1): {err}"
        ) from None


def to_column_stochastic(P: Any, *, atol: float = 1e-6) -> torch.Tensor:
    """The book's row-stochastic ``P`` → Ildiz et al.'s column-stochastic layout (``Pᵀ``).

    A batch ``(..., K, K)`` is transposed matrix by matrix.
    """
    return check_stochastic_matrix("P", P, atol=atol).transpose(-1, -2).contiguous()


def from_one_based(tokens: Any) -> torch.Tensor:
    """Tokens numbered ``1..K`` (Ildiz et al.) → the book's ``0..K-1``."""
    t = as_tensor("tokens", tokens, dtype=torch.long)
    if t.numel() and int(t.min()) < 1:
        raise ValueError(f"tokens must be numbered from 1; found {int(t.min())}")
    return t - 1
