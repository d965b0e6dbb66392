"""Checks for the exercises inside a block: the gated FFN (ch. 6), the norms (ch. 7), the pre-norm
residual block (ch. 8)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from llmlab.exercises.compare import expect_tensor
from llmlab.exercises.core import Learner, generator
from llmlab.exercises.messages import say


def check_swiglu(fn: Learner) -> str:
    """swiglu(x, w_gate, w_up, w_down) = (silu(x @ w_gate) * (x @ w_up)) @ w_down,
    with w_gate, w_up (d, d_ff) and w_down (d_ff, d)."""
    g = generator(19)
    for B, T, d, d_ff in [(1, 2, 4, 8), (2, 3, 6, 16)]:
        x = torch.randn(B, T, d, generator=g)
        w_gate, w_up = torch.randn(d, d_ff, generator=g), torch.randn(d, d_ff, generator=g)
        w_down = torch.randn(d_ff, d, generator=g)
        got = fn(x, w_gate, w_up, w_down, names=("x", "w_gate", "w_up", "w_down"))
        gate, up = x @ w_gate, x @ w_up            # (B, T, d_ff) each
        expect_tensor(fn, got, (F.silu(gate) * up) @ w_down, atol=1e-4, mistakes=[
            (say("SiLU went on the wrong branch: it acts on the gate (x @ w_gate), and the up projection stays linear."),
             (gate * F.silu(up)) @ w_down),
            (say("you used GELU: that is GeGLU (Gemma). SwiGLU uses SiLU, x * sigmoid(x)."), (F.gelu(gate) * up) @ w_down),
            (say("you used ReLU; SwiGLU uses SiLU, x * sigmoid(x) (torch.nn.functional.silu)."),
             (F.relu(gate) * up) @ w_down),
            (say("the activation is missing: the gate is silu(x @ w_gate), not x @ w_gate."), (gate * up) @ w_down),
            (say("the gate multiplication is missing: multiply silu(x @ w_gate) element-wise by x @ w_up "
             "before the down projection."), F.silu(gate) @ w_down),
            (say("sigmoid is not SiLU: SiLU(z) = z * sigmoid(z)."), (torch.sigmoid(gate) * up) @ w_down),
        ])
    return say("matches (silu(x W_gate) * x W_up) W_down on two hidden cases.")


def check_rms_norm(fn: Learner) -> str:
    """rms_norm(x, weight, eps=1e-6) = x / sqrt(mean(x^2, last dim) + eps) * weight."""
    from llmlab.norms import rms_norm as reference

    g = generator(23)
    cases = [
        (torch.tensor([[1.0, 2.0, 3.0, 4.0]]), torch.ones(4), 1e-6),
        (torch.randn(2, 3, 8, generator=g) * 3 + 1, torch.rand(8, generator=g) + 0.5, 1e-6),
        (torch.randn(3, 4, generator=g) * 0.3 + 0.2, torch.rand(4, generator=g) + 0.5, 0.1),  # eps matters here
    ]
    for x, w, eps in cases:
        got = fn(x, w, eps, names=("x", "weight", "eps"))
        ms = x.pow(2).mean(-1, keepdim=True)
        xc = x - x.mean(-1, keepdim=True)
        expect_tensor(fn, got, reference(x, w, eps), atol=1e-4, mistakes=[
            (say("you subtracted the mean: that is LayerNorm. RMSNorm divides by the root mean square and does "
             "not centre x."), xc / (xc.pow(2).mean(-1, keepdim=True) + eps).sqrt() * w),
            (say("eps belongs inside the square root: x / sqrt(mean(x^2) + eps), not x / (sqrt(mean(x^2)) + eps)."),
             x / (ms.sqrt() + eps) * w),
            (say("the weight is missing: multiply the normalised x by `weight`."), x / (ms + eps).sqrt()),
            (say("you divided by the mean square; take its square root (the root mean square)."), x / (ms + eps) * w),
            (say("the statistics must be over the last dimension (each token's own vector), with keepdim=True."),
             x / (x.pow(2).mean(0, keepdim=True) + eps).sqrt() * w),
            # with eps = 1e-6 this equals the right answer: only the case with eps = 0.1 exposes it
            (say("eps is missing, or a fixed number stands where the `eps` argument should be: use the eps the "
             "function is given, inside the square root: x / sqrt(mean(x^2) + eps) * weight. With a tiny eps "
             "the difference is invisible; this case has a large one."), x / ms.sqrt() * w),
        ])
    return say("matches llmlab.norms.rms_norm on 3 hidden cases, including one where the place of eps matters.")


def check_layer_norm(fn: Learner) -> str:
    """layer_norm(x, weight, bias, eps=1e-5) = (x - mean) / sqrt(var + eps) * weight + bias over the last
    dimension, with the biased variance (divide by n, not n - 1)."""
    from llmlab.norms import layer_norm as reference

    g = generator(29)
    cases = [
        (torch.tensor([[1.0, 2.0, 3.0, 4.0]]), torch.ones(4), torch.zeros(4), 1e-5),
        (torch.randn(2, 3, 4, generator=g) * 2 + 1, torch.rand(4, generator=g) + 0.5, torch.randn(4, generator=g), 1e-5),
        (torch.randn(3, 6, generator=g) * 0.3, torch.rand(6, generator=g) + 0.5, torch.randn(6, generator=g), 0.1),
    ]
    for x, w, b, eps in cases:
        got = fn(x, w, b, eps, names=("x", "weight", "bias", "eps"))
        mean = x.mean(-1, keepdim=True)
        var = (x - mean).pow(2).mean(-1, keepdim=True)
        expect_tensor(fn, got, reference(x, w, b, eps), atol=1e-4, mistakes=[
            (say("you used the unbiased variance (divide by n - 1): torch.var and torch.std do that by default. "
             "LayerNorm divides by n: x.var(-1, keepdim=True, unbiased=False)."),
             (x - mean) / (x.var(-1, keepdim=True) + eps).sqrt() * w + b),
            (say("the mean was not subtracted: LayerNorm centres x first (x - mean), then divides by the standard "
             "deviation. Without centring it is RMSNorm."), x / (x.pow(2).mean(-1, keepdim=True) + eps).sqrt() * w + b),
            (say("eps belongs inside the square root: sqrt(var + eps), not sqrt(var) + eps."),
             (x - mean) / (var.sqrt() + eps) * w + b),
            (say("weight and bias are missing or swapped: y = normalised * weight + bias."), (x - mean) / (var + eps).sqrt()),
            (say("weight and bias are missing or swapped: y = normalised * weight + bias."),
             (x - mean) / (var + eps).sqrt() * b + w),
        ])
    return say("matches llmlab.norms.layer_norm (biased variance, eps inside the root) on 3 hidden cases.")


def _linear_map(d: int, seed: int, name: str):
    """A fixed nonlinear map R^d -> R^d standing in for a sublayer (attention or FFN)."""
    w = torch.randn(d, d, generator=generator(seed)) / d ** 0.5

    def sublayer(h: torch.Tensor) -> torch.Tensor:
        return torch.tanh(h @ w)
    sublayer.__name__ = name
    return sublayer


def _norm(d: int, seed: int, name: str):
    w = torch.rand(d, generator=generator(seed)) + 0.5

    def norm(h: torch.Tensor) -> torch.Tensor:
        return h / (h.pow(2).mean(-1, keepdim=True) + 1e-6).sqrt() * w
    norm.__name__ = name
    return norm


def check_prenorm_block(fn: Learner) -> str:
    """prenorm_block(x, attn, mlp, norm1, norm2): h = x + attn(norm1(x)); return h + mlp(norm2(h)).
    attn, mlp, norm1 and norm2 are functions of one tensor (B, T, d) -> (B, T, d)."""
    g = generator(31)
    d = 8
    attn, mlp = _linear_map(d, 1, "attn"), _linear_map(d, 2, "mlp")
    norm1, norm2 = _norm(d, 3, "norm1"), _norm(d, 4, "norm2")
    for shape in [(1, 3, d), (2, 4, d)]:
        x = torch.randn(*shape, generator=g) * 2
        got = fn(x, attn, mlp, norm1, norm2, names=("x", "attn", "mlp", "norm1", "norm2"))
        h = x + attn(norm1(x))
        post = norm1(x + attn(x))
        expect_tensor(fn, got, h + mlp(norm2(h)), atol=1e-5, mistakes=[
            (say("that is the post-norm block of the 2017 Transformer: norm(x + sublayer(x)). A pre-norm block "
             "normalises the sublayer's INPUT and adds its output to the un-normalised residual: "
             "x + sublayer(norm(x))."), norm2(post + mlp(post))),
            (say("the residual connections are missing: add each sublayer's output to its input "
             "(h = x + attn(norm1(x)); out = h + mlp(norm2(h)))."), mlp(norm2(attn(norm1(x))))),
            (say("the FFN must read the residual AFTER attention (h), not the block input x: "
             "out = h + mlp(norm2(h)). Reading x is the parallel block of GPT-J, a different design."),
             h + mlp(norm2(x))),
            (say("each sublayer has its own norm: norm1 before attention, norm2 before the FFN."), h + mlp(norm1(h))),
            (say("the residual must carry the un-normalised x: h = x + attn(norm1(x)), not norm1(x) + attn(norm1(x))."),
             (norm1(x) + attn(norm1(x))) + mlp(norm2(norm1(x) + attn(norm1(x))))),
        ])
    return say("a correct pre-norm residual block on two hidden inputs.")


# ---------------------------------------------------------------- ch. 8: a whole Llama block from raw weights

BLOCK_KEYS = ("attn_norm", "q", "k", "v", "o", "mlp_norm", "gate", "up", "down")


def _llama_block_variant(x, w, n_heads, n_kv_heads, cos, sin, eps, layout="pre", ffn_reads="h", norm_weight=True,
                         act="silu", rope=True):
    """A Llama block with switchable mistakes (used to recognise wrong answers)."""
    from llmlab.exercises.checks_attention import _gqa_variant

    def norm(t, weight):
        t = t / (t.pow(2).mean(-1, keepdim=True) + eps).sqrt()
        return t * weight if norm_weight else t

    def attn(t):
        return _gqa_variant(t, w["q"], w["k"], w["v"], w["o"], n_heads, n_kv_heads, cos, sin,
                            rope="halves" if rope else "none")

    def ffn(t):
        gate, up = t @ w["gate"], t @ w["up"]
        a = {"silu": F.silu, "gelu": F.gelu, "swap": None}[act]
        return ((gate * F.silu(up)) if act == "swap" else (a(gate) * up)) @ w["down"]

    if layout == "post":
        h = norm(x + attn(x), w["attn_norm"])
        return norm(h + ffn(h), w["mlp_norm"])
    if layout == "no-residual":
        return ffn(norm(attn(norm(x, w["attn_norm"])), w["mlp_norm"]))
    h = x + attn(norm(x, w["attn_norm"]))
    return h + ffn(norm(h if ffn_reads == "h" else x, w["mlp_norm"]))


def _llama_block_reference(x, w, n_heads, n_kv_heads, cos, sin, eps):
    """llmlab's own pre-norm Block, loaded with the given weights."""
    from llmlab.attention import causal_mask
    from llmlab.block import Block
    from llmlab.config import ModelConfig

    d, hd, d_ff = x.shape[-1], w["q"].shape[1] // n_heads, w["gate"].shape[1]
    cfg = ModelConfig(vocab_size=8, d_model=d, n_layers=1, n_heads=n_heads, n_kv_heads=n_kv_heads, head_dim=hd,
                      d_ff=d_ff, norm="rms", norm_eps=eps, block="pre", ffn="swiglu", activation="silu")
    block = Block(cfg).eval()
    with torch.no_grad():
        block.attn_norm.weight.copy_(w["attn_norm"])
        block.mlp_norm.weight.copy_(w["mlp_norm"])
        for linear, key in [(block.attn.q_proj, "q"), (block.attn.k_proj, "k"), (block.attn.v_proj, "v"),
                            (block.attn.o_proj, "o"), (block.mlp.gate_proj, "gate"), (block.mlp.up_proj, "up"),
                            (block.mlp.down_proj, "down")]:
            linear.weight.copy_(w[key].T)
        return block(x, (cos, sin), causal_mask(x.shape[1]), attn_impl="eager")


