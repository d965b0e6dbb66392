"""The live model (llmlab.live): the ONNX export gives llmlab's own numbers, and its site files decode.

Tolerances: next-token probabilities within 1e-4 and the same top-20 order; attention weights
within 1e-4; the logit lens's top-5 ids equal and probabilities within 1e-4 (both sides run in
float32 on the same dequantized numbers, in a different order of additions). The cache, the
knock-outs and the steering are checked the same way against llmlab's own generation and hooks.
"""
import numpy as np
import pytest
import torch

import llmlab
from llmlab.hooks import hook_name
from llmlab.inspection import ablate, capture, logit_lens
from llmlab.inspection.capture import hooks
from llmlab.inspection.steering import mean_resid, steer, steering_vector
from llmlab.live import CONTEXT, LIVE_OUTPUTS, export_onnx, run_onnx
from llmlab.live.blocks import Q4_1_BLOCK, Q8_0_BLOCK, expand_blocks, raw_blocks, smollm2_gguf_path
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


def softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


@pytest.mark.parametrize("prompt", PROMPTS)
def test_onnx_matches_llmlab(smol, exported, prompt):
    model, tokenizer = smol
    path, session = exported
    ids = tokenizer.encode(prompt)
    T = len(ids)
    target = tokenizer.encode(" Paris")[0]
    out = run_onnx(path, ids, session=session, lens_positions=range(T), lens_target=target)
    assert set(out) == set(LIVE_OUTPUTS)

    logits, cache = capture(model, tokenizer, prompt, names=["*hook_pattern", "*hook_resid_post"])
    probs = torch.softmax(logits[0, -1].float(), -1).numpy()                     # (V,)
    got = softmax(out["logits"].astype(np.float64))
    assert np.abs(got - probs).max() < 1e-4
    assert np.argsort(-got, kind="stable")[:20].tolist() == np.argsort(-probs, kind="stable")[:20].tolist()

    L, H = model.config.n_layers, model.config.n_heads
    assert out["attention"].shape == (L, H, T, T)
    for layer in range(L):
        pattern = cache[f"blocks.{layer}.attn.hook_pattern"][0].numpy()         # (H, T, T)
        assert np.abs(out["attention"][layer] - pattern).max() < 1e-4, f"block {layer}"
        resid = cache[f"blocks.{layer}.hook_resid_post"][0, -1].numpy()
        assert np.abs(out["resid"][layer + 1] - resid).max() < 1e-3 * max(1.0, np.abs(resid).max())
    row_sums = out["attention"].sum(-1)                # every row a distribution, up to rounding over T keys
    llmlab.assert_same_up_to_rounding(row_sums, np.ones_like(row_sums), depth=T)

    # the lens at every position (the book's grid), and the target's rank and probability in it
    lens = logit_lens(model, tokenizer, prompt, k=5, target=target)
    assert out["lens_ids"].shape == (L + 1, T, 5)
    assert (out["lens_ids"] == lens.top_ids.numpy()).all()
    assert np.abs(out["lens_probs"] - lens.top_probs.numpy()).max() < 1e-4
    ranks, want = out["lens_target_ranks"], lens.target_rank.numpy()
    assert (ranks[want < 20] == want[want < 20]).all()           # far down the list, near-ties may swap
    assert (np.abs(ranks - want) <= 0.01 * want + 2).all()
    # the graph counts the rank slice by slice of the vocabulary: the same count as over the whole row
    # (the last block's row at the last position is the one whose logits come back whole)
    assert ranks[L, T - 1] == (out["logits"] > out["logits"][target]).sum()
    assert np.abs(out["lens_target_probs"] - lens.target_prob.numpy()).max() < 1e-4


def test_a_decode_step_with_the_cache_equals_the_whole_pass(smol, exported):
    """Prompt minus its last token, then that token alone with the cache: the same next token and keys."""
    _, tokenizer = smol
    path, session = exported
    ids = tokenizer.encode(PROMPTS[0])
    whole = run_onnx(path, ids, session=session)
    head = run_onnx(path, ids[:-1], session=session, attention=False, lens_positions=())
    assert head["attention"].shape[2] == 0 and head["lens_ids"].shape[1] == 0     # nothing asked, nothing made
    step = run_onnx(path, ids[-1:], session=session, past=(head["present_keys"], head["present_values"]))
    assert step["present_keys"].shape == whole["present_keys"].shape == (30, 3, len(ids), 64)
    assert np.abs(step["present_keys"] - whole["present_keys"]).max() < 1e-4
    assert np.abs(step["logits"] - whole["logits"]).max() < 1e-3
    assert step["attention"].shape == (30, 9, 1, len(ids))                        # the new row, over every key
    assert np.abs(step["attention"][:, :, 0] - whole["attention"][:, :, -1]).max() < 1e-5


def test_greedy_with_the_cache_writes_llmlab_generate_tokens(smol, exported):
    model, tokenizer = smol
    path, session = exported
    ids = tokenizer.encode("The capital of France is")
    want = llmlab.generate(model, torch.tensor([ids]), max_new_tokens=8)[0, len(ids):].tolist()
    out, got = run_onnx(path, ids, session=session, attention=False, lens_positions=()), []
    for _ in range(8):
        got.append(int(out["logits"].argmax()))
        out = run_onnx(path, got[-1:], session=session, past=(out["present_keys"], out["present_values"]),
                       attention=False, lens_positions=())
    assert got == want


