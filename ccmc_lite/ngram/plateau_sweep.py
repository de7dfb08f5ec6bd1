"""How long the bigram plateau lasts, run by run, and how that depends on the task.

Beyond Varre et al. (2025), who show the plateaus of one setting (Sec. 5) and note that the
previous-token head forms "more often" first (App. I.2). Training the simplified
transformer leaves the bigram plateau when a first-layer head starts to attend to the token
two back; it reaches the plateau when a head attends to the previous token. Reading both
moments from the first-layer attention of each checkpoint
(:func:`~ccmc_lite.ngram.offset_attention`) gives a plateau length per run, which a sweep
over the sequence length ``T`` and the prior concentration ``α`` turns into a trend. A run
whose two-back head has not formed by the last step is *censored*: its length is only a
lower bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.validation import as_tensor, check_float, check_instance, check_int, check_size
from .plateaus import formation_step

__all__ = [
    "HeadTiming",
    "first_heads",
    "head_timing",
    "plateau_lengths",
    "plateau_statistics",
    "plot_plateau_sweep",
]


@dataclass(frozen=True)
class HeadTiming:
    """When the first-layer heads of one run form.

    Attributes
    ----------
    T : int
        The run's sequence length.
    alpha : float
        The run's prior concentration.
    previous, two_back : int or None
        First checkpoint step at which some head puts more than the threshold on the token
        one back (the bigram head) and two back (the trigram head); ``None`` if no head
        does by the last checkpoint.
    """

    T: int
    alpha: float
    previous: int | None
    two_back: int | None

    @property
    def censored(self) -> bool:
        """The run has not left the bigram plateau (or not reached it) by the last step."""
        return self.previous is None or self.two_back is None

    def plateau(self, steps: int) -> float | None:
        """Steps spent on the bigram plateau: ``two_back - previous``.

        For a censored run, ``steps - previous`` (a lower bound); ``None`` if the
        previous-token head never formed.
        """
        steps = check_int("steps", steps, minimum=0)
        if self.previous is None:
            return None
        if self.two_back is None and steps < self.previous:
            raise ValueError(
                f"steps must be the run's length, at least {self.previous}; got {steps}"
            )
        end = self.two_back if self.two_back is not None else steps
        return float(end - self.previous)


def _check_timing(timing: Any) -> list[HeadTiming]:
    check_instance("timing", timing, (list, tuple))
    for i, t in enumerate(timing):
        check_instance(f"timing[{i}]", t, HeadTiming)
    return list(timing)


def _check_cells(name: str, values: Any, check: Any) -> list[Any]:
    check_instance(name, values, (list, tuple))
    if not values:
        raise ValueError(f"{name} must not be empty")
    return [check(f"{name}[{i}]", v) for i, v in enumerate(values)]


def _alpha(name: str, value: Any) -> float:
    return check_float(name, value, minimum=0.0, open_lower=True)


def _length(name: str, value: Any) -> int:
    return check_size(name, value, minimum=1)


def head_timing(
    cells: Sequence[tuple[int, float]],
    checkpoint_steps: Any,
    offset_weight: Any,
    *,
    threshold: float = 0.3,
) -> list[HeadTiming]:
    """Read each run's head formation (a :class:`HeadTiming`) from its offset weights.

    ``cells``: one ``(T, alpha)`` per run; ``offset_weight``: ``(R, C, H, n_offsets)``,
    ``n_offsets >= 2``, the weight each first-layer head puts on the token 1, 2, ... places
    back at each of the increasing ``checkpoint_steps`` (as
    :func:`~ccmc_lite.ngram.offset_attention` returns and stored sweeps keep it); a head has
    formed once its weight exceeds ``threshold``.
    """
    w = as_tensor("offset_weight", offset_weight, ndim=4).numpy()  # (R, C, H, n_offsets)
    steps = as_tensor("checkpoint_steps", checkpoint_steps, ndim=1).numpy()
    threshold = check_float("threshold", threshold, minimum=0.0, maximum=1.0)
    check_instance("cells", cells, (list, tuple))
    for i, cell in enumerate(cells):
        check_instance(f"cells[{i}]", cell, (list, tuple))
        if len(cell) != 2:
            raise ValueError(f"cells[{i}] must be a pair (T, alpha); got {cell!r}")
        _length(f"cells[{i}][0] (T)", cell[0])
        _alpha(f"cells[{i}][1] (alpha)", cell[1])
    if len(cells) != w.shape[0]:
        raise ValueError(
            f"cells has {len(cells)} entries but offset_weight has {w.shape[0]} runs; "
            "give one (T, alpha) per run"
        )
    if w.shape[1] != steps.size:
        raise ValueError(
            f"offset_weight has {w.shape[1]} checkpoints but checkpoint_steps has "
            f"{steps.size}; they must match"
        )
    if w.shape[3] < 2:
        raise ValueError("offset_weight needs the offsets 1 and 2 (its last axis >= 2)")
    out = []
    for r, (T, alpha) in enumerate(cells):
        formed = [formation_step(steps, w[r, :, :, o].max(-1), threshold) for o in (0, 1)]
        t1, t2 = (None if t < 0 else t for t in formed)
        out.append(HeadTiming(int(T), float(alpha), t1, t2))
    return out


def plateau_lengths(
    timing: Sequence[HeadTiming], steps: int, *, T: int, alpha: float
) -> tuple[np.ndarray, np.ndarray]:
    """Plateau lengths of the runs of one cell ``(T, alpha)``, and which are censored.

    Runs whose previous-token head never formed are left out. Returns two arrays of the
    same length: the lengths (float; lower bounds where censored) and the censored flags.
    """
    timing = _check_timing(timing)
    steps = check_size("steps", steps, minimum=1)
    T, alpha = _length("T", T), _alpha("alpha", alpha)
    rows = [
        (t.plateau(steps), t.censored)
        for t in timing
        if t.T == T and t.alpha == alpha and t.previous is not None
    ]
    return (
        np.array([length for length, _ in rows], dtype=float),
        np.array([censored for _, censored in rows], dtype=bool),
    )


def first_heads(timing: Sequence[HeadTiming]) -> dict[str, int]:
    """How many runs form the previous-token head first, the two-back head first, or none.

    A tie (both at the same checkpoint) counts for the previous token.
    """
    first = {"previous token": 0, "two back": 0, "none": 0}
    for t in _check_timing(timing):
        if t.previous is None and t.two_back is None:
            first["none"] += 1
        elif t.two_back is None or (t.previous is not None and t.previous <= t.two_back):
            first["previous token"] += 1
        else:
            first["two back"] += 1
    return first


def plateau_statistics(
    timing: Sequence[HeadTiming],
    steps: int,
    *,
    Ts: Sequence[int],
    alphas: Sequence[float],
    base_T: int = 32,
    base_alpha: float = 0.5,
) -> dict[str, float]:
    """Median plateau and escaped runs per cell, and Spearman's rank correlation per knob.

    The sweep varies one knob at a time around ``(base_T, base_alpha)``: the ``T`` cells are
    ``(T, base_alpha)`` and the ``α`` cells ``(base_T, alpha)``. Keys: ``med_T16`` and
    ``esc_T16`` (median length, censored runs at their lower bound, and the number of runs
    that escaped) for each ``T``; ``med_a50``, ``esc_a50`` for ``α = 0.5`` (100 α,
    rounded); ``rho_T``, ``pval_T``, ``rho_a``, ``pval_a``: Spearman's ρ between the knob
    and the lengths of all runs of its cells, and its two-sided p-value (ρ = 0, p = 1 when
    every length is equal).
    """
    from scipy.stats import spearmanr

    timing = _check_timing(timing)
    steps = check_size("steps", steps, minimum=1)
    Ts, alphas = _check_cells("Ts", Ts, _length), _check_cells("alphas", alphas, _alpha)
    base_T, base_alpha = _length("base_T", base_T), _alpha("base_alpha", base_alpha)
    cells = {f"T{T}": plateau_lengths(timing, steps, T=T, alpha=base_alpha) for T in Ts}
    cells.update(
        {f"a{round(100 * a)}": plateau_lengths(timing, steps, T=base_T, alpha=a) for a in alphas}
    )
    stats: dict[str, float] = {}
    for key, (lengths, censored) in cells.items():
        stats[f"med_{key}"] = float(np.median(lengths)) if lengths.size else float(steps)
        stats[f"esc_{key}"] = int((~censored).sum())
    for knob, pairs in (
        ("T", [(T, cells[f"T{T}"][0]) for T in Ts]),
        ("a", [(a, cells[f"a{round(100 * a)}"][0]) for a in alphas]),
    ):
        xs = np.concatenate([[v] * len(lengths) for v, lengths in pairs])
        ys = np.concatenate([lengths for _, lengths in pairs])
        test = spearmanr(xs, ys) if ys.size > 1 and np.ptp(ys) > 0 else None
        stats[f"rho_{knob}"] = float(test.statistic) if test is not None else 0.0
        stats[f"pval_{knob}"] = float(test.pvalue) if test is not None else 1.0
    return stats


def plot_plateau_sweep(
    axes: Any,
    timing: Sequence[HeadTiming],
    steps: int,
    *,
    Ts: Sequence[int],
    alphas: Sequence[float],
    base_T: int = 32,
    base_alpha: float = 0.5,
) -> None:
    """Plateau length of every run (triangles: censored) and each cell's median (bar).

    Two panels: ``axes[0]`` against ``T`` at ``base_alpha``, ``axes[1]`` against ``α`` at
    ``base_T``. Runs of one cell are spread sideways so that equal lengths stay visible.
    """
    from ..teaching.plotting import PALETTE

    if not hasattr(axes, "__len__") or len(axes) < 2:
        raise ValueError("axes must hold two panels, one for T and one for alpha")
    timing = _check_timing(timing)
    steps = check_size("steps", steps, minimum=1)
    Ts, alphas = _check_cells("Ts", Ts, _length), _check_cells("alphas", alphas, _alpha)
    base_T, base_alpha = _length("base_T", base_T), _alpha("base_alpha", base_alpha)
    panels = (
        (axes[0], Ts, lambda v: plateau_lengths(timing, steps, T=v, alpha=base_alpha)),
        (axes[1], alphas, lambda v: plateau_lengths(timing, steps, T=base_T, alpha=v)),
    )
    for ax, values, lengths_of in panels:
        for i, v in enumerate(values):
            lengths, censored = lengths_of(v)
            for mask, marker, colour in ((~censored, "o", 0), (censored, "^", 1)):
                n = int(mask.sum())
                dx = np.linspace(-0.12, 0.12, n) if n > 1 else np.zeros(n)
                ax.plot(i + dx, lengths[mask], marker, color=PALETTE[colour], alpha=0.8)
            if lengths.size:
                ax.plot([i - 0.2, i + 0.2], [np.median(lengths)] * 2, "k-", lw=2)
        ax.set_xticks(range(len(values)), [f"{v:g}" for v in values])
    axes[0].set(xlabel=rf"sequence length $T$ ($\alpha={base_alpha:g}$)")
    axes[1].set(xlabel=rf"prior $\alpha$ ($T={base_T}$)")
    axes[0].set_ylabel("bigram-plateau length (steps)")
    axes[1].plot([], [], "^", color=PALETTE[1], label=f"not escaped by step {steps}")
    axes[1].legend(fontsize=8)
