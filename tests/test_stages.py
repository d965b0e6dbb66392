"""Each stage on its own: worked examples, and the teaching functions against torch's own kernels."""
import math

import pytest
import torch
import torch.nn.functional as F

from llmlab import (ModelConfig, Transformer, assert_same_bits, assert_same_up_to_rounding, available_devices,
                    forward_depth)
from llmlab.attention import (Attention, attention_weights, causal_mask, padding_mask, repeat_kv,
                              scaled_dot_product_attention, sliding_window_mask, softmax)
from llmlab.embedding import TokenEmbedding, embed_tokens
from llmlab.ffn import gelu, relu, silu
from llmlab.kvcache import GrowingKVCache, StaticKVCache
from llmlab.norms import LayerNorm, RMSNorm, layer_norm, rms_norm
from llmlab.numerics import largest_difference, rounding_tolerance
from llmlab.positions import (alibi_bias, alibi_slopes, apply_rope, rope_cos_sin, rope_inv_freq, rotate_half,
                              sinusoidal_encoding)
from llmlab.seq2seq import DecoderBlock, EncoderBlock

DEVICES = available_devices()


# ---------------------------------------------------------------- softmax and masks

def test_softmax_worked_example_and_vs_torch():
    # against exact values: float32 rounds log(3), exp and the sum of 2 terms
    assert_same_up_to_rounding(softmax(torch.tensor([0.0, math.log(3.0)])), torch.tensor([0.25, 0.75]), depth=2)
    x = torch.randn(4, 7) * 30  # large values: the max-subtraction must keep it finite
    # torch's kernel sums the 7 (or 4) exponentials in its own order
    assert_same_up_to_rounding(softmax(x), torch.softmax(x, -1), depth=7)
    assert_same_up_to_rounding(softmax(x, dim=0), torch.softmax(x, 0), depth=4)


def test_masks_worked_examples():
    assert causal_mask(3).tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    assert sliding_window_mask(4, 2).int().tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]]
    assert torch.equal(sliding_window_mask(5, 5), causal_mask(5))  # a window as long as the text = causal
    pm = padding_mask(torch.tensor([[0, 1, 1]]))
    assert pm.shape == (1, 1, 1, 3) and pm.flatten().tolist() == [False, True, True]


def test_teaching_attention_matches_torch_sdpa():
    torch.manual_seed(0)
    q, k, v = torch.randn(3, 2, 2, 5, 8).unbind(0)
    out, w = scaled_dot_product_attention(q, k, v, mask=causal_mask(5))
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    # torch's kernel, another order: scores sum hd = 8 products, the output 5 weighted values
    assert_same_up_to_rounding(out, ref, depth=8 + 5)
    assert_same_up_to_rounding(w.sum(-1), torch.ones(2, 2, 5), depth=5)  # 5 weights, each rounded, sum to 1
    assert (w[..., 0, 1:] == 0).all()  # the first token can only see itself


def test_repeat_kv_is_repeat_interleave():
    x = torch.randn(2, 3, 4, 5)
    assert torch.equal(repeat_kv(x, 3), x.repeat_interleave(3, dim=1))


# ---------------------------------------------------------------- positions

def test_rope_rotation_worked_example():
    cos, sin = rope_cos_sin(3, 2, base=10000.0)  # head_dim 2: one pair, angle = position radians
    # inv_freq is exactly 1 here, so the angles are exact; cos on a (3, 2) table and on (3,) may take
    # another vectorised path: one rounding
    assert_same_up_to_rounding(cos[:, 0], torch.cos(torch.arange(3.0)), depth=1)
    x = torch.tensor([[1.0, 0.0]] * 3)
    y = apply_rope(x, cos, sin)
    # x * cos + rotate_half(x) * sin adds 2 terms, against math.cos / math.sin in float64
    assert_same_up_to_rounding(y[1], torch.tensor([math.cos(1.0), math.sin(1.0)]), depth=2)
    assert torch.equal(rotate_half(torch.tensor([1.0, 2.0, 3.0, 4.0])), torch.tensor([-3.0, -4.0, 1.0, 2.0]))


