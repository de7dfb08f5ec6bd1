"""Maximum-likelihood fitting of the attention weights, Ildiz et al. 2024, Sec. 3.1 and 4.

The empirical problem (eq. (7)–(8)) over the subspace :math:`\\mathcal S_E`:

.. math::

    \\hat W_n = \\arg\\min_{W\\in\\mathcal S_E} \\hat{\\mathcal L}_n(W), \\qquad
    \\hat{\\mathcal L}_n(W) = \\frac1n\\sum_{i=1}^n
    -\\log\\big(c_{y_i}^\\top \\mathbf X_i^\\top \\mathbb S(\\mathbf X_i W x_{i,L_i})\\big).

Under Assumption 2.3 each term is :math:`-\\log \\pi^{X_i}_{y_i}` with logits
:math:`\\Theta[k, j] = e_j^\\top W e_k` (:func:`ccmc_lite.ccmc.logits_from_weights`):

.. math::

    \\ell_i = \\log\\sum_j m_j e^{\\Theta[k_i, j]} - \\Theta[k_i, y_i] - \\log m_{y_i},

a log-sum-exp, hence convex (Lemma 3.7); strictly convex on :math:`\\mathcal S_E` when
every co-occurrence graph is connected. The population problem (5) is the same with the
weights of :func:`ccmc_lite.ccmc.population_data`.

Solvers (both batched over leading run axes of the data, one program for a whole sweep):

* :func:`~ccmc_lite.ccmc.fit_gd` — plain gradient descent from ``W = 0`` in ``W`` coordinates (Cor.
  3.8);
* :func:`~ccmc_lite.ccmc.fit_newton` — damped Newton. The Hessian in logit coordinates is block
  diagonal (one ``K x K`` block per query token), and Newton's method is affine invariant, so the
  iterates equal Newton's in ``W`` coordinates restricted to :math:`\\mathcal S_E`.

Gradient norms are always reported in ``W`` coordinates, :math:`\\|\\nabla_W\\hat{\\mathcal
L}\\|_F`, restricted to :math:`\\mathcal S_E` (the gradient lies in it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from ..core.batched import TrainResult
from ..core.train_config import TrainConfig
from ..core.training import train_runs
from ..core.validation import (
    DivergenceError,
    as_tensor,
    check_float,
    check_instance,
    check_seed,
    check_size,
)
from .attention import (
    check_embeddings,
    project_onto_subspace,
    subspace_basis,
    transition_from_weights,
    weights_from_logits,
)
from .chain import PromptData

__all__ = [
    "AttentionMLE",
    "FitResult",
    "asymptotic_error",
    "fit_gd",
    "fit_newton",
    "gd_step_size",
    "gd_with_trainer",
    "gradient",
    "hessian_logits",
    "hessian_on_subspace",
    "mle_exists",
    "nll",
]


# --------------------------------------------------------------------------------------
# loss, gradient, Hessian (private versions are vmap-safe: no validation, no .item())
# --------------------------------------------------------------------------------------


def _check_fit(
    what: str,
    loss_history: torch.Tensor,
    params: torch.Tensor,
    *,
    max_loss_rise: float | None = 100.0,
) -> None:
    """Stop a fit that diverged: raise :class:`DivergenceError` naming the step and run.

    ``loss_history`` has shape ``(..., steps + 1)`` (NaN marks steps not taken, except at
    the first and the last step, which are always checked);
    ``params`` the final parameters with the same leading run axes. A fit diverged if a
    loss or a final parameter is infinite or NaN where it was computed, or if a loss
    exceeds the first one by more than ``max_loss_rise * max(|first|, 1)``.
    """
    hist = as_tensor("loss_history", loss_history, ndim=(1, 2, 3, 4), finite=False)
    if hist.shape[-1] == 0:
        raise ValueError("loss_history must not be empty")
    params = as_tensor("params", params, finite=False)
    if tuple(params.shape[: hist.ndim - 1]) != tuple(hist.shape[:-1]):
        raise ValueError(
            f"params must have the run axes {tuple(hist.shape[:-1])} of loss_history; "
            f"got shape {tuple(params.shape)}"
        )
    index = torch.arange(hist.shape[-1])
    taken = ~torch.isnan(hist) | (index == 0) | (index == hist.shape[-1] - 1)
    bad = taken & ~torch.isfinite(hist)
    if max_loss_rise is not None:
        first = hist[..., :1]
        bad = bad | (taken & (hist - first > max_loss_rise * first.abs().clamp(min=1.0)))
    if bool(bad.any()):
        where = bad.nonzero()[0].tolist()
        raise DivergenceError(
            f"{what} diverged at step {where[-1]} (run {tuple(where[:-1])}): loss "
            f"{hist[tuple(where)].item():.4g} from {hist[(*where[:-1], 0)].item():.4g}; "
            "lower the step size (lr)"
        )
    finite = torch.isfinite(params.detach()).flatten(hist.ndim - 1).all(-1)
    if not bool(finite.all()):
        where = (~finite).nonzero()[0].tolist()
        raise DivergenceError(
            f"{what} diverged: non-finite parameters after the last step (run {tuple(where)}); "
            "lower the step size (lr)"
        )


def _one_data_set(name: str, data: PromptData) -> None:
    """Refuse data with run axes where one Hessian of one data set is asked for."""
    if data.batch_shape:
        raise ValueError(
            f"{name} must be one data set (no run axes); got {tuple(data.batch_shape)}"
        )


def _check_data(data: Any) -> PromptData:
    if not isinstance(data, PromptData):
        raise TypeError(f"data must be a PromptData; got {type(data).__name__}")
    return data


def _check_problem(data: Any, E: Any) -> tuple[PromptData, torch.Tensor]:
    """The data set and embeddings ``(K, d)`` with one row per token of the data."""
    data = _check_data(data)
    E = check_embeddings(E)
    if E.shape[0] != data.K:
        raise ValueError(f"E must have K={data.K} rows to match the data; got {E.shape[0]}")
    return data, E


def _logits(W: torch.Tensor, E: torch.Tensor) -> torch.Tensor:
    return (E @ W @ E.T).transpose(-1, -2)  # (..., K, K): Theta[k, j] = e_j^T W e_k


def _row_logits(Theta: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
    """``Theta[..., query[..., n], :]`` -> ``(..., N, K)``."""
    if query.ndim == 1:  # rows shared by every run: one index_select
        return Theta.index_select(-2, query)
    K = Theta.shape[-1]
    batch = torch.broadcast_shapes(Theta.shape[:-2], query.shape[:-1])  # checked by callers
    N = query.shape[-1]
    flat_T = Theta.expand(*batch, K, K).reshape(-1, K)  # (B*K, K), B = prod(batch)
    offsets = torch.arange(flat_T.shape[0] // K, device=Theta.device).reshape(*batch, 1) * K
    idx = (query.expand(*batch, N) + offsets).reshape(-1)  # row of each (run, n)
    return flat_T.index_select(0, idx).reshape(*batch, N, K)


def _z(Theta: torch.Tensor, counts: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
    return _row_logits(Theta, query) + torch.log(counts)  # (..., N, K); -inf for absent keys


def _nll_logits(
    Theta: torch.Tensor,
    counts: torch.Tensor,
    query: torch.Tensor,
    y: torch.Tensor,
    weights: torch.Tensor,
) -> torch.Tensor:
    z = _z(Theta, counts, query)
    lse = torch.logsumexp(z, -1)  # (..., N)
    zy = torch.gather(z, -1, y.expand(z.shape[:-1])[..., None]).squeeze(-1)
    per_row = torch.where(weights > 0, weights * (lse - zy), torch.zeros_like(lse))
    return per_row.sum(-1) / weights.sum(-1)


def _derivatives(
    Theta: torch.Tensor, data: PromptData, *, hessian: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Loss ``(...)``, gradient ``(..., K, K)`` and Hessian blocks ``(..., K, K, K)`` in Θ."""
    K = data.K
    batch = data.run_axes_with("Theta", Theta.shape[:-2])  # one W may meet many data sets
    z = _z(Theta, data.counts, data.query)
    z = z.expand(*batch, *z.shape[-2:])  # (..., N, K)
    lse = torch.logsumexp(z, -1)
    p = torch.exp(z - lse[..., None])  # (..., N, K) = pi^{X_i}
    y = data.y.expand(z.shape[:-1])
    zy = torch.gather(z, -1, y[..., None]).squeeze(-1)
    w = data.weights / data.weights.sum(-1, keepdim=True)  # (..., N)
    w = w.expand(z.shape[:-1])
    loss = torch.where(w > 0, w * (lse - zy), torch.zeros_like(lse)).sum(-1)
    Q = torch.nn.functional.one_hot(data.query, K).double().expand(*z.shape[:-1], K)
    Qw = Q * w[..., None]  # (..., N, K)
    resid = p - torch.nn.functional.one_hot(y, K).double()
    grad = torch.einsum("...nk,...nj->...kj", Qw, resid)
    H = None
    if hessian:
        diag = torch.einsum("...nk,...nj->...kj", Qw, p)  # (..., K, K)
        if data.query.ndim == 1:
            # rows shared by all runs: group them by query, one (K x n_k)(n_k x K) product
            # per block -- N K^2 work instead of N K^3 for the one-hot contraction
            blocks = []
            for k in range(K):
                rows = (data.query == k).nonzero().flatten()
                p_k = p.index_select(-2, rows)  # (..., n_k, K)
                w_k = w.index_select(-1, rows)[..., None]  # (..., n_k, 1)
                blocks.append((p_k * w_k).transpose(-1, -2) @ p_k)
            outer = torch.stack(blocks, dim=-3)  # (..., K, K, K)
        else:  # per-run rows: one batched (K*K x N)(N x K) product
            qp = (Qw[..., :, :, None] * p[..., :, None, :]).flatten(-2)  # (..., N, K*K)
            outer = (qp.transpose(-1, -2) @ p).unflatten(-2, (K, K))  # (..., K, K, K)
        H = torch.diag_embed(diag) - outer  # (..., K, K, K): block k is d2L/dTheta[k]^2
    return loss, grad, H


