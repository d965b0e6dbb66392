"""tests/cs336_adapter.py (Stanford CS336 assignment 1's adapter functions, answered by llmlab) on small
inputs, offline: each function against a plain torch version of the assignment's definition, written
here, so that the adapter keeps working when their suite is not at hand (see the adapter's docstring)."""
import io
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import llmlab
from llmlab import ModelConfig

sys.path.insert(0, str(Path(__file__).parent))
import cs336_adapter as cs  # noqa: E402


# ---------------------------------------------------------------- the assignment's definitions, plainly

def rope_interleaved(x, positions, theta):
    """The assignment's RoPE: pair (x_2i, x_2i+1) turns by position * theta^(-2i/d)."""
    d = x.shape[-1]
    angle = positions[..., None].float() * theta ** (-torch.arange(0, d, 2).float() / d)   # (..., T, d/2)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x0 * angle.cos() - x1 * angle.sin()
    out[..., 1::2] = x0 * angle.sin() + x1 * angle.cos()
    return out


def rmsnorm(x, w, eps=1e-5):
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def causal_self_attention(x, wq, wk, wv, wo, n_heads, theta=None, positions=None):
    """Heads are consecutive blocks of rows of wq/wk/wv; causal; RoPE on q and k when theta is given,
    at positions (B, T) (default 0..T-1)."""
    B, T, d = x.shape
    hd = d // n_heads
    q, k, v = [(x @ w.T).view(B, T, n_heads, hd).transpose(1, 2) for w in (wq, wk, wv)]   # (B, H, T, hd)
    if theta is not None:
        positions = torch.arange(T).expand(B, T) if positions is None else positions
        q, k = (rope_interleaved(t, positions[:, None], theta) for t in (q, k))              # same per head
    scores = q @ k.transpose(-2, -1) / math.sqrt(hd)                                       # (B, H, T, T)
    scores = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    z = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, d)                          # (B, T, d)
    return z @ wo.T


def block(x, w, n_heads, theta):
    h = x + causal_self_attention(rmsnorm(x, w["ln1.weight"]), w["attn.q_proj.weight"], w["attn.k_proj.weight"],
                                  w["attn.v_proj.weight"], w["attn.output_proj.weight"], n_heads, theta)
    u = rmsnorm(h, w["ln2.weight"])
    return h + (F.silu(u @ w["ffn.w1.weight"].T) * (u @ w["ffn.w3.weight"].T)) @ w["ffn.w2.weight"].T


D, H, FF, V, L, THETA = 16, 4, 24, 50, 2, 10000.0
CONFIG = ModelConfig(vocab_size=V, d_model=D, n_layers=L, n_heads=H, d_ff=FF)   # for forward_depth only


def block_weights(g):
    shapes = {"attn.q_proj.weight": (D, D), "attn.k_proj.weight": (D, D), "attn.v_proj.weight": (D, D),
              "attn.output_proj.weight": (D, D), "ln1.weight": (D,), "ln2.weight": (D,),
              "ffn.w1.weight": (FF, D), "ffn.w2.weight": (D, FF), "ffn.w3.weight": (FF, D)}
    return {k: torch.randn(s, generator=g) / math.sqrt(s[-1]) + (1.0 if len(s) == 1 else 0.0)
            for k, s in shapes.items()}


# ---------------------------------------------------------------- model pieces

def test_rope_is_the_interleaved_rotation():
    g = torch.Generator().manual_seed(0)
    x, positions = torch.randn(2, 5, 8, generator=g), torch.tensor([3, 0, 7, 1, 2])
    ours = cs.run_rope(8, THETA, 16, x, positions)
    # one rotation of a pair: two products and a sum; the angle itself is computed in float32 by both
    llmlab.assert_same_up_to_rounding(ours, rope_interleaved(x, positions, THETA), depth=2 * 8)
    batched = cs.run_rope(8, THETA, 16, x, positions.expand(2, 5))          # positions per row
    llmlab.assert_same_up_to_rounding(batched, ours, depth=2 * 8)
    heads = torch.randn(2, 3, 5, 8, generator=g)                          # (B, H, T, d), positions (B, 1, T)
    rows = torch.stack([positions, positions + 4])[:, None]
    llmlab.assert_same_up_to_rounding(cs.run_rope(8, THETA, 16, heads, rows), rope_interleaved(heads, rows, THETA),
                                      depth=2 * 8)


