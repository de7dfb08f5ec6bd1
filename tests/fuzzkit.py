"""A table-driven fuzz harness over the whole public API of :mod:`ccmc_lite`.

Every public callable gets one *valid* call (:data:`TABLE`); every argument of that call has a
*kind* (size, seed, probability, stochastic matrix, tokens, ...) and each kind has a list of
bad values (:func:`bad_values`: wrong type, NaN/inf, negative, zero, out-of-range tokens,
non-stochastic matrices, wrong shapes, huge sizes and shape products, bool-as-int, empty
arrays). The harness replaces one argument at a time by a bad value and classifies what the
call did. Three more families of cases are legal values that are easy to get wrong:

``extreme``     finite values at the edge of float64 or of a narrower dtype, also converted
                through an explicit ``dtype=`` (:func:`extreme_values`);
``relation``    arguments that contradict each other: a batch of kernels where one is
                meant, an order or length beyond the sequence, two arrays with 2 and 3
                runs on their leading axis, hand-written cases (:func:`relation_values`,
                :func:`run_axis_pairs`, ``Entry.cases``);
``degenerate``  valid-looking data without spread, with zero stationary mass, one point,
                a fully masked row, NaN inside a loaded state (:func:`degenerate_values`).

For these a call may also answer, if the answer is finite (``Entry.allow`` names the NaN
or inf a docstring defines) and no numpy overflow/invalid warning was raised; a batch
must be answered as its items are. The verdicts:

``ok``        raised ``ValueError``/``TypeError`` naming the argument, quickly (or answered,
              as above);
``silent``    returned a value (a silent wrong answer);
``hang``      ran longer than :data:`TIME_LIMIT` seconds (interrupted by a timer);
``alloc``     ran into the address-space cap (:data:`MEMORY_CAP`): allocated before checking;
``obscure``   raised anything else (``IndexError``, ``RuntimeError`` from torch, ...);
``unnamed``   raised ``ValueError``/``TypeError`` whose message does not name the argument.

The modules the exercise checkers live in (``*.exercises``, ``teaching.checking``) are out of scope
here: they are listed in :data:`EXCLUDED_MODULES`.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import inspect
import itertools
import math
import pkgutil
import resource
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

PARTS = ("core", "teaching", "stored", "ccmc", "markov", "ngram", "lens")
EXCLUDED_MODULES = ("checking", "exercises")
TIME_LIMIT = 10.0  # seconds per call: a hang, not a slow figure on a loaded machine
MEMORY_CAP = 2**30  # bytes of address space a single call may add
HUGE = 10**15


class CallTimeout(BaseException):
    """Raised by the timer inside a call that takes too long (not an ``Exception``)."""


# ---------------------------------------------------------------------------------------------
# the public names


def public_callables() -> dict[str, Callable[..., Any]]:
    """``"part.name" -> object`` for every public callable outside the excluded modules.

    A public class's own public methods are callables too (``"part.Class.method"``, the
    function itself: an entry passes the instance as its first argument, ``self``).
    """
    out: dict[str, Callable[..., Any]] = {}
    for part in PARTS:
        mod = importlib.import_module(f"ccmc_lite.{part}")
        for name in mod.__all__:
            obj = getattr(mod, name)
            if not callable(obj) or inspect.ismodule(obj):
                continue
            home = getattr(obj, "__module__", "") or ""
            if home.split(".")[-1] in EXCLUDED_MODULES:
                continue
            out[f"{part}.{name}"] = obj
            out.update(_methods(f"{part}.{name}", obj))  # called with an instance first
    import ccmc_lite

    covered = {id(obj) for obj in out.values()}
    for name in ccmc_lite.__all__:
        obj = getattr(ccmc_lite, name)
        if callable(obj) and not inspect.ismodule(obj) and id(obj) not in covered:
            home = obj.__module__.split(".")[-1]
            if home not in EXCLUDED_MODULES:
                out.setdefault(f"core.{name}", obj)
    import tools  # the evidence layer's tooling: its public functions get the same checks

    for info in pkgutil.iter_modules(tools.__path__):
        mod = importlib.import_module(f"tools.{info.name}")
        for name in getattr(mod, "__all__", ()):
            obj = getattr(mod, name)
            if callable(obj) and not inspect.ismodule(obj):
                out[f"tools.{info.name}.{name}"] = obj
                out.update(_methods(f"tools.{info.name}.{name}", obj))
    return out


def _methods(key: str, cls: Any) -> dict[str, Callable[..., Any]]:
    """A public class's own public methods, ``"<key>.method" -> function`` (none for others)."""
    if not inspect.isclass(cls):
        return {}
    out = {}
    for method, attr in vars(cls).items():
        if isinstance(attr, (staticmethod, classmethod)):
            attr = attr.__func__
        if not method.startswith("_") and inspect.isfunction(attr):
            out[f"{key}.{method}"] = attr
    return out


