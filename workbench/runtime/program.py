"""A training step ready to run: :class:`Program` (GraphDef, train / init / loss nodes, the
step's nodes, output sizes, resource edges), :func:`finish_program` that makes one from a
``tf.Graph``, and :func:`step_dag`, the dependency DAG of its step nodes.

This is the bottom of the runtime's program layer: :mod:`~workbench.runtime.extraction`
(model builders, Keras dispatch), :mod:`~workbench.runtime.keras_step` (Keras models and
``tf.function`` steps) and :mod:`~workbench.runtime.runner` all import it, and it imports none
of them, so every import among them goes one way.

>>> from workbench.runtime.program import _input_name
>>> _input_name("^train"), _input_name("dense/MatMul:1"), _input_name("x")
(('train', -1, True), ('dense/MatMul', 1, False), ('x', 0, False))
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from ._tf import tf

__all__ = ["Program", "finish_program", "step_dag"]


@dataclass
class Program:
    """One training step as a GraphDef plus what is needed to run it.

    Attributes
    ----------
    graph_def : tensorflow GraphDef
        All nodes: the step, the variable initialisers and ``init``.
    train_op, init_op, loss : str
        Node names of the step's target, the initialiser and the loss.
    step_nodes : tuple of str
        The nodes the train op depends on (the ops of the extracted OpGraph), GraphDef order.
    out_bytes : dict
        Node name -> list of output tensor sizes in bytes (0 for resources / unknown shapes).
    resource_edges : list of (src, dst)
        Edges that carry a resource handle (both ends must share a device).
    spec : dict
        How to rebuild the program (``model``, ``batch``, ``sizes``, ``seed``, ``lr``; or
        ``keras`` and its settings, see :mod:`~workbench.runtime.keras_step`); empty ``model``
        and a ``key`` for a program built from a user function or model (this process only).
    init_feed : dict
        Tensor name -> value fed when running ``init_op`` (the initial values of a Keras
        model's variables and of the input batch).
    kinds, layers : dict, optional
        Node -> op kind and node -> Keras layer, where the node names do not tell (programs of
        ``tf.function`` steps); None for programs built by :func:`build_program`.
    """

    graph_def: Any
    train_op: str
    init_op: str
    loss: str
    step_nodes: tuple
    out_bytes: dict
    resource_edges: list
    spec: dict = field(default_factory=dict)
    unknown_shapes: int = 0
    init_feed: dict = field(default_factory=dict)
    kinds: dict | None = None
    layers: dict | None = None

    @property
    def nodes(self) -> dict:
        """Node name -> NodeDef."""
        return {n.name: n for n in self.graph_def.node}


def _input_name(s: str) -> tuple[str, int, bool]:
    """Parse a NodeDef input ``name[:k]`` or ``^name`` -> (node, output index, is_control)."""
    if s.startswith("^"):
        return s[1:], -1, True
    if ":" in s:
        node, k = s.rsplit(":", 1)
        return node, int(k), False
    return s, 0, False


def finish_program(graph, train_op: str, init_op: str, loss: str, spec: dict, *,
                   init_feed: dict | None = None) -> Program:
    """The :class:`Program` of a ``tf.Graph`` holding a training step: output sizes, the
    step's nodes (closure of ``train_op`` over data and control inputs) and resource edges."""
    t = tf()
    out_bytes: dict = {}
    unknown = 0
    for op in graph.get_operations():
        sizes_out = []
        for o in op.outputs:
            if o.dtype == t.resource or o.dtype == t.variant:
                sizes_out.append(0)
                continue
            n = o.shape.num_elements() if o.shape.rank is not None else None
            if n is None:
                unknown += 1
                sizes_out.append(0)
            else:
                sizes_out.append(int(n) * int(o.dtype.size))
        out_bytes[op.name] = sizes_out
    gd = graph.as_graph_def()
    nodes = {n.name: n for n in gd.node}
    # closure of the train op over data and control inputs
    seen: set = set()
    stack = [train_op]
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        for s in nodes[v].input:
            stack.append(_input_name(s)[0])
    step = tuple(n.name for n in gd.node if n.name in seen)
    res_edges = []
    for op in graph.get_operations():
        for inp in op.inputs:
            if inp.dtype == t.resource:
                res_edges.append((inp.op.name, op.name))
    return Program(gd, train_op, init_op, loss, step, out_bytes, res_edges, spec, unknown,
                   dict(init_feed or {}))


def step_dag(program: Program) -> nx.DiGraph:
    """The dependency DAG (data and control inputs) of the program's step nodes."""
    nodes = program.nodes
    G = nx.DiGraph()
    G.add_nodes_from(program.step_nodes)
    step = set(program.step_nodes)
    for v in program.step_nodes:
        for s in nodes[v].input:
            u = _input_name(s)[0]
            if u in step:
                G.add_edge(u, v)
    return G
