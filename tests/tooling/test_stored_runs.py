"""Runs stored at the papers' settings: provenance, settings, and a re-run of a prefix.

``python3 dev.py paper-runs`` (``tools/paper_runs.py``) writes the files in
``ccmc_lite/data/paper_runs/``. Here every stored file must carry its full provenance and
exactly the settings, runs, seed and task that the script declares for it, and the first
training steps of one stored run are trained again and compared with the stored losses:
bit for bit on the machine that wrote the file; elsewhere (another CPU may use other
float32 kernels) within a relative ``1e-5``, with a warning.
"""

from __future__ import annotations

import platform
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from ccmc_lite import ngram, plotting
from ccmc_lite.stored import PROVENANCE_KEYS, Sweep, load_stored, stored_names
from tools import ngram_tasks, paper_runs
from tools.ngram_tasks import PAPER_ATTENTION_ONLY, PAPER_STAGEWISE
from tools.stored import machine_description
from tools.sweeps import run_sweep

ROOT = Path(__file__).resolve().parents[2]
TASK = "tools.ngram_tasks:sweep_task"
MARKOV_TASK = "tools.markov_tasks:sweep_task"
TINY = dict(S=3, n=3, T=8, alpha=0.5, heads=2, steps=8, lr=0.01, batch=4, test_sequences=16)
PREFIX = 8  # training steps re-run from the stored file (a kernel change shows in the first)


@pytest.fixture(scope="module")
def declared():
    return paper_runs.EXPERIMENTS


# --- the Part III sweep task -----------------------------------------------------------


def _tiny(**kw) -> Sweep:
    return Sweep("tiny", TASK, {**TINY, "eval_every": 4, **kw}, [{"run": r} for r in range(3)], 5)


@pytest.fixture(scope="module")
def tiny():
    return run_sweep(_tiny())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_the_part3_sweep_task_runs_on_the_gpu(tiny):
    on_gpu, again = (run_sweep(_tiny(), device="cuda") for _ in range(2))
    assert on_gpu.device.startswith("cuda") and on_gpu.shared == tiny.shared
    for key, value in tiny.arrays.items():  # other kernels: equal to rounding
        np.testing.assert_allclose(on_gpu.arrays[key], value, rtol=1e-4, atol=1e-5, err_msg=key)
        # same seed, same numbers on the GPU too (no atomics in the model's kernels)
        np.testing.assert_array_equal(again.arrays[key], on_gpu.arrays[key], err_msg=key)


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


def test_sweep_task_measures_the_test_gradient_at_each_checkpoint(tiny):
    """``grad_sequences`` adds the unbiased test-loss gradient norm per checkpoint, without
    changing what is trained."""
    with_grad = run_sweep(_tiny(grad_sequences=16))
    norms = with_grad.arrays["test_grad_norm"]  # (R, C)
    assert norms.shape == (3, len(tiny.shared["checkpoint_steps"]))
    assert np.all(np.isfinite(norms)) and np.all(norms >= 0) and norms.max() > 0
    np.testing.assert_array_equal(with_grad.arrays["test_loss"], tiny.arrays["test_loss"])
    assert "test_grad_norm" not in tiny.arrays
    with pytest.raises(ValueError, match=r"grad_sequences.*must not exceed"):
        run_sweep(_tiny(grad_sequences=10**6))


