"""The operator graph: a validated, immutable DAG of operators with costs.

Units are milliseconds for time and bytes for sizes throughout the workbench.

Node attributes
    ``compute``  dict device-kind -> ms (a missing kind means the op cannot run there)
    ``memory``   bytes resident on the device that holds the op (default 0)
    ``kind``     ``"fwd"``, ``"bwd"``, ``"update"`` or ``"other"`` (default ``"fwd"``)
    ``colocate`` colocation group id (ops of one group must share a device) or ``None``
    ``op_type``  free-form operator type, e.g. ``"MatMul"`` (default ``""``)
    ``splits``   dict dimension-name -> size, the dimensions an op may be split along
Edge attributes
    ``bytes``    size of the tensor carried (default 0)
    ``comm``     optional fixed transfer time in ms that overrides the cluster's link model

Ops are numbered in a fixed topological order: ``graph.index[op]`` is the op's position, and every
edge goes from a lower to a higher index. ``graph.c`` holds the compiled numpy arrays that solvers
use in their hot loops.

Examples
--------
>>> from workbench.graph import OpGraph
>>> g = OpGraph.from_ops(
...     [("a", {"compute": {"gpu": 1.0}}), ("b", {"compute": {"gpu": 2.0, "cpu": 8.0}})],
...     [("a", "b", {"bytes": 4e6})], name="tiny")
>>> g.ops, g.n_edges
(['a', 'b'], 1)
>>> g.c.compute[:, g.c.kind_index["gpu"]].tolist()
[1.0, 2.0]
>>> g.successors("a")
['b']
"""

from __future__ import annotations

import copy
import hashlib
import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Iterable, Iterator, Mapping

import networkx as nx
import numpy as np

from .errors import GraphError

__all__ = ["OpGraph", "CompiledGraph", "OP_KINDS", "MAX_OPS"]

MAX_OPS = 2_000_000
"""Most ops a graph may have (a bound on memory and time; about 4 GB of Python objects)."""

OP_KINDS = ("fwd", "bwd", "update", "other")
_KIND_CODE = {k: i for i, k in enumerate(OP_KINDS)}
_STD_NODE = frozenset({"compute", "memory", "kind", "colocate", "op_type", "splits"})


def _check_name(name: Any, what: str) -> str:
    """``name`` as a str that is valid Unicode (no lone surrogates), else a GraphError."""
    name = str(name)
    try:
        name.encode()
    except UnicodeEncodeError:
        raise GraphError(f"{what} {name!r} is not valid Unicode (it holds a lone surrogate)") \
            from None
    return name


def _number(value: Any, what: str) -> float:
    """Return ``value`` as a finite non-negative float or raise a GraphError naming ``what``."""
    if isinstance(value, (bool, str, bytes)) or value is None:
        raise GraphError(f"{what} is not a number: {value!r}")
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        raise GraphError(f"{what} is not a number: {value!r}") from None
    if math.isnan(x):
        raise GraphError(f"{what} is NaN")
    if math.isinf(x):
        raise GraphError(f"{what} is infinite")
    if x < 0:
        raise GraphError(f"{what} is negative ({x:g})")
    return x


@dataclass(frozen=True, eq=False)
class CompiledGraph:
    """Numpy form of an :class:`OpGraph`, built once and shared by every solver.

    Ops are indexed ``0..n-1`` in topological order, edges ``0..m-1`` sorted by (src, dst).
    ``compute[i, k]`` is the time of op ``i`` on device kind ``kinds[k]`` (``inf`` = not runnable).
    ``succ_ptr/succ_edge`` and ``pred_ptr/pred_edge`` are CSR adjacency over edge ids;
    ``succ``/``pred`` are the same as Python lists of op indices for pure-Python loops.
    ``comm`` holds the fixed transfer time of an edge or ``nan`` where the link model applies.
    """

    n: int
    m: int
    names: tuple
    index: dict
    kinds: tuple
    kind_index: dict
    compute: np.ndarray
    memory: np.ndarray
    op_kind: np.ndarray
    coloc: np.ndarray
    coloc_groups: tuple
    src: np.ndarray
    dst: np.ndarray
    bytes: np.ndarray
    comm: np.ndarray
    succ_ptr: np.ndarray
    succ_edge: np.ndarray
    pred_ptr: np.ndarray
    pred_edge: np.ndarray
    succ: tuple
    pred: tuple
    out_edges: tuple
    in_edges: tuple

    def min_compute(self) -> np.ndarray:
        """Fastest time of each op over the device kinds it can run on."""
        return self.compute.min(axis=1)


