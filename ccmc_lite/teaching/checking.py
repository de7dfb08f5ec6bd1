"""The exercise-checker engine: every ``check_*`` function of the book is one row of a table.

An exercise is an :class:`Exercise`: what the learner's answer is compared with (a reference
function and the cases it is called on, or the expected value), the tolerances and a time
limit. The decorators :func:`~ccmc_lite.teaching.function_checker` and
:func:`~ccmc_lite.teaching.value_checker` turn a docstring-only stub into the checker a chapter
calls, so each checker in the ``exercises`` modules is a few declarative lines. Every
checker has the same signature::

    check_x(my_x, *, seed=0, quiet=False) -> CheckResult

(value checkers may add keyword-only *settings*, such as the grid an answer was computed on).
A checker never raises on a wrong answer: it prints one ✅/❌ line naming the failing input,
the expected and the returned value, and returns a :class:`CheckResult` that is truthy only
when every case passed. It is safe to hand it any code:

* the learner's function gets a deep copy of every input (changing an input in place is
  reported, and cannot corrupt the reference or a later case);
* a case's reference answer is computed only after the learner's call has returned, so no
  frame the learner's code can inspect holds it;
* every exception the learner's code raises is reported (``SystemExit`` included;
  ``KeyboardInterrupt`` still interrupts), also while its result is read and compared;
* the whole exercise stops after its ``time_limit`` (:data:`~ccmc_lite.teaching.TIME_LIMIT_S`
  seconds by default): in the main thread the alarm is re-armed and every further line of
  the learner's code raises, so an ``except:`` clause in a loop cannot swallow the stop;
  reading and comparing the result has a limit of its own (``COMPARE_LIMIT_S``, 5 s);
* what the learner's code changes in the process (default dtype, random generators,
  threads, grad mode) is restored after each case.

>>> def ref_double(x):
...     return 2 * x
>>> @function_checker(ref_double, [(1.0,), (-2.5,)], name="double")
... def check_double(my_double, *, seed=0, quiet=False):
...     '''Check ``my_double(x) = 2 x``.'''
>>> result = check_double(lambda x: x + x)
✅ double: all 2 cases passed
>>> bool(check_double(lambda x: x * x, quiet=True))
False
"""

from __future__ import annotations

import contextlib
import copy
import ctypes
import functools
import inspect
import random
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..core.validation import check_float, check_seed

__all__ = [
    "TIME_LIMIT_S",
    "Case",
    "CheckResult",
    "CheckTimeout",
    "Exercise",
    "describe",
    "function_checker",
    "value_checker",
]

#: Seconds the learner's code may run in one exercise (all its cases together).
TIME_LIMIT_S = 60.0

_NOT_IMPLEMENTED = "not implemented yet: write your solution in the cell above"
_FUNCTION_HINT = "define it with def and pass it without calling it"


# ----------------------------------------------------------------------------- results


