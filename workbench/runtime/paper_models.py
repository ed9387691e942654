"""The models of the papers, built in code at their published sizes (no downloads, no weights).

Keras applications cannot be built into the ``tf.compat.v1`` graph that extraction needs
(Keras 3 is eager / ``tf.function`` only), so the architectures are written with TensorFlow ops,
layer by layer as published; every builder is ``fn(batch, **sizes) -> loss`` like those of
:mod:`workbench.runtime.models`.

=====================  ========================================================================
``resnet50``           ResNet-50 v1 (He et al., 2016): 224x224, bottlenecks [3, 4, 6, 3], BN
``inception_v3``       Inception-V3 (Szegedy et al., 2016): 299x299, modules A x3, B, C x4, D,
                       E x2, batch-normalised convolutions
``bert_base``          BERT-base encoder: 12 layers, hidden 768, 12 heads, FFN 3072, sequence
                       128, word/position embeddings (vocabulary 30,522), GELU, classifier
``gnmt``               GNMT-style seq2seq (Wu et al., 2016): 4 encoder LSTM layers (the first
                       bidirectional) and 4 decoder layers, residual connections from layer 3,
                       attention fed to the decoder, softmax over the target vocabulary
``rnnlm``              Pesto's RNNLM-2-2048: a 2-layer LSTM language model, 2,048 units
``transformer_base``   Transformer base (Vaswani et al., 2017): 6+6 layers, d_model 512,
                       8 heads, FFN 2048, shared embedding and softmax
=====================  ========================================================================

Recurrent models are unrolled in time (no while loops) so every cell of every step is an op
that can be placed. Sequence lengths and vocabularies of the language models are keyword
arguments; :data:`PAPER_SIZES` lists the sizes of the checked-in samples (vocabularies and
sequence lengths of the LSTM models are reduced so that one step on one CPU core takes
seconds; :data:`PAPER_BATCH` the batches).
"""

from __future__ import annotations

import math

from ._tf import tf
from .layers import _data, _dense, _layer_norm, _lstm_cell, _var, _xent

__all__ = ["PAPER_BATCH", "PAPER_MODELS", "PAPER_SIZES", "PAPER_TINY", "bert_base", "gnmt",
           "inception_v3", "resnet50", "rnnlm", "transformer_base"]


# ---------------------------------------------------------------------- CNN helpers
def _conv_bn(x, filters: int, k, name: str, stride: int = 1, padding: str = "SAME",
             act: bool = True):
    """Convolution (no bias) -> fused batch norm (training mode) -> ReLU."""
    t = tf()
    kh, kw = (k, k) if isinstance(k, int) else k
    with t.compat.v1.variable_scope(name):
        w = _var("w", [kh, kw, int(x.shape[-1]), filters])
        gamma = _var("gamma", [filters], init="ones")
        beta = _var("beta", [filters], init="zeros")
        y = t.nn.conv2d(x, w, strides=stride, padding=padding)
        y, _, _ = t.compat.v1.nn.fused_batch_norm(y, gamma, beta, is_training=True)
        return t.nn.relu(y) if act else y


def _head(h, classes: int, y):
    t = tf()
    pooled = t.reduce_mean(h, axis=[1, 2], name="gap")
    return _xent(_dense(pooled, classes, "fc", act=False), y)


def resnet50(batch: int, *, image: int = 224, classes: int = 1000, width: int = 64,
             blocks=(3, 4, 6, 3)):
    """ResNet-50 v1: 7x7/2 stem, 3x3/2 max-pool, bottleneck stages (1x1, 3x3, 1x1 x4
    channels; projection shortcut on each stage's first block, stride 2 from stage 2),
    global average pooling, ``classes``-way softmax."""
    t = tf()
    x, y = _data(batch, [image, image, 3], classes)
    h = _conv_bn(x, width, 7, "conv1", stride=2)
    h = t.nn.max_pool2d(h, 3, 2, "SAME", name="pool1")
    c = width
    for s, n in enumerate(blocks):
        for b in range(n):
            stride = 2 if (s > 0 and b == 0) else 1
            name = f"res{s + 2}{chr(97 + b)}"
            r = _conv_bn(h, c, 1, f"{name}/a", stride=stride)
            r = _conv_bn(r, c, 3, f"{name}/b")
            r = _conv_bn(r, 4 * c, 1, f"{name}/c", act=False)
            skip = _conv_bn(h, 4 * c, 1, f"{name}/proj", stride=stride, act=False) \
                if b == 0 else h
            h = t.nn.relu(r + skip, name=f"{name}/out")
        c *= 2
    return _head(h, classes, y)


