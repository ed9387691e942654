"""Sample graphs: small hand-made ones for teaching and deterministic generators of realistic
synthetic DAGs (CNN-like, multi-branch cells, transformer blocks, LSTM grids) of any size.

Costs are in ms on a V100-class ``gpu`` and a host ``cpu`` (``cpu_factor`` times slower). Edge
sizes are scaled so that the graph's CCR at the reference link (:data:`REF_BANDWIDTH`, 10 GB/s)
equals the requested ``ccr``. The same ``seed`` always gives the same graph.

Examples
--------
>>> from workbench import samples
>>> g = samples.transformer(500, seed=1)
>>> 450 <= g.n_ops <= 550, round(g.ccr(bandwidth=samples.REF_BANDWIDTH), 2)
(True, 0.5)
>>> samples.transformer(500, seed=1).fingerprint == g.fingerprint
True
>>> sorted(samples.SAMPLES)[:3]
['cnn', 'diamond', 'inception']
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from .errors import GraphError
from .graph import OpGraph
from .transforms.training import to_training  # noqa: F401  (re-exported: samples.to_training)

__all__ = ["diamond", "pesto_fig2", "two_branch", "cnn", "inception", "transformer",
           "lstm_grid", "random_dag", "to_training", "load_sample", "SAMPLES", "REF_BANDWIDTH"]

from .cluster import REF_BANDWIDTH  # noqa: E402 - the constant belongs to the data model

MB = 1e6


def _g(gpu: float, cpu_factor: float = 4.0, memory: float = 0.0, **extra) -> dict:
    return {"compute": {"gpu": float(gpu), "cpu": float(gpu) * cpu_factor},
            "memory": float(memory), **extra}


def diamond() -> OpGraph:
    """Four ops a -> (b, c) -> d; 10 MB tensors.

    >>> diamond().ops
    ['a', 'b', 'c', 'd']
    """
    ops = [("a", _g(1)), ("b", _g(2)), ("c", _g(2)), ("d", _g(1))]
    e = {"bytes": 10 * MB}
    return OpGraph.from_ops(ops, [("a", "b", e), ("a", "c", e), ("b", "d", e), ("c", "d", e)],
                            name="diamond")


def pesto_fig2() -> OpGraph:
    """The 7-op toy of Pesto's Fig. 2, reconstructed from its description (the paper prints no
    numbers): a long chain of cheap ops A -> B -> C -> D -> E and two compute-heavy ops F -> G
    that feed the end of the chain. A scheduler that ranks by hop count favours A-E; the
    optimum starts F and G early. Tensors are 10 MB (1 ms over a 10 GB/s link).

    >>> g = pesto_fig2()
    >>> [g.op(v)["compute"]["gpu"] for v in g.ops]
    [1.0, 1.0, 1.0, 1.0, 3.0, 3.0, 1.0]
    """
    ops = [("A", {"compute": {"gpu": 1.0}}), ("B", {"compute": {"gpu": 1.0}}),
           ("C", {"compute": {"gpu": 1.0}}), ("D", {"compute": {"gpu": 1.0}}),
           ("E", {"compute": {"gpu": 1.0}}), ("F", {"compute": {"gpu": 3.0}}),
           ("G", {"compute": {"gpu": 3.0}})]
    e = {"bytes": 10 * MB}
    edges = [("A", "B", e), ("B", "C", e), ("C", "D", e), ("D", "E", e), ("A", "F", e),
             ("F", "G", e), ("G", "E", e)]
    return OpGraph.from_ops(ops, edges, name="pesto_fig2")


def two_branch() -> OpGraph:
    """A two-branch cell: input -> (conv3x3 -> conv3x3 | conv1x1) -> concat -> output."""
    ops = [("input", _g(0.2, op_type="Placeholder")), ("conv3a", _g(2.0, op_type="Conv2D")),
           ("conv3b", _g(2.0, op_type="Conv2D")), ("conv1", _g(1.0, op_type="Conv2D")),
           ("concat", _g(0.3, op_type="ConcatV2")), ("output", _g(0.5, op_type="MatMul"))]
    e = {"bytes": 8 * MB}
    edges = [("input", "conv3a", e), ("conv3a", "conv3b", e), ("conv3b", "concat", e),
             ("input", "conv1", e), ("conv1", "concat", e), ("concat", "output", e)]
    return OpGraph.from_ops(ops, edges, name="two_branch")


# ---------------------------------------------------------------------- generator machinery
def _finish(name: str, names: list, gpu: np.ndarray, cpu: np.ndarray, memory, op_type: list,
            splits: list, out: np.ndarray, src: np.ndarray, dst: np.ndarray, ccr: float,
            meta: dict) -> OpGraph:
    """The graph of generated ops; edge sizes are the source's output size scaled to ``ccr``
    (edges in creation order: ``raw.sum()`` sums in that order)."""
    raw = out[src] if len(src) else np.zeros(0)
    work = sum(gpu.tolist())        # Python's left-to-right sum, as the generators always did
    if len(raw) and raw.sum() > 0 and ccr > 0:
        raw = raw * (ccr * work * REF_BANDWIDTH / raw.sum())
    elif ccr == 0:
        raw = np.zeros(len(raw))
    return OpGraph.from_arrays(names, {"gpu": gpu, "cpu": cpu}, src, dst, memory=memory,
                               nbytes=raw, op_type=op_type, splits=splits, name=name, meta=meta)


class _Builder:
    """Accumulates ops and edges with realistic random costs (drawn op by op)."""

    def __init__(self, seed: int, cpu_factor: float):
        self.rng = np.random.default_rng(seed)
        self.cpu_factor = cpu_factor
        self.ops: list = []                  # names, in creation (= topological) order
        self.index: dict = {}
        self.cols: list = []                 # (gpu, cpu, memory, op_type, out, splits) per op
        self.src: list = []
        self.dst: list = []

    def op(self, name: str, op_type: str, gpu_ms: float, memory: float, out_bytes: float,
           inputs=(), splits: dict | None = None) -> str:
        r = self.rng
        gpu = float(gpu_ms * r.lognormal(0.0, 0.25))
        cpu = gpu * float(self.cpu_factor * r.uniform(0.7, 1.4))
        i = len(self.ops)
        self.cols.append((gpu, cpu, float(memory), op_type,
                          float(out_bytes * r.uniform(0.8, 1.2)), splits))
        self.ops.append(name)
        self.index[name] = i
        for u in inputs:
            self.src.append(self.index[u])
            self.dst.append(i)
        return name

    def build(self, name: str, ccr: float, meta: dict) -> OpGraph:
        gpu, cpu, mem, types, out, splits = zip(*self.cols)
        return _finish(name, self.ops, np.array(gpu), np.array(cpu), np.array(mem), list(types),
                       list(splits), np.array(out), np.array(self.src, dtype=np.int64),
                       np.array(self.dst, dtype=np.int64), ccr, meta)


def _draws(rng: np.random.Generator, n: int, sigma: float, lo: float, hi: float,
           lo2: float, hi2: float) -> tuple:
    """Per op, in op order, what ``_Builder.op`` draws: ``lognormal(0, sigma)``,
    ``uniform(lo, hi)``, ``uniform(lo2, hi2)`` (the same numbers: a log-normal is the
    exponential of ``sigma`` times a standard normal, a uniform ``lo + (hi - lo) u``; the
    exponential is libm's, as numpy's scalar draw uses)."""
    sn, rd = rng.standard_normal, rng.random
    z = np.array([(sn(), rd(), rd()) for _ in range(n)]).reshape(n, 3)
    ln = np.fromiter(map(math.exp, (sigma * z[:, 0]).tolist()), dtype=float, count=n)
    return ln, lo + (hi - lo) * z[:, 1], lo2 + (hi2 - lo2) * z[:, 2]


MAX_SAMPLE_OPS = 1_000_000
"""Largest generated sample (LLM-sized graphs; see ``docs/results-scaling.md`` for the time and
memory a 1,000,000-op graph takes to build)."""

MAX_RANDOM_EDGES = 200_000
"""Largest expected edge count of :func:`random_dag` (``edge_prob * n_ops**2 / 2``)."""


def _check_size(n_ops: int, minimum: int) -> None:
    if isinstance(n_ops, bool) or not isinstance(n_ops, (int, np.integer)) or n_ops < minimum:
        raise GraphError(f"n_ops must be an integer >= {minimum}, got {n_ops!r}")
    if n_ops > MAX_SAMPLE_OPS:
        raise GraphError(f"n_ops={n_ops} is above the limit of {MAX_SAMPLE_OPS} ops for a "
                         f"generated sample")


def cnn(n_ops: int = 200, *, ccr: float = 0.5, seed: int = 0, cpu_factor: float = 8.0,
        training: bool = False) -> OpGraph:
    """A ResNet-like layered CNN: residual blocks conv-bn-relu-conv-bn-add-relu, widening
    stages (bigger weights, smaller activations deeper in the network).

    >>> cnn(100).n_ops
    100
    """
    _check_size(n_ops, 8)
    b = _Builder(seed, cpu_factor)
    prev = b.op("input", "Placeholder", 0.05, 0, 12 * MB)
    prev = b.op("stem", "Conv2D", 1.5, 0.5 * MB, 25 * MB, [prev], {"batch": 32, "channels": 64})
    i = 0
    while len(b.ops) + 8 <= n_ops - 2:
        stage = min(i // 4, 3)
        act = 25 * MB / (2 ** stage)
        w = 0.15 * MB * (4 ** stage)
        t = 0.9 * (1 + 0.15 * stage)
        p = f"b{i}/"
        c1 = b.op(p + "conv1", "Conv2D", t, w, act, [prev], {"batch": 32, "channels": 64 * 2 ** stage})
        n1 = b.op(p + "bn1", "FusedBatchNorm", 0.15, 0.01 * MB, act, [c1], {"batch": 32})
        r1 = b.op(p + "relu1", "Relu", 0.08, 0, act, [n1], {"batch": 32})
        c2 = b.op(p + "conv2", "Conv2D", t, w, act, [r1], {"batch": 32, "channels": 64 * 2 ** stage})
        n2 = b.op(p + "bn2", "FusedBatchNorm", 0.15, 0.01 * MB, act, [c2], {"batch": 32})
        sc = prev
        if i % 4 == 0 and i > 0:
            sc = b.op(p + "proj", "Conv2D", t * 0.4, w * 0.25, act, [prev], {"batch": 32})
        add = b.op(p + "add", "AddV2", 0.06, 0, act, [n2, sc], {"batch": 32})
        prev = b.op(p + "relu2", "Relu", 0.08, 0, act, [add], {"batch": 32})
        i += 1
    while len(b.ops) < n_ops - 1:
        prev = b.op(f"head{len(b.ops)}", "Relu", 0.05, 0, 2 * MB, [prev])
    b.op("logits", "MatMul", 0.3, 8 * MB, 0.1 * MB, [prev], {"batch": 32})
    g = b.build(f"cnn{n_ops}", ccr, {"generator": "cnn", "seed": seed, "ccr": ccr})
    return to_training(g) if training else g


def inception(n_ops: int = 200, *, ccr: float = 0.5, seed: int = 0, cpu_factor: float = 8.0,
              training: bool = False) -> OpGraph:
    """An Inception-like network of multi-branch cells: four branches of 1-3 convolutions
    (one with a pooling op) joined by a concat.

    >>> g = inception(120)
    >>> g.n_ops, max(len(g.successors(v)) for v in g.ops)
    (120, 4)
    """
    _check_size(n_ops, 12)
    b = _Builder(seed, cpu_factor)
    prev = b.op("input", "Placeholder", 0.05, 0, 10 * MB)
    i = 0
    while len(b.ops) + 11 <= n_ops - 1:
        p = f"cell{i}/"
        outs = []
        for br, depth in enumerate((1, 2, 3, 2)):
            x = prev
            if br == 3:
                x = b.op(f"{p}b{br}/pool", "MaxPool", 0.2, 0, 6 * MB, [x], {"batch": 32})
                depth = 1
            for k in range(depth):
                x = b.op(f"{p}b{br}/conv{k}", "Conv2D", 0.6 + 0.5 * k, 0.3 * MB, 6 * MB, [x],
                         {"batch": 32, "channels": 64})
            outs.append(x)
        prev = b.op(p + "concat", "ConcatV2", 0.15, 0, 20 * MB, outs, {"batch": 32})
        i += 1
    while len(b.ops) < n_ops - 1:
        prev = b.op(f"head{len(b.ops)}", "Relu", 0.05, 0, 2 * MB, [prev])
    b.op("logits", "MatMul", 0.3, 8 * MB, 0.1 * MB, [prev], {"batch": 32})
    g = b.build(f"inception{n_ops}", ccr, {"generator": "inception", "seed": seed, "ccr": ccr})
    return to_training(g) if training else g


_B16 = {"batch": 16}
_BH = {"batch": 16, "heads": 16}
_TRANSFORMER_BLOCK = (  # name, op type, gpu ms, memory (x w), output (x act), inputs, splits
    ("ln1", "LayerNorm", 0.05, 0.01 * MB, 1, (-1,), _B16),
    ("q", "MatMul", 0.5, "w", 1, (0,), _BH),
    ("k", "MatMul", 0.5, "w", 1, (0,), _BH),
    ("v", "MatMul", 0.5, "w", 1, (0,), _BH),
    ("scores", "BatchMatMul", 0.7, 0, 2, (1, 2), _BH),
    ("softmax", "Softmax", 0.2, 0, 2, (4,), _BH),
    ("context", "BatchMatMul", 0.7, 0, 1, (5, 3), _BH),
    ("out", "MatMul", 0.5, "w", 1, (6,), _B16),
    ("add1", "AddV2", 0.03, 0, 1, (7, -1), _B16),
    ("ln2", "LayerNorm", 0.05, 0.01 * MB, 1, (8,), _B16),
    ("ffn1", "MatMul", 1.6, "4w", 4, (9,), {"batch": 16, "hidden": 4096}),
    ("gelu", "Gelu", 0.15, 0, 4, (10,), _B16),
    ("ffn2", "MatMul", 1.6, "4w", 1, (11,), {"batch": 16, "hidden": 1024}),
    ("dropout", "Dropout", 0.04, 0, 1, (12,), _B16),
    ("add2", "AddV2", 0.03, 0, 1, (13, 8), _B16),
)
"""One encoder block; input ``-1`` is the block's input (the previous block's ``add2``)."""


def transformer(n_ops: int = 200, *, ccr: float = 0.5, seed: int = 0, cpu_factor: float = 10.0,
                training: bool = False) -> OpGraph:
    """Repeated encoder blocks: layer norm, Q/K/V projections in parallel, scores, softmax,
    context, output projection, residual add, layer norm, two feed-forward matmuls with GELU
    and a second residual add (15 ops per block).

    Built in bulk (a million ops in seconds): the blocks are tiled from one template; the
    random costs are drawn op by op in the order of the ops, so a seed gives the same graph
    at every size it always gave.

    >>> transformer(64).n_ops
    64
    """
    _check_size(n_ops, 18)
    act, w = 4 * MB, 8 * MB
    blk = _TRANSFORMER_BLOCK
    nb = (n_ops - 2) // 15                      # blocks while 1 + 15 (i + 1) <= n_ops - 1
    heads = n_ops - 2 - 15 * nb
    mem_of = {"w": w, "4w": 4 * w}
    t_gpu = np.array([b[2] for b in blk])
    t_mem = np.array([float(mem_of.get(b[3], b[3])) for b in blk])
    t_out = np.array([b[4] * act for b in blk])
    gpu_ms = np.concatenate([[0.1], np.tile(t_gpu, nb), np.full(heads, 0.05), [1.0]])
    memory = np.concatenate([[120 * MB], np.tile(t_mem, nb), np.zeros(heads), [120 * MB]])
    out = np.concatenate([[act], np.tile(t_out, nb), np.full(heads, act), [0.5 * MB]])
    first = 1 + 15 * nb
    names = ["embed"] + [f"layer{i}/{b[0]}" for i in range(nb) for b in blk] + \
        [f"head{first + k}" for k in range(heads)] + ["logits"]
    types = ["Gather"] + [b[1] for b in blk] * nb + ["LayerNorm"] * heads + ["MatMul"]
    splits = [None] + [b[6] for b in blk] * nb + [None] * heads + [_B16]
    e_src = np.array([j if j >= 0 else -1 for b in blk for j in b[5]])
    e_dst = np.array([k for k, b in enumerate(blk) for _ in b[5]])
    base = 1 + 15 * np.arange(nb)[:, None]
    tail = np.arange(first, n_ops)
    src = np.concatenate([(base + e_src).ravel(), tail - 1]).astype(np.int64)
    dst = np.concatenate([(base + e_dst).ravel(), tail]).astype(np.int64)
    ln, u_cpu, u_out = _draws(np.random.default_rng(seed), n_ops, 0.25, 0.7, 1.4, 0.8, 1.2)
    gpu = gpu_ms * ln
    g = _finish(f"transformer{n_ops}", names, gpu, gpu * (cpu_factor * u_cpu), memory, types,
                splits, out * u_out, src, dst, ccr,
                {"generator": "transformer", "seed": seed, "ccr": ccr})
    return to_training(g) if training else g


def lstm_grid(n_ops: int = 200, *, layers: int = 4, ccr: float = 1.0, seed: int = 0,
              cpu_factor: float = 6.0, training: bool = False) -> OpGraph:
    """A stacked LSTM unrolled over time: cell (l, t) needs (l-1, t) and (l, t-1). Each cell
    is a gate matmul, the gate nonlinearity and the state update (3 ops); communication-heavy
    by default (``ccr=1``), the case where link congestion matters most.

    >>> g = lstm_grid(60, layers=2)
    >>> g.n_ops, len(g.sources())
    (60, 1)
    """
    _check_size(n_ops, 3 * layers + 2)
    b = _Builder(seed, cpu_factor)
    steps = max(1, (n_ops - 1) // (3 * layers))
    emb = b.op("embed", "Gather", 0.05, 64 * MB, 2 * MB)
    state = {}
    for t in range(steps):
        for l_ in range(layers):
            p = f"l{l_}/t{t}/"
            ins = [state[(l_ - 1, t)]] if l_ > 0 else ([emb] if t == 0 else [])
            if t > 0:
                ins.append(state[(l_, t - 1)])
            gm = b.op(p + "gates", "MatMul", 0.4, 16 * MB if t == 0 else 0, 4 * MB, ins,
                      {"batch": 64, "units": 1024})
            nl = b.op(p + "sigmoid", "Sigmoid", 0.05, 0, 4 * MB, [gm], {"batch": 64})
            state[(l_, t)] = b.op(p + "state", "Mul", 0.05, 0, 2 * MB, [nl], {"batch": 64})
    prev = state[(layers - 1, steps - 1)]
    while len(b.ops) < n_ops:
        prev = b.op(f"proj{len(b.ops)}", "MatMul", 0.2, 4 * MB, 1 * MB, [prev], {"batch": 64})
    g = b.build(f"lstm{n_ops}", ccr, {"generator": "lstm_grid", "seed": seed, "ccr": ccr,
                                      "layers": layers, "steps": steps})
    return to_training(g) if training else g


def random_dag(n_ops: int = 30, *, edge_prob: float = 0.15, ccr: float = 0.5, seed: int = 0,
               kinds: tuple = ("gpu", "cpu"), memory: float = 1 * MB,
               colocate_fraction: float = 0.0, cpu_only_fraction: float = 0.0) -> OpGraph:
    """A random DAG (edges only from lower to higher index) for tests and property checks.

    ``colocate_fraction`` of ops are put in colocation pairs; ``cpu_only_fraction`` of ops lose
    their ``gpu`` cost (they must run on a CPU).

    >>> g = random_dag(20, seed=3, colocate_fraction=0.2)
    >>> g.n_ops, len(g.colocation_groups) >= 1
    (20, True)
    """
    _check_size(n_ops, 1)
    if isinstance(edge_prob, bool) or not isinstance(edge_prob, (int, float)) \
            or not 0 <= edge_prob <= 1:
        raise GraphError(f"edge_prob must be a number in [0, 1], got {edge_prob!r}")
    expected = edge_prob * n_ops * (n_ops - 1) / 2
    if expected > MAX_RANDOM_EDGES:
        raise GraphError(f"random_dag({n_ops}, edge_prob={edge_prob:g}) would have about "
                         f"{expected:,.0f} edges, above the limit of {MAX_RANDOM_EDGES:,}; use "
                         f"fewer ops or a smaller edge_prob")
    r = np.random.default_rng(seed)
    ops = []
    for i in range(n_ops):
        gpu = float(r.uniform(0.1, 3.0))
        comp = {"gpu": gpu, "cpu": gpu * float(r.uniform(2, 10))}
        comp = {k: v for k, v in comp.items() if k in kinds} or {kinds[0]: gpu}
        if "cpu" in comp and len(comp) > 1 and r.random() < cpu_only_fraction:
            comp = {"cpu": comp["cpu"]}
        ops.append((f"n{i}", {"compute": comp, "memory": float(r.uniform(0.2, 1.8) * memory),
                              "op_type": "Random"}))
    edges = []
    for j in range(1, n_ops):
        preds = [i for i in range(j) if r.random() < edge_prob]
        if not preds and r.random() < 0.8:
            preds = [int(r.integers(0, j))]
        for i in preds:
            edges.append((f"n{i}", f"n{j}", {"bytes": float(r.uniform(0.5, 20) * MB)}))
    if colocate_fraction > 0:
        idx = r.permutation(n_ops)[: 2 * int(colocate_fraction * n_ops / 2)]
        for k in range(0, len(idx), 2):
            a, b2 = ops[idx[k]][1], ops[idx[k + 1]][1]
            common = set(a["compute"]) & set(b2["compute"])
            if common:
                grp = f"g{k // 2}"
                a["colocate"] = b2["colocate"] = grp
                a["compute"] = {kk: a["compute"][kk] for kk in common}
                b2["compute"] = {kk: b2["compute"][kk] for kk in common}
    g = OpGraph.from_ops(ops, edges, name=f"random{n_ops}_s{seed}")
    work = float(g.c.min_compute().sum())
    total = g.total_bytes()
    if total > 0 and ccr > 0:
        f = ccr * work * REF_BANDWIDTH / total
        g = OpGraph.from_ops(
            [(v, g.op(v)) for v in g.ops],
            [(u, v, {"bytes": g.edge(u, v)["bytes"] * f}) for u, v in g.edges()], name=g.name)
    return g


HARD_DEFAULTS = {"ccr": 3.0, "fanout": 6, "memory_pressure": 1.6, "cost_sigma": 1.0}
"""Hard-regime defaults of :func:`layered`: transfers cost 3x the compute, 6 ops ready at a
time, the model needs 1.6 devices' memory, op costs log-normal with sigma 1."""

