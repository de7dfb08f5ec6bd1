"""The Part III experiments as sweep tasks: the runs stored at the paper's settings.

Varre, Yüce & Flammarion (2025, Sec. 5) train the simplified two-layer transformer
(Sec. 2.3, eqs. (2)-(3) and (9)) on in-context n-grams: ``S = 5``, ``n = 3``, ``T = 32``,
Dirichlet ``α = 0.5``, ``n - 1 = 2`` first-layer heads, one-hot embeddings (``d = S``), Adam
with constant learning rate 0.01, batch 128, ``2^14`` steps, test loss on ``2^16``
sequences; their Fig. 1 shows the same experiment for a 4-gram. :func:`sweep_task` trains
a group of seeds of that experiment as one batched program with the package functions the
chapter uses, so that a :class:`ccmc_lite.stored.Sweep` names it as its task
(``"tools.ngram_tasks:sweep_task"``) and ``python3 dev.py paper-runs`` can train the stored
runs again. :func:`attention_only_task` does the same for the attention-only transformer
of App. I.1 (Fig. 4) and :func:`plateau_task` for the book's ``(T, α)`` plateau-length
sweep, in which every run has its own length and prior.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import torch

from ccmc_lite.core import TrainConfig, TrainResult, train_runs
from ccmc_lite.core.validation import (
    check_choice,
    check_float,
    check_instance,
    check_int,
    check_seed,
    check_size,
)
from ccmc_lite.ngram import (
    AttentionOnlyTransformer,
    NGramStream,
    NGramTask,
    SimplifiedTransformer,
    first_layer_attention,
    gradient_norm,
    kgram_levels,
    make_eval_fn,
    make_loss_fn,
    make_test_set,
    offset_attention,
)
from tools.sweeps import check_task_args

__all__ = [
    "PAPER_ATTENTION_ONLY",
    "PAPER_STAGEWISE",
    "attention_only_task",
    "checkpoint_gradient_norms",
    "plateau_task",
    "sweep_task",
]

#: Settings of Varre et al. (2025), Sec. 5 ("Experimental Setup"), for :func:`sweep_task`.
PAPER_STAGEWISE: dict[str, Any] = {
    "S": 5,
    "n": 3,
    "T": 32,
    "alpha": 0.5,
    "heads": 2,
    "steps": 2**14,
    "lr": 0.01,
    "batch": 128,
    "test_sequences": 2**16,
}

_KNOWN = {
    "S",
    "n",
    "T",
    "alpha",
    "heads",
    "steps",
    "lr",
    "batch",
    "test_sequences",
    "test_seed",
    "eval_every",
    "checkpoint_every",
    "eps",
    "grad_sequences",
    "head",
    "map_last",
    "stop_after",
}


def _core_settings(
    settings: Any, *, min_steps: int = 1
) -> tuple[int, int, int, int, float, int, int, Any]:
    """``S, n, T, steps, lr, batch, head, stop_after`` of a Part III task's settings, checked."""
    S = check_int("settings['S']", settings["S"], minimum=2)
    n = check_int("settings['n']", settings["n"], minimum=2)
    T = check_int("settings['T']", settings["T"], minimum=n)
    steps = check_int("settings['steps']", settings["steps"], minimum=min_steps)
    lr = check_float("settings['lr']", settings["lr"], minimum=0.0, open_lower=True)
    batch = check_int("settings['batch']", settings["batch"], minimum=1)
    head = check_int("settings['head']", settings.get("head", 20), minimum=1)
    return S, n, T, steps, lr, batch, head, settings.get("stop_after")


def _test_data(
    task: NGramTask, settings: Any, *, default_seed: int, device: str, eps: float = 1e-8
) -> tuple[torch.Tensor, torch.Tensor, Any, dict[str, float]]:
    """The fixed test set's tokens and next-token laws (CPU), the ``eval_fn`` on it (whose
    copy of the set lives on ``device``, with the models) and its add-``α`` k-gram levels."""
    n_test = check_int("settings['test_sequences']", settings["test_sequences"], minimum=1)
    tx, ty = make_test_set(task, n_test, seed=check_seed(settings.get("test_seed", default_seed)))
    levels = kgram_levels(tx, ty, task.S, tuple(range(1, task.n + 1)), smoothing=task.alpha)
    return tx, ty, make_eval_fn(tx, ty, eps=eps, device=device), levels


