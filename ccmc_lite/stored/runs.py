"""Results of runs at the papers' settings, stored with the package and their provenance.

Some experiments cost hours at the papers' settings (Makkuva et al. 2024 train 8000 steps
on sequences of 1024 tokens; Varre et al. 2025 train 2^14 steps). The book runs them once
(``python3 dev.py paper-runs``, with the repository's ``tools/``) and stores what they
produce as small JSON files in ``ccmc_lite/data/paper_runs/``: per-run curves and final
numbers, the exact settings and seed (a :class:`Sweep`), the package and torch versions, the
date, the machine, the device and the wall time. The files ship with the package, so a
chapter shows them the same way in the built book, in Colab and in a student notebook
(:func:`~ccmc_lite.stored.load_stored`). A test re-runs a short prefix of each stored run
and compares it with the stored numbers.

Some of the same sweeps were also run again on one GPU, with the same code and seeds:
``load_stored(name, gpu=True)`` reads those copies (``ccmc_lite/data/gpu_runs/``), and
:func:`~ccmc_lite.stored.gpu_timings` the step times measured there.

A sweep's *task* names the function that trained it (``"tools.markov_tasks:sweep_task"``,
in the repository's ``tools/``): it trains the runs ``runs`` (one settings record each) as
one batched program and returns arrays whose leading axis is the run. Reading a stored
run needs only the package; training it again needs the repository.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ..core.validation import check_bool, check_choice, check_seed

__all__ = [
    "PROVENANCE_KEYS",
    "StoredRun",
    "Sweep",
    "gpu_timings",
    "load_stored",
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
#: Where the stored files live inside the package, for the tools that write them.
DATA_FOLDERS = {"cpu": _DATA, "gpu": _GPU_DATA, "gpu_timings": _GPU_TIMINGS}


def _json_ready(value: Any, what: str) -> Any:
    """Check that settings are plain JSON data (they travel to workers and into files)."""
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as err:
        raise TypeError(
            f"{what} must be plain JSON data (numbers, strings, lists); {err}"
        ) from None


@dataclass(frozen=True)
class Sweep:
    """A sweep stated once: a task, shared settings, one settings record per run, a seed.

    Parameters
    ----------
    name : str
        Names the sweep in files and progress lines.
    task : str
        ``"package.module:function"``: a function ``task(settings, runs, *, first_run,
        seed, device) -> dict`` that trains the runs ``runs`` as one batched program and
        returns arrays with a leading run axis (and, under ``"shared"``, values common
        to all runs).
    settings : dict
        Settings shared by every run (plain JSON data).
    runs : list of dict
        One record per run (e.g. ``{"p": 0.5, "q": 0.8, "tied": True}``), in sweep order.
    seed : int
        Base seed: run ``r`` is initialised from ``derive_seed(seed, r, 0)``.
    """

    name: str
    task: str
    settings: Mapping[str, Any]
    runs: tuple[Mapping[str, Any], ...]
    seed: int

    def __init__(
        self,
        name: str,
        task: str,
        settings: Mapping[str, Any],
        runs: Sequence[Mapping[str, Any]],
        seed: int,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"name must be a non-empty string; got {name!r}")
        module, sep, function = task.partition(":") if isinstance(task, str) else ("", "", "")
        if not (module and sep and function):
            raise ValueError(f"task must look like 'package.module:function'; got {task!r}")
        if not isinstance(settings, Mapping):
            raise TypeError(f"settings must be a mapping; got {type(settings).__name__}")
        if isinstance(runs, (str, bytes)) or not isinstance(runs, Sequence):
            raise TypeError(f"runs must be a sequence of dicts; got {type(runs).__name__}")
        if not runs:
            raise ValueError("runs must hold at least one run")
        for i, r in enumerate(runs):
            if not isinstance(r, Mapping):
                raise TypeError(f"runs[{i}] must be a dict of settings; got {type(r).__name__}")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "task", task)
        object.__setattr__(self, "settings", _json_ready(dict(settings), "settings"))
        object.__setattr__(
            self, "runs", tuple(_json_ready(dict(r), f"runs[{i}]") for i, r in enumerate(runs))
        )
        object.__setattr__(self, "seed", check_seed(seed))

    @property
    def n_runs(self) -> int:
        return len(self.runs)

    def select(self, **match: Any) -> np.ndarray:
        """Indices of the runs whose settings equal every ``key=value`` given."""
        for key in match:
            if not any(key in r for r in self.runs):
                raise ValueError(f"no run has the setting {key!r}")
        hits = [i for i, r in enumerate(self.runs) if all(r.get(k) == v for k, v in match.items())]
        return np.asarray(hits, dtype=int)


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
        return self.sweep.select(**match)


def _decode(blob: dict[str, Any]) -> dict[str, np.ndarray]:
    return {k: np.asarray(v["data"], dtype=v["dtype"]).reshape(v["shape"]) for k, v in blob.items()}


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
    sweep re-run there (:func:`~ccmc_lite.stored.load_stored` with ``gpu=True``);
    ``unfinished``: sweeps that did not finish within the time the GPU was lent, with how
    long they had run. The top-level ``date`` and ``command`` are those of the last run of
    the script; ``grid`` and ``part3_step`` carry their own dates, a sweep's file its own.
    """
    text = resources.files("ccmc_lite").joinpath(_GPU_TIMINGS).read_text("utf-8")
    return dict(json.loads(text))