def _inc_a(h, pool: int, name: str):
    t = tf()
    b1 = _conv_bn(h, 64, 1, f"{name}/b1")
    b5 = _conv_bn(_conv_bn(h, 48, 1, f"{name}/b5a"), 64, 5, f"{name}/b5b")
    b3 = _conv_bn(_conv_bn(_conv_bn(h, 64, 1, f"{name}/b3a"), 96, 3, f"{name}/b3b"), 96, 3,
                  f"{name}/b3c")
    bp = _conv_bn(t.nn.avg_pool2d(h, 3, 1, "SAME"), pool, 1, f"{name}/bp")
    return t.concat([b1, b5, b3, bp], -1, name=f"{name}/concat")


def _inc_c(h, c7: int, name: str):
    t = tf()
    b1 = _conv_bn(h, 192, 1, f"{name}/b1")
    b7 = _conv_bn(h, c7, 1, f"{name}/b7a")
    b7 = _conv_bn(_conv_bn(b7, c7, (1, 7), f"{name}/b7b"), 192, (7, 1), f"{name}/b7c")
    d = _conv_bn(h, c7, 1, f"{name}/d7a")
    for i, k in enumerate([(7, 1), (1, 7), (7, 1)]):
        d = _conv_bn(d, c7, k, f"{name}/d7{'bcd'[i]}")
    d = _conv_bn(d, 192, (1, 7), f"{name}/d7e")
    bp = _conv_bn(t.nn.avg_pool2d(h, 3, 1, "SAME"), 192, 1, f"{name}/bp")
    return t.concat([b1, b7, d, bp], -1, name=f"{name}/concat")


def _inc_e(h, name: str):
    t = tf()
    b1 = _conv_bn(h, 320, 1, f"{name}/b1")
    b3 = _conv_bn(h, 384, 1, f"{name}/b3a")
    b3 = t.concat([_conv_bn(b3, 384, (1, 3), f"{name}/b3b"),
                   _conv_bn(b3, 384, (3, 1), f"{name}/b3c")], -1)
    d = _conv_bn(_conv_bn(h, 448, 1, f"{name}/d3a"), 384, 3, f"{name}/d3b")
    d = t.concat([_conv_bn(d, 384, (1, 3), f"{name}/d3c"),
                  _conv_bn(d, 384, (3, 1), f"{name}/d3d")], -1)
    bp = _conv_bn(t.nn.avg_pool2d(h, 3, 1, "SAME"), 192, 1, f"{name}/bp")
    return t.concat([b1, b3, d, bp], -1, name=f"{name}/concat")


def inception_v3(batch: int, *, image: int = 299, classes: int = 1000):
    """Inception-V3 as published (without the auxiliary head): stem of five convolutions and
    two max-pools, 3 x module A (35x35), reduction B, 4 x module C (17x17, factorised 7x7),
    reduction D, 2 x module E (8x8, expanded filter banks), global pooling, softmax."""
    t = tf()
    x, y = _data(batch, [image, image, 3], classes)
    h = _conv_bn(x, 32, 3, "stem/c1", stride=2, padding="VALID")
    h = _conv_bn(h, 32, 3, "stem/c2", padding="VALID")
    h = _conv_bn(h, 64, 3, "stem/c3")
    h = t.nn.max_pool2d(h, 3, 2, "VALID", name="stem/p1")
    h = _conv_bn(h, 80, 1, "stem/c4", padding="VALID")
    h = _conv_bn(h, 192, 3, "stem/c5", padding="VALID")
    h = t.nn.max_pool2d(h, 3, 2, "VALID", name="stem/p2")
    for i, pool in enumerate([32, 64, 64]):
        h = _inc_a(h, pool, f"mixed{i}")
    # reduction B (mixed3)
    r1 = _conv_bn(h, 384, 3, "mixed3/b3", stride=2, padding="VALID")
    r2 = _conv_bn(_conv_bn(_conv_bn(h, 64, 1, "mixed3/d3a"), 96, 3, "mixed3/d3b"), 96, 3,
                  "mixed3/d3c", stride=2, padding="VALID")
    h = t.concat([r1, r2, t.nn.max_pool2d(h, 3, 2, "VALID")], -1, name="mixed3/concat")
    for i, c7 in enumerate([128, 160, 160, 192]):
        h = _inc_c(h, c7, f"mixed{4 + i}")
    # reduction D (mixed8)
    r1 = _conv_bn(_conv_bn(h, 192, 1, "mixed8/b3a"), 320, 3, "mixed8/b3b", stride=2,
                  padding="VALID")
    r2 = _conv_bn(h, 192, 1, "mixed8/b7a")
    r2 = _conv_bn(_conv_bn(r2, 192, (1, 7), "mixed8/b7b"), 192, (7, 1), "mixed8/b7c")
    r2 = _conv_bn(r2, 192, 3, "mixed8/b7d", stride=2, padding="VALID")
    h = t.concat([r1, r2, t.nn.max_pool2d(h, 3, 2, "VALID")], -1, name="mixed8/concat")
    for i in range(2):
        h = _inc_e(h, f"mixed{9 + i}")
    return _head(h, classes, y)


