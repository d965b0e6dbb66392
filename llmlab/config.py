"""One config describes every model llmlab can build.

A Transformer language model is a short list of choices: how big, which norm, where the norms sit,
which feed-forward, how positions enter. `ModelConfig` writes those choices down, one field each.

>>> cfg = ModelConfig(vocab_size=100, d_model=32, n_layers=2, n_heads=4, d_ff=64)
>>> cfg.head_dim, cfg.n_kv_heads, cfg.layer_types
(8, 4, ('full', 'full'))
>>> ModelConfig.from_dict(cfg.to_dict()) == cfg
True
"""
from __future__ import annotations

import dataclasses
import struct
from dataclasses import dataclass

NORMS = ("rms", "layer")
BLOCKS = ("pre", "post", "sandwich")
FFNS = ("mlp", "swiglu", "geglu")
ACTIVATIONS = ("gelu", "gelu_tanh", "relu", "silu")
POSITIONS = ("rope", "learned", "sinusoidal", "alibi", "none")
LAYER_TYPES = ("full", "sliding")
GEMMA3_GLOBAL_EVERY = 6   # Gemma 3: one global layer after every five sliding-window ones (not stored in its files)


def gemma3_layer_types(n_layers: int, every: int = GEMMA3_GLOBAL_EVERY) -> tuple:
    """Gemma 3's attention pattern: every `every`-th layer attends globally, the others through a window.

    >>> gemma3_layer_types(7)
    ('sliding', 'sliding', 'sliding', 'sliding', 'sliding', 'full', 'sliding')
    """
    return tuple("full" if (i + 1) % every == 0 else "sliding" for i in range(n_layers))


@dataclass(frozen=True)
class ModelConfig:
    # --- size ---
    vocab_size: int = 256            # number of token ids the embedding table holds
    d_model: int = 64                # width of the residual stream
    n_layers: int = 2                # number of Transformer blocks
    n_heads: int = 4                 # query heads per attention layer
    n_kv_heads: int | None = None    # key/value heads: = n_heads (MHA), 1 (MQA), in between (GQA); None -> n_heads
    head_dim: int | None = None      # width of one head; None -> d_model // n_heads (Gemma sets it explicitly)
    d_ff: int = 256                  # hidden width of the feed-forward network
    max_seq_len: int = 512           # longest sequence (prompt + generated) the model accepts
    # --- normalization ---
    norm: str = "rms"                # "rms" (RMSNorm) or "layer" (LayerNorm)
    norm_eps: float = 1e-5           # epsilon inside the norm's square root
    norm_unit_offset: bool = False   # Gemma stores w and scales by (1 + w) instead of w
    norm_bias: bool = True           # LayerNorm has a bias (ignored for RMSNorm)
    block: str = "pre"               # "pre" (norm before each sublayer), "post" (after the residual add, 2017), "sandwich" (Gemma 3: before and after)
    # --- feed-forward ---
    ffn: str = "swiglu"              # "mlp" (up, act, down), "swiglu" / "geglu" (act(gate) * up, down)
    activation: str = "silu"         # "gelu" (exact erf), "gelu_tanh" (tanh approximation), "relu", "silu"
    # --- positions ---
    positions: str = "rope"          # "rope", "learned" (GPT-2), "sinusoidal" (2017), "alibi", "none"
    rope_theta: float = 10000.0      # RoPE base for full-attention layers
    rope_local_theta: float | None = None  # RoPE base for sliding-window layers (Gemma 3: 10_000); None -> rope_theta
    rope_scaling: dict | None = None  # Llama 3 style {"rope_type": "llama3", "factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"} or {"rope_type": "linear", "factor"}; None -> plain RoPE
    rotary_dim: int | None = None    # rotate only the first rotary_dim dims of each head (partial RoPE); None -> head_dim
    # --- projections ---
    qkv_bias: bool = False           # bias on the q/k/v projections (GPT-2, Qwen2)
    out_bias: bool = False           # bias on the attention output projection (GPT-2)
    mlp_bias: bool = False           # biases in the feed-forward projections (GPT-2)
    fused_qkv: bool = False          # one qkv_proj matrix instead of q_proj, k_proj, v_proj (GPT-2, Phi-3)
    fused_gate_up: bool = False      # one gate_up_proj matrix instead of gate_proj, up_proj (Phi-3)
    qk_norm: bool = False            # RMSNorm on each query and key head before RoPE (Gemma 3, Qwen3)
    # --- attention pattern ---
    sliding_window: int | None = None  # a "sliding" layer sees the current token and the window-1 before it
    layer_types: tuple | None = None   # "full" or "sliding" per layer; None -> all "sliding" if sliding_window else all "full"
    query_pre_attn_scalar: float | None = None  # scores are scaled by query_pre_attn_scalar**-0.5 (Gemma); None -> head_dim**-0.5
    attn_logit_softcap: float | None = None     # scores -> cap * tanh(scores / cap) before the mask (Gemma 2)
    # --- embedding and output ---
    embed_scale: float | None = None  # multiply token embeddings by this (Gemma: sqrt(d_model)); None -> no scaling
    tie_embeddings: bool = True       # the LM head reuses the token embedding matrix
    final_logit_softcap: float | None = None   # logits -> cap * tanh(logits / cap)
    # --- special tokens and provenance ---
    bos_token_id: int | None = None
    eos_token_id: int | tuple | None = None    # one id or several
    pad_token_id: int | None = None
    family: str = "custom"            # where the architecture comes from: "gpt2", "llama", "qwen2", "gemma3", "phi3", ...

    def __post_init__(self):
        # A frozen dataclass cannot assign normally; object.__setattr__ fills in derived defaults once.
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731
        if self.n_kv_heads is None:
            set_("n_kv_heads", self.n_heads)
        if self.head_dim is None:
            if self.d_model % self.n_heads:
                raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}; "
                                 "pick sizes that divide, or set head_dim explicitly.")
            set_("head_dim", self.d_model // self.n_heads)
        if self.layer_types is None:
            set_("layer_types", ("sliding" if self.sliding_window else "full",) * self.n_layers)
        set_("layer_types", tuple(self.layer_types))
        if isinstance(self.eos_token_id, list):
            set_("eos_token_id", tuple(self.eos_token_id))
        if self.rope_scaling is not None:
            set_("rope_scaling", dict(self.rope_scaling))
        self._validate()

    def _validate(self):
        for name, allowed in [("norm", NORMS), ("block", BLOCKS), ("ffn", FFNS), ("activation", ACTIVATIONS),
                              ("positions", POSITIONS)]:
            if getattr(self, name) not in allowed:
                raise ValueError(f"ModelConfig.{name}={getattr(self, name)!r} is not supported; use one of {allowed}.")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads={self.n_heads} must be a multiple of n_kv_heads={self.n_kv_heads} "
                             "(each key/value head serves the same number of query heads).")
        if len(self.layer_types) != self.n_layers:
            raise ValueError(f"layer_types has {len(self.layer_types)} entries but n_layers={self.n_layers}.")
        bad = [t for t in self.layer_types if t not in LAYER_TYPES]
        if bad:
            raise ValueError(f"layer_types may only contain {LAYER_TYPES}, got {bad}.")
        if "sliding" in self.layer_types and not self.sliding_window:
            raise ValueError("Some layers are 'sliding' but sliding_window is not set; give sliding_window=N.")
        if self.rotary_dim is not None and (self.rotary_dim > self.head_dim or self.rotary_dim % 2):
            raise ValueError(f"rotary_dim={self.rotary_dim} must be even and <= head_dim={self.head_dim}.")
        if self.rope_scaling is not None and self.rope_scaling.get("rope_type") not in ("llama3", "linear"):
            raise ValueError(f"rope_scaling={self.rope_scaling} is not supported; llmlab knows rope_type "
                             "'llama3' and 'linear' (or None for plain RoPE).")

    def to_dict(self) -> dict:
        """A JSON-safe dict (tuples become lists) that `from_dict` turns back into an equal config."""
        d = dataclasses.asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}

    @classmethod
    def from_dict(cls, d: dict) -> "ModelConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"Unknown ModelConfig fields {unknown}. Known fields: {sorted(known)}.")
        return cls(**d)

    @classmethod
    def preset(cls, name: str) -> "ModelConfig":
        """A named architecture, e.g. ModelConfig.preset("tiny-llama")."""
        if name not in PRESETS:
            raise ValueError(f"No preset named {name!r}. Presets: {sorted(PRESETS)}.")
        return PRESETS[name]


