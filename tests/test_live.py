"""The live model (llmlab.live): the ONNX export gives llmlab's own numbers, and its site files decode.

Tolerances: next-token probabilities within 1e-4 and the same top-20 order; attention weights
within 1e-4; the logit lens's top-5 ids equal and probabilities within 1e-4 (both sides run in
float32 on the same dequantized numbers, in a different order of additions).
"""
import numpy as np
import pytest
import torch

import llmlab
from llmlab.inspection import capture, logit_lens
from llmlab.live import LIVE_OUTPUTS, MAX_TOKENS, export_onnx, run_onnx
from llmlab.live.export import CHUNK_BYTES
from llmlab.live.site import decode_15bit, encode_15bit

PROMPTS = ["The Eiffel Tower is in the city of", "我喜欢喝茶，因为"]


@pytest.fixture(scope="module")
def smol():
    return llmlab.load("smollm2-135m", device="cpu")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    import onnxruntime

    path = export_onnx(tmp_path_factory.mktemp("live"))
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return path, session


@pytest.mark.parametrize("prompt", PROMPTS)
def test_onnx_matches_llmlab(smol, exported, prompt):
    model, tokenizer = smol
    path, session = exported
    ids = tokenizer.encode(prompt)
    out = run_onnx(path, ids, session=session)
    assert set(out) == set(LIVE_OUTPUTS)

    logits, cache = capture(model, tokenizer, prompt, names=["*hook_pattern"])
    probs = torch.softmax(logits[0, -1].float(), -1).numpy()                     # (V,)
    assert np.abs(out["probs"] - probs).max() < 1e-4
    assert np.argsort(-out["probs"], kind="stable")[:20].tolist() == np.argsort(-probs, kind="stable")[:20].tolist()

    L, H, T = model.config.n_layers, model.config.n_heads, len(ids)
    assert out["attention"].shape == (L, H, T, T)
    for layer in range(L):
        pattern = cache[f"blocks.{layer}.attn.hook_pattern"][0].numpy()         # (H, T, T)
        assert np.abs(out["attention"][layer] - pattern).max() < 1e-4, f"block {layer}"
    assert np.allclose(out["attention"].sum(-1), 1, atol=1e-5)

    lens = logit_lens(model, tokenizer, prompt, k=5, positions=[-1])
    assert (out["lens_ids"] == lens.top_ids[:, 0].numpy()).all()                # (L+1, 5)
    assert np.abs(out["lens_probs"] - lens.top_probs[:, 0].numpy()).max() < 1e-4


def test_onnx_keeps_the_files_numbers_in_small_files(exported):
    path, _ = exported
    data = sorted(path.parent.glob("model.data.*"))
    sizes = [p.stat().st_size for p in data]
    assert len(data) >= 2 and max(sizes) <= CHUNK_BYTES
    # The GGUF's Q4_1 and Q8_0 blocks are 98 MB; the export holds the same bytes, reordered.
    assert 90e6 < sum(sizes) + path.stat().st_size < 100e6


def test_run_onnx_refuses_bad_lengths(exported):
    path, session = exported
    with pytest.raises(ValueError, match="1 to 128 tokens; got 0"):
        run_onnx(path, [], session=session)
    with pytest.raises(ValueError, match=f"got {MAX_TOKENS + 1}"):
        run_onnx(path, [1] * (MAX_TOKENS + 1), session=session)


@pytest.mark.parametrize("data", [b"", b"\x00", b"\xff" * 15, bytes(range(256)) * 3 + b"xyz"])
def test_15bit_text_round_trip(data):
    text = encode_15bit(data)
    assert len(text) == -(-len(data) * 8 // 15)
    assert all(0x3000 <= ord(c) < 0xB000 for c in text)
    assert decode_15bit(text, len(data)) == data