class OpGraph:
    """An immutable, validated operator DAG.

    Parameters
    ----------
    graph : networkx.DiGraph
        Nodes carry the attributes listed in the module docstring. The graph is copied and
        frozen; node names are converted to ``str``.
    name : str
        A label shown in tables and reports.
    meta : dict, optional
        Free-form provenance (model, batch size, profiling device, TF version, ...).

    Raises
    ------
    GraphError
        On a cycle (the message lists one), a node without compute costs (e.g. the end of a
        dangling edge), a NaN/negative/infinite cost, an unknown op kind, or a malformed field.

    Examples
    --------
    >>> import networkx as nx
    >>> G = nx.DiGraph()
    >>> G.add_node("x", compute={"gpu": 1})
    >>> G.add_node("y", compute={"gpu": 1})
    >>> G.add_edges_from([("x", "y"), ("y", "x")])
    >>> OpGraph(G)
    Traceback (most recent call last):
    ...
    workbench.errors.GraphError: graph 'graph' has a cycle: x -> y -> x
    """

    def __init__(self, graph: nx.DiGraph, *, name: str = "graph", meta: Mapping | None = None):
        if not isinstance(graph, nx.DiGraph) or graph.is_multigraph():
            raise GraphError("OpGraph needs a networkx.DiGraph (not a multigraph)")
        if graph.number_of_nodes() > MAX_OPS:
            raise GraphError(f"graph {name!r} has {graph.number_of_nodes()} ops; at most "
                             f"{MAX_OPS} are supported")
        if any(not isinstance(v, str) for v in graph.nodes):
            seen: dict = {}
            for v in graph.nodes:
                s = str(v)
                if s in seen:
                    raise GraphError(f"nodes {seen[s]!r} and {v!r} both become op {s!r} (op "
                                     f"names are strings); rename one of them")
                seen[s] = v
            graph = nx.relabel_nodes(graph, {v: str(v) for v in graph.nodes}, copy=True)
        if meta is not None and not isinstance(meta, Mapping):
            raise GraphError(f"graph {name!r}: meta must be a dict, got {type(meta).__name__}")
        self.name = _check_name(name, "graph name")
        self.meta = dict(meta or {})
        self._g = self._validated_copy(graph)
        order = self._topological_order(self._g)
        self._ops: list[str] = order
        self.index: dict[str, int] = {v: i for i, v in enumerate(order)}
        nx.freeze(self._g)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_ops(
        cls,
        ops: Iterable,
        edges: Iterable = (),
        *,
        name: str = "graph",
        meta: Mapping | None = None,
    ) -> "OpGraph":
        """Build a graph from ``(name, attrs)`` pairs and ``(src, dst[, attrs])`` edges.

        Unlike adding edges to a networkx graph directly, an edge that names an op not in
        ``ops`` is reported as dangling.

        >>> OpGraph.from_ops([("a", {"compute": {"gpu": 1}})], [("a", "zz")])
        Traceback (most recent call last):
        ...
        workbench.errors.GraphError: edge a -> zz refers to unknown op 'zz'
        """
        G = nx.DiGraph()
        for item in ops:
            if isinstance(item, str):
                raise GraphError(f"op {item!r} has no attributes (it needs at least 'compute')")
            if not isinstance(item, (tuple, list)) or len(item) != 2:
                raise GraphError(f"op {item!r} must be a pair (name, attrs)")
            op, attrs = item
            if not isinstance(op, (str, int)) or isinstance(op, bool):
                raise GraphError(f"op name {op!r} must be a string")
            op = str(op)
            if not isinstance(attrs, Mapping):
                raise GraphError(f"op {op!r}: attributes must be a dict (e.g. {{'compute': "
                                 f"{{'gpu': 1.0}}}}), got {attrs!r}")
            if op in G:
                raise GraphError(f"op {op!r} is defined twice")
            if any(not isinstance(k, str) for k in attrs):
                raise GraphError(f"op {op!r}: attribute names must be strings")
            G.add_node(op, **attrs)
        for e in edges:
            if not isinstance(e, (tuple, list)):
                raise GraphError(f"edge {e!r} must be (src, dst) or (src, dst, attrs)")
            if len(e) == 2:
                u, v, attrs = e[0], e[1], {}
            elif len(e) == 3:
                u, v, attrs = e
            else:
                raise GraphError(f"edge {e!r} must be (src, dst) or (src, dst, attrs)")
            if attrs is not None and not isinstance(attrs, Mapping):
                raise GraphError(f"edge {u} -> {v}: attributes must be a dict, got {attrs!r}")
            u, v = str(u), str(v)
            for end in (u, v):
                if end not in G:
                    raise GraphError(f"edge {u} -> {v} refers to unknown op {end!r}")
            if G.has_edge(u, v):
                raise GraphError(f"edge {u} -> {v} is given twice")
            G.add_edge(u, v, **dict(attrs or {}))
        return cls(G, name=name, meta=meta)

    @classmethod
    def from_arrays(
        cls,
        names,
        compute: Mapping,
        src=(),
        dst=(),
        *,
        memory=None,
        nbytes=None,
        kind="fwd",
        op_type="",
        splits=None,
        colocate=None,
        comm=None,
        attrs: Mapping | None = None,
        edge_attrs: Mapping | None = None,
        name: str = "graph",
        meta: Mapping | None = None,
    ) -> "OpGraph":
        """Build a graph from arrays, validated in bulk: the path of large generated graphs.

        The graph equals ``from_ops`` of the same ops (listed in ``names`` order) and edges.
        When every edge goes from a lower to a higher index (``src < dst``), that order is the
        graph's topological order, and the networkx form (:attr:`nx`, :meth:`op`) is built only
        when first asked for; otherwise the graph is built through networkx as ``from_ops`` does.

        Parameters
        ----------
        names : sequence of str
            The n op names.
        compute : dict
            Device kind -> n compute times in ms; ``nan`` where the op cannot run on that kind.
        src, dst : sequences of int
            The m edges as op indices into ``names``.
        memory : n bytes, optional (0)
        nbytes : m bytes, optional (0)
        kind, op_type : str or n strings
        splits : None, or n dicts (or None) dimension -> size
        colocate : None, or n colocation group ids (str, int or None)
        comm : m fixed transfer times in ms, optional (``nan``: none, the default)
        attrs, edge_attrs : dict, optional
            Op index (edge index) -> a dict of further attributes of that op (edge), beyond
            the ones above (e.g. the ``replica`` of an all-reduce op).

        Raises
        ------
        GraphError
            A malformed array, a duplicate name or edge, an edge out of range, a self-loop, a
            NaN (every kind), infinite or negative cost, naming the op or edge.

        Examples
        --------
        >>> g = OpGraph.from_arrays(["a", "b"], {"gpu": [1.0, 2.0], "cpu": [float("nan"), 8.0]},
        ...                         [0], [1], nbytes=[4e6], name="tiny")
        >>> g.op("a")["compute"], g.edge("a", "b")["bytes"], g.n_edges
        ({'gpu': 1.0}, 4000000.0, 1)
        >>> h = OpGraph.from_arrays(["a", "b"], {"gpu": [1.0, 2.0]}, [0], [1], comm=[0.5],
        ...                         attrs={1: {"replica": 0}}, edge_attrs={0: {"batch": False}})
        >>> h.op("b")["replica"], h.op_values("replica"), h.edge("a", "b")
        (0, [None, 0], {'bytes': 0.0, 'comm': 0.5, 'batch': False})
        >>> OpGraph.from_arrays(["a", "b"], {"gpu": [1.0, -2.0]})
        Traceback (most recent call last):
        ...
        workbench.errors.GraphError: op 'b': compute time on 'gpu' is negative (-2)
        """
        names = list(names)
        n = len(names)
        if n > MAX_OPS:
            raise GraphError(f"graph {name!r} has {n} ops; at most {MAX_OPS} are supported")
        if any(not isinstance(v, str) for v in names):
            bad = next(v for v in names if not isinstance(v, str))
            raise GraphError(f"op name {bad!r} must be a string")
        try:
            "".join(names).encode()
        except UnicodeEncodeError:
            names = [_check_name(v, "op name") for v in names]
        index = {v: i for i, v in enumerate(names)}
        if len(index) != n:
            seen: set = set()
            dup = next(v for v in names if v in seen or seen.add(v))
            raise GraphError(f"op {dup!r} is defined twice")
        kinds, cols = _array_compute(names, compute)
        mem = _array_numbers(memory, n, lambda i: f"op {names[i]!r}", "memory")
        s, d = _array_edges(src, dst, names)
        nb = _array_numbers(nbytes, len(s), lambda j: f"edge {names[s[j]]} -> {names[d[j]]}",
                            "bytes")
        cm = np.full(len(s), np.nan) if comm is None else _floats(comm, len(s), "comm")
        _first_bad(cm, lambda j: f"edge {names[s[j]]} -> {names[d[j]]}: comm", allow_nan=True)
        extra = (_array_extra(attrs, n, tuple(sorted(_STD_NODE)), "op"),
                 _array_extra(edge_attrs, len(s), ("bytes", "comm"), "edge"))
        kind_l = _array_strings(kind, n, "kind")
        for k in set(kind_l):
            if k not in _KIND_CODE:
                v = names[kind_l.index(k)]
                raise GraphError(f"op {v!r}: kind {k!r} is not one of {', '.join(OP_KINDS)}")
        type_l = _array_strings(op_type, n, "op_type")
        split_l = _array_splits(splits, names)
        coloc_l, coloc, groups = _array_colocate(colocate, names)
        if n and len(s) and not bool(np.all(s < d)):
            G = nx.DiGraph()
            cl = [np.where(np.isnan(col), np.inf, col).tolist() for col in cols]
            ml = mem.tolist()
            for i, v in enumerate(names):
                G.add_node(v, **_node_attrs(i, kinds, cl, ml, kind_l, type_l, split_l,
                                            coloc_l), **extra[0].get(i, {}))
            for j in range(len(s)):
                G.add_edge(names[s[j]], names[d[j]], bytes=float(nb[j]),
                           comm=None if np.isnan(cm[j]) else float(cm[j]), **extra[1].get(j, {}))
            return cls(G, name=name, meta=meta)
        self = cls.__new__(cls)
        if meta is not None and not isinstance(meta, Mapping):
            raise GraphError(f"graph {name!r}: meta must be a dict, got {type(meta).__name__}")
        self.name = _check_name(name, "graph name")
        self.meta = dict(meta or {})
        self._ops = names
        self.index = index
        self._cols = (kinds, kind_l, type_l, split_l, coloc_l, s, d, nb)
        self._extra = (*extra, cm)
        sk = sorted(kinds)
        comp = np.full((n, len(sk)), np.inf)
        for k, col in zip(kinds, cols):
            comp[:, sk.index(k)] = np.where(np.isnan(col), np.inf, col)
        op_kind = np.fromiter((_KIND_CODE[k] for k in kind_l), dtype=np.int8, count=n)
        self.__dict__["c"] = _compile(
            tuple(names), index, sk, comp, mem, op_kind, coloc, groups, s, d, nb, cm)
        return self

    @cached_property
    def _g(self) -> nx.DiGraph:
        """The networkx form of a graph built by :meth:`from_arrays`, made on first use."""
        kinds, kind_l, type_l, split_l, coloc_l, s, d, nb = self._cols
        node_x, edge_x, cm = self._extra
        c, names = self.c, self._ops
        cols = [c.compute[:, c.kind_index[k]].tolist() for k in kinds]
        mem = c.memory.tolist()
        G = nx.DiGraph()
        G.add_nodes_from((v, {**_node_attrs(i, kinds, cols, mem, kind_l, type_l, split_l,
                                            coloc_l), **node_x.get(i, {})})
                         for i, v in enumerate(names))
        cm = [None if math.isnan(x) else x for x in cm.tolist()]
        G.add_edges_from((names[u], names[v], {"bytes": b, "comm": cm[j], **edge_x.get(j, {})})
                         for j, (u, v, b) in enumerate(zip(s.tolist(), d.tolist(),
                                                           nb.tolist())))  # the order given
        nx.freeze(G)
        return G

    @staticmethod
    def _validated_copy(graph: nx.DiGraph) -> nx.DiGraph:
        G = nx.DiGraph()
        for op, a in graph.nodes(data=True):
            _check_name(op, "op name")
            comp = a.get("compute")
            if comp is None:
                raise GraphError(
                    f"op {op!r} has no 'compute' costs (an edge to an undefined op creates such "
                    f"a node)")
            if not isinstance(comp, Mapping) or not comp:
                raise GraphError(f"op {op!r}: 'compute' must be a non-empty dict kind -> ms")
            compute = {}
            for kind, t in comp.items():
                if not isinstance(kind, str) or not kind:
                    raise GraphError(f"op {op!r}: device kind {kind!r} is not a non-empty string")
                compute[kind] = _number(t, f"op {op!r}: compute time on {kind!r}")
            memory = _number(a.get("memory", 0.0), f"op {op!r}: memory")
            kind = a.get("kind", "fwd")
            if not isinstance(kind, str) or kind not in _KIND_CODE:
                raise GraphError(f"op {op!r}: kind {kind!r} is not one of {', '.join(OP_KINDS)}")
            coloc = a.get("colocate")
            if isinstance(coloc, np.integer):
                coloc = int(coloc)
            if coloc is not None and (isinstance(coloc, bool) or
                                      not isinstance(coloc, (str, int))):
                raise GraphError(f"op {op!r}: colocate must be a str/int group id or None, "
                                 f"got {coloc!r}")
            op_type = a.get("op_type", "") or ""
            if not isinstance(op_type, str):
                raise GraphError(f"op {op!r}: op_type must be a string, got {op_type!r}")
            splits = a.get("splits") or {}
            if not isinstance(splits, Mapping):
                raise GraphError(f"op {op!r}: 'splits' must be a dict dimension -> size")
            for dim, size in splits.items():
                if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
                    raise GraphError(
                        f"op {op!r}: split dimension {dim!r} has size {size!r}, "
                        f"expected a positive integer")
            attrs = {k: v for k, v in a.items()}
            attrs.update(compute=compute, memory=memory, kind=kind, colocate=coloc,
                         op_type=op_type,
                         splits={str(d): int(s) for d, s in splits.items()})
            G.add_node(op, **attrs)
        for u, v, a in graph.edges(data=True):
            if u == v:
                raise GraphError(f"graph has a self-loop on op {u!r} (a cycle)")
            nbytes = _number(a.get("bytes", 0.0), f"edge {u} -> {v}: bytes")
            comm = a.get("comm")
            attrs = dict(a)
            attrs["bytes"] = nbytes
            attrs["comm"] = None if comm is None else _number(comm, f"edge {u} -> {v}: comm")
            G.add_edge(u, v, **attrs)
        return G

    def _topological_order(self, G: nx.DiGraph) -> list[str]:
        position = {v: i for i, v in enumerate(G.nodes)}
        try:
            return list(nx.lexicographical_topological_sort(G, key=position.__getitem__))
        except nx.NetworkXUnfeasible:
            cycle = nx.find_cycle(G)
            path = " -> ".join(str(u) for u, _ in cycle) + f" -> {cycle[0][0]}"
            raise GraphError(f"graph {self.name!r} has a cycle: {path}") from None

    # ------------------------------------------------------------------ basic queries
    @property
    def ops(self) -> list[str]:
        """Op names in the graph's fixed topological order."""
        return list(self._ops)

    @property
    def nx(self) -> nx.DiGraph:
        """The frozen networkx graph (read-only; use :meth:`to_networkx` for a copy)."""
        return self._g

    def to_networkx(self) -> nx.DiGraph:
        """A mutable copy of the underlying networkx graph."""
        return nx.DiGraph(self._g)

    @property
    def n_ops(self) -> int:
        return len(self._ops)

    @property
    def n_edges(self) -> int:
        return self._g.number_of_edges() if "_g" in self.__dict__ else self.c.m

    def __len__(self) -> int:
        return len(self._ops)

    def __iter__(self) -> Iterator[str]:
        return iter(self._ops)

    def __contains__(self, op: object) -> bool:
        return op in self.index

    def __repr__(self) -> str:
        return f"OpGraph({self.name!r}, {self.n_ops} ops, {self.n_edges} edges)"

    def op(self, name: str) -> dict:
        """The attributes of op ``name`` (a deep copy: the graph is immutable).

        >>> from workbench import samples
        >>> g = samples.diamond()
        >>> g.op("b")["compute"]
        {'gpu': 2.0, 'cpu': 8.0}
        >>> g.op("b")["compute"]["gpu"] = 99.0
        >>> g.op("b")["compute"]["gpu"]
        2.0
        """
        self._check_op(name)
        return copy.deepcopy(dict(self._g.nodes[name]))

    def op_values(self, key: str, default: Any = None) -> list:
        """Every op's attribute ``key`` (``default`` where it has none), in topological order;
        a graph made by :meth:`from_arrays` answers without building its networkx form.

        >>> from workbench import samples
        >>> samples.two_branch().op_values("op_type")[:2], samples.diamond().op_values("x", 0)
        (['Placeholder', 'Conv2D'], [0, 0, 0, 0])
        """
        cols = self.__dict__.get("_cols")
        if cols is not None and "_g" not in self.__dict__:
            kind_l, type_l, coloc_l = cols[1], cols[2], cols[4]
            if key == "op_type":
                return list(type_l)
            if key == "kind":
                return list(kind_l)
            if key == "colocate":
                return list(coloc_l) if coloc_l is not None else [None] * len(self._ops)
            if key == "memory":
                return self.c.memory.tolist()
            if key == "splits":
                return _splits_values(cols[3], len(self._ops))
            if key != "compute":                     # the sparse further attributes
                node_x = self._extra[0]
                if not node_x:
                    return [default] * len(self._ops)
                return [node_x[i].get(key, default) if i in node_x else default
                        for i in range(len(self._ops))]
        nodes = self._g.nodes
        return [nodes[v].get(key, default) for v in self._ops]

    def edge(self, u: str, v: str) -> dict:
        """The attributes of edge ``u -> v`` (a deep copy)."""
        if not isinstance(u, str) or not isinstance(v, str) or not self._g.has_edge(u, v):
            raise GraphError(f"no edge {u} -> {v} in graph {self.name!r}")
        return copy.deepcopy(dict(self._g.edges[u, v]))

    def edges(self) -> list[tuple[str, str]]:
        """All edges as (src, dst) pairs, ordered by the topological index of src then dst."""
        c = self.c
        return [(c.names[s], c.names[d]) for s, d in zip(c.src.tolist(), c.dst.tolist())]

    def further_attributes(self) -> tuple[dict, dict]:
        """The attributes beyond the standard ones (module docstring): ``(op index -> dict,
        (src index, dst index) -> dict)``, only ops and edges that have any; a graph made by
        :meth:`from_arrays` answers without building its networkx form.

        >>> g = OpGraph.from_ops([("a", {"compute": {"gpu": 1}, "shapes": [[2]]}),
        ...                       ("b", {"compute": {"gpu": 1}})], [("a", "b", {"batch": False})])
        >>> g.further_attributes()
        ({0: {'shapes': [[2]]}}, {(0, 1): {'batch': False}})
        """
        if "_cols" in self.__dict__ and "_g" not in self.__dict__:
            node_x, edge_x, _cm = self._extra
            s, d = self._cols[5], self._cols[6]
            return ({i: dict(a) for i, a in node_x.items()},
                    {(int(s[j]), int(d[j])): dict(a) for j, a in edge_x.items()})
        std, idx = _STD_NODE, self.index
        nodes = {idx[v]: x for v, a in self._g.nodes(data=True)
                 if (x := {k: a[k] for k in a if k not in std})}
        edges = {(idx[u], idx[v]): x for u, v, a in self._g.edges(data=True)
                 if (x := {k: a[k] for k in a if k not in ("bytes", "comm")})}
        return nodes, edges

    def _check_op(self, name: str) -> None:
        if not isinstance(name, str) or name not in self.index:
            raise GraphError(f"op {name!r} is not in graph {self.name!r}")

    def predecessors(self, op: str) -> list[str]:
        self._check_op(op)
        c = self.c
        return [c.names[u] for u in c.pred[self.index[op]]]

    def successors(self, op: str) -> list[str]:
        self._check_op(op)
        c = self.c
        return [c.names[v] for v in c.succ[self.index[op]]]

    def topological_order(self) -> list[str]:
        """Same as :attr:`ops`: the graph's fixed topological order."""
        return self.ops

    def sources(self) -> list[str]:
        c = self.c
        return [c.names[i] for i in np.flatnonzero(np.diff(c.pred_ptr) == 0).tolist()]

    def sinks(self) -> list[str]:
        c = self.c
        return [c.names[i] for i in np.flatnonzero(np.diff(c.succ_ptr) == 0).tolist()]

    @property
    def device_kinds(self) -> tuple[str, ...]:
        """Device kinds named by any op's compute costs (sorted)."""
        return self.c.kinds

    @property
    def colocation_groups(self) -> dict:
        """Group id -> list of member ops (topological order)."""
        c = self.c
        groups: dict = {}
        for i in np.flatnonzero(c.coloc >= 0).tolist():
            groups.setdefault(c.coloc_groups[c.coloc[i]], []).append(c.names[i])
        return groups

    def is_training(self) -> bool:
        """True when the graph has backward or update ops."""
        return bool(np.any(self.c.op_kind != _KIND_CODE["fwd"]) and
                    np.any((self.c.op_kind == 1) | (self.c.op_kind == 2)))

    # ------------------------------------------------------------------ totals
    def total_compute(self, kind: str | None = None) -> float:
        """Sum of compute times: on device kind ``kind``, or of each op's fastest kind.

        >>> from workbench import samples
        >>> samples.diamond().total_compute("gpu")
        6.0
        """
        c = self.c
        if kind is None:
            return float(c.min_compute().sum())
        if kind not in c.kind_index:
            raise GraphError(f"no op of graph {self.name!r} runs on device kind {kind!r}")
        col = c.compute[:, c.kind_index[kind]]
        if np.isinf(col).any():
            bad = c.names[int(np.argmax(np.isinf(col)))]
            raise GraphError(f"op {bad!r} cannot run on device kind {kind!r}")
        return float(col.sum())

    def total_memory(self) -> float:
        return float(self.c.memory.sum())

    def total_bytes(self) -> float:
        return float(self.c.bytes.sum())

    def ccr(self, cluster=None, *, bandwidth: float | None = None, latency: float = 0.0) -> float:
        """Communication-to-computation ratio: total edge transfer time / total compute time.

        Transfer time of an edge is its fixed ``comm`` when given, else ``latency + bytes /
        bandwidth`` (bytes per ms); with a ``cluster`` its mean link between distinct devices is
        used. Compute is each op's fastest time.

        >>> from workbench import samples
        >>> g = samples.diamond()
        >>> round(g.ccr(bandwidth=1e7), 3)
        0.667
        """
        c = self.c
        if cluster is not None:
            latency, bandwidth = cluster.mean_link()
        t = np.where(np.isnan(c.comm), 0.0, c.comm)
        if bandwidth is not None:
            linkt = latency + c.bytes / float(bandwidth)
            t = np.where(np.isnan(c.comm), linkt, c.comm)
        work = float(c.min_compute().sum())
        return float(t.sum()) / work if work > 0 else math.inf

    # ------------------------------------------------------------------ identity
    @cached_property
    def fingerprint(self) -> str:
        """A short hash of the op names and edges, used to check a plan fits this graph."""
        h = hashlib.sha1()
        for v in sorted(self._ops):
            h.update(v.encode())
            h.update(b"\0")
        c = self.c
        names = c.names
        for u, v in sorted(zip(map(names.__getitem__, c.src.tolist()),
                               map(names.__getitem__, c.dst.tolist()))):
            h.update(f"{u}\1{v}\0".encode())
        return h.hexdigest()[:16]

    def with_name(self, name: str) -> "OpGraph":
        return OpGraph(self._g, name=name, meta=self.meta)

    def map_ops(self, fn) -> "OpGraph":
        """A new graph whose op attributes are ``fn(op, attrs) -> attrs`` (edges kept).

        >>> from workbench import samples
        >>> g = samples.diamond().map_ops(lambda op, a: {**a, "memory": 1.0})
        >>> g.total_memory()
        4.0
        """
        G = nx.DiGraph()
        for v in self._ops:
            G.add_node(v, **fn(v, dict(self._g.nodes[v])))
        G.add_edges_from((u, v, dict(a)) for u, v, a in self._g.edges(data=True))
        return OpGraph(G, name=self.name, meta=self.meta)

    # ------------------------------------------------------------------ compiled form
    @cached_property
    def c(self) -> CompiledGraph:
        """The compiled numpy arrays (computed once)."""
        G, names, index = self._g, tuple(self._ops), self.index
        n = len(names)
        nodes = G.nodes
        kinds = sorted({k for v in names for k in nodes[v]["compute"]})
        kidx = {k: i for i, k in enumerate(kinds)}
        compute = np.full((n, len(kinds)), np.inf)
        memory = np.empty(n)
        op_kind = np.empty(n, dtype=np.int8)
        coloc = np.full(n, -1, dtype=np.int64)
        groups: dict = {}
        for i, v in enumerate(names):
            a = nodes[v]
            for k, t in a["compute"].items():
                compute[i, kidx[k]] = t
            memory[i] = a["memory"]
            op_kind[i] = _KIND_CODE[a["kind"]]
            g = a["colocate"]
            if g is not None:
                coloc[i] = groups.setdefault(g, len(groups))
        m = G.number_of_edges()
        src = np.empty(m, dtype=np.int64)
        dst = np.empty(m, dtype=np.int64)
        nbytes = np.empty(m)
        comm = np.empty(m)
        for j, (u, v, a) in enumerate(G.edges(data=True)):
            src[j] = index[u]
            dst[j] = index[v]
            nbytes[j] = a["bytes"]
            comm[j] = np.nan if a["comm"] is None else a["comm"]
        return _compile(names, index, kinds, compute, memory, op_kind, coloc, tuple(groups),
                        src, dst, nbytes, comm)


