"""Exercise checkers: compare a learner's function or value with the reference.

Every exercise in the book ends with a call such as ``check_ccmc_transition(my_fn)``.
The checkers are built from the two helpers here. They never raise on a wrong answer:
they print one line that says *which input* failed, *what was expected* and *what was
returned* (or which exception the learner's code raised), and return a
:class:`~ccmc_lite.core.CheckResult` that is truthy only when every case passed::

    >>> from ccmc_lite.checking import check_function
    >>> result = check_function(lambda x: x + 1, lambda x: x + 1, [(1,), (2,)], name="inc")
    ✅ inc: all 2 cases passed
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

__all__ = ["CheckResult", "check_function", "check_value", "describe", "require_callable"]


@dataclass
class CheckResult:
    """Outcome of a check: ``passed`` and the human-readable ``message`` that was printed.

    ``bool(result)`` is ``result.passed``, so tests can ``assert check_...(fn)``.
    """

    passed: bool
    message: str
    failures: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return self.passed


def require_callable(name: str, fn: Any) -> None:
    """Raise ``TypeError`` naming ``name`` unless ``fn`` is callable (a learner passed a value)."""
    if not callable(fn):
        raise TypeError(
            f"{name} must be a function (define it with def and pass it without calling it); "
            f"got {type(fn).__name__}"
        )


def describe(value: Any, limit: int = 160) -> str:
    """A compact printable form of ``value`` (arrays rounded to 4 decimals)."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        with np.printoptions(precision=4, suppress=True, threshold=20, edgeitems=3):
            text = np.array2string(value, separator=", ")
        text = text.replace("\n", " ")
        text = f"array{tuple(value.shape)} {text}"
    elif isinstance(value, float):
        text = f"{value:.6g}"
    elif isinstance(value, list):
        text = "[" + ", ".join(describe(v, limit) for v in value) + "]"
    elif isinstance(value, tuple):
        text = "(" + ", ".join(describe(v, limit) for v in value) + ")"
    else:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _as_array(value: Any) -> np.ndarray | None:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().double().numpy()
    if isinstance(value, (np.ndarray, list, tuple, float, int, np.floating, np.integer)):
        try:
            return np.asarray(value, dtype=float)
        except (TypeError, ValueError):
            return None
    return None


def _compare(got: Any, expected: Any, atol: float, rtol: float) -> str | None:
    """``None`` when equal within tolerance, else a reason."""
    exp = _as_array(expected)
    if exp is None:
        return None if got == expected else "values differ"
    arr = _as_array(got)
    if arr is None:
        return f"expected a number/array, got {type(got).__name__}"
    if arr.shape != exp.shape:
        return f"shape {arr.shape} instead of {exp.shape}"
    if not np.all(np.isfinite(arr)):
        return "contains NaN or inf"
    if not np.allclose(arr, exp, atol=atol, rtol=rtol):
        worst = float(np.max(np.abs(arr - exp)))
        return f"largest difference {worst:.3g} exceeds the tolerance (atol={atol:g})"
    return None


def _report(name: str, failures: list[str], n_cases: int, quiet: bool) -> CheckResult:
    if failures:
        message = f"❌ {name}: {len(failures)} of {n_cases} cases failed.\n  " + failures[0]
        if len(failures) > 1:
            message += f"\n  (+{len(failures) - 1} more failing case(s))"
    else:
        message = f"✅ {name}: all {n_cases} cases passed"
    if not quiet:
        print(message)
    return CheckResult(not failures, message, failures)


def check_function(
    learner: Callable[..., Any],
    reference: Callable[..., Any],
    cases: Iterable[Sequence[Any]],
    *,
    name: str,
    atol: float = 1e-6,
    rtol: float = 1e-5,
    quiet: bool = False,
) -> CheckResult:
    """Call ``learner(*case)`` and ``reference(*case)`` on every case and compare.

    Parameters
    ----------
    learner : callable
        The learner's function.
    reference : callable
        The reference implementation (from :mod:`ccmc_lite`).
    cases : list
        Positional arguments for each call; include random and edge cases.
    name : str
        What is being checked, used in the message.
    atol, rtol : float
        Tolerances for numerical comparison.
    quiet : bool
        Do not print the message (it is still in the result).
    """
    if not callable(learner):
        raise TypeError(f"learner must be a function; got {type(learner).__name__}")
    cases = [tuple(c) for c in cases]
    failures = []
    for case in cases:
        expected = reference(*case)
        shown = ", ".join(describe(arg) for arg in case)
        try:
            with np.errstate(all="ignore"):
                got = learner(*case)
        except NotImplementedError:
            failures.append(f"not implemented yet: write your solution in the cell above ({shown})")
            break
        except Exception as err:  # the learner's bug, reported instead of raised
            failures.append(f"input {shown} raised {type(err).__name__}: {err}")
            continue
        reason = _compare(got, expected, atol, rtol)
        if reason:
            failures.append(
                f"input {shown}: {reason}; expected {describe(expected)}, returned {describe(got)}"
            )
    return _report(name, failures, len(cases), quiet)


def check_value(
    learner_value: Any,
    expected: Any,
    *,
    name: str,
    atol: float = 1e-6,
    rtol: float = 1e-5,
    quiet: bool = False,
) -> CheckResult:
    """Compare one value the learner computed (a number, an array, a matrix) with the reference."""
    reason = _compare(learner_value, expected, atol, rtol)
    failures = (
        [f"{reason}; expected {describe(expected)}, got {describe(learner_value)}"]
        if reason
        else []
    )
    return _report(name, failures, 1, quiet)
