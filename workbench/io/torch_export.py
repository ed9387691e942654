"""Plans back to PyTorch: the device of every module, and pipeline split points.

:func:`plan_to_torch` reads a :class:`~workbench.plan.Plan` of a graph captured by
:func:`workbench.io.torch.from_torch` (its ops carry their ``module`` path) and returns a JSON-
ready dict:

* ``devices``: module path -> device (the device that runs most of the module's forward
  compute), and ``ops``: op -> device, for op placement applied by hand (``module.to(device)``);
* ``stages``: the devices in the order the forward pass first reaches them, each with its
  modules (in forward order);
* ``split_points``: when every stage is one contiguous run of modules in forward order, the
  module at which each stage after the first begins -- the ``split_spec`` of
  ``torch.distributed.pipelining.pipeline`` with ``SplitPoint.BEGINNING``
  (:func:`split_spec` builds it); None otherwise (``contiguous`` False), since a stage that
  comes back to an earlier device cannot be expressed as split points.

``depth`` groups modules by the first ``depth`` components of their path (``depth=1``: the
children of the model, e.g. ``layer1``), so that split points fall on blocks rather than leaf
layers; ops outside every module (the loss) follow the stage of the op before them.

Examples
--------
>>> import torch
>>> from workbench.io.torch import from_torch
>>> from workbench.plan import Plan
>>> net = torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(4)])
>>> g = from_torch(net, (torch.randn(4, 8),), profile=None)
>>> place = {v: ("gpu0" if g.op(v).get("module", "") in ("0", "1") else "gpu1") for v in g.ops}
>>> out = plan_to_torch(Plan(g, place, method="manual"))
>>> out["split_points"], [s["modules"] for s in out["stages"]]
(['2'], [['0', '1'], ['2', '3']])
"""

from __future__ import annotations

import json
from collections import defaultdict

from ..errors import PlanError

__all__ = ["plan_to_torch", "split_spec", "write_plan_for_torch"]


def _module_key(path: str, depth: int | None) -> str:
    if not path or depth is None:
        return path
    return ".".join(path.split(".")[:depth])


def plan_to_torch(plan, *, depth: int | None = None) -> dict:
    """Module devices, stages and split points of a plan (see the module docstring).

    Raises
    ------
    PlanError
        A plan whose graph was not captured from PyTorch (its ops carry no module path), a
        plan that replicates the model (``data_parallel``, replicated pipeline stages: no
        single device per module), or a bad ``depth``.
    """
    g = plan.graph
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 1):
        raise PlanError(f"depth must be a positive integer or None, got {depth!r}")
    if not any("module" in g.op(v) for v in g.ops):
        raise PlanError(f"graph {g.name!r} has no module paths on its ops: export plans of "
                        f"graphs captured by workbench.io.torch.from_torch")
    _refuse_replicas(plan)
    load: dict = defaultdict(lambda: defaultdict(float))
    order: list = []
    prev = None
    for v in g.topological_order():
        a = g.op(v)
        if a.get("kind") != "fwd":
            continue
        key = _module_key(a.get("module", ""), depth)
        if not key:
            continue
        dev = plan.placement[v]
        load[key][dev] += max(a["compute"].values(), default=0.0) + 1e-9
        if key != prev and key not in order:
            order.append(key)
        prev = key
    devices = {m: max(load[m], key=load[m].get) for m in order}
    stages: list = []
    for m in order:
        if not stages or stages[-1]["device"] != devices[m]:
            stages.append({"device": devices[m], "modules": []})
        stages[-1]["modules"].append(m)
    seen = [s["device"] for s in stages]
    contiguous = len(seen) == len(set(seen))
    return {"model": g.meta.get("model_spec") or g.meta.get("model") or g.name,
            "method": plan.method, "depth": depth, "devices": devices,
            "ops": {v: plan.placement[v] for v in g.ops},
            "stages": stages, "contiguous": contiguous,
            "split_points": [s["modules"][0] for s in stages[1:]] if contiguous else None}


def _refuse_replicas(plan) -> None:
    """A plan that replicates the model (data parallelism, replicated pipeline stages) runs
    every replicated module on several devices at once: one device per module would be a wrong
    answer (it came out as every module on gpu0), so it is refused, naming the replicas."""
    r = plan.graph.meta.get("data_parallel")
    if isinstance(r, int) and r > 1:
        devs = plan.info.get("devices") or plan.devices_used()
        raise PlanError(f"plan {plan.method!r} replicates the model {r} times (data parallel, "
                        f"one replica on each of {', '.join(map(str, devs))}): every module "
                        f"runs on all of them, so there is no device per module to export; "
                        f"run it with torch DistributedDataParallel on those devices")
    rep = [i for i, st in enumerate(plan.info.get("stages") or [])
           if isinstance(st, dict) and (st.get("replicas") or 1) > 1]
    if rep:
        raise PlanError(f"plan {plan.method!r} replicates pipeline stage {rep[0]} over "
                        f"{plan.info['stages'][rep[0]]['replicas']} devices: a replicated "
                        f"stage has no single device per module to export")


def split_spec(exported: dict) -> dict:
    """``{module: SplitPoint.BEGINNING}`` for ``torch.distributed.pipelining.pipeline``.

    Raises
    ------
    PlanError
        The plan's stages are not contiguous in module order.
    """
    if not exported.get("contiguous"):
        raise PlanError("the plan's stages are not contiguous in module order (a device runs "
                        "two separate runs of modules): no pipeline split points; place "
                        "modules with 'devices' instead")
    from torch.distributed.pipelining import SplitPoint

    return {m: SplitPoint.BEGINNING for m in exported["split_points"]}


def write_plan_for_torch(plan, path, *, depth: int | None = None) -> dict:
    """Write :func:`plan_to_torch` as JSON (atomically) and return it."""
    from .files import write_atomic

    out = plan_to_torch(plan, depth=depth)
    write_atomic(path, json.dumps(out, indent=1))
    return out
