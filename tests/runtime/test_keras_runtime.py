"""Keras 3 models and tf.function training steps through extraction, profiling and the runner."""

import json
import re

import numpy as np
import pytest

pytest.importorskip("tensorflow")

import workbench as wb
from workbench.cluster import local_cluster
from workbench.errors import PlanError, RuntimeBridgeError

pytestmark = pytest.mark.tf


@pytest.fixture(scope="module")
def rt():
    import workbench.runtime as rt

    return rt


@pytest.fixture(scope="module")
def tfk():
    import keras
    import tensorflow as tf

    return tf, keras


def _mlp(keras):
    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input((8,)),
                             keras.layers.Dense(16, activation="relu", name="fc1"),
                             keras.layers.Dense(4, name="head")], name="net")


def _user_step(tf, keras, model):
    opt = keras.optimizers.SGD(0.1)
    opt.build(model.trainable_variables)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x, training=True) - y))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return step


def _batch(n=4):
    rng = np.random.default_rng(1)
    return (rng.standard_normal((n, 8)).astype("float32"),
            rng.standard_normal((n, 4)).astype("float32"))


def _group_plan(g, on_cpu1, method="split"):
    """cpu1 for the ops of the layers in ``on_cpu1`` (whole colocation groups), cpu0 else."""
    placement = {}
    for v in g.ops:
        a = g.op(v)
        lay = a.get("layer")
        if a["colocate"]:
            lay = g.op(a["colocate"][4:]).get("layer", lay)
        placement[v] = "cpu1" if lay in on_cpu1 else "cpu0"
    return wb.Plan(g, placement, method=method)


def test_user_tf_function_step_is_the_step_tf_runs(rt, tfk):
    tf, keras = tfk
    model = _mlp(keras)
    step = _user_step(tf, keras, model)
    x, y = _batch()
    eager_loss = float(np.mean((model(x).numpy() - y) ** 2))
    from workbench.runtime.extraction import program_of

    program = program_of(step, inputs=(x, y))
    # the program starts from the model's weights and really trains: its loss is the eager
    # loss of the same batch, and SGD on a fixed batch lowers it step after step
    g1 = tf.Graph()
    with g1.as_default():
        tf.graph_util.import_graph_def(program.graph_def, name="")
    with tf.compat.v1.Session(graph=g1) as sess:
        sess.run(program.init_op, feed_dict=program.init_feed)
        losses = [sess.run([program.loss + ":0", program.train_op])[0] for _ in range(3)]
    assert losses[0] == pytest.approx(eager_loss, rel=1e-5)
    assert losses[2] < losses[1] < losses[0]

    g = rt.extract(step, inputs=(x, y))
    kinds = {g.op(v)["kind"] for v in g.ops}
    assert kinds == {"fwd", "bwd", "update", "other"}
    # gradient ops are the ones GradientTape generated, with their real shapes and bytes
    bwd = [v for v in g.ops if g.op(v)["kind"] == "bwd"]
    assert bwd and all("gradient_tape/" in v for v in bwd)
    mm = next(v for v in g.ops if g.op(v)["op_type"] == "MatMul" and g.op(v)["kind"] == "fwd"
              and g.op(v)["layer"] == "fc1")
    assert g.op(mm)["shapes"] == [[4, 16]]
    assert max(g.edge(mm, w)["bytes"] for w in g.successors(mm)) == 4 * 16 * 4
    kernel = next(v for v in g.ops if v.endswith("fc1/kernel"))
    assert g.op(kernel)["op_type"] == "VarHandleOp" and g.op(kernel)["memory"] == 8 * 16 * 4
    # every variable update is colocated with its variable and names the variable's layer
    updates = [v for v in g.ops if g.op(v)["op_type"] == "AssignSubVariableOp"]
    assert len(updates) == 4
    for v in updates:
        grp = g.op(v)["colocate"]
        assert g.op(v)["kind"] == "update" and grp.startswith("var:")
        assert g.op(grp[4:])["op_type"] == "VarHandleOp"
        assert g.op(v)["layer"] == g.op(grp[4:])["layer"] in ("fc1", "head")
    # backward ops map to the layer they differentiate
    grad_mm = [v for v in bwd if g.op(v)["op_type"] == "MatMul"]
    assert {g.op(v)["layer"] for v in grad_mm} == {"fc1", "head"}


