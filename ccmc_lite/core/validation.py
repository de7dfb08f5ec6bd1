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
    "DEFAULT_LIMITS",
    "DivergenceError",
    "as_tensor",
    "check_bool",
    "check_callable",
    "check_choice",
    "check_elements",
    "check_finite_result",
    "check_float",
    "check_instance",
    "check_int",
    "check_model_tokens",
    "check_numbers",
    "check_power",
    "check_prob_vector",
    "check_probability",
    "check_seed",
    "check_size",
    "check_stochastic_matrix",
    "check_tokens",
    "is_traced",
]

_ArrayLike = Any  # numpy array, torch tensor or nested sequence of numbers

#: Documented ceilings on what one call may ask for. ``size``: any single length, count or
#: number of steps; ``elements``: the entries of the largest array a call allocates (or the
#: number of sequences it enumerates); ``vocab``: the number of states / tokens ``K`` or
#: ``S``. A request above a ceiling raises ``ValueError`` *before* anything is allocated.
#: To go beyond one on purpose, raise it for the session (the checks read this dict at call
#: time), e.g. ``DEFAULT_LIMITS["size"] = 10**9``, or pass ``allow_large=True`` to
#: :func:`check_size` / :func:`check_elements` in code of your own.
DEFAULT_LIMITS: dict[str, int] = {
    "size": 10**8,
    "elements": 10**9,
    "vocab": 4096,
}


class DivergenceError(FloatingPointError, ValueError):
    """Training or fitting produced a non-finite loss or parameters, or a loss far above its start.

    A :class:`FloatingPointError` (what the trainer raised before) and a :class:`ValueError`
    (the run's settings are what is wrong). The message names the step, the run and the setting.
    """


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


def is_traced(value: Any) -> bool:
    """True for a tensor inside ``torch.func`` transforms (``vmap``, ``grad``).

    Checks that look at the *values* (``bool((x < 0).any())``) cannot run there; the
    shared checks skip them for such tensors, keeping only the type and shape checks. The
    same call made eagerly (outside the trainer) gets every check.
    """
    return isinstance(value, torch.Tensor) and bool(
        torch._C._functorch.is_functorch_wrapped_tensor(value)
    )


def check_bool(name: str, value: Any) -> bool:
    """Check a flag: ``True``/``False`` (or NumPy's), never an integer or a string."""
    if isinstance(value, np.bool_):
        value = bool(value)
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False; got {_show(value)}")
    return value


def check_size(
    name: str,
    value: Any,
    *,
    minimum: int = 1,
    limit: int | None = None,
    allow_large: bool = False,
) -> int:
    """Check a length, count or number of steps: an integer in ``[minimum, limit]``.

    ``limit`` defaults to ``DEFAULT_LIMITS["size"]``; ``allow_large=True`` lifts it (for
    people who mean it). Booleans are rejected like in :func:`check_int`.
    """
    value = check_int(name, value, minimum=minimum)
    hint = _limit_hint("size", limit)
    limit = DEFAULT_LIMITS["size"] if limit is None else check_int("limit", limit, minimum=0)
    if not allow_large and value > limit:
        raise ValueError(f"{name}={value} exceeds the limit {limit}{hint}")
    return value


def _limit_hint(key: str, limit: int | None) -> str:
    if limit is None:
        return f"; raise ccmc_lite.core.DEFAULT_LIMITS[{key!r}] if you mean it"
    return " of this function (see its docstring)"


def check_elements(
    name: str, count: int, *, limit: int | None = None, allow_large: bool = False
) -> int:
    """Check that an allocation of ``count`` entries (a Python int, no overflow) is allowed.

    ``name`` describes the product, e.g. ``"n * T"``. ``limit`` defaults to
    ``DEFAULT_LIMITS["elements"]``.
    """
    hint = _limit_hint("elements", limit)
    limit = DEFAULT_LIMITS["elements"] if limit is None else limit
    if not allow_large and count > limit:
        raise ValueError(f"{name} = {count} entries exceeds the limit {limit}{hint}")
    return count