def _nll_of_logits(Theta: Any, data: PromptData) -> torch.Tensor:
    """Weighted negative log-likelihood ``(...)`` of the logits ``Θ[k, j] = e_jᵀ W e_k``.

    ``Theta``: ``(..., K, K)`` (eq. (8), Lemma C.8); the weights of ``data`` are normalised to
    sum to one in each run.
    """
    data = _check_data(data)
    Theta = as_tensor("Theta", Theta, dtype=torch.float64)
    if Theta.ndim < 2 or Theta.shape[-2:] != (data.K, data.K):
        raise ValueError(
            f"Theta must have shape (..., {data.K}, {data.K}); got {tuple(Theta.shape)}"
        )
    data.run_axes_with("Theta", Theta.shape[:-2])
    return _nll_logits(Theta, data.counts, data.query, data.y, data.weights)


def nll(W: Any, E: Any, data: PromptData) -> torch.Tensor:
    """The loss :math:`\\hat{\\mathcal L}(W)` of eq. (8) (eq. (5) with population weights).

    ``W``: ``(..., d, d)``; ``E``: ``(K, d)`` embeddings satisfying Assumption 2.3. Returns the
    mean negative log-likelihood per run, in nats.
    """
    data, E = _check_problem(data, E)
    W = as_tensor("W", W, dtype=torch.float64)
    d = E.shape[1]
    if W.ndim < 2 or W.shape[-2:] != (d, d):
        raise ValueError(f"W must have shape (..., {d}, {d}); got {tuple(W.shape)}")
    data.run_axes_with("W", W.shape[:-2])
    return _nll_logits(_logits(W, E), data.counts, data.query, data.y, data.weights)


