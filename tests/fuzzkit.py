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
                meant, an order or length beyond the sequence, hand-written cases
                (:func:`relation_values`, ``Entry.cases``);
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

The modules the exercise checkers live in (``*.exercises``, ``core.checking``) are out of scope
here: they are listed in :data:`EXCLUDED_MODULES`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import inspect
import math
import pkgutil
import resource
import signal
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

PARTS = ("core", "ccmc", "markov", "ngram", "lens")
EXCLUDED_MODULES = ("checking", "exercises")
TIME_LIMIT = 10.0  # seconds per call: a hang, not a slow figure on a loaded machine
MEMORY_CAP = 2**30  # bytes of address space a single call may add
HUGE = 10**15


class CallTimeout(BaseException):
    """Raised by the timer inside a call that takes too long (not an ``Exception``)."""


# ---------------------------------------------------------------------------------------------
# the public names


def public_callables() -> dict[str, Callable[..., Any]]:
    """``"part.name" -> object`` for every public callable outside the excluded modules."""
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
    import ccmc_lite

    for name in ccmc_lite.__all__:
        obj = getattr(ccmc_lite, name)
        if callable(obj) and not inspect.ismodule(obj):
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


class _Vocab3(torch.nn.Module):
    """A stand-in model with a vocabulary of 3 tokens and 8 positions."""

    S = 3
    T = 8


