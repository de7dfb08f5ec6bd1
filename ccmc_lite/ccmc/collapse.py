"""Single trajectories and distribution collapse, Ildiz et al. 2024, Sec. 5 and App. E.

Feeding a CCMC its own output makes frequent tokens more frequent: the trajectory
collapses onto a few *winner* tokens (Fig. 4). For ``K = 2`` with both rows of ``P`` equal
to ``(1 − p, p)`` (``p < 1/2``) Lemma 5.3 bounds the weak token's expected frequency by
:math:`t^{-q}`, :math:`q = (1-2p)/(1-p)`, and a Borel–Cantelli heuristic predicts finitely
many weak→weak transitions iff ``p < 1/3`` (Fig. 5).

Beyond the paper (a *conjecture*, see the chapter): the frequency vector is a stochastic
approximation of the ODE :math:`\\dot m = \\mu(m) - m`, with :math:`\\mu(m)` the
stationary law of the re-weighted chain :math:`P^m` (eq. (1)). A singleton ``{w}`` is a
stable limit iff ``P[w, w] > P[w, j]`` for all ``j ≠ w``, and a loser ``j`` then decays
like :math:`t^{-(1 - P[w,j]/P[w,w])}`; in general, at a stable fixed point :math:`m^*`
with support ``S`` the exponent is :math:`1-\\lambda_j`, :math:`\\lambda_j = \\sum_{i\\in S}
m^*_i P_{ij} / \\sum_{k\\in S} m^*_k P_{ik}` (:func:`~ccmc_lite.ccmc.predicted_decay_exponents`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from matplotlib.axes import Axes

from ..core.seeding import torch_generator
from ..core.validation import (
    DEFAULT_LIMITS,
    as_tensor,
    check_float,
    check_instance,
    check_int,
    check_probability,
    check_seed,
    check_size,
)
from .chain import check_transition

__all__ = [
    "binary_collapse_chain",
    "collapse_explorer",
    "collapse_exponent",
    "compare_decay_exponents",
    "draw_collapse",
    "explorer_chain",
    "fit_decay_exponents",
    "fixed_point",
    "plot_frequency_curves",
    "plot_snapshots",
    "predicted_decay_exponents",
    "random_chain",
    "running_frequencies",
    "self_reinforcing_tokens",
    "stationary_of_reweighted",
    "weak_weak_exponent",
    "zero_diagonal",
]


def binary_collapse_chain(p: float) -> torch.Tensor:
    """The ``K = 2`` chain of Lemma 5.3: every row is ``(1 − p, p)``.

    The paper writes the column-stochastic :math:`P^{GT} = [[1-p, 1-p], [p, p]]`, i.e. the
    next-token law does not depend on the current state; token 1 (the paper's token 2) is
    the *weak* token when ``p < 1/2``.

    Parameters
    ----------
    p : float
        In ``(0, 1)``.

    Returns
    -------
    Tensor
        ``(2, 2)`` row-stochastic.
    """
    p = check_probability("p", p)
    return torch.tensor([[1 - p, p], [1 - p, p]], dtype=torch.float64)


def collapse_exponent(p: Any) -> Any:
    """:math:`q = (1 - 2p)/(1 - p)`, the decay exponent of Lemma 5.3 (eq. (50)).

    Parameters
    ----------
    p : float or array-like
        Weak-token probability in ``(0, 1)``.

    Returns
    -------
    float or numpy.ndarray
        ``q``.
    """
    arr = as_tensor("p", p, finite=False).numpy()
    if np.any(~np.isfinite(arr)) or np.any(arr <= 0) or np.any(arr >= 1):
        raise ValueError(f"p must lie in (0, 1); got {p!r}")
    q = (1 - 2 * arr) / (1 - arr)
    return float(q) if q.ndim == 0 else q


def weak_weak_exponent(p: Any) -> Any:
    """Growth exponent :math:`1 - 2q = (3p-1)/(1-p)` of the expected weak→weak count.

    Sec. 5.2 heuristic: :math:`\\mathbb P(\\text{weak}\\to\\text{weak at } t) \\propto t^{-2q}`,
    so the expected count grows like :math:`t^{1-2q}` when ``p > 1/3`` and stays bounded
    when ``p < 1/3`` (then the exponent is negative).

    Parameters
    ----------
    p : float or array-like
        In ``(0, 1)``.

    Returns
    -------
    float or numpy.ndarray
    """
    q = collapse_exponent(p)
    return 1 - 2 * q


def random_chain(K: int, *, seed: int, scale: float = 1.0) -> torch.Tensor:
    """The base chain of a randomly initialised attention layer, :math:`P^W` with ``E = I``.

    ``W`` has i.i.d. :math:`\\mathcal N(0, \\text{scale}^2)` entries; ``P[i, j] =
    softmax_j(W[j, i])`` (eq. (4)). Entries are positive.

    Parameters
    ----------
    K : int
        Vocabulary size.
    seed : int
        Random seed.
    scale : float
        Standard deviation of the logits.

    Returns
    -------
    Tensor
        ``(K, K)`` row-stochastic.
    """
    K = check_size("K", K, minimum=2, limit=DEFAULT_LIMITS["vocab"])
    scale = check_float("scale", scale, minimum=0.0)
    W = scale * torch.randn(K, K, generator=torch_generator(check_seed(seed)), dtype=torch.float64)
    return torch.softmax(W.T, dim=-1)


def zero_diagonal(P: Any) -> torch.Tensor:
    """``P`` with its diagonal set to zero and rows renormalised (Fig. 4, lower panels).

    Renormalising does not change the CCMC: :math:`\\pi^X` is invariant to scaling a row.
    No attention ``W`` produces a zero entry (Thm. 2.6 needs positive entries); the CCMC
    itself is well defined as long as a key token with ``P[x_L, j] > 0`` exists.

    Parameters
    ----------
    P : array-like
        ``(K, K)`` row-stochastic whose off-diagonal part of every row is non-zero.

    Returns
    -------
    Tensor
        ``(K, K)``.
    """
    P = check_transition(P)
    Q = P.clone()
    Q.fill_diagonal_(0.0)
    sums = Q.sum(-1, keepdim=True)
    if bool((sums <= 0).any()):
        raise ValueError("P must have a non-zero off-diagonal entry in every row")
    return Q / sums


def running_frequencies(tokens: Any, K: int) -> torch.Tensor:
    """Frequencies :math:`m(X_t)` of every prefix ``X_t = tokens[..., :t]`` (eq. (2)).

    Parameters
    ----------
    tokens : array-like
        ``(T,)`` or ``(R, T)`` sequences (prompt included).
    K : int
        Vocabulary size.

    Returns
    -------
    Tensor
        ``(..., T, K)``: row ``t - 1`` holds :math:`m(X_t)`.
    """
    from ..core.validation import check_tokens

    K = check_size("K", K, minimum=2, limit=DEFAULT_LIMITS["vocab"])
    X = check_tokens("tokens", tokens, K, ndim=(1, 2))
    cum = torch.nn.functional.one_hot(X, K).double().cumsum(-2)
    return cum / torch.arange(1, X.shape[-1] + 1, dtype=torch.float64)[:, None]


def self_reinforcing_tokens(P: Any) -> list[int]:
    """Tokens ``w`` that are their own strict favourite successor: ``P[w, w] > P[w, j]``, ``j ≠ w``.

    Conjecture (beyond the paper): exactly these tokens can win a single trajectory alone.

    Parameters
    ----------
    P : array-like
        ``(K, K)`` row-stochastic.

    Returns
    -------
    list of int
    """
    P = check_transition(P)
    off = P.clone()
    off.fill_diagonal_(-1.0)
    return [int(w) for w in range(P.shape[0]) if bool(P[w, w] > off[w].max())]


def _check_weights(name: str, m: Any, K: int) -> torch.Tensor:
    """``K`` non-negative token weights, not all zero (normalised by the callers)."""
    m = as_tensor(name, m, dtype=torch.float64, ndim=1)
    if m.shape[0] != K or bool((m < 0).any()) or float(m.sum()) <= 0:
        raise ValueError(f"{name} must be {K} non-negative weights, not all zero")
    return m


def stationary_of_reweighted(P: Any, m: Any) -> torch.Tensor:
    """Stationary law :math:`\\mu(m)` of the re-weighted chain :math:`P^m` (eq. (1)) on ``supp(m)``.

    Parameters
    ----------
    P : array-like
        ``(K, K)`` row-stochastic.
    m : array-like
        ``(K,)`` non-negative weights; the chain lives on ``{j : m_j > 0}``.

    Returns
    -------
    Tensor
        ``(K,)`` probabilities, zero outside the support (the unique stationary law when
        :math:`P^m` is irreducible there; otherwise the one from the eigenvector solver).
    """
    P = check_transition(P)
    m = _check_weights("m", m, P.shape[0])
    S = (m > 0).nonzero().flatten()
    Pm = P[S][:, S] * m[S][None, :]
    if bool((Pm.sum(-1) <= 0).any()):
        raise ValueError("the re-weighted chain has a state with no way out on supp(m)")
    Pm = Pm / Pm.sum(-1, keepdim=True)
    n = len(S)
    A = torch.cat([Pm.T - torch.eye(n, dtype=torch.float64), torch.ones(1, n, dtype=torch.float64)])
    b = torch.cat([torch.zeros(n, dtype=torch.float64), torch.ones(1, dtype=torch.float64)])
    sol = torch.linalg.lstsq(A, b[:, None]).solution.flatten().clamp(min=0)
    out = torch.zeros_like(m)
    out[S] = sol / sol.sum()
    return out


def fixed_point(P: Any, m0: Any, *, steps: int = 4000, dt: float = 0.05) -> torch.Tensor:
    """Follow the mean-field ODE :math:`\\dot m = \\mu(m) - m` from ``m0`` (Euler steps).

    Its stable fixed points are the conjectured limits of :math:`m(X_t)` (beyond the
    paper); started at a trajectory's late frequencies restricted to its dominant tokens,
    it returns the fixed point :math:`m^*` that trajectory approaches.

    Parameters
    ----------
    P : array-like
        ``(K, K)``.
    m0 : array-like
        ``(K,)`` start; tokens with ``m0 = 0`` stay at zero.
    steps : int
        Euler steps.
    dt : float
        Step size.

    Returns
    -------
    Tensor
        ``(K,)``.
    """
    steps = check_size("steps", steps, minimum=1)
    dt = check_float("dt", dt, minimum=0.0, maximum=1.0, open_lower=True)
    m = _check_weights("m0", m0, check_transition(P).shape[0]).clone()
    m = m / m.sum()
    for _ in range(steps):
        m = m + dt * (stationary_of_reweighted(P, m) - m)
    return m


def predicted_decay_exponents(P: Any, m: Any, *, losers: Any = None) -> torch.Tensor:
    """Conjectured decay exponents of rare tokens (beyond the paper).

    For a rare token ``j`` the chain spends its time on the other tokens, distributed as
    the stationary law :math:`\\mu` of :math:`P^{m_{-j}}` (``m`` with ``j`` removed), and
    draws ``j`` from state ``i`` with probability :math:`m_j P_{ij} / D_i`,
    :math:`D_i = \\sum_k m_k P_{ik}`. So ``j``'s count grows like :math:`t^{\\lambda_j}` with
    :math:`\\lambda_j = \\sum_i \\mu_i P_{ij} / D_i`, and its frequency decays like
    :math:`t^{-\\alpha_j}`, :math:`\\alpha_j = 1 - \\lambda_j`.

    At a fixed point :math:`m^* = \\mu(m^*)` with support ``S`` (``losers`` default: the
    tokens outside ``S``) this is :math:`\\lambda_j = \\sum_{i\\in S} m^*_i P_{ij} /
    \\sum_{k\\in S} m^*_k P_{ik}`; for a single winner ``w``,
    :math:`\\alpha_j = 1 - P_{wj}/P_{ww}` (for ``K = 2``, Lemma 5.3's ``q``). Evaluated at a
    measured, not yet converged ``m`` it gives the *local* exponent. A negative
    :math:`\\alpha_j` means ``j`` grows: the point is unstable.

    Parameters
    ----------
    P : array-like
        ``(K, K)``.
    m : array-like or int
        ``(K,)`` weights (a fixed point or current frequencies), or ``int`` ``w`` for the
        vertex ``e_w``.
    losers : list of int, optional
        Tokens to predict for (default: those with ``m_j = 0``).

    Returns
    -------
    Tensor
        ``(K,)`` exponents ``alpha``; ``nan`` for tokens not in ``losers``.
    """
    P = check_transition(P)
    K = P.shape[0]
    if isinstance(m, (int, np.integer)):
        w = check_int("m", m, minimum=0, maximum=K - 1)
        weights = torch.zeros(K, dtype=torch.float64)
        weights[w] = 1.0
    else:
        weights = _check_weights("m", m, K)
    weights = weights / weights.sum()
    if losers is None:
        losers = (weights == 0).nonzero().flatten().tolist()
    alpha = torch.full((K,), float("nan"), dtype=torch.float64)
    for j in losers:
        j = check_int("losers entry", int(j), minimum=0, maximum=K - 1)
        rest = weights.clone()
        rest[j] = 0.0
        if float(rest.sum()) <= 0:
            raise ValueError(f"m must put weight on tokens other than the loser {j}")
        rest = rest / rest.sum()
        mu = stationary_of_reweighted(P, rest)
        D = (P * rest[None, :]).sum(-1)  # (K,)
        on = mu > 0
        alpha[j] = 1.0 - float((mu[on] * P[on, j] / D[on]).sum())
    return alpha


def fit_decay_exponents(times: Any, freqs: Any, *, t_min: float) -> torch.Tensor:
    """Fitted slopes of :math:`\\mathbb E[\\log m(X_t)_j]` against :math:`\\log t`, ``t >= t_min``.

    Averaging ``log m_j`` over trajectories measures the *typical* decay exponent of each
    token; averaging ``m_j`` itself (as in Lemma 5.3) weights the rare late collapses.

    Parameters
    ----------
    times : array-like
        ``(C,)`` sequence lengths at which the frequencies were recorded.
    freqs : array-like
        ``(R, C, K)`` frequencies (e.g. :attr:`ccmc_lite.ccmc.Trajectories.frequencies`).
    t_min : float
        Start of the fitting window.

    Returns
    -------
    Tensor
        ``(K,)`` slopes (``-alpha_j`` for a decaying token); ``-inf`` frequencies are not
        possible because every prompt token keeps at least its initial count.
    """
    t = as_tensor("times", times, dtype=torch.float64, ndim=1)
    F = as_tensor("freqs", freqs, dtype=torch.float64, ndim=3)
    if F.shape[1] != t.shape[0]:
        raise ValueError(f"freqs must have {t.shape[0]} recorded times on axis 1; got {F.shape}")
    if bool((F <= 0).any()):
        raise ValueError("freqs must be strictly positive to take logarithms")
    t_min = check_float("t_min", t_min, minimum=0.0)
    window = t >= t_min
    if int(window.sum()) < 2:
        raise ValueError(f"need at least two recorded times >= t_min={t_min}")
    x = torch.log(t[window])
    y = torch.log(F[:, window, :]).mean(0)  # (C', K)
    xc = x - x.mean()
    return (xc[:, None] * (y - y.mean(0))).sum(0) / (xc**2).sum()


def compare_decay_exponents(
    freqs: Any, times: Any, P: Any, m_fixed: Any, *, t_min: float
) -> list[tuple[int, float, float, float]]:
    """Measured versus conjectured decay exponents of the losers (beyond the paper).

    Parameters
    ----------
    freqs : array-like
        ``(R, C, K)`` frequencies of trajectories that approach the same winners.
    times : array-like
        ``(C,)`` sequence lengths of the records.
    P : array-like
        ``(K, K)`` base chain.
    m_fixed : array-like or int
        The winners' fixed point :math:`m^*` (or ``w`` for a single winner).
    t_min : float
        Start of the fitting window.

    Returns
    -------
    list of tuple
        ``(j, measured, conjectured, local)`` per loser ``j``: the slope of
        :math:`\\mathbb E\\log m_j` (:func:`fit_decay_exponents`), :math:`-\\alpha_j` at
        the fixed point, and :math:`-\\alpha_j` at the typical (geometric-mean)
        frequencies of the window (:func:`predicted_decay_exponents` with ``losers``).
    """
    F = as_tensor("freqs", freqs, dtype=torch.float64, ndim=3)
    t = as_tensor("times", times, dtype=torch.float64, ndim=1)
    alpha = predicted_decay_exponents(P, m_fixed)
    losers = [j for j in range(alpha.shape[0]) if not bool(torch.isnan(alpha[j]))]
    slopes = fit_decay_exponents(t, F, t_min=t_min)
    window = t >= t_min
    m_now = torch.exp(torch.log(F[:, window]).mean((0, 1)))  # typical m in the window
    local = predicted_decay_exponents(P, m_now, losers=losers)
    return [(j, float(slopes[j]), -float(alpha[j]), -float(local[j])) for j in losers]


def plot_frequency_curves(
    ax: Axes,
    freqs: Any,
    *,
    start: int = 1,
    labels: Any = None,
    logx: bool = False,
) -> None:
    """Plot token frequencies :math:`m(X_t)` against ``t`` (Fig. 4, middle panels).

    Parameters
    ----------
    ax : Axes
        Target axes.
    freqs : array-like
        ``(T, K)`` from :func:`running_frequencies` (one trajectory).
    start : int
        Value of ``t`` of the first row.
    labels : list, optional
        Token labels (default ``0..K-1``).
    logx : bool
        Logarithmic time axis.
    """
    check_instance("ax", ax, Axes)
    from ..core.plotting import PALETTE

    F = as_tensor("freqs", freqs, dtype=torch.float64, ndim=2).numpy()
    T, K = F.shape
    labels = list(range(K)) if labels is None else list(labels)
    t = np.arange(start, start + T)
    for k in range(K):
        ax.plot(t, F[:, k], color=PALETTE[k % len(PALETTE)], label=f"token {labels[k]}")
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel("sequence length $t$")
    ax.set_ylabel("frequency $m(X_t)_k$")
    ax.set_ylim(0, 1)


def plot_snapshots(
    ax: Axes, tokens: Any, starts: Any, *, window: int = 10, K: int | None = None
) -> None:
    """Show ``window``-token snapshots of one trajectory as coloured cells (Fig. 4, right).

    Parameters
    ----------
    ax : Axes
        Target axes.
    tokens : array-like
        ``(T,)`` one trajectory.
    starts : array-like
        Start indices of the windows (one row each).
    window : int
        Window length.
    K : int, optional
        Vocabulary size (default ``max(tokens) + 1``).
    """
    check_instance("ax", ax, Axes)
    from matplotlib.colors import ListedColormap

    from ..core.plotting import PALETTE

    X = as_tensor("tokens", tokens, dtype=torch.long, ndim=1).numpy()
    window = check_size("window", window, minimum=1)
    starts = [check_int("starts entry", int(s), minimum=0, maximum=len(X) - window) for s in starts]
    K = (
        int(X.max()) + 1
        if K is None
        else check_size("K", K, minimum=2, limit=DEFAULT_LIMITS["vocab"])
    )
    grid = np.stack([X[s : s + window] for s in starts])
    ax.imshow(grid, cmap=ListedColormap(PALETTE[:K]), vmin=-0.5, vmax=K - 0.5, aspect="auto")
    for r in range(grid.shape[0]):
        for c in range(window):
            ax.text(c, r, str(grid[r, c]), ha="center", va="center", color="white", fontsize=8)
    ax.set_yticks(range(len(starts)), [f"i={s}" for s in starts])
    ax.set_xticks([])
    ax.grid(False)
    ax.set_xlabel(f"{window}-token window starting at index $i$")


def _parse_matrix(text: str) -> np.ndarray:
    rows = [r for r in text.replace("\n", ";").split(";") if r.strip()]
    return np.array([[float(v) for v in r.replace(" ", ",").split(",") if v] for r in rows])


def explorer_chain(K: int, mode: str, *, seed: int, custom: str = "") -> torch.Tensor:
    """The base chain chosen in the explorer: ``"random"``, ``"zero-diagonal"`` or ``"custom"``.

    Parameters
    ----------
    K : int
        Vocabulary size (ignored for ``"custom"``, which defines its own ``K``).
    mode : str
        ``"random"`` (:func:`random_chain`), ``"zero-diagonal"`` (:func:`zero_diagonal` of
        the same random chain) or ``"custom"``.
    seed : int
        Seed of the random chain.
    custom : str
        Rows separated by ``;`` and entries by ``,`` (e.g. ``"0.9,0.1; 0.5,0.5"``); rows
        are renormalised to sum to one.

    Returns
    -------
    Tensor
        ``(K, K)`` row-stochastic.
    """
    from ..core.validation import check_choice

    mode = check_choice("mode", mode, ("random", "zero-diagonal", "custom"))
    if mode == "custom":
        try:
            M = _parse_matrix(custom)
        except ValueError:
            raise ValueError(
                f"custom must be rows of numbers like '0.9,0.1; 0.5,0.5'; got {custom!r}"
            ) from None
        if M.ndim != 2 or M.shape[0] != M.shape[1]:
            raise ValueError(f"custom must describe a square matrix; got shape {M.shape}")
        if np.any(M < 0) or np.any(M.sum(1) <= 0):
            raise ValueError("custom must have non-negative rows with a positive sum")
        return check_transition(M / M.sum(1, keepdims=True), name="custom")
    P = random_chain(K, seed=seed)
    return zero_diagonal(P) if mode == "zero-diagonal" else P


def draw_collapse(P: Any, prompt: Any, length: int, *, seed: int, window: int = 10) -> Any:
    """One trajectory of the CCMC: frequency curves and window snapshots (Fig. 4 layout).

    Parameters
    ----------
    P : array-like
        ``(K, K)`` base chain.
    prompt : array-like
        Initial prompt.
    length : int
        Number of generated tokens.
    seed : int
        Sampling seed.
    window : int
        Snapshot window length.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt

    from .chain import sample_trajectories

    P = check_transition(P)
    K = P.shape[0]
    traj = sample_trajectories(P, prompt, length, seed=seed)
    tokens = traj.tokens[0]
    L0 = traj.prompt_length
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.4), width_ratios=[1.6, 1])
    plot_frequency_curves(ax1, running_frequencies(tokens, K)[L0 - 1 :], start=L0)
    ax1.legend(ncol=2, fontsize=8)
    T = tokens.shape[0]
    starts = np.linspace(L0, T - window, 5).astype(int)
    plot_snapshots(ax2, tokens, starts, window=window, K=K)
    return fig