def test_rope_score_depends_only_on_relative_position():
    torch.manual_seed(0)
    q, k = torch.randn(16), torch.randn(16)
    cos, sin = rope_cos_sin(40, 16)
    rot = lambda x, p: apply_rope(x[None], cos[p:p + 1], sin[p:p + 1])[0]  # noqa: E731
    s1 = rot(q, 7) @ rot(k, 3)
    s2 = rot(q, 30) @ rot(k, 26)  # same distance 4
    s3 = rot(q, 30) @ rot(k, 20)  # distance 10
    # the same score from other angles (position 30's angle is rounded at 30x the size of 7's): a dot
    # product of 16 terms, each at most |q||k| in size together (Cauchy-Schwarz), so that is the scale
    terms = float(q.norm() * k.norm())
    assert_same_up_to_rounding(s1, s2, depth=16, scale=terms)
    assert largest_difference(s1, s3) > 1e-2  # another distance: a real difference, far beyond rounding
    # rotations keep lengths: a sum of 16 squares before and after the rotation
    assert_same_up_to_rounding(rot(q, 11).norm(), q.norm(), depth=16)


def test_rope_partial_leaves_tail_alone():
    x = torch.randn(1, 2, 3, 8)
    cos, sin = rope_cos_sin(3, 4)
    y = apply_rope(x, cos, sin)
    assert torch.equal(y[..., 4:], x[..., 4:]) and not torch.equal(y[..., :4], x[..., :4])