def build_table() -> list[Entry]:
    """The valid calls: at least one entry per public callable."""
    from ccmc_lite import ccmc, core, markov, ngram
    from tools import costs

    P2 = markov.binary_kernel(0.3, 0.4)
    P3 = markov.random_kernel(3, 0)
    p3 = core.stationary_distribution(P3)
    X = [0, 1, 2, 1, 0]
    E3 = ccmc.random_embeddings(3, 3, seed=0)
    W3 = torch.eye(3, dtype=torch.float64) * 0.3
    prompts = [[0, 1, 2], [1, 2, 0], [2, 0, 1], [0, 2, 1], [1, 0, 2], [2, 1, 0, 0]]
    pop = ccmc.population_data(P3, prompts)
    Ep, Up, *_ = ccmc.positional_embeddings(3, 5, 8, seed=0)
    W8 = torch.eye(8, dtype=torch.float64) * 0.3
    model = markov.MarkovTransformer(K=2, d=4, N=8)
    x2 = torch.tensor([[0, 1, 1, 0, 1, 0, 0, 1]] * 2)
    task = ngram.NGramTask(S=3, n=2, T=8)
    batch = ngram.sample_batch(task, 4, seed=0)
    tok = batch.tokens
    target = batch.next_probs[:, -1]
    st = ngram.SimplifiedTransformer(3, 8, 2)
    tokP = batch.transitions[0]
    cfg = core.TrainConfig(steps=2, lr=1e-2, progress=False)
    loss1 = np.array([1.0, 0.9, 0.8, 0.7, 0.6, 0.5])
    joint = torch.full((3, 3), 1 / 9, dtype=torch.float64)

    def mk() -> torch.nn.Module:
        return torch.nn.Linear(2, 1)

    def lossf(m: Any, b: torch.Tensor) -> torch.Tensor:
        return m(b).pow(2).mean()

    def batchf(step: int, runs: torch.Tensor, g: torch.Generator) -> torch.Tensor:
        return torch.randn(len(runs), 4, 2, generator=g)

    T = []
    add = T.append
    # --- core
    add(
        E(
            "core.as_tensor",
            a("v"),
            a([1.0, 2.0], "array", shape=False),
            dtype=a(torch.float64, "dtype"),
        )
    )
    add(
        E(
            "core.check_finite_result",
            a(torch.ones(2), "array", "overflowed", shape=False),
            a("the scores"),
            a("W and E"),
        )
    )
    qkv = torch.randn(2, 8, 4)
    add(
        E(
            "core.check_attention_inputs",
            a(qkv, "array", "q", shape=False),
            a(qkv, "array", "k", shape=False),
            a(qkv, "array", "v", shape=False),
        )
    )
    add(E("core.check_choice", a("v"), a("a"), a(("a", "b"))))
    add(E("core.check_float", a("v"), a(0.5, "real")))
    add(
        E(
            "core.check_numbers",
            a("v"),
            a([0.5, 2.0], "factors"),
            a(2, "count", huge=False, none_ok=True),
        )
    )
    add(E("core.check_int", a("v"), a(3, "count", huge=False), minimum=a(0)))
    add(
        E(
            "core.check_prob_vector",
            a("v"),
            a(p3, "probvec"),
            atol=a(1e-6, "pos"),
            dtype=a(torch.float64, "dtype"),
        )
    )
    add(E("core.check_probability", a("v"), a(0.5, "prob")))
    add(E("core.check_seed", a(3, "seed")))
    add(
        E(
            "core.check_stochastic_matrix",
            a("v"),
            a(P3, "stoch", batched_ok=True),
            atol=a(1e-6, "pos"),
            dtype=a(torch.float64, "dtype"),
        )
    )
    add(E("core.check_tokens", a("v"), a(X, "tokens", K=3), a(3, "int", huge=False)))
    add(E("core.check_bool", a("v"), a(True, "bool")))
    add(E("core.check_size", a("v"), a(3, "int"), limit=a(10, "int", huge=False, none_ok=True)))
    add(E("core.check_elements", a("v"), a(10**12, "fixed"), label="bad only"))
    add(E("core.check_power", a("v"), a(3), a(40), label="bad only"))
    add(E("core.check_shape", a("v"), a((2, 3), "shape")))
    add(E("core.check_instance", a("v"), a(3), a(int)))
    add(E("core.check_callable", a("v"), a(len)))
    hist = torch.tensor([1.0, 0.5, 0.4], dtype=torch.float64)
    add(E("core.check_fit", a("fit"), a(hist, "array", "loss_history"), a(torch.zeros(2))))
    add(E("core.DivergenceError", a("message")))
    add(
        E(
            "core.check_model_tokens",
            a("v"),
            a(X, "tokens", K=3),
            a(_Vocab3(), "obj", "model"),
            ndim=a(1),
        )
    )
    add(E("core.is_traced", a(torch.zeros(2))))
    add(E("core.derive_seed", a(1, "seed"), a(2, "seed", "keys")))
    add(E("core.numpy_rng", a(1, "seed")))
    add(E("core.seed_everything", a(1, "seed")))
    add(E("core.torch_generator", a(1, "seed"), device=a("cpu", "choice", none_ok=True)))
    add(E("core.default_device"))
    add(E("core.resolve_device", a("cpu", "choice", none_ok=True)))
    add(E("core.by_profile", a(1), a(2), profile=a("book", "choice", none_ok=True)))
    add(E("core.current_profile"))
    add(E("tools.allocator.tune_allocator"))
    add(E("core.profile_banner", a({"x": 1}), profile=a("book", "choice", none_ok=True)))
    for f in ("entropy_rate", "mutual_information", "stationary_distribution", "unigram_entropy"):
        add(E(f"core.{f}", a(P3, "stoch")))
    add(E("core.entropy", a(p3, "probvec")))
    add(
        E(
            "core.TrainConfig",
            steps=a(3, "int"),
            lr=a(1e-3, "pos"),
            optimizer=a("adam", "choice"),
            weight_decay=a(0.0, "nonneg"),
            schedule=a("cosine", "choice"),
            warmup_steps=a(1, "count"),
            min_lr_ratio=a(0.1, "prob"),
            grad_clip=a(1.0, "pos", none_ok=True),
            eval_every=a(1, "count"),
            progress_updates=a(2, "int"),
            checkpoint_steps=a((1,), "obj"),
            lr_scale=a([1.0, 2.0], "obj", none_ok=True),  # its length: checked by train_runs
            chunk_size=a(1, "int", none_ok=True),
            stop_after=a(2, "int", none_ok=True),
            first_run=a(0, "count", huge=False),
            device=a("cpu", "choice", none_ok=True),
            progress=a(False, "bool"),
            cases=[
                ("relation", "checkpoint_steps=5, an int", {"checkpoint_steps": 5}, "raise"),
                ("relation", "stop_after beyond steps", {"stop_after": 4}, "raise"),
            ],
        )
    )
    add(E("core.lr_schedule", a(cfg, "obj", "config")))
    add(E("core.over_runs", a(mk(), "obj", "template"), a(lossf, "callable")))
    add(
        E(
            "core.train_runs",
            a(mk, "callable"),
            a(lossf, "callable"),
            a(batchf, "callable"),
            n_runs=a(2, "int"),
            config=a(cfg, "obj"),
            seed=a(0, "seed"),
            cases=[
                (
                    "relation",
                    "lr_scale of 3 runs for 2",
                    {"config": dataclasses.replace(cfg, lr_scale=(1.0, 1.0, 1.0))},
                    "raise",
                ),
            ],
        )
    )
    res = core.train_runs(mk, lossf, batchf, n_runs=2, config=cfg, seed=0)
    add(
        E(
            "core.TrainResult",
            params=a(res.params),
            buffers=a(res.buffers),
            loss=a(res.loss),
            grad_norm=a(res.grad_norm),
            eval_steps=a(res.eval_steps),
            evals=a(res.evals),
            checkpoints=a(res.checkpoints),
            seconds=a(res.seconds),
            config=a(cfg),
            template=a(res.template),
        )
    )
    sweep = core.Sweep(
        name="f", task="ccmc_lite.markov.runs:sweep_task", settings={}, runs=[{}], seed=0
    )
    add(
        E(
            "core.Sweep",
            name=a("f"),
            task=a("ccmc_lite.markov.runs:sweep_task"),
            settings=a({}),
            runs=a([{}]),
            seed=a(0, "seed"),
        )
    )
    add(
        E(
            "tools.sweeps.Shard",
            task=a("ccmc_lite.markov.runs:sweep_task"),
            settings=a({}),
            runs=a(({},)),
            first_run=a(0, "count", huge=False),
            seed=a(0, "seed"),
        )
    )
    add(E("tools.sweeps.SweepResult", a(sweep), a({}), a({}), a(0.0)))
    add(E("tools.sweeps.run_shard", a("skip", "obj", "shard"), label="bad only"))
    add(E("tools.sweeps.run_sweep", a("skip", "obj", "sweep"), label="bad only"))
    add(E("core.StoredRun", a("n"), a(sweep), a({}), a({}), a({})))
    add(E("core.load_stored", a("no-such-run-name", "obj", "name"), label="bad only"))
    add(E("core.load_stored", a("p2_fig4_paper", "obj", "name"), gpu=a(True, "bool")))
    add(
        E(
            "tools.stored.save_stored",
            a("skip", "obj", "result"),
            a("/nonexistent"),
            command=a("c"),
            label="bad only",
        )
    )
    add(E("tools.sweeps.shards", a(sweep), a(1, "int", "shard_size", huge=False, none_ok=True)))
    add(
        E(
            "core.check_task_args",
            a({}, "obj", "settings"),
            a([{}], "obj", "runs"),
            a(0, "count", "first_run", huge=False),
        )
    )
    add(E("core.resolve_task", a("ccmc_lite.markov.runs:sweep_task", "obj", "task")))
    add(E("tools.stored.machine_description"))
    add(E("tools.stored.package_version"))
    add(E("tools.stored.cpu_field", a("model name", "fixed")))  # absent fields: None
    add(E("tools.allocator.shell_exports"))
    # installing the replay cache and undoing it (the pair leaves the package as it ships)
    add(E("tools.replay.uninstall"))
    add(E("tools.replay.install"))
    add(E("tools.replay.load_ipython_extension", a(None, "fixed")))  # the shell: unused
    add(E("tools.replay.uninstall"))
    add(E("core.stored_names", gpu=a(False, "bool")))
    add(E("core.gpu_timings"))
    add(E("core.ChapterSnapshot", a("part9/01_x"), a({"a": 1.0}, "obj"), a("0" * 64), a({})))
    add(E("core.load_snapshot", a("part9/01_no-such-chapter", "obj", "chapter"), label="bad only"))
    add(
        E(
            "tools.snapshots.save_snapshot",
            a("part9/01_x"),
            a({"a": 1.0}, "obj", "values"),
            code_sha256=a("0" * 64),
            wall_seconds=a(1.0, "pos"),
            command=a("c"),
            path=a(str(Path(tempfile.mkdtemp()) / "s.json")),
        )
    )
    add(E("core.Claims", a({"claim": (True, False)}, "obj")))
    add(
        E(
            "core.TextProgress",
            a(10, "int", huge=False),
            updates=a(2, "int", huge=False),
            enabled=a(False, "bool"),
            width=a(10, "int"),
        )
    )
    add(E("core.LoglogFit", a(1.0), a(0.0), a(1.0)))
    add(E("core.fig_axes", a(1, "int"), a(1, "int"), width=a(2.0, "pos"), height=a(2.0, "pos")))
    add(E("core.heatmap", a("skip", "obj", "ax"), a(P3), label="bad only"))
    xs = np.array([1.0, 2.0, 4.0, 8.0])
    add(E("core.loglog_fit", a(xs, "array"), a(xs**-0.5, "array")))
    add(E("core.plot_loglog_fit", a("skip", "obj", "ax"), a(xs), a(xs), label="bad only"))
    add(E("core.plot_reference_levels", a("skip", "obj", "ax"), a({}), label="bad only"))
    add(E("core.plot_runs", a("skip", "obj", "ax"), a(xs), a(xs), label="bad only"))
    add(E("core.use_book_style"))
    add(E("core.glue", a("fuzz_key"), a(1.0), display=a(False, "bool")))
    add(E("core.glued_values"))
    # --- ccmc (Part I)
    add(E("ccmc.PromptData", a(pop.counts), a(pop.query), a(pop.y), a(pop.weights), a(3)))
    tr = ccmc.sample_trajectories(P3, X, 3, seed=0)
    add(E("ccmc.Trajectories", a(5), a(tr.tokens), a(tr.times), a(tr.counts), a(tr.transitions)))
    add(
        E(
            "ccmc.ccmc_distribution",
            a(P3, "stoch"),
            a(X, "tokens", K=3),
            variant=a("self", "choice"),
        )
    )
    # A prompt on tokens {0, 1} ending in 1, and a P with P[1, 0] = P[1, 1] = 0: the CCMC
    # transition (Def. 2.1) has no mass to normalise, which each function must say.
    Xu = [0, 0, 1, 1, 1]
    Pu = torch.tensor([[1 / 3] * 3, [0.0, 0.0, 1.0], [1 / 3] * 3], dtype=torch.float64)
    seed0 = {"seed": a(0)}
    for name, rest, kw in (
        ("ccmc.ccmc_distribution", [a(Xu)], {}),
        ("ccmc.log_likelihood", [a(ccmc.population_data(P3, [Xu, [0, 1, 2]]))], {}),
        ("ccmc.population_data", [a([Xu, [0, 1, 2]])], {}),
        (
            "ccmc.positional_ccmc_distribution",
            [a(Xu), a(torch.ones(5)), a(torch.ones(3)), a(torch.ones(5, 3))],
            {},
        ),
        ("ccmc.sample_next", [a(Xu)], seed0),
        ("ccmc.sample_trajectories", [a(Xu), a(4)], seed0),
        ("ccmc.draw_collapse", [a(Xu), a(30)], seed0),
    ):
        add(E(name, a(P3, "undefined", P=Pu), *rest, label="undefined", **kw))
    add(E("ccmc.check_transition", a(P3, "stoch")))
    add(E("ccmc.frequencies", a(X, "tokens", K=3), a(3, "int", huge=False)))
    add(E("ccmc.log_likelihood", a(P3, "stoch"), a(pop, "obj", "data"), allow=("inf",)))
    add(E("ccmc.population_data", a(P3, "stoch"), a(prompts, "obj", "prompts")))
    add(
        E(
            "ccmc.positional_ccmc_distribution",
            a(P3, "stoch"),
            a(X, "tokens", K=3),
            a(torch.ones(5, dtype=torch.float64), "array", "a"),
            a(torch.ones(3, dtype=torch.float64), "array", "b"),
            a(torch.ones(5, 3, dtype=torch.float64), "array", "V"),
        )
    )
    add(
        E(
            "ccmc.prompt_data",
            a([[0, 1], [1, 2]], "obj", "prompts"),
            a([1, 2], "tokens", "next_tokens", K=3),
            a(3, "int"),
        )
    )
    add(E("ccmc.prompt_statistics", a([[0, 1], [1, 2]], "obj", "prompts"), a(3, "int")))
    add(
        E(
            "ccmc.random_prompts",
            a(3, "int", min=2),
            a(4, "int"),
            min_length=a(2, "int"),
            max_length=a(3, "int"),
            seed=a(0, "seed"),
        )
    )
    add(
        E(
            "ccmc.sample_next",
            a(P3, "stoch"),
            a(X, "tokens", K=3),
            seed=a(0, "seed"),
            n_samples=a(2, "int"),
        )
    )
    add(E("ccmc.sample_prompt_data", a(pop, "obj", "population"), a(10, "int"), seed=a(0, "seed")))
    add(
        E(
            "ccmc.sample_trajectories",
            a(P3, "stoch", batched_ok=True),
            a(X, "tokens", "prompt", K=3),
            a(4, "int"),
            seed=a(0, "seed"),
            n_traj=a(2, "int", none_ok=True),
            chunk=a(16, "int", huge=False),
        )
    )
    add(E("ccmc.trajectory_data", a(tr.tokens, "tokens", K=3), a(5, "int"), a(3, "int")))
    add(E("ccmc.weighted_transition", a(P3, "stoch"), a(p3, "weights", "m")))
    add(
        E(
            "ccmc.attention_scores",
            a(W3, "array", "W", shape=False),
            a(E3, "array", "E"),
            a(X, "tokens", K=3),
        )
    )
    add(E("ccmc.check_embeddings", a(E3, "array", "E")))
    add(
        E(
            "ccmc.cross_attention",
            a(W3, "array", "W", shape=False),
            a(E3, "array", "E"),
            a(X, "tokens", K=3),
        )
    )
    add(E("ccmc.embed", a(E3, "array", "E"), a(X, "tokens", K=3)))
    add(E("ccmc.logits_from_weights", a(W3, "array", "W", shape=False), a(E3, "array", "E")))
    add(
        E(
            "ccmc.next_token_distribution",
            a(W3, "array", "W", shape=False),
            a(E3, "array", "E"),
            a(X, "tokens", K=3),
        )
    )
    add(E("ccmc.positional_embeddings", a(3, "int"), a(5, "int"), a(8, "int"), seed=a(0, "seed")))
    add(
        E(
            "ccmc.positional_factors",
            a(W8, "array", "W", shape=False),
            a(Ep, "array", "E"),
            a(Up, "array", "U"),
        )
    )
    add(E("ccmc.project_onto_subspace", a(W3, "array", "W", shape=False), a(E3, "array", "E")))
    add(E("ccmc.random_embeddings", a(3, "int"), a(3, "int"), seed=a(0, "seed")))
    add(
        E(
            "ccmc.self_attention",
            a(W3, "array", "W", shape=False),
            a(E3, "array", "E"),
            a(X, "tokens", K=3),
        )
    )
    add(E("ccmc.subspace_basis", a(E3, "array", "E")))
    add(E("ccmc.transition_from_weights", a(W3, "array", "W", shape=False), a(E3, "array", "E")))
    add(E("ccmc.weights_from_logits", a(W3, "array", "Theta", shape=False), a(E3, "array", "E")))
    add(E("ccmc.weights_from_transition", a(P3, "stoch"), a(E3, "array", "E")))
    add(
        E("ccmc.from_column_stochastic", a(P3.T.clone(), "stoch", "P_columns"), atol=a(1e-6, "pos"))
    )
    add(E("ccmc.to_column_stochastic", a(P3, "stoch"), atol=a(1e-6, "pos")))
    add(E("ccmc.from_one_based", a([1, 2, 3], "array", "tokens", shape=False)))
    rep = ccmc.coverage_report(prompts, 3)
    add(
        E(
            "ccmc.coverage_report",
            a(prompts, "obj", "prompts"),
            a(3, "int"),
            variant=a("self", "choice"),
        )
    )
    add(
        E(
            "ccmc.CoverageReport",
            *[a(getattr(rep, f.name)) for f in rep.__dataclass_fields__.values()],
        )
    )
    add(E("ccmc.draw_cooccurrence_graph", a("skip", "obj", "ax"), a(rep), a(0), label="bad only"))
    add(
        E(
            "ccmc.restricted_distribution",
            a(P3, "stoch"),
            a(0, "count", "k", huge=False),
            a([0, 1], "obj", "subset"),
        )
    )
    add(E("ccmc.AttentionMLE", a(E3, "array", "E")))
    fit = ccmc.fit_gd(pop, E3, steps=3)
    add(E("ccmc.FitResult", *[a(getattr(fit, f)) for f in fit.__dataclass_fields__]))
    add(
        E(
            "ccmc.asymptotic_error",
            a(W3, "array", "W", shape=False),
            a(E3, "array", "E"),
            a(pop, "obj", "population"),
        )
    )
    add(
        E(
            "ccmc.fit_gd",
            a(pop, "obj", "data"),
            a(E3, "array", "E"),
            steps=a(3, "int"),
            lr=a(0.5, "pos", none_ok=True),
            tol=a(0.0, "nonneg"),
            allow=("nan",),  # the histories after a run stopped
        )
    )
    add(
        E(
            "ccmc.fit_newton",
            a(pop, "obj", "data"),
            a(E3, "array", "E"),
            tol=a(1e-10, "nonneg"),
            max_iter=a(5, "int"),
            armijo=a(1e-4, "prob"),
            allow=("nan",),  # the histories after the fit stopped
        )
    )
    add(E("ccmc.gd_step_size", a(pop, "obj", "data"), a(E3, "array", "E")))
    add(
        E(
            "ccmc.gd_with_trainer",
            a(pop, "obj", "data"),
            a(E3, "array", "E"),
            steps=a(2, "int"),
            lr=a(0.5, "pos"),
            seed=a(0, "seed"),
        )
    )
    for f in ("gradient", "hessian_on_subspace", "nll"):
        add(
            E(
                f"ccmc.{f}",
                a(W3, "array", "W", shape=False),
                a(E3, "array", "E"),
                a(pop, "obj", "data"),
            )
        )
    add(E("ccmc.hessian_logits", a(W3, "array", "Theta", shape=False), a(pop, "obj", "data")))
    add(E("ccmc.binary_collapse_chain", a(0.3, "prob")))
    add(E("ccmc.collapse_explorer", label="widget"))
    add(E("ccmc.collapse_exponent", a(0.3, "prob")))
    add(E("ccmc.weak_weak_exponent", a(0.3, "prob")))
    tr2 = ccmc.sample_trajectories(P3, X, 40, seed=0, n_traj=2)
    freqs = torch.stack([ccmc.running_frequencies(t, 3) for t in tr2.tokens])
    times = torch.arange(1, freqs.shape[1] + 1, dtype=torch.float64)
    freqs = (freqs + 0.01) / 1.03
    m_fixed = ccmc.fixed_point(P3, p3, steps=10)
    add(
        E(
            "ccmc.compare_decay_exponents",
            a(freqs, "array", "freqs", shape=False),
            a(times, "array", "times", shape=False),
            a(P3, "stoch"),
            a(m_fixed, "weights", "m_fixed", "m"),
            t_min=a(2.0, "nonneg"),
        )
    )
    add(
        E(
            "ccmc.draw_collapse",
            a(P3, "stoch"),
            a(X, "tokens", "prompt", K=3),
            a(30, "int"),
            seed=a(0, "seed"),
            label="figure",
        )
    )
    add(E("ccmc.explorer_chain", a(3, "int", min=2), a("random", "choice"), seed=a(0, "seed")))
    add(
        E(
            "ccmc.fixed_point",
            a(P3, "stoch"),
            a(p3, "weights", "m0"),
            steps=a(10, "int"),
            dt=a(0.05, "pos"),
        )
    )
    add(E("ccmc.plot_frequency_curves", a("skip", "obj", "ax"), a(freqs[0]), label="bad only"))
    add(E("ccmc.plot_snapshots", a("skip", "obj", "ax"), a(X), a([0]), label="bad only"))
    add(
        E(
            "ccmc.predicted_decay_exponents",
            a(P3, "stoch"),
            a(m_fixed, "weights", "m"),
            allow=("nan",),
        )
    )
    add(E("ccmc.random_chain", a(3, "int", min=2), seed=a(0, "seed"), scale=a(1.0, "nonneg")))
    add(E("ccmc.running_frequencies", a(X, "tokens", K=3), a(3, "int", huge=False)))
    add(E("ccmc.self_reinforcing_tokens", a(P3, "stoch")))
    add(E("ccmc.stationary_of_reweighted", a(P3, "stoch"), a(p3, "weights", "m")))
    add(E("ccmc.zero_diagonal", a(P3, "stoch")))
    # --- markov (Part II)
    add(E("markov.binary_entropy_rate", a(0.3, "prob"), a(0.4, "prob")))
    add(E("markov.binary_kernel", a(0.3, "prob"), a(0.4, "prob")))
    add(E("markov.check_kernel", a(P2, "stoch")))
    add(E("markov.empirical_transitions", a(x2[0], "tokens", "x", K=2), a(2, "int", min=2)))
    add(
        E(
            "markov.enumerate_chains",
            a(P2, "stoch"),
            a(4, "int"),
            max_sequences=a(64, "int", huge=False),
        )
    )
    add(E("markov.lag_one_covariance", a(P2, "stoch")))
    add(E("markov.random_kernel", a(3, "int", min=2), a(0, "seed"), alpha=a(1.0, "pos")))
    add(E("markov.sample_chains", a(P2, "stoch", batched_ok=True), a(2, "int"), a(5, "int")))
    add(E("markov.symmetric_kernel", a(3, "int", min=2), a(0.3, "prob")))
    add(
        E(
            "markov.MarkovTransformer",
            K=a(2, "int", min=2),
            d=a(4, "int"),
            N=a(8, "int"),
            depth=a(1, "int"),
            tied=a(True, "bool"),
            layer_norm=a(False, "bool"),
        )
    )
    add(E("markov.build_model", K=a(2, "int", min=2), d=a(4, "int"), N=a(8, "int")))
    add(E("markov.check_model_options", a({"K": 2, "d": 4, "N": 8}, "obj", "options")))
    q = torch.randn(2, 8, 4)
    add(
        E(
            "markov.causal_attention",
            a(q, "array", "q", shape=False),
            a(q, "array", "k", shape=False),
            a(q, "array", "v", shape=False),
        )
    )
    add(
        E(
            "markov.blocked_causal_attention",
            a(q, "array", "q", shape=False),
            a(q, "array", "k", shape=False),
            a(q, "array", "v", shape=False),
            block=a(4, "int"),
        )
    )
    add(
        E(
            "markov.kernel_loss",
            a(model, "callable", "model"),
            a(x2, "tokens", "x", K=2),
            a(P2, "stoch"),
        )
    )
    add(E("markov.next_token_loss", a(model, "callable", "model"), a(x2, "tokens", "x", K=2)))
    add(E("markov.attention_ratio", a(model, "obj", "model"), a(x2, "tokens", "x", K=2)))
    add(E("markov.markov_config", a(3, "int"), lr=a(1e-3, "pos"), eval_every=a(0, "count")))
    add(
        E(
            "markov.plot_pq_grid",
            a("skip", "obj", "ax"),
            a(np.ones((2, 2))),
            a([0.2, 0.4]),
            label="bad only",
        )
    )
    add(
        E(
            "markov.appendix_d_logits",
            a(0.5, "real", "e"),
            a(0.3, "real", "p"),
            a(0.5, "real", "w1"),
            a(0.1, "real", "b"),
            a(2, "count", "beta"),
        )
    )
    add(
        E(
            "markov.binary_unigram_hessian",
            a(0.3, "prob"),
            a(0.4, "prob"),
            a(torch.zeros(2, 4), "array", "pos"),
        )
    )
    add(E("markov.fit_appendix_d", a(model, "obj", "model")))
    add(
        E(
            "markov.gauge_restrict",
            a(torch.eye(6, dtype=torch.float64), "array", "H"),
            a(2, "int", min=2),
            a(2, "int"),
        )
    )
    add(E("markov.low_rank_summary", a(model, "obj", "model")))
    add(
        E(
            "markov.population_hessian",
            a(model, "obj", "model"),
            a(P2, "stoch"),
            a(["b"]),
            max_sequences=a(4096, "int", huge=False),
        )
    )
    add(
        E(
            "markov.population_loss",
            a(model, "obj", "model"),
            a(P2, "stoch"),
            method=a("auto", "choice"),
            max_sequences=a(65536, "int", huge=False),
        )
    )
    add(E("markov.symbolic_unigram_hessian", a(2, "int", min=2), a(2, "int"), a(2, "int")))
    add(E("markov.symmetric_threshold", a(3, "int", min=2, huge=False)))
    add(E("markov.theta_pi", a(model, "obj", "model"), a(P2, "stoch")))
    add(E("markov.theta_star", a(model, "obj", "model"), a(0.3, "prob"), a(0.4, "prob")))
    add(E("markov.unigram_curvature", a(P2, "stoch")))
    add(E("markov.unigram_inputs", a(markov.theta_pi(model, P2), "obj", "model")))
    add(
        E(
            "markov.unigram_gap",
            a(torch.tensor([0.6, 0.5]), "array", "loss"),
            a(torch.stack([P2, P2]), "stoch", "kernels"),
        )
    )
    add(
        E(
            "markov.zero_position_probs",
            a(x2[None], "tokens", "x", K=2),
            a(torch.full((1, 2, 8, 2), 0.5), "probvec", "probs"),
            count=a(2, "int"),
        )
    )
    sm = markov.MarkovTransformer(K=3, d=4, N=8)
    q_in, m_in = markov.unigram_inputs(markov.theta_pi(sm, P3))
    add(E("markov.unigram_hessian", a(P3, "stoch"), a(q_in, "array", "pos"), ff_jacobian=a(m_in)))
    dirs = [{"b": torch.ones_like(model.b)}, {"e": torch.ones_like(model.e)}]
    grid = torch.linspace(-0.1, 0.1, 2)
    add(
        E(
            "markov.loss_plane",
            a(model, "obj", "model"),
            a(P2, "stoch"),
            a(dirs, "obj", "directions"),
            a(grid, "array", "s", shape=False),
            a(grid, "array", "t", shape=False),
        )
    )
    mcfg = markov.markov_config(2, progress=False)
    opts = {"K": 2, "d": 4, "N": 8}
    kern = torch.stack([P2, P2])
    add(
        E(
            "markov.train_markov",
            a(kern, "stoch", "kernels"),
            model_options=a(opts, "obj"),
            config=a(mcfg, "obj"),
            seed=a(0, "seed"),
            batch_size=a(2, "int"),
        )
    )
    mr = markov.train_markov(
        kern,
        model_options=opts,
        config=mcfg,
        seed=0,
        batch_size=2,
    )
    add(E("markov.MarkovRuns", a(mr.result), a(kern), a(opts), a(2)))
    settings = {
        "K": 2,
        "d": 4,
        "N": 8,
        "batch": 2,
        "steps": 2,
        "lr": 1e-3,
        "tied": True,
        "n_test": 2,
    }
    add(
        E(
            "markov.sweep_task",
            a(settings, "obj", "settings"),
            a([{"p": 0.3, "q": 0.4}], "obj", "runs"),
            first_run=a(0, "count", huge=False),
            seed=a(0, "seed"),
        )
    )
    # --- ngram (Part III)
    add(
        E(
            "ngram.NGramTask",
            S=a(3, "int", min=2),
            n=a(2, "int"),
            T=a(8, "int"),
            alpha=a(0.5, "pos"),
            start=a("uniform", "choice"),
        )
    )
    add(E("ngram.NGramBatch", a(batch.tokens), a(batch.next_probs), a(batch.transitions)))
    add(
        E(
            "ngram.dirichlet",
            a(0.5, "pos", "alpha"),
            a((2,), "shape"),
            a(3, "int", min=2),
            seed=a(0, "seed", none_ok=True),
            dtype=a(torch.float64, "dtype"),
        )
    )
    add(E("ngram.dirichlet_mean_entropy", a(3, "int", min=2, huge=False), a(0.5, "pos")))
    add(E("ngram.flatten_transitions", a(tokP, "stoch", "P"), a(3, "int", min=2), a(2, "int")))
    add(
        E(
            "ngram.history_codes",
            a(tok, "tokens", K=3),
            a(3, "int", min=2),
            a(2, "count"),
            cases=[("relation", "length > T + 1", {2: tok.shape[-1] + 3}, "finite")],
        )
    )
    add(E("ngram.lifted_stationary", a(tokP, "stoch", "P"), a(3, "int", min=2), a(2, "int")))
    add(E("ngram.lifted_transition_matrix", a(tokP, "stoch", "P"), a(3, "int", min=2), a(2, "int")))
    add(E("ngram.log_uniform", a(3, "int", min=2, huge=False)))
    add(E("ngram.next_token_probs", a(batch.transitions, "stoch", "P"), a(tok, "tokens", K=3)))
    add(
        E(
            "ngram.next_token_probs",
            a(batch.transitions[:3], "stoch", "P"),  # B = S = 3: the order must be given
            a(tok[:3], "tokens", K=3),
            n=a(2, "int", none_ok=True),
            label="n",
        )
    )
    add(
        E(
            "ngram.sample_batch",
            a(task, "obj", "task"),
            a(4, "int"),
            seed=a(0, "seed", none_ok=True),
        )
    )
    add(
        E(
            "ngram.sample_sequences",
            a(batch.transitions, "stoch", "P"),
            a(6, "int"),
            seed=a(0, "seed", none_ok=True),
        )
    )
    add(
        E(
            "ngram.sample_sequences",
            a(tokP, "stoch", "P"),  # (3, 3): three unigram laws, which only n = 1 says
            a(6, "int"),
            seed=a(0, "seed", none_ok=True),
            n=a(1, "int", none_ok=True),
            label="n",
        )
    )
    add(
        E(
            "ngram.sample_transitions",
            a(task, "obj", "task"),
            a((2,), "shape"),
            seed=a(0, "seed", none_ok=True),
        )
    )
    add(
        E(
            "ngram.sample_urn",
            a(task, "obj", "task"),
            a((2,), "shape"),
            seed=a(0, "seed", none_ok=True),
        )
    )
    add(
        E(
            "ngram.suffix_conditional",
            a(batch.transitions, "stoch", "P"),
            a(1, "int"),
            a(4, "int"),
            n=a(2, "int", none_ok=True),
        )
    )
    add(
        E(
            "ngram.bayes_predictor",
            a(tok, "tokens", K=3),
            a(3, "int", min=2),
            a(2, "int"),
            a(0.5, "pos"),
            cases=[("relation", "n > T + 1", {2: tok.shape[-1] + 3}, "finite")],
        )
    )
    add(E("ngram.contiguous_offsets", a(2, "int")))
    add(
        E(
            "ngram.cross_entropy",
            a(target, "probvec", "pred"),
            a(target, "probvec", "target"),
            allow=("inf",),
        )
    )
    add(
        E(
            "ngram.estimator_losses",
            a(tok, "tokens", K=3),
            a(target, "probvec", "target"),
            a(3, "int", min=2),
            a([1, 2]),
            smoothing=a(0.5, "nonneg"),
            allow=("inf",),
        )
    )
    add(
        E(
            "ngram.smoothing_losses",
            a(tok, "tokens", K=3),
            a(target, "probvec", "target"),
            a(3, "int", min=2),
            a((1,)),
            a([0.0, 0.5, 2.0], "nonneg_values"),
            allow=("inf",),
        )
    )
    add(
        E(
            "ngram.kgram_counts",
            a(tok, "tokens", K=3),
            a(3, "int", min=2),
            a(1, "count"),
            positions=a("last", "choice"),
            chunk=a(64, "int", huge=False),
        )
    )
    add(
        E(
            "ngram.kgram_estimator",
            a(tok, "tokens", K=3),
            a(3, "int", min=2),
            a(1, "count"),
            smoothing=a(0.5, "nonneg"),
            cases=[("relation", "k > T + 1", {2: tok.shape[-1] + 3}, "finite")],
        )
    )
    add(
        E(
            "ngram.subset_estimator",
            a(tok, "tokens", K=3),
            a(3, "int", min=2),
            a([1]),
            smoothing=a(0.5, "nonneg"),
        )
    )
    add(
        E(
            "ngram.AttentionOnlyTransformer",
            a(3, "int", min=2),
            a(8, "int"),
            init_scale=a(1.0, "nonneg"),
        )
    )
    add(
        E(
            "ngram.SimplifiedTransformer",
            a(3, "int", min=2),
            a(8, "int"),
            a(2, "count"),
            init_scale=a(1.0, "nonneg"),
        )
    )
    nan_K2 = ngram.theta_star(1, S=3, T=8, n_heads=2, c=5.0)["K2"].clone()
    nan_K2[0, 0] = math.nan
    masked = torch.randn(2, 4, 4)
    masked[0, 2, :3] = -math.inf  # query 2 of the first map: every key j <= 2 masked
    add(E("ngram.construction_limit", a(tok, "tokens", K=3), a(3, "int", min=2), a((1, None))))
    add(E("ngram.first_layer_attention", a(torch.randn(4, 4), "array", "A1", shape=False)))
    add(
        E(
            "ngram.load_parameters",
            a(st, "obj", "model"),
            a(ngram.theta_star(1, S=3, T=8, n_heads=2, c=5.0), "obj", "params"),
            cases=[
                (
                    "degenerate",
                    "NaN inside a loaded state",
                    {1: {**ngram.theta_star(1, S=3, T=8, n_heads=2, c=5.0), "K2": nan_K2}},
                    "raise",
                )
            ],
        )
    )
    add(E("ngram.offsets_for_k", a(1, "count"), a(2, "count")))
    add(
        E(
            "ngram.theta_star",
            a(1, "count"),
            S=a(3, "int", min=2),
            T=a(8, "int"),
            n_heads=a(2, "count"),
            c=a(5.0, "pos"),
        )
    )
    add(
        E(
            "ngram.theta_star_all_heads",
            S=a(3, "int", min=2),
            T=a(8, "int"),
            n_heads=a(2, "count"),
            c=a(5.0, "pos"),
        )
    )
    add(
        E(
            "ngram.theta_star_subset",
            a([1]),
            S=a(3, "int", min=2),
            T=a(8, "int"),
            n_heads=a(2, "count"),
            c=a(5.0, "pos"),
        )
    )
    add(E("ngram.GradientNorm", a(1.0), a(1.0), a(0.0)))
    add(E("ngram.SuffixModel", a(3, "int", min=2), a(1, "count")))
    add(E("ngram.sequence_law", a(tokP, "stoch", "P", one_d_ok=True), a(4, "int")))
    law = ngram.sequence_law(tokP, 4)
    add(
        E(
            "ngram.exact_population_gradient",
            a(ngram.SuffixModel(3, 1), "obj", "model"),
            a(law[0], "tokens", K=3),
            a(law[1], "probvec", "prob"),
            a(law[2], "probvec", "nxt"),
            label="law",
        )
    )
    add(
        E(
            "ngram.suffix_law",
            a(law[0], "tokens", K=3),
            a(law[1], "probvec", "prob"),
            a(law[2], "probvec", "nxt"),
            a(3, "int", min=2),
            a(1, "count"),
        )
    )
    for f in ("flat_gradient", "gradient_blocks", "gradient_norm", "lemma31_gradient"):
        add(
            E(
                f"ngram.{f}",
                a(st, "obj", "model"),
                a(tok, "tokens", K=3),
                a(target, "probvec", "target"),
            )
        )
    add(
        E(
            "ngram.next_token_loss",
            a(target, "probvec", "probs"),
            a(target, "probvec", "target"),
            eps=a(1e-8, "nonneg"),
            reduction=a("mean", "choice"),
        )
    )
    add(E("ngram.statistical_term", a(batch, "obj", "batch"), a(1, "count")))
    add(E("ngram.NGramStream", a(task, "obj", "task"), a(4, "int"), chunk=a(4, "int", huge=False)))
    add(
        E(
            "ngram.checkpoint_gradient_norms",
            a("skip", "obj", "result"),
            a(tok),
            a(target),
            label="bad only",
        )
    )
    add(
        E(
            "ngram.kgram_levels",
            a(tok, "tokens", K=3),
            a(target, "probvec", "target"),
            a(3, "int", min=2),
            a([1]),
            smoothing=a(0.5, "nonneg"),
            allow=("inf",),
        )
    )
    add(
        E(
            "ngram.make_eval_fn",
            a(tok, "array", "tokens", shape=False),
            a(target, "probvec", "target"),
            chunk=a(64, "int", huge=False),
            device=a("cpu", "choice", none_ok=True),
        )
    )
    add(E("ngram.make_loss_fn", a(1e-8, "nonneg", "eps")))
    add(E("ngram.make_test_set", a(task, "obj", "task"), a(4, "int"), seed=a(0, "seed")))
    add(
        E(
            "ngram.plot_attention_maps",
            a("skip", "obj", "axes"),
            a(torch.rand(4, 4)),
            label="bad only",
        )
    )
    add(E("ngram.Plateau", a(0), a(10), a(1.0), a(0.1)))
    gl = np.linspace(1, 0, 50)
    add(
        E(
            "ngram.detect_plateaus",
            a(gl, "array", "grad_norm", shape=False),
            a(gl, "array", "loss", shape=False),
            window=a(5, "int"),
            min_length=a(5, "int"),
        )
    )
    A1s = torch.rand(3, 1, 2, 6, 6)
    add(
        E(
            "ngram.first_offsets",
            a([0, 1, 2], "obj", "steps"),
            a(A1s, "array", "A1_by_step", "A1"),
            threshold=a(0.3, "prob"),
        )
    )
    add(
        E(
            "ngram.formation_step",
            a([0, 1, 2], "obj", "steps"),
            a(np.array([0.1, 0.2, 0.9]), "array", "weights", shape=False),
            a(0.3, "prob", "threshold"),
        )
    )
    add(E("ngram.moving_average", a(loss1, "array", "x", shape=False), a(2, "int", "window")))
    add(E("ngram.nearest_level", a(0.5, "real", "value"), a({"a": 0.4, "b": 0.9}, "obj", "levels")))
    add(
        E(
            "ngram.offset_attention",
            a(torch.rand(6, 6), "array", "A1", shape=False),
            a(1, "count", "offset"),
        )
    )
    cells_pt = [(16, 0.5), (32, 0.5)]
    ow = np.zeros((2, 3, 2, 2))
    ow[:, 1:, 0, 0] = 0.8  # the previous-token head forms at step 10
    ow[0, 2:, 1, 1] = 0.6  # the first run's two-back head at step 20
    add(
        E(
            "ngram.head_timing",
            a(cells_pt, "obj", "cells"),
            a([0, 10, 20], "array", "checkpoint_steps", shape=False),
            a(ow, "array", "offset_weight"),
            threshold=a(0.3, "prob"),
        )
    )
    timing_pt = ngram.head_timing(cells_pt, [0, 10, 20], ow)
    add(E("ngram.HeadTiming", a(32), a(0.5), a(10), a(20)))
    add(
        E(
            "ngram.plateau_lengths",
            a(timing_pt, "obj", "timing"),
            a(30, "int", "steps"),
            T=a(16, "int"),
            alpha=a(0.5, "pos"),
        )
    )
    add(E("ngram.first_heads", a(timing_pt, "obj", "timing")))
    add(
        E(
            "ngram.plateau_statistics",
            a(timing_pt, "obj", "timing"),
            a(30, "int", "steps"),
            Ts=a([16, 32], "obj"),
            alphas=a([0.5], "obj"),
            base_T=a(32, "int"),
            base_alpha=a(0.5, "pos"),
        )
    )
    add(
        E(
            "ngram.plot_plateau_sweep",
            a("skip", "obj", "axes"),
            a(timing_pt),
            a(30),
            Ts=a([16, 32]),
            alphas=a([0.5]),
            label="bad only",
        )
    )
    # --- lens
    add(
        E(
            "lens.coarse_gap",
            a(joint, "array", "joint"),
            a([0, 0, 1], "obj", "groups", none_ok=True),
        )
    )
    add(
        E(
            "lens.coarse_predictor",
            a(joint, "array", "joint"),
            a([0, 0, 1], "obj", "groups", none_ok=True),
        )
    )
    add(E("lens.conditional_entropy", a(joint, "array", "joint")))
    add(E("lens.ngram_levels", a(tokP, "stoch", "P"), a(3, "int", min=2), a(2, "int")))
    # --- Part I-III: collapse, plateaus, exact landscapes
    add(
        E(
            "ccmc.collapse_census",
            a([P3], "obj", "Ps"),
            a(20, "int", "length"),
            n_traj=a(4, "int"),
            seed=a(0, "seed"),
            tv=a(0.1, "prob"),
        )
    )
    add(
        E(
            "ccmc.collapse_limit_constant",
            a(0.3, "prob", max=0.49),
            prompt_length=a(3, "int", min=2, huge=False),
            prompt_weak=a(1, "int"),
        )
    )
    times = np.array([10.0, 20.0, 40.0])
    add(
        E(
            "ccmc.collapse_lower_bound",
            a(0.3, "prob"),
            a(times, "array", "t", shape=False),
            prompt_length=a(2, "int"),
            prompt_weak=a(1, "int"),
        )
    )
    fixed = ccmc.stable_fixed_points(P3)
    add(
        E(
            "ccmc.stable_fixed_points",
            a(P3, "stoch"),
            steps=a(50, "int"),
            dt=a(0.5, "pos"),
            tol=a(1e-7, "pos"),
            allow=("nan",),
        )
    )
    add(E("ccmc.interior_rates", a(P3, "stoch"), a(fixed[0][1], "probvec", "m"), h=a(1e-6, "pos")))
    add(E("ccmc.mle_exists", a(pop, "obj", "data")))
    add(E("ccmc.near_stability_boundary", a(P3, "stoch"), a(0.05, "pos", "delta")))
    add(
        E(
            "ccmc.weak_weak_exact",
            a(0.3, "prob"),
            a(30, "int", "length"),
            prompt=a([0, 1], "tokens", K=2),
            allow=("nan",),  # documented: nan below the prompt's length
        )
    )
    add(
        E(
            "ccmc.weak_frequency_exact",
            a(0.3, "prob"),
            a(30, "int", "length"),
            prompt=a([0, 1], "tokens", K=2),
            statistic=a("odds", "choice"),
            allow=("nan",),
        )
    )
    pos = torch.randn(8, 4, dtype=torch.float64) * 0.1
    add(
        E(
            "markov.layer_norm_unigram_hessian",
            a(0.3, "prob"),
            a(0.4, "prob"),
            a(pos, "array", "pos"),
            tied=a(True, "bool"),
            eps=a(1e-5, "pos"),
        )
    )
    add(
        E(
            "markov.threshold_bracket",
            a(np.array([0.6, 0.65, 0.7]), "array", "ps"),
            a(np.array([[0.9, 0.8], [0.6, 0.4], [0.1, 0.0]]), "array", "gaps"),
            level=a(0.5, "real"),
            allow=("nan",),
        )
    )
    add(E("ngram.Stage", a(0), a(10), a(1.0), a("bigram")))
    add(E("ngram.absent_mass", a(tok, "tokens", K=3), a(target, "probvec", "target"), a(3, "int")))
    Ts = np.array([8.0, 16.0, 32.0, 64.0])
    add(
        E(
            "ngram.decay_fits",
            a(Ts, "array", "T", shape=False),
            a(np.array([0.5, 0.25, 0.12, 0.06]), "array", "values", shape=False),
        )
    )
    stair = np.concatenate([np.full(10, 1.6), np.linspace(1.6, 1.5, 5), np.full(10, 1.5)])
    add(
        E(
            "ngram.detect_stages",
            a(stair, "array", "loss", shape=False),
            window=a(1, "int"),
            span=a(5, "int", min=2),
            tol=a(0.005, "pos"),
            min_points=a(3, "int"),
            min_separation=a(0.02, "nonneg"),
            cases=[("degenerate", "one point", {0: np.array([1.6])}, "raise")],
        )
    )
    stages = ngram.detect_stages(stair)
    ck = np.arange(0, 25 * 10, 10)
    w1s, w2s = np.full((25, 2), 0.5), np.zeros((25, 2))
    add(
        E(
            "ngram.label_stages",
            a(stages, "obj", "stages"),
            a(ck, "array", "steps", shape=False),
            a(w1s, "array", "w1"),
            a(w2s, "array", "w2"),
            threshold=a(0.3, "prob"),
        )
    )
    add(
        E(
            "ngram.histogram_levels",
            a(tok, "tokens", K=3),
            a(target, "probvec", "target"),
            a(3, "int"),
            a((1, 2), "obj", "ks"),
            eps=a(1e-8, "pos"),
        )
    )
    add(E("ngram.unmatched_mass", a(batch, "obj", "batch"), a(2, "int", "k")))
    add(
        E(
            "tools.sweeps.makespan",
            a([3.0, 2.0, 1.0], "obj", "shard_seconds"),
            a(2, "int", "workers"),
        )
    )
    work = costs.Work(matmul_flops=2e3, elementwise_flops=1e3, bytes=8e3, ops=12)
    add(E("tools.costs.count_work", a(lambda: torch.ones(3).exp(), "callable", "fn")))
    # every object has an answer (a digest, or None when it cannot be identified by value)
    add(E("tools.replay.fingerprint", a((1, torch.ones(2), "x"), "fixed")))
    add(E("tools.replay.replayable", a(lambda x: x, "callable", "fn")))
    hardware = a(costs.H100_SXM, "obj", "hardware")
    add(E("tools.costs.roofline_seconds", a(work, "obj", "work"), hardware, runs=a(4, "int")))
    hardware = a(costs.H100_SXM, "obj", "hardware")
    add(E("tools.costs.roofline_terms", a(work, "obj", "work"), hardware, runs=a(4, "int")))
    add(
        E(
            "tools.costs.Work",
            a(2e3, "nonneg", "matmul_flops"),
            a(1e3, "nonneg", "elementwise_flops"),
            a(8e3, "nonneg", "bytes"),
            a(12, "count", "ops", huge=False),
        )
    )
    add(
        E(
            "tools.costs.Hardware",
            a("a machine", "fixed"),
            a(1e12, "pos", "flops_per_s"),
            a(1e11, "pos", "bytes_per_s"),
            a(1e-6, "nonneg", "seconds_per_op"),
            a("", "fixed"),
        )
    )
    # --- stored paper-setting runs of Part III
    p3_settings = {
        "S": 3, "n": 3, "T": 8, "alpha": 0.5, "heads": 2, "steps": 4, "lr": 0.01,
        "batch": 4, "test_sequences": 8, "eval_every": 2,
    }  # fmt: skip
    add(
        E(
            "ngram.sweep_task",
            a(p3_settings, "obj", "settings"),
            a([{"run": 0}], "obj", "runs"),
            first_run=a(0, "count", huge=False),
            seed=a(0, "seed"),
        )
    )
    ao_settings = {
        "S": 3, "n": 3, "T": 6, "alpha": 1.0, "heads": [1, 1], "embedding": "onehot",
        "steps": 16, "lr": 0.005, "weight_decay": 0.0, "batch": 2, "test_sequences": 4,
        "eval_every": 8, "checkpoint_every": 8, "map_sequences": 2,
    }  # fmt: skip
    add(
        E(
            "ngram.attention_only_task",
            a(ao_settings, "obj", "settings"),
            a([{"run": 0}], "obj", "runs"),
            first_run=a(0, "count", huge=False),
            seed=a(0, "seed"),
        )
    )
    pl_settings = {"S": 3, "n": 3, "T": 6, "heads": 1, "steps": 4, "lr": 0.01, "batch": 2}
    add(
        E(
            "ngram.plateau_task",
            a(pl_settings, "obj", "settings"),
            a([{"T": 5, "alpha": 0.5}], "obj", "runs"),
            first_run=a(0, "count", huge=False),
            seed=a(0, "seed"),
        )
    )
    p3 = ngram.sweep_task(p3_settings, [{"run": 0}], first_run=0, seed=0)
    p3_eval = np.asarray(p3["shared"]["eval_steps"])
    p3_ck = np.asarray(p3["shared"]["checkpoint_steps"])
    add(
        E(
            "ngram.stage_summary",
            a(np.asarray(p3["test_loss"]), "array", "test_loss"),
            a(p3_eval, "array", "eval_steps", shape=False),
            a(p3_ck, "array", "checkpoint_steps", shape=False),
            a(np.asarray(p3["offset_weight"]), "array", "offset_weight"),
            threshold=a(0.3, "prob"),
            span=a(2, "int", min=2, huge=False),
            tol=a(0.008, "pos"),
            min_separation=a(0.02, "nonneg"),
        )
    )
    p3_rows = ngram.stage_summary(
        np.asarray(p3["test_loss"]), p3_eval, p3_ck, np.asarray(p3["offset_weight"]), span=2
    )
    add(E("ngram.stage_counts", a(p3_rows, "obj", "rows"), a(0.03, "pos", "lr")))
    add(
        E(
            "core.plot_seed_losses",
            a("skip", "obj", "ax"),
            a(p3_eval),
            a(np.asarray(p3["test_loss"])),
            label="bad only",
        )
    )
    return T


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
    for family, label, overrides, how in entry.cases:
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
    import sys

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
