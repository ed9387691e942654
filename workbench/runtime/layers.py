"""Layer helpers shared by the model builders of :mod:`workbench.runtime.models` and
:mod:`workbench.runtime.paper_models` (variables, the input batch, dense / conv / LayerNorm /
LSTM layers, the cross-entropy loss). They run inside a ``tf.compat.v1`` graph.

Both model modules import them from here, so neither imports the other's internals
(:mod:`~workbench.runtime.models` registers the paper-sized models one way).

>>> from workbench.runtime import layers
>>> sorted(n for n in vars(layers) if n.startswith("_") and not n.startswith("__"))
['_conv', '_data', '_dense', '_layer_norm', '_lstm_cell', '_var', '_xent']
"""

from __future__ import annotations

from ._tf import tf

__all__: list[str] = []


def _var(name: str, shape, *, init: str = "glorot", trainable: bool = True):
    t = tf()
    tf1 = t.compat.v1
    if init == "zeros":
        initializer = tf1.zeros_initializer()
    elif init == "ones":
        initializer = tf1.ones_initializer()
    elif init == "normal":
        initializer = tf1.random_normal_initializer()
    else:
        initializer = tf1.glorot_uniform_initializer()
    return tf1.get_variable(name, shape=list(shape), initializer=initializer,
                            trainable=trainable, use_resource=True)


def _data(batch: int, x_shape, n_classes: int):
    """Input batch and one-hot labels held in non-trainable variables."""
    t = tf()
    tf1 = t.compat.v1
    with tf1.variable_scope("data"):
        x = _var("x", [batch, *x_shape], init="normal", trainable=False)
        labels = tf1.get_variable(
            "y", initializer=t.one_hot(t.range(batch) % n_classes, n_classes),
            trainable=False, use_resource=True)
    return t.identity(x, name="data/x_value"), t.identity(labels, name="data/y_value")


def _dense(x, units: int, name: str, act: bool = True):
    t = tf()
    with t.compat.v1.variable_scope(name):
        w = _var("w", [int(x.shape[-1]), units])
        b = _var("b", [units], init="zeros")
        y = t.matmul(x, w) + b
        return t.nn.relu(y) if act else y


def _conv(x, filters: int, k: int, name: str, stride: int = 1, act: bool = True):
    t = tf()
    with t.compat.v1.variable_scope(name):
        w = _var("w", [k, k, int(x.shape[-1]), filters])
        b = _var("b", [filters], init="zeros")
        y = t.nn.bias_add(t.nn.conv2d(x, w, strides=stride, padding="SAME"), b)
        return t.nn.relu(y) if act else y


def _xent(logits, labels):
    t = tf()
    return t.reduce_mean(t.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits),
                         name="loss")


def _layer_norm(x, name: str):
    t = tf()
    with t.compat.v1.variable_scope(name):
        d = int(x.shape[-1])
        g = _var("gamma", [d], init="ones")
        b = _var("beta", [d], init="zeros")
        mean, var = t.nn.moments(x, axes=[-1], keepdims=True)
        return (x - mean) * t.math.rsqrt(var + 1e-6) * g + b


def _lstm_cell(x, state, name: str, units: int):
    """One LSTM step; the weights of ``name`` are shared across time steps."""
    t = tf()
    h, c = state
    with t.compat.v1.variable_scope(name, reuse=t.compat.v1.AUTO_REUSE):
        w = _var("w", [int(x.shape[-1]) + units, 4 * units])
        b = _var("b", [4 * units], init="zeros")
    z = t.matmul(t.concat([x, h], axis=1), w) + b
    i, f, o, g = t.split(z, 4, axis=1)
    c = t.sigmoid(f + 1.0) * c + t.sigmoid(i) * t.tanh(g)
    h = t.sigmoid(o) * t.tanh(c)
    return h, c