def gradient(W: Any, E: Any, data: PromptData) -> torch.Tensor:
    """Closed-form gradient :math:`\\nabla_W \\hat{\\mathcal L} = E^\\top A^\\top E` (eq. (8)).

    ``A[k, j] = Σ_i w_i [k_i = k] (π^{X_i}_j − [y_i = j])`` is the gradient in logit
    coordinates; its rows sum to zero, so the gradient, ``(..., d, d)``, lies in
    :math:`\\mathcal S_E`.
    """
    nll(W, E, data)  # validates
    E = torch.as_tensor(E, dtype=torch.float64)
    W = torch.as_tensor(W, dtype=torch.float64)
    _, A, _ = _derivatives(_logits(W, E), data, hessian=False)
    return E.T @ A.transpose(-1, -2) @ E


def hessian_logits(Theta: Any, data: PromptData) -> torch.Tensor:
    """Hessian of the loss in logit coordinates, as ``K`` diagonal blocks (Lemma C.8, eq. (28)).

    Block ``k`` is :math:`\\sum_i w_i [k_i=k](\\operatorname{diag}(\\pi_i) - \\pi_i\\pi_i^\\top)`
    with :math:`\\pi_i = \\pi^{X_i}`: the log-sum-exp Hessian, positive semi-definite. Returns
    ``(..., K, K, K)``: ``H[..., k]`` is the ``K x K`` block of row ``k`` of Θ.
    """
    _nll_of_logits(Theta, data)  # validates
    _, _, H = _derivatives(torch.as_tensor(Theta, dtype=torch.float64), data, hessian=True)
    if H is None:  # hessian=True always computes it
        raise RuntimeError("_derivatives returned no Hessian")
    return H


