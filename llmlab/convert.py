"""From Hugging Face checkpoints to llmlab: one converter per family, each holding that family's quirks.

    config, weights = convert_hf_checkpoint(hf_config_dict, hf_state_dict)
    model = build_model(config, weights)

Every load ends here: a Hugging Face folder or hub id, a GGUF file (``llmlab.gguf`` first turns it
into the same config dict and state dict that transformers would hold), a cache entry, a live
transformers model (``from_hf``). ``build_model`` is the one place an llmlab model is made from weights.

A converter has two parts: a config translation (Hugging Face field names -> ModelConfig) and a
name table that maps every Hugging Face tensor to an llmlab parameter, with `{}` standing for the
layer number. Loading is strict: every tensor of the checkpoint must be used, every llmlab
parameter must be filled, every shape must match -- otherwise the error names the tensor.

Family quirks handled here:
- GPT-2: Conv1D layers store weights as (in, out), the transpose of nn.Linear; learned positions;
  LayerNorm; gelu_new (the tanh approximation); one fused c_attn matrix for q, k, v.
- Llama (SmolLM2, Llama 3.x): Llama 3 rope_scaling; optional attention/MLP biases.
- Qwen2: biases on q, k, v (not on o); optional sliding-window layers.
- Gemma 3 (text): norms store w for (1 + w); embeddings scaled by sqrt(d_model); QK-norm; four norms
  per block; sliding layers with their own RoPE base; scores scaled by query_pre_attn_scalar; GeGLU.
- Phi-3: fused qkv_proj and gate_up_proj; optional partial RoPE.
"""
from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode

from llmlab.config import GEMMA3_GLOBAL_EVERY, ModelConfig, gemma3_layer_types
from llmlab.model import Transformer

_ACTIVATIONS = {"silu": "silu", "swish": "silu", "gelu": "gelu", "gelu_new": "gelu_tanh",
                "gelu_pytorch_tanh": "gelu_tanh", "gelu_python_tanh": "gelu_tanh", "relu": "relu"}
_LAYER_TYPES = {"full_attention": "full", "sliding_attention": "sliding"}
# Buffers some checkpoints carry that are not weights (GPT-2's causal mask, old RoPE frequency tables).
_IGNORED_SUFFIXES = (".attn.bias", ".attn.masked_bias", "rotary_emb.inv_freq")


# ---------------------------------------------------------------- config translation

def _activation(name: str) -> str:
    if name not in _ACTIVATIONS:
        raise ValueError(f"activation {name!r} is not supported; llmlab knows {sorted(_ACTIVATIONS)}.")
    return _ACTIVATIONS[name]


def _rope(hf: dict, layer_type: str | None = None, default_theta: float = 10000.0):
    """(theta, scaling or None, partial_rotary_factor) from either transformers 5 `rope_parameters`
    or the older `rope_theta` + `rope_scaling` fields."""
    params = hf.get("rope_parameters")
    if params is not None and layer_type is not None:
        params = params.get(layer_type)
    if params is None:  # older configs
        theta = hf.get("rope_local_base_freq" if layer_type == "sliding_attention" else "rope_theta", default_theta)
        scaling = None if layer_type == "sliding_attention" else hf.get("rope_scaling")
        partial = hf.get("partial_rotary_factor", 1.0)
    else:
        theta = params.get("rope_theta", default_theta)
        scaling = params if params.get("rope_type", "default") != "default" else None
        partial = params.get("partial_rotary_factor", hf.get("partial_rotary_factor", 1.0))
    if scaling is not None:
        kind = scaling.get("rope_type", scaling.get("type"))
        if kind == "llama3":
            scaling = {"rope_type": "llama3", **{k: scaling[k] for k in (
                "factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")}}
        elif kind == "linear":
            scaling = {"rope_type": "linear", "factor": scaling["factor"]}
        elif kind == "default":
            scaling = None
        else:
            raise ValueError(f"RoPE scaling type {kind!r} is not supported; llmlab knows 'llama3' and 'linear'.")
    return float(theta), scaling, partial