def test_llama3_rope_scaling_bands():
    base = rope_inv_freq(64, 500000.0)
    scaled = rope_inv_freq(64, 500000.0, {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                          "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})
    wavelen = 2 * math.pi / base
    assert torch.equal(scaled[wavelen < 8192 / 4], base[wavelen < 8192 / 4])          # fast pairs untouched
    # slow pairs 8x slower: the same inv_freq divided by 8, a power of two, which is exact
    assert_same_bits(scaled[wavelen > 8192], base[wavelen > 8192] / 8)
    mid = (wavelen >= 8192 / 4) & (wavelen <= 8192)
    assert mid.any() and ((scaled[mid] < base[mid]) & (scaled[mid] > base[mid] / 8)).all()


def test_masks_after_a_cache_are_the_last_rows_of_the_full_masks():
    """With `start` positions cached, the masks for the next T queries are rows start.. of the full ones."""
    for start, T in [(0, 4), (3, 2), (5, 1)]:
        n = start + T
        assert torch.equal(causal_mask(T, start=start), causal_mask(n)[start:])
        assert torch.equal(sliding_window_mask(T, 3, start=start), sliding_window_mask(n, 3)[start:])
        assert torch.equal(alibi_bias(4, T, start=start), alibi_bias(4, n)[:, start:])


def test_sinusoidal_and_alibi_worked_examples():
    pe = sinusoidal_encoding(2, 4)
    # against float64 math: base ** (-2i/d), the angle and sin/cos each round once in float32
    assert_same_up_to_rounding(pe, torch.tensor([[0.0, 1.0, 0.0, 1.0],
                                                 [math.sin(1), math.cos(1), math.sin(0.01), math.cos(0.01)]]),
                               depth=3)
    # powers of two are exact in binary floating point: 2^(-8/8) = 0.5, and 0.5 ** k is exact
    assert_same_bits(alibi_slopes(8), torch.tensor([2.0 ** -(i + 1) for i in range(8)]))
    assert alibi_slopes(6).shape == (6,)
    b = alibi_bias(2, 3)
    # small integer distances times the slope 2^-4: every product is exact
    assert_same_bits(b[0], torch.tensor([[0.0, 1, 2], [-1, 0, 1], [-2, -1, 0]]) * 2 ** -4)


# ---------------------------------------------------------------- norms, activations, embedding

def test_norms_match_torch():
    torch.manual_seed(0)
    x, w, b = torch.randn(2, 3, 16) * 3 + 1, torch.randn(16), torch.randn(16)
    # torch's fused kernels and the formula written out: the same mean and variance of 16 values, summed
    # in another order
    assert_same_up_to_rounding(layer_norm(x, w, b, 1e-5), F.layer_norm(x, (16,), w, b, 1e-5), depth=16)
    ln = LayerNorm(16)
    with torch.no_grad():
        ln.weight.copy_(w)
        ln.bias.copy_(b)
    assert_same_up_to_rounding(ln(x), layer_norm(x, w, b, 1e-5), depth=16)
    ref = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
    assert_same_up_to_rounding(rms_norm(x, w, 1e-6), ref, depth=16)
    if hasattr(F, "rms_norm"):
        assert_same_up_to_rounding(rms_norm(x, w, 1e-6), F.rms_norm(x, (16,), w, 1e-6), depth=16)
    # Gemma's (1 + w): a zero weight is the identity scaling (the module runs torch's fused kernel)
    assert_same_up_to_rounding(RMSNorm(16, 1e-6, unit_offset=True)(x), rms_norm(x, torch.ones(16), 1e-6), depth=16)
    # bit for bit: both compute 1 + w and multiply it with the same normalised x (a product of two
    # numbers is the same whichever comes first)
    assert_same_bits(rms_norm(x, w, 1e-6, unit_offset=True), rms_norm(x, 1 + w, 1e-6))


def test_norm_in_bf16_uses_float32_statistics():
    x = (torch.randn(4, 64) * 50).bfloat16()
    y = rms_norm(x, torch.ones(64, dtype=torch.bfloat16), 1e-6)
    assert y.dtype == torch.bfloat16
    # bit for bit: x.float() is exact, so the bf16 call runs the float32 computation itself and rounds
    # once to bf16 at the end (times a weight of ones, exact); statistics in bf16 would not match this
    assert_same_bits(y, rms_norm(x.float(), torch.ones(64), 1e-6).bfloat16())


def test_activations_match_torch():
    x = torch.linspace(-6, 6, 101)
    assert torch.equal(relu(x), F.relu(x))
    # elementwise formulas against torch's kernels (erf, tanh, exp implemented their own way): a few
    # roundings per value, no sums; depth 4 counts the operations of the longest (the tanh form)
    assert_same_up_to_rounding(gelu(x), F.gelu(x), depth=4)
    assert_same_up_to_rounding(gelu(x, "tanh"), F.gelu(x, approximate="tanh"), depth=4)
    assert_same_up_to_rounding(silu(x), F.silu(x), depth=4)


def test_embedding_lookup_and_scale():
    table = torch.arange(6.0).reshape(3, 2)
    assert embed_tokens(torch.tensor([[2, 0]]), table).tolist() == [[[4.0, 5.0], [0.0, 1.0]]]
    emb = TokenEmbedding(3, 2, scale=2.0)
    with torch.no_grad():
        emb.weight.copy_(table)
    assert torch.equal(emb(torch.tensor([[1]])), embed_tokens(torch.tensor([[1]]), table, 2.0))


# ---------------------------------------------------------------- eager vs sdpa (the two attention paths)

def _model(device, **overrides):
    torch.manual_seed(0)
    cfg = ModelConfig(**{**ModelConfig.preset("tiny-llama").to_dict(), **overrides})
    return Transformer(cfg).to(device).eval()


@pytest.mark.parametrize("device", DEVICES, ids=str)
@pytest.mark.parametrize("overrides", [
    dict(),                                                      # GQA
    dict(n_kv_heads=4),                                          # MHA
    dict(n_kv_heads=1),                                          # MQA
    dict(sliding_window=3, layer_types=["sliding", "full"]),     # sliding window
    dict(positions="alibi"),
    dict(positions="sinusoidal", block="post", norm="layer", ffn="mlp", activation="relu"),
    dict(block="sandwich", qk_norm=True, norm_unit_offset=True, embed_scale=5.0, ffn="geglu",
         activation="gelu_tanh", query_pre_attn_scalar=10, rope_local_theta=100.0, sliding_window=4,
         layer_types=["sliding", "full"]),
], ids=["gqa", "mha", "mqa", "sliding", "alibi", "post-sinusoidal", "gemma-like"])
def test_eager_and_sdpa_agree(device, overrides):
    model = _model(device, **overrides)
    ids = torch.randint(0, 128, (2, 11), device=device)
    with torch.no_grad():
        a, b = model(ids, attn_impl="eager"), model(ids, attn_impl="sdpa")
    # two attention kernels: the same model, its sums in another order
    assert_same_up_to_rounding(a, b, depth=forward_depth(model.config, 11))


@pytest.mark.parametrize("device", DEVICES, ids=str)
def test_eager_and_sdpa_agree_with_padding(device):
    model = _model(device, sliding_window=3, layer_types=["sliding", "full"])
    ids = torch.randint(0, 128, (2, 9), device=device)
    mask = torch.ones(2, 9, dtype=torch.long, device=device)
    mask[0, :4] = 0  # left padding in row 0
    with torch.no_grad():
        a = model(ids, attn_impl="eager", attention_mask=mask)
        b = model(ids, attn_impl="sdpa", attention_mask=mask)
        alone = model(ids[:1, 4:])  # row 0 without its padding
    depth = forward_depth(model.config, 9)
    assert_same_up_to_rounding(a, b, depth=depth)  # two attention kernels, another order
    # padding changes nothing for real tokens, up to rounding: other shapes, other kernel blocking
    assert_same_up_to_rounding(a[0, 4:], alone[0], depth=depth)


def test_model_masks_are_the_teaching_masks():
    model = _model("cpu", sliding_window=3, layer_types=["sliding", "full"])
    masks = model.attention_masks(0, 6, None, "cpu")
    assert torch.equal(masks["full"], causal_mask(6))
    assert torch.equal(masks["sliding"], sliding_window_mask(6, 3))
    # decoding position 5 with 5 cached: the window keeps keys 3, 4, 5
    dec = model.attention_masks(5, 1, None, "cpu")
    assert dec["full"] is None and dec["sliding"].tolist() == [[False] * 3 + [True] * 3]


def test_attention_weights_reach_hook_pattern():
    model = _model("cpu")
    seen = {}
    h = model.blocks[1].attn.hook_pattern.register_forward_hook(lambda m, i, o: seen.setdefault("w", o))
    with torch.no_grad():
        model(torch.tensor([[1, 2, 3, 4]]), attn_impl="eager")
    h.remove()
    w = seen["w"]
    assert w.shape == (1, 4, 4, 4)
    assert_same_up_to_rounding(w.sum(-1), torch.ones(1, 4, 4), depth=4)  # 4 rounded weights sum to 1
    assert torch.equal(w[0, 0] > 0, causal_mask(4))


def test_hook_shapes_and_replacement():
    model = _model("cpu", n_kv_heads=2)
    shapes = {}
    handles = [m.register_forward_hook(lambda m, i, o, n=n: shapes.__setitem__(n, tuple(o.shape)))
               for n, m in model.named_modules() if n.split(".")[-1].startswith("hook_")]
    with torch.no_grad():
        model(torch.tensor([[1, 2, 3]]), attn_impl="eager")
    for h in handles:
        h.remove()
    d, hd = 32, 8
    assert shapes["hook_embed"] == (1, 3, d) and shapes["hook_logits"] == (1, 3, 128)
    assert shapes["blocks.0.attn.hook_q"] == (1, 4, 3, hd) and shapes["blocks.0.attn.hook_k"] == (1, 2, 3, hd)
    assert shapes["blocks.0.attn.hook_v"] == (1, 2, 3, hd) and shapes["blocks.0.attn.hook_z"] == (1, 3, 4, hd)
    assert shapes["blocks.1.attn.hook_pattern"] == (1, 4, 3, 3)
    assert shapes["blocks.1.mlp.hook_pre"] == (1, 3, 64) and shapes["blocks.1.mlp.hook_post"] == (1, 3, 64)
    for name in ["hook_resid_pre", "hook_attn_out", "hook_resid_mid", "hook_mlp_out", "hook_resid_post"]:
        assert shapes[f"blocks.1.{name}"] == (1, 3, d)
    assert shapes["hook_final_norm"] == (1, 3, d)
    # a hook that returns a tensor replaces the value: zeroing block 1's attention output changes logits
    ids = torch.tensor([[1, 2, 3]])
    with torch.no_grad():
        base = model(ids)
        h = model.blocks[1].hook_attn_out.register_forward_hook(lambda m, i, o: torch.zeros_like(o))
        ablated = model(ids)
        h.remove()
    # a real change, not rounding: beyond what float32 allows over the whole model
    assert largest_difference(base, ablated) > rounding_tolerance(base, forward_depth(model.config, 3))


def test_residual_stream_adds_up_and_unembed_is_the_lens():
    model = _model("cpu")
    acts = {}
    hs = [m.register_forward_hook(lambda m, i, o, n=n: acts.__setitem__(n, o))
          for n, m in model.named_modules() if n.endswith(("hook_resid_pre", "hook_attn_out", "hook_resid_mid",
                                                           "hook_mlp_out", "hook_resid_post"))]
    with torch.no_grad():
        logits = model(torch.tensor([[5, 6, 7]]))
        for h in hs:
            h.remove()
        b = "blocks.1."
        # bit for bit: the block computes exactly these additions of the hooked tensors
        assert_same_bits(acts[b + "hook_resid_mid"], acts[b + "hook_resid_pre"] + acts[b + "hook_attn_out"])
        assert_same_bits(acts[b + "hook_resid_post"], acts[b + "hook_resid_mid"] + acts[b + "hook_mlp_out"])
        # bit for bit: unembed runs the final norm and LM head the forward pass ran, on the same tensor
        assert_same_bits(model.unembed(acts[b + "hook_resid_post"]), logits)


# ---------------------------------------------------------------- KV caches

def test_caches_share_interface_and_contents():
    g, s = GrowingKVCache(2), StaticKVCache(2, max_len=8)
    for T in (3, 1, 1):
        k, v = torch.randn(1, 2, T, 4), torch.randn(1, 2, T, 4)
        for layer in range(2):
            kg, vg = g.update(layer, k, v)
            ks, vs = s.update(layer, k, v)
            assert torch.equal(kg, ks) and torch.equal(vg, vs)
    assert g.seq_len == s.seq_len == 5
    with pytest.raises(ValueError, match="max_len=8"):
        for _ in range(4):
            s.update(0, torch.randn(1, 2, 1, 4), torch.randn(1, 2, 1, 4))
            s.update(1, torch.randn(1, 2, 1, 4), torch.randn(1, 2, 1, 4))


# ---------------------------------------------------------------- encoder and cross-attention decoder blocks

def test_encoder_and_decoder_blocks():
    torch.manual_seed(0)
    cfg = ModelConfig(d_model=32, n_heads=4, d_ff=64, norm="layer", ffn="mlp", activation="relu", positions="none")
    enc, dec = EncoderBlock(cfg).eval(), DecoderBlock(cfg).eval()
    src = torch.randn(2, 6, 32)
    src_mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]])
    tgt = torch.randn(2, 4, 32)
    with torch.no_grad():
        memory = enc(src, src_mask)
        out = dec(tgt, memory, src_mask)
        assert memory.shape == (2, 6, 32) and out.shape == (2, 4, 32)
        # bidirectional: changing the last source token changes the first encoder output
        src2 = src.clone()
        src2[:, -1] += torch.randn(32)
        assert largest_difference(enc(src2, src_mask)[0, 0], memory[0, 0]) > 1e-3  # a real change
        # padding: changing padded source tokens changes neither the real encoder outputs nor the decoder.
        # Bit for bit: the same shapes run the same kernels; a masked key gets weight exactly 0 (exp of
        # the most negative float), and 0 * v adds exactly nothing whatever v is
        assert_same_bits(enc(src2, src_mask)[1, :4], memory[1, :4])
        assert_same_bits(dec(tgt, enc(src2, src_mask), src_mask)[1], out[1])
        # causal decoder: changing a later target token leaves earlier outputs alone (bit for bit, as above)
        tgt2 = tgt.clone()
        tgt2[:, 3] += torch.randn(32)
        out2 = dec(tgt2, memory, src_mask)
        assert_same_bits(out2[:, :3], out[:, :3])
        assert largest_difference(out2[:, 3], out[:, 3]) > 1e-3  # a real change
        # cross-attention weights are (B, heads, T_tgt, T_src) and ignore padding
        seen = {}
        h = dec.cross_attn.hook_pattern.register_forward_hook(lambda m, i, o: seen.setdefault("w", o))
        dec(tgt, memory, src_mask)
        h.remove()
        assert seen["w"].shape == (2, 4, 4, 6) and (seen["w"][1, ..., 4:] == 0).all()