def _compile(names: tuple, index: dict, kinds, compute, memory, op_kind, coloc, groups: tuple,
             src, dst, nbytes, comm) -> CompiledGraph:
    """The :class:`CompiledGraph` of op arrays and unsorted edge arrays."""
    n, m = len(names), len(src)
    order = np.lexsort((dst, src))
    src, dst, nbytes, comm = src[order], dst[order], nbytes[order], comm[order]
    succ_ptr = np.zeros(n + 1, dtype=np.int64)
    np.add.at(succ_ptr, src + 1, 1)
    succ_ptr = np.cumsum(succ_ptr)
    succ_edge = np.arange(m, dtype=np.int64)
    pred_edge = np.lexsort((src, dst)).astype(np.int64)
    pred_ptr = np.zeros(n + 1, dtype=np.int64)
    np.add.at(pred_ptr, dst + 1, 1)
    pred_ptr = np.cumsum(pred_ptr)
    dst_l, src_by_dst = dst.tolist(), src[pred_edge].tolist()
    sp, pp, pe = succ_ptr.tolist(), pred_ptr.tolist(), pred_edge.tolist()
    out_edges = tuple(tuple(range(sp[i], sp[i + 1])) for i in range(n))
    in_edges = tuple(tuple(pe[pp[i]:pp[i + 1]]) for i in range(n))
    succ = tuple(tuple(dst_l[sp[i]:sp[i + 1]]) for i in range(n))
    pred = tuple(tuple(src_by_dst[pp[i]:pp[i + 1]]) for i in range(n))
    for arr in (compute, memory, op_kind, coloc, src, dst, nbytes, comm, succ_ptr,
                succ_edge, pred_ptr, pred_edge):
        arr.setflags(write=False)
    return CompiledGraph(
        n=n, m=m, names=names, index=index, kinds=tuple(kinds),
        kind_index={k: i for i, k in enumerate(kinds)}, compute=compute, memory=memory,
        op_kind=op_kind, coloc=coloc, coloc_groups=groups, src=src, dst=dst, bytes=nbytes,
        comm=comm, succ_ptr=succ_ptr, succ_edge=succ_edge, pred_ptr=pred_ptr,
        pred_edge=pred_edge, succ=succ, pred=pred, out_edges=out_edges, in_edges=in_edges)


