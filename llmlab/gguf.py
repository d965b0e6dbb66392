"""Read a GGUF file (llama.cpp's format) into a Hugging Face config and float32 state dict.

A GGUF file holds three things: metadata (``llama.embedding_length = 576``, the tokenizer's
vocabulary, ...), a list of tensors with llama.cpp names (``blk.0.attn_q.weight``), and
the tensor bytes, often quantized (4 or 8 bits per weight in small blocks that share a scale).
This module is llmlab's one reader of the format: it turns a file into exactly what
``transformers`` would hold after loading it (the same names, the same layout, the same float32
numbers), and hands the tokenizer's metadata to ``llmlab.tokenization``. From there the ordinary
Hugging Face converter in ``llmlab.convert`` builds an llmlab model.

Three quirks of the format are undone here, one family at a time:

1. Quantized blocks are expanded to float32 with ``gguf.quants.dequantize``.
2. llama-arch files store the rows of W_q and W_k *permuted*: llama.cpp's RoPE rotates
   neighbouring pairs (x0, x1), (x2, x3), ... while Hugging Face's ``rotate_half`` rotates
   (x0, x_{d/2}), (x1, x_{d/2+1}), ... The converter that wrote the file reordered the rows
   so that the interleaved rotation gives the same answer; we put them back.
3. Gemma's RMSNorm multiplies by (1 + w). Hugging Face stores w; GGUF stores 1 + w.

>>> config, state_dict = read_gguf_checkpoint("SmolLM2-135M-Instruct.Q4_1.gguf")   # doctest: +SKIP
>>> config["model_type"], config["num_hidden_layers"], state_dict["model.norm.weight"].shape  # doctest: +SKIP
('llama', 30, torch.Size([576]))
"""
from __future__ import annotations

import os
import re

import numpy as np
import torch

from llmlab.config import GEMMA3_GLOBAL_EVERY, gemma3_layer_types
from llmlab.progress import progress as progress_bar

SUPPORTED_ARCHITECTURES = ("llama", "gemma3")

# GGUF tensor name -> Hugging Face name. "{}" is the layer index.
_COMMON_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
    "blk.{}.attn_norm.weight": "model.layers.{}.input_layernorm.weight",
    "blk.{}.attn_q.weight": "model.layers.{}.self_attn.q_proj.weight",
    "blk.{}.attn_k.weight": "model.layers.{}.self_attn.k_proj.weight",
    "blk.{}.attn_v.weight": "model.layers.{}.self_attn.v_proj.weight",
    "blk.{}.attn_output.weight": "model.layers.{}.self_attn.o_proj.weight",
    "blk.{}.ffn_gate.weight": "model.layers.{}.mlp.gate_proj.weight",
    "blk.{}.ffn_up.weight": "model.layers.{}.mlp.up_proj.weight",
    "blk.{}.ffn_down.weight": "model.layers.{}.mlp.down_proj.weight",
}
TENSOR_NAMES = {
    # Llama: one norm before attention, one before the FFN (HF calls it post_attention_layernorm).
    "llama": {**_COMMON_NAMES, "blk.{}.ffn_norm.weight": "model.layers.{}.post_attention_layernorm.weight"},
    # Gemma 3: "sandwich" norms around both sublayers, plus RMSNorm on q and k (QK-norm).
    "gemma3": {
        **_COMMON_NAMES,
        "blk.{}.post_attention_norm.weight": "model.layers.{}.post_attention_layernorm.weight",
        "blk.{}.ffn_norm.weight": "model.layers.{}.pre_feedforward_layernorm.weight",
        "blk.{}.post_ffw_norm.weight": "model.layers.{}.post_feedforward_layernorm.weight",
        "blk.{}.attn_q_norm.weight": "model.layers.{}.self_attn.q_norm.weight",
        "blk.{}.attn_k_norm.weight": "model.layers.{}.self_attn.k_norm.weight",
    },
}


def open_reader(path_or_reader):
    """Parse a GGUF file's header (metadata and tensor table); the tensor bytes stay on disk (memory map).

    An already open reader is handed back as it is: parsing Gemma 3's header, with its 262k-entry
    vocabulary, takes seconds, so the weights and the tokenizer share one.
    """
    from gguf import GGUFReader

    if isinstance(path_or_reader, GGUFReader):
        return path_or_reader
    path = os.fspath(path_or_reader)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No GGUF file at {path!r}. Give the path of an existing .gguf file.")
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise ValueError(f"{path!r} could not be read as a GGUF file: it is not a GGUF file (it does not "
                             "start with the bytes 'GGUF'). For a Hugging Face tokenizer.json use "
                             "tokenizer_from_json(); for a checkpoint folder, llmlab.load(folder).")
    try:
        return _reader_class()(path)
    except Exception as error:  # a truncated file fails deep inside numpy: say it plainly
        raise ValueError(f"{path!r} could not be read as a GGUF file ({type(error).__name__}: {error}). "
                         "Is it complete? Re-download or re-create it.") from error


