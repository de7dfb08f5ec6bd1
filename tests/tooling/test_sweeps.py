"""Sweeps as shards: the same numbers in-process, on a Dask cluster and on a GPU."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from ccmc_lite.stored import Sweep, load_stored
from tools.stored import save_stored
from tools.sweeps import SweepResult, makespan, resolve_task, run_shard, run_sweep, shards

TASK = "tools.markov_tasks:sweep_task"
SETTINGS = dict(K=2, d=2, N=6, batch=3, steps=4, lr=1e-2, tied=True, eval_every=2, n_test=4)
RUNS = [dict(p=p, q=q) for p, q in [(0.2, 0.3), (0.5, 0.8), (0.7, 0.6), (0.4, 0.9), (0.3, 0.3)]]


def _sweep(**kw) -> Sweep:
    return Sweep("tiny", TASK, {**SETTINGS, **kw}, RUNS, seed=3)


@pytest.fixture(scope="module")
def in_process() -> SweepResult:
    return run_sweep(_sweep(), shard_size=2)


def test_in_process_result_has_one_row_per_run_in_sweep_order(in_process):
    assert in_process.arrays["test_loss"].shape == (5, 3)  # checkpoints 0, 2, 4
    assert in_process.shared["eval_steps"] == [0, 2, 4]
    assert len(in_process.shard_seconds) == 3
    assert in_process.shard_runs == [2, 2, 1]  # the layout the runs' data streams depend on
    # each run's reference levels belong to its own kernel, in sweep order
    for r, run in enumerate(RUNS):
        p, q = run["p"], run["q"]
        pi0, pi1 = q / (p + q), p / (p + q)
        h = -(pi0 * np.log(pi0) + pi1 * np.log(pi1))
        assert in_process.arrays["unigram_entropy"][r] == pytest.approx(h, rel=1e-12)
    assert list(in_process.select(p=0.5, q=0.8)) == [1]


@pytest.mark.slow
def test_a_dask_cluster_gives_the_same_numbers(in_process):
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        on_dask = run_sweep(_sweep(), shard_size=2, executor=client)
    for key, value in in_process.arrays.items():
        np.testing.assert_array_equal(on_dask.arrays[key], value, err_msg=key)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_the_same_sweep_runs_on_the_gpu(in_process, tmp_path):
    on_gpu, again = (run_sweep(_sweep(), shard_size=2, device="cuda") for _ in range(2))
    assert on_gpu.device.startswith("cuda")
    for key, value in on_gpu.arrays.items():  # same seed, same numbers on the GPU too
        np.testing.assert_array_equal(again.arrays[key], value, err_msg=key)
    saved = json.loads(save_stored(on_gpu, tmp_path / "gpu.json", command="pytest").read_text())
    assert saved["provenance"]["device"] == on_gpu.device  # not the CPU's name
    for key, value in in_process.arrays.items():  # other kernels: equal to rounding
        np.testing.assert_allclose(on_gpu.arrays[key], value, rtol=1e-4, atol=1e-5, err_msg=key)


def test_a_sweep_over_the_fig4_grid_accepts_independent_cells():
    """p + q = 1 (anti-diagonal of Fig. 4): the unigram gap is 0/0; the sweep reports 0."""
    runs = [dict(p=0.3, q=0.7), dict(p=0.2, q=0.3)]
    out = run_sweep(Sweep("grid", TASK, SETTINGS, runs, seed=3))
    assert out.arrays["gap"][0] == 0.0 and np.isfinite(out.arrays["gap"][1])
    assert out.arrays["gap"][1] != 0.0


def test_shards_keep_each_runs_initialisation():
    """The first training loss of a run depends on its shard's data, its init does not."""
    one = shards(_sweep())[0]
    split = shards(_sweep(), 2)
    assert [s.first_run for s in split] == [0, 2, 4] and one.first_run == 0
    assert sum(s.n_runs for s in split) == one.n_runs == 5
    # first_run reaches train_runs: run 2 of the sweep is run 0 of shard 1
    from ccmc_lite.markov import markov_config, train_markov

    kernels = torch.stack([torch.tensor([[0.3, 0.7], [0.4, 0.6]])] * 3).double()
    kw = dict(model_options=dict(K=2, d=2, N=6), seed=3, batch_size=3)
    whole = train_markov(kernels, config=markov_config(2, progress=False), **kw)
    shard = train_markov(kernels[2:], config=markov_config(2, first_run=2, progress=False), **kw)
    for name, value in whole.params_at(0).items():
        assert torch.equal(shard.params_at(0)[name][0], value[2]), name