def collapse_explorer() -> Any:
    """An ``ipywidgets`` explorer: choose ``K``, ``P``, prompt and length; see the collapse.

    Returns
    -------
    object
        The interactive widget (needs a live kernel; the chapter also draws the default
        view statically with :func:`draw_collapse`).
    """
    import ipywidgets as widgets
    import matplotlib.pyplot as plt
    from IPython.display import display

    def show(K, mode, custom, prompt, length, seed):
        try:
            P = explorer_chain(K, mode, seed=seed, custom=custom)
            toks = [int(v) for v in prompt.replace(" ", ",").split(",") if v.strip()]
            fig = draw_collapse(P, toks, length, seed=seed)
        except (ValueError, TypeError) as err:
            print(f"cannot draw: {err}")
            return
        display(fig)
        plt.close(fig)

    return widgets.interactive(
        show,
        K=widgets.IntSlider(value=6, min=2, max=10, description="K"),
        mode=widgets.Dropdown(options=["random", "zero-diagonal", "custom"], value="random"),
        custom=widgets.Text(value="0.6,0.4; 0.4,0.6", description="custom P"),
        prompt=widgets.Text(value="0,1,2,3,4,5", description="prompt"),
        length=widgets.IntSlider(value=500, min=50, max=5000, step=50, description="length"),
        seed=widgets.IntSlider(value=0, min=0, max=50, description="seed"),
    )
