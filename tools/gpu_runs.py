"""The stored paper-setting sweeps, run again on one CUDA GPU, and the full Fig. 4 grid's step.

    python3 dev.py gpu-runs                       # on a machine with CUDA
    python3 dev.py gpu-runs --out DIR             # elsewhere than tools/data/
    python3 dev.py gpu-runs --out DIR --quick     # tiny settings, any device (a check)

Without ``--out`` it writes where the evidence pages read (``tools/data/gpu_runs/NAME.json``
and ``tools/data/gpu_timings.json``, read by :mod:`tools.gpu_results`; evidence, not part
of the package readers install); with ``--out DIR``, ``DIR/NAME.json`` and
``DIR/gpu_timings.json``. The timings file is updated, not replaced, so runs of some parts at
a time add up. What it does (parts 2 and 3 first, being short; each part written
as soon as it is done):

1. Re-runs stored sweeps of ``tools/paper_runs.py`` (names in :data:`NAMES`, each
   as one batched program) on the GPU, at their stored settings, and writes each with
   :func:`tools.stored.save_stored` (``DIR/NAME.json``; its provenance names the GPU).
   The running page compares them with the CPU files of the same name: the same code and
   seeds on other kernels, so the numbers agree to rounding at first and drift apart
   slowly, as any two float32 runs do.
2. Times one step of the Part II Fig. 4 grid at the paper's settings (Table 2: N = 1024,
   batch 16, d = 4) for a shard of ``GRID_SHARD`` runs, tied and untied: two short runs of
   different lengths, so that the difference is the cost of the steps alone (start-up and
   the test evaluations cancel). Written to ``DIR/gpu_timings.json`` with the peak GPU
   memory of each shard; the running page turns it into the time of the whole grid (810
   runs, 8000 steps).

3. Times one step of Part III's stage-wise training at Sec. 5's settings (``bench_part3``:
   S = 5, n = 3, T = 32, two heads, batch 128, Adam) with 1, 4 and 25 runs batched, on the
   GPU and on one core of the same machine's CPU, again as the difference of two run
   lengths (``part3_step`` in the timings file): whether the GPU shortens a step whose
   operations are all tiny.

``--budget S`` starts no new sweep after ``S`` seconds (a device lease is short): with
``--budget 0`` only parts 2 and 3 run. ``--no-grid`` skips part 2, ``--no-step`` part 3. A
sweep stopped by ``SIGTERM`` (``timeout``, the end of a lease) is recorded under
``unfinished`` with the seconds it had run.
"""

from __future__ import annotations

import argparse
import json
import platform
import signal
import sys
import time
from pathlib import Path

import torch

from ccmc_lite.stored import Sweep

from .gpu_results import GPU_RUNS, GPU_TIMINGS
from .paper_runs import EXPERIMENTS, TABLE2
from .stored import machine_description, save_stored
from .sweeps import run_sweep

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from bench_part3 import train_seconds as train_part3

#: Stored sweeps re-run on the GPU, most informative first.
NAMES = (
    "p2_fig4_paper",
    "p3_plateau_paper",
    "p2_fig4_untied_paper",
    "p2_depth_paper",
    "p3_stagewise_paper",
    "p2_multistate_tied_paper",
)
GRID = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)  # Makkuva et al., Fig. 4: 9 x 9 cells
GRID_SEEDS = 5
GRID_SHARD = 81  # one seed of every cell: 10 such shards (5 seeds, tied and untied) make the grid
PART3_RUNS = (1, 4, 25)  # runs in one Part III step: one run, the book's seeds, ch. 5's sweep
QUICK = {"steps": 6, "N": 16, "T": 16, "eval_every": 3, "checkpoint_every": 3}


def _quick(sweep: Sweep) -> Sweep:
    """The same sweep with tiny sizes (``--quick``): for checking this script, not timing."""
    small = {k: v for k, v in QUICK.items() if k in sweep.settings}
    runs = [r if "T" not in r else {**r, "T": min(r["T"], QUICK["T"])} for r in sweep.runs]
    return Sweep(sweep.name, sweep.task, {**sweep.settings, **small}, runs, sweep.seed)


def _grid_sweep(tied: bool, steps: int, quick: bool) -> Sweep:
    settings = {**TABLE2, "tied": tied, "steps": steps, "eval_every": steps}
    if quick:
        settings["N"] = QUICK["N"]
    runs = [{"p": p, "q": q, "seed_index": 0} for p in GRID for q in GRID][:GRID_SHARD]
    return Sweep("p2_fig4_grid_timing", "tools.markov_tasks:sweep_task", settings, runs, 0)