def test_attention_module_alone_matches_teaching_function():
    torch.manual_seed(0)
    cfg = ModelConfig(d_model=16, n_heads=2, positions="none")
    attn = Attention(cfg).eval()
    x = torch.randn(1, 5, 16)
    with torch.no_grad():
        q = attn.q_proj(x).view(1, 5, 2, 8).transpose(1, 2)
        k = attn.k_proj(x).view(1, 5, 2, 8).transpose(1, 2)
        v = attn.v_proj(x).view(1, 5, 2, 8).transpose(1, 2)
        z, _ = scaled_dot_product_attention(q, k, v, causal_mask(5))
        ref = attn.o_proj(z.transpose(1, 2).reshape(1, 5, 16))
        # bit for bit: the module's eager path calls these very functions on the same shapes, with the
        # same scale (head_dim ** -0.5)
        assert_same_bits(attn(x, mask=causal_mask(5), attn_impl="eager"), ref)
        assert_same_up_to_rounding(attention_weights(q, k, causal_mask(5)).sum(-1), torch.ones(1, 2, 5), depth=5)


@pytest.mark.parametrize("unit_offset", [False, True])
def test_rms_norm_module_fast_path_equals_formula(unit_offset):
    torch.manual_seed(0)
    norm = RMSNorm(64, 1e-6, unit_offset)
    with torch.no_grad():
        norm.weight.normal_()
    x = torch.randn(3, 5, 64) * 4
    # torch's fused kernel against the formula: a mean of 64 squares in another order
    assert_same_up_to_rounding(norm(x), rms_norm(x, norm.weight, 1e-6, unit_offset), depth=64)
    norm16 = norm.to(torch.bfloat16)  # in bf16 the module runs the formula itself
    assert torch.equal(norm16(x.bfloat16()), rms_norm(x.bfloat16(), norm16.weight, 1e-6, unit_offset))


