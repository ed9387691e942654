"""Inner loop of the DP over ideals (Tarnawski et al., NeurIPS 2020, Section 5.1.1).

The DP of :mod:`workbench.solvers.pipeline.dp` sets, for every ideal ``I`` and every count of
``a`` accelerators and ``b`` CPUs,

``dp[a, b, I] = min(dp[a-1, b, I], dp[a, b-1, I], min_J max(dp[a-r, b, J], acc(I \\ J, r)),
min_J max(dp[a, b-1, J], cpu(I \\ J)))``

over the sub-ideals ``J ⊊ I``. Two kernels run it, with bit-identical results (same walk, same
float64 operations in the same order):

* **compiled** (numba, :mod:`workbench.solvers.pipeline._dp_jit`, ``cache=True``), for large
  lattices. It is imported only when one needs it: importing numba costs about 0.1 s and
  loading the cached kernels about 0.17 s more in every process (the first call in a fresh
  environment compiles them, seconds to a minute);
* **pure Python** (:mod:`workbench.solvers.pipeline.pykernel`), for lattices of at most
  :data:`PY_MAX_IDEALS` ideals (``kernel="auto"``) while numba is not loaded in the process,
  where it finishes before numba would have loaded: 1.6-2 us per (ideal, sub-ideal) pair
  against the load's fixed cost.

Both share:

* **Sub-ideal descent.** The sub-ideals of ``I`` are visited by a depth-first walk down the
  lattice's covering edges (remove one maximal element), each once (a stamp per ideal). Along the
  walk the stage ``S = I \\ J`` grows by one supernode per step, so compute, memory and the
  communication cut are **updated incrementally per pair** (a counter per hyperedge; the walk
  restores the parent's sums on the way back, so no rounding accumulates across siblings).
* **Stopping the descent.** Compute and memory only grow down the walk, so once neither an
  accelerator stage (compute / ``r_max`` above the bound, memory above the cap, or an op that
  cannot run there) nor a CPU stage can stay within the bound, nothing below can either.
  Without a bound from the caller (e.g. the DPL value), a greedy packing of a topological
  order into at most ``k`` accelerator stages gives one
  (:func:`~workbench.solvers.pipeline.pykernel.greedy_bound`, a few linear passes): a
  split the DP also considers, so the pruning stays exact (an extension of ours, not the
  paper's; docs/decisions.md, 52).
* **Fused min-max passes.** The cost of a pair is computed once and relaxes every ``(a, b)`` in
  one pass; the ``dp[a-1, b, I]``/``dp[a, b-1, I]`` terms are a prefix minimum afterwards.
* **Exactness.** Everything is float64; the cut is an exact sum of float64 edge costs along one
  path (relative rounding at most ``depth * 2**-52``, far below the ``1e-7`` tolerance of the
  bound). Ties between equal values are broken by the smallest sub-ideal id, the same on every
  run.

The lattice (ideals and covering edges) and the feasibility pass are in
:mod:`workbench.solvers.pipeline.ideals`.

Examples
--------
>>> from workbench.solvers.pipeline.ideals import lattice
>>> from workbench.solvers.pipeline.contraction import DPProblem
>>> lat = lattice([[], [0]], [[1], []])               # a two-node chain: ideals 0, {0}, {0, 1}
>>> p = DPProblem(graph=None, members=[[0], [1]], acc=np.array([2.0, 3.0]),
...               cpu=np.array([np.inf, np.inf]), mem=np.zeros(2), pred=[[], [0]],
...               succ=[[1], []], hyper=[((0, 1), 0.5)], key=[0, 1], out_cost=np.zeros(2),
...               owner=np.array([0, 1]), hyper_src=[0])
>>> value, stages, _stats = solve_lattice(p, 2, 0, np.inf, lat)
>>> value, stages                      # one node per accelerator, each pays the 0.5 transfer
(3.5, [([0], 'acc', 1), ([1], 'acc', 1)])
"""

from __future__ import annotations

import contextlib
import gc
import math
import time

import numpy as np

