"""(PYTHONPATH=. python bench/memory_repredict.py measured.jsonl out.jsonl) Re-predict the judge's live peaks for the plans measured by measure_tf.py (same extraction,
same seeds) with the current model; measured values are read from the measurement file."""
import json, sys
from workbench import Plan, simulate, solve
from workbench.runtime import extract
from workbench.cluster import local_cluster
from workbench.runtime.runner import with_run_order
rows = [json.loads(l) for l in open(sys.argv[1])]
out = open(sys.argv[2], "w")
cache = {}
for r in rows:
    key = (r["model"], r["batch"], json.dumps(r["sizes"]))
    if key not in cache:
        cache[key] = (extract(r["model"], r["batch"], **r["sizes"]), {})
    g, plans = cache[key]
    nd = 1 if r["plan"] == "single" else 2
    if r["plan"] not in plans:
        c = local_cluster(nd, memory=g.total_memory() * (1.2 if nd == 1 else 0.6))
        plan = (Plan(g, {v: "cpu0" for v in g.ops}, method="single") if r["plan"] == "single"
                else solve(g, c, method=r["plan"], seed=0))
        plan = with_run_order(plan, c)
        plans[r["plan"]] = simulate(plan, c)
    s = plans[r["plan"]]
    r = dict(r, predicted=s.peak_live_memory[r["device"]], static=s.peak_memory[r["device"]])
    r["err"] = r["predicted"] / r["measured"] - 1
    out.write(json.dumps(r) + "\n"); out.flush()