def as_float32(x: float) -> float:
    """`x` rounded to float32, as a GGUF file stores it: as_float32(1e-5) == 9.999999747378752e-06."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


PRESETS = {
    # Tiny models for tests and for reading intermediate shapes in the chapters.
    "tiny-gpt2": ModelConfig(family="gpt2", vocab_size=128, d_model=32, n_layers=2, n_heads=4, d_ff=128,
                             max_seq_len=64, norm="layer", ffn="mlp", activation="gelu_tanh", positions="learned",
                             qkv_bias=True, out_bias=True, mlp_bias=True, fused_qkv=True),
    "tiny-llama": ModelConfig(family="llama", vocab_size=128, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2,
                              d_ff=64, max_seq_len=64),
    "tiny-gemma3": ModelConfig(family="gemma3", vocab_size=128, d_model=32, n_layers=3, n_heads=4, n_kv_heads=2,
                               head_dim=16, d_ff=64, max_seq_len=64, norm_eps=1e-6, norm_unit_offset=True,
                               block="sandwich", ffn="geglu", activation="gelu_tanh", rope_theta=1_000_000.0,
                               rope_local_theta=10_000.0, qk_norm=True, sliding_window=4,
                               layer_types=("sliding", "sliding", "full"), query_pre_attn_scalar=16,
                               embed_scale=32 ** 0.5),
    "tiny-2017": ModelConfig(family="custom", vocab_size=128, d_model=32, n_layers=2, n_heads=4, d_ff=128,
                             max_seq_len=64, norm="layer", block="post", ffn="mlp", activation="relu",
                             positions="sinusoidal"),
    # The real checkpoints llmlab.load knows. Loading derives its config from the GGUF file, and a test
    # checks it equals these (the files store norm_eps in float32, hence as_float32).
    "smollm2-135m": ModelConfig(family="llama", vocab_size=49152, d_model=576, n_layers=30, n_heads=9, n_kv_heads=3,
                                d_ff=1536, max_seq_len=8192, norm_eps=as_float32(1e-5), rope_theta=100000.0,
                                bos_token_id=1, eos_token_id=2, pad_token_id=2),
    "gemma3-270m": ModelConfig(family="gemma3", vocab_size=262144, d_model=640, n_layers=18, n_heads=4, n_kv_heads=1,
                               head_dim=256, d_ff=2048, max_seq_len=32768, norm_eps=as_float32(1e-6),
                               norm_unit_offset=True, block="sandwich", ffn="geglu", activation="gelu_tanh", rope_theta=1_000_000.0,
                               rope_local_theta=10_000.0, qk_norm=True, sliding_window=512,
                               layer_types=gemma3_layer_types(18), query_pre_attn_scalar=256, embed_scale=640 ** 0.5,
                               bos_token_id=2, eos_token_id=1, pad_token_id=0),
}
