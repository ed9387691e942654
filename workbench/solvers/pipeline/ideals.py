"""Ideals of the contracted forward graph (Tarnawski et al., NeurIPS 2020, Section 5.1): their
enumeration as bitsets with the lattice's covering edges, the linearised chain of prefixes
(Section 5.1.2), and the compute-only feasibility pass that restricts the device counts per
ideal before the DP (:mod:`workbench.solvers.pipeline.kernel`) runs. Pure Python and numpy:
numba is not imported here.

Examples
--------
>>> lat = lattice([[], [0], [0], [1, 2]], [[1, 2], [3], [3], []])
>>> lat.ideals
[0, 1, 3, 5, 7, 15]
>>> lat.dptr.tolist()        # covering edges of each ideal (remove one maximal element)
[0, 0, 1, 2, 3, 5, 6]
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...errors import NotApplicableError, SolverError

__all__ = ["Lattice", "count_ideals", "enumerate_ideals", "feasible_ideals", "lattice",
           "layer_ranges", "linear_lattice"]


@dataclass
class Lattice:
    """Ideals (bitmask ints, sizes non-decreasing so sub-ideals come first) and their covering
    edges in CSR form: ideal ``i`` loses supernode ``dv[e]`` to become ideal ``dj[e]`` for
    ``e`` in ``dptr[i]:dptr[i+1]``."""

    ideals: list
    dptr: np.ndarray
    dv: np.ndarray
    dj: np.ndarray

    @property
    def n(self) -> int:
        return len(self.ideals)

    def __len__(self) -> int:
        return len(self.ideals)


def lattice(pred: list, succ: list, *, limit: int = 100_000) -> Lattice:
    """All ideals of a DAG (breadth-first growth) with their covering edges.

    Raises SolverError naming the count when there are more than ``limit``.
    """
    _refuse_early(pred, succ, limit)
    out, up_from = _grow(pred, succ, limit, edges=True)
    return _csr(out, up_from)


def linear_lattice(order: list[int]) -> Lattice:
    """The chain of prefixes of ``order`` (the linearised DP of Section 5.1.2).

    >>> linear_lattice([2, 0, 1]).ideals
    [0, 4, 5, 7]
    """
    ideals = [0]
    m = 0
    edges = []
    for i, v in enumerate(order):
        m |= 1 << v
        ideals.append(m)
        edges.append((i + 1, v, i))
    return _csr(ideals, edges)


def _csr(ideals: list, edges: list) -> Lattice:
    N = len(ideals)
    e = np.array(edges, dtype=np.int64).reshape(-1, 3)
    order = np.argsort(e[:, 0], kind="stable")
    e = e[order]
    dptr = np.zeros(N + 1, dtype=np.int64)
    np.add.at(dptr, e[:, 0] + 1, 1)
    return Lattice(ideals, np.cumsum(dptr), e[:, 1].astype(np.int32).copy(),
                   e[:, 2].astype(np.int32).copy())


def ideal_sums(dptr, dv, dj, w) -> np.ndarray:
    """``sum(w[v] for v in I)`` for every ideal (along its first covering edge), in pure
    Python (the same float64 additions in the same order as a compiled loop; about 0.3 us per
    ideal, so numba is not loaded for it).

    >>> ideal_sums(np.array([0, 0, 1, 2]), np.array([0, 1]), np.array([0, 1]),
    ...            np.array([2.0, 3.0])).tolist()
    [0.0, 2.0, 5.0]
    """
    ptr = dptr.tolist()
    vs = dv.tolist()
    js = dj.tolist()
    ws = np.asarray(w, dtype=np.float64).tolist()
    out = [0.0] * (len(ptr) - 1)
    for i in range(len(out)):
        e = ptr[i]
        if e < ptr[i + 1]:
            out[i] = out[js[e]] + ws[vs[e]]
    return np.array(out, dtype=np.float64)


def feasible_ideals(lat: Lattice, acc: np.ndarray, cpu: np.ndarray, k: int, l: int,
                    bound: float, *, ranges: bool = False):
    """The feasibility pass: a flag per ideal ``I``, False when no split with every load at
    most ``bound`` can have ``I`` as a prefix.

    Every load is at least its compute, an accelerator stage holds at most ``bound`` of
    accelerator compute, and a CPU stage at most ``rho * bound`` of it (``rho`` the largest
    ratio of accelerator to CPU time of a supernode). So ``I`` needs at least
    ``ceil((acc(I) - b1 * rho * bound) / bound)`` accelerators when ``b1`` CPUs help, its
    complement likewise; ``I`` stays when some ``b1 + b2 <= l`` lets both fit in ``k``.
    ``ranges=True`` returns those bounds per CPU count instead (:func:`layer_ranges`).

    >>> lat = linear_lattice([0, 1, 2, 3])
    >>> feasible_ideals(lat, np.ones(4), np.full(4, np.inf), 2, 0, 2.0).tolist()
    [True, False, True, False, True]
    """
    N = lat.n
    if not math.isfinite(bound) or N == 0:
        return all_layers(N, k, l) if ranges else np.ones(N, dtype=bool)
    a = np.where(np.isfinite(acc), acc, 0.0)
    okc = np.isfinite(cpu)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(okc & (a > 0), a / np.where(cpu > 0, cpu, 1.0), 0.0)
    if (okc & (a > 0) & (cpu <= 0)).any():
        ratio[:] = np.inf
    rho = float(ratio.max()) if l > 0 and len(ratio) else 0.0
    if not math.isfinite(rho):
        return all_layers(N, k, l) if ranges else np.ones(N, dtype=bool)
    pre = ideal_sums(lat.dptr, lat.dv, lat.dj, a)
    rest = float(a.sum()) - pre
    tol = bound * (1 + 1e-9) + 1e-12
    lo, hi = layer_ranges(pre, rest, k, l, rho, tol)
    return (lo, hi) if ranges else (lo <= hi).any(axis=0)


def all_layers(N: int, k: int, l: int):
    return np.zeros((l + 1, N), dtype=np.int64), np.full((l + 1, N), k, dtype=np.int64)


def layer_ranges(pre, rest, k: int, l: int, rho: float, tol: float):
    """``lo[b, I]``/``hi[b, I]``: the fewest accelerators that can cover ideal ``I`` with ``b``
    CPUs, and ``k`` minus the fewest that cover its complement with the other ``l - b``
    (states outside ``lo..hi`` lie on no split within ``tol``)."""
    lo = np.empty((l + 1, len(pre)), dtype=np.int64)
    hi = np.empty((l + 1, len(pre)), dtype=np.int64)
    for b in range(l + 1):
        lo[b] = np.ceil(np.maximum(pre - b * rho * tol, 0.0) / tol - 1e-9)
        hi[b] = k - np.ceil(np.maximum(rest - (l - b) * rho * tol, 0.0) / tol - 1e-9)
    return lo, hi


def enumerate_ideals(pred: list, succ: list, *, limit: int = 100_000) -> list[int]:
    """All ideals (down-closed sets) of a DAG as bitmask ints, by breadth-first growth.

    Raises SolverError naming the count when there are more than ``limit``.

    >>> enumerate_ideals([[], [0], [0]], [[1, 2], [], []])
    [0, 1, 3, 5, 7]
    """
    _refuse_early(pred, succ, limit)
    out, _ = _grow(pred, succ, limit, edges=False)
    full = (1 << len(pred)) - 1
    if out[-1] != full:  # pragma: no cover
        raise SolverError("ideal enumeration missed the full set")
    return out


def count_ideals(graph, cluster, *, limit: int = 10_000_000) -> int:
    """Number of ideals of the contracted forward graph the DP would enumerate.

    >>> from workbench import samples, Cluster
    >>> count_ideals(samples.diamond(), Cluster.preset("2xV100-pcie"))
    6
    """
    from .contraction import contract_for_dp

    p = contract_for_dp(graph, cluster)
    return len(enumerate_ideals(p.pred, p.succ, limit=limit))


def linear_order(p) -> list[int]:
    """DFS-like topological order (a stack of ready nodes; successors pushed by key), as in the
    authors' linearisation."""
    n = p.n
    indeg = [len(x) for x in p.pred]
    stack = [v for v in sorted(range(n), key=lambda v: p.key[v], reverse=True) if indeg[v] == 0]
    out = []
    while stack:
        v = stack.pop()
        out.append(v)
        for w in sorted(p.succ[v], key=lambda w: p.key[w]):
            indeg[w] -= 1
            if indeg[w] == 0:
                stack.append(w)
    return out