def _hessian_weights(W: Any, E: Any, data: PromptData) -> torch.Tensor:
    """Full Hessian ``(d², d²)`` of :math:`\\hat{\\mathcal L}(W)` in ``W`` (row-major ``vec``).

    :math:`H_W = J^\\top H_\\Theta J` with :math:`J[(k,j),(a,b)] = E_{ja}E_{kb}` (the Jacobian
    of ``W ↦ Θ``). On :math:`\\mathcal S_E` it is positive definite iff every co-occurrence
    graph is connected (Lemma 3.7); it vanishes on :math:`\\mathcal S_E^\\perp`. Unbatched.
    """
    nll(W, E, data)
    E = torch.as_tensor(E, dtype=torch.float64)
    W = torch.as_tensor(W, dtype=torch.float64)
    if W.ndim != 2:
        raise ValueError(f"W must be a single (d, d) matrix; got shape {tuple(W.shape)}")
    _one_data_set("data", data)
    _, _, H = _derivatives(_logits(W, E), data, hessian=True)
    if H is None:  # hessian=True always computes it
        raise RuntimeError("_derivatives returned no Hessian")
    K, d = E.shape
    H_full = torch.zeros(K * K, K * K, dtype=torch.float64)
    for k in range(K):
        H_full[k * K : (k + 1) * K, k * K : (k + 1) * K] = H[k]
    J = torch.einsum("ja,kb->kjab", E, E).reshape(K * K, d * d)
    return J.T @ H_full @ J


def hessian_on_subspace(W: Any, E: Any, data: PromptData) -> torch.Tensor:
    """The Hessian restricted to :math:`\\mathcal S_E`, ``(K(K-1), K(K-1))`` (Lemma 3.7).

    :math:`H_S = B H_W B^\\top` with ``B`` the orthonormal basis of
    :func:`ccmc_lite.ccmc.subspace_basis`. It is positive definite iff every co-occurrence
    graph is connected; otherwise its null space has dimension :math:`\\sum_k
    (\\#\\text{components of } \\mathcal G^{(k)} - 1)` (one free scale per extra component,
    Cor. 3.5). Unbatched data (e.g. population weights).
    """
    H = _hessian_weights(W, E, data)
    B = subspace_basis(E).flatten(1)  # (K(K-1), d*d)
    return B @ H @ B.T


def asymptotic_error(W: Any, E: Any, population: PromptData) -> float:
    """Rate constant :math:`\\operatorname{tr}(H_S^{-1})` of the MLE's error (beyond the paper).

    For a correctly specified model :math:`\\sqrt n(\\hat W_n - W)` tends in distribution to
    a normal law with covariance :math:`H_S^{-1}`, :math:`H_S` the population Hessian on
    :math:`\\mathcal S_E` (:func:`hessian_on_subspace`, the Fisher information per sample),
    so the limiting law of :math:`n\\|\\hat W_n - W\\|_F^2` has mean
    :math:`\\operatorname{tr}(H_S^{-1})`: the constant hidden in Cor. 4.3's
    :math:`\\lesssim K^2\\log(n)/n`. (At finite ``n`` the MLE fails to exist with positive
    probability, so the expectation itself is infinite.) ``W``: the ``(d, d)``
    ground truth in :math:`\\mathcal S_E`; ``population``: its
    :func:`ccmc_lite.ccmc.population_data`. Raises ``ValueError`` when :math:`H_S` is
    singular (a co-occurrence graph is disconnected).
    """
    check_instance("population", population, PromptData)
    _one_data_set("population", population)  # named here, not as hessian_on_subspace's data
    H = hessian_on_subspace(W, E, population)
    eig = torch.linalg.eigvalsh(H)
    if float(eig.min()) <= 1e-12 * float(eig.max()):
        raise ValueError(
            "the population Hessian is singular on S_E (a co-occurrence graph is "
            "disconnected), so W is not identifiable and the error does not vanish"
        )
    return float((1.0 / eig).sum())