# ---------------------------------------------------------------------------------------------
# argument kinds and their bad values


@dataclass
class A:
    """One argument of a valid call: its value, its kind and options for the bad values."""

    value: Any
    kind: str = "fixed"
    names: tuple[str, ...] = ()  # extra words an error message may use to name it
    opts: dict[str, Any] = field(default_factory=dict)


def a(value: Any, kind: str = "fixed", *names: str, **opts: Any) -> A:
    return A(value, kind, names, opts)


def _t(x: Any, dtype: torch.dtype | None = None) -> torch.Tensor:
    return torch.as_tensor(x).clone() if dtype is None else torch.as_tensor(x, dtype=dtype).clone()


def _with(x: torch.Tensor, value: float) -> torch.Tensor:
    y = x.clone().to(torch.float64 if isinstance(value, float) else x.dtype)
    y[(0,) * y.ndim] = value
    return y


def bad_values(arg: A) -> Iterator[tuple[str, Any]]:
    """The bad values tried for one argument (label, value)."""
    k, v, o = arg.kind, arg.value, arg.opts
    common = [("None", None), ("str", "x")] if not o.get("none_ok") else [("str", "x")]
    if k == "fixed":
        return
    if k in ("int", "count"):
        lo = 1 if k == "int" else 0
        lo = o.get("min", lo)
        yield from common
        yield "float", 2.5
        yield "bool", True
        yield "nan", math.nan
        yield "below", lo - 1
        if o.get("huge", True):
            yield "large", 10**9  # above the default ceilings, allocatable in principle
            yield "huge", HUGE
    elif k == "seed":
        yield from common
        yield "float", 2.5
        yield "bool", True
        yield "negative", -1
        yield "too big", 2**64
    elif k in ("pos", "real", "nonneg", "prob"):
        yield from common
        yield "nan", math.nan
        yield "inf", math.inf
        yield "bool", True
        if k == "pos":
            yield "negative", -1.0
            yield "zero", 0.0
        if k == "nonneg":
            yield "negative", -1.0
        if k == "prob":
            yield "below 0", -0.1
            yield "above 1", 1.5
        if "max" in o:
            yield "above max", o["max"] * 10 + 1
    elif k == "stoch":
        x = _t(v, torch.float64)
        K = x.shape[-1]
        yield from common
        yield "nan", _with(x, math.nan)
        yield "inf", _with(x, math.inf)
        yield "rows sum to 2", x * 2
        neg = x.clone()
        neg[..., 0, 0] = -0.5
        neg[..., 0, 1] = neg[..., 0, 1] + 0.5 + x[..., 0, 0]
        yield "negative entry", neg
        if not o.get("one_d_ok"):
            yield "1-D", x.reshape(-1)[:K]
        yield "not square", x[..., :, :1].expand(*x.shape[:-1], 1).clone() if K > 1 else x
        yield "empty", torch.zeros(0, 0, dtype=torch.float64)
        yield "bool", torch.ones(K, K, dtype=torch.bool)
        if o.get("huge", False):
            yield "huge K", torch.full((3000, 3000), 1 / 3000, dtype=torch.float64)
    elif k == "undefined":  # a valid stochastic P under which the call has no defined value
        yield "undefined CCMC", o["P"]
    elif k == "probvec":
        x = _t(v, torch.float64)
        yield from common
        yield "nan", _with(x, math.nan)
        yield "unnormalised", x * 2
        neg = x.clone()
        neg[..., 0] = -0.5
        neg[..., 1] += 0.5 + x[..., 0]
        yield "negative entry", neg
        yield "empty", torch.zeros(0, dtype=torch.float64)
    elif k == "weights":  # non-negative weights, normalised by the function
        x = _t(v, torch.float64)
        yield from common
        yield "nan", _with(x, math.nan)
        yield "negative entry", _with(x, -0.5)
        yield "all zero", torch.zeros_like(x)
        yield "empty", x[:0]
    elif k == "tokens":
        x = _t(v)
        K = o["K"]
        yield from common
        yield "token K", _with(x, K)
        yield "token -1", _with(x, -1)
        yield "float tokens", x.to(torch.float64) + 0.7
        yield "bool", x.to(torch.bool)
        yield "empty", x.reshape(-1)[:0]
        if "ndim" in o:
            yield "extra dim", x.unsqueeze(0).unsqueeze(0)
    elif k == "array":
        x = _t(v)
        if not x.is_floating_point():
            x = x.to(torch.float64)
        yield from common
        yield "nan", _with(x, math.nan)
        yield "inf", _with(x, math.inf)
        if o.get("shape", True):
            yield "extra dims", x.reshape(1, 1, *x.shape)
            yield "empty", x.reshape(-1)[:0]
    elif k in ("factors", "nonneg_values"):  # one positive factor per run / values >= 0
        x = _t(v, torch.float64)
        yield from common
        yield "nan", _with(x, math.nan)
        yield "inf", _with(x, math.inf)
        yield "negative entry", _with(x, -1.0)
        yield "2-D", x.reshape(-1, 1)
        yield "number", 2.0
        if k == "factors":
            yield "zero entry", _with(x, 0.0)
            yield "one short", x[:-1]
        else:
            yield "empty", x[:0]
    elif k == "shape":  # a tuple of sizes
        yield from common
        yield "int", 3
        yield "negative entry", (-1,)
        yield "float entry", (2.5,)
        yield "huge product", (10**5, 10**5)  # each size allowed, their product is not
    elif k == "choice":
        yield "bogus", "bogus-choice"
        yield "int", 3
        if not o.get("none_ok"):
            yield "None", None
    elif k == "dtype":
        yield "str", "float64"
        yield "not a float dtype", torch.bool
    elif k == "bool":
        yield "int 2", 2
        yield "str", "yes"
    elif k == "callable":
        yield "None", None
        yield "int", 3
    elif k == "obj":
        if not o.get("none_ok"):
            yield "None", None
        yield "str", "x"
        yield "int", 3
    else:  # pragma: no cover
        raise KeyError(k)