def _common(hf: dict, family: str, tie_default: bool) -> dict:
    """The fields every Llama-like config spells the same way."""
    n_heads = hf["num_attention_heads"]
    eos = hf.get("eos_token_id")
    return dict(
        family=family, vocab_size=hf["vocab_size"], d_model=hf["hidden_size"], n_layers=hf["num_hidden_layers"],
        n_heads=n_heads, n_kv_heads=hf.get("num_key_value_heads") or n_heads,
        head_dim=hf.get("head_dim") or hf["hidden_size"] // n_heads, d_ff=hf["intermediate_size"],
        max_seq_len=hf["max_position_embeddings"], norm="rms", norm_eps=hf.get("rms_norm_eps", 1e-6),
        tie_embeddings=hf.get("tie_word_embeddings", tie_default),
        bos_token_id=hf.get("bos_token_id"), eos_token_id=tuple(eos) if isinstance(eos, list) else eos,
        pad_token_id=hf.get("pad_token_id"))


def _layer_types(hf: dict, n_layers: int):
    types = hf.get("layer_types")
    return None if types is None else tuple(_LAYER_TYPES[t] for t in types)


def gpt2_config(hf: dict) -> ModelConfig:
    if hf.get("scale_attn_by_inverse_layer_idx"):
        raise ValueError("GPT-2 checkpoints with scale_attn_by_inverse_layer_idx=True are not supported.")
    d = hf["n_embd"]
    return ModelConfig(
        family="gpt2", vocab_size=hf["vocab_size"], d_model=d, n_layers=hf["n_layer"], n_heads=hf["n_head"],
        d_ff=hf.get("n_inner") or 4 * d, max_seq_len=hf["n_positions"], norm="layer",
        norm_eps=hf.get("layer_norm_epsilon", 1e-5), ffn="mlp", activation=_activation(hf["activation_function"]),
        positions="learned", qkv_bias=True, out_bias=True, mlp_bias=True, fused_qkv=True,
        # scale_attn_weights=False means raw q.k scores: a scale of 1 = 1.0 ** -0.5.
        query_pre_attn_scalar=None if hf.get("scale_attn_weights", True) else 1.0,
        tie_embeddings=hf.get("tie_word_embeddings", True),
        bos_token_id=hf.get("bos_token_id"), eos_token_id=hf.get("eos_token_id"), pad_token_id=hf.get("pad_token_id"))


def llama_config(hf: dict) -> ModelConfig:
    theta, scaling, partial = _rope(hf)
    c = _common(hf, "llama", tie_default=False)
    bias = bool(hf.get("attention_bias", False))
    return ModelConfig(**c, activation=_activation(hf.get("hidden_act", "silu")), rope_theta=theta,
                       rope_scaling=scaling, qkv_bias=bias, out_bias=bias, mlp_bias=bool(hf.get("mlp_bias", False)))


def qwen2_config(hf: dict) -> ModelConfig:
    theta, scaling, partial = _rope(hf)
    c = _common(hf, "qwen2", tie_default=False)
    window = hf.get("sliding_window") if hf.get("use_sliding_window", False) else None
    types = _layer_types(hf, c["n_layers"])
    if types is None:  # older configs: layers from max_window_layers on use the window
        types = tuple("sliding" if window and i >= hf.get("max_window_layers", 0) else "full"
                      for i in range(c["n_layers"]))
    return ModelConfig(**c, activation=_activation(hf.get("hidden_act", "silu")), rope_theta=theta,
                       rope_scaling=scaling, qkv_bias=True, sliding_window=window, layer_types=types)


