"""The training step of an :class:`~workbench.costs.llm.LLMConfig` as an operator graph.

:func:`training_graph` turns the chain of :mod:`workbench.costs.llm` into an
:class:`~workbench.graph.OpGraph` of one training step on one device (no parallelism): a
forward op and a backward op per chain op (``L3/fc1``, ``L3/fc1/bwd``), the loss joining them,
and one Adam update per layer (``L3/update``; ``embedding/update``, ``head/update``). Every op
carries ``flops``, ``bytes_moved``, ``param_bytes`` (2-byte weights in mixed precision),
``grad_bytes``, ``optimizer_bytes`` (fp32 master weights, momentum and variance) and
``activation_bytes`` (what it saves for backward); ``memory`` is, as in
:func:`workbench.io.torch.from_torch`, the parameters and saved activations on the forward op,
the gradient on the backward op that produces it and the optimizer states on the update op.
``compute["gpu"]`` is the roofline time on ``gpu`` (a :data:`~workbench.costs.llm.GPUS` name).
Only the core dependencies are needed (no torch).

Examples
--------
>>> from workbench.costs.llm import parse_spec
>>> g = training_graph(parse_spec("gpt:layers=2,hidden=128,heads=4,seq=64,mbs=2,vocab=1000"))
>>> g.n_ops, g.meta["params"], g.meta["model"]
(64, 532992, 'gpt:layers=2,hidden=128,heads=4,seq=64,mbs=2,vocab=1000')
>>> sorted({g.op(v)["kind"] for v in g.ops})
['bwd', 'fwd', 'update']
>>> sorted(g.successors("L0/fc1"))
['L0/fc1/bwd', 'L0/gelu']
"""

from __future__ import annotations

from ..graph import OpGraph
from .llm import ADAM_FLOPS, GPUS, LLMConfig, chain, parse_spec, state_bytes_per_param

__all__ = ["training_graph"]


def _group(op) -> str:
    return "embedding" if op.layer < 0 else ("head" if op.name in ("final_norm", "lm_head",
                                                                    "loss") else f"L{op.layer}")


def training_graph(config: LLMConfig | str, *, gpu: str = "A100-80G") -> OpGraph:
    """One training step of ``config`` (or its spec name) on one ``gpu`` (see module doc)."""
    if isinstance(config, str):
        config = parse_spec(config)
    if gpu not in GPUS:
        from ..errors import GraphError

        raise GraphError(f"unknown GPU {gpu!r}; known: {', '.join(GPUS)}")
    spec = GPUS[gpu]
    half = config.precision != "fp32"
    pb, gb, ob = state_bytes_per_param(config.precision)
    ops, edges = [], []
    ch = chain(config)
    groups: dict = {}
    for k, o in enumerate(ch):
        groups.setdefault(_group(o), []).append(o)
        fwd = {"compute": {"gpu": spec.op_ms(o.flops, o.bytes, half=half)}, "kind": "fwd",
               "op_type": o.op_type, "flops": o.flops, "bytes_moved": o.bytes,
               "param_bytes": float(pb * o.params), "activation_bytes": float(o.saved),
               "memory": float(pb * o.params + o.saved), "layer": o.layer}
        bwd = {"compute": {"gpu": spec.op_ms(o.bwd_flops, o.bwd_bytes, half=half)},
               "kind": "bwd", "op_type": f"{o.op_type}Grad", "flops": o.bwd_flops,
               "bytes_moved": o.bwd_bytes, "grad_bytes": float(gb * o.params),
               "memory": float(gb * o.params), "layer": o.layer}
        ops += [(o.name, fwd), (f"{o.name}/bwd", bwd)]
        if k:
            prev = ch[k - 1]
            edges.append((prev.name, o.name, {"bytes": prev.out}))
            edges.append((f"{o.name}/bwd", f"{prev.name}/bwd", {"bytes": prev.out}))
        edges.append((o.name, f"{o.name}/bwd", {"bytes": o.saved}))
    for gname, members in groups.items():
        n = sum(o.params for o in members)
        if not n:
            continue
        up = f"{gname}/update"
        ops.append((up, {"compute": {"gpu": spec.op_ms(ADAM_FLOPS * n, (pb + gb + 2 * ob) * n,
                                                       half=False)},
                         "kind": "update", "op_type": "AdamW", "flops": float(ADAM_FLOPS * n),
                         "bytes_moved": float((pb + gb + 2 * ob) * n),
                         "optimizer_bytes": float(ob * n), "memory": float(ob * n),
                         "layer": members[0].layer}))
        for o in members:
            if o.params:
                edges.append((f"{o.name}/bwd", up, {"bytes": float(gb * o.params)}))
    meta = {"source": "llm", "model": config.spec, "arch": config.arch,
            "params": config.params(), "batch": config.mbs, "seq": config.seq,
            "precision": config.precision, "gpu": gpu}
    return OpGraph.from_ops(ops, edges, name=config.spec, meta=meta)