def ideals_lower_bound(pred: list, succ: list, cap: int | None = None) -> int:
    """A lower bound on the number of ideals of a DAG, in linear time: with ``L_i`` the ops
    whose longest path from a source has ``i`` edges (an antichain whose predecessors all lie
    in earlier levels), every set of the levels before ``i`` plus any subset of ``L_i`` is an
    ideal, so there are at least ``1 + sum_i (2^|L_i| - 1)`` (at least ``n + 1``). ``cap``:
    stop adding once the bound exceeds it.

    >>> ideals_lower_bound([[], [0], [0]], [[1, 2], [], []])     # {}, {0}, {0,1}, {0,2}, all
    5
    >>> ideals_lower_bound([[]] * 20, [[]] * 20, cap=1000) > 1000  # 20 independent ops
    True
    """
    n = len(pred)
    indeg = [len(x) for x in pred]
    level = [0] * n
    ready = [v for v in range(n) if not indeg[v]]
    for v in ready:                       # grows while it is walked (Kahn's algorithm)
        lv = level[v] + 1
        for w in succ[v]:
            if level[w] < lv:
                level[w] = lv
            indeg[w] -= 1
            if not indeg[w]:
                ready.append(w)
    width = np.bincount(np.array(level, dtype=np.int64), minlength=1) if n else []
    top = cap.bit_length() + 1 if cap is not None else n
    bound = 1
    for w in (width.tolist() if n else []):
        bound += (1 << min(int(w), top)) - 1
        if cap is not None and bound > cap:
            break
    return bound