# ---------------------------------------------------------------- bulk validation (from_arrays)
def _floats(values, count: int, what: str) -> np.ndarray:
    try:
        arr = np.array(values, dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise GraphError(f"{what} must be {count} numbers") from None
    if arr.shape != (count,):
        raise GraphError(f"{what} must be {count} numbers, got shape {arr.shape}")
    return arr


def _first_bad(arr: np.ndarray, label, allow_nan: bool = False) -> None:
    """Raise the GraphError of ``_number`` for the first NaN, infinite or negative value."""
    bad = np.isinf(arr) | (arr < 0)
    if not allow_nan:
        bad |= np.isnan(arr)
    if bad.any():
        i = int(np.argmax(bad))
        _number(float(arr[i]), label(i))


def _array_compute(names: list, compute) -> tuple[list, list]:
    if not isinstance(compute, Mapping) or not compute:
        raise GraphError("compute must be a non-empty dict device kind -> array of ms")
    n, kinds, cols = len(names), [], []
    for k, vals in compute.items():
        if not isinstance(k, str) or not k:
            raise GraphError(f"device kind {k!r} is not a non-empty string")
        col = _floats(vals, n, f"compute on {k!r}")
        _first_bad(col, lambda i: f"op {names[i]!r}: compute time on {k!r}", allow_nan=True)
        kinds.append(k)
        cols.append(col)
    none = np.logical_and.reduce([np.isnan(c) for c in cols])
    if none.any():
        raise GraphError(f"op {names[int(np.argmax(none))]!r} has no 'compute' costs")
    return kinds, cols


def _array_numbers(values, count: int, label, what: str) -> np.ndarray:
    if values is None:
        return np.zeros(count)
    arr = _floats(values, count, what)
    _first_bad(arr, lambda i: f"{label(i)}: {what}")
    return arr


def _array_edges(src, dst, names: list) -> tuple[np.ndarray, np.ndarray]:
    n = len(names)
    s, d = np.asarray(src), np.asarray(dst)
    if s.shape != d.shape or s.ndim != 1:
        raise GraphError(f"src and dst must be two sequences of the same length, got shapes "
                         f"{s.shape} and {d.shape}")
    if len(s) and (s.dtype.kind not in "iu" or d.dtype.kind not in "iu"):
        raise GraphError("src and dst must be op indices (integers)")
    s, d = s.astype(np.int64), d.astype(np.int64)
    out = (s < 0) | (s >= n) | (d < 0) | (d >= n)
    if out.any():
        j = int(np.argmax(out))
        raise GraphError(f"edge {j} ({int(s[j])} -> {int(d[j])}) refers to an op index outside "
                         f"0..{n - 1}")
    loop = s == d
    if loop.any():
        raise GraphError(f"graph has a self-loop on op {names[int(s[np.argmax(loop)])]!r} "
                         f"(a cycle)")
    key = np.sort(s * n + d)
    dup = key[1:] == key[:-1]
    if dup.any():
        k = int(key[int(np.argmax(dup))])
        raise GraphError(f"edge {names[k // n]} -> {names[k % n]} is given twice")
    return s, d


def _array_extra(extra, count: int, reserved: tuple, what: str) -> dict:
    """``attrs`` / ``edge_attrs`` of :meth:`OpGraph.from_arrays`, checked: index -> dict."""
    if extra is None:
        return {}
    if not isinstance(extra, Mapping):
        raise GraphError(f"{what} attributes must be a dict index -> dict")
    out = {}
    for i, a in extra.items():
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)) or not 0 <= i < count:
            raise GraphError(f"{what} attributes: index {i!r} is outside 0..{count - 1}")
        if not isinstance(a, Mapping) or any(not isinstance(k, str) or k in reserved
                                             for k in a):
            raise GraphError(f"{what} {i}: further attributes must be a dict with string "
                             f"names other than {', '.join(reserved)}")
        out[int(i)] = dict(a)
    return out