#: float dtypes a caller may ask for explicitly (``dtype=``): a finite float64 value can
#: overflow or underflow on conversion to them.
FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def extreme_values(arg: A) -> Iterator[tuple[str, Any]]:
    """Family "extreme": finite values at the edge of float64 or of a narrower dtype.

    Each is a legal number of the argument's kind; the call must either compute a finite
    answer or raise an error naming the argument (never NaN, inf or a hang).
    """
    k, v, o = arg.kind, arg.value, arg.opts
    if k in ("pos", "nonneg", "real"):
        yield "1e300", 1e300
        yield "subnormal 1e-310", 1e-310
        yield "5e-324", 5e-324
        yield "above float32 (1e39)", 1e39
        yield "above float16 (7e4)", 7e4
        if k == "real":
            yield "-1e300", -1e300
    elif k == "prob":
        yield "subnormal 1e-310", 1e-310
        yield "1 - 1e-17", 1 - 1e-17
    elif k in ("int", "count") and o.get("huge", True):
        yield "int64 max", 2**63 - 1
        yield "above int64", 2**63
    elif k == "seed":
        yield "seed 2**64 - 1", 2**64 - 1
    elif k in ("array", "factors", "nonneg_values"):
        x = _t(v, torch.float64)
        if x.numel():
            yield "entry 1e200", _with(x, 1e200)
            yield "all entries 1e200", torch.full_like(x, 1e200)
            yield "entry above float32 (1e39)", _with(x, 1e39)
            yield "entry 1e-310", _with(x, 1e-310)
            if k == "array":
                yield "entry -1e200", _with(x, -1e200)
    elif k == "stoch":
        x = _t(v, torch.float64)
        if x.ndim >= 2 and x.shape[-1] > 1:
            y = x.clone()
            y[..., 0, :] = 0.0
            y[..., 0, 0] = 1e-310
            y[..., 0, 1] = 1.0
            yield "entry 1e-310", y
    elif k == "probvec":
        x = _t(v, torch.float64)
        if x.shape[-1] > 1:
            y = torch.zeros_like(x)
            y[..., 0] = 1e-310
            y[..., 1] = 1.0
            yield "entry 1e-310", y
    elif k == "weights":
        x = _t(v, torch.float64)
        yield "entries near float64 max", x / x.max() * 1e308


