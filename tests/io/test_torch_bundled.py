"""The bundled PyTorch workloads (scripts/make_torch_graphs.py): full training steps, measured
CPU costs, roofline GPU costs, sizes in meta; they load by name and solve on a GPU preset."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench import Cluster, simulate, solve
from workbench.samples import load_sample

ROOT = Path(__file__).resolve().parents[2]
BUNDLED = {  # name -> (model spec, parameters of the architecture)
    "torch_gpt2": ("hf:gpt2", 124_439_808),
    "torch_bert_base": ("hf:bert-base", 108_891_648),
    "torch_vit_b16": ("hf:vit", 85_798_656),
    "torch_llama": ("hf:llama", None),
}
PRESENT = [n for n in BUNDLED if (ROOT / "sample_graphs" / f"{n}.json.gz").is_file()]


def test_the_four_workloads_are_bundled():
    assert PRESENT == list(BUNDLED)


@pytest.mark.parametrize("name", PRESENT)
def test_bundled_step_has_measured_cpu_and_roofline_gpu_costs(name):
    g = load_sample(name)
    spec, params = BUNDLED[name]
    assert g.meta["model_spec"] == spec and g.meta["source"] == "torch"
    assert g.meta["device_kind"] == "cpu" and g.meta["profile"] == "cpu"
    assert g.meta["batch"] >= 1 and g.meta["profile_repeats"] >= 2
    if params:
        assert g.meta["param_bytes"] == pytest.approx(4 * params, rel=0.002)
    assert {g.op(v)["kind"] for v in g.ops} == {"fwd", "bwd", "update"}
    assert all(g.op(v)["compute"]["cpu"] > 0 and "gpu" in g.op(v)["compute"] for v in g.ops)
    assert g.meta["device_costs"]["gpu"].startswith("roofline:V100")
    c = Cluster.preset("4xV100-nvlink")
    assert simulate(solve(g, c, method="m_topo"), c).makespan > 0