def gd_step_size(data: PromptData, E: Any) -> float:
    """A safe gradient-descent step ``1 / L`` for :math:`\\hat{\\mathcal L}(W)`, for every run.

    Böhning's bound :math:`\\operatorname{diag}(\\pi)-\\pi\\pi^\\top \\preceq \\tfrac12 I` gives
    :math:`L \\le \\tfrac12 \\max_k w(\\Omega_k)\\,\\sigma_{\\max}(E)^4`, with :math:`w(\\Omega_k)`
    the share of the data whose query is ``k``.
    """
    data, E = _check_problem(data, E)
    w = data.weights / data.weights.sum(-1, keepdim=True)
    Q = torch.nn.functional.one_hot(data.query, data.K).double().expand(*w.shape, data.K)
    share = (Q * w[..., None]).sum(-2).max()
    smax = float(torch.linalg.svdvals(E)[0])
    return float(1.0 / (0.5 * float(share) * smax**4))


def _edges(
    counts: torch.Tensor, query: torch.Tensor, y: torch.Tensor, act: torch.Tensor
) -> torch.Tensor:
    """``(B, K, K, K)`` bool: ``[b, k, i, j]`` iff a row of run ``b`` with query ``k`` and
    positive weight has key ``i`` present and next token ``j != i`` (``j`` "beats" ``i``)."""
    N, K = counts.shape
    rows, keys = (counts > 0).nonzero(as_tuple=True)  # (nnz,)
    edge = (query[rows] * K + keys) * K + y[rows]
    keep = keys != y[rows]
    S = torch.sparse_coo_tensor(
        torch.stack([edge[keep], rows[keep]]),
        torch.ones(int(keep.sum()), dtype=torch.float64),
        (K**3, N),
        check_invariants=False,
    )
    A = torch.sparse.mm(S, act.T.to(torch.float64))  # (K^3, B)
    return (A.T > 0).reshape(-1, K, K, K)


def mle_exists(data: PromptData) -> torch.Tensor:
    """Whether problem (7) has a minimiser in :math:`\\mathcal S_E`, per run (``data.batch_shape``).

    The loss of eq. (7) is a conditional-logit (Luce choice) likelihood per query token: for
    query ``k``, a row with keys ``X`` and next token ``y`` "prefers" ``y`` to every other key
    ``i`` of ``X``. Its infimum is *attained* iff no direction :math:`v` (not constant on a
    co-occurrence component, Def. 3.3) satisfies :math:`v_y \\ge v_i` for every such
    preference; otherwise the weights run off to infinity along :math:`v` while the loss keeps
    decreasing (e.g. a present token ``j`` that never follows query ``k``: :math:`\\hat P_{kj}
    \\to 0`). This is Ford's (1957) condition for Bradley–Terry/Luce models: for every query,
    the directed graph of edges ``i → y`` must be strongly connected on each component of
    :math:`\\mathcal G^{(k)}`. Population data always satisfy it; finite samples need not
    (beyond the paper: eq. (7) and Thm. 4.2 take the empirical minimiser as given). Rows of
    zero weight are ignored.
    """
    data = _check_data(data)
    K = data.K
    batch = data.batch_shape
    N = data.weights.shape[-1]
    act = (data.weights > 0).expand(*batch, N).reshape(-1, N)  # (B, N)
    if data.counts.ndim == 2 and data.query.ndim == 1 and data.y.ndim == 1:
        A = _edges(data.counts, data.query, data.y, act)
    else:  # rows differ between runs: one run at a time
        counts = data.counts.expand(*batch, N, K).reshape(-1, N, K)
        query = data.query.expand(*batch, N).reshape(-1, N)
        y = data.y.expand(*batch, N).reshape(-1, N)
        A = torch.cat([_edges(counts[b], query[b], y[b], act[b : b + 1]) for b in range(len(act))])
    R = (A | torch.eye(K, dtype=torch.bool)).to(torch.float64)
    for _ in range(int(np.ceil(np.log2(K))) + 1):  # transitive closure by squaring
        R = ((R @ R) > 0).to(torch.float64)
    exists = (R == R.transpose(-1, -2)).flatten(1).all(-1)
    return exists.reshape(batch)


