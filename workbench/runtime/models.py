"""Five small sample models, built in code as TensorFlow graphs (no downloads).

Each builder runs inside a ``tf.compat.v1`` graph and returns the scalar training loss of one
step; :func:`workbench.runtime.extraction.build_program` adds the backward pass (``tf.gradients``
under the ``gradients/`` scope) and plain SGD updates (under ``train/``). The input batch lives
in non-trainable variables (``data/x``, ``data/y``) so that a step needs no feed and every node
of the step, inputs included, can be given a device.

============================  =================================================================
``mlp``                       fully connected layers with ReLU, softmax cross-entropy
``resnet_small``              ResNet-style CNN: stem conv, residual blocks (conv-ReLU-conv + skip)
``inception_small``           Inception-style blocks: 1x1 / 3x3 / 5x5 / pool branches, concat
``transformer_small``         Transformer encoder layers: multi-head self-attention, FFN, LayerNorm
``lstm_seq2seq``              two-layer LSTM encoder and decoder, unrolled in time
============================  =================================================================

The models of the papers at their published sizes (ResNet-50, Inception-V3, BERT-base, GNMT,
RNNLM, Transformer base) are in :mod:`workbench.runtime.paper_models` and registered here too.

Sizes are keyword arguments (e.g. ``layers=``, ``width=``); :data:`TINY` holds sizes that keep
tests fast. Node names are deterministic, so a graph extracted once can be rebuilt later to run
plans on it.

>>> sorted(MODELS)  # doctest: +NORMALIZE_WHITESPACE
['bert_base', 'gnmt', 'inception_small', 'inception_v3', 'lstm_seq2seq', 'mlp', 'resnet50',
 'resnet_small', 'rnnlm', 'transformer_base', 'transformer_small']
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ._tf import tf
from .layers import _conv, _data, _dense, _layer_norm, _lstm_cell, _var, _xent
from .paper_models import PAPER_BATCH, PAPER_MODELS, PAPER_TINY

__all__ = [
    "DEFAULT_BATCH",
    "MODELS",
    "TINY",
    "inception_small",
    "lstm_seq2seq",
    "mlp",
    "resnet_small",
    "transformer_small",
]


# ---------------------------------------------------------------------- models
def mlp(batch: int, *, layers: int = 4, width: int = 256, in_dim: int = 256,
        classes: int = 10):
    """Multi-layer perceptron: ``layers`` ReLU layers of ``width`` units and a softmax head."""
    x, y = _data(batch, [in_dim], classes)
    h = x
    for i in range(layers):
        h = _dense(h, width, f"fc{i}")
    return _xent(_dense(h, classes, "head", act=False), y)


def resnet_small(batch: int, *, image: int = 32, channels: int = 16, stages: int = 3,
                 blocks: int = 2, classes: int = 10):
    """ResNet-style CNN: a stem conv, ``stages`` stages of ``blocks`` residual blocks each
    (conv-ReLU-conv + identity or 1x1-projection skip), channels doubling and resolution halving
    per stage, global average pooling and a dense head."""
    t = tf()
    x, y = _data(batch, [image, image, 3], classes)
    h = _conv(x, channels, 3, "stem")
    c = channels
    for s in range(stages):
        for b in range(blocks):
            stride = 2 if (s > 0 and b == 0) else 1
            name = f"s{s}b{b}"
            r = _conv(h, c, 3, f"{name}/conv1", stride=stride)
            r = _conv(r, c, 3, f"{name}/conv2", act=False)
            skip = h if (stride == 1 and int(h.shape[-1]) == c) else _conv(
                h, c, 1, f"{name}/proj", stride=stride, act=False)
            h = t.nn.relu(r + skip, name=f"{name}/out")
        c *= 2
    pooled = t.reduce_mean(h, axis=[1, 2], name="gap")
    return _xent(_dense(pooled, classes, "head", act=False), y)


def inception_small(batch: int, *, image: int = 32, channels: int = 16, blocks: int = 3,
                    classes: int = 10):
    """Inception-style net: a stem conv, then ``blocks`` modules with four parallel branches
    (1x1; 1x1 -> 3x3; 1x1 -> 5x5; 3x3 max-pool -> 1x1) concatenated on channels, a stride-2
    max-pool between modules, global pooling and a dense head."""
    t = tf()
    x, y = _data(batch, [image, image, 3], classes)
    h = _conv(x, channels, 3, "stem")
    c = channels
    for i in range(blocks):
        name = f"inc{i}"
        b1 = _conv(h, c, 1, f"{name}/b1")
        b2 = _conv(_conv(h, c // 2, 1, f"{name}/b2a"), c, 3, f"{name}/b2b")
        b3 = _conv(_conv(h, c // 4, 1, f"{name}/b3a"), c // 2, 5, f"{name}/b3b")
        p = t.nn.max_pool2d(h, 3, 1, "SAME", name=f"{name}/pool")
        b4 = _conv(p, c // 2, 1, f"{name}/b4")
        h = t.concat([b1, b2, b3, b4], axis=-1, name=f"{name}/concat")
        if i < blocks - 1:
            h = t.nn.max_pool2d(h, 2, 2, "VALID", name=f"{name}/down")
        c = int(c * 1.5)
    pooled = t.reduce_mean(h, axis=[1, 2], name="gap")
    return _xent(_dense(pooled, classes, "head", act=False), y)


def transformer_small(batch: int, *, seq: int = 32, d_model: int = 64, heads: int = 4,
                      layers: int = 2, ffn: int = 128, classes: int = 10):
    """Transformer encoder: ``layers`` post-LN layers of multi-head self-attention (separate
    Q/K/V projections, per-head batched matmuls) and a ReLU feed-forward block, mean-pooled
    into a classifier."""
    t = tf()
    x, y = _data(batch, [seq, d_model], classes)
    dh = d_model // heads
    h = x
    for i in range(layers):
        name = f"enc{i}"
        with t.compat.v1.variable_scope(name):
            flat = t.reshape(h, [batch * seq, d_model])

            def split(z, nm):
                z = t.reshape(z, [batch, seq, heads, dh])
                return t.transpose(z, [0, 2, 1, 3], name=nm)

            q = split(_dense(flat, d_model, "q", act=False), "q_heads")
            k = split(_dense(flat, d_model, "k", act=False), "k_heads")
            v = split(_dense(flat, d_model, "v", act=False), "v_heads")
            att = t.nn.softmax(t.matmul(q, k, transpose_b=True) / math.sqrt(dh), name="att")
            ctx = t.reshape(t.transpose(t.matmul(att, v), [0, 2, 1, 3]), [batch * seq, d_model])
            o = _dense(ctx, d_model, "o", act=False)
            h1 = _layer_norm(flat + o, "ln1")
            f = _dense(_dense(h1, ffn, "ffn1"), d_model, "ffn2", act=False)
            h = t.reshape(_layer_norm(h1 + f, "ln2"), [batch, seq, d_model])
    pooled = t.reduce_mean(h, axis=1, name="pool")
    return _xent(_dense(pooled, classes, "head", act=False), y)


def lstm_seq2seq(batch: int, *, steps: int = 8, units: int = 64, in_dim: int = 32,
                 layers: int = 2, classes: int = 16):
    """Sequence-to-sequence model: a ``layers``-layer LSTM encoder over ``steps`` inputs whose
    final states start a ``layers``-layer LSTM decoder (teacher forcing on a shifted target),
    a shared softmax projection at every decoder step. Unrolled in time (no while loops), so
    every cell of every step is an op that can be placed."""
    t = tf()
    x, y = _data(batch, [2 * steps, in_dim], classes)
    zeros = t.zeros([batch, units], name="zero_state")
    states = [(zeros, zeros) for _ in range(layers)]
    for s in range(steps):
        inp = x[:, s, :]
        for layer in range(layers):
            with t.name_scope(f"enc_t{s}_l{layer}"):
                states[layer] = _lstm_cell(inp, states[layer], f"enc_l{layer}", units)
            inp = states[layer][0]
    with t.compat.v1.variable_scope("proj"):
        w = _var("w", [units, classes])
        b = _var("b", [classes], init="zeros")
    losses = []
    for s in range(steps):
        inp = x[:, steps + s, :]
        for layer in range(layers):
            with t.name_scope(f"dec_t{s}_l{layer}"):
                states[layer] = _lstm_cell(inp, states[layer], f"dec_l{layer}", units)
            inp = states[layer][0]
        logits = t.matmul(inp, w) + b
        losses.append(t.nn.softmax_cross_entropy_with_logits(labels=y, logits=logits))
    return t.reduce_mean(t.add_n(losses), name="loss")


MODELS: dict[str, Callable] = {
    "mlp": mlp,
    "resnet_small": resnet_small,
    "inception_small": inception_small,
    "transformer_small": transformer_small,
    "lstm_seq2seq": lstm_seq2seq,
}
"""Model name -> builder ``fn(batch, **sizes) -> loss`` (runs inside a v1 graph)."""

DEFAULT_BATCH = {"mlp": 64, "resnet_small": 16, "inception_small": 16,
                 "transformer_small": 16, "lstm_seq2seq": 32}
"""Batch sizes used for the checked-in sample graphs."""

TINY: dict[str, dict] = {
    "mlp": {"layers": 2, "width": 32, "in_dim": 32},
    "resnet_small": {"image": 8, "channels": 4, "stages": 2, "blocks": 1},
    "inception_small": {"image": 8, "channels": 8, "blocks": 1},
    "transformer_small": {"seq": 8, "d_model": 16, "heads": 2, "layers": 1, "ffn": 32},
    "lstm_seq2seq": {"steps": 2, "units": 8, "in_dim": 8, "layers": 2},
}
"""Sizes that make each model a few hundred ops at most (for tests)."""


# the paper-sized models are registered here (paper_models does not import this module: the
# layer helpers both use are in workbench.runtime.layers)
MODELS.update(PAPER_MODELS)
DEFAULT_BATCH.update(PAPER_BATCH)
TINY.update(PAPER_TINY)