def _refuse_early(pred: list, succ: list, limit: int) -> None:
    """NotApplicableError before any growth when :func:`ideals_lower_bound` passes ``limit``."""
    bound = ideals_lower_bound(pred, succ, cap=limit)
    if bound > limit:
        raise NotApplicableError(
            f"the forward graph has more than {limit:,} ideals (at least {bound:,} from its "
            f"{len(pred):,} nodes, counted before growing them): the exact DP takes up to "
            f"{limit:,} ideals (a chain of up to {limit - 1:,} ops, fewer the wider the graph); "
            f"use method='dpl' (linearised, polynomial) or raise max_ideals")


def _grow(pred: list, succ: list, limit: int, *, edges: bool) -> tuple:
    """All ideals of a DAG by breadth-first growth (sizes non-decreasing), and with ``edges``
    their covering edges ``(upper id, removed v, lower id)`` (else None); SolverError naming
    the count past ``limit`` ideals."""
    n = len(pred)
    bits = [1 << v for v in range(n)]
    predmask = [sum(bits[u] for u in pred[v]) for v in range(n)]
    seen = {0: 0}
    out = [0]
    frontier = [tuple(v for v in range(n) if not pred[v])]
    up_from: list | None = [] if edges else None
    pos = 0
    while pos < len(out):
        ideal = out[pos]
        addable = frontier[pos]
        for v in addable:
            new = ideal | bits[v]
            j = seen.get(new)
            if j is None:
                j = len(out)
                seen[new] = j
                fr = [w for w in addable if w != v]
                for w in succ[v]:
                    pm = predmask[w]
                    if new & pm == pm:
                        fr.append(w)
                out.append(new)
                frontier.append(tuple(fr))
                if len(out) > limit:
                    raise NotApplicableError(
                        f"the forward graph has more than {limit:,} ideals (stopped counting at "
                        f"{len(out):,}): too branching for the exact DP within its limits; use "
                        f"method='dpl' (linearised, polynomial) or raise max_ideals")
            if edges:
                up_from.append((j, v, pos))
        pos += 1
    return out, up_from