# --------------------------------------------------------------------------------------
# solvers
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FitResult:
    """Result of :func:`fit_gd` / :func:`fit_newton` (leading run axes as in the data).

    Attributes
    ----------
    W : Tensor
        ``(..., d, d)`` fitted weights, in :math:`\\mathcal S_E`.
    P : Tensor
        ``(..., K, K)`` the fitted base chain :math:`P^{\\hat W}`.
    loss : Tensor
        ``(...)`` final loss.
    grad_norm : Tensor
        ``(...)`` final :math:`\\|\\nabla_W\\hat{\\mathcal L}\\|_F`.
    iterations : Tensor
        ``(...)`` iterations used until the tolerance was met (or the maximum).
    converged : Tensor
        ``(...)`` bool, ``grad_norm < tol`` *and* ``mle_exists``.
    loss_history : Tensor
        ``(..., T)`` loss at iterations ``0..T-1`` (``nan`` after a run stopped).
    grad_history : Tensor
        ``(..., T)`` gradient norms.
    seconds : float
        Wall-clock time.
    method : str
        ``"gd"`` or ``"newton"``.
    mle_exists : Tensor or None
        ``(...)`` bool, :func:`mle_exists` of the data. Where it is ``False`` the gradient
        still tends to zero but the weights run off to infinity: there is no finite
        minimiser, and ``converged`` is ``False``.
    """

    W: torch.Tensor
    P: torch.Tensor
    loss: torch.Tensor
    grad_norm: torch.Tensor
    iterations: torch.Tensor
    converged: torch.Tensor
    loss_history: torch.Tensor
    grad_history: torch.Tensor
    seconds: float
    method: str
    mle_exists: torch.Tensor | None = None


def _grad_norm_w(A: torch.Tensor, E: torch.Tensor) -> torch.Tensor:
    g = E.T @ A.transpose(-1, -2) @ E
    return g.flatten(-2).norm(dim=-1)


def _fit_result(
    method: str,
    W: torch.Tensor,
    Theta: torch.Tensor,
    E: torch.Tensor,
    data: PromptData,
    tol: float,
    iters: torch.Tensor,
    loss_hist: torch.Tensor,
    grad_hist: torch.Tensor,
    start: float,
) -> FitResult:
    """Final loss and gradient at ``W`` (logits ``Theta``), checked, as a :class:`FitResult`."""
    loss, A, _ = _derivatives(Theta, data, hessian=False)
    gnorm = _grad_norm_w(A, E)
    exists = mle_exists(data)
    _check_fit(f"fit_{method}", torch.cat([loss_hist, loss[..., None]], -1), W)
    return FitResult(
        W=W,
        P=transition_from_weights(W, E),
        loss=loss,
        grad_norm=gnorm,
        iterations=iters,
        converged=(gnorm < tol) & exists,
        loss_history=loss_hist,
        grad_history=grad_hist,
        seconds=time.perf_counter() - start,
        method=method,
        mle_exists=exists,
    )


