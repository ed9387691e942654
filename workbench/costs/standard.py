"""Standard Evaluation (Celeritas, Section 4.2.1): estimate a graph at a batch size too large
for one device from profiles taken at several small batch sizes.

For every op a linear regression ``y = a + b * batch`` is fitted to its memory (accurate: an
op's memory is mostly weights plus activations proportional to the batch) and, roughly, to its
compute time on each device kind (the paper notes time is not really linear in the batch);
edge tensor sizes are regressed the same way. :func:`estimate_graph` evaluates the fit at the
target batch; :func:`relative_deviation` compares an estimate with a true profile op by op with
the paper's metric ``|d_e - d_a| / d_a`` (Table 5, Fig. 5).

Profiles are :class:`~workbench.graph.OpGraph` objects of the same ops and edges at different
batch sizes, given as a dict ``batch -> graph``: what the TensorFlow runner's profiler produces,
or :func:`synthetic_profiles` for experiments without hardware.

Examples
--------
>>> from workbench import samples
>>> g = samples.inception(200, seed=0)
>>> profiles = synthetic_profiles(g, [8, 16, 32, 64], seed=0)
>>> est = estimate_graph(profiles, 512)
>>> true = synthetic_profiles(g, [512], seed=0)[512]
>>> dev = relative_deviation(est, true)
>>> dev.mean_memory < 0.05, dev.mean_time < 0.5
(True, True)
>>> estimate_graph({32: g}, 512)
Traceback (most recent call last):
...
workbench.errors.GraphError: profiles need at least two different batch sizes, got 1 (32)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import GraphError
from ..graph import OpGraph

__all__ = ["CostModel", "Deviation", "estimate_graph", "fit_costs", "relative_deviation",
           "synthetic_profiles"]


def _check_batch(b) -> float:
    if isinstance(b, bool):
        raise GraphError(f"batch size {b!r} is not a positive number")
    try:
        x = float(b)
    except (TypeError, ValueError):
        raise GraphError(f"batch size {b!r} is not a positive number") from None
    if not (x > 0 and math.isfinite(x)):
        raise GraphError(f"batch size {b!r} is not a positive number")
    return x


def _check_profiles(profiles: Mapping) -> tuple[list[float], list[OpGraph]]:
    """Sorted batches and graphs; GraphError naming the problem when they disagree."""
    if not isinstance(profiles, Mapping):
        raise GraphError("profiles must be a dict batch size -> OpGraph")
    items = []
    for b, g in profiles.items():
        x = _check_batch(b)
        if not isinstance(g, OpGraph):
            raise GraphError(f"profile at batch {b!r} is a {type(g).__name__}, not an OpGraph")
        items.append((x, b, g))
    items.sort(key=lambda t: t[0])
    xs = [x for x, _, _ in items]
    if len(set(xs)) < 2:
        got = ", ".join(str(b) for _, b, _ in items) or "none"
        raise GraphError(f"profiles need at least two different batch sizes, got {len(items)} "
                         f"({got})")
    _, b0, ref = items[0]
    ref_ops = set(ref.ops)
    ref_edges = set(ref.edges())
    for _, b, g in items[1:]:
        ops = set(g.ops)
        if ops != ref_ops:
            extra = sorted(ops - ref_ops)
            lost = sorted(ref_ops - ops)
            what = (f"has op {extra[0]!r} that the profile at batch {b0} lacks" if extra else
                    f"lacks op {lost[0]!r} of the profile at batch {b0}")
            raise GraphError(f"profiles disagree on the op set: the profile at batch {b} {what} "
                             f"({len(extra)} extra, {len(lost)} missing)")
        edges = set(g.edges())
        if edges != ref_edges:
            diff = min(edges ^ ref_edges)
            side = "has" if diff in edges else "lacks"
            raise GraphError(f"profiles disagree on the edges: the profile at batch {b} {side} "
                             f"edge {diff[0]} -> {diff[1]} (batch {b0} does not)")
        for v in ref.ops:
            k0, k1 = set(ref.nx.nodes[v]["compute"]), set(g.nx.nodes[v]["compute"])
            if k0 != k1:
                raise GraphError(f"profiles disagree on the device kinds of op {v!r}: "
                                 f"{sorted(k0)} at batch {b0}, {sorted(k1)} at batch {b}")
    return xs, [g for _, _, g in items]


def _fit(x: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Least squares ``Y[:, j] = a[j] + b[j] x`` for every column; returns a, b, R^2."""
    xm = x.mean()
    dx = x - xm
    Ym = Y.mean(axis=0)
    dY = Y - Ym
    sxx = float((dx * dx).sum())
    b = (dx[:, None] * dY).sum(axis=0) / sxx
    a = Ym - b * xm
    ss_res = ((dY - b[None, :] * dx[:, None]) ** 2).sum(axis=0)
    ss_tot = (dY ** 2).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        r2 = np.where(ss_tot > 0, 1.0 - ss_res / ss_tot, 1.0)
    return a, b, r2


