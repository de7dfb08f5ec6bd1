"""How much of the gap to this machine's limit is MKL's choice of code path on an AMD CPU?

torch's CPU wheel does its matrix products with Intel's oneMKL. MKL picks its code path by
asking whether the processor is an Intel one (its internal ``mkl_serv_intel_cpu_true``); on
the AMD EPYC build machines the answer is no, and MKL runs a generic path although the CPU
has every instruction (AVX2, FMA) of the path it takes on Intel processors. Large products
barely notice (the ``n = 2048`` matmul peak of ``bench_limits``); the many tiny products of
the book's models do: inner dimension 4 or 8, 32 × 32 attention blocks, thousands per call.

This benchmark measures the same figures twice, each in a fresh process, one after the
other: with MKL's own choice, and with a one-function library preloaded (``LD_PRELOAD``)
whose ``mkl_serv_intel_cpu_true`` answers yes, so that MKL takes its AVX2 path. The figures
are the Part II step at the paper's settings against its roofline limit (``bench_limits``)
and the foundation trainer's batched-vs-loop ratio (``bench_foundation``). It is a
measurement only: nothing in the book, the package or the tests preloads the library, the
numbers of the book are computed on MKL's own path, and the library is built in a temporary
folder (with the system's C compiler) and deleted afterwards. On other CPUs, or without a C
compiler, it reports why it measured nothing.

    python3 -m tools.mkl_dispatch
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from .stored import cpu_field

HERE = Path(__file__).resolve().parents[1] / "benchmarks"  # the benchmarks it re-runs

#: The whole preloaded library: MKL's vendor check, answered "Intel".
SHIM_C = "int mkl_serv_intel_cpu_true(void) { return 1; }\n"

#: What each child process measures and prints as one JSON line.
CHILD = """
import ctypes, json, sys
sys.path.insert(0, {here!r})
import bench_foundation, bench_limits
try:
    forced = ctypes.CDLL(None).mkl_serv_intel_cpu_true() == 1
except AttributeError:
    forced = False
limits = bench_limits.run(quick={quick})
trainer = bench_foundation.trainer_ratio(n_runs=64, steps={steps})
print(json.dumps({{"avx2_path_forced": forced, **limits, **trainer}}))
"""

#: Figures copied from each child's output (name -> key in the child's JSON).
FIGURES = {
    "paper_step_s": "paper_step_s",
    "paper_step_times_from_limit": "times_from_limit",
    "matmul_peak_gflops": "matmul_peak_gflops",
    "foundation_batched_ms_per_run_step": "trainer_batched_ms_per_run_step",
    "foundation_looped_ms_per_run_step": "trainer_looped_ms_per_run_step",
    "foundation_ratio": "trainer_speedup_batched_vs_loop",
}


def build_shim(folder: Path) -> Path | None:
    """Compile :data:`SHIM_C` into ``folder``; ``None`` without a working C compiler."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    source, library = folder / "shim.c", folder / "libmkl_intel_answer.so"
    source.write_text(SHIM_C)
    done = subprocess.run(
        [compiler, "-shared", "-fPIC", "-O2", "-o", str(library), str(source)],
        capture_output=True,
        text=True,
    )
    return library if done.returncode == 0 and library.exists() else None


def _child(quick: bool, preload: Path | None) -> dict[str, Any]:
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if preload is not None:
        env["LD_PRELOAD"] = str(preload)
    code = CHILD.format(here=str(HERE), quick=quick, steps=10 if quick else 40)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def run(quick: bool = False) -> dict[str, object]:
    """Both code paths, measured one after the other in fresh processes."""
    vendor = cpu_field("vendor_id") or ""
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        return {"skipped": f"needs Linux on x86_64; this is {platform.system()} on "
                           f"{platform.machine()}"}  # fmt: skip
    if vendor != "AuthenticAMD":
        return {"skipped": f"CPU vendor {vendor or 'unknown'}: MKL already takes its own path"}
    with tempfile.TemporaryDirectory(prefix="ccmc-mkl-") as tmp:
        shim = build_shim(Path(tmp))
        if shim is None:
            return {"skipped": "no working C compiler (cc or gcc) to build the library"}
        mkl = _child(quick, None)
        avx2 = _child(quick, shim)
    if mkl["avx2_path_forced"] or not avx2["avx2_path_forced"]:
        raise RuntimeError("the preloaded library did not (only) take effect where intended")
    out: dict[str, object] = {"cpu_vendor": vendor, "threads_trainer": mkl["trainer_threads"]}
    for name, key in FIGURES.items():
        out[f"{name}_mkl_choice"] = mkl[key]
        out[f"{name}_avx2_path"] = avx2[key]
    out["paper_step_speedup_avx2_path"] = round(mkl["paper_step_s"] / avx2["paper_step_s"], 2)
    out["foundation_batched_speedup_avx2_path"] = round(
        mkl["trainer_batched_ms_per_run_step"] / avx2["trainer_batched_ms_per_run_step"], 2
    )
    return out


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
