"""Replay a computation from a result cache instead of running it again (opt-in).

A test session executes every chapter and every student notebook (the chapter less its
solutions); a class runs the same chapters many times on one server. Both spend their time
on the same training calls with the same inputs. :func:`install` wraps the package's long
computations — :func:`ccmc_lite.train_runs` (so every trainer of the book), Part I's
:func:`ccmc_lite.ccmc.sample_trajectories` and :func:`ccmc_lite.ccmc.fit_newton`, and Part
III's :func:`ccmc_lite.ngram.gradient_norm` (see :data:`REPLAYED`) — so that, with the
environment variable ``CCMC_RESULT_CACHE`` naming a folder, a call whose inputs were seen
before in that folder returns the stored result. The package itself knows nothing of this:
the test harness installs it in its notebook kernels through an IPython extension
(``%load_ext tools.replay``, or ``c.InteractiveShellApp.extensions = ["tools.replay"]`` in
a kernel's configuration; see the instructors' page).

**What "the same inputs" means.** A call is identified by :func:`fingerprint` of

* every argument, by value: numbers, strings, tensors and arrays (dtype, shape and bytes),
  containers, dataclasses, the package's own objects and models (their type and
  attributes, parameters included), and
  functions (their code, defaults, closure cells and the globals the code reads, so a
  notebook's ``lambda: ngram.SimplifiedTransformer(5, T, 2)`` is identified through the
  value of ``T``);
* the package's source files, the versions of Python, torch and NumPy, the CPU, torch's
  thread count and default dtype;
* the global random states of ``random``, NumPy and torch, if the call changed them (a
  replay then leaves them as the real call did; see :func:`replayable`).

Anything the fingerprint cannot identify (an object of a class defined outside the
package, torch or NumPy, a generator, an open file) makes the call run normally and store
nothing: a cache miss is always safe, a wrong hit is what the fingerprint rules out.
Results are stored with ``torch.save`` and read back with pickle: only point
``CCMC_RESULT_CACHE`` at a folder you trust.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import importlib
import os
import platform
import random
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch

import ccmc_lite
from ccmc_lite.core.validation import check_callable

from .stored import machine_description

__all__ = [
    "REPLAYED",
    "RESULT_CACHE_ENV",
    "fingerprint",
    "install",
    "load_ipython_extension",
    "replayable",
    "uninstall",
]

#: The environment variable naming the result cache's folder (unset: no cache).
RESULT_CACHE_ENV = "CCMC_RESULT_CACHE"

#: Modules whose functions, classes and objects are identified by name (their code is
#: pinned by the package's sources and the library versions in every key).
_NAMED_HOMES = ("ccmc_lite", "torch", "numpy", "math", "builtins", "functools", "operator")

F = TypeVar("F", bound=Callable[..., Any])


class _Unidentifiable(Exception):
    """An object the fingerprint cannot pin down by value."""


def _package(module_name: str) -> str:
    """The top-level package of a dotted module name (``"ccmc_lite.core"`` -> ``"ccmc_lite"``)."""
    return module_name.split(".")[0]


def _home(obj: Any) -> str:
    """The top-level package where ``obj`` (a function, class or instance's type) is defined."""
    return _package(getattr(obj, "__module__", None) or "")


def _feed(h: Any, obj: Any, seen: set[int]) -> None:
    """Write an unambiguous description of ``obj`` into the hash ``h``."""
    put = h.update
    if obj is None or isinstance(obj, (bool, int, float, complex, str, bytes)):
        put(f"{type(obj).__name__}:{obj!r};".encode())
        return
    if isinstance(obj, torch.Tensor):
        t = obj.detach()
        if t.layout != torch.strided or t.is_quantized or t.device.type == "meta":
            raise _Unidentifiable(f"a {t.layout} tensor on {t.device.type}")
        t = t.resolve_conj().resolve_neg()
        put(f"tensor:{t.dtype}:{tuple(t.shape)}:{t.device.type}:{t.requires_grad};".encode())
        data = t.cpu().contiguous().reshape(-1)  # (numel,)
        put(data.view(torch.uint8).numpy().tobytes() if data.numel() else b"")
        return
    if isinstance(obj, np.ndarray):
        if obj.dtype == object:
            raise _Unidentifiable("an object array")
        put(f"ndarray:{obj.dtype.str}:{obj.shape};".encode())
        put(np.ascontiguousarray(obj).tobytes())
        return
    if isinstance(obj, np.generic):
        put(f"np:{obj.dtype.str}:{obj!r};".encode())
        return
    if isinstance(obj, (torch.dtype, torch.device, enum.Enum)):
        put(f"{type(obj).__qualname__}:{obj!r};".encode())
        return
    if isinstance(obj, types.ModuleType):
        if _package(obj.__name__) not in _NAMED_HOMES:
            raise _Unidentifiable(f"module {obj.__name__}")
        put(f"module:{obj.__name__};".encode())
        return
    if id(obj) in seen:  # a cycle: name the revisit, do not follow it
        put(b"cycle;")
        return
    seen = seen | {id(obj)}
    if isinstance(obj, (tuple, list)):
        put(f"{type(obj).__name__}[{len(obj)}]".encode())
        for item in obj:
            _feed(h, item, seen)
        return
    if isinstance(obj, dict):
        items = sorted((_digest_of(k, seen), k, v) for k, v in obj.items())
        put(f"dict[{len(items)}]".encode())
        for key_digest, _, value in items:
            put(key_digest.encode())
            _feed(h, value, seen)
        return
    if isinstance(obj, (set, frozenset)):
        put(f"set[{len(obj)}]".encode())
        put("".join(sorted(_digest_of(x, seen) for x in obj)).encode())
        return
    if isinstance(obj, functools.partial):
        put(b"partial;")
        _feed(h, (obj.func, obj.args, obj.keywords), seen)
        return
    if isinstance(obj, types.MethodType):
        put(b"method;")
        _feed(h, (obj.__self__, obj.__func__), seen)
        return
    if isinstance(obj, types.FunctionType):
        _feed_function(h, obj, seen)
        return
    if isinstance(obj, (type, types.BuiltinFunctionType)):  # classes, built-in functions
        if _home(obj) not in _NAMED_HOMES:
            raise _Unidentifiable(f"{obj!r}, defined outside the package")
        put(f"named:{obj.__module__}.{obj.__qualname__};".encode())
        return
    cls = type(obj)
    if _home(cls) == "ccmc_lite" or (
        (isinstance(obj, torch.nn.Module) or dataclasses.is_dataclass(obj))
        and _home(cls) in _NAMED_HOMES
    ):
        # the package's objects (dataclasses, streams, models, ...) and torch's modules:
        # their type and their state (a model's parameters, buffers, submodules and hooks)
        put(f"object:{cls.__module__}.{cls.__qualname__};".encode())
        state = dict(getattr(obj, "__dict__", {}))
        for name in getattr(cls, "__slots__", ()):
            if hasattr(obj, name):
                state[name] = getattr(obj, name)
        _feed(h, state, seen)
        return
    raise _Unidentifiable(f"an object of type {type(obj).__qualname__}")


def _feed_code(h: Any, code: types.CodeType, seen: set[int]) -> None:
    """A code object by what it does: bytecode, constants and names (not file or line)."""
    h.update(f"code:{code.co_argcount}:{code.co_kwonlyargcount}:{code.co_flags};".encode())
    h.update(code.co_code)
    for name in (*code.co_names, "|", *code.co_varnames, "|", *code.co_freevars):
        h.update(f"{name},".encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _feed_code(h, const, seen)
        else:
            _feed(h, const, seen)


def _global_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def _feed_function(h: Any, fn: types.FunctionType, seen: set[int]) -> None:
    h.update(f"function:{fn.__module__}.{fn.__qualname__};".encode())
    _feed(h, (fn.__defaults__, fn.__kwdefaults__), seen)
    for cell in fn.__closure__ or ():
        try:
            contents = cell.cell_contents
        except ValueError:  # an empty cell (a name bound later, e.g. the function itself)
            h.update(b"empty-cell;")
            continue
        _feed(h, contents, seen)
    if _home(fn) == "ccmc_lite":
        return  # its code and the module globals it reads are the package's sources
    _feed_code(h, fn.__code__, seen)
    glob = fn.__globals__
    for name in sorted(_global_names(fn.__code__)):
        if name in glob:  # else a builtin, an attribute name, or undefined (it would fail)
            h.update(f"global:{name}=".encode())
            _feed(h, glob[name], seen)


def _digest_of(obj: Any, seen: set[int]) -> str:
    h = hashlib.sha256()
    _feed(h, obj, seen)
    return h.hexdigest()


def fingerprint(*objects: Any) -> str | None:
    """A hex digest that identifies ``objects`` by value, or ``None`` if one cannot be.

    Two calls give the same digest exactly when the objects are equal in the sense of the
    module docstring (same tensors bit for bit, same code and captured values for
    functions, ...). ``None`` means that some object (or something it refers to) is of a
    kind the fingerprint does not pin down, e.g. an instance of a class defined in a
    notebook that is not a dataclass.
    """
    try:
        return _digest_of(objects, set())
    except _Unidentifiable:
        return None


@functools.lru_cache(maxsize=1)
def _environment() -> str:
    """The package's sources, library versions and machine: part of every key."""
    h = hashlib.sha256()
    root = Path(ccmc_lite.__file__).resolve().parent
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    h.update(f"{sys.version}|{torch.__version__}|{np.__version__}|{machine_description()}".encode())
    h.update(f"{platform.machine()}".encode())
    return h.hexdigest()


def _settings() -> tuple[Any, ...]:
    """Global settings that change a computation's numbers."""
    return (
        torch.get_num_threads(),
        torch.get_default_dtype(),
        torch.are_deterministic_algorithms_enabled(),
    )


def _random_states() -> tuple[Any, ...]:
    """The global random states of torch (CPU), NumPy and ``random``."""
    legacy = np.random.get_state()  # noqa: NPY002 (the global state is what a call may read)
    return torch.get_rng_state(), legacy, random.getstate()


def _restore_random_states(state: tuple[Any, ...]) -> None:
    torch_state, numpy_state, python_state = state
    torch.set_rng_state(torch_state)
    np.random.set_state(numpy_state)  # noqa: NPY002
    random.setstate(python_state)


def _store(path: Path, payload: dict[str, Any]) -> None:
    partial = path.with_suffix(f".{os.getpid()}.part")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(payload, partial)
        partial.replace(path)  # atomic: a reader never sees half a file
    except Exception:  # an unpicklable result is simply not stored
        partial.unlink(missing_ok=True)


def replayable(fn: F) -> F:
    """Let ``fn`` replay its result from ``$CCMC_RESULT_CACHE`` (see the module docstring).

    Without the variable, or when the call's inputs have no :func:`fingerprint`, ``fn``
    runs as it is. A replay prints one line naming the stored file. ``fn`` must be
    deterministic given its arguments and the global state of the module docstring.

    The global random states enter the key only if the real call changed them: a call
    that leaves them as it found them (e.g. :func:`ccmc_lite.train_runs`, which
    seeds its own generators) drew nothing from them, so its result does not depend on
    them, and it replays from any random state.
    """
    check_callable("fn", fn)
    name = f"{fn.__module__}.{fn.__qualname__}"

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        folder = os.environ.get(RESULT_CACHE_ENV, "")
        if not folder:
            return fn(*args, **kwargs)
        key = fingerprint(name, _environment(), _settings(), args, kwargs)
        if key is None:
            return fn(*args, **kwargs)
        before = _random_states()
        keyed = fingerprint(key, before)
        assert keyed is not None  # states are tensors, arrays and tuples of numbers
        paths = [Path(folder) / f"{fn.__name__}-{k[:32]}.pt" for k in (key, keyed)]
        for path in paths:
            if path.exists():
                stored = torch.load(path, weights_only=False)
                if stored["random_states_after"] is not None:
                    _restore_random_states(stored["random_states_after"])
                print(f"(replayed from the result cache: {path.name})")
                return stored["result"]
        result = fn(*args, **kwargs)
        after = _random_states()
        if fingerprint(after) == fingerprint(before):
            _store(paths[0], {"result": result, "random_states_after": None})
        else:
            _store(paths[1], {"result": result, "random_states_after": after})
        return result

    wrapper.__replays__ = True  # type: ignore[attr-defined]  # what uninstall() undoes
    return wrapper  # type: ignore[return-value]


#: The computations :func:`install` wraps, as ``"module:function"`` where they are defined.
REPLAYED = (
    "ccmc_lite.core.training:train_runs",
    "ccmc_lite.ccmc.chain:sample_trajectories",
    "ccmc_lite.ccmc.mle:fit_newton",
    "ccmc_lite.ngram.landscape:gradient_norm",
)


def install() -> list[str]:
    """Wrap each function of :data:`REPLAYED` with :func:`replayable`, wherever it is bound.

    Every ``ccmc_lite`` module already imported that holds the original function (its own
    module, the subpackage and the top level that re-export it, a module that imported
    it) gets the wrapper; a module imported later takes the wrapper from where it is
    defined. Call it before a notebook's first import of a part. Returns where the
    wrappers were bound; a second call changes nothing.
    """
    bound: list[str] = []
    for target in REPLAYED:
        module_name, _, name = target.partition(":")
        original = getattr(importlib.import_module(module_name), name)
        if getattr(original, "__replays__", False):
            continue  # installed before
        wrapper = replayable(original)
        for mod_name, module in list(sys.modules.items()):
            if mod_name.split(".")[0] != "ccmc_lite" or module is None:
                continue
            for attr, value in list(vars(module).items()):
                if value is original:
                    setattr(module, attr, wrapper)
                    bound.append(f"{mod_name}.{attr}")
    return bound


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext tools.replay``: :func:`install` in this kernel."""
    install()


def uninstall() -> list[str]:
    """Undo :func:`install`: every wrapper it bound is the original function again."""
    restored: list[str] = []
    for mod_name, module in list(sys.modules.items()):
        if mod_name.split(".")[0] != "ccmc_lite" or module is None:
            continue
        for attr, value in list(vars(module).items()):
            original = getattr(value, "__wrapped__", None)
            if callable(value) and getattr(value, "__replays__", False) and original is not None:
                setattr(module, attr, original)
                restored.append(f"{mod_name}.{attr}")
    return restored