def check_power(name: str, base: int, exponent: int, *, limit: int | None = None) -> int:
    """Return ``base ** exponent`` after checking it is at most ``limit`` (without computing
    a huge power first: ``enumerate_chains(P, 10**12)`` must fail at once)."""
    source = "DEFAULT_LIMITS" if limit is None else "limit"
    limit = DEFAULT_LIMITS["elements"] if limit is None else limit
    if base > 1 and exponent * math.log(base) > math.log(limit) + 1e-9:
        raise ValueError(f"{name} = {base}**{exponent} exceeds the {source} {limit}")
    count = base**exponent
    if count > limit:
        raise ValueError(f"{name} = {base}**{exponent} = {count} exceeds the limit {limit}")
    return count


def check_instance(name: str, value: Any, cls: type | tuple[type, ...]) -> Any:
    """Check ``isinstance(value, cls)`` with a message naming the argument."""
    if not isinstance(value, cls):
        want = cls.__name__ if isinstance(cls, type) else " or ".join(c.__name__ for c in cls)
        raise TypeError(f"{name} must be a {want}; got {type(value).__name__}")
    return value


def check_callable(name: str, value: Any) -> Any:
    """Check that ``value`` can be called."""
    if not callable(value):
        raise TypeError(f"{name} must be callable; got {type(value).__name__}")
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


def check_numbers(
    name: str,
    value: Any,
    length: int | None = None,
    *,
    minimum: float = 0.0,
    open_lower: bool = True,
) -> tuple[float, ...]:
    """Check a sequence (or a 1-D array or tensor) of finite numbers above ``minimum``.

    ``length`` demands that many (e.g. one learning-rate factor per run); ``None`` demands
    at least one. ``minimum``/``open_lower`` bound every entry as in :func:`check_float`
    (default: positive). Returns the numbers as a tuple of floats.
    """
    if length is not None:
        length = check_int("length", length, minimum=0)
    if isinstance(value, (np.ndarray, torch.Tensor)):
        if value.ndim != 1:
            want = f"have shape ({length},)" if length is not None else "be one-dimensional"
            raise ValueError(f"{name} must {want}; got shape {tuple(value.shape)}")
        value = value.tolist()
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        count = f"{length} " if length is not None else ""
        raise TypeError(f"{name} must be a sequence of {count}numbers; got {_show(value)}")
    if length is not None and len(value) != length:
        raise ValueError(f"{name} must hold {length} numbers; got {len(value)}")
    if length is None and not value:
        raise ValueError(f"{name} must hold at least one value; got an empty sequence")
    return tuple(
        check_float(f"{name}[{i}]", v, minimum=minimum, open_lower=open_lower)
        for i, v in enumerate(value)
    )


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
    if dtype is not None and not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype must be a torch.dtype (e.g. torch.float64); got {_show(dtype)}")
    try:
        tensor = torch.as_tensor(value, device=device)
    except (TypeError, ValueError, RuntimeError) as err:
        raise TypeError(
            f"{name} must be an array or tensor of numbers; got {_show(value)} ({err})"
        ) from None
    if tensor.dtype == torch.bool:
        raise TypeError(f"{name} must hold numbers, not booleans; got {_show(tensor)}")
    if (
        tensor.dtype == torch.float32
        and dtype is not None
        and dtype.is_floating_point
        and not isinstance(value, (torch.Tensor, np.ndarray))
    ):
        # Python floats are float64: keep them so before converting to the requested
        # precision (torch's default would round them to float32 first)
        tensor = torch.as_tensor(value, dtype=torch.float64, device=device)
    if dtype is not None:
        if tensor.is_floating_point() and not dtype.is_floating_point and tensor.numel():
            raise TypeError(f"{name} must hold integers; got {_show(tensor)}")
        if tensor.is_complex():
            raise TypeError(f"{name} must be real; got {_show(tensor)}")
        converted = tensor.to(dtype)
        if (
            finite
            and dtype.is_floating_point
            and tensor.is_floating_point()
            and not is_traced(tensor)
            and bool(torch.isfinite(tensor).all())
            and not bool(torch.isfinite(converted).all())
        ):
            big = tensor.abs().max().item()
            raise ValueError(
                f"{name} has an entry too large for {str(dtype).replace('torch.', '')} "
                f"(|entry| up to {big:.3g}; the largest is {torch.finfo(dtype).max:.3g})"
            )
        tensor = converted
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if tensor.ndim not in allowed:
            want = " or ".join(str(a) for a in allowed)
            raise ValueError(
                f"{name} must have {want} dimension(s); got shape {tuple(tensor.shape)}"
            )
    if (
        finite
        and tensor.is_floating_point()
        and not is_traced(tensor)
        and not bool(torch.isfinite(tensor).all())
    ):
        raise ValueError(f"{name} must contain only finite numbers (no NaN or inf)")
    return tensor