def gemma3_config(hf: dict) -> ModelConfig:
    if hf.get("use_bidirectional_attention"):
        raise ValueError("Gemma 3 with use_bidirectional_attention=True (an encoder variant) is not supported.")
    theta, scaling, _ = _rope(hf, "full_attention", default_theta=1_000_000.0)
    local_theta, _, _ = _rope(hf, "sliding_attention", default_theta=10_000.0)
    c = _common(hf, "gemma3", tie_default=True)
    types = _layer_types(hf, c["n_layers"])
    if types is None:  # older configs: every sliding_window_pattern-th layer is global
        every = hf.get("sliding_window_pattern", hf.get("_sliding_window_pattern", GEMMA3_GLOBAL_EVERY))
        types = gemma3_layer_types(c["n_layers"], every)
    return ModelConfig(
        **c, norm_unit_offset=True, block="sandwich", ffn="geglu",
        activation=_activation(hf.get("hidden_activation", "gelu_pytorch_tanh")),
        rope_theta=theta, rope_scaling=scaling, rope_local_theta=local_theta,
        qkv_bias=bool(hf.get("attention_bias", False)), out_bias=bool(hf.get("attention_bias", False)),
        qk_norm=True, sliding_window=hf.get("sliding_window"), layer_types=types,
        query_pre_attn_scalar=hf.get("query_pre_attn_scalar", c["head_dim"]),
        # attn_logit_softcapping is left out on purpose: Gemma 3 (unlike Gemma 2) does not use it, and
        # transformers' Gemma 3 ignores the field even when a config sets it.
        final_logit_softcap=hf.get("final_logit_softcapping"),
        embed_scale=hf["hidden_size"] ** 0.5)


def phi3_config(hf: dict) -> ModelConfig:
    theta, scaling, partial = _rope(hf)
    c = _common(hf, "phi3", tie_default=False)
    window = hf.get("sliding_window")
    rotary_dim = int(c["head_dim"] * partial) if partial < 1.0 else None
    return ModelConfig(**c, activation=_activation(hf.get("hidden_act", "silu")), rope_theta=theta,
                       rope_scaling=scaling, rotary_dim=rotary_dim, fused_qkv=True, fused_gate_up=True,
                       sliding_window=window, layer_types=("sliding" if window else "full",) * c["n_layers"])


# ---------------------------------------------------------------- name tables ({} = layer number)

def _transpose(t: torch.Tensor) -> torch.Tensor:
    return t.t().contiguous()  # GPT-2's Conv1D stores (in, out); nn.Linear wants (out, in)


def gpt2_names(c: ModelConfig):
    names = [("transformer.wte.weight", "tok_embed.weight", None), ("transformer.wpe.weight", "pos_embed.weight", None),
             ("transformer.ln_f.weight", "final_norm.weight", None), ("transformer.ln_f.bias", "final_norm.bias", None)]
    per_layer = [("ln_1.weight", "attn_norm.weight", None), ("ln_1.bias", "attn_norm.bias", None),
                 ("attn.c_attn.weight", "attn.qkv_proj.weight", _transpose), ("attn.c_attn.bias", "attn.qkv_proj.bias", None),
                 ("attn.c_proj.weight", "attn.o_proj.weight", _transpose), ("attn.c_proj.bias", "attn.o_proj.bias", None),
                 ("ln_2.weight", "mlp_norm.weight", None), ("ln_2.bias", "mlp_norm.bias", None),
                 ("mlp.c_fc.weight", "mlp.up_proj.weight", _transpose), ("mlp.c_fc.bias", "mlp.up_proj.bias", None),
                 ("mlp.c_proj.weight", "mlp.down_proj.weight", _transpose), ("mlp.c_proj.bias", "mlp.down_proj.bias", None)]
    names += [("transformer.h.{}." + hf, "blocks.{}." + ll, fn) for hf, ll, fn in per_layer]
    return names