def degenerate_values(arg: A) -> Iterator[tuple[str, Any]]:
    """Family "degenerate": valid-looking data with no spread, zero mass or one point."""
    k, v, o = arg.kind, arg.value, arg.opts
    if k == "array":
        x = _t(v, torch.float64)
        if x.numel() > 1:
            yield "no spread", torch.full_like(x, float(x.reshape(-1)[0]))
            yield "all zero", torch.zeros_like(x)
        if x.ndim == 1 and x.numel() > 1 and o.get("shape", True) is not False:
            yield "one point", x[:1]
    elif k == "stoch":
        x = _t(v, torch.float64)
        if x.ndim == 2 and x.shape[-1] > 1:
            K = x.shape[-1]
            absorbing = torch.zeros_like(x)
            absorbing[:, 0] = 1.0
            yield "every state jumps to 0 (stationary mass 0 elsewhere)", absorbing
            yield "identity (reducible)", torch.eye(K, dtype=torch.float64)
            yield "cycle (periodic)", torch.roll(torch.eye(K, dtype=torch.float64), 1, 1)
    elif k in ("probvec", "weights"):
        x = _t(v, torch.float64)
        if x.shape[-1] > 1:
            y = torch.zeros_like(x)
            y[..., 0] = 1.0
            yield "one-hot", y
    elif k == "tokens":
        x = _t(v)
        if x.numel() > 1:
            yield "one token repeated", torch.zeros_like(x)


def relation_values(entry: Entry, slot: Any, arg: A) -> Iterator[tuple[str, Any, str]]:
    """Family "relation", generated: (label, value, judge) for one argument of ``entry``.

    * a stochastic matrix given as a batch of two kernels: a function either raises or
      answers both (its answer equals the two single answers stacked: judge "consistent");
    * a size or order one longer than the sequence the call also receives: a function
      either raises or answers finitely.
    """
    if arg.kind == "stoch" and not arg.opts.get("batched_ok"):
        x = _t(arg.value, torch.float64)
        if x.ndim == 2:
            other = 0.5 * x + 0.5 / x.shape[-1]
            yield "batch of two kernels", torch.stack([x, other]), "consistent"
    if arg.kind in ("int", "count") and arg.opts.get("huge", True):
        for other in [*entry.args, *entry.kwargs.values()]:
            if other.kind == "tokens":
                T = _t(other.value).shape[-1]
                yield f"one longer than the sequence ({T + 1})", T + 1, "finite"
                break


#: Kinds of array arguments that may carry leading run axes.
RUN_AXIS_KINDS = ("stoch", "array", "probvec", "weights", "tokens", "undefined")


def run_axis_pairs(slots: list[tuple[str, A, bool, Any]]) -> Iterator[tuple[str, dict, str]]:
    """Family "relation", generated: every two array arguments given 2 and 3 leading runs.

    Two runs of one argument against three of another can only contradict each other: a
    function must raise, naming either (label, ``{slot: value}``, judge "raise").
    """
    arrays = [
        (pname, arg, where)
        for pname, arg, _, where in slots
        if arg.kind in RUN_AXIS_KINDS and isinstance(arg.value, (torch.Tensor, np.ndarray, list))
    ]
    for (n1, a1, w1), (n2, a2, w2) in itertools.combinations(arrays, 2):
        twice, thrice = torch.stack([_t(a1.value)] * 2), torch.stack([_t(a2.value)] * 3)
        yield f"{n1} of 2 runs, {n2} of 3", {w1: twice, w2: thrice}, "raise"


# ---------------------------------------------------------------------------------------------
# the table of valid calls


@dataclass
class Entry:
    name: str  # "part.public_name"
    args: list[A] = field(default_factory=list)
    kwargs: dict[str, A] = field(default_factory=dict)
    label: str = ""
    check: Callable[[Any], None] | None = None  # extra check of a valid result
    # hand-written cases of the families "relation" and "degenerate":
    # (family, label, {slot: value}, judge); slot = positional index or keyword name
    cases: list[tuple[str, str, dict[Any, Any], str]] = field(default_factory=list)
    # what a result may hold by its documentation: "nan" (a "does not apply" entry),
    # "inf" (an infinite loss or a log-probability of 0, the exact answer)
    allow: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return self.name + (f"[{self.label}]" if self.label else "")


