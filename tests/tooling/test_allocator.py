"""glibc's allocator settings for batched training (tools/allocator.py).

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

from book_tools import ROOT
from tools import allocator
from tools.allocator import ALLOCATOR_ENV, ALLOCATOR_OPT_OUT_ENV

GLIBC = sys.platform.startswith("linux") and allocator._glibc() is not None
needs_glibc = pytest.mark.skipif(not GLIBC, reason="needs Linux with glibc")

MODULE = str(ROOT / "tools" / "allocator.py")
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


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="dev.py exports on Linux")
def test_dev_py_gives_every_process_it_starts_the_settings():
    """dev.py's commands export them (a process they start inherits them); a value the
    caller set is kept."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    script = (
        "import dev, json, os; dev.export_allocator_env(); "
        "print(json.dumps({k: v for k, v in os.environ.items() if k.startswith('MALLOC_')}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={**clean, "MALLOC_TOP_PAD_": "4096"},
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert json.loads(out.strip().splitlines()[-1]) == {**ALLOCATOR_ENV, "MALLOC_TOP_PAD_": "4096"}


def test_binders_start_script_exports_the_settings():
    """repo2docker runs ``start`` before JupyterLab: every kernel inherits the settings."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run(
        ["bash", str(ROOT / "start"), "env"],
        env=clean,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    exported = dict(line.split("=", 1) for line in out.splitlines() if line.startswith("MALLOC_"))
    assert exported == ALLOCATOR_ENV