# ---------------------------------------------------------------------- attention models
def _tokens(batch: int, seq: int, vocab: int, name: str):
    """Token ids held in a non-trainable variable (deterministic pattern)."""
    t = tf()
    with t.compat.v1.variable_scope("data"):
        ids = t.compat.v1.get_variable(
            name, initializer=t.range(batch * seq) * 7919 % vocab,
            trainable=False, use_resource=True)
    return t.reshape(t.identity(ids, name=f"data/{name}_value"), [batch, seq])


def _embed(ids, vocab: int, d: int, name: str, table=None):
    t = tf()
    if table is None:
        with t.compat.v1.variable_scope(name):
            table = _var("table", [vocab, d])
    return t.gather(table, ids, name=f"{name}/lookup"), table


def _mha(q_in, kv_in, batch: int, sq: int, sk: int, d: int, heads: int, name: str,
         causal: bool = False):
    """Multi-head attention on flat ``[batch*seq, d]`` inputs -> flat output."""
    t = tf()
    dh = d // heads
    with t.compat.v1.variable_scope(name):
        def split(z, s, nm):
            return t.transpose(t.reshape(z, [batch, s, heads, dh]), [0, 2, 1, 3], name=nm)

        q = split(_dense(q_in, d, "q", act=False), sq, "q_heads")
        k = split(_dense(kv_in, d, "k", act=False), sk, "k_heads")
        v = split(_dense(kv_in, d, "v", act=False), sk, "v_heads")
        s = t.matmul(q, k, transpose_b=True) / math.sqrt(dh)
        if causal:
            mask = t.linalg.band_part(t.ones([sq, sk]), -1, 0)
            s = s + (1.0 - mask) * -1e9
        att = t.nn.softmax(s, name="att")
        ctx = t.reshape(t.transpose(t.matmul(att, v), [0, 2, 1, 3]), [batch * sq, d])
        return _dense(ctx, d, "o", act=False)


def _ffn(x, d: int, ffn: int, name: str, gelu: bool = False):
    t = tf()
    with t.compat.v1.variable_scope(name):
        h = _dense(x, ffn, "in", act=False)
        h = t.nn.gelu(h) if gelu else t.nn.relu(h)
        return _dense(h, d, "out", act=False)


def bert_base(batch: int, *, seq: int = 128, hidden: int = 768, layers: int = 12,
              heads: int = 12, ffn: int = 3072, vocab: int = 30522, classes: int = 2):
    """BERT-base-style encoder: token + position embeddings, ``layers`` post-LN layers of
    multi-head self-attention and a GELU feed-forward block, a tanh pooler on the first
    token and a classifier (the fine-tuning step of the paper)."""
    t = tf()
    ids = _tokens(batch, seq, vocab, "ids")
    _, y = _data(batch, [1], classes)
    emb, _ = _embed(ids, vocab, hidden, "word_emb")
    with t.compat.v1.variable_scope("pos_emb"):
        pos = _var("table", [seq, hidden])
    h = t.reshape(_layer_norm(emb + pos[None], "emb_ln"), [batch * seq, hidden])
    for i in range(layers):
        with t.compat.v1.variable_scope(f"layer{i}"):
            a = _mha(h, h, batch, seq, seq, hidden, heads, "attention")
            h = _layer_norm(h + a, "ln1")
            h = _layer_norm(h + _ffn(h, hidden, ffn, "ffn", gelu=True), "ln2")
    first = t.reshape(h, [batch, seq, hidden])[:, 0, :]
    pooled = t.tanh(_dense(first, hidden, "pooler", act=False))
    return _xent(_dense(pooled, classes, "classifier", act=False), y)


