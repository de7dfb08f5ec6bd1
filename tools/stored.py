"""Write a sweep's results with their provenance: the files ``ccmc_lite`` ships and loads.

:func:`save_stored` writes what :func:`tools.sweeps.run_sweep` returned as a JSON file that
:func:`ccmc_lite.stored.load_stored` reads: the sweep (task, settings, per-run settings, seed),
its arrays (float64 ``repr``, which reads back exactly), the values shared by all runs, and
the provenance (:data:`ccmc_lite.stored.PROVENANCE_KEYS`: versions, date, machine, device, wall
time, and the command that regenerates it). :func:`machine_description` names the machine:
stored runs re-run bit for bit only on the same kind.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

import ccmc_lite

from .sweeps import SweepResult

__all__ = ["cpu_field", "machine_description", "package_version", "provenance", "save_stored"]


def provenance() -> dict[str, str]:
    """Where and when a file is written: package, torch and Python versions, date, machine."""
    return {
        "package_version": package_version(),
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "created": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": machine_description(),
    }


def package_version() -> str:
    """The version of the ``ccmc_lite`` that wrote a file."""
    return ccmc_lite.__version__


def cpu_field(field: str) -> str | None:
    """The value of ``field`` in ``/proc/cpuinfo`` (first processor), ``None`` where absent."""
    if not isinstance(field, str) or not field:
        raise TypeError(f"field must be the name of a /proc/cpuinfo field; got {field!r}")
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith(field):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _cpu_model() -> str:
    """The processor's name (``model name`` of ``/proc/cpuinfo`` on Linux)."""
    return cpu_field("model name") or platform.processor() or "unknown CPU"


def machine_description() -> str:
    """Architecture, processor, cores and OS (and the GPU): where a stored run was made.

    The processor matters: float32 kernels differ between CPU families (MKL picks other
    code paths on AMD than on Intel), so results match bit for bit only on the same kind.
    The processor's name can hide its generation (virtual machines often report only
    "AMD EPYC"), so the vector instructions torch's own kernels use on it follow in
    parentheses (``torch.backends.cpu.get_cpu_capability()``, e.g. ``AVX2`` or ``AVX512``):
    they change both the speed and the rounding of its elementwise kernels.
    """
    cores = os.cpu_count() or 0
    cpu = _cpu_model()
    capability = getattr(torch.backends.cpu, "get_cpu_capability", lambda: "")()
    if capability:
        cpu += f" ({capability})"
    text = f"{platform.machine()}, {cpu}, {cores} cores, {platform.system()}"
    if torch.cuda.is_available():
        text += f", {torch.cuda.get_device_name(0)}"
    return text


def _encode(arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    out = {}
    for key, value in arrays.items():
        arr = np.asarray(value)
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"array {key!r} must be numeric; got dtype {arr.dtype}")
        if arr.dtype.kind == "f" and not np.isfinite(arr).all():
            raise ValueError(f"array {key!r} contains NaN or inf; refusing to store it")
        out[key] = {"dtype": str(arr.dtype), "shape": list(arr.shape), "data": arr.ravel().tolist()}
    return out


def save_stored(result: SweepResult, path: str | os.PathLike[str], *, command: str) -> Path:
    """Write ``result`` with its provenance to ``path`` (a ``.json`` file); return the path."""
    if not isinstance(result, SweepResult):
        raise TypeError(f"result must be a SweepResult; got {type(result).__name__}")
    if not isinstance(command, str) or not command.strip():
        raise ValueError("command must say how to regenerate the file (a non-empty string)")
    path = Path(path)
    if path.suffix != ".json":
        raise ValueError(f"path must end in .json; got {path}")
    blob = {
        "name": path.stem,
        "sweep": {
            "name": result.sweep.name,
            "task": result.sweep.task,
            "settings": result.sweep.settings,
            "runs": list(result.sweep.runs),
            "seed": result.sweep.seed,
        },
        "shared": json.loads(json.dumps(result.shared, default=_plain)),
        "provenance": {
            **provenance(),
            "device": result.device,
            "wall_seconds": round(result.seconds, 1),
            "shard_seconds": [round(s, 1) for s in result.shard_seconds],
            "shard_runs": list(result.shard_runs),
            "torch_threads": torch.get_num_threads(),
            "command": command,
        },
        "arrays": _encode(result.arrays),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(blob, separators=(",", ":")) + "\n", encoding="utf-8")
    return path


def _plain(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    raise TypeError(f"cannot store a value of type {type(value).__name__}")