from ...budget import Budget
from ...errors import SolverError, TimeLimitError
from .ideals import (  # noqa: F401 - re-exported (the kernel's former API)
    Lattice,
    all_layers,
    linear_order,
    feasible_ideals,
    ideal_sums,
    lattice,
    layer_ranges,
    linear_lattice,
)
from .pykernel import PyKernel, greedy_bound

__all__ = ["PY_MAX_IDEALS", "backward_reach", "boundary_costs", "hyper_csr", "interleave_mode",
           "solve_lattice"]

#: ``kernel="auto"`` runs the pure-Python kernel up to this many ideals unless the compiled
#: kernels already ran in this process (then they run everything: warm, they are faster on
#: any lattice). Measured on the Table 1 workloads with ``bench/bench_pipeline_dp.py``
#: (docs/results-pipeline.md): Python about 1.6-2 us per (ideal, sub-ideal) pair, numba's
#: import and cache load about 0.27 s of CPU, so 600 ideals (at most ~120,000 pairs) is
#: where compiling starts to pay.
PY_MAX_IDEALS = 600
_KERNELS = ("auto", "python", "compiled")


def _jit():
    """The compiled kernels (imports numba on first use)."""
    from . import _dp_jit as _pipeline_dp_jit

    return _pipeline_dp_jit