@dataclass
class CostModel:
    """Per-op (and per-edge) linear fits ``value = intercept + slope * batch``.

    ``time_*`` are ``(ops, kinds)`` arrays (NaN where an op cannot run on a kind), ``mem_*``
    per op, ``bytes_*`` per edge of ``template`` (in its ``graph.c`` edge order); ``*_r2`` are
    the coefficients of determination of the fits.
    """

    template: OpGraph
    batches: tuple
    kinds: tuple
    mem_intercept: np.ndarray
    mem_slope: np.ndarray
    mem_r2: np.ndarray
    time_intercept: np.ndarray
    time_slope: np.ndarray
    time_r2: np.ndarray
    bytes_intercept: np.ndarray
    bytes_slope: np.ndarray
    info: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        return (f"CostModel({self.template.n_ops} ops, batches {list(self.batches)}, "
                f"kinds {list(self.kinds)})")

    def predict(self, batch: float, *, name: str | None = None) -> OpGraph:
        """The graph at ``batch``: fitted memory, compute and tensor sizes (clipped at 0)."""
        x = _check_batch(batch)
        g = self.template
        gc = g.c
        mem = np.maximum(self.mem_intercept + self.mem_slope * x, 0.0)
        tim = np.maximum(self.time_intercept + self.time_slope * x, 0.0)
        nb = np.maximum(self.bytes_intercept + self.bytes_slope * x, 0.0)
        ops = []
        for i, v in enumerate(gc.names):
            a = dict(g.nx.nodes[v])
            a["compute"] = {k: float(tim[i, j]) for j, k in enumerate(self.kinds)
                            if k in a["compute"]}
            a["memory"] = float(mem[i])
            ops.append((v, a))
        edges = []
        for e, (s, d) in enumerate(zip(gc.src.tolist(), gc.dst.tolist())):
            a = dict(g.nx.edges[gc.names[s], gc.names[d]])
            a["bytes"] = float(nb[e])
            edges.append((gc.names[s], gc.names[d], a))
        meta = {**g.meta, "batch": batch, "estimated_from": list(self.batches)}
        return OpGraph.from_ops(ops, edges, name=name or f"{g.name}@{batch}", meta=meta)


