"""Argument checks shared by every public function of :mod:`ccmc_lite`.

Every check raises :class:`TypeError` (wrong kind of object) or :class:`ValueError`
(right kind, wrong value) with a message that names the argument, shows what it got and
says what was expected, e.g.::

    ValueError: P must be row-stochastic (rows sum to 1); row 2 sums to 0.7

The checks return the validated value, converted where that is useful (a tensor of the
requested dtype, a Python ``int``), so callers can write ``K = check_int("K", K, minimum=2)``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch

__all__ = [
    "as_tensor",
    "check_choice",
    "check_float",
    "check_int",
    "check_prob_vector",
    "check_probability",
    "check_seed",
    "check_stochastic_matrix",
    "check_tokens",
]

_ArrayLike = Any  # numpy array, torch tensor or nested sequence of numbers


def _show(value: Any, limit: int = 80) -> str:
    """A short printable form of ``value`` for error messages."""
    if isinstance(value, torch.Tensor):
        text = f"tensor of shape {tuple(value.shape)} and dtype {value.dtype}"
    elif isinstance(value, np.ndarray):
        text = f"array of shape {value.shape} and dtype {value.dtype}"
    else:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_int(
    name: str,
    value: Any,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
) -> int:
    """Check that ``value`` is an integer in ``[minimum, maximum]`` and return it as ``int``.

    Booleans are rejected (``True`` is not a sequence length). NumPy and 0-d torch
    integers are accepted.
    """
    if isinstance(value, torch.Tensor) and value.ndim == 0 and not value.is_floating_point():
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer; got {_show(value)}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}; got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}; got {value}")
    return value


def check_float(
    name: str,
    value: Any,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    open_lower: bool = False,
    open_upper: bool = False,
) -> float:
    """Check that ``value`` is a finite real number in the given interval; return a ``float``.

    ``open_lower``/``open_upper`` exclude the end points, so
    ``check_float("p", p, minimum=0, maximum=1, open_lower=True, open_upper=True)``
    demands ``0 < p < 1``.
    """
    if isinstance(value, torch.Tensor) and value.ndim == 0:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number; got {_show(value)}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite; got {value}")
    lo_bracket = "(" if open_lower else "["
    hi_bracket = ")" if open_upper else "]"
    interval = (
        f"{lo_bracket}{'-inf' if minimum is None else minimum}, "
        f"{'inf' if maximum is None else maximum}{hi_bracket}"
    )
    if minimum is not None and (value < minimum or (open_lower and value == minimum)):
        raise ValueError(f"{name} must lie in {interval}; got {value}")
    if maximum is not None and (value > maximum or (open_upper and value == maximum)):
        raise ValueError(f"{name} must lie in {interval}; got {value}")
    return value


def check_probability(name: str, value: Any, *, open_interval: bool = True) -> float:
    """Check ``0 < value < 1`` (or ``0 <= value <= 1`` with ``open_interval=False``)."""
    return check_float(
        name, value, minimum=0.0, maximum=1.0, open_lower=open_interval, open_upper=open_interval
    )


def check_choice(name: str, value: Any, choices: Iterable[str]) -> str:
    """Check that ``value`` is one of the strings in ``choices``."""
    choices = tuple(choices)
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, one of {choices}; got {_show(value)}")
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}; got {value!r}")
    return value


def check_seed(seed: Any, name: str = "seed") -> int:
    """Check a random seed: a non-negative integer below 2**63."""
    return check_int(name, seed, minimum=0, maximum=2**63 - 1)


def as_tensor(
    name: str,
    value: _ArrayLike,
    *,
    dtype: torch.dtype | None = torch.float64,
    ndim: int | Sequence[int] | None = None,
    finite: bool = True,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Convert an array-like to a tensor, checking its number of dimensions and finiteness.

    ``dtype=None`` keeps the input's dtype. Integer inputs asked to become floats are
    converted; floats asked to become integers are rejected (no silent truncation).
    """
    if isinstance(value, (str, bytes)) or value is None:
        raise TypeError(f"{name} must be an array or tensor of numbers; got {_show(value)}")
    try:
        tensor = torch.as_tensor(value, device=device)
    except (TypeError, ValueError, RuntimeError) as err:
        raise TypeError(
            f"{name} must be an array or tensor of numbers; got {_show(value)} ({err})"
        ) from None
    if tensor.dtype == torch.bool:
        raise TypeError(f"{name} must hold numbers, not booleans; got {_show(tensor)}")
    if dtype is not None:
        if tensor.is_floating_point() and not dtype.is_floating_point and tensor.numel():
            raise TypeError(f"{name} must hold integers; got {_show(tensor)}")
        if tensor.is_complex():
            raise TypeError(f"{name} must be real; got {_show(tensor)}")
        tensor = tensor.to(dtype)
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if tensor.ndim not in allowed:
            want = " or ".join(str(a) for a in allowed)
            raise ValueError(
                f"{name} must have {want} dimension(s); got shape {tuple(tensor.shape)}"
            )
    if finite and tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
        raise ValueError(f"{name} must contain only finite numbers (no NaN or inf)")
    return tensor