def test_a_prefix_of_a_run_reproduces_its_head(in_process):
    prefix = run_sweep(_sweep(stop_after=2), shard_size=2)
    np.testing.assert_array_equal(
        prefix.arrays["train_loss_head"], in_process.arrays["train_loss_head"][:, :2]
    )
    assert "test_loss" not in prefix.arrays


def test_stored_round_trip(tmp_path, in_process):
    path = save_stored(in_process, tmp_path / "tiny.json", command="pytest")
    blob = json.loads(path.read_text())
    assert blob["provenance"]["command"] == "pytest"
    assert blob["provenance"]["package_version"]
    assert in_process.device == blob["provenance"]["device"] == "cpu"
    assert blob["provenance"]["shard_runs"] == [2, 2, 1]
    assert blob["provenance"]["torch_threads"] == torch.get_num_threads()
    stored = load_stored("tiny", path=path)
    for key, value in in_process.arrays.items():
        np.testing.assert_array_equal(stored.arrays[key], value, err_msg=key)
    assert stored.sweep.runs == in_process.sweep.runs and stored.sweep.seed == 3
    assert list(stored.select(p=0.3, q=0.3)) == [4]
    with pytest.raises(ValueError, match="command must say how to regenerate"):
        save_stored(in_process, tmp_path / "x.json", command=" ")
    with pytest.raises(ValueError, match=r"path must end in \.json"):
        save_stored(in_process, tmp_path / "x.txt", command="pytest")
    blob["provenance"].pop("machine")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(blob))
    with pytest.raises(ValueError, match=r"lacks provenance fields \['machine'\]"):
        load_stored("bad", path=bad)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(task="nope"), ValueError, "task must look like"),
        (dict(runs=[]), ValueError, "at least one run"),
        (dict(runs=[1, 2]), TypeError, r"runs\[0\] must be a dict"),
        (dict(settings={"x": object()}), TypeError, "settings must be plain JSON"),
        (dict(settings={"x": float("nan")}), TypeError, "settings must be plain JSON"),
        (dict(seed=-1), ValueError, "seed must be >= 0"),
        (dict(name=""), TypeError, "name must be a non-empty string"),
    ],
)
def test_bad_sweeps_are_rejected(kwargs, error, match):
    args = dict(name="x", task=TASK, settings=SETTINGS, runs=RUNS, seed=0) | kwargs
    with pytest.raises(error, match=match):
        Sweep(**args)


@pytest.mark.parametrize(
    ("task", "match"),
    [
        ("tools.markov_tasks:nothing", "has no function 'nothing'"),
        ("no_such_module_xyz:f", "cannot be imported"),
        ("nope", "task must look like"),
    ],
)
def test_a_task_that_cannot_be_found_is_named_when_the_sweep_runs(task, match):
    """Reading a stored sweep needs only the package; running one imports its task."""
    with pytest.raises(ValueError, match=match):
        resolve_task(task)
    sweep = Sweep("x", "tools.markov_tasks:nothing", SETTINGS, RUNS, seed=0)  # it reads
    with pytest.raises(ValueError, match="has no function 'nothing'"):
        run_sweep(sweep)


def test_bad_calls_are_rejected():
    with pytest.raises(TypeError, match="sweep must be a Sweep"):
        run_sweep("tiny")
    with pytest.raises(TypeError, match="executor must have a submit"):
        run_sweep(_sweep(), executor=object())
    with pytest.raises(ValueError, match="shard_size must be >= 1"):
        shards(_sweep(), 0)
    with pytest.raises(TypeError, match="shard must be a Shard"):
        run_shard({"task": TASK})


def test_makespan_spreads_shards_longest_first():
    assert makespan([5.0, 3.0, 3.0, 2.0, 2.0, 2.0], 2) == 9.0  # {5, 2, 2} and {3, 3, 2}
    assert makespan([4.0, 1.0], 1) == 5.0
    assert makespan([4.0, 1.0], 8) == 4.0  # more workers than shards: the longest shard
    assert makespan([], 3) == 0.0
    with pytest.raises(ValueError, match="workers"):
        makespan([1.0], 0)
    with pytest.raises(ValueError, match=r"shard_seconds\[1\]"):
        makespan([1.0, -2.0], 2)
    with pytest.raises(TypeError, match="shard_seconds"):
        makespan("12", 2)