def test_keras_model_loss_optimizer_or_compiled(rt, tfk):
    _, keras = tfk
    model = _mlp(keras)
    g = rt.extract(model, 4, loss="mse", optimizer="sgd")
    assert g.meta["program"]["batch"] == 4 and g.meta["param_bytes"] > (8 * 16 + 16 * 4) * 4
    assert {g.op(v)["layer"] for v in g.ops if g.op(v)["op_type"] == "MatMul"} == {"fc1", "head"}
    compiled = _mlp(keras)
    compiled.compile(loss="sparse_categorical_crossentropy", optimizer="adam")
    g2 = rt.extract(compiled, 4)
    types = {g2.op(v)["op_type"] for v in g2.ops}
    assert "SparseSoftmaxCrossEntropyWithLogits" in types
    # Adam's moment variables are colocated with their updates, like the weights
    moments = [v for v in g2.ops if g2.op(v)["op_type"] == "VarHandleOp" and "momentum" in v]
    assert moments and all(g2.op(v)["colocate"] == f"var:{v}" for v in moments)
    # profile takes the model itself too
    p = rt.profile(_mlp(keras), 4, loss="mse", optimizer="sgd", steps=1, warmup=1, timed_steps=2)
    assert p.meta["costs"] == "profiled" and p.total_compute("cpu") > 0
    with pytest.raises(RuntimeBridgeError, match="not compiled"):
        rt.extract(_mlp(keras), 4)
    with pytest.raises(RuntimeBridgeError, match="both loss= and optimizer="):
        rt.extract(_mlp(keras), 4, loss="mse")


def test_bad_inputs_are_named(rt, tfk):
    tf, keras = tfk
    step = _user_step(tf, keras, _mlp(keras))
    with pytest.raises(RuntimeBridgeError, match="example inputs"):
        rt.extract(step)
    with pytest.raises(RuntimeBridgeError, match="decorate the step with @tf.function"):
        rt.extract(step.python_function, inputs=_batch())
    v = tf.Variable(0.0)

    @tf.function
    def looping(x):
        with tf.GradientTape() as tape:
            loss = tf.while_loop(lambda i, s: i < 3, lambda i, s: (i + 1, s + v * x),
                                 (0, 0.0))[1]
        v.assign_sub(tape.gradient(loss, v))
        return loss

    with pytest.raises(RuntimeBridgeError, match="loop"):
        rt.extract(looping, inputs=(tf.constant(1.0),))
    with pytest.raises(RuntimeBridgeError, match="unknown Keras model 'Nope'"):
        rt.extract("keras:Nope", 2)


def test_run_plan_puts_every_op_on_its_device(rt, tfk):
    tf, keras = tfk
    model = _mlp(keras)
    x, y = _batch()
    g = rt.profile(rt.extract(_user_step(tf, keras, model), inputs=(x, y)), steps=2, warmup=1)
    assert g.meta["costs"] == "profiled"
    plan = _group_plan(g, {"head"})
    m = rt.run_plan(plan, steps=3, warmup=1, trace=True)
    assert m.ok and len(m.samples) == 3 and m.order_source == "topological"
    placed = {v: d for v, (d, _, _) in m.trace.items() if v in plan.placement}
    on1 = [v for v, d in plan.placement.items() if d == "cpu1"]
    assert any(g.op(v)["kind"] == "bwd" for v in on1) and any(
        g.op(v)["kind"] == "update" for v in on1)
    for v, d in placed.items():
        assert d.endswith(f"CPU:{plan.placement[v][-1]}"), v
    # a variable split from its update is refused, naming both
    upd = next(v for v in on1 if g.op(v)["op_type"] == "AssignSubVariableOp")
    bad = dict(plan.placement)
    bad[upd] = "cpu0"
    with pytest.raises(PlanError, match="TensorFlow runs resource ops where"):
        rt.run_plan(wb.Plan(g, bad, method="split_var"), steps=1, warmup=0)


def test_op_without_kernel_on_its_device_is_named(rt, tfk):
    from workbench.runtime.extraction import program_for
    from workbench.runtime.runner import _check_kernels

    tf, keras = tfk
    x, y = _batch()
    g = rt.extract(_user_step(tf, keras, _mlp(keras)), inputs=(x, y))
    plan = _group_plan(g, {"head"})
    tpu = {"cpu0": "/job:localhost/replica:0/task:0/device:CPU:0",
           "cpu1": "/job:localhost/replica:0/task:0/device:TPU:0"}
    program = program_for(g)
    with pytest.raises(PlanError, match=r"no TPU kernel") as err:
        _check_kernels(plan, program, tpu)
    op, op_type = re.search(r"puts op '([^']+)' \((\w+)\) on 'cpu1'", str(err.value)).groups()
    assert plan.placement[op] == "cpu1" and g.op(op)["op_type"] == op_type
    _check_kernels(plan, program, {d: tpu["cpu0"].replace("0", d[-1]) for d in ("cpu0", "cpu1")})


