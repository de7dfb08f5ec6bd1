"""Co-occurrence graphs and prompt coverage, Ildiz et al. 2024, Sec. 3 and App. C.

For each query token ``k`` let :math:`\\Omega_k` be the prompts whose last token is ``k``.
The co-occurrence graph :math:`\\mathcal G^{(k)}` (Def. 3.3) has the ``K`` tokens as
vertices and an edge ``i — j`` when some prompt of :math:`\\Omega_k` has both ``i`` and
``j`` among its *key* tokens (all tokens for self-attention, all but the last for
cross-attention).

* Thm. 3.4: with a positive ground truth, maximum likelihood is consistent iff every
  :math:`\\mathcal G^{(k)}` is connected.
* Observation 1: for self-attention :math:`\\mathcal G^{(k)}` is connected iff every token
  appears in some prompt of :math:`\\Omega_k` (the query ``k`` is a hub).
* Cor. 3.5 / App. C: otherwise only the ratios ``P[k, i] / P[k, j]`` with ``i`` and ``j``
  in the same connected component (through tokens with ``P[k, ·] > 0``) are identified,
  i.e. the normalised sub-distribution of row ``k`` on each component.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from matplotlib.axes import Axes
from scipy.sparse.csgraph import connected_components

from ..core.validation import (
    DEFAULT_LIMITS,
    as_tensor,
    check_choice,
    check_instance,
    check_int,
    check_size,
)
from .chain import VARIANTS, check_transition, prompt_statistics

__all__ = [
    "CoverageReport",
    "coverage_report",
    "draw_cooccurrence_graph",
    "restricted_distribution",
]


def _cooccurrence_graphs(prompts: Any, K: int, *, variant: str = "self") -> torch.Tensor:
    """Adjacency ``(K, K, K)`` of the co-occurrence graphs :math:`\\mathcal G^{(k)}` (Def. 3.3).

    ``prompts``: the support :math:`\\Omega`, ``(n, L)`` or ragged; keys are all tokens
    (``"self"``) or all but the last (``"cross"``). ``A[k, i, j]`` is the edge ``i — j`` of
    :math:`\\mathcal G^{(k)}`; the diagonal ``A[k, i, i]`` marks the tokens among the keys of
    some prompt of :math:`\\Omega_k` (the set :math:`\\mathcal C_k` of Cor. 3.5).
    """
    K = check_size("K", K, minimum=2, limit=DEFAULT_LIMITS["vocab"])
    variant = check_choice("variant", variant, VARIANTS)
    counts, query, _ = prompt_statistics(prompts, K, variant=variant)
    present = (counts > 0).double()  # (n, K)
    onehot = torch.nn.functional.one_hot(query, K).double()  # (n, K)
    # A[k, i, j] = sum_n [q_n = k] present[n, i] present[n, j] > 0
    A = torch.einsum("nk,ni,nj->kij", onehot, present, present) > 0
    return A


@dataclass(frozen=True)
class CoverageReport:
    """What a prompt set lets maximum likelihood identify (Thm. 3.4, Cor. 3.5, App. C).

    Attributes
    ----------
    K : int
        Vocabulary size.
    variant : str
        ``"self"`` or ``"cross"``.
    adjacency : Tensor
        ``(K, K, K)`` bool, one graph per query.
    components : list of list of frozenset
        ``components[k]``: the connected components of :math:`\\mathcal G^{(k)}` over the
        vertices that count (all tokens, or the support of row ``k`` of ``P`` when a
        ground truth was given); unobserved tokens are singletons.
    connected : Tensor
        ``(K,)`` bool: :math:`\\mathcal G^{(k)}` is connected (w.r.t. ``P`` if given).
    observed : Tensor
        ``(K, K)`` bool: ``observed[k, j]`` iff ``j`` is in :math:`\\mathcal C_k`.
    same_component : Tensor
        ``(K, K, K)`` bool: ``same_component[k, i, j]`` iff ``i`` and ``j`` are in one
        component of :math:`\\mathcal G^{(k)}`, i.e. the ratio ``P[k, i] / P[k, j]`` is
        identified.
    support : Tensor
        ``(K, K)`` bool: ``P[k, j] > 0`` for the ground truth given (all true without one).
    """

    K: int
    variant: str
    adjacency: torch.Tensor
    components: list[list[frozenset[int]]]
    connected: torch.Tensor
    observed: torch.Tensor
    same_component: torch.Tensor
    support: torch.Tensor

    @property
    def consistent(self) -> bool:
        """True iff maximum likelihood recovers every row (Thm. 3.4; App. C corrected).

        Without zero transitions: every graph is connected (Thm. 3.4). With them, the
        paper's Thm. C.3 asks only for connectivity with respect to ``P``; a token ``j``
        with ``P[k, j] = 0`` that never occurs among the keys of a prompt ending in ``k``
        leaves ``P*[k, j]`` free (the loss does not see it), so it must be observed too.
        """
        zero_unobserved = ~self.support & ~self.observed
        return bool(self.connected.all()) and not bool(zero_unobserved.any())

    @property
    def disconnected_queries(self) -> list[int]:
        """Query tokens ``k`` whose :math:`\\mathcal G^{(k)}` is disconnected."""
        return [int(k) for k in (~self.connected).nonzero().flatten()]

    @property
    def identifiable(self) -> torch.Tensor:
        """``(K, K)`` bool: entry ``P[k, j]`` itself is identified (row ``k`` connected)."""
        return self.connected[:, None].expand(self.K, self.K).clone()

    def summary(self) -> str:
        """One line per query token: connected or not, and its components."""
        lines = []
        for k in range(self.K):
            comps = " | ".join(
                "{" + ", ".join(str(v) for v in sorted(c)) + "}" for c in self.components[k]
            )
            status = "connected" if bool(self.connected[k]) else "DISCONNECTED"
            lines.append(f"G^({k}) [{self.variant}]: {status:12s} components: {comps}")
        return "\n".join(lines)


def coverage_report(
    prompts: Any, K: int, *, variant: str = "self", P: Any = None
) -> CoverageReport:
    """Coverage check: which :math:`\\mathcal G^{(k)}` are disconnected and what is identified.

    ``prompts``: the support :math:`\\Omega` of the prompt distribution. With a ground truth
    ``P`` that has zero entries, connectivity is taken "with respect to P" (App. C, Def. C.2
    (ii)): paths may only pass through tokens ``v`` with ``P[k, v] > 0``, and only such tokens
    need to be connected. Returns a :class:`CoverageReport`.
    """
    A = _cooccurrence_graphs(prompts, K, variant=variant)
    K = A.shape[0]
    support = torch.ones(K, K, dtype=torch.bool)
    if P is not None:
        Pt = check_transition(P)
        if Pt.shape[0] != K:
            raise ValueError(f"P must be {K} x {K}; got {tuple(Pt.shape)}")
        support = Pt > 0
    components: list[list[frozenset[int]]] = []
    connected = torch.zeros(K, dtype=torch.bool)
    same = torch.zeros(K, K, K, dtype=torch.bool)
    for k in range(K):
        verts = support[k].nonzero().flatten().tolist()
        sub = A[k].numpy()[np.ix_(verts, verts)]
        n_comp, labels = connected_components(sub, directed=False)
        comps = [frozenset(verts[i] for i in np.flatnonzero(labels == c)) for c in range(n_comp)]
        comps.sort(key=lambda c: (-len(c), min(c)))
        components.append(comps)
        # connected iff one component and every vertex is observed (an unobserved vertex
        # is its own component, so n_comp == 1 covers it for K >= 2 vertices)
        connected[k] = n_comp == 1 and bool(A[k, verts, verts].all())
        for c in comps:
            idx = torch.tensor(sorted(c))
            same[k, idx[:, None], idx[None, :]] = True
    observed = torch.diagonal(A, dim1=1, dim2=2).clone()  # (K, K)
    return CoverageReport(K, variant, A, components, connected, observed, same, support)


def restricted_distribution(P: Any, k: int, subset: Any) -> torch.Tensor:
    """Row ``k`` of ``P`` renormalised on ``subset``: :math:`\\pi_{k,\\mathcal C}` (Cor. 3.5).

    Returns ``(..., |C|)`` probabilities in the order of ``sorted(subset)``.
    """
    P = check_transition(P, batched=True)
    if P.ndim < 2 or P.shape[-1] != P.shape[-2]:
        raise ValueError(f"P must have shape (..., K, K); got {tuple(P.shape)}")
    K = P.shape[-1]
    k = check_int("k", k, minimum=0, maximum=K - 1)
    if isinstance(subset, (set, frozenset)):
        subset = sorted(subset)
    subset = as_tensor("subset", subset, dtype=torch.long, ndim=1).tolist()
    idx = sorted({check_int("subset entry", int(j), minimum=0, maximum=K - 1) for j in subset})
    if not idx:
        raise ValueError("subset must not be empty")
    row = P[..., k, idx]
    total = row.sum(-1, keepdim=True)
    if bool((total <= 0).any()):
        raise ValueError(f"P[{k}, subset] is zero: the restricted distribution is undefined")
    return row / total


def draw_cooccurrence_graph(
    ax: Axes,
    report: CoverageReport,
    k: int,
    *,
    labels: Any = None,
    title: str | None = None,
) -> None:
    """Draw :math:`\\mathcal G^{(k)}` of ``report`` on a circle, one colour per component.

    Dashed outline: a token never observed with query ``k``; bold: ``k`` itself; grey fill:
    ``P[k, v] = 0`` in the report's ground truth. ``labels`` default to ``0..K-1`` (pass
    ``range(1, K+1)`` for the paper's); ``title`` defaults to ``G^(k)``, the variant and
    whether it is connected.
    """
    check_instance("ax", ax, Axes)
    from ..teaching.plotting import PALETTE

    if not isinstance(report, CoverageReport):
        raise TypeError(f"report must be a CoverageReport; got {type(report).__name__}")
    K = report.K
    k = check_int("k", k, minimum=0, maximum=K - 1)
    labels = list(range(K)) if labels is None else list(labels)
    if len(labels) != K:
        raise ValueError(f"labels must have K={K} entries; got {len(labels)}")
    angle = np.pi / 2 - 2 * np.pi * np.arange(K) / K
    xy = np.stack([np.cos(angle), np.sin(angle)], 1)
    A = report.adjacency[k].numpy()
    colour = {}
    for c, comp in enumerate(report.components[k]):
        for v in comp:
            colour[v] = PALETTE[c % len(PALETTE)]
    for i in range(K):
        for j in range(i + 1, K):
            if A[i, j]:
                ax.plot(*xy[[i, j]].T, "-", color="0.45", lw=1.5, zorder=1)
    for v in range(K):
        observed = bool(A[v, v])
        fill = colour.get(v, "white") if observed else "white"
        ax.scatter(
            xy[v, 0],
            xy[v, 1],
            s=420,
            zorder=2,
            color=fill if bool(report.support[k, v]) else "0.8",  # grey: P[k, v] = 0
            edgecolor="black",
            linewidth=2.5 if v == k else 1.0,
            linestyle="-" if observed else "--",
        )
        ax.text(xy[v, 0], xy[v, 1], str(labels[v]), ha="center", va="center", zorder=3, fontsize=10)
    status = "connected" if bool(report.connected[k]) else "disconnected"
    ax.set_title(title or f"$\\mathcal{{G}}^{{({labels[k]})}}$ ({report.variant}): {status}")
    ax.set_xlim(-1.4, 1.4)
    ax.set_ylim(-1.4, 1.4)
    ax.set_aspect("equal")
    ax.axis("off")