def fit_gd(
    data: PromptData,
    E: Any,
    *,
    steps: int,
    lr: float | None = None,
    tol: float = 0.0,
    W0: Any = None,
) -> FitResult:
    """Gradient descent :math:`W_{t+1}=W_t-\\eta\\nabla\\hat{\\mathcal L}(W_t)` from ``W0``.

    Ildiz et al. 2024, Cor. 3.8: if every co-occurrence graph is connected, the iterates
    converge to the unique minimiser in :math:`\\mathcal S_E` (``W^GT`` for population data).
    All runs of a batched data set descend together, at most ``steps`` iterations of step
    ``lr`` (default :func:`gd_step_size`); a run stops once its gradient norm is below ``tol``.
    Returns a :class:`FitResult`.
    """
    data, E = _check_problem(data, E)
    steps = check_size("steps", steps)
    tol = check_float("tol", tol, minimum=0.0)
    lr = gd_step_size(data, E) if lr is None else check_float("lr", lr, minimum=0, open_lower=True)
    d = E.shape[1]
    batch = data.batch_shape
    W = torch.zeros(*batch, d, d, dtype=torch.float64)
    if W0 is not None:
        W0 = as_tensor("W0", W0, dtype=torch.float64)
        allowed = {(d, d), (*batch, d, d)}  # one start for all runs, or one per run
        if tuple(W0.shape) not in allowed:
            want = " or ".join(str(shape) for shape in sorted(allowed, key=len))
            raise ValueError(f"W0 must have shape {want}; got {tuple(W0.shape)}")
        # the part of W0 outside S_E changes no logit (Lemma 2.5) and gradient descent never
        # moves it, so start from the projection: the result stays in S_E
        W = W + project_onto_subspace(W0, E)
    start = time.perf_counter()
    loss_hist = torch.full((*batch, steps + 1), float("nan"), dtype=torch.float64)
    grad_hist = torch.full_like(loss_hist, float("nan"))
    active = torch.ones(batch, dtype=torch.bool)
    iters = torch.full(batch, steps, dtype=torch.long)
    for t in range(steps + 1):
        loss, A, _ = _derivatives(_logits(W, E), data, hessian=False)
        g = E.T @ A.transpose(-1, -2) @ E  # (..., d, d)
        gnorm = g.flatten(-2).norm(dim=-1)
        loss_hist[..., t] = torch.where(active, loss, loss_hist[..., t])
        grad_hist[..., t] = torch.where(active, gnorm, grad_hist[..., t])
        done = active & (gnorm < tol)
        iters = torch.where(done, torch.full_like(iters, t), iters)
        active = active & ~done
        if t == steps or not bool(active.any()):
            break
        W = W - lr * g * active[..., None, None]
    return _fit_result("gd", W, _logits(W, E), E, data, tol, iters, loss_hist, grad_hist, start)


def fit_newton(
    data: PromptData,
    E: Any,
    *,
    tol: float = 1e-10,
    max_iter: int = 100,
    armijo: float = 1e-4,
) -> FitResult:
    """Damped Newton for the convex problem (5)/(7) over :math:`\\mathcal S_E`, from ``W = 0``.

    Works in logit coordinates Θ, where the Hessian is block diagonal (:func:`hessian_logits`);
    each block is inverted with a pseudo-inverse (its null space is the row shift, plus one
    direction per extra component of a disconnected co-occurrence graph). Armijo backtracking
    (constant ``armijo``) per run; all runs are solved together; a run stops when
    :math:`\\|\\nabla_W\\hat{\\mathcal L}\\|_F < \\mathrm{tol}` or after ``max_iter`` iterations.
    Returns a :class:`FitResult` whose ``W`` is mapped back to :math:`\\mathcal S_E`.
    """
    data, E = _check_problem(data, E)
    tol = check_float("tol", tol, minimum=0.0, open_lower=True)
    max_iter = check_size("max_iter", max_iter)
    armijo = check_float("armijo", armijo, minimum=0.0, maximum=0.5, open_lower=True)
    K = data.K
    batch = data.batch_shape
    start = time.perf_counter()
    Theta = torch.zeros(*batch, K, K, dtype=torch.float64)
    loss_hist = torch.full((*batch, max_iter + 1), float("nan"), dtype=torch.float64)
    grad_hist = torch.full_like(loss_hist, float("nan"))
    active = torch.ones(batch, dtype=torch.bool)
    iters = torch.full(batch, max_iter, dtype=torch.long)
    for t in range(max_iter + 1):
        loss, A, H = _derivatives(Theta, data, hessian=True)
        gnorm = _grad_norm_w(A, E)
        loss_hist[..., t] = torch.where(active, loss, loss_hist[..., t])
        grad_hist[..., t] = torch.where(active, gnorm, grad_hist[..., t])
        done = active & (gnorm < tol)
        iters = torch.where(done, torch.full_like(iters, t), iters)
        active = active & ~done
        if t == max_iter or not bool(active.any()):
            break
        # Newton direction per row block: delta_k = -pinv(H_k) grad_k
        delta = -(torch.linalg.pinv(H, hermitian=True) @ A[..., None]).squeeze(-1)
        delta = delta * active[..., None, None]
        slope = (A * delta).sum((-1, -2))  # directional derivative (<= 0)
        step = torch.ones(batch, dtype=torch.float64)
        # near the optimum the predicted decrease is below float64 resolution of the loss:
        # take the full Newton step (quadratic convergence) instead of a futile line search
        tiny = slope.abs() <= 1e-13 * loss.abs().clamp(min=1.0)
        pending = active & ~tiny
        for _ in range(40):  # backtracking
            trial = Theta + step[..., None, None] * delta
            new_loss = _nll_logits(trial, data.counts, data.query, data.y, data.weights)
            ok = torch.isfinite(new_loss) & (new_loss <= loss + armijo * step * slope)
            pending = pending & ~ok
            if not bool(pending.any()):
                break
            step = torch.where(pending, step / 2, step)
        step = torch.where(pending, torch.zeros_like(step), step)  # no decrease found
        Theta = Theta + step[..., None, None] * delta
    W = weights_from_logits(Theta, E)
    return _fit_result("newton", W, Theta, E, data, tol, iters, loss_hist, grad_hist, start)