def __getattr__(name: str):
    if name in ("forward", "backtrack_moves"):  # the compiled kernels, imported lazily
        return getattr(_jit(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def hyper_csr(n: int, hyper: list, hsrc: list):
    """Per supernode, the hyperedges holding it (CSR), with sizes, costs and producers."""
    H = len(hyper)
    hsize = np.array([len(h) for h, _c in hyper], dtype=np.int32)
    hcost = np.array([c for _h, c in hyper], dtype=np.float64)
    src = np.array(hsrc, dtype=np.int32) if H else np.zeros(0, dtype=np.int32)
    pairs = sorted((v, e) for e, (h, _c) in enumerate(hyper) for v in h)
    nptr = np.zeros(n + 1, dtype=np.int64)
    for v, _e in pairs:
        nptr[v + 1] += 1
    nptr = np.cumsum(nptr)
    nh = np.array([e for _v, e in pairs], dtype=np.int32)
    return nptr, nh, hsize, hcost, src


def backward_reach(p) -> tuple[np.ndarray, np.ndarray]:
    """Bitsets (uint64 words, one row per supernode) of the supernodes whose backward ops are
    reachable from / reach the backward ops of each supernode through backward edges (its own
    row bit only when a cycle passes through it). A stage ``S`` has a contiguous backward part
    exactly when no supernode outside ``S`` is both a descendant and an ancestor of ``S``."""
    gc = p.graph.c
    n = p.n
    bwd = np.isin(gc.op_kind, [1, 2])
    own = p.owner
    succ: list = [set() for _ in range(n)]
    m = bwd[gc.src] & bwd[gc.dst] & (own[gc.src] != own[gc.dst])
    for a, b in zip(own[gc.src[m]].tolist(), own[gc.dst[m]].tolist()):
        succ[a].add(b)
    pred: list = [set() for _ in range(n)]
    for a in range(n):
        for b in succ[a]:
            pred[b].add(a)
    W = max(1, (n + 63) // 64)

    def closure(adj) -> np.ndarray:
        out = np.zeros((n, W), np.uint64)
        for s in range(n):
            seen, stack = set(), list(adj[s])
            while stack:
                x = stack.pop()
                if x not in seen:
                    seen.add(x)
                    stack.extend(adj[x])
            for x in seen:
                out[s, x // 64] |= np.uint64(1) << np.uint64(x % 64)
        return out

    return closure(succ), closure(pred)


_MODES = {False: 0, True: 1, "half_duplex": 1, "full_duplex": 2}


def interleave_mode(interleave) -> int:
    """0 (sum), 1 (max of compute and communication) or 2 (full duplex) for ``interleave``.

    >>> interleave_mode(False), interleave_mode(True), interleave_mode("full_duplex")
    (0, 1, 2)
    """
    try:
        return _MODES[interleave]
    except (KeyError, TypeError):
        raise SolverError(f"interleave must be False, True (half duplex) or 'full_duplex', "
                          f"got {interleave!r}") from None


def _pick_kernel(kernel: str, n_ideals: int) -> str:
    """``"python"`` or ``"compiled"`` for ``kernel`` on a lattice of ``n_ideals`` ideals."""
    if kernel not in _KERNELS:
        raise SolverError(f"dp: kernel must be one of {', '.join(_KERNELS)}, got {kernel!r}")
    if kernel != "auto":
        return kernel
    return "python" if n_ideals <= PY_MAX_IDEALS and not _LOADED else "compiled"


_LOADED = False  # True once the compiled kernels ran in this process (their load is paid)


class _Compiled:
    """The compiled kernels over one problem, with the interface of
    :class:`~workbench.solvers.pipeline.pykernel.PyKernel`."""

    def __init__(self, lat: Lattice, arrays: dict, lo, hi):
        self.jit = _jit()
        K, L = arrays["K"], arrays["L"]
        self.args = tuple(arrays[x] for x in _ARGS)
        self.lo, self.hi = lo, hi
        self.dpv = np.full((lat.n, K + 1, L + 1), np.inf)  # one ideal's states share a line
        self.dpv[0, :, :] = 0.0
        self.dmin = np.full(lat.n, np.inf)
        self.dmin[0] = 0.0

    def forward(self, I0: int, I1: int) -> int:
        global _LOADED
        pairs = self.jit.forward(*self.args, self.lo, self.hi, self.dpv, self.dmin, I0, I1)
        _LOADED = True
        return pairs

    def value(self, I: int, a: int, b: int) -> float:
        return float(self.dpv[I, a, b])

    def backtrack_moves(self, I: int, a: int, b: int):
        return self.jit.backtrack_moves(I, a, b, *self.args, self.dpv)


_ARGS = ("dptr", "dv", "dj", "nptr", "nh", "hsize", "hcost", "hsrc", "acc", "cpu", "mem",
         "uacc", "ucpu", "K", "L", "cap", "tolB", "reps_max", "mode", "replicate", "sync_inv",
         "bdesc", "banc", "bnd", "cfwd")


def boundary_costs(p, lat: Lattice) -> np.ndarray:
    """Per ideal ``I`` of ``lat``: the summed cost of the hyperedges of ``p`` with supernodes
    both in ``I`` and outside it -- the tensors that cross the boundary between the stages up
    to ``I`` and those after it when activations are forwarded stage to stage
    (:data:`workbench.costs.pipeline_costs.FORWARDED`). A stage ``I \\ J`` then pays
    ``bnd[J] + bnd[I]`` (it receives and sends what crosses each of its two boundaries), which
    the DP charges exactly. Each ideal from one of its covering edges (``I = J + v``), updating
    only ``v``'s hyperedges.

    >>> from workbench.solvers.pipeline.ideals import lattice
    >>> from workbench.solvers.pipeline.contraction import DPProblem
    >>> lat = lattice([[], [0], [1]], [[1], [2], []])        # a chain of three supernodes
    >>> p = DPProblem(graph=None, members=[[0], [1], [2]], acc=np.ones(3), cpu=np.ones(3),
    ...               mem=np.zeros(3), pred=[[], [0], [1]], succ=[[1], [2], []],
    ...               hyper=[((0, 2), 0.5), ((1, 2), 0.25)], key=[0, 1, 2],
    ...               out_cost=np.zeros(3), owner=np.array([0, 1, 2]), hyper_src=[0, 1])
    >>> boundary_costs(p, lat).tolist()      # {}, {0}, {0, 1}, {0, 1, 2}
    [0.0, 0.5, 0.75, 0.0]
    """
    N = lat.n
    out = np.zeros(N)
    by_node: list = [[] for _ in range(p.n)]
    masks = []
    for h, (members, cost) in enumerate(p.hyper):
        m = 0
        for v in members:
            m |= 1 << int(v)
        masks.append((m, len(set(members)), float(cost)))
        for v in set(members):
            by_node[int(v)].append(h)
    ideals, dptr, dv, dj = lat.ideals, lat.dptr.tolist(), lat.dv.tolist(), lat.dj.tolist()
    for i in range(1, N):
        e = dptr[i]
        J, v = dj[e], dv[e]
        x = out[J]
        bits = ideals[J]
        for h in by_node[v]:
            m, size, cost = masks[h]
            c = (bits & m).bit_count()
            x += cost * ((0 < c + 1 < size) - (0 < c < size))
        out[i] = x
    # exact zeros where nothing crosses (the incremental sums may leave rounding residue)
    out[np.abs(out) < 1e-12 * (1.0 + np.abs(out).max(initial=0.0))] = 0.0
    return out


def _arrays(p, k: int, l: int, cap: float, lat: Lattice, tolB: float, interleave,
            replicate: bool, allreduce_bandwidth: float, backward_contiguous: bool,
            forwarded: bool = False) -> dict:
    """The kernels' inputs (numpy arrays and scalars, named as :data:`_ARGS`). With
    ``forwarded`` the transfers are charged per ideal boundary (:func:`boundary_costs`) instead
    of per stage cut."""
    ns = p.n
    hsrc = getattr(p, "hyper_src", None) or [h[0] for h, _c in p.hyper]
    hyper = [] if forwarded else p.hyper
    nptr, nh, hsize, hcost, src = hyper_csr(ns, hyper, hsrc if hyper else [])
    bdesc, banc = backward_reach(p) if backward_contiguous else (
        np.zeros((ns, 0), np.uint64), np.zeros((ns, 0), np.uint64))
    return {
        "dptr": lat.dptr, "dv": lat.dv, "dj": lat.dj, "nptr": nptr, "nh": nh, "hsize": hsize,
        "hcost": hcost, "hsrc": src,
        "acc": np.where(np.isfinite(p.acc), p.acc, 0.0).astype(np.float64),
        "cpu": np.where(np.isfinite(p.cpu), p.cpu, 0.0).astype(np.float64),
        "mem": np.asarray(p.mem, dtype=np.float64),
        "uacc": (~np.isfinite(p.acc)).astype(np.float64),
        "ucpu": (~np.isfinite(p.cpu)).astype(np.float64),
        "K": k, "L": l,
        "cap": cap * (1 + 1e-12) + 1e-9 if math.isfinite(cap) else math.inf,
        "tolB": tolB, "reps_max": max(1, k) if replicate else 1,
        "mode": interleave_mode(interleave), "replicate": bool(replicate),
        "sync_inv": 1.0 / allreduce_bandwidth if math.isfinite(allreduce_bandwidth) else 0.0,
        "bdesc": bdesc, "banc": banc,
        "bnd": boundary_costs(p, lat) if forwarded else np.zeros(lat.n),
        "cfwd": 1.0 if forwarded else 0.0}


def solve_lattice(p, k: int, l: int, cap: float, lat: Lattice, *, upper_bound: float = math.inf,
                  interleave=False, replicate: bool = False,
                  allreduce_bandwidth: float = math.inf, time_limit=None,
                  progress=None, feasibility: bool = True, backward_contiguous: bool = False,
                  chunk: int = 4096, kernel: str = "auto", forwarded: bool = False):
    """Run the DP of the module text over ``lat`` for problem ``p`` (a
    :class:`~workbench.solvers.pipeline.dp.DPProblem`) with ``k`` accelerators of memory
    ``cap`` and ``l`` CPUs. Returns ``(value, stages, stats)``; ``stages`` lists
    ``(supernodes, "acc" | "cpu", replicas)`` in pipeline order (empty when infeasible).

    ``upper_bound`` must be at least the optimum (e.g. the DPL value): values above it are
    dropped and the sub-ideal descent stops where compute alone exceeds it. With
    ``feasibility`` the pass of :func:`feasible_ideals` at that bound first restricts every
    ideal to the device counts that can lie on a split within it (exact: only states that no
    split within the bound passes through are left out). ``backward_contiguous`` admits only
    stages whose backward ops form a contiguous set too (Section 5.3's rule for training
    graphs; :func:`backward_reach`). ``kernel``: ``"auto"`` (pure Python up to
    :data:`PY_MAX_IDEALS` ideals, else compiled), ``"python"`` or ``"compiled"``; every
    choice gives the same value, split and ``stats["ideal_pairs"]``. ``time_limit``: seconds
    (0 allowed) or a :class:`~workbench.budget.Budget`; TimeLimitError when it runs out before
    the last ideal. ``forwarded``: transfers forwarded stage to stage (each stage pays what
    crosses its two boundaries, :func:`boundary_costs`; CPUs pay too).
    """
    t0 = time.perf_counter()
    budget = time_limit if isinstance(time_limit, Budget) else Budget(time_limit, name="the DP")
    N = lat.n
    use = _pick_kernel(kernel, N)
    interleave_mode(interleave)  # SolverError before any work
    arrays = _arrays(p, k, l, cap, lat, math.inf, interleave, replicate, allreduce_bandwidth,
                     backward_contiguous, forwarded)
    B = float(upper_bound)
    greedy = None
    if feasibility and not math.isfinite(B) and not backward_contiguous and not forwarded:
        # exact pruning, as with the DPL bound (a greedy packing ignores backward contiguity,
        # so it bounds only the unconstrained optimum); its packing is also the split
        # returned when the time limit stops the DP
        B, greedy = greedy_bound(linear_order(p), arrays, budget=budget, split=True)
    tolB = B + 1e-7 * (1.0 + abs(B)) if math.isfinite(B) else math.inf
    arrays["tolB"] = tolB
    if feasibility:
        lo, hi = feasible_ideals(lat, p.acc, p.cpu, k, l, tolB, ranges=True)
    else:
        lo, hi = all_layers(N, k, l)
    t_feas = time.perf_counter() - t0
    if use == "python":
        run = PyKernel(lat, lo=lo, hi=hi, **{x: arrays[x] for x in _ARGS[3:]})
    else:
        run = _Compiled(lat, arrays, lo, hi)
    with no_cyclic_gc():
        try:
            pairs = _forward_chunks(run, N, budget, progress, chunk)
        except TimeLimitError as e:
            if not greedy:
                raise
            # no complete split from the DP yet: the greedy packing is the best one known
            return B, [(list(S), "acc", 1) for S in greedy if S], {
                "ideals": N, "supernodes": p.n, "upper_bound": B, "kernel": use,
                "stopped_by_time_limit": True, "fallback": "greedy_packing",
                "fallback_why": str(e), "dp_s": time.perf_counter() - t0}
        value = run.value(N - 1, k, l)
        stages = _backtrack(run, lat, p.n, k, l, arrays["reps_max"]) \
            if math.isfinite(value) else []
    stats = {"ideals": N, "ideal_pairs": int(pairs), "supernodes": p.n, "upper_bound": B,
             "feasible_ideals": int((lo <= hi).any(axis=0).sum()), "feasibility_s": t_feas,
             "kernel": use, "dp_s": time.perf_counter() - t0}
    if not math.isfinite(value):
        return value, [], stats
    stats["dp_s"] = time.perf_counter() - t0
    return value, stages, stats


@contextlib.contextmanager
def no_cyclic_gc():
    """Python's cyclic garbage collector paused while the kernels run: the pure-Python one
    allocates a list per pair and creates no reference cycles, and its allocations made the
    first solve in a process pay a full collection over every object the imports created
    (about 90,000 after ``import workbench``: 35-40 ms, as long as the DP itself on the
    241-ideal ResNet50 operator graph). Reference counting still frees everything."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _forward_chunks(run, N: int, budget: Budget, progress, chunk: int) -> int:
    """``run.forward`` over all ideals in chunks (``budget`` checked between them); returns the
    pairs visited."""
    pairs = 0
    start = 0
    # with a time limit the chunks adapt to ~50 ms each (the compiled pass cannot be stopped
    # inside a chunk, and 4,096 ideals of a dense graph can take seconds). An ideal's cost grows
    # with its position (it is reached from more ideals before it: the linearised DP's i-th
    # prefix from all i before), so a chunk is sized for cost ~ end^2 - start^2, not ~ size:
    # sized by the average of the last chunk, a chunk late in 36,000 ideals took seconds
    bounded = budget.deadline is not None
    size = min(chunk, 64) if bounded else chunk
    while start < N:
        if budget.over():
            raise TimeLimitError(f"the DP ran out of its time limit ({budget.limit:.3g} s) after "
                                 f"{start:,} of {N:,} ideals")
        end = min(N, start + size)
        t1 = time.perf_counter()
        pairs += run.forward(start, end)
        if bounded:
            took = max(time.perf_counter() - t1, 1e-5)
            rate = took / (float(end) ** 2 - float(start) ** 2)
            want = min(0.05, max(0.005, budget.left() / 4))
            nxt = int(math.sqrt(float(end) ** 2 + want / rate)) - end
            size = int(min(chunk * 4, max(16, min(nxt, 4 * size))))
        start = end
        if progress is not None:
            progress({"ideals_done": end, "ideals": N})
    return pairs


def _backtrack(run, lat: Lattice, ns: int, k: int, l: int, reps_max: int) -> list:
    """The stages of the optimum of ``run`` (filled), in pipeline order."""
    stages = []
    empty = 0
    a, b, cur = k, l, lat.n - 1
    while cur != empty:
        target = run.value(cur, a, b)
        vals, js = run.backtrack_moves(cur, a, b)
        # tie-break as the authors' code: leave a CPU unused, then a CPU stage, then leave an
        # accelerator unused, then an accelerator stage (first option within tolerance wins)
        tol = target + 1e-6 * (1.0 + abs(target))
        opts = []
        if b > 0:
            opts.append((run.value(cur, a, b - 1), 2, cur, 1))
            if js[0] >= 0:
                opts.append((float(vals[0]), 4, int(js[0]), 1))
        if a > 0:
            opts.append((run.value(cur, a - 1, b), 1, cur, 1))
            for r in range(1, min(a, reps_max) + 1):
                if js[r] >= 0:
                    opts.append((float(vals[r]), 3, int(js[r]), r))
        best = next((o for o in opts if o[0] <= tol), min(opts, default=(np.inf, 0, 0, 0)))
        _v, t, j, r = best
        if t == 1:
            a -= 1
            continue
        if t == 2:
            b -= 1
            continue
        if t == 0:  # pragma: no cover
            raise SolverError("DP backtracking failed")
        diff = lat.ideals[cur] & ~lat.ideals[j]
        stages.append(([v for v in range(ns) if (diff >> v) & 1], "acc" if t == 3 else "cpu", r))
        if t == 3:
            a -= r
        else:
            b -= 1
        cur = j
    stages.reverse()
    return stages


def warm_compiled(graph) -> dict:
    """Compile the numba kernels into numba's on-disk cache, so no solve pays the compilation.

    A fresh environment has no cache: the first solve that needs the compiled kernels (a lattice
    above :data:`PY_MAX_IDEALS` ideals) would compile them for seconds to a minute inside its own
    time limit (a contract case with ``time_limit=0.5`` took 2-10 s in a fresh clone). ``make
    install`` runs this once after installing, so solves only load the cache (about 0.2-0.3 s of
    CPU, once per process). Runs ``dp`` and ``dpl`` (both variants of the kernel: the lattice of
    ideals and the linear order's prefixes) on a small graph with the compiled kernels and
    returns their stats' kernel names. ``graph``: any small graph (a solver takes its graphs as
    given; the callers pass ``workbench.samples.diamond()``).

    >>> from workbench import samples
    >>> warm_compiled(samples.diamond())  # doctest: +SKIP
    {'dp': 'compiled', 'dpl': 'compiled'}
    """
    global _LOADED
    from ...cluster import Cluster, Device, Link
    from ..registry import solve

    cluster = Cluster([Device("gpu0", "gpu", 1e12), Device("gpu1", "gpu", 1e12),
                       Device("cpu0", "cpu")], mode="host", host_link=Link(0.0, 1e6))
    was, _LOADED = _LOADED, True  # "auto" then picks the compiled kernels, as once loaded
    try:
        return {m: solve(graph, cluster, method=m).stats["kernel"] for m in ("dp", "dpl")}
    except BaseException:
        _LOADED = was
        raise
