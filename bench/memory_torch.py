"""Predicted (judge's live model, one device) vs measured (torch.profiler memory events on CPU)
peak memory of captured PyTorch training steps (issue 42, docs/results-memory.md).

    PYTHONPATH=. python bench/memory_torch.py out.jsonl                  # four small nn models
    PYTHONPATH=. python bench/memory_torch.py out.jsonl 'hf:bert-base@{"seq":128,"batch":2}'

Measured: the captured joint graph (forward + backward, as ``from_torch`` captures it) run on
its real inputs under ``torch.profiler`` with ``profile_memory``: the inputs (parameters and
data) plus the peak of the allocation/free events. Predicted: the OpGraph of ``from_torch``
(CPU-profiled costs) on one CPU device, FIFO order.
"""
import json, sys
import torch
from workbench import Cluster, Device, Plan, simulate
from workbench.io.torch import capture, from_torch, _real_inputs

def models():
    from workbench.io.torch_models import build_model
    torch.manual_seed(0)
    which = sys.argv[2].split(";") if len(sys.argv) > 2 else None
    if which:
        for spec in which:
            name, _, kw = spec.partition("@")
            kw = dict(json.loads(kw)) if kw else {}
            m, x = build_model(name, **kw)
            yield spec, m, x
        return
    yield "mlp", torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 10)), (torch.randn(256, 512),)
    yield "cnn", torch.nn.Sequential(torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(), torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 10)), (torch.randn(16, 3, 64, 64),)
    yield "transformer", torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True), 2), (torch.randn(8, 128, 256),)


def measured_peak(model, inputs):
    gm, sig, _ = capture(model, inputs)
    flat = [t.detach() for t in _real_inputs(model, sig, inputs, torch)]
    resident = sum(t.numel() * t.element_size() for t in flat)
    gm(*flat)  # warm
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        out = gm(*flat)
        del out
    ev = [(e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events()
          if e.name() == "[memory]"]
    ev.sort(key=lambda x: (x[0], x[1]))
    lvl = peak = 0
    for _, b in ev:
        lvl += b; peak = max(peak, lvl)
    return resident + peak, resident

with open(sys.argv[1], "w") as f:
    for name, m, x in models():
        meas, resident = measured_peak(m, x)
        g = from_torch(m, x, profile="cpu", repeats=2, name=name)
        c = Cluster([Device("cpu0", "cpu")])
        ok = all("cpu" in g.op(v)["compute"] for v in g.ops)
        kind = "cpu" if ok else "gpu"
        c = Cluster([Device(f"{kind}0", kind)])
        s = simulate(Plan(g, {v: f"{kind}0" for v in g.ops}), c, order="fifo")
        d = f"{kind}0"
        row = dict(model=name, static=s.peak_memory[d], predicted=s.peak_live_memory[d], measured=meas, inputs=resident)
        row["err"] = row["predicted"] / row["measured"] - 1
        print(json.dumps(row), flush=True); f.write(json.dumps(row) + "\n")
