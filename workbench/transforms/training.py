"""The training step of a forward graph: a mirrored backward pass (and optional updates).

A stand-in for graphs that carry no backward pass of their own (hand-made samples, MSR
workloads); graphs captured from TensorFlow or PyTorch carry their real backward ops.
"""

from __future__ import annotations

import networkx as nx

from ..graph import OpGraph

__all__ = ["to_training"]


def to_training(graph: OpGraph, *, backward_factor: float = 2.0,
                update: bool = False) -> OpGraph:
    """Add a backward pass: each forward op ``v`` gets ``v/grad`` (``backward_factor`` times its
    compute) colocated with it; edges are mirrored (``u -> v`` gives ``v/grad -> u/grad``) and each
    forward op feeds its own gradient (the stashed activation). With ``update=True`` ops holding
    memory (weights) also get an ``update`` op.

    >>> from workbench.samples import diamond
    >>> g = to_training(diamond())
    >>> g.n_ops, g.is_training(), g.op("b/grad")["colocate"] == g.op("b")["colocate"]
    (8, True, True)
    """
    G = nx.DiGraph()
    for v in graph.ops:
        a = graph.op(v)
        grp = a.get("colocate") if a.get("colocate") is not None else f"cc:{v}"
        G.add_node(v, **{**a, "kind": "fwd", "colocate": grp})
        G.add_node(f"{v}/grad", **{**a, "kind": "bwd", "colocate": grp,
                                   "op_type": (a.get("op_type") or "Op") + "Grad",
                                   "compute": {k: t * backward_factor
                                               for k, t in a["compute"].items()},
                                   "memory": 0.0})
        G.add_edge(v, f"{v}/grad", bytes=0.0)
        if update and a["memory"] > 0:
            G.add_node(f"{v}/update", compute={k: t * 0.1 for k, t in a["compute"].items()},
                       memory=0.0, kind="update", colocate=grp, op_type="ApplyGradient")
            G.add_edge(f"{v}/grad", f"{v}/update", bytes=a["memory"])
    for u, v in graph.edges():
        e = graph.edge(u, v)
        G.add_edge(u, v, **e)
        G.add_edge(f"{v}/grad", f"{u}/grad", **e)
    return OpGraph(G, name=graph.name + "-train", meta={**graph.meta, "training": True})
