"""llmlab.gguf against transformers' own GGUF loader, on tiny files written here.

Each test writes a small llama or gemma3 GGUF file the way llama.cpp's converter does
(Q/K rows permuted for llama, 1 + w norms for Gemma, some tensors quantized), then checks
that read_gguf_checkpoint gives exactly the tensors transformers loads from the same file,
and exactly the original weights where the file stored them unquantized.
The real SmolLM2 / Gemma files are compared in tests/test_real_models.py.
"""
import os

import numpy as np
import pytest
import torch

gguf = pytest.importorskip("gguf")
transformers = pytest.importorskip("transformers")

from llmlab import assert_same_up_to_rounding  # noqa: E402
from llmlab.gguf import read_gguf_checkpoint, unpermute_qk  # noqa: E402

Q = gguf.GGMLQuantizationType


def llama_cpp_permute(w: np.ndarray, n_heads: int) -> np.ndarray:
    """What llama.cpp's convert script does to W_q / W_k rows (written here independently)."""
    rows = w.shape[0]
    return w.reshape(n_heads, 2, rows // n_heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def test_unpermute_worked_example():
    w = torch.arange(8.0).reshape(8, 1)  # 2 heads of 4 rows
    gguf_rows = torch.from_numpy(llama_cpp_permute(w.numpy(), 2))
    assert gguf_rows.flatten().tolist() == [0, 2, 1, 3, 4, 6, 5, 7]
    assert torch.equal(unpermute_qk(gguf_rows, 2), w)


TINY = dict(vocab=128, d=64, ff=96, heads=4, kv_heads=2, layers=2, eps=1e-5, theta=10000.0)
TINY_GEMMA = dict(vocab=128, d=64, ff=96, heads=2, kv_heads=1, head_dim=32, layers=7, eps=1e-6,
                  theta=1_000_000.0, window=8)


def _hf_tensors(arch: str, c: dict, tied: bool, seed: int = 0) -> dict:
    """Random weights in Hugging Face naming/layout."""
    g = np.random.default_rng(seed)
    head_dim = c.get("head_dim", c["d"] // c["heads"])
    sd = {"model.embed_tokens.weight": g.standard_normal((c["vocab"], c["d"])),
          "model.norm.weight": g.standard_normal(c["d"])}
    if not tied:
        sd["lm_head.weight"] = g.standard_normal((c["vocab"], c["d"]))
    norms = ["input_layernorm", "post_attention_layernorm"]
    if arch == "gemma3":
        norms += ["pre_feedforward_layernorm", "post_feedforward_layernorm"]
    for i in range(c["layers"]):
        p = f"model.layers.{i}."
        sd[p + "self_attn.q_proj.weight"] = g.standard_normal((c["heads"] * head_dim, c["d"]))
        sd[p + "self_attn.k_proj.weight"] = g.standard_normal((c["kv_heads"] * head_dim, c["d"]))
        sd[p + "self_attn.v_proj.weight"] = g.standard_normal((c["kv_heads"] * head_dim, c["d"]))
        sd[p + "self_attn.o_proj.weight"] = g.standard_normal((c["d"], c["heads"] * head_dim))
        sd[p + "mlp.gate_proj.weight"] = g.standard_normal((c["ff"], c["d"]))
        sd[p + "mlp.up_proj.weight"] = g.standard_normal((c["ff"], c["d"]))
        sd[p + "mlp.down_proj.weight"] = g.standard_normal((c["d"], c["ff"]))
        for n in norms:
            sd[p + n + ".weight"] = g.standard_normal(c["d"])
        if arch == "gemma3":
            sd[p + "self_attn.q_norm.weight"] = g.standard_normal(head_dim)
            sd[p + "self_attn.k_norm.weight"] = g.standard_normal(head_dim)
    return {k: v.astype(np.float32) for k, v in sd.items()}


# HF name fragment -> (GGUF name fragment, storage type); a mix of float and quantized types
_TO_GGUF = [
    ("model.embed_tokens.weight", "token_embd.weight", Q.Q8_0),
    ("model.norm.weight", "output_norm.weight", Q.F32),
    ("lm_head.weight", "output.weight", Q.F16),
    ("self_attn.q_proj.weight", "attn_q.weight", Q.Q4_1),
    ("self_attn.k_proj.weight", "attn_k.weight", Q.F32),
    ("self_attn.v_proj.weight", "attn_v.weight", Q.Q5_0),
    ("self_attn.o_proj.weight", "attn_output.weight", Q.Q8_0),
    ("mlp.gate_proj.weight", "ffn_gate.weight", Q.Q4_0),
    ("mlp.up_proj.weight", "ffn_up.weight", Q.F32),
    ("mlp.down_proj.weight", "ffn_down.weight", Q.Q8_0),
    ("input_layernorm.weight", "attn_norm.weight", Q.F32),
    ("self_attn.q_norm.weight", "attn_q_norm.weight", Q.F32),
    ("self_attn.k_norm.weight", "attn_k_norm.weight", Q.F32),
    ("pre_feedforward_layernorm.weight", "ffn_norm.weight", Q.F32),
    ("post_feedforward_layernorm.weight", "post_ffw_norm.weight", Q.F32),
]


def _gguf_name(hf_name: str, arch: str) -> tuple[str, object]:
    if arch == "llama" and hf_name.endswith("post_attention_layernorm.weight"):
        return hf_name.replace("model.layers.", "blk.").split(".post")[0] + ".ffn_norm.weight", Q.F32
    if arch == "gemma3" and hf_name.endswith("post_attention_layernorm.weight"):
        return hf_name.replace("model.layers.", "blk.").split(".post")[0] + ".post_attention_norm.weight", Q.F32
    for hf_part, gguf_part, qtype in _TO_GGUF:
        if hf_name.endswith(hf_part):
            prefix = hf_name[: -len(hf_part)].replace("model.layers.", "blk.")
            return (prefix + gguf_part if prefix.startswith("blk.") else gguf_part), qtype
    raise AssertionError(hf_name)


def write_tiny_gguf(path, arch: str, c: dict, sd: dict) -> None:
    """Write `sd` (HF layout) as a GGUF file with llama.cpp's conventions for `arch`."""
    head_dim = c.get("head_dim", c["d"] // c["heads"])
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"tiny {arch}")
    w.add_block_count(c["layers"])
    w.add_context_length(256)
    w.add_embedding_length(c["d"])
    w.add_feed_forward_length(c["ff"])
    w.add_head_count(c["heads"])
    w.add_head_count_kv(c["kv_heads"])
    w.add_layer_norm_rms_eps(c["eps"])
    w.add_rope_freq_base(c["theta"])
    w.add_vocab_size(c["vocab"])
    if arch == "llama":
        w.add_rope_dimension_count(head_dim)
    else:
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
        w.add_sliding_window(c["window"])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    for hf_name, value in sd.items():
        name, qtype = _gguf_name(hf_name, arch)
        if arch == "llama" and name.endswith("attn_q.weight"):
            value = llama_cpp_permute(value, c["heads"])
        if arch == "llama" and name.endswith("attn_k.weight"):
            value = llama_cpp_permute(value, c["kv_heads"])
        if arch == "gemma3" and name.endswith("norm.weight"):
            value = value + 1.0
        data = gguf.quants.quantize(np.ascontiguousarray(value), qtype)
        w.add_tensor(name, data, raw_dtype=qtype if qtype not in (Q.F32, Q.F16) else None)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def _transformers_load(path):
    model = transformers.AutoModelForCausalLM.from_pretrained(
        os.path.dirname(path), gguf_file=os.path.basename(path), dtype=torch.float32)
    return model


@pytest.mark.parametrize("arch,c,tied", [("llama", TINY, True), ("llama", TINY, False),
                                         ("gemma3", TINY_GEMMA, True)])
def test_tiny_gguf_matches_transformers_exactly(tmp_path, arch, c, tied):
    original = _hf_tensors(arch, c, tied)
    path = tmp_path / f"tiny-{arch}.gguf"
    write_tiny_gguf(path, arch, c, original)

    config, state_dict = read_gguf_checkpoint(path, progress=False)
    reference = _transformers_load(str(path))
    ref_sd = reference.state_dict()

    # Same names (transformers also lists the tied head, which is the embedding itself).
    expected_names = set(ref_sd) - ({"lm_head.weight"} if tied else set())
    assert set(state_dict) == expected_names
    for name, tensor in state_dict.items():
        assert tensor.dtype == torch.float32, name
        assert torch.equal(tensor, ref_sd[name]), f"{name}: max diff {(tensor - ref_sd[name]).abs().max()}"
        # Where the file stored float32, we must get back the original weights bit for bit.
        # (Gemma norms went through 1 + w and back: an add and a subtract in float32, rounded at the size
        # of 1 + w, not of w.)
        if _gguf_name(name, arch)[1] == Q.F32:
            if arch == "gemma3" and name.endswith("norm.weight"):
                expected = torch.from_numpy(original[name])
                assert_same_up_to_rounding(tensor, expected, depth=2, scale=1 + float(expected.abs().max()))
            else:
                assert torch.equal(tensor, torch.from_numpy(original[name])), name

    ref_cfg = reference.config
    assert config["model_type"] == ref_cfg.model_type == {"llama": "llama", "gemma3": "gemma3_text"}[arch]
    for key in ["vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps",
                "tie_word_embeddings", "bos_token_id", "eos_token_id"]:
        assert config[key] == getattr(ref_cfg, key), key
    assert config["tie_word_embeddings"] is tied
    assert config["rope_parameters"] == ref_cfg.rope_parameters
    if arch == "gemma3":
        for key in ["sliding_window", "layer_types", "final_logit_softcapping",
                    "attn_logit_softcapping", "hidden_activation"]:
            assert config[key] == getattr(ref_cfg, key), key
        # The file does not store query_pre_attn_scalar: llama.cpp scales by 1/sqrt(head_dim), and
        # so do we. transformers keeps its class default (256), which equals head_dim only for the
        # real Gemma 3 models (checked in test_real_models.py), not for this tiny head_dim of 32.
        assert config["query_pre_attn_scalar"] == c["head_dim"]
        assert config["layer_types"][5] == "full_attention" and config["layer_types"][4] == "sliding_attention"


def test_unsupported_architecture_is_named(tmp_path):
    path = tmp_path / "tiny-phi2.gguf"
    w = gguf.GGUFWriter(str(path), "phi2")
    w.add_block_count(1)
    w.add_tensor("token_embd.weight", np.zeros((4, 32), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(NotImplementedError, match="'phi2'.*'llama', 'gemma3'"):
        read_gguf_checkpoint(path, progress=False)


def test_unknown_tensor_and_missing_tensor_are_loud(tmp_path):
    sd = _hf_tensors("llama", TINY, tied=True)
    path = tmp_path / "partial.gguf"
    del sd["model.layers.1.mlp.up_proj.weight"]
    write_tiny_gguf(path, "llama", TINY, sd)
    with pytest.raises(ValueError, match=r"model\.layers\.1\.mlp\.up_proj\.weight"):
        read_gguf_checkpoint(path, progress=False)
    from llmlab.gguf import hf_name_of

    assert hf_name_of("blk.3.attn_q.weight", "llama") == "model.layers.3.self_attn.q_proj.weight"
    with pytest.raises(ValueError, match="rope_freqs.weight"):
        hf_name_of("rope_freqs.weight", "llama")


def test_not_a_gguf_file(tmp_path):
    from llmlab.gguf import open_reader

    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"not a gguf file at all")
    with pytest.raises(ValueError, match="could not be read as a GGUF file"):
        open_reader(bad)
    with pytest.raises(FileNotFoundError, match="No GGUF file"):
        open_reader(tmp_path / "missing.gguf")
