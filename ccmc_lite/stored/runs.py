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

from ..core.validation import check_choice, check_seed

__all__ = [
    "PROVENANCE_KEYS",
    "StoredRun",
    "Sweep",
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

_DATA = "data/paper_runs"  # the package folder of the stored runs


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


def stored_names() -> list[str]:
    """Names of the stored runs that ship with the package."""
    folder = resources.files("ccmc_lite").joinpath(_DATA)
    if not folder.is_dir():
        return []
    return sorted(p.name[: -len(".json")] for p in folder.iterdir() if p.name.endswith(".json"))


def load_stored(name: str, *, path: str | os.PathLike[str] | None = None) -> StoredRun:
    """Load a stored run shipped with the package (or from ``path``).

    Raises ``ValueError`` naming the available runs when ``name`` is unknown, and when
    the file lacks a provenance field.
    """
    if path is None:
        names = stored_names()
        if not names:
            raise ValueError("name must be a stored run; none ship with this installation")
        check_choice("name", name, names)
        text = resources.files("ccmc_lite").joinpath(_DATA, f"{name}.json").read_text("utf-8")
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
