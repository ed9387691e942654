"""Plans back to PyTorch: module devices, stages and split points for torch.distributed.pipelining."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.torch

torch = pytest.importorskip("torch")
from torch.distributed.pipelining import pipeline  # noqa: E402

from workbench import Cluster, solve  # noqa: E402
from workbench.errors import PlanError  # noqa: E402
from workbench.io.torch import from_torch  # noqa: E402
from workbench.io.torch_export import plan_to_torch, split_spec, write_plan_for_torch  # noqa: E402
from workbench.plan import Plan  # noqa: E402
from workbench.samples import diamond  # noqa: E402


def _blocks(n=6, width=64):
    torch.manual_seed(0)
    return torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(width, width),
                                                     torch.nn.ReLU()) for _ in range(n)])


@pytest.mark.parametrize("method", ["dp", "ip_contig"])
def test_a_pipeline_plan_builds_its_stages_with_torch_pipelining(tmp_path, method):
    net, x = _blocks(), torch.randn(16, 64)
    g = from_torch(net, (x,), profile=None)
    plan = solve(g, Cluster.preset("2xV100-pcie"), method=method, time_limit=20, seed=0)
    out = write_plan_for_torch(plan, tmp_path / "split.json", depth=1)
    assert json.loads((tmp_path / "split.json").read_text()) == out
    assert out["contiguous"] and len(out["stages"]) == 2
    assert set(out["devices"]) == {str(i) for i in range(6)}
    pipe = pipeline(net, mb_args=(x[:4],), split_spec=split_spec(out))
    assert pipe.num_stages == len(out["stages"])
    for i, stage in enumerate(out["stages"]):
        held = {n.split(".")[0] for n, _ in pipe.get_stage_module(i).named_parameters()}
        assert held == set(stage["modules"])          # each stage holds its modules' weights
    # every op of the graph has its device in the JSON
    assert set(out["ops"]) == set(g.ops)


def test_op_placement_that_comes_back_to_a_device_has_no_split_points():
    net, x = _blocks(4, 16), torch.randn(4, 16)
    g = from_torch(net, (x,), training=False, profile=None)
    dev = {"0": "gpu0", "1": "gpu1", "2": "gpu0", "3": "gpu1"}
    place = {v: dev.get(g.op(v).get("module", "").split(".")[0], "gpu0") for v in g.ops}
    out = plan_to_torch(Plan(g, place, method="manual"), depth=1)
    assert out["devices"] == dev and not out["contiguous"] and out["split_points"] is None
    with pytest.raises(PlanError, match="not contiguous"):
        split_spec(out)


def test_plans_of_graphs_without_modules_are_refused():
    g = diamond()
    with pytest.raises(PlanError, match="no module paths"):
        plan_to_torch(Plan(g, {v: "gpu0" for v in g.ops}))
    net, x = _blocks(2, 8), torch.randn(2, 8)
    tg = from_torch(net, (x,), training=False, profile=None)
    with pytest.raises(PlanError, match="depth must be"):
        plan_to_torch(Plan(tg, {v: "gpu0" for v in tg.ops}), depth=0)
