"""The hard suite's real-model pairs (issue 42): the plans of m_topo, celeritas, dpos and
m_etf judged by the live model.

    PYTHONPATH=. python bench/memory_suite.py PRESSURE [MEMORY_MODEL]

PRESSURE: ``static`` (devices at the static sum / 1.6, as before issue 42) or ``live`` (the
live footprint / 1.6); MEMORY_MODEL: the solvers' ``memory_model`` (``static`` default,
``live`` re-solves out-of-memory plans). Writes /tmp/memory/final_PRESSURE_MODEL.jsonl.
"""
import os, sys, json, time
from workbench import solve, evaluate, simulate, Plan
from workbench.workloads import hard_suite
mode = sys.argv[1]  # static | live (pressure)
mm = sys.argv[2] if len(sys.argv) > 2 else "static"
from workbench.workloads import Workload
import dataclasses
os.makedirs("/tmp/memory", exist_ok=True)
out = open(f"/tmp/memory/final_{mode}_{mm}.jsonl", "w")
for w in hard_suite():
    if w.note.startswith("hard-regime") or w.name.startswith("torch") and mode == "static_only":
        continue
    if not (w.name.split("-")[0] in ("resnet50","inception_v3","bert_base","gnmt","rnnlm","transformer_base") or w.name.startswith("torch")):
        continue
    w = dataclasses.replace(w, memory_model=mode)
    g, c = w.build()
    for m in ("m_topo", "celeritas", "dpos", "m_etf"):
        t0 = time.process_time()
        try:
            p = solve(g, c, method=m, seed=0, memory_model=mm)
            met = evaluate(p, c)
            row = dict(pair=w.name, method=m, status=p.status, solver_status=p.stats.get("solver_status", p.status),
                       static_frac=met.memory_fraction, rounds=p.stats.get("memory_rounds"), live_frac=met.live_memory_fraction,
                       feasible=met.feasible, makespan=met.makespan_ms,
                       violation=(met.violations[0] if met.violations else ""))
        except Exception as e:
            row = dict(pair=w.name, method=m, error=str(e)[:200])
        row["cpu_s"] = time.process_time() - t0
        print(json.dumps(row), flush=True); out.write(json.dumps(row) + "\n"); out.flush()