_LAYERED_MB = 1e6


def layered(n_ops: int = 300, *, ccr: float = HARD_DEFAULTS["ccr"],
            fanout: int = HARD_DEFAULTS["fanout"],
            cost_sigma: float = HARD_DEFAULTS["cost_sigma"], skip: float = 0.3,
            seed: int = 0, cpu_factor: float = 8.0) -> OpGraph:
    """A random layered DAG in the hard regime.

    Ops come in layers of ``fanout`` ops; each op reads one op of the previous layer and,
    with probability ``skip``, one more from up to three layers back; each layer ends in a
    join when it is the last of a block of four (a synchronisation point, as the concat of an
    Inception cell or the residual add). Compute costs are log-normal (``cost_sigma``);
    tensor sizes are scaled so that the graph's CCR at the reference link
    (:data:`~workbench.cluster.REF_BANDWIDTH`) is ``ccr``. Memory: every op holds a weight
    proportional to its cost (the ``memory_pressure`` of a workload scales it to a cluster).

    Parameters
    ----------
    n_ops : int
    ccr : float
        Communication-to-computation ratio (total transfer time / total compute).
    fanout : int
        Ops per layer (parallel branches).
    cost_sigma : float
        Spread of op costs (0: all equal).
    skip : float
        Probability of a second, skip-layer input.

    Raises
    ------
    GraphError
        A size or knob out of range (named).

    >>> layered(5)
    Traceback (most recent call last):
    ...
    workbench.errors.GraphError: layered: n_ops must be an integer >= 8, got 5
    """
    if isinstance(n_ops, bool) or not isinstance(n_ops, (int, np.integer)) or n_ops < 8:
        raise GraphError(f"layered: n_ops must be an integer >= 8, got {n_ops!r}")
    for knob, val, lo in (("ccr", ccr, 0.0), ("cost_sigma", cost_sigma, 0.0),
                          ("skip", skip, 0.0)):
        if not (isinstance(val, (int, float)) and math.isfinite(val) and val >= lo):
            raise GraphError(f"layered: {knob} must be a finite number >= {lo}, got {val!r}")
    if not (0 <= skip <= 1):
        raise GraphError(f"layered: skip must be in [0, 1], got {skip!r}")
    if isinstance(fanout, bool) or not isinstance(fanout, (int, np.integer)) or fanout < 1:
        raise GraphError(f"layered: fanout must be an integer >= 1, got {fanout!r}")
    rng = np.random.default_rng(seed)
    names, gpu, src, dst, joins = _layered_ops(rng, n_ops, fanout, cost_sigma, skip)
    gpu = np.array(gpu)
    work = sum(gpu.tolist())       # Python's left-to-right sum, as the generator always did
    raw = rng.lognormal(0.0, 0.5, len(src))
    nbytes = raw * (ccr * work * REF_BANDWIDTH / raw.sum()) if ccr > 0 else raw * 0
    types = ["Placeholder"] + ["Conv2D"] * (n_ops - 2) + ["MatMul"]
    for j in joins:
        types[j] = "ConcatV2"
    return OpGraph.from_arrays(names, {"gpu": gpu, "cpu": gpu * cpu_factor},
                               np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64),
                               memory=gpu * 50 * _LAYERED_MB, nbytes=nbytes, op_type=types,
                               name=f"layered{n_ops}",
                               meta={"generator": "layered", "seed": seed, "ccr": ccr,
                                     "fanout": int(fanout), "cost_sigma": cost_sigma})