def _reader_class():
    """gguf's GGUFReader, reading through a plain array view of its memory map.

    The reader slices its np.memmap once per metadata entry, and a memmap slice costs ~10x a plain
    array's (numpy's memmap bookkeeping on every slice): for Gemma 3's 262k-token vocabulary that was
    most of a load. A plain view of the same mapped bytes reads the same values without it.
    """
    import numpy as np
    from gguf import GGUFReader

    class Reader(GGUFReader):
        @property
        def data(self):
            return self._mapped

        @data.setter
        def data(self, value):  # GGUFReader.__init__ assigns its np.memmap here
            self._mapped = value.view(np.ndarray) if isinstance(value, np.memmap) else value

    return Reader


_MISSING = object()


def metadata(reader, key: str, default=_MISSING):
    """One metadata value as a plain Python object: int, float, bool, str, or a list of those.

    >>> metadata(reader, "llama.block_count")            # doctest: +SKIP
    30
    """
    field = reader.fields.get(key)
    if field is None:
        if default is _MISSING:
            raise KeyError(f"The GGUF file has no metadata key {key!r}.")
        return default
    return _value(field)


def _value(field):
    from gguf import GGUFValueType

    if field.types[0] == GGUFValueType.ARRAY:
        if field.types[-1] == GGUFValueType.STRING:
            return [bytes(field.parts[i]).decode("utf-8") for i in field.data]
        # One numpy array per element: join them first (262k token scores in one call, not 262k).
        return np.concatenate([field.parts[i] for i in field.data]).tolist() if field.data else []
    if field.types[0] == GGUFValueType.STRING:
        return bytes(field.parts[field.data[0]]).decode("utf-8")
    return field.parts[field.data[0]].tolist()[0]  # a one-element numpy array -> int / float / bool


def tokenizer_metadata(reader) -> dict:
    """Every ``tokenizer.*`` key (vocabulary, merges, token types, special ids, chat template), plus
    ``general.architecture``: all that ``llmlab.tokenization.tokenizer_from_gguf`` reads."""
    return {key: _value(field) for key, field in reader.fields.items()
            if key.startswith("tokenizer.") or key == "general.architecture"}


def architecture_of(reader) -> str:
    """The file's ``general.architecture`` ('llama', 'gemma3', ...), checked against what llmlab reads."""
    arch = metadata(reader, "general.architecture")
    if arch not in SUPPORTED_ARCHITECTURES:
        raise NotImplementedError(
            f"This GGUF file has architecture {arch!r}; llmlab reads GGUF files of architecture "
            f"{', '.join(repr(a) for a in SUPPORTED_ARCHITECTURES)}. For other models load a Hugging Face "
            "checkpoint instead (a hub id or a local directory with config.json + *.safetensors)."
        )
    return arch


