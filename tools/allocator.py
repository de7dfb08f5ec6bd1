"""Keep a training step's few-megabyte tensors in the heap: glibc's allocator settings.

A batched training step allocates and frees the same few-megabyte tensors at every step
(at the book's Part II sweep, 108 runs x batch 16 x 32 x 32 attention scores: 7 MiB each).
glibc's ``malloc`` serves a block above its *mmap threshold* with a fresh ``mmap`` and
returns it to the kernel when it is freed, and it gives the top of its heap back when more
than the *trim threshold* is free. Both thresholds adapt to the blocks it sees, yet with a
training step's mixture of sizes the memory keeps going back: that Part II sweep takes
over a thousand page faults (first touches of newly mapped pages) per step with glibc's
defaults and almost none with the settings below (``benchmarks/bench_part2.py`` measures
both). :func:`tune_allocator` fixes the three
parameters with ``mallopt(3)`` so that such blocks stay in the heap and the heap stays large:
blocks up to 32 MiB (the largest mmap threshold glibc accepts on 64-bit) come from the
heap, and up to 512 MiB of free heap is kept. This changes no number a computation gives,
only how fast it gets them, at the cost of keeping up to that much freed memory
in the process.

The book's ``dev.py`` passes these values (:data:`ALLOCATOR_ENV`) as environment
variables to every process it starts (tests, notebook kernels, the build, the benchmarks and
the stored-run writers), so that they apply from a process's first allocation; a parameter
set in the environment (``MALLOC_*_`` or ``GLIBC_TUNABLES``) is never overridden.
:func:`tune_allocator` applies them to a running process; ``CCMC_ALLOCATOR=system`` keeps
glibc's own behaviour. Outside Linux with glibc this does nothing. The benchmarks measure
glibc's defaults against these settings in fresh processes.

This module imports only the standard library, so that ``dev.py`` can read
:data:`ALLOCATOR_ENV` from it before any environment exists.
"""

from __future__ import annotations

import ctypes
import os
import sys

__all__ = ["ALLOCATOR_ENV", "ALLOCATOR_OPT_OUT_ENV", "shell_exports", "tune_allocator"]

#: The settings, as the environment variables glibc reads at start-up (bytes).
ALLOCATOR_ENV: dict[str, str] = {
    "MALLOC_MMAP_THRESHOLD_": str(32 * 2**20),
    "MALLOC_TRIM_THRESHOLD_": str(512 * 2**20),
    "MALLOC_TOP_PAD_": str(64 * 2**20),
}
#: ``CCMC_ALLOCATOR=system`` keeps glibc's defaults; unset, empty or ``book`` tunes.
ALLOCATOR_OPT_OUT_ENV = "CCMC_ALLOCATOR"

# mallopt(3) parameter numbers (glibc's malloc.h) and the GLIBC_TUNABLES names of each.
_PARAMETERS = {
    "MALLOC_TRIM_THRESHOLD_": (-1, "glibc.malloc.trim_threshold"),
    "MALLOC_TOP_PAD_": (-2, "glibc.malloc.top_pad"),
    "MALLOC_MMAP_THRESHOLD_": (-3, "glibc.malloc.mmap_threshold"),
}
_applied: dict[str, int] | None = None  # what this process's first call applied


def _glibc() -> ctypes.CDLL | None:
    """The C library of this process when it is glibc (``mallopt`` with its semantics)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        os.confstr("CS_GNU_LIBC_VERSION")  # only glibc answers this
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (AttributeError, OSError, ValueError):
        return None
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return libc


def _set_in_environment(name: str, tunable: str) -> bool:
    tunables = os.environ.get("GLIBC_TUNABLES", "")
    return bool(os.environ.get(name)) or any(
        item.split("=", 1)[0].strip() == tunable for item in tunables.split(":")
    )


def tune_allocator() -> dict[str, int]:
    """Fix glibc's mmap threshold, trim threshold and top pad for batched training.

    Applies :data:`ALLOCATOR_ENV` with ``mallopt(3)`` to the running process,
    except the parameters already set in its environment (``MALLOC_MMAP_THRESHOLD_`` and the others,
    or ``GLIBC_TUNABLES``), and returns the parameters it set, in bytes. Only the first call
    of a process acts; later calls return the same dict. Returns ``{}`` outside Linux with
    glibc and with ``CCMC_ALLOCATOR=system``. See the module docstring for why.

    Raises
    ------
    ValueError
        If ``$CCMC_ALLOCATOR`` is set to anything but ``system``, ``book`` or the empty string.
    """
    global _applied
    choice = os.environ.get(ALLOCATOR_OPT_OUT_ENV, "").strip()
    if choice not in ("", "book", "system"):
        raise ValueError(
            f"${ALLOCATOR_OPT_OUT_ENV} must be 'system' (glibc's defaults) or 'book' (tuned); "
            f"got {choice!r}"
        )
    if _applied is not None:
        return dict(_applied)
    applied: dict[str, int] = {}
    libc = _glibc() if choice != "system" else None
    if libc is not None:
        for name, (param, tunable) in _PARAMETERS.items():
            if _set_in_environment(name, tunable):
                continue
            value = int(ALLOCATOR_ENV[name])
            if libc.mallopt(param, value) == 1:  # 1: success, 0: refused
                applied[name] = value
    _applied = applied
    return dict(applied)


def shell_exports() -> str:
    """``export NAME=value`` lines for :data:`ALLOCATOR_ENV` (keeping values already set).

    ``eval "$(python3 tools/allocator.py)"`` gives a shell, and every process it starts
    (Jupyter and its kernels), the settings from its first allocation; Binder's ``start``
    script does this.
    """
    return "\n".join(
        f'export {name}="${{{name}:-{value}}}"' for name, value in ALLOCATOR_ENV.items()
    )


if __name__ == "__main__":
    print(shell_exports())