def test_knocked_out_heads_give_llmlab_ablate_numbers(smol, exported):
    model, tokenizer = smol
    path, session = exported
    prompt = PROMPTS[0]
    ids = tokenizer.encode(prompt)
    want = ablate(model, tokenizer, prompt, layer=4, head=2)[0, -1].numpy()
    got = run_onnx(path, ids, session=session, ablate=[(4, 2)])["logits"]
    assert np.abs(got - want).max() < 1e-3

    def zero(head):
        def fn(z):  # (B, T, H, hd)
            z = z.clone()
            z[:, :, head] = 0.0
            return z
        return fn
    with torch.no_grad(), hooks(model, {hook_name(0, "attn.z"): zero(3), hook_name(7, "attn.z"): zero(8)}):
        want = model(torch.tensor([ids]))[0, -1].numpy()
    got = run_onnx(path, ids, session=session, ablate=[(0, 3), (7, 8)])["logits"]
    plain = run_onnx(path, ids, session=session)["logits"]
    assert np.abs(got - want).max() < 1e-3
    assert np.abs(got - plain).max() > 1e-2                  # the knock-out changed the output


def test_steering_gives_llmlab_steer_numbers(smol, exported):
    model, tokenizer = smol
    path, session = exported
    layer, scale = 10, 4.0
    vector = steering_vector(model, tokenizer, ["I love it", "What a joy"], ["I hate it", "What a pain"], layer)
    # the vector from the live model's own residual stream (what the page's difference of means uses)
    live_mean = [np.mean([run_onnx(path, tokenizer.encode(p), session=session)["resid"][layer + 1] for p in ps], 0)
                 for ps in (["I love it", "What a joy"], ["I hate it", "What a pain"])]
    assert np.abs((live_mean[0] - live_mean[1]) - vector.numpy()).max() < 1e-2 * vector.abs().max().item()
    assert np.abs(live_mean[0] - mean_resid(model, tokenizer, ["I love it", "What a joy"], layer).numpy()).max() < 1e-2

    ids = tokenizer.encode("Today I feel")
    with torch.no_grad(), steer(model, vector, layer, scale):
        want = model(torch.tensor([ids]))[0, -1].numpy()
    rows = np.zeros((30, 576), np.float32)
    rows[layer] = scale * vector.numpy()
    got = run_onnx(path, ids, session=session, steer=rows)["logits"]
    assert np.abs(got - want).max() < 1e-3
    assert np.abs(got - run_onnx(path, ids, session=session)["logits"]).max() > 0.1


def test_onnx_keeps_the_files_numbers_in_small_files(exported):
    path, _ = exported
    data = sorted(path.parent.glob("model.data.*"))
    sizes = [p.stat().st_size for p in data]
    assert len(data) >= 2 and max(sizes) <= CHUNK_BYTES
    # The GGUF's Q4_1 and Q8_0 blocks are 98 MB; the site holds the same bytes (the graph file adds the
    # norms and RoPE tables, 0.6 MB); weights.f32, expanded from them, is never shipped.
    assert 90e6 < sum(sizes) + path.stat().st_size < 101e6
    n_weights = sum(p.numel() for name, p in llmlab.load("smollm2-135m", device="cpu")[0].named_parameters()
                    if p.dim() == 2)                                     # every matrix (the LM head is tied)
    assert (path.parent / "weights.f32").stat().st_size == 4 * n_weights


@pytest.mark.parametrize("name, kind, size", [("blk.3.ffn_down.weight", "q4_1", Q4_1_BLOCK),
                                               ("token_embd.weight", "q8_0", Q8_0_BLOCK)])
def test_expanded_weights_are_gguf_dequantize(name, kind, size):
    from gguf.quants import dequantize

    from llmlab.gguf import open_reader

    tensor = next(t for t in open_reader(smollm2_gguf_path()).tensors if t.name == name)
    want = np.asarray(dequantize(tensor.data, tensor.tensor_type), dtype=np.float32)
    got = expand_blocks(kind, raw_blocks(tensor, size))
    assert got.shape == want.shape and (got == want).all()           # bit for bit


def test_run_onnx_refuses_bad_lengths(exported):
    path, session = exported
    with pytest.raises(ValueError, match=f"1 to {CONTEXT} tokens in all .*got 0 cached and 0 new"):
        run_onnx(path, [], session=session)
    with pytest.raises(ValueError, match=f"got 0 cached and {CONTEXT + 1} new"):
        run_onnx(path, [1] * (CONTEXT + 1), session=session)


@pytest.mark.parametrize("data", [b"", b"\x00", b"\xff" * 15, bytes(range(256)) * 3 + b"xyz"])
def test_15bit_text_round_trip(data):
    text = encode_15bit(data)
    assert len(text) == -(-len(data) * 8 // 15)
    assert all(0x3000 <= ord(c) < 0xB000 for c in text)
    assert decode_15bit(text, len(data)) == data


def test_a_binary_script_holds_its_bytes_in_a_comment(tmp_path):
    """write_binary_script: UTF-16 with a byte-order mark, the text inside a comment that nothing in it can end
    early, read back the way the page reads it (between the first /* and the last */)."""
    from llmlab.live.site import write_binary_script

    data = bytes(range(256)) * 40 + b"*/"
    path = tmp_path / "x.js"
    write_binary_script(path, "x", data)
    raw = path.read_bytes()
    assert raw[:2] == b"\xff\xfe"
    text = raw[2:].decode("utf-16-le")
    assert text.startswith('llmlabLiveFiles["x"] = {bytes: %d, text: function () {/*' % len(data))
    body = text[text.index("/*") + 2:text.rindex("*/")]
    assert "*/" not in body and decode_15bit(body, len(data)) == data
