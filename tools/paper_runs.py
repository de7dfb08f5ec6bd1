"""Run experiments at the papers' exact settings and store them with the package.

    python3 dev.py paper-runs                 # every experiment marked to run by default
    python3 dev.py paper-runs NAME [NAME...]  # only these
    python3 dev.py paper-runs --list          # names, settings and estimated cost
    python3 dev.py paper-runs NAME --workers 2  # shards in 2 processes (one torch thread each)

Each experiment is a :class:`ccmc_lite.stored.Sweep` at the paper's settings; it is run
in this process (one batched program per shard, one torch thread), or with ``--workers N``
in a pool of N processes (``concurrent.futures``, spawn; sharding never changes a run), and
written with
:func:`tools.stored.save_stored` to ``ccmc_lite/data/paper_runs/NAME.json`` with its
provenance (package and torch versions, date, machine, device, wall time, this command).
The chapters read the files with :func:`ccmc_lite.stored.load_stored`;
``tests/tooling/test_stored_runs.py`` checks that every stored file's settings equal the ones
declared here and re-runs a short prefix of one of them.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import torch

from ccmc_lite.markov import TABLE1_OPTIONS
from ccmc_lite.stored import Sweep
from tools.ngram_tasks import PAPER_ATTENTION_ONLY, PAPER_STAGEWISE

from .stored import save_stored
from .sweeps import run_sweep

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "ccmc_lite" / "data" / "paper_runs"


@dataclass(frozen=True)
class Experiment:
    """A named sweep at a paper's settings, and what it costs here."""

    sweep: Sweep
    source: str
    estimate: str
    default: bool = True
    shard_size: int | None = None


def _stagewise(
    name: str, n: int, source: str, estimate: str, T: int = 32, grad_sequences: int = 0
) -> Experiment:
    settings = {
        **PAPER_STAGEWISE,
        "n": n,
        "T": T,
        "heads": n - 1,  # the paper's n - 1 first-layer heads
        "eval_every": 256,
        "checkpoint_every": 512,
        "test_seed": 2025,
    }
    if grad_sequences:  # the gradient of the test loss at every checkpoint
        settings["grad_sequences"] = grad_sequences
    runs = [{"run": r} for r in range(5)]
    return Experiment(
        Sweep(name, "tools.ngram_tasks:sweep_task", settings, runs, seed=0), source, estimate
    )


def _attention_only(embedding: str, estimate: str) -> Experiment:
    # Varre et al. (2025), App. I.1 (Fig. 4): three seeds, the chapter's seed and test set.
    settings = {**PAPER_ATTENTION_ONLY, "embedding": embedding}
    runs = [{"run": r} for r in range(3)]
    task = "tools.ngram_tasks:attention_only_task"
    name = f"p3_attention_only_{embedding}_paper"
    source = f"Varre et al. 2025, App. I.1, Fig. 4 ({embedding} embeddings)"
    return Experiment(Sweep(name, task, settings, runs, seed=1), source, estimate)


def _with_mlp(estimate: str) -> Experiment:
    # Varre et al. (2025), App. I.3, Fig. 7: "transformers with MLP layers", S = 5, L = 64,
    # a trigram. The caption gives no other setting: the data are Sec. 5's (alpha = 0.5),
    # the model and optimiser App. I.1's general transformer (one-hot embeddings, heads
    # (2, 1), AdamW lr 0.005, weight decay 1e-4, batch 128), with a ReLU MLP of width 4d
    # after each layer. The test loss (2^14 sequences) and its gradient (2048 of them) are
    # measured at every checkpoint: a forward pass of this model over 2^16 sequences costs
    # about a minute of one core, so App. I.1's 2^16 test sequences at 64 evaluations would
    # have cost hours. Two seeds, one per worker.
    S, T, steps = 5, 64, PAPER_ATTENTION_ONLY["steps"]
    settings = {
        **PAPER_ATTENTION_ONLY,
        "S": S,
        "T": T,
        "alpha": 0.5,
        "mlp": 4 * (S + T),  # 4 d, d = S + T the one-hot width
        "test_sequences": 2**14,
        "eval_every": steps // 32,
        "checkpoint_every": steps // 32,
        "grad_sequences": 2048,
    }
    runs = [{"run": r} for r in range(2)]
    task = "tools.ngram_tasks:attention_only_task"
    source = "Varre et al. 2025, App. I.3, Fig. 7 (MLP layers; S = 5, T = 64, trigram)"
    sweep = Sweep("p3_mlp_paper", task, settings, runs, seed=1)
    return Experiment(sweep, source, estimate, shard_size=1)