def _array_strings(value, n: int, what: str) -> list:
    if isinstance(value, str):
        return [value] * n
    out = list(value)
    if len(out) != n or any(type(x) is not str for x in out):
        raise GraphError(f"{what} must be a string or {n} strings")
    return out


def _array_splits(splits, names: list) -> list | None:
    if splits is None:
        return None
    out = list(splits)
    if len(out) != len(names):
        raise GraphError(f"splits must be {len(names)} dicts (or None)")
    seen: set = set()
    for i, sp in enumerate(out):
        if sp is None or id(sp) in seen:
            continue
        if not isinstance(sp, Mapping):
            raise GraphError(f"op {names[i]!r}: 'splits' must be a dict dimension -> size")
        for dim, size in sp.items():
            if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
                raise GraphError(f"op {names[i]!r}: split dimension {dim!r} has size {size!r}, "
                                 f"expected a positive integer")
        seen.add(id(sp))
    return out


def _array_colocate(colocate, names: list) -> tuple:
    """(group id per op or None, group index per op (-1: none), the groups in order of first
    appearance), as the compiled form numbers them."""
    n = len(names)
    coloc = np.full(n, -1, dtype=np.int64)
    if colocate is None:
        return None, coloc, ()
    out = [int(g) if isinstance(g, np.integer) else g for g in colocate]
    if len(out) != n:
        raise GraphError(f"colocate must be {n} group ids (or None)")
    groups: dict = {}
    for i, g in enumerate(out):
        if g is None:
            continue
        if isinstance(g, bool) or not isinstance(g, (str, int)):
            raise GraphError(f"op {names[i]!r}: colocate must be a str/int group id or None, "
                             f"got {g!r}")
        coloc[i] = groups.setdefault(g, len(groups))
    return out, coloc, tuple(groups)


def _splits_values(split_l: list | None, n: int) -> list:
    """Per op its ``splits`` as the networkx form holds them (each distinct dict once)."""
    if split_l is None:
        return [{} for _ in range(n)]
    made: dict = {}
    out = []
    for sp in split_l:
        if not sp:
            out.append({})
            continue
        d = made.get(id(sp))
        if d is None:
            d = made[id(sp)] = {str(k): int(x) for k, x in sp.items()}
        out.append(d)
    return out


def _node_attrs(i: int, kinds: list, cols: list, mem: list, kind_l: list, type_l: list,
                split_l: list | None, coloc_l: list | None) -> dict:
    """The attributes ``_validated_copy`` gives op ``i`` of a :meth:`OpGraph.from_arrays` graph
    (``cols``: lists with ``inf`` where the op cannot run)."""
    sp = split_l[i] if split_l is not None else None
    return {"compute": {k: col[i] for k, col in zip(kinds, cols) if col[i] != math.inf},
            "memory": mem[i], "kind": kind_l[i],
            "colocate": coloc_l[i] if coloc_l is not None else None, "op_type": type_l[i],
            "splits": {str(d): int(s) for d, s in sp.items()} if sp else {}}