def _cell() -> int | None:
    """The running IPython cell's execution count (``None`` outside IPython)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return None if shell is None else getattr(shell, "execution_count", None)


@dataclass
class CheckResult:
    """Outcome of a check: ``passed``, the ``message`` and one line per failing case.

    ``bool(result)`` is ``result.passed``, so tests can ``assert check_x(fn)``. In a notebook
    the message appears once: a checker prints it, and displaying the result in the same
    cell (a checker call as the cell's last line) adds nothing; displaying it in a later
    cell, or after ``quiet=True``, prints the message.
    """

    passed: bool
    message: str
    failures: list[str] = field(default_factory=list)
    _printed_in: Any = field(default=None, init=False, repr=False, compare=False)

    def __bool__(self) -> bool:
        return self.passed

    def show(self) -> None:
        """Print the message (and remember the cell it was printed in)."""
        print(self.message)
        self._printed_in = _cell()

    def _ipython_display_(self) -> None:
        if self._printed_in is None or self._printed_in != _cell():
            self.show()


def _report(
    name: str, failures: list[str], n_cases: int, quiet: bool, *, n_failed: int | None = None
) -> CheckResult:
    """The result and its message: all passed, or how many failed and the first failure."""
    n_failed = len(failures) if n_failed is None else n_failed
    plural = "" if n_cases == 1 else "s"
    if failures and failures[0].startswith("not implemented yet"):
        message = f"❌ {name}: {failures[0]}"
    elif failures:
        message = f"❌ {name}: {n_failed} of {n_cases} case{plural} failed.\n  {failures[0]}"
        if len(failures) > 1:
            message += f"\n  (+{len(failures) - 1} more failing case(s))"
    else:
        message = f"✅ {name}: all {n_cases} case{plural} passed"
    result = CheckResult(not failures, message, failures)
    if not quiet:
        result.show()
    return result


# ----------------------------------------------------------------------------- showing


def describe(value: Any, limit: int = 160) -> str:
    """A compact printable form of ``value`` (arrays rounded to 4 decimals)."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        with np.printoptions(precision=4, suppress=True, threshold=20, edgeitems=3):
            text = np.array2string(value, separator=", ")
        text = text.replace("\n", " ")
        text = f"array{tuple(value.shape)} {text}"
    elif isinstance(value, np.generic):  # a numpy scalar: shown as the Python value
        return describe(value.item(), limit)
    elif isinstance(value, float):
        text = f"{value:.6g}"
    elif isinstance(value, list):
        text = "[" + ", ".join(describe(v, limit) for v in value) + "]"
    elif isinstance(value, tuple):
        text = "(" + ", ".join(describe(v, limit) for v in value) + ")"
    elif isinstance(value, torch.nn.Module):
        text = f"{type(value).__name__}(...)"
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
        try:
            return None if bool(got == expected) else "values differ"
        except Exception as err:  # e.g. a tensor compared with a string
            return f"cannot be compared with the expected value ({type(err).__name__})"
    arr = _as_array(got)
    if arr is None:
        return f"expected a number/array, got {type(got).__name__}"
    if arr.shape != exp.shape:
        return f"shape {arr.shape} instead of {exp.shape}"
    if not np.all(np.isfinite(arr)):
        return "contains NaN or inf"
    if not np.allclose(arr, exp, atol=atol, rtol=rtol):
        diff = np.abs(arr - exp)
        at = np.unravel_index(int(np.argmax(diff)), diff.shape)  # the worst entry
        where = f" at index {tuple(int(i) for i in at)}" if arr.ndim else ""
        return (
            f"largest difference {float(diff[at]):.3g}{where} (expected {float(exp[at]):.10g}, "
            f"returned {float(arr[at]):.10g}) exceeds the tolerance (atol={atol:g})"
        )
    return None


def _unchanged(after: Any, before: Any) -> bool:
    """Whether ``after`` (the learner's copy of an input, after the call) equals ``before``."""
    if isinstance(before, torch.Tensor):
        if not isinstance(after, torch.Tensor) or (after.shape, after.dtype) != (
            before.shape,
            before.dtype,
        ):
            return False
        nan = before.isnan() & after.isnan() if before.is_floating_point() else False
        return torch.equal(after, before) or bool(((after == before) | nan).all())
    if isinstance(before, np.ndarray):
        if not isinstance(after, np.ndarray) or after.shape != before.shape:
            return False
        try:
            return bool(np.array_equal(after, before, equal_nan=True))
        except TypeError:  # a dtype without NaN
            return bool(np.array_equal(after, before))
    if isinstance(before, torch.nn.Module):
        return isinstance(after, torch.nn.Module) and _unchanged(
            after.state_dict(), before.state_dict()
        )
    if isinstance(before, (list, tuple)):
        return (
            type(after) is type(before)
            and len(after) == len(before)
            and all(_unchanged(a, b) for a, b in zip(after, before, strict=True))
        )
    if isinstance(before, dict):
        return (
            isinstance(after, dict)
            and after.keys() == before.keys()
            and all(_unchanged(after[k], before[k]) for k in before)
        )
    if isinstance(before, float) and before != before:  # NaN
        return isinstance(after, float) and after != after
    # == means something: use it (typeshed types the two __eq__ differently, hence the ignore)
    if type(before).__eq__ is not object.__eq__:  # type: ignore[comparison-overlap]
        with contextlib.suppress(Exception):
            return bool(after == before)
    # a copy is never `is` the original: compare the attributes, if any
    return not hasattr(before, "__dict__") or _unchanged(vars(after), vars(before))


def _parameter_names(fn: Callable[..., Any], n: int) -> list[str]:
    """Names of the first ``n`` positional parameters of ``fn`` (``argument k`` if unknown)."""
    names = [f"argument {k + 1}" for k in range(n)]
    with contextlib.suppress(TypeError, ValueError):
        params = [
            p.name
            for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        names[: len(params)] = params[:n]
    return names


# ----------------------------------------------------------------------------- time limit


class CheckTimeout(BaseException):
    """Raised inside the learner's code when an exercise runs past its time limit.

    A ``BaseException``, so that ``except Exception`` in the learner's code does not swallow
    it.
    """


def _alarm_available() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


def _post_stop(ident: int, stop: bool = True) -> None:
    """Ask thread ``ident`` to raise :class:`CheckTimeout` at its next check (or cancel it)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(ident), ctypes.py_object(CheckTimeout) if stop else None
    )


def _stop_at_next_line(frame: Any, event: str, arg: Any) -> Any:
    """A trace function that raises :class:`CheckTimeout` at the next line or call.

    Not at an ``exception`` or ``return`` event: the stop is on its way there already, and
    a learner's ``except:`` clause that swallows it starts with a line, where it is raised
    again.
    (CPython switches tracing off when a trace function raises; the alarm switches it
    back on every few milliseconds until the learner's code has returned.)
    """
    if event in ("line", "call"):
        raise CheckTimeout
    return _stop_at_next_line  # "exception", "return": the stop is on its way already


def _trace_frames(frame: Any, boundary: Any, tracer: Callable[..., Any]) -> None:
    """Trace the lines of ``frame`` and its callers, up to (not including) ``boundary``."""
    while frame is not None and frame is not boundary:
        frame.f_trace = tracer
        frame.f_trace_lines = True
        frame = frame.f_back


def _call_in_main_thread(fn: Callable[[], Any], deadline: float) -> Any:
    """``fn()`` under a ``SIGALRM`` timer; at ``deadline`` the learner's code is stopped.

    The alarm raises :class:`CheckTimeout` (which interrupts a blocking call such as
    ``time.sleep``), fires again every 20 ms, and traces the learner's frames with
    :func:`_stop_at_next_line`. An interval timer that was already running (e.g. a test runner's) is
    honoured: the alarm is set to whichever is due first, and the outer timer is re-armed
    afterwards.
    """
    boundary = sys._getframe()
    previous_trace = sys.gettrace()
    start = time.monotonic()
    outer_delay, outer_interval = signal.getitimer(signal.ITIMER_REAL)
    outer_fired = False
    stopped = False

    def on_alarm(signum: int, frame: Any) -> None:
        nonlocal outer_fired, stopped
        if stopped or time.monotonic() >= deadline - 1e-3:
            stopped = True
            signal.setitimer(signal.ITIMER_REAL, 0.02)  # again, until fn has returned
            _trace_frames(frame, boundary, _stop_at_next_line)
            sys.settrace(_stop_at_next_line)  # last: the engine's calls above untraced
            raise CheckTimeout
        signal.setitimer(signal.ITIMER_REAL, max(deadline - time.monotonic(), 1e-3))
        outer_fired = True  # the outer timer was due first: pass it on
        if callable(previous):
            previous(signum, frame)

    previous = signal.signal(signal.SIGALRM, on_alarm)
    delay = min(deadline - start, outer_delay) if outer_delay > 0 else deadline - start
    signal.setitimer(signal.ITIMER_REAL, max(delay, 1e-3))
    value: Any = None
    try:
        value = fn()
    except BaseException:
        if not stopped:
            raise
    finally:
        sys.settrace(previous_trace)
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)
        if outer_fired and outer_interval > 0:
            signal.setitimer(signal.ITIMER_REAL, outer_interval, outer_interval)
        elif outer_delay > 0 and not outer_fired:
            left = max(outer_delay - (time.monotonic() - start), 1e-6)
            signal.setitimer(signal.ITIMER_REAL, left, outer_interval)
    if stopped:
        raise CheckTimeout
    return value


def _call_in_worker(fn: Callable[[], Any], deadline: float) -> Any:
    """``fn()`` in a daemon thread (no signals outside the main thread).

    At the deadline the worker is asked to stop (an asynchronous :class:`CheckTimeout`),
    again every 10 ms for up to :data:`WORKER_GRACE_S` seconds, and then abandoned. This
    path (a checker called from a thread other than the main one) is best effort: unlike
    the main thread's, it cannot trace the worker's lines, so a learner's code that
    catches every exception in a loop may keep running in the background.
    """
    box: dict[str, Any] = {}
    done = threading.Event()

    def work() -> None:
        try:
            try:
                box["value"] = fn()
            except BaseException as err:  # handed to the caller's thread below
                box["error"] = err
            finally:
                done.set()
                _post_stop(threading.get_ident(), stop=False)
        except CheckTimeout:  # a stop that arrived after fn had returned
            pass

    worker = threading.Thread(target=work, name="ccmc-lite-check", daemon=True)
    worker.start()
    worker.join(max(deadline - time.monotonic(), 0.0))
    if worker.is_alive() and worker.ident is not None:
        give_up = time.monotonic() + WORKER_GRACE_S
        while worker.is_alive() and not done.is_set() and time.monotonic() < give_up:
            _post_stop(worker.ident)
            worker.join(0.01)
        raise CheckTimeout
    if "error" in box:
        raise box["error"]
    return box["value"]


#: Seconds a worker thread is asked to stop, after its deadline, before it is abandoned.
WORKER_GRACE_S = 2.0


def _call_limited(fn: Callable[[], Any], deadline: float) -> Any:
    """``fn()``, raising :class:`CheckTimeout` if it is still running at ``deadline``."""
    if deadline - time.monotonic() <= 0:
        raise CheckTimeout
    if _alarm_available():
        value = _call_in_main_thread(fn, deadline)
    else:
        value = _call_in_worker(fn, deadline)
    if time.monotonic() > deadline:  # finished, but only after the limit
        raise CheckTimeout
    return value


@contextlib.contextmanager
def _global_state_restored() -> Iterator[None]:
    """Undo what the learner's code changes in the process: dtype, generators, threads.

    A solution that calls ``torch.set_default_dtype``, ``torch.manual_seed``,
    ``torch.set_num_threads``, ``torch.set_grad_enabled`` or ``np.random.seed`` must not
    change the notebook it was checked in, nor the reference computed after it.
    """
    dtype, grad = torch.get_default_dtype(), torch.is_grad_enabled()
    threads = torch.get_num_threads()
    deterministic = torch.are_deterministic_algorithms_enabled()
    torch_rng, np_rng, py_rng = (
        torch.random.get_rng_state(),
        np.random.get_state(),  # noqa: NPY002 (the legacy global generator, restored)
        random.getstate(),
    )
    try:
        yield
    finally:
        torch.set_default_dtype(dtype)
        torch.set_grad_enabled(grad)
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        if torch.are_deterministic_algorithms_enabled() != deterministic:
            torch.use_deterministic_algorithms(deterministic)
        torch.random.set_rng_state(torch_rng)
        np.random.set_state(np_rng)  # noqa: NPY002
        random.setstate(py_rng)


def _plain(value: Any, depth: int = 0) -> Any:
    """A copy of the learner's result made of plain tensors, arrays and numbers.

    Taken inside the time limit, so that comparing it later runs none of the learner's
    code (a tensor subclass, an object whose ``__float__`` loops).
    """
    if depth > 8:
        return value
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True).as_subclass(torch.Tensor)
    if isinstance(value, np.ndarray):
        return np.array(value, copy=True)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if type(value) in (list, tuple):
        return type(value)(_plain(v, depth + 1) for v in value)
    return value


# ----------------------------------------------------------------------------- exercises


class Case:
    """One input of a function exercise: the positional arguments of a call.

    ``show`` replaces the default text of the input in messages (``describe`` of every
    argument), e.g. for a model whose ``repr`` would take a page.
    """

    __slots__ = ("args", "show")

    def __init__(self, *args: Any, show: str | None = None) -> None:
        self.args = args
        self.show = show if show is not None else ", ".join(describe(a) for a in args)

    def __repr__(self) -> str:
        return f"Case({self.show})"


CaseSource = Callable[[int], Iterable[Any]] | Sequence[Any]


@dataclass(frozen=True)
class Exercise:
    """One row of the table of exercises: what a checker compares the learner's answer with.

    A *function* exercise has a ``reference`` function and the ``cases`` it is called on (a
    sequence of :class:`Case` or argument tuples, or a function ``seed -> cases``); the
    learner's function must return the same on every case. A *value* exercise has
    ``expected(**settings) -> value`` instead; the learner's answer is one value.

    Parameters
    ----------
    name : str or callable
        What is checked, shown in the message (a function of the settings for a value
        exercise whose name depends on them).
    reference : callable, optional
        ``reference(*case.args)``: the package's answer.
    cases : list or callable, optional
        The cases, or ``cases(seed)`` returning them.
    expected : callable, optional
        ``expected(**settings)``: the expected value; validates the settings.
    compare_as : callable, optional
        ``compare_as(output, *case.args)``: the form in which outputs are compared (applied to
        the reference's and the learner's output alike), e.g. a canonical ordering; may raise
        to reject a malformed answer.
    entries : callable, optional
        ``entries(**settings) -> [(label, index), ...]``: compare a value entry by entry (one
        case each, named by its label) once it has the expected shape.
    atol, rtol : float
        Tolerances of the comparison (``numpy.allclose``).
    time_limit : float
        Seconds the learner's code may run in this exercise, all cases together.
    context : callable, optional
        A context-manager factory the whole check runs in (e.g. one torch thread).
    """

    name: str | Callable[..., str]
    reference: Callable[..., Any] | None = None
    cases: CaseSource = ()
    expected: Callable[..., Any] | None = None
    compare_as: Callable[..., Any] | None = None
    entries: Callable[..., list[tuple[str, Any]]] | None = None
    atol: float = 1e-6
    rtol: float = 1e-5
    time_limit: float = TIME_LIMIT_S
    context: Callable[[], Any] | None = None

    def __post_init__(self) -> None:
        if (self.reference is None) == (self.expected is None):
            raise TypeError("an Exercise needs exactly one of reference= and expected=")
        for name in ("atol", "rtol", "time_limit"):
            check_float(name, getattr(self, name), minimum=0.0, open_lower=name == "time_limit")

    @property
    def is_function(self) -> bool:
        """Whether the learner's answer is a function (else a value)."""
        return self.reference is not None

    def cases_for(self, seed: int) -> list[Case]:
        """The cases of a function exercise for ``seed``."""
        raw = self.cases(seed) if callable(self.cases) else self.cases
        return [c if isinstance(c, Case) else Case(*c) for c in raw]

    def check(
        self,
        answer: Any,
        *,
        argument: str = "answer",
        seed: int = 0,
        quiet: bool = False,
        **settings: Any,
    ) -> CheckResult:
        """Check ``answer`` (the learner's function or value); ``argument`` is its name."""
        seed = check_seed(seed)
        if not isinstance(quiet, bool):
            raise TypeError(f"quiet must be True or False; got {type(quiet).__name__}")
        # An answer of the wrong kind is a wrong answer like any other: a ❌ with the reason.
        if self.is_function and not callable(answer):
            name = self._title(settings)
            why = f"{argument} must be a function ({_FUNCTION_HINT}); got {type(answer).__name__}"
            return _report(name, [why], 1, quiet)
        if not self.is_function and (
            callable(answer) or isinstance(answer, (str, bytes, bool, dict, set))
        ):
            name = self._title(settings)
            why = (
                f"{argument} must be a number or an array (the value you derived); "
                f"got {type(answer).__name__}"
            )
            return _report(name, [why], 1, quiet)
        with self.context() if self.context is not None else contextlib.nullcontext():
            if self.is_function:
                return self._check_function(answer, seed, quiet)
            return self._check_value(answer, argument, quiet, settings)

    def _check_function(self, fn: Callable[..., Any], seed: int, quiet: bool) -> CheckResult:
        assert self.reference is not None
        name = self._title({})
        cases = self.cases_for(seed)
        deadline = time.monotonic() + self.time_limit
        failures: list[str] = []
        n_failed = None
        for k, case in enumerate(cases):
            # The learner's function runs on its own copy of the inputs, before the
            # reference answer of this case exists anywhere in the process.
            args = copy.deepcopy(case.args)
            try:
                with _global_state_restored(), np.errstate(all="ignore"):
                    got = _call_limited(functools.partial(self._attempt, fn, args, case), deadline)
            except NotImplementedError:
                return _report(name, [_NOT_IMPLEMENTED], len(cases), quiet)
            except CheckTimeout:
                left = len(cases) - k - 1
                failures.append(
                    f"input {case.show}: stopped after {self.time_limit:g} s, the time limit "
                    f"of this exercise (an endless loop?); {left} more case(s) not run"
                )
                n_failed = len(failures) + left
                break
            except KeyboardInterrupt:
                raise
            except BaseException as err:  # the learner's bug (SystemExit too), reported
                failures.append(f"input {case.show} raised {type(err).__name__}: {_safe(err)}")
                continue
            failure = self._judge(fn, case, args, got)
            if failure:
                failures.append(failure)
        return _report(name, failures, len(cases), quiet, n_failed=n_failed)

    def _judge(self, fn: Callable[..., Any], case: Case, args: tuple[Any, ...], got: Any) -> str:
        """Why the learner's answer ``got`` on ``case`` fails ('' when it passes).

        The reference is computed here, after the learner's call has returned; the
        comparison runs under a time limit of its own and turns any error into a failure.
        """
        assert self.reference is not None
        want = self._view(self.reference(*copy.deepcopy(case.args)), case)

        def verdict() -> str:
            reason = _compare(got, want, self.atol, self.rtol)
            if reason:
                return (
                    f"input {case.show}: {reason}; expected {describe(want)}, "
                    f"returned {describe(got)}"
                )
            changed = [
                n
                for n, a, b in zip(_parameter_names(fn, len(args)), args, case.args, strict=True)
                if not _unchanged(a, b)
            ]
            if changed:
                return (
                    f"input {case.show}: the right answer, but your function changed "
                    f"{', '.join(changed)} in place; a function must not modify its inputs "
                    "(work on a copy, e.g. x = x.clone())"
                )
            return ""

        return _limited_verdict(verdict, case.show)

    def _check_value(
        self, value: Any, argument: str, quiet: bool, settings: dict[str, Any]
    ) -> CheckResult:
        assert self.expected is not None
        name = self._title(settings)
        if value is None:
            failure = f"not implemented yet: set {argument} to your answer in the cell above"
            return _report(name, [failure], 1, quiet)
        # a plain copy first: comparing it runs none of the learner's code
        value, err = _read_limited(functools.partial(_plain, value))
        if err is not None:
            why = "took too long" if isinstance(err, CheckTimeout) else _safe(err)
            failure = f"your answer could not be read as a number or array ({why})"
            return _report(name, [failure], 1, quiet)
        want = self.expected(**settings)
        entries = [] if self.entries is None else self.entries(**settings)

        def verdict() -> tuple[list[str], int]:
            """The failures and the number of cases (entries compared one by one)."""
            reason = _compare(value, want, self.atol, self.rtol)
            if reason is None:
                return [], len(entries) or 1
            table = _as_array(value)
            if entries and table is not None and table.shape == np.shape(want):
                failures = []
                for label, index in entries:
                    got, exp = table[index], np.asarray(want)[index]
                    why = _compare(float(got), float(exp), self.atol, self.rtol)
                    if why:
                        failures.append(
                            f"{label}: {why}; expected {describe(exp)}, got {describe(got)}"
                        )
                return failures, len(entries)
            return [f"{reason}; expected {describe(want)}, got {describe(value)}"], 1

        outcome, err = _read_limited(verdict)
        if err is not None:
            why = "it took too long" if isinstance(err, CheckTimeout) else _safe(err)
            return _report(name, [f"your answer could not be compared ({why})"], 1, quiet)
        failures, n_cases = outcome
        return _report(name, failures, n_cases, quiet)

    def _title(self, settings: dict[str, Any]) -> str:
        """The exercise's name in messages (a function of the settings for some)."""
        return self.name if isinstance(self.name, str) else self.name(**settings)

    def _view(self, output: Any, case: Case) -> Any:
        return output if self.compare_as is None else self.compare_as(output, *case.args)

    def _attempt(self, fn: Callable[..., Any], args: tuple[Any, ...], case: Case) -> Any:
        """The learner's answer on one case (``args``: a private copy of the case's inputs).

        Returned as a plain copy (:func:`_plain`), taken inside the time limit.
        """
        return _plain(self._view(fn(*args), case))


#: Seconds that comparing one answer with the expected one may take.
COMPARE_LIMIT_S = 5.0


def _safe(err: BaseException) -> str:
    """``str(err)`` cut to 300 characters; a fixed text if the learner's error cannot print."""
    try:
        return str(err)[:300]
    except Exception:
        return "(an error whose message cannot be printed)"


def _read_limited(read: Callable[[], Any]) -> tuple[Any, BaseException | None]:
    """``(read(), None)``, or ``(None, the error)``: reading the learner's result, limited.

    ``read`` runs the learner's objects' methods, so it gets :data:`COMPARE_LIMIT_S`
    seconds and the process state is restored after it; a time-out is a
    :class:`CheckTimeout` error. ``KeyboardInterrupt`` still interrupts.
    """
    try:
        with _global_state_restored(), np.errstate(all="ignore"):
            return _call_limited(read, time.monotonic() + COMPARE_LIMIT_S), None
    except KeyboardInterrupt:
        raise
    except BaseException as err:
        return None, err


def _limited_verdict(verdict: Callable[[], str], show: str) -> str:
    """``verdict()`` under :data:`COMPARE_LIMIT_S`; an error or a time-out is a failure."""
    reason, err = _read_limited(verdict)
    if err is None:
        return str(reason)
    if isinstance(err, CheckTimeout):
        return (
            f"input {show}: comparing your result with the expected one did not finish "
            f"within {COMPARE_LIMIT_S:g} s (does your result loop when it is read?)"
        )
    return f"input {show}: your result could not be compared ({type(err).__name__}: {_safe(err)})"


# ----------------------------------------------------------------------------- decorators


def function_checker(
    reference: Callable[..., Any],
    cases: CaseSource,
    *,
    name: str,
    compare_as: Callable[..., Any] | None = None,
    atol: float = 1e-6,
    rtol: float = 1e-5,
    time_limit: float = TIME_LIMIT_S,
    context: Callable[[], Any] | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., CheckResult]]:
    """Decorator: a checker that compares the learner's function with ``reference``.

    It decorates a stub ``def check_x(my_x, *, seed=0, quiet=False): '''doc'''`` whose
    signature is the checker's (``my_x`` names the learner's function in messages) and whose
    docstring says what the exercise asks; the standard ``Parameters``, ``Returns`` and
    ``Raises`` entries are added to it. The other arguments make the :class:`Exercise`
    (available as ``check_x.exercise``).
    """
    exercise = Exercise(
        name,
        reference=reference,
        cases=cases,
        compare_as=compare_as,
        atol=atol,
        rtol=rtol,
        time_limit=time_limit,
        context=context,
    )
    return functools.partial(_make_checker, exercise)


def value_checker(
    expected: Callable[..., Any],
    *,
    name: str | Callable[..., str],
    entries: Callable[..., list[tuple[str, Any]]] | None = None,
    atol: float = 1e-6,
    rtol: float = 1e-5,
) -> Callable[[Callable[..., Any]], Callable[..., CheckResult]]:
    """Decorator: a checker that compares one value the learner derived with ``expected()``.

    Like :func:`function_checker`; the stub may add keyword-only settings between ``my_x``
    and ``seed`` (``def check_x(my_x, *, grid, seed=0, quiet=False)``), which are passed to
    ``expected``, ``name`` (when it is a function) and ``entries``.
    """
    exercise = Exercise(name, expected=expected, entries=entries, atol=atol, rtol=rtol)
    return functools.partial(_make_checker, exercise)


_TAIL = ("seed", "quiet")


def _make_checker(exercise: Exercise, stub: Callable[..., Any]) -> Callable[..., CheckResult]:
    """The checker for ``exercise`` with the signature, name and docstring of ``stub``."""
    params = list(inspect.signature(stub).parameters.values())
    kinds = [p.kind for p in params]
    settings = [p.name for p in params[1:-2]]
    if (
        len(params) < 3
        or kinds[0] is not inspect.Parameter.POSITIONAL_OR_KEYWORD
        or params[0].default is not inspect.Parameter.empty
        or any(k is not inspect.Parameter.KEYWORD_ONLY for k in kinds[1:])
        or [(p.name, p.default) for p in params[-2:]] != [("seed", 0), ("quiet", False)]
        or (exercise.is_function and settings)
    ):
        raise TypeError(
            f"{stub.__name__}: a checker's signature is (my_answer, *, seed=0, quiet=False)"
            + ("" if exercise.is_function else ", with optional keyword-only settings before seed")
        )
    argument = params[0].name
    answer_type = Callable[..., Any] if exercise.is_function else Any
    signature = inspect.Signature(
        [
            params[0].replace(annotation=answer_type),
            *params[1:-2],
            params[-2].replace(annotation=int),
            params[-1].replace(annotation=bool),
        ],
        return_annotation=CheckResult,
    )

    @functools.wraps(stub)
    def checker(*args: Any, **kwargs: Any) -> CheckResult:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        values = dict(bound.arguments)
        return exercise.check(values.pop(argument), argument=argument, **values)

    checker.__signature__ = signature  # type: ignore[attr-defined]
    checker.__doc__ = _document(stub.__doc__, argument, exercise)
    checker.exercise = exercise  # type: ignore[attr-defined]
    return checker


def _document(doc: str | None, argument: str, exercise: Exercise) -> str:
    """``doc`` with the entries every checker shares added to its numpydoc sections."""
    if exercise.is_function:
        first = f"{argument} : callable\n    Your function; it is called on copies of the inputs."
        seed = (
            "Seed of the random cases (the edge cases are fixed)."
            if callable(exercise.cases)
            else "Unused: the cases are fixed (every checker takes a seed)."
        )
    else:
        first = (
            f"{argument} : float, array-like or None\n"
            "    Your answer (``None``, the stub's value: not answered yet)."
        )
        seed = "Unused: the answer is one value (every checker takes a seed)."
    last = (
        f"seed : int\n    {seed}\n"
        "quiet : bool\n    Do not print the message (it is still in the result)."
    )
    text = inspect.cleandoc(doc or "")
    head = "Parameters\n----------\n"
    if head in text:
        start = text.index(head) + len(head)
        end_match = re.search(r"\n\n\S[^\n]*\n-{3,}\n", text[start:])
        end = start + end_match.start() if end_match else len(text)
        text = f"{text[:start]}{first}\n{text[start:end].rstrip()}\n{last}{text[end:]}"
    else:
        text += f"\n\n{head}{first}\n{last}"
    if "\nReturns\n-------\n" not in text:
        text += (
            "\n\nReturns\n-------\nccmc_lite.teaching.CheckResult\n"
            "    Truthy when every case passed; its message was printed unless ``quiet``. "
            f"An ``{argument}`` of the wrong kind is a failing result too."
        )
    if "\nRaises\n------\n" not in text:
        text += (
            "\n\nRaises\n------\nTypeError, ValueError\n    If ``seed`` or ``quiet`` is invalid."
        )
    return text
