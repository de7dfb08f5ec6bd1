"""Sweeps as lists of shards that any executor can run: in-process, Dask, a cluster.

The papers' figures are sweeps: Makkuva et al. (2024, Fig. 4) train five runs per cell of a
``(p, q)`` grid, tied and untied; the ``K``-state threshold and the ``(T, α)`` plateau study
of the book are sweeps too. A :class:`~ccmc_lite.stored.Sweep` states one once: a *task* (an
importable function that trains a group of runs as one batched program), settings shared by
every run, and one small settings record per run. :func:`shards` cuts it into
:class:`Shard` objects — plain, picklable data — and :func:`run_sweep` runs them:

* ``executor=None`` (default): one after another in this process (each shard batched);
* any object with ``submit(fn, *args) -> future`` whose futures have ``.result()``:
  ``concurrent.futures.ProcessPoolExecutor`` (with the ``"spawn"`` start method: a
  forked child of a process running torch threads can deadlock), or a
  ``dask.distributed.Client``
  (a ``LocalCluster`` on one machine, or a SLURM/PBS/Kubernetes cluster through the
  Dask ecosystem, e.g. ``dask_jobqueue.SLURMCluster``).

Sharding never changes a run's initialisation: run ``r`` of the sweep is initialised from
``derive_seed(seed, r, 0)`` whichever shard trains it (the task passes ``first_run`` on to
:func:`~ccmc_lite.core.train_runs`). Its training data do depend on the shard layout: each
shard draws the data of all its runs from one stream ``derive_seed(seed, first_run, 1)``, so
reproducing a sweep's numbers needs the same shard sizes, which :class:`SweepResult` and the
stored files record (``shard_runs``). The results of all shards are concatenated in sweep
order into one :class:`SweepResult`, which :func:`tools.stored.save_stored` saves.

A task has the signature ``task(settings, runs, *, first_run, seed, device) -> dict``: it
returns arrays whose leading axis is the run (``len(runs)``) and, under the key
``"shared"``, a dict of values common to all runs (e.g. the evaluation steps).
"""

from __future__ import annotations

import importlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ccmc_lite.core.devices import resolve_device
from ccmc_lite.core.validation import check_float, check_instance, check_int, check_seed, check_size
from ccmc_lite.stored.runs import Sweep

__all__ = [
    "Shard",
    "SweepResult",
    "check_task_args",
    "makespan",
    "resolve_task",
    "run_shard",
    "run_sweep",
    "shards",
]