def test_stage_summary_reads_known_formation_steps():
    """Synthetic attention weights with known formation checkpoints give exactly those."""
    ckpt = np.array([0, 10, 20, 30, 40])
    w = np.zeros((2, 5, 2, 2))  # (R, C, H, n - 1)
    w[0, 1:, 0, 0] = 0.9  # run 0: offset 1 forms at step 10 (head 0) ...
    w[0, 3:, 1, 1] = 0.8  # ... offset 2 at step 30 (head 1)
    w[1, 2:, 1, 1] = 0.6  # run 1: offset 2 at step 20, offset 1 never
    w[1, :, 0, 0] = 0.2  # below the 0.3 threshold throughout
    steps = np.arange(0, 41, 2)
    loss = np.stack([np.where(steps < 20, 1.10, 0.90), np.full(steps.shape, 1.10)])
    rows = ngram.stage_summary(loss, steps, ckpt, w, span=3)
    assert rows[0]["formed"] == {1: 10, 2: 30} and rows[0]["first"] == 1
    assert rows[1]["formed"] == {1: -1, 2: 20} and rows[1]["first"] == 2
    assert [row["final"] for row in rows] == [pytest.approx(0.90), pytest.approx(1.10)]
    assert len(rows[0]["stages"]) == 2 and len(rows[1]["stages"]) == 1


def test_stage_counts_counts_the_chapter_reading_over_seeds():
    """Two synthetic seeds: one reads bigram → head on -2 → trigram, one never escapes."""
    ckpt = np.array([0, 10, 20, 30, 40])
    w = np.zeros((2, 5, 2, 2))  # (R, C, H, n - 1)
    w[:, 1:, 0, 0] = 0.9  # both seeds: previous-token head at step 10
    w[0, 3:, 1, 1] = 0.8  # seed 0: two-back head at step 30
    steps = np.arange(0, 61, 2)
    level = np.select([steps < 20, steps < 30], [1.6, 1.45], 1.05)
    loss = np.stack([level, np.where(steps < 20, 1.6, 1.45)])
    rows = ngram.stage_summary(loss, steps, ckpt, w, span=3)
    counts = ngram.stage_counts(rows, lr=0.5)
    assert counts["seeds"] == 2 and counts["prev"] == 2 and counts["escaped"] == 1
    assert counts["esc_first"] == counts["esc_last"] == 30 and counts["tau_first"] == 15.0
    assert (counts["final_min"], counts["final_max"]) == (1.05, 1.45)
    with pytest.raises(ValueError, match="rows must be a non-empty list"):
        ngram.stage_counts([], lr=0.5)
    with pytest.raises(ValueError, match="lr must lie in"):
        ngram.stage_counts(rows, lr=0.0)


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
        ngram_tasks.sweep_task({**TINY, **change}, [{"run": 0}], first_run=0, seed=0)


def test_sweep_task_rejects_empty_runs():
    with pytest.raises(ValueError, match="runs must be a non-empty list"):
        ngram_tasks.sweep_task(dict(TINY), [], first_run=0, seed=0)


# --- the attention-only (App. I.1) and plateau-sweep tasks -----------------------------

TINY_AO = dict(
    S=3, n=3, T=8, alpha=1.0, heads=[2, 1], embedding="onehot", steps=16, lr=0.005,
    weight_decay=1e-4, batch=4, test_sequences=16, eval_every=4, map_sequences=8,
)  # fmt: skip
TINY_PL = dict(S=3, n=3, T=8, heads=2, steps=8, lr=0.01, batch=4, checkpoint_every=4)
PL_RUNS = [{"T": 4, "alpha": 0.5}, {"T": 8, "alpha": 0.5}, {"T": 8, "alpha": 2.0}]