def E(
    qualname: str,
    /,
    *args: A,
    label: str = "",
    cases: list[tuple[str, str, dict[Any, Any], str]] | None = None,
    allow: tuple[str, ...] = (),
    **kwargs: A,
) -> Entry:
    return Entry(qualname, list(args), dict(kwargs), label, cases=cases or [], allow=allow)


class Vocab3(torch.nn.Module):
    """A stand-in model with a vocabulary of 3 tokens and 8 positions."""

    S = 3
    T = 8


#: The folders whose tables of valid calls (``tests/<folder>/fuzz_table.py``) make the
#: harness's: the package's parts, and the repository's tools.
TABLE_PARTS = ("core", "teaching", "stored", "ccmc", "markov", "ngram", "lens", "tooling")


def build_table() -> list[Entry]:
    """The valid calls: at least one entry per public callable, one table per part."""
    table: list[Entry] = []
    for part in TABLE_PARTS:
        path = Path(__file__).resolve().parent / part / "fuzz_table.py"
        spec = importlib.util.spec_from_file_location(f"fuzz_table_{part}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        table += module.entries()
    return table


# ---------------------------------------------------------------------------------------------
# running one call


def resolve(name: str) -> Callable[..., Any]:
    return public_callables()[name]


def _param_names(fn: Callable[..., Any], entry: Entry) -> list[str]:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return [f"arg{i}" for i in range(len(entry.args))]
    names = []
    for i in range(len(entry.args)):
        if i < len(params) and params[i].kind != inspect.Parameter.VAR_POSITIONAL:
            names.append(params[i].name)
        else:
            var = [p.name for p in params if p.kind == inspect.Parameter.VAR_POSITIONAL]
            names.append(var[0] if var else f"arg{i}")
    return names


@contextlib.contextmanager
def guarded(seconds: float = TIME_LIMIT, extra_bytes: int = MEMORY_CAP) -> Iterator[None]:
    """Run a block under a wall-clock timer and an address-space cap."""

    def on_alarm(signum: int, frame: Any) -> None:
        raise CallTimeout

    old_handler = signal.signal(signal.SIGALRM, on_alarm)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/status") as fh:
        vm = int(fh.read().split("VmSize:")[1].split()[0]) * 1024
    cap = vm + extra_bytes
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        signal.signal(signal.SIGALRM, old_handler)


_ALLOC_WORDS = ("can't allocate", "not enough memory", "out of memory", "cannot allocate")


@dataclass
class Outcome:
    entry: str
    arg: str
    label: str
    verdict: str
    detail: str
    family: str = "bad"


def _leaves(out: Any, depth: int = 0) -> Iterator[torch.Tensor]:
    """The numbers inside a returned value (tensors, arrays, floats, containers, records)."""
    if depth > 4:
        return
    if isinstance(out, torch.Tensor):
        yield out.detach()
    elif isinstance(out, np.ndarray):
        if out.dtype.kind in "fiuc":
            yield torch.as_tensor(out)
    elif isinstance(out, (float, np.floating)):
        yield torch.tensor(float(out), dtype=torch.float64)
    elif isinstance(out, (list, tuple)):
        for x in out:
            yield from _leaves(x, depth + 1)
    elif isinstance(out, dict):
        for x in out.values():
            yield from _leaves(x, depth + 1)
    elif isinstance(out, torch.nn.Module):
        for x in out.state_dict().values():
            yield x.detach()
    elif hasattr(out, "__dataclass_fields__"):
        for name in out.__dataclass_fields__:
            yield from _leaves(getattr(out, name, None), depth + 1)


def judge_finite(out: Any, allow: tuple[str, ...] = ()) -> str | None:
    """``None`` when every number in ``out`` is finite (or an allowed NaN/inf), else why not."""
    for leaf in _leaves(out):
        if not (leaf.is_floating_point() or leaf.is_complex()):
            continue
        bad = ~torch.isfinite(leaf)
        if "nan" in allow:
            bad &= ~torch.isnan(leaf)
        if "inf" in allow:
            bad &= ~torch.isinf(leaf)
        if bool(bad.any()):
            return f"returned a non-finite value (shape {tuple(leaf.shape)}, {leaf.dtype})"
    return None


def judge_raise(out: Any) -> str | None:
    return f"returned {type(out).__name__} instead of raising"


#: RuntimeWarning (numpy's overflow/invalid/divide) and a poorly conditioned fit are a
#: silent answer when the call returns: the numbers it gives were computed from garbage.
_NUMERIC_WARNINGS = (RuntimeWarning, getattr(np, "exceptions", np).RankWarning)


def classify(
    fn: Callable[..., Any],
    args: list[Any],
    kwargs: dict[str, Any],
    names: tuple[str, ...],
    judge: Callable[[Any], str | None] = judge_raise,
) -> tuple[str, str]:
    """The verdict on one call: ``ok`` when it raised a named error or ``judge`` accepts it."""
    import warnings

    start = time.perf_counter()
    try:
        with (
            guarded(),
            warnings.catch_warnings(record=True) as caught,
            np.errstate(all="warn", under="ignore"),
        ):
            warnings.simplefilter("always")
            out = fn(*args, **kwargs)
            reason = judge(out)
    except CallTimeout:
        return "hang", f"> {TIME_LIMIT} s"
    except MemoryError as err:
        return "alloc", f"MemoryError {err}"[:200]
    except (ValueError, TypeError) as err:
        msg = str(err)
        if time.perf_counter() - start > TIME_LIMIT:
            return "hang", msg[:200]
        if any(w in msg for w in _ALLOC_WORDS):
            return "alloc", msg[:200]
        if not any(n in msg for n in names):
            return "unnamed", f"{type(err).__name__}: {msg}"[:200]
        return "ok", msg[:200]
    except Exception as err:  # classifying every failure is the point
        msg = str(err)
        if any(w in msg for w in _ALLOC_WORDS):
            return "alloc", msg[:200]
        return "obscure", f"{type(err).__name__}: {msg}"[:200]
    finally:
        import matplotlib.pyplot as plt

        plt.close("all")
    if time.perf_counter() - start > TIME_LIMIT:
        return "hang", "returned, but slowly"
    warned = [w for w in caught if issubclass(w.category, _NUMERIC_WARNINGS)]
    if reason is None and warned:
        reason = f"returned after a {warned[0].category.__name__}: {warned[0].message}"
    return ("silent", reason[:200]) if reason else ("ok", "answered")


def _consistent(
    fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any], slot: Any, items: Any
) -> Callable[[Any], str | None]:
    """Judge of a batched call: its answer must be the single answers stacked."""

    def single(x: Any) -> Any:
        a2, k2 = list(args), dict(kwargs)
        if isinstance(slot, int):
            a2[slot] = x
        else:
            k2[slot] = x
        return fn(*a2, **k2)

    def judge(out: Any) -> str | None:
        got = list(_leaves(out))
        parts = [list(_leaves(single(x))) for x in items]
        if len(got) != len(parts[0]) or not got:
            return "answered a batch with a different structure than one item"
        for g, *ones in zip(got, *parts, strict=True):
            try:
                want = torch.stack([o.to(torch.float64) for o in ones])
                same = g.shape == want.shape and torch.allclose(
                    g.to(torch.float64), want, rtol=1e-6, atol=1e-9, equal_nan=True
                )
            except RuntimeError:
                same = False
            if not same:
                return f"a batch's answer (shape {tuple(g.shape)}) is not the items' answers"
        return None

    return judge


