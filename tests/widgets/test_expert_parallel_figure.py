"""The breakdown figure draws expert parallelism's all-to-all part (``ep``) where a result has
it, and the parts of results without it as before."""

from widgets.figures.training import training_breakdown_figure, training_gantt
from workbench.cluster import Cluster
from workbench.judge.training import simulate_training
from workbench.transforms.parallel import Strategy, parallelize

MOE = "moe:layers=2,hidden=256,heads=4,seq=128,vocab=1000,ffn=512,experts=4,topk=2"


def test_breakdown_figure_draws_the_ep_part():
    cl = Cluster.preset("8xA100-80g")
    runs = [simulate_training(parallelize(MOE, cl, Strategy(dp=4, ep=e, global_batch=8)))
            for e in (1, 4)]
    fig = training_breakdown_figure(runs)
    bars = {t.name: t.x for t in fig.data}
    assert bars["ep"][0] == 0.0 and bars["ep"][1] == runs[1].breakdown()["ep"] / 1e3 > 0
    for r, i in zip(runs, (0, 1)):     # the bars add up to the step
        assert abs(sum(x[i] for x in bars.values()) - r.step_ms / 1e3) < 1e-9
    assert "ep" not in {t.name for t in training_breakdown_figure(runs[:1]).data}


def test_gantt_draws_the_all_to_alls_on_the_links():
    r = simulate_training(parallelize(MOE, Cluster.preset("8xA100-80g"),
                                      Strategy(dp=4, ep=2, global_batch=8)))
    assert "ep" in {t.name for t in training_gantt(r).data}
