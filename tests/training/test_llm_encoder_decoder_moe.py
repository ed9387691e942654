"""The encoder-decoder (T5) and mixture-of-experts (Mixtral) builders of
workbench/costs/llm.py: specs, their non-uniform layers, and the check against the same models
built by transformers (random weights, no download) and captured by from_torch."""

from functools import lru_cache

import pytest

from workbench.costs.llm import PRESETS, chain, parse_spec
from workbench.costs.llm_graph import training_graph
from workbench.errors import GraphError

T5_SMALL = "t5:layers=2,dec_layers=2,hidden=128,heads=4,seq=64,dec_seq=32,mbs=2,vocab=1000"
MOE_SMALL = ("moe:layers=2,hidden=128,heads=4,kv_heads=2,seq=64,mbs=2,vocab=1000,ffn=256,"
             "experts=4,topk=2")


def _flops(g, kinds=("fwd", "bwd", "update")):
    return sum(g.op(v).get("flops", 0.0) for v in g.ops if g.op(v)["kind"] in kinds)


CAPTURES = pytest.mark.xdist_group("llm_captures")
"""The tests that read :func:`_captured` share a worker, so each model is captured once (they are
slow: transformers' import and the T5 capture took 20 s in `make check`, the MoE's 7 s)."""


@lru_cache(maxsize=None)
def _captured(spec):
    """The same model built with transformers, captured (roofline only) by from_torch."""
    torch = pytest.importorskip("torch")
    tr = pytest.importorskip("transformers")
    from workbench.io.torch import from_torch

    c = parse_spec(spec)
    if c.arch == "t5":
        hf = tr.T5Config(vocab_size=c.vocab, d_model=c.hidden, d_kv=c.hidden // c.heads,
                         d_ff=c.ffn, num_layers=c.layers, num_decoder_layers=c.dec_layers,
                         num_heads=c.heads, feed_forward_proj="relu", dropout_rate=0.0,
                         use_cache=False, tie_word_embeddings=True, decoder_start_token_id=0,
                         pad_token_id=0, eos_token_id=1)
        inner = tr.T5ForConditionalGeneration(hf)
    else:
        # "batched_mm": every expert's matmul over a fixed-shape batch (the capture cannot
        # follow the eager loop's data-dependent token counts)
        hf = tr.MixtralConfig(vocab_size=c.vocab, hidden_size=c.hidden,
                              intermediate_size=c.ffn, num_hidden_layers=c.layers,
                              num_attention_heads=c.heads, num_key_value_heads=c.kv_heads,
                              num_local_experts=c.experts, num_experts_per_tok=c.topk,
                              max_position_embeddings=c.seq, use_cache=False,
                              attn_implementation="eager", experts_implementation="batched_mm",
                              bos_token_id=0, eos_token_id=0, pad_token_id=0)
        inner = tr.MixtralForCausalLM(hf)

    class Logits(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = inner

        def forward(self, x, y=None):
            if y is None:
                return self.model(input_ids=x, attention_mask=torch.ones_like(x)).logits
            return self.model(input_ids=x, attention_mask=torch.ones_like(x),
                              decoder_input_ids=y,
                              decoder_attention_mask=torch.ones_like(y)).logits

    x = torch.randint(0, c.vocab, (c.mbs, c.seq))
    inputs = (x, torch.randint(0, c.vocab, (c.mbs, c.dec_seq))) if c.arch == "t5" else (x,)
    n_params = sum(p.numel() for p in inner.parameters())
    cap = from_torch(Logits(), inputs, optimizer="adam", profile=None, loss="cross_entropy")
    # torch's own FLOP counter on a real forward + backward: its matmul FLOPs
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        Logits()(*inputs).float().pow(2).mean().backward()
    mm = counter.get_flop_counts()["Global"].get(torch.ops.aten.mm, 0)
    return c, n_params, cap, mm


@CAPTURES
@pytest.mark.slow
def test_t5_matmuls_match_torch_flop_counter():
    """Every matmul of the encoder-decoder (forward and backward) as torch counts them on a
    real backward pass (exact: same shapes)."""
    c, _, cap, mm = _captured(T5_SMALL)
    ours = sum(o.flops + o.bwd_flops for o in chain(c) if o.op_type == "MatMul")
    assert abs(ours / mm - 1) < 1e-9, (ours, mm)


@CAPTURES
@pytest.mark.slow
@pytest.mark.parametrize("spec", [T5_SMALL, MOE_SMALL])
def test_builder_matches_torch_capture(spec):
    """FLOPs of forward + backward + Adam, and of the forward, within 2 %; parameters within
    1 % of the torch model's (its own count) and of the captured parameter bytes.

    The capture of the T5 model records one backward matmul for the LM head tied to the
    shared embedding, where a real backward runs two (the input's and the weight's
    gradients: torch's FlopCounterMode counts both, and our matmuls equal its count,
    :func:`test_t5_matmuls_match_torch_flop_counter`); its matmul FLOPs are taken from
    torch's counter here."""
    c, n_params, cap, mm = _captured(spec)
    ours = training_graph(parse_spec(spec + ",precision=fp32"))
    cap_flops = _flops(cap)
    if c.arch == "t5":
        cap_flops += mm - sum(cap.op(v).get("flops", 0.0) for v in cap.ops
                              if cap.op(v).get("op_type") == "aten::mm")
    assert abs(_flops(ours) / cap_flops - 1) < 0.02, (_flops(ours), cap_flops)
    assert abs(_flops(ours, ("fwd",)) / _flops(cap, ("fwd",)) - 1) < 0.02
    assert abs(c.params() / n_params - 1) < 0.01, (c.params(), n_params)
    param_bytes = sum(ours.op(v).get("param_bytes", 0.0) for v in ours.ops)
    assert abs(param_bytes / cap.meta["param_bytes"] - 1) < 0.01


@pytest.mark.parametrize("bad, msg", [
    ("t5:experts=4", "moe models only"), ("llama:dec_layers=2", "t5 models only"),
    ("moe:experts=2,topk=3", "exceeds"), ("t5:dec_layers=-1", "non-negative"),
    ("moe:8x7b,moe_every=x", "integer"), ("bart:layers=2", "unknown model")])
def test_bad_specs(bad, msg):
    with pytest.raises(GraphError, match=msg):
        parse_spec(bad)


def test_presets_and_round_trip():
    assert PRESETS["t5:large"].params() == 737_668_096        # as released (tied head)
    assert PRESETS["t5:base"].params() == 222_903_552
    assert abs(PRESETS["moe:8x7b"].params() / 46.7e9 - 1) < 0.01
    for spec in (T5_SMALL, MOE_SMALL, "t5:large,layers=6", "moe:8x7b,moe_every=2"):
        c = parse_spec(spec)
        assert parse_spec(c.spec) == c
    assert parse_spec("t5:large,layers=6").dec_layers == 6     # derived unless given
    assert parse_spec("t5:large,layers=6,dec_layers=2").dec_layers == 2


def test_cli_takes_the_new_models(capsys):
    from workbench.cli import main

    assert main(["info", T5_SMALL]) in (0, None)
    assert "t5:" in capsys.readouterr().out
    assert main(["train", MOE_SMALL, "--cluster", "8xA100-80g", "--tp", "2", "--pp", "2",
                 "--gpus", "4", "--global-batch", "8"]) in (0, None)
    assert "step" in capsys.readouterr().out
    assert main(["train", "moe:experts=2,topk=3", "--global-batch", "8"]) == 2
    assert "error: moe:experts=2,topk=3" in capsys.readouterr().err