def gguf_config_to_hf(reader) -> dict:
    """Build the Hugging Face ``config.json`` dict from the GGUF metadata.

    Keys follow ``transformers``: ``rope_parameters`` as transformers 5 writes it, plus the
    flat ``rope_theta`` (and for Gemma ``rope_local_base_freq``) that older configs use.
    """
    arch = architecture_of(reader)

    def get(key, default=_MISSING):
        return metadata(reader, f"{arch}.{key}", default)

    n_heads = get("attention.head_count")
    hidden = get("embedding_length")
    # vocab_size is optional in GGUF; the tokenizer's token list always gives it.
    vocab_size = get("vocab_size", None)
    if vocab_size is None:
        vocab_size = len(reader.fields["tokenizer.ggml.tokens"].data)
    tensor_names = {t.name for t in reader.tensors}
    config = {
        "vocab_size": vocab_size,
        "hidden_size": hidden,
        "intermediate_size": get("feed_forward_length"),
        "num_hidden_layers": get("block_count"),
        "num_attention_heads": n_heads,
        "num_key_value_heads": get("attention.head_count_kv", n_heads),
        "max_position_embeddings": get("context_length"),
        "rms_norm_eps": get("attention.layer_norm_rms_epsilon"),
        "rope_theta": get("rope.freq_base", 10000.0),
        # No separate output matrix in the file means the LM head reuses the token embedding.
        "tie_word_embeddings": "output.weight" not in tensor_names,
        "attention_bias": False,
        "torch_dtype": "float32",
    }
    for gguf_key, hf_key in [("bos_token_id", "bos_token_id"), ("eos_token_id", "eos_token_id"),
                             ("padding_token_id", "pad_token_id"), ("unknown_token_id", "unk_token_id")]:
        value = metadata(reader, f"tokenizer.ggml.{gguf_key}", None)
        if value is not None:
            config[hf_key] = value

    if arch == "llama":
        config.update(
            model_type="llama",
            architectures=["LlamaForCausalLM"],
            head_dim=get("rope.dimension_count", hidden // n_heads),
            hidden_act="silu",
            mlp_bias=False,
            rope_parameters={"rope_type": "default", "rope_theta": config["rope_theta"]},
        )
    elif arch == "gemma3":
        head_dim = get("attention.key_length")
        # Not stored in the file: llama.cpp hard-codes these for Gemma 3, and so do we.
        # Every 6th layer attends globally, the other five through a sliding window;
        # local layers use RoPE base 10_000, global ones the file's freq_base.
        layer_types = [f"{kind}_attention" for kind in gemma3_layer_types(config["num_hidden_layers"])]
        config.update(
            model_type="gemma3_text",
            architectures=["Gemma3ForCausalLM"],
            head_dim=head_dim,
            hidden_activation="gelu_pytorch_tanh",
            query_pre_attn_scalar=head_dim,  # scores are divided by sqrt(head_dim) (27B differs)
            sliding_window=get("attention.sliding_window"),
            sliding_window_pattern=GEMMA3_GLOBAL_EVERY,
            layer_types=layer_types,
            rope_local_base_freq=10000.0,
            rope_parameters={
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": {"rope_type": "default", "rope_theta": config["rope_theta"]},
            },
            final_logit_softcapping=None,
            attn_logit_softcapping=None,
        )
    return config


def unpermute_qk(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Undo llama.cpp's row permutation of W_q / W_k (interleaved RoPE -> split-halves RoPE).

    Inside each head, GGUF orders the rows as pairs (0, d/2), (1, d/2+1), ... side by side;
    Hugging Face keeps the first halves together, then the second halves.
    With one head of 4 rows:  GGUF rows [a0, b0, a1, b1]  ->  HF rows [a0, a1, b0, b1].

    >>> unpermute_qk(torch.tensor([[0.], [10.], [1.], [11.]]), n_heads=1).flatten().tolist()
    [0.0, 1.0, 10.0, 11.0]
    """
    rows, cols = weight.shape
    head_dim = rows // n_heads
    w = weight.reshape(n_heads, head_dim // 2, 2, cols)  # (heads, pair, which-half, in)
    w = w.transpose(1, 2)                                # (heads, which-half, pair, in)
    return w.reshape(rows, cols)                         # (heads * head_dim, in)


def hf_name_of(gguf_name: str, arch: str) -> str:
    """'blk.3.attn_q.weight' -> 'model.layers.3.self_attn.q_proj.weight' (a clear error for unknown names)."""
    match = re.fullmatch(r"blk\.(\d+)\.(.+)", gguf_name)
    template = f"blk.{{}}.{match.group(2)}" if match else gguf_name
    if template not in TENSOR_NAMES[arch]:
        raise ValueError(
            f"GGUF tensor {gguf_name!r} has no Hugging Face counterpart for architecture {arch!r}. "
            f"Known tensors: {', '.join(sorted(TENSOR_NAMES[arch]))}."
        )
    hf_template = TENSOR_NAMES[arch][template]
    return hf_template.format(match.group(1)) if match else hf_template


def read_gguf_checkpoint(path: str | os.PathLike, reader=None, progress: bool = True) -> tuple[dict, dict]:
    """Dequantize a GGUF file into ``(hf_config, hf_state_dict)`` with float32 tensors.

    ``reader`` lets a caller that already parsed the file (a Gemma 3 header with its
    262k-entry vocabulary takes ~15 s to parse) hand it over instead of parsing twice.
    """
    from gguf.quants import dequantize

    reader = reader if reader is not None else open_reader(path)
    config = gguf_config_to_hf(reader)
    arch = architecture_of(reader)
    n_heads, n_kv_heads = config["num_attention_heads"], config["num_key_value_heads"]

    state_dict = {}
    # a bar on a terminal or in a notebook, whole lines in a log (llmlab.progress)
    tensors = progress_bar(reader.tensors, desc=f"Dequantizing {os.path.basename(os.fspath(path))}",
                           unit="tensor", disable=not progress)
    for tensor in tensors:
        name = hf_name_of(tensor.name, arch)
        # Quantized blocks -> float32 numbers, shape (out_features, in_features) like nn.Linear.
        values = np.asarray(dequantize(tensor.data, tensor.tensor_type), dtype=np.float32)
        if not values.flags.writeable:  # float32 tensors come straight from the read-only memory map
            values = values.copy()
        weight = torch.from_numpy(values)
        if arch == "llama" and tensor.name.endswith("attn_q.weight"):
            weight = unpermute_qk(weight, n_heads)
        elif arch == "llama" and tensor.name.endswith("attn_k.weight"):
            weight = unpermute_qk(weight, n_kv_heads)
        elif arch == "gemma3" and tensor.name.endswith("norm.weight"):
            weight = weight - 1.0  # GGUF stores 1 + w for Gemma's norms; HF stores w
        state_dict[name] = weight.contiguous()

    _check_complete(state_dict, config, arch)
    return config, state_dict


def _check_complete(state_dict: dict, config: dict, arch: str) -> None:
    """Every tensor the architecture needs must be in the file: no silent partial loads."""
    expected = set()
    for template in TENSOR_NAMES[arch].values():
        if template == "lm_head.weight":
            continue  # optional: absent when the head is tied to the embedding
        if "{}" in template:
            expected.update(template.format(i) for i in range(config["num_hidden_layers"]))
        else:
            expected.add(template)
    missing = sorted(expected - set(state_dict))
    if missing:
        raise ValueError(f"The GGUF file lacks {len(missing)} tensor(s) a {arch!r} model needs, e.g. {missing[:5]}. "
                         "The file is incomplete or not a standard llama.cpp export.")