def _plateau(estimate: str) -> Experiment:
    # The book's own (T, alpha) sweep (Part III, ch. 5) at the settings of Sec. 5: 5 seeds
    # per cell, 2^14 steps, Adam lr 0.01, batch 128; one knob varied at a time around
    # T = 32, alpha = 0.5; all runs in one batched program of T_max = 64 positions.
    cells = [(16, 0.5), (32, 0.5), (64, 0.5), (32, 0.25), (32, 1.0)]
    runs = [{"T": T, "alpha": a, "seed_index": s} for T, a in cells for s in range(5)]
    settings = {
        "S": 5,
        "n": 3,
        "T": 64,
        "heads": 2,
        "steps": 2**14,
        "lr": 0.01,
        "batch": 128,
        "checkpoint_every": 128,
    }
    sweep = Sweep("p3_plateau_paper", "tools.ngram_tasks:plateau_task", settings, runs, seed=3)
    source = "book, Part III ch. 5 (T and alpha against plateau length) at Sec. 5's settings"
    return Experiment(sweep, source, estimate)


#: Makkuva et al. (2024), Table 2 (workshop version): N = 1024, batch 16, d = 4, 8000
#: iterations, AdamW(0.9, 0.95), lr 1e-3, weight decay 1e-3, cosine schedule
#: (:func:`ccmc_lite.markov.markov_config`); test loss every 200 steps.
TABLE2 = {
    "K": 2,
    "d": 4,
    "N": 1024,
    "batch": 16,
    "steps": 8000,
    "lr": 1e-3,
    "tied": True,
    "depth": 1,
    "weight_decay": 1e-3,
    "eval_every": 200,
}


def _markov(
    name: str,
    cells: list[tuple[float, float]],
    tied: bool,
    depth: int,
    estimate: str,
    source: str = "Makkuva et al. 2024, Fig. 4 at the settings of Table 2",
    shard_size: int = 3,
    model: dict | None = None,
) -> Experiment:
    settings = {**TABLE2, "tied": tied, "depth": depth, **(model or {})}
    runs = [{"p": p, "q": q, "seed_index": s} for p, q in cells for s in range(3)]
    return _markov_sweep(name, settings, runs, source, estimate, shard_size)


def _multistate(name: str, ps: list[float], tied: bool, estimate: str) -> Experiment:
    # Makkuva et al. (2024, long version), Sec. 4.3 and Fig. 5: the five-state symmetric
    # chain (switch with probability p to one of the K - 1 other states), tied and untied,
    # at the settings of Table 2 with d = 8 >= K (as the book's chapter).
    settings = {**TABLE2, "K": 5, "d": 8, "tied": tied}
    runs = [{"p": p, "seed_index": 0} for p in ps]
    source = "Makkuva et al. 2024 (long version), Sec. 4.3, Fig. 5 (K = 5)"
    return _markov_sweep(name, settings, runs, source, estimate)


def _markov_sweep(
    name: str, settings: dict, runs: list[dict], source: str, estimate: str, shard_size: int = 3
) -> Experiment:
    return Experiment(
        Sweep(name, "tools.markov_tasks:sweep_task", settings, runs, seed=0),
        source,
        estimate,
        default=False,
        shard_size=shard_size,
    )


