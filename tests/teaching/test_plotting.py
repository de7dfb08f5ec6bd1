"""Tests for the book's plotting helpers (figure style, shared plots, log-log fits)."""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from ccmc_lite.teaching import (
    PALETTE,
    fig_axes,
    heatmap,
    loglog_fit,
    plot_loglog_fit,
    plot_reference_levels,
    plot_runs,
    use_book_style,
)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_use_book_style_sets_palette():
    use_book_style()
    assert matplotlib.rcParams["axes.prop_cycle"].by_key()["color"][0] == PALETTE[0]
    assert matplotlib.rcParams["axes.spines.top"] is False


def test_fig_axes_shape():
    fig, axes = fig_axes(3, 2, width=2, height=1.5)
    assert axes.shape == (6,)
    assert tuple(fig.get_size_inches()) == (6.0, 3.0)
    with pytest.raises(ValueError, match="ncols must be >= 1"):
        fig_axes(0)


def test_plot_runs_draws_mean_and_band():
    _fig, (ax,) = fig_axes()
    vals = np.array([[1.0, 2.0, 3.0], [3.0, 4.0, 5.0]])
    plot_runs(ax, [0, 1, 2], vals, label="loss")
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), [2.0, 3.0, 4.0])
    assert len(ax.collections) == 1  # the min-max band
    with pytest.raises(ValueError, match=r"values must have shape \(R, 3\)"):
        plot_runs(ax, [0, 1, 2], np.ones((2, 4)))
    with pytest.raises(ValueError, match="band must be"):
        plot_runs(ax, [0, 1, 2], vals, band="iqr")


def test_reference_levels_and_heatmap():
    _fig, (ax,) = fig_axes()
    plot_reference_levels(ax, {"H(pi)": 0.6, "entropy rate": 0.5})
    ys = sorted(line.get_ydata()[0] for line in ax.get_lines())
    assert ys == [0.5, 0.6]
    _fig, (ax,) = fig_axes()
    im = heatmap(ax, [[0.0, 1.0], [2.0, 3.0]], xlabels=["a", "b"], ylabels=[1, 2], annotate=True)
    assert im.get_array().shape == (2, 2)
    assert [t.get_text() for t in ax.texts] == ["0.00", "1.00", "2.00", "3.00"]
    with pytest.raises(ValueError, match="xlabels must have 2 entries"):
        heatmap(ax, [[0.0, 1.0], [2.0, 3.0]], xlabels=["a"])


def test_loglog_fit_recovers_power_law():
    x = np.geomspace(10, 1e4, 12)
    fit = loglog_fit(x, 3.0 * x**-1.0)
    assert fit.slope == pytest.approx(-1.0)
    assert fit.r2 == pytest.approx(1.0)
    np.testing.assert_allclose(fit(x), 3.0 * x**-1.0)
    _fig, (ax,) = fig_axes()
    assert plot_loglog_fit(ax, x, x**0.5).slope == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("x", "y", "match"),
    [
        ([1.0], [1.0], "at least 2 points"),
        ([1.0, 2.0], [1.0, 0.0], "strictly positive"),
        ([1.0, 2.0], [1.0], "same length"),
        ([1.0, float("nan")], [1.0, 2.0], "finite"),
    ],
)
def test_loglog_fit_rejects_bad_input(x, y, match):
    with pytest.raises(ValueError, match=match):
        loglog_fit(x, y)