def _cases(entry: Entry, slots: list[tuple[str, A, bool, Any]]) -> Iterator[tuple[Any, ...]]:
    """(family, slot name, arg, where, label, value, judge) for every case of ``entry``."""
    for pname, arg, _, where in slots:
        for label, bad in bad_values(arg):
            yield "bad", pname, arg, where, label, bad, "raise"
        for label, bad in extreme_values(arg):
            yield "extreme", pname, arg, where, label, bad, "finite"
        for label, bad in degenerate_values(arg):
            yield "degenerate", pname, arg, where, label, bad, "finite"
        for label, bad, how in relation_values(entry, where, arg):
            yield "relation", pname, arg, where, label, bad, how
    by_where = {where: (pname, arg) for pname, arg, _, where in slots}
    generated = [("relation", *pair) for pair in run_axis_pairs(slots)]
    for family, label, overrides, how in [*entry.cases, *generated]:
        where = next(iter(overrides))
        pname, arg = by_where[where]
        yield family, pname, arg, overrides, label, None, how


def run_entry(
    entry: Entry, fns: dict[str, Callable[..., Any]], families: tuple[str, ...] | None = None
) -> Iterator[Outcome]:
    """Classify every case derived from ``entry`` (of the given families; all by default)."""
    fn = fns[entry.name]
    pnames = _param_names(fn, entry)
    slots: list[tuple[str, A, bool, Any]] = [
        (pnames[i], arg, True, i) for i, arg in enumerate(entry.args)
    ] + [(k, arg, False, k) for k, arg in entry.kwargs.items()]
    dtype_slot = "dtype" if "dtype" in entry.kwargs else None
    for family, pname, arg, where, label, bad, how in _cases(entry, slots):
        if families is not None and family not in families:
            continue
        names = (pname, *arg.names)
        if isinstance(where, dict):  # a case that sets several arguments may name any of them
            names = (*names, *(n for n, _, _, w in slots if w in where))
        if entry.name.startswith(("core.check_", "core.as_tensor")):
            names = (*names, "v")  # the checks name the value by their first argument
        overrides = where if isinstance(where, dict) else {where: bad}
        dtypes: tuple[Any, ...] = (None,)
        if family == "extreme" and dtype_slot and where != dtype_slot:
            dtypes = (None, *FLOAT_DTYPES)  # the same value converted to a narrower dtype
        for dtype in dtypes:
            args = [x.value for x in entry.args]
            kwargs = {k: x.value for k, x in entry.kwargs.items()}
            for slot, value in overrides.items():
                if isinstance(slot, int):
                    args[slot] = value
                else:
                    kwargs[slot] = value
            if dtype is not None:
                kwargs[dtype_slot] = dtype
                names = (*names, "dtype")  # refusing the dtype is an answer too
            if how == "consistent":
                slot, value = next(iter(overrides.items()))
                judge = _consistent(fn, args, kwargs, slot, list(value))
            else:
                judge = (
                    judge_raise
                    if how == "raise"
                    else functools.partial(judge_finite, allow=entry.allow)
                )
            verdict, detail = classify(fn, args, kwargs, names, judge)
            tag = label if dtype is None else f"{label} as {str(dtype).replace('torch.', '')}"
            yield Outcome(entry.key, pname, tag, verdict, detail, family)