def transformer_base(batch: int, *, src: int = 64, tgt: int = 64, d_model: int = 512,
                     heads: int = 8, layers: int = 6, ffn: int = 2048, vocab: int = 32000):
    """Transformer base: ``layers`` encoder and decoder layers (post-LN), sinusoid-free learnt
    positions, one embedding table shared by source, target and the output softmax;
    cross-entropy of every target position (teacher forcing)."""
    t = tf()
    sid = _tokens(batch, src, vocab, "src")
    tid = _tokens(batch, tgt, vocab, "tgt")
    scale = math.sqrt(d_model)
    e_src, table = _embed(sid, vocab, d_model, "emb")
    e_tgt, _ = _embed(tid, vocab, d_model, "emb_tgt", table=table)
    with t.compat.v1.variable_scope("pos"):
        pos = _var("table", [max(src, tgt), d_model])
    h = t.reshape(e_src * scale + pos[None, :src], [batch * src, d_model])
    for i in range(layers):
        with t.compat.v1.variable_scope(f"enc{i}"):
            h = _layer_norm(h + _mha(h, h, batch, src, src, d_model, heads, "self"), "ln1")
            h = _layer_norm(h + _ffn(h, d_model, ffn, "ffn"), "ln2")
    mem = h
    z = t.reshape(e_tgt * scale + pos[None, :tgt], [batch * tgt, d_model])
    for i in range(layers):
        with t.compat.v1.variable_scope(f"dec{i}"):
            z = _layer_norm(z + _mha(z, z, batch, tgt, tgt, d_model, heads, "self",
                                     causal=True), "ln1")
            z = _layer_norm(z + _mha(z, mem, batch, tgt, src, d_model, heads, "cross"), "ln2")
            z = _layer_norm(z + _ffn(z, d_model, ffn, "ffn"), "ln3")
    logits = t.matmul(z, table, transpose_b=True, name="logits")
    labels = t.reshape(tid, [batch * tgt])
    return t.reduce_mean(t.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits), name="loss")


# ---------------------------------------------------------------------- LSTM models
def _softmax_loss(h, w, b, labels):
    t = tf()
    return t.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                         logits=t.matmul(h, w) + b)


def rnnlm(batch: int, *, steps: int = 20, units: int = 2048, layers: int = 2,
          vocab: int = 10000):
    """Pesto's RNNLM: embedding, ``layers`` stacked LSTM layers of ``units`` unrolled over
    ``steps`` tokens, a softmax over the vocabulary at every step predicting the next token."""
    t = tf()
    ids = _tokens(batch, steps + 1, vocab, "ids")
    emb, _ = _embed(ids, vocab, units, "emb")
    with t.compat.v1.variable_scope("softmax"):
        w = _var("w", [units, vocab])
        b = _var("b", [vocab], init="zeros")
    zeros = t.zeros([batch, units], name="zero_state")
    states = [(zeros, zeros) for _ in range(layers)]
    losses = []
    for s in range(steps):
        inp = emb[:, s, :]
        for layer in range(layers):
            with t.name_scope(f"t{s}_l{layer}"):
                states[layer] = _lstm_cell(inp, states[layer], f"lstm{layer}", units)
            inp = states[layer][0]
        losses.append(_softmax_loss(inp, w, b, ids[:, s + 1]))
    return t.reduce_mean(t.add_n(losses), name="loss")