def fit_costs(profiles: Mapping) -> CostModel:
    """Fit the per-op regressions of the Standard Evaluation to ``profiles``.

    Parameters
    ----------
    profiles : dict batch size -> OpGraph
        The same ops, edges and device kinds at two or more batch sizes.

    Raises
    ------
    GraphError
        Fewer than two batch sizes, a batch size that is not a positive number, or profiles
        that disagree on the op set, the edges or an op's device kinds (the message names it).

    >>> from workbench import samples
    >>> g = samples.diamond()
    >>> prof = {b: g.map_ops(lambda v, a, b=b: {**a, "memory": 1e6 + 2e5 * b}) for b in (2, 4)}
    >>> m = fit_costs(prof)
    >>> m.mem_slope.round().tolist(), m.mem_intercept.round().tolist()
    ([200000.0, 200000.0, 200000.0, 200000.0], [1000000.0, 1000000.0, 1000000.0, 1000000.0])
    """
    xs, graphs = _check_profiles(profiles)
    ref = graphs[-1]
    gc = ref.c
    x = np.asarray(xs)
    kinds = gc.kinds
    order = list(gc.names)
    mem = np.vstack([g.c.memory[[g.index[v] for v in order]] for g in graphs])
    tim = np.stack([
        np.array([[g.nx.nodes[v]["compute"].get(k, np.nan) for k in kinds] for v in order])
        for g in graphs])                                            # (p, n, kinds)
    edges = ref.edges()
    nb = np.vstack([np.array([g.nx.edges[u, v]["bytes"] for u, v in edges]) for g in graphs]) \
        if edges else np.zeros((len(graphs), 0))
    ma, mb, mr2 = _fit(x, mem)
    p, n, nk = tim.shape
    ta, tb, tr2 = _fit(x, np.nan_to_num(tim).reshape(p, n * nk))
    nan = np.isnan(tim[0])
    ta, tb, tr2 = (np.where(nan, np.nan, arr.reshape(n, nk)) for arr in (ta, tb, tr2))
    ba, bb, _ = _fit(x, nb)
    return CostModel(ref, tuple(sorted(profiles, key=float)), kinds, ma, mb, mr2, ta, tb, tr2,
                     ba, bb, info={"n_profiles": len(graphs)})


def estimate_graph(profiles: Mapping, batch: float, *, name: str | None = None) -> OpGraph:
    """Fit :func:`fit_costs` to ``profiles`` and predict the graph at ``batch``."""
    return fit_costs(profiles).predict(batch, name=name)


@dataclass
class Deviation:
    """Per-op relative deviations ``|estimate - actual| / actual`` (Celeritas Table 5).

    ``memory`` and ``time`` hold one value per op of ``ops`` (NaN where the actual value is 0
    and the estimate is not: the ratio is undefined; 0 where both are 0). ``mean_*`` average the
    defined values; :meth:`cdf` gives the fraction of ops within a deviation (Fig. 5).
    """

    ops: list
    memory: np.ndarray
    time: np.ndarray
    kind: str

    @property
    def mean_memory(self) -> float:
        v = self.memory[~np.isnan(self.memory)]
        return float(v.mean()) if len(v) else 0.0

    @property
    def mean_time(self) -> float:
        v = self.time[~np.isnan(self.time)]
        return float(v.mean()) if len(v) else 0.0

    def cdf(self, what: str = "memory", at: Sequence[float] = (0.01, 0.05, 0.1, 0.2, 0.3)
            ) -> dict:
        """Fraction of ops (with a defined deviation) whose deviation is at most each value.

        >>> d = Deviation(["a", "b"], np.array([0.0, 0.2]), np.array([0.1, 0.1]), "gpu")
        >>> d.cdf("memory", at=(0.0, 0.2))
        {0.0: 0.5, 0.2: 1.0}
        """
        if what not in ("memory", "time"):
            raise ValueError(f"what must be 'memory' or 'time', got {what!r}")
        v = getattr(self, what)
        v = v[~np.isnan(v)]
        return {float(a): float((v <= a + 1e-12).mean()) if len(v) else 1.0 for a in at}