def llama_like_names(c: ModelConfig):
    """Llama, Qwen2, Gemma 3 and Phi-3 share the `model.layers.{}.self_attn...` naming."""
    names = [("model.embed_tokens.weight", "tok_embed.weight", None), ("model.norm.weight", "final_norm.weight", None)]
    L = []
    if c.fused_qkv:
        L.append(("self_attn.qkv_proj", "attn.qkv_proj", c.qkv_bias))
    else:
        L += [(f"self_attn.{p}_proj", f"attn.{p}_proj", c.qkv_bias) for p in "qkv"]
    L.append(("self_attn.o_proj", "attn.o_proj", c.out_bias))
    if c.fused_gate_up:
        L.append(("mlp.gate_up_proj", "mlp.gate_up_proj", c.mlp_bias))
    else:
        L += [("mlp.gate_proj", "mlp.gate_proj", c.mlp_bias), ("mlp.up_proj", "mlp.up_proj", c.mlp_bias)]
    L.append(("mlp.down_proj", "mlp.down_proj", c.mlp_bias))
    per_layer = []
    for hf, ll, has_bias in L:
        per_layer.append((hf + ".weight", ll + ".weight", None))
        if has_bias:
            per_layer.append((hf + ".bias", ll + ".bias", None))
    if c.block == "sandwich":  # Gemma 3: four norms, named for where they sit
        per_layer += [("input_layernorm.weight", "attn_norm.weight", None),
                      ("post_attention_layernorm.weight", "post_attn_norm.weight", None),
                      ("pre_feedforward_layernorm.weight", "mlp_norm.weight", None),
                      ("post_feedforward_layernorm.weight", "post_mlp_norm.weight", None)]
    else:  # Llama's "post_attention_layernorm" is the norm *before* the MLP
        per_layer += [("input_layernorm.weight", "attn_norm.weight", None),
                      ("post_attention_layernorm.weight", "mlp_norm.weight", None)]
    if c.qk_norm:
        per_layer += [("self_attn.q_norm.weight", "attn.q_norm.weight", None),
                      ("self_attn.k_norm.weight", "attn.k_norm.weight", None)]
    names += [("model.layers.{}." + hf, "blocks.{}." + ll, fn) for hf, ll, fn in per_layer]
    return names


CONVERTERS = {  # model_type -> (config translation, name table, prefix every tensor name starts with)
    "gpt2": (gpt2_config, gpt2_names, "transformer."),
    "llama": (llama_config, llama_like_names, "model."),
    "qwen2": (qwen2_config, llama_like_names, "model."),
    "gemma3_text": (gemma3_config, llama_like_names, "model."),
    "phi3": (phi3_config, llama_like_names, "model."),
}


# ---------------------------------------------------------------- the strict mapping

def _converter(hf_config: dict):
    model_type = hf_config.get("model_type")
    if model_type not in CONVERTERS:
        hint = " (for Gemma 3, convert the text model: model_type 'gemma3_text')" if model_type == "gemma3" else ""
        raise ValueError(f"Unsupported architecture model_type={model_type!r}{hint}. "
                         f"llmlab converts: {', '.join(sorted(CONVERTERS))}.")
    return CONVERTERS[model_type]


def config_from_hf(hf_config: dict) -> ModelConfig:
    """A Hugging Face config dict -> llmlab's ModelConfig (the first half of convert_hf_checkpoint)."""
    return _converter(hf_config)[0](hf_config)