def gnmt(batch: int, *, src: int = 12, tgt: int = 12, units: int = 512, layers: int = 4,
         vocab: int = 8000):
    """GNMT-style translation model: a bidirectional first encoder layer and ``layers - 1``
    unidirectional ones (residual from the third), ``layers`` decoder layers whose first
    layer takes the previous step's attention context; additive-free (Luong dot) attention of
    the first decoder layer over the encoder outputs; softmax over the target vocabulary."""
    t = tf()
    sid = _tokens(batch, src, vocab, "src")
    tid = _tokens(batch, tgt + 1, vocab, "tgt")
    e_src, _ = _embed(sid, vocab, units, "src_emb")
    e_tgt, _ = _embed(tid, vocab, units, "tgt_emb")
    zeros = t.zeros([batch, units], name="zero_state")
    half = units // 2
    zh = t.zeros([batch, half], name="zero_half")
    fw, bw = (zh, zh), (zh, zh)
    outs_f, outs_b = [None] * src, [None] * src
    for s in range(src):
        with t.name_scope(f"enc_t{s}_fw"):
            fw = _lstm_cell(e_src[:, s, :], fw, "enc_l0_fw", half)
        outs_f[s] = fw[0]
        r = src - 1 - s
        with t.name_scope(f"enc_t{r}_bw"):
            bw = _lstm_cell(e_src[:, r, :], bw, "enc_l0_bw", half)
        outs_b[r] = bw[0]
    outs = [t.concat([outs_f[s], outs_b[s]], 1) for s in range(src)]
    for layer in range(1, layers):
        st = (zeros, zeros)
        new = []
        for s in range(src):
            with t.name_scope(f"enc_t{s}_l{layer}"):
                st = _lstm_cell(outs[s], st, f"enc_l{layer}", units)
            new.append(st[0] + outs[s] if layer >= 2 else st[0])
        outs = new
    memory = t.stack(outs, axis=1, name="enc_memory")  # [batch, src, units]
    with t.compat.v1.variable_scope("softmax"):
        w = _var("w", [units, vocab])
        b = _var("b", [vocab], init="zeros")
    states = [(zeros, zeros) for _ in range(layers)]
    ctx = zeros
    losses = []
    for s in range(tgt):
        inp = t.concat([e_tgt[:, s, :], ctx], 1)
        for layer in range(layers):
            with t.name_scope(f"dec_t{s}_l{layer}"):
                states[layer] = _lstm_cell(inp, states[layer], f"dec_l{layer}", units)
                out = states[layer][0]
                if layer == 0:
                    score = t.squeeze(t.matmul(memory, out[:, :, None]), -1)
                    att = t.nn.softmax(score)
                    ctx = t.reduce_sum(memory * att[:, :, None], axis=1)
                    out = t.concat([out, ctx], 1)
                    with t.compat.v1.variable_scope("att_proj", reuse=t.compat.v1.AUTO_REUSE):
                        wp = _var("w", [2 * units, units])
                    out = t.tanh(t.matmul(out, wp))
            inp = out + inp if layer >= 2 else out
        losses.append(_softmax_loss(inp, w, b, tid[:, s + 1]))
    return t.reduce_mean(t.add_n(losses), name="loss")


PAPER_MODELS = {"resnet50": resnet50, "inception_v3": inception_v3, "bert_base": bert_base,
                "gnmt": gnmt, "rnnlm": rnnlm, "transformer_base": transformer_base}
"""Name -> builder of the paper-sized models."""

PAPER_BATCH = {"resnet50": 2, "inception_v3": 2, "bert_base": 1, "gnmt": 4, "rnnlm": 2,
               "transformer_base": 2}
"""Batches of the checked-in samples: one step takes seconds on one CPU core."""

PAPER_SIZES: dict[str, dict] = {"resnet50": {}, "inception_v3": {}, "bert_base": {},
                                "gnmt": {}, "rnnlm": {}, "transformer_base": {}}
"""Sizes of the checked-in samples (the builders' defaults)."""

PAPER_TINY: dict[str, dict] = {
    "resnet50": {"image": 32, "width": 4, "blocks": (1, 1, 1, 1), "classes": 10},
    "inception_v3": {"image": 75, "classes": 10},
    "bert_base": {"seq": 8, "hidden": 16, "layers": 1, "heads": 2, "ffn": 32, "vocab": 50},
    "gnmt": {"src": 3, "tgt": 2, "units": 8, "layers": 3, "vocab": 20},
    "rnnlm": {"steps": 3, "units": 8, "vocab": 20},
    "transformer_base": {"src": 4, "tgt": 4, "d_model": 16, "heads": 2, "layers": 1,
                         "ffn": 32, "vocab": 30},
}
"""Sizes that make each builder small (for tests)."""
