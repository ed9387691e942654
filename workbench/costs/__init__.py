"""Cost models: what an op or a transfer costs, with no judge and no solver above them.

* :mod:`.roofline`: FLOPs and bytes per op -> time on a device (device models, presets).
* :mod:`.standard`: Celeritas's standard evaluation (costs at a large batch fitted from small
  ones).
* :mod:`.llm`, :mod:`.llm_graph`: GPT / Llama training steps from formulas (chain of costed
  ops; the one-device training graph).
* :mod:`.pipeline`: the pipelining paper's accounting of transfers and loads, shared by the
  judge (``max_load``, latency) and the pipelined solvers.

Each model is imported by its module's path (``from workbench.costs.standard import
fit_costs``); the package names none of them.
"""
