"""Plotting helpers with one consistent style for every figure of the book.

Chapters call :func:`~ccmc_lite.teaching.use_book_style` once (``import ccmc_lite`` does not touch
global matplotlib state) and then use the helpers below, so that loss curves, reference levels, heat
maps and log–log fits look the same in every part.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.rcsetup import cycler

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

from ..core.validation import as_tensor, check_float, check_instance, check_size

__all__ = [
    "PALETTE",
    "LoglogFit",
    "fig_axes",
    "heatmap",
    "loglog_fit",
    "plot_loglog_fit",
    "plot_reference_levels",
    "plot_runs",
    "plot_seed_losses",
    "use_book_style",
]

#: Colour-blind-safe palette (Okabe–Ito), in the order chapters use them.
PALETTE: tuple[str, ...] = (
    "#0072B2",  # blue
    "#D55E00",  # vermillion
    "#009E73",  # green
    "#CC79A7",  # purple
    "#E69F00",  # orange
    "#56B4E9",  # sky blue
    "#000000",  # black
    "#F0E442",  # yellow
)

BOOK_RC: dict[RcKeyType, Any] = {
    "figure.figsize": (6.4, 3.6),
    "figure.dpi": 100,
    "savefig.dpi": 110,
    "figure.autolayout": False,
    "figure.constrained_layout.use": True,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.prop_cycle": cycler(color=PALETTE),
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "legend.fontsize": 9,
    "legend.frameon": False,
    "lines.linewidth": 1.6,
    "image.cmap": "viridis",
    "font.size": 10,
}


def use_book_style() -> None:
    """Apply the book's matplotlib style (idempotent)."""
    mpl.rcParams.update(BOOK_RC)


def _to_numpy(name: str, x: Any, ndim: int | Sequence[int] | None = None) -> np.ndarray:
    return as_tensor(name, x, dtype=torch.float64, ndim=ndim, finite=False).cpu().numpy()


def fig_axes(
    ncols: int = 1, nrows: int = 1, *, width: float = 3.4, height: float = 3.0, **kwargs: Any
) -> tuple[Figure, np.ndarray]:
    """A figure with a grid of axes, sized per panel; returns ``(fig, axes.flatten())``."""
    ncols = check_size("ncols", ncols, minimum=1, limit=64)
    nrows = check_size("nrows", nrows, minimum=1, limit=64)
    width = check_float("width", width, minimum=0.0, maximum=100.0, open_lower=True)
    height = check_float("height", height, minimum=0.0, maximum=100.0, open_lower=True)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False, **kwargs
    )
    return fig, axes.ravel()


def plot_runs(
    ax: Axes,
    x: Any,
    values: Any,
    *,
    label: str | None = None,
    color: str | None = None,
    band: str = "minmax",
    show_runs: bool = False,
    **line_kwargs: Any,
) -> None:
    """Plot the mean over runs of ``values`` (shape ``(R, T)``) with a shaded band.

    ``band`` is ``"minmax"`` (range over runs), ``"std"`` (mean ± one standard deviation)
    or ``"none"``. ``show_runs=True`` also draws each run thinly.
    """
    check_instance("ax", ax, Axes)
    xs = _to_numpy("x", x, ndim=1)
    vals = _to_numpy("values", values, ndim=(1, 2))
    if vals.ndim == 1:
        vals = vals[None]
    if vals.shape[1] != xs.shape[0]:
        raise ValueError(f"values must have shape (R, {xs.shape[0]}) to match x; got {vals.shape}")
    if band not in ("minmax", "std", "none"):
        raise ValueError(f"band must be 'minmax', 'std' or 'none'; got {band!r}")
    (line,) = ax.plot(xs, vals.mean(0), label=label, color=color, **line_kwargs)
    c = line.get_color()
    if show_runs:
        for run in vals:
            ax.plot(xs, run, color=c, alpha=0.25, linewidth=0.7)
    if band == "minmax" and vals.shape[0] > 1:
        ax.fill_between(xs, vals.min(0), vals.max(0), color=c, alpha=0.2, linewidth=0)
    elif band == "std" and vals.shape[0] > 1:
        m, s = vals.mean(0), vals.std(0)
        ax.fill_between(xs, m - s, m + s, color=c, alpha=0.2, linewidth=0)


def plot_reference_levels(
    ax: Axes,
    levels: Mapping[str, float],
    *,
    colors: Sequence[str] | None = None,
    linestyle: str = "--",
) -> None:
    """Draw labelled horizontal reference lines (entropy rate, k-gram losses, ...)."""
    check_instance("ax", ax, Axes)
    palette = colors or PALETTE[len(ax.get_lines()) % len(PALETTE) :] + PALETTE
    for (name, value), color in zip(levels.items(), palette, strict=False):
        ax.axhline(float(value), linestyle=linestyle, color=color, linewidth=1.1, label=name)


