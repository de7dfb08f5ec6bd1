"""Results of runs at the papers' settings, stored with the package and their provenance.

Some experiments cost hours at the papers' settings (Makkuva et al. 2024 train 8000 steps
on sequences of 1024 tokens; Varre et al. 2025 train 2^14 steps). The book runs them once,
with ``python3 dev.py paper-runs``, and stores what they produce as small JSON files in
``ccmc_lite/data/paper_runs/``: per-run curves and final numbers, the exact settings and
seed, the package and torch versions, the date, the machine, the device and the wall time.
The files ship with the package, so a chapter shows them the same way in the built book,
in Colab and in a student notebook (:func:`~ccmc_lite.core.load_stored`). A test re-runs a
short prefix of one stored run and compares it with the stored numbers.

Some of the same sweeps were also run again on one GPU, with the same code and seeds
(``python3 dev.py gpu-runs``): ``load_stored(name, gpu=True)`` reads those copies
(``ccmc_lite/data/gpu_runs/``), and :func:`~ccmc_lite.core.gpu_timings` the step times
measured there.

Array values are written as JSON numbers (float64 ``repr``, which reads back exactly).
"""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .sweeps import Sweep, SweepResult
from .validation import check_bool, check_choice

__all__ = [
    "PROVENANCE_KEYS",
    "StoredRun",
    "gpu_timings",
    "load_stored",
    "save_stored",
    "stored_names",
]

#: Fields every stored file carries besides the sweep and its arrays.
PROVENANCE_KEYS = (
    "package_version",
    "torch_version",
    "python_version",
    "created",
    "machine",
    "device",
    "wall_seconds",
    "command",
)

_DATA = "data/paper_runs"
_GPU_DATA = "data/gpu_runs"
_GPU_TIMINGS = "data/gpu_timings.json"


def package_version() -> str:
    from .. import __version__

    return __version__


def _cpuinfo(field: str) -> str | None:
    """The value of ``field`` in ``/proc/cpuinfo`` (first processor), ``None`` where absent."""
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
    return _cpuinfo("model name") or platform.processor() or "unknown CPU"


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


@dataclass(frozen=True)
class StoredRun:
    """A stored sweep: what was run, what it produced, and where and when.

    Attributes
    ----------
    name : str
        File stem, e.g. ``"p2_fig4_paper"``.
    sweep : Sweep
        Task, settings, per-run settings and seed — enough to run it again.
    arrays : dict
        ``name -> ndarray`` with leading axis = run.
    shared : dict
        Values common to all runs (e.g. evaluation steps).
    provenance : dict
        The :data:`PROVENANCE_KEYS` fields.
    """

    name: str
    sweep: Sweep
    arrays: dict[str, np.ndarray]
    shared: dict[str, Any]
    provenance: dict[str, Any]

    def select(self, **match: Any) -> np.ndarray:
        """Indices of the runs whose settings equal every ``key=value`` given."""
        return SweepResult(self.sweep, self.arrays, self.shared, 0.0).select(**match)

    def describe(self) -> str:
        """What ran (runs, seed, settings), where and when, how long, and how to rerun it."""
        p = self.provenance
        return (
            f"{self.name}: {self.sweep.n_runs} runs (sweep seed {self.sweep.seed}), "
            f"settings {self.sweep.settings}\n"
            f"trained {p['created']} on {p['machine']} ({p['device']}) in "
            f"{p['wall_seconds']:.0f} s; ccmc_lite {p['package_version']}, torch "
            f"{p['torch_version']}; regenerate with `{p['command']}`"
        )


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


def _decode(blob: dict[str, Any]) -> dict[str, np.ndarray]:
    return {k: np.asarray(v["data"], dtype=v["dtype"]).reshape(v["shape"]) for k, v in blob.items()}


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
            "package_version": package_version(),
            "torch_version": torch.__version__,
            "python_version": platform.python_version(),
            "created": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "machine": machine_description(),
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


def json_stems(data: str) -> list[str]:
    """Sorted stems of the ``.json`` files in the package folder ``data`` (none: ``[]``)."""
    folder = resources.files("ccmc_lite").joinpath(data)
    if not folder.is_dir():
        return []
    return sorted(p.name[: -len(".json")] for p in folder.iterdir() if p.name.endswith(".json"))


def _runs_folder(gpu: bool) -> str:
    """The package folder of the stored runs: the CPU's, or (``gpu=True``) their GPU copies."""
    return _GPU_DATA if check_bool("gpu", gpu) else _DATA


def stored_names(*, gpu: bool = False) -> list[str]:
    """Names of the stored runs that ship with the package (``gpu=True``: of those re-run
    on a GPU)."""
    return json_stems(_runs_folder(gpu))


def load_stored(
    name: str, *, gpu: bool = False, path: str | os.PathLike[str] | None = None
) -> StoredRun:
    """Load a stored run shipped with the package (or from ``path``).

    ``gpu=True`` loads the same sweep as re-run on a GPU (same code, settings and seeds;
    its provenance names the GPU), where one ships.

    Raises ``ValueError`` naming the available runs when ``name`` is unknown, and when
    the file lacks a provenance field.
    """
    if path is None:
        folder = _runs_folder(gpu)
        names = json_stems(folder)
        if not names:
            raise ValueError("name must be a stored run; none ship with this installation")
        check_choice("name", name, names)
        text = resources.files("ccmc_lite").joinpath(folder, f"{name}.json").read_text("utf-8")
    else:
        text = Path(path).read_text(encoding="utf-8")
    blob = json.loads(text)
    missing = [k for k in PROVENANCE_KEYS if k not in blob.get("provenance", {})]
    if missing:
        raise ValueError(f"stored run {name!r} lacks provenance fields {missing}")
    s = blob["sweep"]
    sweep = Sweep(s["name"], s["task"], s["settings"], s["runs"], s["seed"])
    return StoredRun(
        name=blob["name"],
        sweep=sweep,
        arrays=_decode(blob["arrays"]),
        shared=blob["shared"],
        provenance=blob["provenance"],
    )


def gpu_timings() -> dict[str, Any]:
    """What ``python3 dev.py gpu-runs`` measured on a GPU, with its machine and date.

    ``grid``: seconds per training step of a shard of Fig. 4 runs at the paper's settings
    (Makkuva et al. 2024, Table 2), tied and untied, from two runs of different lengths
    (their difference: start-up and evaluations cancel), and the shard's peak GPU memory;
    ``part3_step``: milliseconds per step of Varre et al.'s Sec. 5 training with 1, 4 and 25
    runs batched, on the GPU (``cuda_ms_per_step_<R>_runs``) and on one core of the same
    machine (``cpu_...``), measured the same way; ``sweeps``: wall seconds of each stored
    sweep re-run there (:func:`~ccmc_lite.core.load_stored` with ``gpu=True``);
    ``unfinished``: sweeps that did not finish within the time the GPU was lent, with how
    long they had run. The top-level ``date`` and ``command`` are those of the last run of
    the script; ``grid`` and ``part3_step`` carry their own dates, a sweep's file its own.
    """
    text = resources.files("ccmc_lite").joinpath(_GPU_TIMINGS).read_text("utf-8")
    return dict(json.loads(text))