EXPERIMENTS: dict[str, Experiment] = {
    e.sweep.name: e
    for e in (
        _stagewise(
            "p3_stagewise_paper",
            3,
            "Varre et al. 2025, Sec. 5 (Figs. 3, 5)",
            "about 5 min on one core (2^14 steps, 5 seeds batched, 65 test evaluations "
            "on 2^16 sequences)",
        ),
        _stagewise(
            "p3_fourgram_paper",
            4,
            "Varre et al. 2025, Fig. 1 (the 4-gram; other settings of Sec. 5)",
            "measured: 2 min wall on a 2-core machine shared with another job (5 seeds "
            "batched, with the test-loss gradient at each of the 33 checkpoints)",
            grad_sequences=8192,
        ),
        _stagewise(
            "p3_stagewise_T128_paper",
            3,
            "Varre et al. 2025, Fig. 6 (S = 5, L = 128, 3-gram; other settings of Sec. 5)",
            "about 4 min on one core",
            T=128,
        ),
        _attention_only(
            "onehot",
            "measured: 17 min wall on a 2-core machine shared with another run (3 seeds "
            "batched, 4096 steps, 65 test evaluations on 2^16 sequences)",
        ),
        _attention_only(
            "learned",
            "measured: 14 min wall on a 2-core machine, partly shared with another run",
        ),
        _with_mlp(
            "measured: 16 min wall with --workers 2 on a 2-core machine (one seed per "
            "worker; 4096 steps, 33 test evaluations and gradients)"
        ),
        _plateau(
            "measured: 9 min wall on a 2-core machine shared with two other jobs (25 runs "
            "batched, 2^14 steps)"
        ),
        _markov(
            "p2_fig4_paper",
            [(0.2, 0.3), (0.5, 0.8), (0.7, 0.9)],
            tied=True,
            depth=1,
            estimate="measured: 100 min wall on a 2-core machine shared with 2 other runs; "
            "the last shard, alone on a core, 21 min (3 shards of 3 runs, 8000 steps each)",
        ),
        _markov(
            "p2_fig4_untied_paper",
            [(0.2, 0.3), (0.5, 0.8), (0.7, 0.9)],
            tied=False,
            depth=1,
            estimate="measured: 36 min wall with --workers 2 on a 2-core machine (shards of "
            "5 and 4 runs, 8000 steps each: 36 and 30 min)",
            shard_size=5,
        ),
        _markov(
            "p2_fig4_table1_paper",
            [(0.2, 0.3), (0.5, 0.8), (0.7, 0.9)],
            tied=True,
            depth=1,
            estimate="measured: 54 min wall with --workers 2 on a 2-core machine (shards of "
            "5 and 4 runs, 8000 steps each: 54 and 45 min)",
            source="Makkuva et al. 2024, Fig. 4 with the model of its Table 1 (layer norm, "
            "GELU) at the settings of Table 2",
            shard_size=5,
            model=TABLE1_OPTIONS,
        ),
        _markov(
            "p2_fig4_table1_untied_paper",
            [(0.2, 0.3), (0.5, 0.8), (0.7, 0.9)],
            tied=False,
            depth=1,
            estimate="measured: 98 min wall with --workers 2 on a 2-core AMD EPYC machine, "
            "partly shared with tests (shards of 5 and 4 runs, 8000 steps each: 98 and 81 min)",
            source="Makkuva et al. 2024, Fig. 4 with the model of its Table 1 (layer norm, "
            "GELU), untied, at the settings of Table 2",
            shard_size=5,
            model=TABLE1_OPTIONS,
        ),
        _markov(
            "p2_depth_paper",
            [(0.5, 0.8)],
            tied=True,
            depth=2,
            estimate="measured: 42 min of one core (77 min wall, sharing 2 cores with 2 "
            "other runs); one shard of 3 two-layer runs, 8000 steps",
            source="Makkuva et al. 2024, Fig. 1 (depth 2 at p = 0.5, q = 0.8; depth 1 is "
            "the same cell of p2_fig4_paper)",
        ),
        _multistate(
            "p2_multistate_tied_paper",
            [0.7, 0.9],
            tied=True,
            estimate="measured: about 20 min of one core (43 min wall on a shared 2-core "
            "machine); 2 runs, 8000 steps",
        ),
        _multistate(
            "p2_multistate_untied_paper",
            [0.7, 0.9],
            tied=False,
            estimate="measured: about 16 min of one core (27 min wall on a shared 2-core "
            "machine); 2 runs, 8000 steps",
        ),
    )
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="experiments to run (default: the default set)")
    parser.add_argument("--list", action="store_true", help="list the experiments and exit")
    parser.add_argument("--out", type=Path, default=OUT, help="folder for the .json files")
    parser.add_argument("--workers", type=int, default=1, help="processes running the shards")
    args = parser.parse_args(argv)
    if args.list:
        for name, e in EXPERIMENTS.items():
            flag = "default" if e.default else "on request"
            print(f"{name} ({flag}): {e.source}; {e.estimate}\n    {e.sweep.settings}")
        return 0
    unknown = [n for n in args.names if n not in EXPERIMENTS]
    if unknown:
        parser.error(f"unknown experiments {unknown}; known: {sorted(EXPERIMENTS)}")
    names = args.names or [n for n, e in EXPERIMENTS.items() if e.default]
    if args.workers < 1:
        parser.error(f"--workers must be at least 1; got {args.workers}")
    torch.set_num_threads(1)
    os.environ["OMP_NUM_THREADS"] = "1"  # spawned workers start with one thread too
    pool = None
    if args.workers > 1:
        spawn = multiprocessing.get_context("spawn")  # a forked torch process can deadlock
        pool = ProcessPoolExecutor(max_workers=args.workers, mp_context=spawn)
    for name in names:
        e = EXPERIMENTS[name]
        print(f"[paper-runs] {name}: {e.source}; expected {e.estimate}", flush=True)
        start = time.perf_counter()
        result = run_sweep(e.sweep, shard_size=e.shard_size, executor=pool)
        path = save_stored(
            result, args.out / f"{name}.json", command=f"python3 dev.py paper-runs {name}"
        )
        print(f"[paper-runs] {name}: {time.perf_counter() - start:.0f} s -> {path}", flush=True)
    if pool is not None:
        pool.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
