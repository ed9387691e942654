"""The paper's replication in the hybrid search: the stage DP chooses each stage's width
(data-parallel degree; with the ``stage_tp`` extension also its tensor-parallel degree), and
the judged plan is never worse than the uniform one."""

import itertools

import numpy as np
import pytest

from workbench.cluster import Cluster, Device
from workbench.errors import PlanError
from workbench.judge.training import simulate_training
from workbench.solvers.hybrid import megatron, tarnawski
from workbench.solvers.hybrid.costs import OpVectors
from workbench.solvers.hybrid.replication import replicate, replication_split
from workbench.transforms.parallel import Strategy, parallelize

HEAD = "llama:layers=2,hidden=512,heads=8,seq=512,vocab=128000"
BIG_HEAD = "llama:layers=4,hidden=1024,heads=8,seq=512,vocab=128000"


def _brute(options, pps, m, devices, use_all=True):
    """Every stage count of ``pps``, split and width choice, the DP's objective computed
    directly: the 1F1B pipeline's ``max_k (S_k + m y_k)`` with the fill ``S_k`` the earlier
    stages' own work at their widths, each later stage's tail on its own term, the first
    stage's after the pipeline's end (its last backward is the pipeline's last task)."""
    n, best = len(options[0][1].work), np.inf
    for pp in pps:
        for cuts in itertools.combinations(range(1, n), pp - 1):
            bounds = (0, *cuts, n)
            for pick in itertools.product(range(len(options)), repeat=pp):
                used = sum(options[i][0] for i in pick)
                if used > devices or (use_all and used != devices):
                    continue
                y = [options[i][1].work[bounds[k]:bounds[k + 1]].sum()
                     for k, i in enumerate(pick)]
                tail = [options[i][3](options[i][1].params[bounds[k]:bounds[k + 1]].sum())
                        for k, i in enumerate(pick)]
                val = max(sum(y[:k]) + m * y[k] + (tail[k] if k else 0.0) for k in range(pp))
                best = min(best, val + tail[0])
    return best


def test_the_replication_dp_is_exact_on_small_chains():
    rng = np.random.default_rng(3)
    for trial in range(24):
        n = int(rng.integers(4, 8))
        work = rng.uniform(0.5, 5.0, n)
        params = rng.uniform(0, 2.0, n)
        z = np.zeros(n)
        options = [(g, OpVectors(work / g, params, z, z, 0.0), 1.0,
                    lambda p, g=g: (g - 1) * 0.3 * p + 0.1 * (p > 0)) for g in (1, 2, 3)]
        pp, devices = int(rng.integers(2, 4)), int(rng.integers(3, 7))
        free = trial % 2 == 1      # the paper's recurrence: 2..pp stages on at most devices
        got = replication_split(options, pp=pp, n_micro=4, devices=devices, capacity=1e9,
                                min_pp=2 if free else None, use_all=not free)
        want = _brute(options, range(2, pp + 1) if free else [pp], 4, devices,
                      use_all=not free)
        if not np.isfinite(want):
            assert got is None
            continue
        assert got[0] == pytest.approx(want)
        assert sum(options[i][0] for i in got[2]) <= devices
        every = replication_split(options, pp=pp, n_micro=4, devices=devices, capacity=1e9,
                                  min_pp=2 if free else None, use_all=not free, each=True)
        assert every[0] == got and [e[0] for e in every] == sorted(e[0] for e in every)


def test_replication_gives_the_head_stage_more_replicas_and_is_judged_faster():
    p = parallelize(HEAD, Cluster.preset("8xA100-80g"),
                    Strategy(pp=2, dp=2, mbs=3, global_batch=24))
    r = simulate_training(p)
    q, rq, judged = replicate(p, r)
    assert judged >= 1
    assert q.strategy.stage_widths == ((1, 1), (1, 3)) and q.strategy.devices == 4
    assert rq.feasible and rq.step_ms < 0.8 * r.step_ms
    assert rq.step_ms == simulate_training(q).step_ms


@pytest.fixture(scope="module")
def small_memory():
    """Twelve A100s with 3 GB each: the model must be pipelined, its LM head is the heaviest
    op."""
    cl = Cluster([Device(f"g{i}", memory=3e9, host="n0") for i in range(12)], name="small")
    return cl, megatron(BIG_HEAD, cl, global_batch=36, gpu="A100-80G")


def test_the_search_is_never_worse_with_per_stage_widths(small_memory):
    cl, m = small_memory
    kw = {"global_batch": 36, "baseline": m, "gpu": "A100-80G"}
    uniform = tarnawski(BIG_HEAD, cl, replication=False, **kw)
    paper = tarnawski(BIG_HEAD, cl, **kw)
    extended = tarnawski(BIG_HEAD, cl, stage_tp=True, **kw)
    assert uniform.step_ms <= m.step_ms and not uniform.plan.strategy.stage_widths
    # the paper's replication: one tp, the replicas differ by stage; judged faster
    widths = paper.plan.strategy.stage_widths
    assert len({t for t, _ in widths}) == 1 and len({d for _, d in widths}) > 1
    assert sum(t * d for t, d in widths) == 12
    assert paper.step_ms < 0.9 * uniform.step_ms
    assert "the paper's replication" in paper.notes and "extension" not in paper.notes
    # the extension: each stage its own tp as well; never worse than the paper's
    widths = extended.plan.strategy.stage_widths
    assert extended.step_ms <= paper.step_ms and len({t for t, _ in widths}) > 1
    assert "extension" in extended.notes
    for r in (uniform, paper, extended):
        assert r.step_ms == simulate_training(r.plan).step_ms and r.bound <= r.step_ms


def test_cli_strategies_takes_the_extension(small_memory, tmp_path, capsys):
    import json

    from workbench.cli import main
    from workbench.io.json_format import save_cluster
    f = tmp_path / "small.json"
    save_cluster(small_memory[0], f)
    assert main(["strategies", BIG_HEAD, "--cluster", str(f), "--gpu", "A100-80G",
                 "--global-batch", "36", "--stage-tp", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[2]["strategy"].startswith("widths=") and "extension" in rows[2]["notes"]


@pytest.mark.parametrize("flag", ["replication", "stage_tp"])
def test_the_flags_are_checked(flag):
    with pytest.raises(PlanError, match=f"{flag} must be True or False"):
        tarnawski(HEAD, Cluster.preset("8xA100-80g"), global_batch=8, **{flag: "yes"})