def _layered_ops(rng, n_ops: int, fanout: int, cost_sigma: float, skip: float) -> tuple:
    """The ops and edges of :func:`layered` (draws in the order it always made them): names,
    compute on the gpu, edge sources and targets, the joins' indices."""
    lognormal, integers, random = rng.lognormal, rng.integers, rng.random
    names, gpu, src, dst = ["input"], [0.05], [], []
    layers: list = [(0, 1)]                 # (first op, width)
    joins: list = []
    i = 0
    while len(names) < n_ops - 1:
        width = min(fanout, n_ops - 1 - len(names))
        if len(layers) % 4 == 0 or width == 1:
            j = len(names)
            names.append(f"join{len(layers)}")
            gpu.append(float(lognormal(-1.0, cost_sigma * 0.5)))
            a, w = layers[-1]
            src.extend(range(a, a + w))
            dst.extend([j] * w)
            layers.append((j, 1))
            joins.append(j)
            continue
        a, w = layers[-1]
        first = len(names)
        for _ in range(width):
            j = len(names)
            names.append(f"op{i}")
            i += 1
            gpu.append(float(lognormal(0.0, cost_sigma)))
            src.append(a + int(integers(w)))
            dst.append(j)
            if len(layers) > 2 and random() < skip:
                b, bw = layers[-int(integers(2, min(4, len(layers)) + 1))]
                u = b + int(integers(bw))
                if u != src[-1]:                    # the only edge into op j so far
                    src.append(u)
                    dst.append(j)
        layers.append((first, width))
    j = len(names)
    names.append("output")
    gpu.append(0.1)
    a, w = layers[-1]
    src.extend(range(a, a + w))
    dst.extend([j] * w)
    return names, gpu, src, dst, joins