def check_prob_vector(
    name: str,
    value: _ArrayLike,
    *,
    atol: float = 1e-6,
    positive: bool = False,
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """Check a probability vector (non-negative, sums to one) along its last axis.

    Batched input of shape ``(..., K)`` is accepted; every slice is checked.
    ``positive=True`` additionally demands every entry be strictly positive.
    """
    v = as_tensor(name, value, dtype=dtype)
    if v.ndim == 0:
        raise ValueError(f"{name} must be a vector of probabilities; got a scalar")
    if v.shape[-1] == 0:
        raise ValueError(f"{name} must not be empty; got shape {tuple(v.shape)}")
    if bool((v < 0).any()):
        raise ValueError(f"{name} must have non-negative entries; smallest is {v.min().item():g}")
    if positive and bool((v == 0).any()):
        raise ValueError(f"{name} must have strictly positive entries; found a zero")
    sums = v.sum(-1)
    bad = (sums - 1).abs() > atol
    if bool(bad.any()):
        worst = sums[bad].flatten()[0].item()
        raise ValueError(f"{name} must sum to 1 along its last axis; found a sum of {worst:.6g}")
    return v


def check_stochastic_matrix(
    name: str,
    value: _ArrayLike,
    *,
    atol: float = 1e-6,
    positive: bool = False,
    square: bool = True,
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """Check a row-stochastic matrix (the book's convention: ``P[i, j] = P(next=j | now=i)``).

    Batched input ``(..., K, K)`` is accepted. ``positive=True`` demands strictly positive
    entries (needed where a paper takes logarithms of ``P``).
    """
    P = as_tensor(name, value, dtype=dtype)
    if P.ndim < 2:
        raise ValueError(f"{name} must be a matrix (2-D); got shape {tuple(P.shape)}")
    if square and P.shape[-1] != P.shape[-2]:
        raise ValueError(f"{name} must be square; got shape {tuple(P.shape)}")
    if P.shape[-1] == 0:
        raise ValueError(f"{name} must not be empty; got shape {tuple(P.shape)}")
    if bool((P < 0).any()):
        raise ValueError(f"{name} must have non-negative entries; smallest is {P.min().item():g}")
    if positive and bool((P == 0).any()):
        idx = tuple(int(i) for i in (P == 0).nonzero()[0].tolist())
        raise ValueError(f"{name} must have strictly positive entries; entry {idx} is 0")
    sums = P.sum(-1)
    bad = (sums - 1).abs() > atol
    if bool(bad.any()):
        idx = tuple(int(i) for i in bad.nonzero()[0].tolist())
        raise ValueError(
            f"{name} must be row-stochastic (every row sums to 1); row {idx} sums to "
            f"{sums[idx].item():.6g}"
        )
    return P


def check_tokens(
    name: str,
    value: _ArrayLike,
    K: int,
    *,
    ndim: int | Sequence[int] | None = None,
    allow_empty: bool = False,
) -> torch.Tensor:
    """Check integer tokens in ``[0, K)``; return them as a ``torch.long`` tensor."""
    tokens = as_tensor(name, value, dtype=torch.long, ndim=ndim)
    if not allow_empty and tokens.numel() == 0:
        raise ValueError(f"{name} must not be empty; got shape {tuple(tokens.shape)}")
    if tokens.numel() and (bool((tokens < 0).any()) or bool((tokens >= K).any())):
        bad = tokens[(tokens < 0) | (tokens >= K)].flatten()[0].item()
        raise ValueError(f"{name} must hold tokens in [0, {K}) (K={K}); found {bad}")
    return tokens