@pytest.mark.parametrize("embedding", ["onehot", "learned"])
def test_attention_only_task_shapes_maps_and_determinism(embedding):
    sweep = Sweep("ao", "tools.ngram_tasks:attention_only_task",
                  {**TINY_AO, "embedding": embedding}, [{"run": 0}, {"run": 1}], 1)  # fmt: skip
    a, b = run_sweep(sweep), run_sweep(sweep)
    assert a.shared["checkpoint_steps"] == list(range(0, 17))
    assert a.shared["map_steps"] == [1, 4, 16]
    shapes = {k: v.shape for k, v in a.arrays.items()}
    assert shapes == {
        "train_loss_head": (2, 16),
        "train_loss_avg": (2, 4),
        "grad_norm_avg": (2, 4),
        "test_loss": (2, 5),
        "offset_weight": (2, 17, 2, 2),
        "maps": (2, 3, 2, 8, 8),
    }
    for key, value in a.arrays.items():
        np.testing.assert_array_equal(b.arrays[key], value, err_msg=key)
    maps = a.arrays["maps"]
    np.testing.assert_allclose(maps.sum(-1), 1.0, atol=5e-4)  # rounded to 4 decimals
    assert np.all(np.triu(maps, 1) == 0)  # causal
    # the stored offset weights are the diagonals of the same maps
    ow = a.arrays["offset_weight"][:, -1, :, 0]
    diag = np.diagonal(maps[:, -1], offset=-1, axis1=-2, axis2=-1)[..., :-1].mean(-1)
    np.testing.assert_allclose(ow, diag, atol=1e-4)
    # the test loss starts at log S: the read-out W starts at zero
    np.testing.assert_allclose(a.arrays["test_loss"][:, 0], np.log(3), rtol=1e-6)


def test_attention_only_task_with_mlp_layers_measures_the_test_gradient():
    """Fig. 7's runs: MLP layers, and the test-loss gradient at every checkpoint."""
    settings = {**TINY_AO, "mlp": 5, "grad_sequences": 8, "checkpoint_every": 8}
    a = run_sweep(Sweep("ao", "tools.ngram_tasks:attention_only_task", settings, [{"run": 0}], 1))
    assert a.arrays["test_grad_norm"].shape == (1, 3)  # checkpoints 0, 8, 16
    # an unbiased estimate from two halves, clipped at 0 (8 sequences: noisy)
    assert np.all(a.arrays["test_grad_norm"] >= 0) and a.arrays["test_grad_norm"][0, 0] > 0
    plain = run_sweep(Sweep("ao", "tools.ngram_tasks:attention_only_task", settings | {"mlp": 0},
                            [{"run": 0}], 1))  # fmt: skip
    assert not np.array_equal(plain.arrays["test_loss"], a.arrays["test_loss"])
    with pytest.raises(ValueError, match="grad_sequences"):
        run_sweep(Sweep("ao", "tools.ngram_tasks:attention_only_task",
                        settings | {"grad_sequences": 17}, [{"run": 0}], 1))  # fmt: skip


def test_plateau_task_reads_attention_up_to_each_runs_length():
    sweep = Sweep("pl", "tools.ngram_tasks:plateau_task", TINY_PL, PL_RUNS, 3)
    a = run_sweep(sweep)
    assert a.shared["checkpoint_steps"] == [0, 4, 8]
    assert {k: v.shape for k, v in a.arrays.items()} == {
        "train_loss_head": (3, 8),
        "train_loss_avg": (3, 2),
        "grad_norm_avg": (3, 2),
        "offset_weight": (3, 3, 2, 2),
    }
    # A1 starts at zero: uniform attention over rows t = 1 .. L-2 of each run's own length L
    w0 = a.arrays["offset_weight"][:, 0, 0, 0]
    expected = [np.mean([1 / (t + 1) for t in range(1, L - 1)]) for L in (4, 8, 8)]
    np.testing.assert_allclose(w0, expected, rtol=1e-6)  # float32 softmax
    # the prefix reproduces the head of the full run
    prefix = run_sweep(Sweep("pl", sweep.task, {**TINY_PL, "stop_after": 3}, PL_RUNS, 3))
    np.testing.assert_array_equal(
        prefix.arrays["train_loss_head"], a.arrays["train_loss_head"][:, :3]
    )