def test_keras_encoder_by_name_rebuilds_and_runs(rt, tmp_path):
    from workbench.io import load_graph, save_graph
    from workbench.runtime import extraction

    g = rt.extract("keras:TransformerEncoder", 2, input_shape=(8, 16), layers=1, heads=2,
                   ffn=16)
    assert g.meta["program"]["keras"] == "TransformerEncoder"
    types = {g.op(v)["op_type"] for v in g.ops}
    assert {"BatchMatMulV2", "Softmax"} <= types or {"Einsum", "Softmax"} <= types
    att = [v for v in g.ops if g.op(v).get("layer", "").startswith("enc0_mha")]
    assert g.op("enc0_mha/query/kernel")["layer"] == "enc0_mha/query"
    assert {g.op(v)["kind"] for v in att} >= {"fwd", "bwd", "update", "other"}
    # saved, forgotten and rebuilt from its metadata: the same step, node for node
    path = tmp_path / "enc.json"
    save_graph(g, path)
    extraction._PROGRAMS.clear()
    h = load_graph(path)
    program = extraction.program_for(h)
    assert set(program.step_nodes) == set(g.ops)
    cluster = local_cluster(2)
    h = rt.profile(h, steps=2, warmup=1)
    plans = {m: wb.solve(h, cluster, method=m) for m in ("single", "heft")}
    res = rt.measure_plans(h, plans, steps=2, warmup=1, cluster=cluster)
    assert all(r.ok and r.median_ms > 0 for r in res.values()), res


@pytest.mark.slow
@pytest.mark.parametrize("name", ["MobileNetV2", "ResNet50", "EfficientNetB0"])
def test_keras_applications_extract_profile_run(rt, name):
    # profile extracts the step itself (one op graph built instead of two)
    g = rt.profile(f"keras:{name}", 2, input_shape=(32, 32), steps=1, warmup=1, timed_steps=3)
    assert g.meta["program"]["keras"] == name and g.n_ops > 3000
    assert g.meta["costs"] == "profiled" and g.total_compute("cpu") > 0
    assert {g.op(v)["kind"] for v in g.ops} == {"fwd", "bwd", "update", "other"}
    convs = [v for v in g.ops if g.op(v)["op_type"] == "Conv2D"]
    assert convs and all(g.op(v).get("layer") for v in convs)
    assert all(g.op(v).get("layer") for v in g.ops if g.op(v)["op_type"] ==
               "Conv2DBackpropFilter")
    # every recorded layer is a layer of the Keras model
    import keras

    from workbench.runtime.keras_step import keras_model_from_spec

    keras.backend.clear_session()  # Keras names as the spec's build had them
    names = {lay.name for lay in keras_model_from_spec(name, input_shape=(32, 32)).layers}
    recorded = {g.op(v)["layer"] for v in g.ops if g.op(v).get("layer")}
    assert len(recorded) > 50 and recorded <= names
    cluster = local_cluster(2)
    plan = wb.solve(g, cluster, method="m_topo")
    assert len(plan.devices_used()) == 2
    m = rt.run_plan(plan, steps=2, warmup=1, cluster=cluster)
    assert m.ok and m.median_ms > 0 and m.order_source == "simulated"


@pytest.mark.slow
def test_cli_run_keras_name_and_model_file(tmp_path, capsys):
    from workbench.cli import main

    # the CLI's path for a keras: name and its --input; the smallest built-in name (MobileNetV2
    # here took 10.2 s of CPU against 1.9 s; its extraction, profile and run are
    # test_keras_applications_extract_profile_run's)
    assert main(["run", "keras:TransformerEncoder", "--input", "8x16", "--methods",
                 "single,m_topo", "--steps", "2", "--warmup", "1", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["method"] for r in rows] == ["single", "m_topo"]
    assert all(r["measured_ms"] > 0 and not r["error"] for r in rows)
    f = tmp_path / "model.py"
    f.write_text("import keras\n\ndef build():\n    return keras.Sequential([keras.Input((6,)), "
                 "keras.layers.Dense(5, name='fc'), keras.layers.Dense(3, name='out')])\n")
    assert main(["run", f"{f}:build", "--batch", "4", "--methods", "single",
                 "--steps", "2", "--warmup", "1", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["measured_ms"] > 0 and not rows[0]["error"]


def test_tensorflow_refusing_to_place_an_op_names_it(tfk):
    """A real refusal: CudnnRNN has no CPU kernel, so TensorFlow will not run it on a CPU."""
    from workbench.runtime.runner import _placement_error

    tf, _ = tfk
    g = tf.Graph()
    with g.as_default(), tf.device("/job:localhost/replica:0/task:0/device:CPU:0"):
        h = tf.zeros([1, 3, 5])
        out = tf.raw_ops.CudnnRNN(input=tf.zeros([2, 3, 4]), input_h=h, input_c=h,
                                  params=tf.zeros([200]), name="enc/rnn")
    with tf.compat.v1.Session(graph=g) as sess, pytest.raises(Exception) as err:
        sess.run(out[0])
    e = _placement_error(wb.Plan(wb.samples.diamond(), {v: "cpu0" for v in "abcd"},
                                 method="cpu"), err.value)
    assert isinstance(e, PlanError) and "will not place op 'enc/rnn'" in str(e)
    assert _placement_error(wb.Plan(wb.samples.diamond(), {v: "cpu0" for v in "abcd"}),
                            ValueError("some other failure")) is None