def _now() -> str:
    """The date and time a part was measured (as every date in the timings file)."""
    return time.strftime("%Y-%m-%d %H:%M:%S %Z")


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_grid_step(device: str, quick: bool) -> dict:
    """Seconds per step of a shard of :data:`GRID_SHARD` Fig. 4 runs, tied and untied."""
    short, long = (2, 4) if quick else (10, 50)
    out: dict = {"shard_runs": GRID_SHARD, "steps_compared": [short, long], "date": _now()}
    run_sweep(_grid_sweep(True, 2, quick), device=device)  # warm-up: kernels, allocator
    for tied in (True, False):
        seconds = {}
        if device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        for steps in (short, long):
            _sync(device)
            seconds[steps] = run_sweep(_grid_sweep(tied, steps, quick), device=device).seconds
            _sync(device)
        key = "tied" if tied else "untied"
        out[f"{key}_s_per_step"] = (seconds[long] - seconds[short]) / (long - short)
        out[f"{key}_seconds"] = seconds
        if device.startswith("cuda"):
            out[f"{key}_peak_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    return out


def time_part3_step(device: str, quick: bool) -> dict:
    """Milliseconds per Part III step (:data:`PART3_RUNS` runs batched), on ``device`` and a core.

    Each figure is the difference of a long and a short run (best of two each) over the
    difference of their steps, so that building the models and copying back cancel.
    """
    short, long = (2, 6) if quick else (20, 80)
    out: dict = {"steps_compared": [short, long], "date": _now()}
    threads = torch.get_num_threads()
    for where in dict.fromkeys((device, "cpu")):  # the device, then one CPU core
        torch.set_num_threads(1 if where == "cpu" else threads)  # the CPU figure: one core
        train_part3(2, 3, True, where)  # warm-up: kernels, allocator
        for runs in PART3_RUNS:
            a, b = (min(train_part3(runs, s, True, where) for _ in range(2)) for s in (short, long))
            out[f"{where}_ms_per_step_{runs}_runs"] = round(1000 * (b - a) / (long - short), 3)
    torch.set_num_threads(threads)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="folder for the results (default: the package)")
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--quick", action="store_true", help="tiny settings: check the script")
    parser.add_argument("--budget", type=float, default=float("inf"), help="seconds")
    parser.add_argument("--no-grid", action="store_true", help="skip the grid's step timing")
    parser.add_argument("--no-step", action="store_true", help="skip Part III's step timing")
    parser.add_argument("names", nargs="*", help=f"stored sweeps to re-run (default: {NAMES})")
    args = parser.parse_args(argv)
    names = args.names or list(NAMES)
    unknown = [n for n in names if n not in EXPERIMENTS]
    if unknown:
        parser.error(f"unknown experiments {unknown}; known: {sorted(EXPERIMENTS)}")
    runs_dir = GPU_RUNS if args.out is None else args.out
    path = GPU_TIMINGS if args.out is None else args.out / GPU_TIMINGS.name
    runs_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    timings: dict = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    timings.update(
        machine=machine_description(),
        torch=torch.__version__,
        python=platform.python_version(),
        device=args.device,
        date=_now(),
        command="python3 dev.py gpu-runs " + " ".join(argv or sys.argv[1:]),
        quick=args.quick,
    )

    def write() -> None:
        path.write_text(json.dumps(timings, indent=1) + "\n", encoding="utf-8")

    running: dict = {}

    def stopped(signum: int, frame: object) -> None:  # timeout / end of the lease
        if running:
            ran = round(time.perf_counter() - running["since"])
            how = (
                f"stopped by signal {signum} after {ran} s, before it finished ({timings['date']})"
            )
            timings.setdefault("unfinished", {})[running["name"]] = {"ran_s": ran, "how": how}
            write()
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, stopped)
    if not args.no_grid:
        timings["grid"] = time_grid_step(args.device, args.quick)
        print(f"[gpu-runs] grid step: {timings['grid']}", flush=True)
        write()
    if not args.no_step:
        timings["part3_step"] = time_part3_step(args.device, args.quick)
        print(f"[gpu-runs] Part III step: {timings['part3_step']}", flush=True)
        write()
    for name in names:
        if time.perf_counter() - start > args.budget:
            print(f"[gpu-runs] budget spent; {name} not run", flush=True)
            continue
        sweep = EXPERIMENTS[name].sweep
        sweep = _quick(sweep) if args.quick else sweep
        running.update(name=name, since=time.perf_counter())
        print(f"[gpu-runs] {name}: started", flush=True)
        result = run_sweep(sweep, device=args.device)  # one batched program
        running.clear()
        save_stored(result, runs_dir / f"{name}.json", command=f"python3 dev.py gpu-runs {name}")
        timings.setdefault("sweeps", {})[name] = round(result.seconds, 1)
        timings.get("unfinished", {}).pop(name, None)
        print(f"[gpu-runs] {name}: {result.seconds:.1f} s on {result.device}", flush=True)
        write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