def sweep_task(
    settings: dict[str, Any],
    runs: list[dict[str, Any]],
    *,
    first_run: int,
    seed: int,
    device: str = "cpu",
) -> dict[str, Any]:
    """Train seeds of the stage-wise experiment (a task for :class:`~ccmc_lite.stored.Sweep`).

    ``settings`` (shared by every run): ``S``, ``n``, ``T``, ``alpha``, ``heads``, ``steps``,
    ``lr``, ``batch`` (the paper's values are :data:`PAPER_STAGEWISE`), ``test_sequences``,
    and optionally ``test_seed`` (default 2025, as in the chapter), ``eval_every`` (default
    ``steps // 64``), ``checkpoint_every`` (default ``2 * eval_every``), ``eps`` (the
    authors' ``log(p + eps)``, default ``1e-8``), ``grad_sequences`` (default 0: with
    ``G > 0``, the gradient of the loss on the first ``G`` test sequences is measured at
    every checkpoint, :func:`checkpoint_gradient_norms`), ``head``
    (training losses kept, default 20), ``map_last`` (positions of the stored final
    attention maps, default 12) and ``stop_after`` (train only a prefix; then only
    ``train_loss_head`` is returned).
    ``runs``: one record per seed (e.g. ``{"run": r}``); run ``r`` of the sweep is
    initialised from ``derive_seed(seed, r, 0)``. The optimiser is the paper's: Adam
    ``(0.9, 0.999)``, constant learning rate, no weight decay.

    Returns per run: ``train_loss_head`` ``(R, head)``; ``test_loss`` at the evaluation
    steps ``(R, E)`` on ``test_sequences`` sequences; ``train_loss_avg`` and
    ``grad_norm_avg``, the mean training loss and mini-batch gradient norm over each
    evaluation interval ``(R, E - 1)``; ``offset_weight`` ``(R, C, heads, n - 1)``, the
    weight each first-layer head puts on the token ``o = 1, ..., n - 1`` places back at
    each checkpoint (:func:`~ccmc_lite.ngram.offset_attention`); ``final_attention``
    ``(R, heads, map_last, map_last)``, the last positions of σ(A_1) at the end (Fig. 5's
    per-seed maps); with ``grad_sequences``, ``test_grad_norm`` ``(R, C)``, the norm of
    that gradient at each checkpoint (sampling bias removed). ``shared``: ``eval_steps``,
    ``checkpoint_steps`` and the k-gram reference ``levels`` (add-``α``) on the test set.
    """
    first_run = check_task_args(settings, runs, first_run)
    _check_known(settings, _KNOWN)
    S, n, T, steps, lr, batch, head, stop_after = _core_settings(settings)
    alpha = check_float("settings['alpha']", settings["alpha"], minimum=0.0, open_lower=True)
    heads = check_int("settings['heads']", settings["heads"], minimum=1)
    eval_every = check_int(
        "settings['eval_every']", settings.get("eval_every", max(steps // 64, 1)), minimum=1
    )
    ck_every = check_int(
        "settings['checkpoint_every']", settings.get("checkpoint_every", 2 * eval_every), minimum=1
    )
    eps = check_float("settings['eps']", settings.get("eps", 1e-8), minimum=0.0, open_lower=True)
    map_last = check_int("settings['map_last']", settings.get("map_last", 12), minimum=1)

    task = NGramTask(S=S, n=n, T=T, alpha=alpha)
    prefix = stop_after is not None
    eval_fn = levels = tx = ty = None
    if not prefix:
        tx, ty, eval_fn, levels = _test_data(
            task, settings, default_seed=2025, device=device, eps=eps
        )
    n_grad = _grad_sequences(settings, tx)
    config = TrainConfig(
        steps=steps,
        lr=lr,
        optimizer="adam",
        betas=(0.9, 0.999),
        eval_every=eval_every,
        checkpoint_steps=() if prefix else tuple(range(0, steps + 1, ck_every)),
        first_run=first_run,
        stop_after=stop_after,
        device=device,
        progress=False,
    )
    result = train_runs(
        lambda: SimplifiedTransformer(S, T, heads),
        make_loss_fn(eps=eps),
        NGramStream(task, batch),
        n_runs=len(runs),
        config=config,
        seed=seed,
        eval_fn=eval_fn,
    )
    out = _loss_summary(result, head, None if prefix else eval_every)
    if prefix:
        return out
    out["test_loss"] = result.evals["test_loss"].double().numpy()
    ck_steps = sorted(result.checkpoints)
    A1 = torch.stack([result.checkpoints[s]["A1"] for s in ck_steps], dim=1)  # (R, C, H, T, T)
    out["offset_weight"] = np.stack([offset_attention(A1, o) for o in range(1, n)], axis=-1)
    lo = max(T - map_last, 0)
    att = first_layer_attention(result.checkpoints[ck_steps[-1]]["A1"]).double()
    out["final_attention"] = att[..., lo:, lo:].numpy()
    if n_grad:
        assert tx is not None and ty is not None  # not a prefix: the test set was drawn
        _, out["test_grad_norm"] = checkpoint_gradient_norms(
            result, tx[:n_grad], ty[:n_grad], eps=eps
        )
    out["shared"] = {
        "eval_steps": [int(s) for s in result.eval_steps],
        "checkpoint_steps": [int(s) for s in ck_steps],
        "levels": levels,
    }
    return out


def _grad_sequences(settings: Any, tx: torch.Tensor | None) -> int:
    """``settings['grad_sequences']`` (default 0), at most the number of test sequences."""
    n_grad = check_int("settings['grad_sequences']", settings.get("grad_sequences", 0), minimum=0)
    if tx is not None and n_grad > tx.shape[0]:
        raise ValueError(
            f"settings['grad_sequences'] ({n_grad}) must not exceed "
            f"settings['test_sequences'] ({tx.shape[0]})"
        )
    return n_grad


def _loss_summary(result: Any, head: int, every: int | None) -> dict[str, Any]:
    """``train_loss_head`` ``(R, head)`` and, unless ``every`` is ``None``, the mean training
    loss and gradient norm over each complete interval of ``every`` steps ``(R, E)``."""
    loss = result.loss.double()  # (R, steps)
    out: dict[str, Any] = {"train_loss_head": loss[:, : min(head, loss.shape[1])].numpy()}
    if every is None:
        return out
    R, E = loss.shape[0], loss.shape[1] // every  # complete intervals
    grad = result.grad_norm.double()
    out["train_loss_avg"] = loss[:, : E * every].reshape(R, E, every).mean(-1).numpy()
    out["grad_norm_avg"] = grad[:, : E * every].reshape(R, E, every).mean(-1).numpy()
    return out


def _check_known(settings: Any, known: set[str]) -> None:
    unknown = sorted(set(settings) - known)
    if unknown:
        raise ValueError(f"unknown settings {unknown}; known: {sorted(known)}")


def _offset_weights(att: torch.Tensor, n: int, lengths: list[int] | None = None) -> np.ndarray:
    """Weight on the ``(-o)``-token, ``o = 1..n-1``, of attention maps ``(R, C, H, T, T)``.

    Averaged over query rows ``t = o .. L-2`` (``L``: each run's own length, default ``T``),
    as :func:`~ccmc_lite.ngram.offset_attention`; returns ``(R, C, H, n - 1)``.
    """
    att = att.double()
    R, T = att.shape[0], att.shape[-1]
    out = np.zeros((*att.shape[:3], n - 1))
    for r in range(R):
        L = T if lengths is None else lengths[r]
        for o in range(1, n):
            rows = torch.arange(o, L - 1)
            out[r, ..., o - 1] = att[r][..., rows, rows - o].mean(-1).numpy()
    return out


#: Settings of Varre et al. (2025), App. I.1 (Fig. 4), as the book's chapter runs them:
#: ``S = 3``, ``n = 3``, ``T = 32``, ``α = 1``, heads ``(2, 1)``, AdamW with learning rate
#: 0.005 and weight decay ``1e-4``, batch 128, 4096 steps, test loss on ``2^16`` sequences.
PAPER_ATTENTION_ONLY: dict[str, Any] = {
    "S": 3,
    "n": 3,
    "T": 32,
    "alpha": 1.0,
    "heads": [2, 1],
    "embedding": "onehot",
    "steps": 4096,
    "lr": 0.005,
    "weight_decay": 1e-4,
    "batch": 128,
    "test_sequences": 2**16,
}

_KNOWN_ATTENTION_ONLY = {
    *PAPER_ATTENTION_ONLY,
    "test_seed",
    "eval_every",
    "checkpoint_every",
    "map_sequences",
    "mlp",
    "grad_sequences",
    "head",
    "stop_after",
}


def attention_only_task(
    settings: dict[str, Any],
    runs: list[dict[str, Any]],
    *,
    first_run: int,
    seed: int,
    device: str = "cpu",
) -> dict[str, Any]:
    """Train seeds of the attention-only transformer of App. I.1 (a :class:`~ccmc_lite.stored.Sweep`
    task).

    ``settings``: ``S``, ``n``, ``T``, ``alpha``, ``heads`` (per layer), ``embedding``
    (``"onehot"`` or ``"learned"``), ``steps``, ``lr``, ``weight_decay``, ``batch``,
    ``test_sequences`` (:data:`PAPER_ATTENTION_ONLY` holds the chapter's values), and
    optionally ``test_seed`` (default 7, as in the chapter), ``eval_every`` (default
    ``steps // 64``), ``checkpoint_every`` (default ``steps // 16``), ``map_sequences``
    (test sequences the attention maps are averaged over, default 256), ``mlp`` (hidden
    width of the MLP after each layer, default 0: attention-only; App. I.3's Fig. 7),
    ``grad_sequences``, ``head`` and ``stop_after`` as in :func:`sweep_task`. The optimiser
    is AdamW ``(0.9, 0.999)`` with a constant learning rate. ``runs``: one record per seed.

    Returns per run: ``train_loss_head``, ``train_loss_avg``, ``grad_norm_avg`` and
    ``test_loss`` as :func:`sweep_task`; ``offset_weight`` ``(R, C, H, n - 1)``, the weight
    each first-layer head puts on the token ``o`` places back at each checkpoint, read from
    the first-layer maps averaged over the ``map_sequences`` test sequences (here attention
    depends on the input); ``maps`` ``(R, 3, H, T, T)``, those averaged maps at the second
    checkpoint, the one a quarter of the way, and the last (the chapter's Fig. 4b, 4d
    columns; rounded to 4 decimals); with ``grad_sequences``, ``test_grad_norm`` ``(R, C)`` as
    :func:`sweep_task`. ``shared``: ``eval_steps``, ``checkpoint_steps``, ``map_steps`` and the
    add-``α`` k-gram ``levels`` on the test set.
    """
    first_run = check_task_args(settings, runs, first_run)
    _check_known(settings, _KNOWN_ATTENTION_ONLY)
    S, n, T, steps, lr, batch, head, stop_after = _core_settings(settings, min_steps=16)
    alpha = check_float("settings['alpha']", settings["alpha"], minimum=0.0, open_lower=True)
    heads = settings["heads"]
    if not isinstance(heads, (list, tuple)) or not heads:
        raise TypeError(f"settings['heads'] must be a non-empty list of ints; got {heads!r}")
    heads = [check_int("settings['heads'] entry", h, minimum=1) for h in heads]
    embedding = check_choice("settings['embedding']", settings["embedding"], ("onehot", "learned"))
    wd = check_float("settings['weight_decay']", settings["weight_decay"], minimum=0.0)
    eval_every = check_int(
        "settings['eval_every']", settings.get("eval_every", max(steps // 64, 1)), minimum=1
    )
    ck_every = check_int(
        "settings['checkpoint_every']", settings.get("checkpoint_every", steps // 16), minimum=1
    )
    n_maps = check_int("settings['map_sequences']", settings.get("map_sequences", 256), minimum=1)
    mlp = check_int("settings['mlp']", settings.get("mlp", 0), minimum=0)

    task = NGramTask(S=S, n=n, T=T, alpha=alpha)
    prefix = stop_after is not None
    eval_fn = levels = tx = ty = None
    if not prefix:
        tx, ty, eval_fn, levels = _test_data(task, settings, default_seed=7, device=device)
    n_grad = _grad_sequences(settings, tx)
    config = TrainConfig(
        steps=steps,
        lr=lr,
        optimizer="adamw",
        weight_decay=wd,
        eval_every=eval_every,
        checkpoint_steps=() if prefix else tuple(range(0, steps + 1, ck_every)),
        first_run=first_run,
        stop_after=stop_after,
        device=device,
        progress=False,
    )
    result = train_runs(
        lambda: AttentionOnlyTransformer(S, T, heads, embedding=embedding, mlp=mlp),
        make_loss_fn(),
        NGramStream(task, batch),
        n_runs=len(runs),
        config=config,
        seed=seed,
        eval_fn=eval_fn,
    )
    out = _loss_summary(result, head, None if prefix else eval_every)
    if prefix:
        return out
    assert tx is not None
    out["test_loss"] = result.evals["test_loss"].double().numpy()
    ck_steps = sorted(result.checkpoints)
    seqs = tx[:n_maps]  # (n_maps, T), shared by every run

    def mean_map(run: int, step: int) -> torch.Tensor:  # (H, T, T), averaged over `seqs`
        model = cast(AttentionOnlyTransformer, result.module(run, step))
        return model.attention(seqs)[0].mean(0)

    with torch.no_grad():  # the maps depend on the input
        maps = torch.stack(
            [torch.stack([mean_map(r, s) for s in ck_steps]) for r in range(len(runs))]
        )  # (R, C, H, T, T)
    out["offset_weight"] = _offset_weights(maps, n)
    picks = [1, len(ck_steps) // 4, len(ck_steps) - 1]
    out["maps"] = np.round(maps[:, picks].double().numpy(), 4)
    if n_grad:
        assert ty is not None  # not a prefix: the test set was drawn
        _, out["test_grad_norm"] = checkpoint_gradient_norms(result, tx[:n_grad], ty[:n_grad])
    out["shared"] = {
        "eval_steps": [int(s) for s in result.eval_steps],
        "checkpoint_steps": [int(s) for s in ck_steps],
        "map_steps": [int(ck_steps[i]) for i in picks],
        "levels": levels,
    }
    return out


_KNOWN_PLATEAU = {"S", "n", "T", "heads", "steps", "lr", "batch", "checkpoint_every", "head"}
_KNOWN_PLATEAU |= {"stop_after"}


def plateau_task(
    settings: dict[str, Any],
    runs: list[dict[str, Any]],
    *,
    first_run: int,
    seed: int,
    device: str = "cpu",
) -> dict[str, Any]:
    """Train the book's ``(T, α)`` plateau sweep (a :class:`~ccmc_lite.stored.Sweep` task).

    The simplified transformer of Sec. 2.3 with ``T`` positions is trained with Adam
    ``(0.9, 0.999)`` at a constant learning rate, as in Sec. 5; every run has its own
    sequence length and Dirichlet prior, drawn by one :class:`~ccmc_lite.ngram.NGramStream`
    (a run of length ``L < T`` is queried at position ``L - 1``, which the causal model
    makes exactly training on length ``L``). ``settings``: ``S``, ``n``, ``T`` (the largest
    length), ``heads``, ``steps``, ``lr``, ``batch``, and optionally ``checkpoint_every``
    (default ``steps // 128``), ``head`` and ``stop_after`` as in :func:`sweep_task`.
    ``runs``: one record per run with its length ``"T"`` (``n <= T``) and prior ``"alpha"``.

    Returns per run: ``train_loss_head``; ``train_loss_avg`` and ``grad_norm_avg`` over
    each checkpoint interval ``(R, C - 1)``; ``offset_weight`` ``(R, C, H, n - 1)``, the
    weight on the ``o``-back token at every checkpoint over each run's own query rows
    (:func:`~ccmc_lite.ngram.offset_attention` with ``length``). ``shared``:
    ``checkpoint_steps``.
    """
    first_run = check_task_args(settings, runs, first_run)
    _check_known(settings, _KNOWN_PLATEAU)
    S, n, T, steps, lr, batch, head, stop_after = _core_settings(settings)
    heads = check_int("settings['heads']", settings["heads"], minimum=1)
    ck_every = check_int(
        "settings['checkpoint_every']",
        settings.get("checkpoint_every", max(steps // 128, 1)),
        minimum=1,
    )
    lengths, alphas = [], []
    for i, rec in enumerate(runs):
        check_instance(f"runs[{i}]", rec, dict)
        if "T" not in rec or "alpha" not in rec:
            raise ValueError(f"runs[{i}] must give the run's 'T' and 'alpha'; got {rec!r}")
        lengths.append(check_int(f"runs[{i}]['T']", rec["T"], minimum=n, maximum=T))
        alphas.append(
            check_float(f"runs[{i}]['alpha']", rec["alpha"], minimum=0.0, open_lower=True)
        )
    prefix = stop_after is not None
    task = NGramTask(S=S, n=n, T=T, alpha=alphas[0])
    config = TrainConfig(
        steps=steps,
        lr=lr,
        optimizer="adam",
        betas=(0.9, 0.999),
        checkpoint_steps=() if prefix else tuple(range(0, steps + 1, ck_every)),
        first_run=first_run,
        stop_after=stop_after,
        device=device,
        progress=False,
    )
    result = train_runs(
        lambda: SimplifiedTransformer(S, T, heads),
        make_loss_fn(),
        NGramStream(task, batch, alpha=alphas, lengths=lengths),
        n_runs=len(runs),
        config=config,
        seed=seed,
    )
    out = _loss_summary(result, head, None if prefix else ck_every)
    if prefix:
        return out
    ck_steps = sorted(result.checkpoints)
    A1 = torch.stack([result.checkpoints[s]["A1"] for s in ck_steps], dim=1)  # (R, C, H, T, T)
    out["offset_weight"] = _offset_weights(first_layer_attention(A1), n, lengths)
    out["shared"] = {"checkpoint_steps": [int(s) for s in ck_steps]}
    return out


def checkpoint_gradient_norms(
    result: TrainResult,
    tokens: torch.Tensor,
    target: torch.Tensor,
    *,
    eps: float = 1e-8,
    every: int = 1,
) -> tuple[list[int], np.ndarray]:
    """Population gradient norm at every saved checkpoint of every run (Fig. 6 of the paper).

    The per-step norms recorded by the trainer are norms of *mini-batch* gradients and are
    dominated by sampling noise; here the gradient of the loss on a large fixed batch is
    estimated without that bias (:func:`ccmc_lite.ngram.gradient_norm`, two halves).
    ``every = m`` uses every ``m``-th checkpoint only. Returns ``(steps, norms)`` with
    ``norms`` of shape ``(R, len(steps))``.
    """
    every = check_size("every", every, minimum=1)
    if not isinstance(getattr(result, "checkpoints", None), dict):
        raise TypeError(
            f"result must be a TrainResult with checkpoints; got {type(result).__name__}"
        )
    steps = sorted(result.checkpoints)[::every]
    if not steps:
        raise ValueError("the training result has no checkpoints")
    out = np.zeros((result.n_runs, len(steps)))
    for j, s in enumerate(steps):
        for r in range(result.n_runs):
            model = result.module(r, s)
            out[r, j] = gradient_norm(model, tokens, target.to(torch.float32), eps=eps).estimate
    return steps, out