@pytest.mark.parametrize(
    "task, settings, runs, error, match",
    [
        ("attention_only_task", {**TINY_AO, "width": 3}, [{}], ValueError, "unknown settings"),
        ("attention_only_task", {**TINY_AO, "heads": 2}, [{}], TypeError, "settings\\['heads'\\]"),
        ("attention_only_task", {**TINY_AO, "embedding": "x"}, [{}], ValueError, "embedding"),
        ("attention_only_task", {**TINY_AO, "steps": 8}, [{}], ValueError, "settings\\['steps'\\]"),
        ("plateau_task", TINY_PL, [{"T": 9, "alpha": 0.5}], ValueError, "runs\\[0\\]\\['T'\\]"),
        ("plateau_task", TINY_PL, [{"T": 8}], ValueError, "must give the run's 'T' and 'alpha'"),
        ("plateau_task", TINY_PL, [{"T": 8, "alpha": 0.0}], ValueError, "alpha"),
        ("plateau_task", TINY_PL, [], ValueError, "runs must be a non-empty list"),
    ],
)  # fmt: skip
def test_part3_tasks_reject_bad_arguments(task, settings, runs, error, match):
    with pytest.raises(error, match=match):
        getattr(ngram_tasks, task)(settings, runs, first_run=0, seed=0)


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
    elif sweep.task.endswith(":attention_only_task"):  # App. I.1 as the chapter runs it
        st = stored.sweep.settings
        # Fig. 7 (MLP layers): S, T and the data as its caption and Sec. 5; a smaller test set
        fig7 = {"S": 5, "T": 64, "alpha": 0.5, "test_sequences": 2**14} if st.get("mlp") else {}
        assert {k: st[k] for k in PAPER_ATTENTION_ONLY if k != "embedding"} == {
            k: v for k, v in {**PAPER_ATTENTION_ONLY, **fig7}.items() if k != "embedding"
        }
        assert stored.arrays["maps"].shape[1:] == (3, st["heads"][0], st["T"], st["T"])
        assert stored.shared["eval_steps"][-1] == st["steps"]
    elif sweep.task.endswith(":plateau_task"):  # Sec. 5's optimiser, steps and batch
        st = stored.sweep.settings
        assert (st["S"], st["n"], st["heads"]) == (5, 3, 2)
        assert (st["steps"], st["lr"], st["batch"]) == (2**14, 0.01, 128)
        assert {(r["T"], r["alpha"]) for r in sweep.runs} >= {(32, 0.5)}
        assert stored.shared["checkpoint_steps"][-1] == st["steps"]
    else:  # Makkuva et al. (2024), Table 2: fixed values and the grid-searched ranges
        st = stored.sweep.settings
        assert sweep.task == MARKOV_TASK
        assert (st["steps"], st["lr"], st["weight_decay"]) == (8000, 1e-3, 1e-3)
        assert st["N"] in (512, 1024, 2048) and st["batch"] in (16, 50)
        assert st["d"] in (4, 8, 16, 32, 64) and 1 <= st["depth"] <= 6
        for key in ("test_loss", "gap", "entropy_rate", "unigram_entropy"):
            assert key in stored.arrays, key
        assert stored.shared["eval_steps"][-1] == st["steps"]


# The larger prefixes are "slow", so the floor run (tests/book/test_floor.py) skips them; they
# check torch's arithmetic, which the floor does not change (torch is its exception).
@pytest.mark.parametrize(
    "name",
    [
        "p3_stagewise_paper",
        pytest.param("p3_mlp_paper", marks=pytest.mark.slow),
        pytest.param("p2_fig4_paper", marks=pytest.mark.slow),
        pytest.param("p2_fig4_table1_paper", marks=pytest.mark.slow),
        pytest.param("p2_fig4_table1_untied_paper", marks=pytest.mark.slow),
    ],
)
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
        here = (machine_description(), torch.__version__)
        warnings.warn(
            f"the prefix reproduces within rtol 1e-5, not bit for bit ({where} vs {here})",
            stacklevel=1,
        )


# --- the copies re-run on a GPU ---------------------------------------------------------


