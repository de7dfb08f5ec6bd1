"""The stored sweeps as re-run on one GPU, and the step times measured there.

``python3 dev.py gpu-runs`` (``tools/gpu_runs.py``) re-runs some stored sweeps on a CUDA GPU
with the same code, settings and seeds, and times training steps there; the running page and
the Reproduction pages compare them with the CPU runs that ship with the package. These
files are evidence about speed and rounding on other hardware, so they live here, in
``tools/data/``, not in the package readers install.
"""

from __future__ import annotations

import json
from pathlib import Path

from ccmc_lite.core.validation import check_choice
from ccmc_lite.stored import StoredRun, load_stored

__all__ = ["GPU_RUNS", "GPU_TIMINGS", "gpu_run_names", "gpu_timings", "load_gpu_run"]

#: The stored sweeps re-run on a GPU, ``NAME.json`` in the CPU files' format.
GPU_RUNS = Path(__file__).resolve().parent / "data" / "gpu_runs"
#: What ``python3 dev.py gpu-runs`` timed (see :func:`gpu_timings`).
GPU_TIMINGS = GPU_RUNS.parent / "gpu_timings.json"


def gpu_run_names() -> list[str]:
    """Names of the stored runs that were re-run on a GPU (a subset of the stored names)."""
    return sorted(p.stem for p in GPU_RUNS.glob("*.json"))


def load_gpu_run(name: str) -> StoredRun:
    """The stored run ``name`` as re-run on a GPU: same code, settings and seeds; its
    provenance names the GPU. Raises ``ValueError`` naming those that were re-run."""
    check_choice("name", name, gpu_run_names())
    return load_stored(name, path=GPU_RUNS / f"{name}.json")


def gpu_timings() -> dict:
    """What ``python3 dev.py gpu-runs`` measured on a GPU, with its machine and date.

    ``grid``: seconds per training step of a shard of Fig. 4 runs at the paper's settings
    (Makkuva et al. 2024, Table 2), tied and untied, from two runs of different lengths
    (their difference: start-up and evaluations cancel), and the shard's peak GPU memory;
    ``part3_step``: milliseconds per step of Varre et al.'s Sec. 5 training with 1, 4 and 25
    runs batched, on the GPU (``cuda_ms_per_step_<R>_runs``) and on one core of the same
    machine (``cpu_...``), measured the same way; ``sweeps``: wall seconds of each sweep
    re-run there (:func:`load_gpu_run`); ``unfinished``: sweeps that did not finish within
    the time the GPU was lent, with how long they had run. The top-level ``date`` and
    ``command`` are those of the last run of the script; ``grid`` and ``part3_step`` carry
    their own dates, a sweep's file its own.
    """
    return dict(json.loads(GPU_TIMINGS.read_text(encoding="utf-8")))