# ---------------------------------------------------------------- the model uses the chapters' functions

def test_the_model_calls_the_mask_functions_the_chapters_teach(monkeypatch):
    """Transformer.attention_masks and forward build their masks and ALiBi bias with causal_mask,
    sliding_window_mask, padding_mask and alibi_bias, not copies of them: replace each with a
    counting wrapper and run the model."""
    import llmlab.model as model_module

    calls = {}
    for name in ("causal_mask", "sliding_window_mask", "padding_mask", "alibi_bias"):
        original = getattr(model_module, name)

        def counted(*args, _name=name, _original=original, **kwargs):
            calls[_name] = calls.get(_name, 0) + 1
            return _original(*args, **kwargs)
        monkeypatch.setattr(model_module, name, counted)
    sliding = _model("cpu", sliding_window=3, layer_types=["sliding", "full"])
    sliding(torch.tensor([[1, 2, 3, 4]]), attention_mask=torch.tensor([[0, 1, 1, 1]]))
    _model("cpu", positions="alibi")(torch.tensor([[1, 2, 3]]))
    assert set(calls) == {"causal_mask", "sliding_window_mask", "padding_mask", "alibi_bias"}


# ---------------------------------------------------------------- RoPE tables

def test_rope_tables_cached_under_inference_mode_work_with_gradients():
    """generate() runs under inference_mode; the RoPE tables it caches must still serve a later
    forward pass that records gradients (an inference tensor cannot be saved for backward)."""
    from llmlab import generate

    model = _model("cpu")
    generate(model, torch.tensor([[1, 2, 3]]), max_new_tokens=2)
    assert not any(t.is_inference() for pair in model.rope._tables.values() for t in pair)
    loss = model(torch.tensor([[1, 2, 3, 4]])).logsumexp(-1).mean()
    loss.backward()
    assert model.blocks[0].attn.q_proj.weight.grad is not None