def test_gpu_copies_are_the_cpu_sweeps_on_a_gpu():
    """Same sweep, other kernels: the provenance names the GPU, the first losses agree."""
    from tools.gpu_results import gpu_run_names, gpu_timings, load_gpu_run

    names = gpu_run_names()
    assert "p2_fig4_paper" in names and set(names) <= set(stored_names())
    timed = gpu_timings()
    for name in names:
        gpu, cpu = load_gpu_run(name), load_stored(name)
        assert gpu.provenance["device"].startswith("cuda"), name
        assert "NVIDIA" in gpu.provenance["machine"] and "NVIDIA" in timed["machine"]
        assert (gpu.sweep.settings, gpu.sweep.runs, gpu.sweep.seed) == (
            cpu.sweep.settings,
            cpu.sweep.runs,
            cpu.sweep.seed,
        ), name
        assert timed["sweeps"][name] == gpu.provenance["wall_seconds"]
        assert gpu.arrays.keys() == cpu.arrays.keys()
        # the same data and initialisations: the first training losses differ by rounding
        np.testing.assert_allclose(
            gpu.arrays["train_loss_head"], cpu.arrays["train_loss_head"], rtol=0, atol=1e-3
        )
        assert not np.array_equal(gpu.arrays["train_loss_head"], cpu.arrays["train_loss_head"])
    grid = timed["grid"]
    assert grid["shard_runs"] == 81 and grid["steps_compared"][0] < grid["steps_compared"][1]
    for tied in ("tied", "untied"):  # the difference of the two runs, per step
        (short, t0), (long, t1) = sorted((int(k), v) for k, v in grid[f"{tied}_seconds"].items())
        assert grid[f"{tied}_s_per_step"] == pytest.approx((t1 - t0) / (long - short), rel=1e-3)
    for name, info in timed.get("unfinished", {}).items():
        assert name in stored_names() and info["ran_s"] > 0 and info["how"]
    step = timed["part3_step"]  # Part III's step, batched runs, on the GPU and on one CPU core
    assert step["steps_compared"][0] < step["steps_compared"][1] and step["date"]
    for where in ("cuda", "cpu"):
        assert all(0 < step[f"{where}_ms_per_step_{runs}_runs"] < 1e3 for runs in (1, 4, 25))


def test_a_run_without_a_gpu_copy_is_refused_by_name():
    from tools.gpu_results import load_gpu_run

    with pytest.raises(ValueError, match="p2_fig4_paper"):  # names the runs re-run there
        load_gpu_run("p3_stagewise_paper")  # a CPU file without a GPU copy


def test_the_machine_names_the_vector_instructions_of_torchs_kernels(monkeypatch):
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    arch, cpu, cores, system = machine_description().split(", ")
    assert arch == platform.machine()
    assert cpu.endswith(" (AVX2)") and cores.endswith(" cores") and system == platform.system()


def test_checkpoint_gradient_norms_are_each_runs_own():
    """The stored Part III runs' gradient norms: one per run and checkpoint, of that model."""
    from ccmc_lite.core import TrainConfig, train_runs
    from ccmc_lite.ngram import (
        NGramStream,
        NGramTask,
        SimplifiedTransformer,
        gradient_norm,
        make_loss_fn,
        make_test_set,
    )
    from tools.ngram_tasks import checkpoint_gradient_norms

    task = NGramTask(S=3, n=3, T=8, alpha=1.0)
    tx, ty = make_test_set(task, 64, seed=1)
    cfg = TrainConfig(steps=4, lr=0.01, optimizer="adam", checkpoint_steps=(0, 4), progress=False)
    res = train_runs(
        lambda: SimplifiedTransformer(3, 8, 2),
        make_loss_fn(),
        NGramStream(task, 8),
        n_runs=2,
        config=cfg,
        seed=0,
    )
    steps, norms = checkpoint_gradient_norms(res, tx, ty)
    assert steps == [0, 4] and norms.shape == (2, 2) and (norms[:, 0] > 0).all()
    for r in range(2):  # each entry is that run's model at that checkpoint
        for j, step in enumerate(steps):
            own = gradient_norm(res.module(r, step), tx, ty.to(torch.float32)).estimate
            assert norms[r, j] == pytest.approx(own, rel=1e-6)
    assert not np.allclose(norms[0], norms[1])  # two runs, two sets of weights
