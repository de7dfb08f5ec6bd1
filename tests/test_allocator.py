"""glibc's allocator settings for batched training (ccmc_lite.core.allocator).

The settings act on the whole process and only once, so each behaviour is checked in a fresh
Python process that loads the module on its own (it imports only the standard library) and
asks glibc where a 24 MiB block came from: above glibc's default mmap threshold such a block
is a fresh mapping of its own (``mallinfo2().hblkhd`` grows); with the settings applied it
comes from the heap.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

import ccmc_lite
from book_tools import ROOT
from ccmc_lite.core import ALLOCATOR_ENV, ALLOCATOR_OPT_OUT_ENV, allocator, training

GLIBC = sys.platform.startswith("linux") and allocator._glibc() is not None
needs_glibc = pytest.mark.skipif(not GLIBC, reason="needs Linux with glibc")

MODULE = str(ROOT / "ccmc_lite" / "core" / "allocator.py")
PROBE = f"""
import ctypes, importlib.util, json
spec = importlib.util.spec_from_file_location("alloc", {MODULE!r})
alloc = importlib.util.module_from_spec(spec); spec.loader.exec_module(alloc)
first = alloc.tune_allocator()
second = alloc.tune_allocator()

class Mallinfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                 "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Mallinfo2
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
before = libc.mallinfo2().hblkhd
block = libc.malloc(24 * 2**20)
mapped = libc.mallinfo2().hblkhd - before
libc.free(block)
print(json.dumps({{"first": first, "second": second, "mapped": mapped}}))
"""


def _probe(**env: str) -> dict:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("MALLOC_") and k not in ("GLIBC_TUNABLES", ALLOCATOR_OPT_OUT_ENV)
    }
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        env={**clean, **env},
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _values() -> dict[str, int]:
    return {k: int(v) for k, v in ALLOCATOR_ENV.items()}


@needs_glibc
def test_the_settings_keep_a_24_mib_block_in_the_heap():
    default = _probe(**{ALLOCATOR_OPT_OUT_ENV: "system"})
    assert default["first"] == default["second"] == {}
    assert default["mapped"] >= 24 * 2**20  # glibc's default: a mapping of its own
    tuned = _probe()
    assert tuned["first"] == tuned["second"] == _values()
    assert tuned["mapped"] == 0  # from the heap


@needs_glibc
def test_a_setting_from_the_environment_is_left_alone():
    kept = _probe(MALLOC_MMAP_THRESHOLD_=str(128 * 2**10))
    assert kept["first"] == {k: v for k, v in _values().items() if k != "MALLOC_MMAP_THRESHOLD_"}
    assert kept["mapped"] >= 24 * 2**20  # the caller's 128 KiB threshold still rules
    tunable = _probe(GLIBC_TUNABLES="glibc.malloc.mmap_threshold=131072:glibc.malloc.top_pad=0")
    assert set(tunable["first"]) == {"MALLOC_TRIM_THRESHOLD_"}
    assert tunable["mapped"] >= 24 * 2**20


def test_dev_py_exports_the_same_settings():
    spec_env = subprocess.run(
        [sys.executable, "-c", "import dev, json; print(json.dumps(dev.allocator_env()))"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert json.loads(spec_env) == ALLOCATOR_ENV
    assert set(ALLOCATOR_ENV) == set(allocator._PARAMETERS)


def test_a_bad_choice_is_refused_and_other_systems_are_left_alone(monkeypatch):
    monkeypatch.setattr(allocator, "_applied", None)
    monkeypatch.setenv(ALLOCATOR_OPT_OUT_ENV, "fast")
    with pytest.raises(ValueError, match=r"CCMC_ALLOCATOR must be 'system'.*got 'fast'"):
        allocator.tune_allocator()
    monkeypatch.delenv(ALLOCATOR_OPT_OUT_ENV)
    monkeypatch.setattr(allocator.sys, "platform", "darwin")
    assert allocator._glibc() is None
    assert allocator.tune_allocator() == {}
    assert allocator._applied == {}  # decided once per process


def _train_tiny() -> None:
    """Two steps of two tiny linear models through ``train_runs``."""
    training.train_runs(
        lambda: torch.nn.Linear(2, 1),
        lambda m, x: m(x).pow(2).mean(),
        lambda step, runs, g: torch.randn(len(runs), 4, 2, generator=g),
        n_runs=2,
        config=ccmc_lite.TrainConfig(steps=2, lr=1e-2),
        seed=0,
        progress=False,
    )


def test_train_runs_tunes_the_allocator_before_it_trains(monkeypatch):
    calls: list[int] = []
    monkeypatch.setattr(training, "tune_allocator", lambda: calls.append(1) or {})
    _train_tiny()
    assert calls == [1]
    monkeypatch.setenv(ALLOCATOR_OPT_OUT_ENV, "fast")
    monkeypatch.setattr(training, "tune_allocator", allocator.tune_allocator)
    monkeypatch.setattr(allocator, "_applied", None)
    with pytest.raises(ValueError, match="CCMC_ALLOCATOR"):
        _train_tiny()