def run_valid(entry: Entry, fns: dict[str, Callable[..., Any]]) -> Any:
    fn = fns[entry.name]
    with guarded(seconds=20.0):
        return fn(*[x.value for x in entry.args], **{k: x.value for k, x in entry.kwargs.items()})


def run_all(
    table: list[Entry] | None = None, families: tuple[str, ...] | None = None
) -> list[Outcome]:
    fns = public_callables()
    table = build_table() if table is None else table
    out: list[Outcome] = []
    for entry in table:
        if entry.name in fns:  # (an older package, for before/after counts, lacks new names)
            out.extend(run_entry(entry, fns, families))
    return out


def summary(outcomes: list[Outcome]) -> Counter:
    return Counter(o.verdict for o in outcomes)


def family_report(outcomes: list[Outcome]) -> str:
    """One line per family: cases tried and their verdicts."""
    lines = []
    for family in ("bad", "extreme", "relation", "degenerate"):
        mine = [o for o in outcomes if o.family == family]
        counts = Counter(o.verdict for o in mine)
        rest = ", ".join(f"{v} {n}" for v, n in sorted(counts.items()) if v != "ok")
        lines.append(
            f"{family:10s} {len(mine):5d} cases, ok {counts['ok']}" + (f", {rest}" if rest else "")
        )
    return "\n".join(lines)


if __name__ == "__main__":  # python tests/fuzzkit.py: print the report
    sys.path[1:1] = [str(Path(__file__).resolve().parents[1])]  # the repository: tools/
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    table = build_table()
    fns = public_callables()
    covered = {e.name for e in table}
    print("public callables:", len(fns), "table entries:", len(table))
    print("not in table:", sorted(set(fns) - covered))
    outs = run_all(table)
    print("cases:", len(outs), dict(summary(outs)), f"{time.perf_counter() - t0:.1f} s")
    print(family_report(outs))
    want = set(sys.argv[1:]) or {"silent", "hang", "alloc", "obscure", "unnamed"}
    for o in outs:
        if o.verdict in want:
            print(f"{o.verdict:8s} [{o.family}] {o.entry} {o.arg}={o.label}: {o.detail}")