def resolve_task(task: str) -> Callable[..., dict[str, Any]]:
    """Import ``"package.module:function"``; raise ``ValueError`` when it does not exist."""
    if not isinstance(task, str):
        raise TypeError(f"task must be a 'module:function' string; got {type(task).__name__}")
    module_name, sep, name = task.partition(":")
    if not sep or not module_name or not name:
        raise ValueError(f"task must look like 'package.module:function'; got {task!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ValueError(f"task module {module_name!r} cannot be imported ({err})") from None
    fn = getattr(module, name, None)
    if not callable(fn):
        raise ValueError(f"task {task!r}: {module_name} has no function {name!r}")
    return fn


def check_task_args(settings: Any, runs: Any, first_run: Any) -> int:
    """The checks every sweep task makes of its protocol arguments; returns ``first_run``."""
    check_instance("settings", settings, Mapping)
    if isinstance(runs, (str, bytes)) or not isinstance(runs, Sequence):
        raise TypeError(f"runs must be a non-empty list of dicts; got {type(runs).__name__}")
    if not runs:
        raise ValueError("runs must be a non-empty list of per-run records")
    return check_int("first_run", first_run, minimum=0)


@dataclass(frozen=True)
class Shard:
    """A group of consecutive runs of a sweep, trained together as one batched program.

    Attributes
    ----------
    task : str
        ``"package.module:function"`` that trains the runs (importable on every worker).
    settings : dict
        Settings shared by every run of the sweep.
    runs : tuple of dict
        Per-run settings of the runs in this shard.
    first_run : int
        Index of ``runs[0]`` in the whole sweep.
    seed : int
        The sweep's base seed.
    device : str
        Where the shard trains (``"cpu"``, ``"cuda"``, ...).
    """

    task: str
    settings: Mapping[str, Any]
    runs: tuple[Mapping[str, Any], ...]
    first_run: int
    seed: int
    device: str = "cpu"

    def __post_init__(self) -> None:
        check_int("first_run", self.first_run, minimum=0)
        check_seed(self.seed)

    @property
    def n_runs(self) -> int:
        return len(self.runs)


def run_shard(shard: Shard) -> dict[str, Any]:
    """Train one shard; return its arrays (leading axis: run), ``"shared"`` values and time.

    This is the function an executor runs (it is picklable, and so is a shard).
    """
    if not isinstance(shard, Shard):
        raise TypeError(f"shard must be a Shard; got {type(shard).__name__}")
    fn = resolve_task(shard.task)
    start = time.perf_counter()
    out = fn(
        dict(shard.settings),
        [dict(r) for r in shard.runs],
        first_run=shard.first_run,
        seed=shard.seed,
        device=shard.device,
    )
    if not isinstance(out, dict):
        raise TypeError(f"task {shard.task} must return a dict; got {type(out).__name__}")
    arrays = {}
    for key, value in out.items():
        if key == "shared":
            continue
        arr = np.asarray(value)
        if arr.ndim == 0 or arr.shape[0] != shard.n_runs:
            raise ValueError(
                f"task {shard.task} returned {key!r} of shape {arr.shape}; expected a leading "
                f"run axis of length {shard.n_runs}"
            )
        arrays[key] = arr
    return {
        "arrays": arrays,
        "shared": dict(out.get("shared", {})),
        "seconds": time.perf_counter() - start,
        "first_run": shard.first_run,
    }


def shards(sweep: Sweep, shard_size: int | None = None, *, device: Any = "cpu") -> list[Shard]:
    """Consecutive shards of at most ``shard_size`` runs of ``sweep`` (``None``: one shard)."""
    check_instance("sweep", sweep, Sweep)
    size = sweep.n_runs if shard_size is None else check_int("shard_size", shard_size, minimum=1)
    dev = str(resolve_device(device))
    return [
        Shard(
            task=sweep.task,
            settings=sweep.settings,
            runs=sweep.runs[start : start + size],
            first_run=start,
            seed=sweep.seed,
            device=dev,
        )
        for start in range(0, sweep.n_runs, size)
    ]


@dataclass
class SweepResult:
    """The gathered results of a sweep: arrays with a leading run axis, in sweep order.

    Attributes
    ----------
    sweep : Sweep
        What was run.
    arrays : dict
        ``name -> ndarray`` with leading axis ``n_runs``.
    shared : dict
        Values common to all runs (from the first shard; every shard must agree).
    seconds : float
        Wall time of :func:`run_sweep`.
    shard_seconds : list of float
        Time each shard took on its worker.
    shard_runs : list of int
        Runs in each shard, in sweep order (the layout the data streams depend on).
    device : str
        The device the shards trained on (``"cpu"``, ``"cuda:0"``, ...).
    """

    sweep: Sweep
    arrays: dict[str, np.ndarray]
    shared: dict[str, Any]
    seconds: float
    shard_seconds: list[float] = field(default_factory=list)
    device: str = "cpu"
    shard_runs: list[int] = field(default_factory=list)

    def select(self, **match: Any) -> np.ndarray:
        """Indices of the runs whose settings equal every ``key=value`` given."""
        return self.sweep.select(**match)


def run_sweep(
    sweep: Sweep,
    *,
    shard_size: int | None = None,
    executor: Any = None,
    device: Any = "cpu",
) -> SweepResult:
    """Run every shard of ``sweep`` and gather the results in sweep order.

    Parameters
    ----------
    sweep : Sweep
        The sweep.
    shard_size : int, optional
        Runs per shard (``None``: one shard of every run — one batched program).
    executor : optional
        ``None`` runs the shards here, one after another. Otherwise anything with
        ``submit(fn, *args)`` returning futures with ``.result()``: a
        ``concurrent.futures.Executor`` or a ``dask.distributed.Client``.
    device : optional
        ``"cpu"`` (default), ``"cuda"``, or ``None`` for CUDA when available.
    """
    if not isinstance(sweep, Sweep):
        raise TypeError(f"sweep must be a Sweep; got {type(sweep).__name__}")
    if executor is not None and not callable(getattr(executor, "submit", None)):
        raise TypeError(
            "executor must have a submit(fn, *args) method (concurrent.futures or "
            f"dask.distributed.Client); got {type(executor).__name__}"
        )
    pieces = shards(sweep, shard_size, device=device)
    start = time.perf_counter()
    if executor is None:
        parts = [run_shard(s) for s in pieces]
    else:
        futures = [executor.submit(run_shard, s) for s in pieces]
        parts = [f.result() for f in futures]
    seconds = time.perf_counter() - start
    parts.sort(key=lambda p: p["first_run"])
    keys = parts[0]["arrays"].keys()
    shared = json.dumps(parts[0]["shared"], sort_keys=True, default=str)
    for p in parts[1:]:
        if p["arrays"].keys() != keys:
            raise ValueError("shards returned different result names; the task is inconsistent")
        if json.dumps(p["shared"], sort_keys=True, default=str) != shared:
            raise ValueError("shards returned different 'shared' values; the task is inconsistent")
    arrays = {k: np.concatenate([p["arrays"][k] for p in parts]) for k in keys}
    return SweepResult(
        sweep=sweep,
        arrays=arrays,
        shared=parts[0]["shared"],
        seconds=seconds,
        shard_seconds=[p["seconds"] for p in parts],
        device=pieces[0].device,
        shard_runs=[len(s.runs) for s in sorted(pieces, key=lambda s: s.first_run)],
    )


def makespan(shard_seconds: Sequence[float], workers: int) -> float:
    """Wall time of independent shards on ``workers`` equal workers (longest-first greedy).

    Each shard goes, longest first, to the worker that is free earliest (Graham's LPT
    rule, within 4/3 of the optimum). This is how the running page turns the measured time
    of each shard into an estimate for a cluster of ``workers`` Dask workers; it ignores
    start-up and data transfer, which are small next to shards of minutes.
    """
    if isinstance(shard_seconds, (str, bytes)) or not isinstance(shard_seconds, Sequence):
        raise TypeError(f"shard_seconds must be a sequence of numbers; got {shard_seconds!r}")
    times = sorted(
        (check_float(f"shard_seconds[{i}]", t, minimum=0.0) for i, t in enumerate(shard_seconds)),
        reverse=True,
    )
    workers = check_size("workers", workers)
    loads = [0.0] * min(workers, max(len(times), 1))
    for t in times:
        loads[loads.index(min(loads))] += t
    return max(loads)