def test_rotary_embedding_position_ids_1d_and_2d():
    from llmlab.positions import RotaryEmbedding

    rope = RotaryEmbedding(8)
    T = 4
    plain = rope(3, T, "cpu", torch.float32)                                  # positions 3..6, (T, 8)
    one_d = rope(0, T, "cpu", torch.float32, torch.arange(3, 3 + T))          # (T,): the same for every row
    two_d = rope(0, T, "cpu", torch.float32, torch.arange(3, 3 + T)[None].expand(2, T))  # (B, 1, T, 8)
    for got in (one_d, two_d):
        for table, expected in zip(got, plain):                               # cos, then sin
            assert torch.equal(table, expected.expand_as(table))
    assert one_d[0].shape == (T, 8) and two_d[0].shape == (2, 1, T, 8)
    # T equal to the head count used to broadcast a (T,) table over heads instead of positions
    q = torch.randn(1, T, T, 8)                                               # (B, n_heads = T, T, hd)
    assert torch.equal(apply_rope(q, *one_d), apply_rope(q, *plain))
    for bad in (torch.arange(T)[None, :, None], torch.arange(T + 1), torch.arange(T).float(), torch.arange(-1, T - 1)):
        with pytest.raises(ValueError, match="position_ids"):
            rope(0, T, "cpu", torch.float32, bad)