def test_attention_block_and_lm_match_the_assignment_s_definitions():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, 6, D, generator=g)
    w = block_weights(g)
    wq, wk, wv, wo = (w[f"attn.{p}_proj.weight"] for p in ("q", "k", "v", "output"))
    depth = llmlab.forward_depth(CONFIG, 6, n_layers=1, head=False)
    llmlab.assert_same_up_to_rounding(cs.run_multihead_self_attention(D, H, wq, wk, wv, wo, x),
                                      causal_self_attention(x, wq, wk, wv, wo, H), depth=depth)
    with_rope = cs.run_multihead_self_attention_with_rope(D, H, 6, THETA, wq, wk, wv, wo, x, torch.arange(6)[None])
    llmlab.assert_same_up_to_rounding(with_rope, causal_self_attention(x, wq, wk, wv, wo, H, THETA), depth=depth)
    shifted = torch.arange(6) + torch.tensor([[0], [3], [10]])          # (B, T): each row starts elsewhere
    llmlab.assert_same_up_to_rounding(
        cs.run_multihead_self_attention_with_rope(D, H, 16, THETA, wq, wk, wv, wo, x, shifted),
        causal_self_attention(x, wq, wk, wv, wo, H, THETA, shifted), depth=depth)
    llmlab.assert_same_up_to_rounding(cs.run_transformer_block(D, H, FF, 6, THETA, w, x), block(x, w, H, THETA),
                                      depth=depth)

    lm = {"token_embeddings.weight": torch.randn(V, D, generator=g), "ln_final.weight": torch.rand(D, generator=g),
          "lm_head.weight": torch.randn(V, D, generator=g) / math.sqrt(D)}
    layers = [block_weights(g) for _ in range(L)]
    lm.update({f"layers.{i}.{k}": t for i, lw in enumerate(layers) for k, t in lw.items()})
    ids = torch.randint(0, V, (2, 5), generator=g)
    h = lm["token_embeddings.weight"][ids]
    for lw in layers:
        h = block(h, lw, H, THETA)
    expected = rmsnorm(h, lm["ln_final.weight"]) @ lm["lm_head.weight"].T
    ours = cs.run_transformer_lm(V, 8, D, L, H, FF, THETA, lm, ids)
    llmlab.assert_same_up_to_rounding(ours, expected, depth=llmlab.forward_depth(CONFIG, 5))
    with pytest.raises(KeyError, match=r"unused \['extra'\]"):           # strict: no tensor left unused
        cs.run_transformer_lm(V, 8, D, L, H, FF, THETA, {**lm, "extra": torch.zeros(1)}, ids)


def test_small_pieces_match_torch():
    g = torch.Generator().manual_seed(2)
    x, w = torch.randn(4, 3, D, generator=g), torch.randn(FF, D, generator=g)
    llmlab.assert_same_up_to_rounding(cs.run_linear(D, FF, w, x), x @ w.T, depth=D)
    table, ids = torch.randn(V, D, generator=g), torch.randint(0, V, (2, 7), generator=g)
    llmlab.assert_same_bits(cs.run_embedding(V, D, table, ids), table[ids])          # a lookup: no arithmetic
    w1, w2, w3 = torch.randn(FF, D, generator=g), torch.randn(D, FF, generator=g), torch.randn(FF, D, generator=g)
    llmlab.assert_same_up_to_rounding(cs.run_swiglu(D, FF, w1, w2, w3, x),
                                      (F.silu(x @ w1.T) * (x @ w3.T)) @ w2.T, depth=D + FF)
    gain = torch.rand(D, generator=g)
    llmlab.assert_same_up_to_rounding(cs.run_rmsnorm(D, 1e-5, gain, x), rmsnorm(x, gain), depth=D)
    llmlab.assert_same_up_to_rounding(cs.run_silu(x), F.silu(x), depth=1)
    llmlab.assert_same_up_to_rounding(cs.run_softmax(x + 100, dim=1), x.softmax(dim=1), depth=3)   # shift-invariant
    q, k, v = (torch.randn(2, 4, 5, 8, generator=g) for _ in range(3))                 # (B, H, T, d)
    mask = torch.rand(2, 4, 5, 5, generator=g) > 0.3
    mask[..., 0] = True                                                                 # every query sees a key
    llmlab.assert_same_up_to_rounding(cs.run_scaled_dot_product_attention(q, k, v, mask),
                                      F.scaled_dot_product_attention(q, k, v, attn_mask=mask), depth=8 + 5)


# ---------------------------------------------------------------- training