def heatmap(
    ax: Axes,
    matrix: Any,
    *,
    xlabels: Sequence[Any] | None = None,
    ylabels: Sequence[Any] | None = None,
    cmap: str = "viridis",
    vmin: float | None = None,
    vmax: float | None = None,
    annotate: bool = False,
    fmt: str = "{:.2f}",
    colorbar: bool = True,
    colorbar_label: str | None = None,
) -> mpl.image.AxesImage:
    """Show a matrix with row 0 at the top, optional tick labels and annotations."""
    check_instance("ax", ax, Axes)
    M = _to_numpy("matrix", matrix, ndim=2)
    im = ax.imshow(M, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", origin="upper")
    ax.grid(False)
    if xlabels is not None:
        if len(xlabels) != M.shape[1]:
            raise ValueError(f"xlabels must have {M.shape[1]} entries; got {len(xlabels)}")
        ax.set_xticks(range(M.shape[1]), [str(v) for v in xlabels])
    if ylabels is not None:
        if len(ylabels) != M.shape[0]:
            raise ValueError(f"ylabels must have {M.shape[0]} entries; got {len(ylabels)}")
        ax.set_yticks(range(M.shape[0]), [str(v) for v in ylabels])
    if annotate:
        mid = np.nanmean(M)
        for i in range(M.shape[0]):
            for j in range(M.shape[1]):
                ax.text(
                    j,
                    i,
                    fmt.format(M[i, j]),
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white" if M[i, j] < mid else "black",
                )
    if colorbar:
        cb = ax.figure.colorbar(im, ax=ax, shrink=0.85)
        if colorbar_label:
            cb.set_label(colorbar_label)
    return im


@dataclass(frozen=True)
class LoglogFit:
    """Least-squares line ``log y = intercept + slope * log x``."""

    slope: float
    intercept: float
    r2: float

    def __call__(self, x: Any) -> np.ndarray:
        xs = np.asarray(x, dtype=float)
        return np.exp(self.intercept) * xs**self.slope


def loglog_fit(x: Any, y: Any) -> LoglogFit:
    """Fit a power law ``y ≈ C x^slope`` by least squares on ``(log x, log y)``.

    Requires at least two points with ``x > 0`` and ``y > 0`` and two distinct ``x``;
    raises ``ValueError`` otherwise (no silent NaN or arbitrary slope).
    """
    xs = _to_numpy("x", x, ndim=1)
    ys = _to_numpy("y", y, ndim=1)
    if xs.shape != ys.shape:
        raise ValueError(f"x and y must have the same length; got {xs.shape} and {ys.shape}")
    if xs.shape[0] < 2:
        raise ValueError(f"loglog_fit needs at least 2 points; got {xs.shape[0]}")
    if not (np.all(np.isfinite(xs)) and np.all(np.isfinite(ys))):
        raise ValueError("x and y must be finite")
    if np.any(xs <= 0) or np.any(ys <= 0):
        raise ValueError("x and y must be strictly positive for a log–log fit")
    lx, ly = np.log(xs), np.log(ys)
    if np.ptp(lx) <= 1e-12 * max(1.0, float(np.abs(lx).max())):
        raise ValueError(
            "x must hold at least two distinct values; with no spread in x the slope of a "
            f"log-log fit is undefined (got x = {xs[0]:.6g} throughout)"
        )
    slope, intercept = np.polyfit(lx, ly, 1)
    resid = ly - (intercept + slope * lx)
    total = ((ly - ly.mean()) ** 2).sum()
    r2 = 1.0 - (resid**2).sum() / total if total > 0 else 1.0
    return LoglogFit(float(slope), float(intercept), float(r2))


def plot_loglog_fit(
    ax: Axes, x: Any, y: Any, *, label: str = "", color: str | None = None, marker: str = "o"
) -> LoglogFit:
    """Scatter ``(x, y)`` on log–log axes with its fitted power law; returns the fit."""
    check_instance("ax", ax, Axes)
    fit = loglog_fit(x, y)
    xs = _to_numpy("x", x, ndim=1)
    pts = ax.loglog(xs, _to_numpy("y", y, ndim=1), marker, color=color, label=label or None)
    c = pts[0].get_color()
    grid = np.geomspace(xs.min(), xs.max(), 50)
    ax.loglog(grid, fit(grid), "-", color=c, alpha=0.8, label=f"slope {fit.slope:.2f}")
    return fit


def plot_seed_losses(
    ax: Axes,
    steps: Any,
    test_loss: Any,
    levels: Mapping[str, float] | None = None,
    *,
    title: str = "",
) -> None:
    """Test loss of each seed against the step, with dashed reference levels.

    The per-seed curves of Varre et al. (2025, Figs. 1, 3a) and Makkuva et al. (2024,
    Figs. 1, 3a). ``test_loss``: ``(R, E)`` at ``steps`` (``(E,)``); ``levels``:
    ``name -> loss`` (e.g. the ``levels`` a stored run keeps in ``shared``, or the entropy
    rate and the unigram entropy of a Markov chain), drawn as dashed lines.
    """
    check_instance("ax", ax, Axes)
    loss = as_tensor("test_loss", test_loss, ndim=2).numpy()  # (R, E)
    x = as_tensor("steps", steps, ndim=1).numpy()  # (E,)
    if loss.shape[1] != x.size:
        raise ValueError(f"test_loss must be (R, {x.size}); got {loss.shape}")
    for r in range(loss.shape[0]):
        ax.plot(x, loss[r], color=PALETTE[r % 8], lw=1.3, label=f"seed {r}")
    if levels:
        grey = ["black", "#999999", "#666666", "#333333", "#111111"]
        plot_reference_levels(ax, dict(levels), colors=grey)
    ax.set(xlabel="training step", ylabel="test loss (nats)", title=title)