def check_llama_block(fn: Learner) -> str:
    """llama_block(x, w, n_heads, n_kv_heads, cos, sin, eps) -> (B, T, d): one pre-norm Llama block.

    w is a dict of tensors used as x @ w: "q" (d, n_heads*hd), "k" and "v" (d, n_kv_heads*hd),
    "o" (n_heads*hd, d), "gate" and "up" (d, d_ff), "down" (d_ff, d), and the RMSNorm weights
    "attn_norm" and "mlp_norm" (d,). h = x + attn(rms_norm(x)); out = h + swiglu(rms_norm(h)),
    with causal GQA attention and split-halves RoPE (cos, sin of shape (T, hd)).
    """
    from llmlab.positions import rope_cos_sin

    g = generator(41)
    for B, T, d, H, H_kv, hd, d_ff in [(1, 4, 8, 4, 2, 2, 16), (2, 5, 12, 6, 3, 4, 20)]:
        x = torch.randn(B, T, d, generator=g) * 2
        w = {"attn_norm": torch.rand(d, generator=g) + 0.5, "mlp_norm": torch.rand(d, generator=g) + 0.5}
        for key, shape in [("q", (d, H * hd)), ("k", (d, H_kv * hd)), ("v", (d, H_kv * hd)), ("o", (H * hd, d)),
                           ("gate", (d, d_ff)), ("up", (d, d_ff)), ("down", (d_ff, d))]:
            w[key] = torch.randn(*shape, generator=g) / shape[0] ** 0.5
        cos, sin = rope_cos_sin(T, hd, base=100.0)
        eps = 1e-5
        args = (x, w, H, H_kv, cos, sin, eps)
        got = fn(x, {k: v.clone() for k, v in w.items()}, H, H_kv, cos, sin, eps,
                 names=("x", "w", "n_heads", "n_kv_heads", "cos", "sin", "eps"))
        expect_tensor(fn, got, _llama_block_reference(*args), atol=1e-4, rtol=1e-3, mistakes=[
            (say("that is the post-norm block of the 2017 Transformer: norm(x + sublayer(x)). Llama normalises the "
             "sublayer's INPUT and adds its output to the un-normalised stream: h = x + attn(rms_norm(x))."),
             _llama_block_variant(*args, layout="post")),
            (say("the residual connections are missing: add each sublayer's output to the stream it read "
             "(h = x + attn(...), out = h + ffn(...))."), _llama_block_variant(*args, layout="no-residual")),
            (say("the FFN must read the stream AFTER attention: out = h + ffn(rms_norm(h)), not rms_norm(x)."),
             _llama_block_variant(*args, ffn_reads="x")),
            (say("the RMSNorm weights are missing: multiply the normalised vector by w['attn_norm'] (before attention) "
             "and w['mlp_norm'] (before the FFN)."), _llama_block_variant(*args, norm_weight=False)),
            (say("SiLU went on the wrong branch of the FFN: silu(x @ gate) * (x @ up), then @ down."),
             _llama_block_variant(*args, act="swap")),
            (say("you used GELU; Llama's FFN is SwiGLU, with SiLU on the gate."), _llama_block_variant(*args, act="gelu")),
            (say("RoPE is missing: rotate q and k (split halves) inside the attention."),
             _llama_block_variant(*args, rope=False)),
        ])
    return say("matches llmlab's pre-norm Block (RMSNorm, causal GQA with RoPE, SwiGLU) on two hidden configurations.")