# --------------------------------------------------------------------------------------
# the same gradient descent through the book's shared trainer
# --------------------------------------------------------------------------------------


class AttentionMLE(nn.Module):
    """The attention weights ``W`` (``(d, d)``, zero-initialised) as a module.

    ``forward(counts, query, y, weights)`` returns the loss (8) for one run's data, so the
    module plugs into :func:`ccmc_lite.core.train_runs` (full-batch SGD = plain GD).

    Parameters
    ----------
    E : array-like
        ``(K, d)`` embeddings satisfying Assumption 2.3 (stored as a buffer).
    """

    E: torch.Tensor  # buffer registered in __init__

    def __init__(self, E: Any) -> None:
        super().__init__()
        E = check_embeddings(E)
        self.register_buffer("E", E.clone())
        self.W = nn.Parameter(torch.zeros(E.shape[1], E.shape[1], dtype=torch.float64))

    def forward(
        self,
        counts: torch.Tensor,
        query: torch.Tensor,
        y: torch.Tensor,
        weights: torch.Tensor,
    ) -> torch.Tensor:
        """Loss (8) of one run's rows: ``counts`` ``(N, K)``, ``query``, ``y``, ``weights``."""
        K, named = self.E.shape[0], {"counts": counts, "query": query, "y": y, "weights": weights}
        for name, value in named.items():
            check_instance(name, value, torch.Tensor)
        N = weights.shape[-1] if weights.ndim else -1
        if counts.shape[-2:] != (N, K) or query.shape[-1:] != (N,) or y.shape[-1:] != (N,):
            shapes = ", ".join(f"{n} {tuple(v.shape)}" for n, v in named.items())
            raise ValueError(f"counts must be (N, {K}) and query, y, weights (N,); got {shapes}")
        return _nll_logits(_logits(self.W, self.E), counts, query, y, weights)


def gd_with_trainer(
    data: PromptData,
    E: Any,
    *,
    steps: int,
    lr: float,
    seed: int = 0,
    progress: bool = False,
) -> TrainResult:
    """Cor. 3.8's gradient descent run through :func:`ccmc_lite.core.train_runs`.

    Full-batch SGD without momentum (``steps`` steps of size ``lr``) on :class:`AttentionMLE`,
    one run per leading run of ``data`` (at most one run axis). It uses autograd instead of the
    closed-form gradient of :func:`fit_gd`, so the two check each other. Returns the
    :class:`~ccmc_lite.core.TrainResult`: ``params["W"]`` is ``(R, d, d)``, ``loss`` and
    ``grad_norm`` ``(R, steps)``; ``W = 0`` at the start whatever ``seed``.
    """
    data, E = _check_problem(data, E)
    seed = check_seed(seed)
    batch = data.batch_shape
    if len(batch) > 1:
        raise ValueError(f"data must have at most one run axis; got batch shape {tuple(batch)}")
    R = batch[0] if batch else 1
    N = data.n_rows
    tensors = {
        "counts": data.counts.expand(R, N, data.K),
        "query": data.query.expand(R, N),
        "y": data.y.expand(R, N),
        "weights": data.weights.expand(R, N),
    }

    def batch_fn(step: int, runs: torch.Tensor, gen: torch.Generator) -> dict[str, torch.Tensor]:
        return {k: v[runs] for k, v in tensors.items()}

    def loss_fn(model: Any, b: dict[str, torch.Tensor]) -> torch.Tensor:
        return model(b["counts"], b["query"], b["y"], b["weights"])

    config = TrainConfig(
        steps=steps,
        lr=lr,
        optimizer="sgd",
        progress_updates=2,
        label="GD (train_runs)",
        progress=progress,
    )
    return train_runs(
        lambda: AttentionMLE(E), loss_fn, batch_fn, n_runs=R, config=config, seed=seed
    )