def check_finite_result(value: torch.Tensor, what: str, inputs: str) -> torch.Tensor:
    """Raise when a computed ``value`` is not finite although its inputs were.

    Finite inputs can still overflow (``exp(1e200)``, ``1e200 * 1e200``); the caller names
    the quantity (``what``) and the arguments it came from (``inputs``), so the error speaks
    of the user's arguments and not of an intermediate.
    """
    check_instance("value", value, torch.Tensor)
    if value.is_floating_point() and not is_traced(value):
        if not bool(torch.isfinite(value).all()):
            raise ValueError(
                f"{what} overflowed (not finite) for these {inputs}: their entries are too "
                "large in magnitude; scale them down"
            )
    return value


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
    atol = check_float("atol", atol, minimum=0.0, open_lower=True)
    v = as_tensor(name, value, dtype=dtype)
    if v.ndim == 0:
        raise ValueError(f"{name} must be a vector of probabilities; got a scalar")
    if v.shape[-1] == 0:
        raise ValueError(f"{name} must not be empty; got shape {tuple(v.shape)}")
    if is_traced(v):
        return v
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
    atol = check_float("atol", atol, minimum=0.0, open_lower=True)
    P = as_tensor(name, value, dtype=dtype)
    if P.ndim < 2:
        raise ValueError(f"{name} must be a matrix (2-D); got shape {tuple(P.shape)}")
    if square and P.shape[-1] != P.shape[-2]:
        raise ValueError(f"{name} must be square; got shape {tuple(P.shape)}")
    if P.shape[-1] == 0:
        raise ValueError(f"{name} must not be empty; got shape {tuple(P.shape)}")
    if is_traced(P):
        return P
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
    K = check_int("K", K, minimum=1)
    tokens = as_tensor(name, value, dtype=torch.long, ndim=ndim)
    if not allow_empty and tokens.numel() == 0:
        raise ValueError(f"{name} must not be empty; got shape {tuple(tokens.shape)}")
    if is_traced(tokens):
        return tokens
    if tokens.numel() and (bool((tokens < 0).any()) or bool((tokens >= K).any())):
        bad = tokens[(tokens < 0) | (tokens >= K)].flatten()[0].item()
        raise ValueError(f"{name} must hold tokens in [0, {K}) (K={K}); found {bad}")
    return tokens


def check_model_tokens(
    name: str,
    value: _ArrayLike,
    model: Any,
    *,
    ndim: int | Sequence[int] | None = 2,
    extra: int = 0,
) -> torch.Tensor:
    """Check tokens fed to a book model: integers in ``[0, vocab)``, at most ``T`` positions.

    ``vocab`` is the model's ``S`` (Part III) or ``K`` (Part II) attribute, the length limit
    its ``T`` or ``N`` plus ``extra`` (``extra=1`` for sequences that include the target
    token). Returns a ``torch.long`` tensor.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module; got {type(model).__name__}")
    vocab = next(
        (v for v in (getattr(model, "S", None), getattr(model, "K", None)) if isinstance(v, int)),
        None,
    )
    attr, length = next(
        ((a, getattr(model, a)) for a in ("T", "N") if isinstance(getattr(model, a, None), int)),
        ("", None),
    )
    if vocab is None:
        tokens = as_tensor(name, value, dtype=torch.long, ndim=ndim)
    else:
        tokens = check_tokens(name, value, vocab, ndim=ndim)
    if length is not None and tokens.ndim and tokens.shape[-1] > length + extra:
        raise ValueError(
            f"{name} has {tokens.shape[-1]} positions but the model takes at most "
            f"{length + extra} ({attr}={length}); got shape {tuple(tokens.shape)}"
        )
    return tokens
