"""Runs stored at the papers' settings: provenance, settings, and a re-run of a prefix.

``python3 dev.py paper-runs`` (``benchmarks/paper_runs.py``) writes the files in
``ccmc_lite/data/paper_runs/``. Here every stored file must carry its full provenance and
exactly the settings, runs, seed and task that the script declares for it, and the first
training steps of one stored run are trained again and compared with the stored losses:
bit for bit on the machine that wrote the file; elsewhere (another CPU may use other
float32 kernels) within a relative ``1e-5``, with a warning.
"""

from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from ccmc_lite import ngram, plotting
from ccmc_lite.core import PROVENANCE_KEYS, Sweep, load_stored, run_sweep, stored_names
from ccmc_lite.core.stored import _machine
from ccmc_lite.ngram.runs import PAPER_STAGEWISE

ROOT = Path(__file__).resolve().parents[1]
TASK = "ccmc_lite.ngram.runs:sweep_task"
MARKOV_TASK = "ccmc_lite.markov.runs:sweep_task"
TINY = dict(S=3, n=3, T=8, alpha=0.5, heads=2, steps=8, lr=0.01, batch=4, test_sequences=16)
PREFIX = 20  # training steps re-run from the stored file


def _script():
    spec = importlib.util.spec_from_file_location("paper_runs", ROOT / "benchmarks/paper_runs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("paper_runs", module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def declared():
    return _script().EXPERIMENTS


# --- the Part III sweep task -----------------------------------------------------------


def _tiny(**kw) -> Sweep:
    return Sweep("tiny", TASK, {**TINY, "eval_every": 4, **kw}, [{"run": r} for r in range(3)], 5)


@pytest.fixture(scope="module")
def tiny():
    return run_sweep(_tiny())


def test_sweep_task_returns_one_row_per_run_and_is_deterministic(tiny):
    a, b = tiny, run_sweep(_tiny())  # same seed, same numbers
    assert a.shared["eval_steps"] == [0, 4, 8]
    assert a.shared["checkpoint_steps"] == [0, 8]
    assert set(a.shared["levels"]) == {"uniform", "1-gram", "2-gram", "3-gram"}
    shapes = {k: v.shape for k, v in a.arrays.items()}
    assert shapes == {
        "train_loss_head": (3, 8),
        "train_loss_avg": (3, 2),
        "grad_norm_avg": (3, 2),
        "test_loss": (3, 3),
        "offset_weight": (3, 2, 2, 2),
        "final_attention": (3, 2, 8, 8),
    }
    for key, value in a.arrays.items():
        np.testing.assert_array_equal(b.arrays[key], value, err_msg=key)
    # A1 starts at zero: uniform causal attention puts 1/(t+1) on each key of row t
    w = a.arrays["offset_weight"][:, 0]
    expected = np.mean([1 / (t + 1) for t in range(1, 7)])
    np.testing.assert_allclose(w[..., 0], expected, rtol=1e-6)


def test_a_prefix_reproduces_the_head_of_the_full_run(tiny):
    full = tiny
    prefix = run_sweep(_tiny(stop_after=3))
    assert set(prefix.arrays) == {"train_loss_head"}
    np.testing.assert_array_equal(
        prefix.arrays["train_loss_head"], full.arrays["train_loss_head"][:, :3]
    )


def test_stage_summary_and_plot_read_a_sweep_result(tiny):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    a, sh = tiny.arrays, tiny.shared
    rows = ngram.stage_summary(  # 3 evaluations: a flatness window of 3 points at most
        a["test_loss"], sh["eval_steps"], sh["checkpoint_steps"], a["offset_weight"], span=3
    )
    assert len(rows) == 3
    for row, final in zip(rows, a["test_loss"][:, -1], strict=True):
        assert row["final"] == final
        assert set(row["formed"]) == {1, 2} and row["first"] in (0, 1, 2)
        assert all(s.label in ("uniform", "bigram", "trigram") for s in row["stages"])
    with pytest.raises(ValueError, match="offset_weight"):
        ngram.stage_summary(
            a["test_loss"], sh["eval_steps"], sh["checkpoint_steps"], a["test_loss"]
        )
    fig, ax = plt.subplots()
    plotting.plot_seed_losses(ax, sh["eval_steps"], a["test_loss"], sh["levels"], title="tiny")
    assert len(ax.get_lines()) == 3 + len(sh["levels"])
    with pytest.raises(ValueError, match="test_loss must be"):
        plotting.plot_seed_losses(ax, [0, 1], a["test_loss"])
    plt.close(fig)


@pytest.mark.parametrize(
    "change, error, match",
    [
        (dict(width=3), ValueError, "unknown settings"),
        (dict(n=1), ValueError, "settings\\['n'\\]"),
        (dict(T=2), ValueError, "settings\\['T'\\]"),
        (dict(lr=0.0), ValueError, "settings\\['lr'\\]"),
        (dict(alpha=-1.0), ValueError, "settings\\['alpha'\\]"),
    ],
)
def test_sweep_task_rejects_bad_settings(change, error, match):
    with pytest.raises(error, match=match):
        ngram.sweep_task({**TINY, **change}, [{"run": 0}], first_run=0, seed=0)


def test_sweep_task_rejects_empty_runs():
    with pytest.raises(ValueError, match="runs must be a non-empty list"):
        ngram.sweep_task(dict(TINY), [], first_run=0, seed=0)


def test_paper_settings_are_the_papers():
    # Varre et al. (2025), Sec. 5, "Experimental Setup"
    assert PAPER_STAGEWISE == dict(
        S=5, n=3, T=32, alpha=0.5, heads=2, steps=2**14, lr=0.01, batch=128, test_sequences=2**16
    )


# --- the stored files ------------------------------------------------------------------


def test_every_declared_experiment_is_stored(declared):
    # every training chapter of Parts II and III shows one of these at the paper's settings
    assert set(stored_names()) == set(declared)
    assert {name.split("_")[0] for name in declared} == {"p2", "p3"}


@pytest.mark.parametrize("name", stored_names())
def test_stored_file_has_provenance_and_the_declared_settings(name, declared):
    stored = load_stored(name)
    assert all(stored.provenance.get(k) not in (None, "") for k in PROVENANCE_KEYS)
    assert stored.provenance["command"] == f"python3 dev.py paper-runs {name}"
    assert stored.provenance["wall_seconds"] > 0
    sweep = declared[name].sweep
    assert stored.sweep.task == sweep.task
    assert stored.sweep.settings == sweep.settings
    assert stored.sweep.runs == sweep.runs
    assert stored.sweep.seed == sweep.seed
    for key, value in stored.arrays.items():
        assert value.shape[0] == sweep.n_runs, key
        assert np.isfinite(value).all(), key
    if sweep.task == TASK:  # the paper's values, not only the script's
        n, T = sweep.settings["n"], sweep.settings["T"]
        assert T in (32, 128)  # Sec. 5 and Figs. 1, 3, 5; Fig. 6 (L = 128)
        paper = {**PAPER_STAGEWISE, "n": n, "heads": n - 1, "T": T}
        assert {k: stored.sweep.settings[k] for k in paper} == paper
    else:  # Makkuva et al. (2024), Table 2: fixed values and the grid-searched ranges
        st = stored.sweep.settings
        assert sweep.task == MARKOV_TASK
        assert (st["steps"], st["lr"], st["weight_decay"]) == (8000, 1e-3, 1e-3)
        assert st["N"] in (512, 1024, 2048) and st["batch"] in (16, 50)
        assert st["d"] in (4, 8, 16, 32, 64) and 1 <= st["depth"] <= 6
        for key in ("test_loss", "gap", "entropy_rate", "unigram_entropy"):
            assert key in stored.arrays, key
        assert stored.shared["eval_steps"][-1] == st["steps"]


@pytest.mark.parametrize("name", ["p3_stagewise_paper", "p2_fig4_paper"])
def test_a_prefix_of_a_stored_run_reproduces(name, declared):
    stored = load_stored(name)
    s = stored.sweep
    shard = declared[name].shard_size or s.n_runs  # the first shard, as the script ran it
    head = stored.arrays["train_loss_head"][:shard]
    assert head.shape[1] >= PREFIX
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the script ran it
    try:
        again = run_sweep(
            Sweep(s.name, s.task, {**s.settings, "stop_after": PREFIX}, s.runs[:shard], s.seed)
        )
    finally:
        torch.set_num_threads(threads)
    new = again.arrays["train_loss_head"]
    # Bit for bit where the float32 kernels are the same (on the machine that wrote the file
    # it is); another CPU or torch version may round differently, so a relative 1e-5 is
    # accepted there, with a warning that says so.
    if not np.array_equal(new, head[:, :PREFIX]):
        np.testing.assert_allclose(new, head[:, :PREFIX], rtol=1e-5, atol=0)
        where = (stored.provenance["machine"], stored.provenance["torch_version"])
        here = (_machine(), torch.__version__)
        warnings.warn(
            f"the prefix reproduces within rtol 1e-5, not bit for bit ({where} vs {here})",
            stacklevel=1,
        )