def _rel(est: np.ndarray, act: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.abs(est - act) / act
    zero = act <= 0
    return np.where(zero, np.where(np.abs(est) <= 1e-12 * (1 + np.abs(est)), 0.0, np.nan), r)


def relative_deviation(estimated: OpGraph, actual: OpGraph, *, kind: str | None = None
                       ) -> Deviation:
    """Per-op relative deviation of ``estimated`` against the measured ``actual`` graph.

    ``kind`` is the device kind whose compute time is compared (default ``gpu`` when both
    graphs have it, else their first common kind). Raises GraphError when the two graphs do not
    have the same ops.

    >>> from workbench import samples
    >>> g = samples.diamond().map_ops(lambda v, a: {**a, "memory": 100.0})
    >>> h = g.map_ops(lambda v, a: {**a, "memory": 110.0 if v == "a" else 100.0})
    >>> relative_deviation(h, g).memory.round(3).tolist()
    [0.1, 0.0, 0.0, 0.0]
    """
    if set(estimated.ops) != set(actual.ops):
        lost = sorted(set(actual.ops) - set(estimated.ops))
        extra = sorted(set(estimated.ops) - set(actual.ops))
        what = f"lacks op {lost[0]!r}" if lost else f"has op {extra[0]!r} not in the actual graph"
        raise GraphError(f"estimated graph {estimated.name!r} {what}: the graphs disagree on "
                         f"the op set")
    common = sorted(set(estimated.c.kinds) & set(actual.c.kinds))
    if kind is None:
        kind = "gpu" if "gpu" in common else (common[0] if common else None)
    if kind not in common:
        raise GraphError(f"device kind {kind!r} is not costed in both graphs "
                         f"(common kinds: {', '.join(common) or 'none'})")
    ops = actual.ops
    ie = [estimated.index[v] for v in ops]
    ke, ka = estimated.c.kind_index[kind], actual.c.kind_index[kind]
    mem = _rel(estimated.c.memory[ie], actual.c.memory)
    te, ta = estimated.c.compute[ie, ke], actual.c.compute[:, ka]
    both = np.isfinite(te) & np.isfinite(ta)
    tim = np.where(both, _rel(np.where(both, te, 0.0), np.where(both, ta, 1.0)), np.nan)
    return Deviation(list(ops), mem, tim, kind)


def synthetic_profiles(graph: OpGraph, batches: Sequence[float], *,
                       ref_batch: float | None = None, seed: int = 0,
                       time_noise: float = 0.05, block: float = 256) -> dict:
    """Profiles of ``graph`` at other batch sizes from a plausible cost model (no hardware).

    ``graph`` is taken as measured at ``ref_batch`` (default ``graph.meta["batch"]`` or 32).
    Memory = the op's memory at the reference (weights) plus activations (its largest output
    tensor) proportional to the batch, rounded up to allocator blocks of ``block`` bytes, with a
    workspace step for one op in ten at large batches; compute = a fixed launch share plus a
    part growing as ``batch ** alpha`` (``alpha`` per op in [0.8, 1.1]) with log-normal noise
    of ``time_noise``; tensor sizes proportional to the batch. The per-op parameters depend
    only on ``seed``, so profiles at different batches describe the same model.

    >>> from workbench import samples
    >>> p = synthetic_profiles(samples.diamond(), [16, 32], ref_batch=32)
    >>> p[16].total_bytes() * 2 == p[32].total_bytes()
    True
    """
    b0 = _check_batch(ref_batch if ref_batch is not None else graph.meta.get("batch", 32))
    bs = [_check_batch(b) for b in batches]
    gc = graph.c
    n = gc.n
    rng = np.random.default_rng(seed)
    overhead = rng.uniform(0.05, 0.5, n)
    alpha = rng.uniform(0.8, 1.1, n)
    workspace = rng.random(n) < 0.1
    out_bytes = np.zeros(n)
    np.maximum.at(out_bytes, gc.src, gc.bytes)
    act = out_bytes / b0                                      # activation bytes per sample
    weights = gc.memory
    out = {}
    for b, x in zip(batches, bs):
        r = np.random.default_rng([seed, round(x * 1000)])
        mem = weights + act * x
        mem = mem + np.where(workspace & (x > 4 * b0), act * x * 0.25, 0.0)
        mem = np.ceil(mem / block) * block if block > 0 else mem
        scale = overhead + (1 - overhead) * (x / b0) ** alpha
        noise = r.lognormal(0.0, time_noise, n) if time_noise > 0 else np.ones(n)
        comp = gc.compute * (scale * noise)[:, None]
        ops = []
        for i, v in enumerate(gc.names):
            a = dict(graph.nx.nodes[v])
            a["compute"] = {k: float(comp[i, gc.kind_index[k]]) for k in a["compute"]}
            a["memory"] = float(mem[i])
            ops.append((v, a))
        edges = [(gc.names[s], gc.names[d], {**graph.nx.edges[gc.names[s], gc.names[d]],
                                             "bytes": float(nbytes * x / b0)})
                 for s, d, nbytes in zip(gc.src.tolist(), gc.dst.tolist(), gc.bytes.tolist())]
        out[b] = OpGraph.from_ops(ops, edges, name=f"{graph.name}@{b}",
                                  meta={**graph.meta, "batch": b, "synthetic": True})
    return out