def convert_hf_checkpoint(hf_config: dict, hf_state_dict: dict) -> tuple[ModelConfig, dict]:
    """Hugging Face config dict (as `config.to_dict()` gives it) + state dict -> (ModelConfig, llmlab state dict).

    Strict: raises if a checkpoint tensor is left over, a needed one is missing, or a shape is wrong.
    With tied embeddings the LM head may be absent from the checkpoint (it is the embedding matrix).
    """
    model_type = hf_config.get("model_type")
    make_config, make_names, prefix = _converter(hf_config)
    config = make_config(hf_config)
    sd = dict(hf_state_dict)
    if not any(k.startswith(prefix) for k in sd):  # base-model checkpoints (e.g. GPT-2's) lack the prefix
        sd = {(k if k.startswith("lm_head.") else prefix + k): v for k, v in sd.items()}

    with torch.device("meta"):  # shapes only: no memory, no random init
        expected = {k: tuple(v.shape) for k, v in Transformer(config).state_dict().items()}

    table = []
    for hf_name, ll_name, fn in make_names(config):
        if "{}" in hf_name:
            table += [(hf_name.format(i), ll_name.format(i), fn) for i in range(config.n_layers)]
        else:
            table.append((hf_name, ll_name, fn))
    if not config.tie_embeddings:
        table.append(("lm_head.weight", "lm_head.weight", None))

    out, used = {}, set()
    for hf_name, ll_name, fn in table:
        if hf_name not in sd:
            raise KeyError(f"The {model_type} checkpoint has no tensor {hf_name!r} (needed for llmlab's {ll_name!r}). "
                           "Is the checkpoint complete and of this architecture?")
        t = sd[hf_name] if fn is None else fn(sd[hf_name])
        if tuple(t.shape) != expected[ll_name]:
            raise ValueError(f"Shape mismatch for {hf_name!r} -> {ll_name!r}: the checkpoint has {tuple(t.shape)}, "
                             f"the config implies {expected[ll_name]}. The config and weights disagree.")
        out[ll_name] = t
        used.add(hf_name)
    if config.tie_embeddings and "lm_head.weight" in sd:
        used.add("lm_head.weight")  # a tied head saved as its own tensor: it is the embedding matrix
    left_over = sorted(k for k in sd if k not in used and not k.endswith(_IGNORED_SUFFIXES))
    if left_over:
        raise ValueError(f"{len(left_over)} checkpoint tensors were not used, e.g. {left_over[:5]}. llmlab's "
                         f"{model_type} converter does not know them; refusing a silent partial load.")
    unfilled = sorted(set(expected) - set(out))
    if unfilled:
        raise ValueError(f"llmlab parameters left unfilled by the {model_type} converter: {unfilled[:5]}.")
    return config, out


# ---------------------------------------------------------------- the one builder

class _SkipRandomInit(TorchFunctionMode):
    """While active, building a model draws no random numbers: randn/rand return uninitialised
    memory and in-place initialisers (uniform_, normal_, kaiming_uniform_, ...) do nothing.

    Filling 100M+ parameters with random values only to overwrite them from the checkpoint
    would take seconds; the strict load right after replaces every one of them.
    """

    FACTORIES = {torch.randn, torch.rand}
    INITIALISERS = {"uniform_", "normal_", "trunc_normal_", "kaiming_uniform_", "kaiming_normal_",
                    "xavier_uniform_", "xavier_normal_", "orthogonal_"}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in self.FACTORIES:
            kwargs.pop("generator", None)
            return torch.empty(*args, **kwargs)
        if getattr(func, "__name__", None) in self.INITIALISERS:
            return args[0] if args else kwargs.get("tensor")
        return func(*args, **kwargs)


def build_model(config: ModelConfig, state_dict: dict) -> Transformer:
    """An llmlab Transformer holding exactly these weights (strict: every tensor used, every shape equal).

    The model adopts the tensors it is given (no copy): the caller hands over weights it owns.
    """
    with _SkipRandomInit():
        model = Transformer(config)
    # assign=True adopts the loaded tensors instead of copying them into the fresh ones.
    model.load_state_dict({k: v.contiguous() for k, v in state_dict.items()}, strict=True, assign=True)
    if config.tie_embeddings:  # assign gave the LM head its own Parameter object: share the embedding's again
        model.lm_head.weight = model.tok_embed.weight
    return model.eval()


def from_hf(hf_model) -> Transformer:
    """A live `transformers` causal LM -> an llmlab Transformer with the same weights, device and dtype."""
    config, weights = convert_hf_checkpoint(hf_model.config.to_dict(), hf_model.state_dict())
    # Copies: the two models must not share memory (changing one must not change the other).
    model = build_model(config, {k: v.detach().clone() for k, v in weights.items()})
    p = next(hf_model.parameters())
    return model.to(device=p.device, dtype=p.dtype)