SAMPLES: dict[str, Callable[..., OpGraph]] = {
    "diamond": diamond,
    "pesto_fig2": pesto_fig2,
    "two_branch": two_branch,
    "cnn": cnn,
    "inception": inception,
    "transformer": transformer,
    "lstm": lstm_grid,
    "random": random_dag,
    "layered": lambda n_ops=300, **kw: layered(n_ops, **kw),
}
"""Name -> factory. Generators take ``n_ops`` as first argument."""


def load_sample(name: str, **kwargs) -> OpGraph:
    """A bundled sample by name: a generator from :data:`SAMPLES`, or a JSON file in
    ``sample_graphs/`` (without extension).

    >>> load_sample("cnn", n_ops=50).n_ops
    50
    >>> load_sample("nope")
    Traceback (most recent call last):
    ...
    workbench.errors.GraphError: unknown sample 'nope'; known: diamond, pesto_fig2, two_branch, cnn, inception, transformer, lstm, random, layered (and files in sample_graphs/: ...)
    """
    if not isinstance(name, str):
        raise GraphError(f"sample name must be a string, got {name!r}")
    if name in SAMPLES:
        import inspect

        params = inspect.signature(SAMPLES[name]).parameters
        for k in kwargs:
            if k not in params:
                what = ("does not take a size" if k == "n_ops" else f"has no parameter {k!r}")
                raise GraphError(f"sample {name!r} {what}; its parameters: "
                                 f"{', '.join(params) or 'none'}")
        return SAMPLES[name](**kwargs)
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "sample_graphs"
    for ext in (".json", ".json.gz") if name and "/" not in name and "\\" not in name else ():
        p = root / (name + ext)
        if p.exists():
            if kwargs:
                raise GraphError(f"sample {name!r} is a file of sample_graphs/ and does not "
                                 f"take {', '.join(kwargs)} (e.g. a size)")
            from .io import load_graph

            return load_graph(p)
    files = sorted(p.name.split(".")[0] for p in root.glob("*.json*")) if root.exists() else []
    raise GraphError(f"unknown sample {name!r}; known: {', '.join(SAMPLES)} (and files in "
                     f"sample_graphs/: {', '.join(files) or '...'})")