def test_cross_entropy_schedule_and_clipping_match_torch():
    g = torch.Generator().manual_seed(3)
    logits, targets = torch.randn(8, 5, generator=g), torch.randint(0, 5, (8,), generator=g)
    for scale in (1.0, 1000.0):                                 # 1000: exp would overflow without the shift
        llmlab.assert_same_up_to_rounding(cs.run_cross_entropy(logits * scale, targets),
                                          F.cross_entropy(logits * scale, targets), depth=5 + 8,
                                          scale=float((logits * scale).abs().max()))

    lrs = [cs.run_get_lr_cosine_schedule(t, 1.0, 0.1, 7, 21) for t in range(25)]
    assert lrs[:8] == [t / 7 for t in range(8)]                 # linear warm-up to max at warmup_iters
    assert lrs[14] == pytest.approx(0.55, abs=1e-12)            # half way down the cosine: (max + min) / 2
    assert lrs[21:] == [0.1] * 4                                # min after cosine_cycle_iters

    params = [torch.nn.Parameter(torch.randn(3, 4, generator=g)) for _ in range(3)]
    copies = [torch.nn.Parameter(p.detach().clone()) for p in params]
    params[-1].requires_grad_(False)                            # a frozen parameter has no gradient
    copies[-1].requires_grad_(False)
    for group in (params, copies):
        sum(p.sum() * (i + 1) for i, p in enumerate(group)).backward()
    cs.run_gradient_clipping(params, 0.01)
    torch.nn.utils.clip_grad_norm_(copies, 0.01)
    assert params[-1].grad is None
    for p, c in zip(params[:-1], copies[:-1]):
        llmlab.assert_same_up_to_rounding(p.grad, c.grad, depth=24)


def test_adamw_steps_like_torch_and_checkpoints_round_trip():
    def run(optimizer_class, **options):
        torch.manual_seed(4)
        model = torch.nn.Linear(3, 2, bias=False)
        opt = optimizer_class(model.parameters(), lr=1e-2, weight_decay=0.01, betas=(0.9, 0.999), eps=1e-8, **options)
        for _ in range(20):
            x = torch.rand(3)
            loss = ((torch.stack([x[0] + x[1], -x[2]]) - model(x)) ** 2).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        return model, opt

    ours, opt = run(cs.get_adamw_cls())
    theirs, _ = run(torch.optim.AdamW, foreach=False)
    llmlab.assert_same_bits(ours.weight, theirs.weight)         # llmlab's AdamW: torch's operations, in order

    saved = io.BytesIO()
    cs.run_save_checkpoint(ours, opt, 20, saved)
    saved.seek(0)
    fresh = torch.nn.Linear(3, 2, bias=False)
    fresh_opt = cs.get_adamw_cls()(fresh.parameters(), lr=1e-2, weight_decay=0.01)
    assert cs.run_load_checkpoint(saved, fresh, fresh_opt) == 20
    llmlab.assert_same_bits(fresh.weight, ours.weight)
    state, loaded = opt.state_dict()["state"][0], fresh_opt.state_dict()["state"][0]
    for key in ("exp_avg", "exp_avg_sq", "step"):
        llmlab.assert_same_bits(loaded[key], state[key])


def test_get_batch_windows_cover_every_start():
    torch.manual_seed(5)
    data = np.arange(20)
    starts = set()
    for _ in range(100):
        x, y = cs.run_get_batch(data, 8, 4, "cpu")
        assert x.shape == y.shape == (8, 4) and x.dtype == torch.int64 and x.device.type == "cpu"
        assert torch.equal(y, x + 1)
        starts.update(x[:, 0].tolist())
    assert starts == set(range(20 - 4))                         # every window that has a next token, no other


# ---------------------------------------------------------------- tokenizer

def test_train_bpe_breaks_ties_to_the_greatest_bytes(tmp_path):
    # chunks "ab", " ab", " cd", " cd", " cd" (GPT-2's pre-split); the special token is cut out first.
    # Counts: (c,d) 3, (" ",c) 3, (a,b) 2, (" ",a) 1. The tie at 3 goes to (c,d) > (" ",c) as bytes;
    # then (" ",cd) 3; then (a,b) 2; then (" ",ab) 1.
    path = tmp_path / "corpus.txt"
    path.write_text("ab ab<|endoftext|> cd cd cd", encoding="utf-8")
    vocab, merges = cs.run_train_bpe(path, 256 + 4 + 1, ["<|endoftext|>"])
    assert merges == [(b"c", b"d"), (b" ", b"cd"), (b"a", b"b"), (b" ", b"ab")]
    assert sorted(vocab) == list(range(261)) and b"<|endoftext|>" in vocab.values()
    assert {b"cd", b" cd", b"ab", b" ab"} <= set(vocab.values())

    tok = cs.get_tokenizer(vocab, merges, ["<|endoftext|>", "<|endoftext|><|endoftext|>"])
    text = "ab cd<|endoftext|><|endoftext|> cdab<|endoftext|>"
    ids = tok.encode(text)
    pieces = [tok.decode([i]) for i in ids]
    assert pieces == ["ab", " cd", "<|endoftext|><|endoftext|>", " cd", "ab", "<|endoftext|>"]   # longest special wins
    assert tok.decode(ids) == text
    assert list(tok.encode_iterable(["ab c", "d<|endof", "text|><|endoftext|> cd", "ab<|endoftext|>"])) == ids
    with pytest.raises(NotImplementedError, match="no counterpart"):
        cs.run_train_bpe(path, 300, [], num_processes=4)
