"""The batch contract: a list of prompts of different lengths, left-padded, gives through every
inspection function the same per-prompt results as one prompt at a time.

Tiny random models of three architectures (RoPE, learned positions, Gemma 3's sliding layers and
soft-caps); the prompts have 3, 9 and 14 tokens, so two rows are padded. Float rounding differs a
little between a padded batch and a single row (other matrix shapes), hence the 1e-5 tolerance.
"""
import pytest
import torch

import llmlab
from llmlab import ModelConfig, Transformer
from llmlab.inspection import (
    ablate, capture, causal_trace, direct_logit_attribution, hook_name, hooks, layer_similarity, logit_diff,
    logit_lens, mean_resid, neuron_activations, patch, patchscope, position_similarity, prompt_similarity,
    generate_steered, steering_vector, token_id, top_activating_tokens,
)
from llmlab.devices import available_devices
from llmlab.tokenization import train_bpe
from fakes import CharTokenizer

TOK = CharTokenizer()
TEXTS = ["the cat", "a dog ran far", "where is the red house"]
PRESETS = ["tiny-llama", "tiny-gpt2", "tiny-gemma3"]
CLOSE = dict(atol=1e-5, rtol=1e-5)


def tiny(preset, device="cpu"):
    torch.manual_seed(0)
    model = Transformer(ModelConfig.preset(preset)).eval().to(device)
    with torch.no_grad():  # larger weights: attention and lens rows that differ visibly between prompts
        for p in model.parameters():
            p.mul_(5.0) if p.dim() > 1 else None
    return model


@pytest.fixture(scope="module", params=[(p, d) for d in available_devices() for p in PRESETS],
                ids=lambda param: f"{param[0]}-{param[1]}")
def model(request):
    return tiny(*request.param)


def test_the_texts_have_different_lengths():
    assert len({len(TOK.encode(t)) for t in TEXTS}) == len(TEXTS)


def test_capture_and_forward_of_a_batch_match_each_prompt_alone(model):
    names = [hook_name(1, "resid_post"), hook_name(0, "attn.z"), hook_name(1, "mlp.post")]
    logits, cache = capture(model, TOK, TEXTS, names=names)
    last_logits, last = capture(model, TOK, TEXTS, names=names, positions=[-1])
    assert cache.attention_mask.shape == logits.shape[:2] and not bool(cache.attention_mask.all())
    ends_logits, ends = capture(model, TOK, TEXTS, names=names, positions=[0, -1])   # column 0: padding in short rows
    assert [ends.real_positions(row) for row in range(3)] == [[1], [1], [0, 1]]
    # with positions the logits are kept there too; [-1] runs the LM head on the last position only
    assert last_logits.shape == (3, 1, model.config.vocab_size) and ends_logits.shape == (3, 2, model.config.vocab_size)
    torch.testing.assert_close(ends_logits[:, -1], logits[:, -1], **CLOSE)
    _, head = capture(model, TOK, TEXTS, names=["hook_logits", "hook_final_norm"], positions=[-1])
    torch.testing.assert_close(head["hook_logits"][:, 0], logits[:, -1], **CLOSE)
    for row, text in enumerate(TEXTS):
        alone_logits, alone = capture(model, TOK, text, names=names)
        real = cache.real_positions(row)
        assert len(real) == alone_logits.shape[1] and cache.tokens[row] == alone.tokens
        torch.testing.assert_close(logits[row, real], alone_logits[0], **CLOSE)
        torch.testing.assert_close(last_logits[row, -1], alone_logits[0, -1], **CLOSE)   # -1: last real token
        for name in names:
            torch.testing.assert_close(cache[name][row, real], alone[name][0], **CLOSE)
            torch.testing.assert_close(last[name][row, -1], alone[name][0, -1], **CLOSE)


def test_patterns_of_a_batch_match_each_prompt_alone(model):
    name = hook_name(1, "attn.pattern")
    _, cache = capture(model, TOK, TEXTS, names=[name])
    for row, text in enumerate(TEXTS):
        _, alone = capture(model, TOK, text, names=[name])
        real = cache.real_positions(row)
        torch.testing.assert_close(cache[name][row][:, real][:, :, real], alone[name][0], **CLOSE)


def test_hooks_with_a_padded_forward_write_each_row_as_alone(model):
    ids, mask = llmlab.tokenization.pad_left([TOK.encode(t) for t in TEXTS], pad_id=0)
    shift = torch.linspace(-1, 1, model.config.d_model, device=model.device)
    with torch.no_grad(), hooks(model, {hook_name(0, "resid_post"): lambda h: h + shift}):
        batch = model(ids, attention_mask=mask)[:, -1]
        alone = [model(llmlab.as_ids(model, TOK, t))[0, -1] for t in TEXTS]
    torch.testing.assert_close(batch, torch.stack(alone), **CLOSE)


def test_logit_lens_of_a_batch_is_one_lens_per_prompt(model):
    lenses = logit_lens(model, TOK, TEXTS, k=3, target="e")
    assert isinstance(lenses, list) and len(lenses) == len(TEXTS)
    for lens, text in zip(lenses, TEXTS):
        alone = logit_lens(model, TOK, text, k=3, target="e")
        assert lens.tokens == alone.tokens and lens.positions == alone.positions
        torch.testing.assert_close(lens.top_probs, alone.top_probs, **CLOSE)
        torch.testing.assert_close(lens.target_prob, alone.target_prob, **CLOSE)
    # one position per prompt, counted within each prompt
    last = logit_lens(model, TOK, TEXTS, k=3, positions=[-1])
    assert [lens.tokens for lens in last] == [[text[-1]] for text in TEXTS]


def test_ablate_and_patch_of_a_batch_match_each_prompt_alone(model):
    name = hook_name(0, "resid_post")
    value = torch.ones(1, 1, model.config.d_model)
    ablated = ablate(model, TOK, TEXTS, layer=0, sublayer="attn", head=1, positions=[-1])
    patched = patch(model, TOK, TEXTS, name, value, positions=[-2])
    for row, text in enumerate(TEXTS):
        torch.testing.assert_close(ablated[row, -1], ablate(model, TOK, text, 0, "attn", head=1, positions=[-1])[0, -1],
                                   **CLOSE)
        torch.testing.assert_close(patched[row, -1], patch(model, TOK, text, name, value, positions=[-2])[0, -1], **CLOSE)


def test_causal_trace_and_attribution_give_one_result_per_prompt(model):
    metric = logit_diff(5, 9)
    traces = causal_trace(model, TOK, TEXTS, metric, noise_positions=[0], positions=[-1, -2])
    if model.config.block != "post":
        shares = direct_logit_attribution(model, TOK, TEXTS, target=5, minus=9)
    for row, text in enumerate(TEXTS):
        alone = causal_trace(model, TOK, text, metric, noise_positions=[0], positions=[-1, -2])
        torch.testing.assert_close(traces[row].effect, alone.effect, **CLOSE)
        assert traces[row].tokens == alone.tokens
        if model.config.block != "post":
            one = direct_logit_attribution(model, TOK, text, target=5, minus=9)
            torch.testing.assert_close(shares[row].contributions, one.contributions, **CLOSE)
            assert abs(shares[row].contributions.sum() + shares[row].bias - shares[row].logit) < 1e-3


def test_neurons_similarity_steering_and_patchscope_of_a_batch(model):
    pairs = neuron_activations(model, TOK, TEXTS, layer=1, neuron=3)
    for (tokens, acts), text in zip(pairs, TEXTS):
        alone_tokens, alone_acts = neuron_activations(model, TOK, text, layer=1, neuron=3)
        assert tokens == alone_tokens
        torch.testing.assert_close(acts, alone_acts, **CLOSE)
    top = top_activating_tokens(model, TOK, TEXTS, layer=1, neuron=3, k=4)
    everything = sorted((v for _, acts in pairs for v in acts.tolist()), reverse=True)
    assert [round(v, 4) for v, _, _ in top] == [round(v, 4) for v in everything[:4]]

    _, cache = capture(model, TOK, TEXTS)
    for row, text in enumerate(TEXTS):
        _, alone = capture(model, TOK, text)
        torch.testing.assert_close(position_similarity(cache, -1, batch=row), position_similarity(alone, -1), **CLOSE)
        torch.testing.assert_close(layer_similarity(cache, -1, batch=row), layer_similarity(alone, -1), **CLOSE)
    lasts = torch.stack([capture(model, TOK, t, names=[hook_name(1, "resid_post")])[1].resid(1)[0, -1] for t in TEXTS])
    expected = torch.nn.functional.cosine_similarity(lasts[:, None], lasts[None], dim=-1)
    torch.testing.assert_close(prompt_similarity(model, TOK, TEXTS, layer=1), expected, atol=1e-4, rtol=1e-4)

    torch.testing.assert_close(mean_resid(model, TOK, TEXTS, layer=1), lasts.mean(0), **CLOSE)
    means = torch.stack([capture(model, TOK, t)[1].resid(1)[0].mean(0) for t in TEXTS]).mean(0)
    torch.testing.assert_close(mean_resid(model, TOK, TEXTS, layer=1, position="mean"), means, **CLOSE)
    vector = steering_vector(model, TOK, TEXTS[:2], TEXTS[2:], layer=0)
    steered = generate_steered(model, TOK, TEXTS, vector, layer=0, scale=2.0, max_new_tokens=4)
    assert steered == [generate_steered(model, TOK, t, vector, layer=0, scale=2.0, max_new_tokens=4) for t in TEXTS]
    scopes = patchscope(model, TOK, TEXTS, source_layer=0, template="a b ?", max_new_tokens=3)
    assert [s.text for s in scopes] == [patchscope(model, TOK, t, 0, template="a b ?", max_new_tokens=3).text
                                        for t in TEXTS]


def test_a_list_of_one_text_is_a_batch_of_one(model):
    assert capture(model, TOK, ["the cat"])[1].tokens == [list("the cat")]
    assert capture(model, TOK, "the cat")[1].tokens == list("the cat")
    assert isinstance(logit_lens(model, TOK, ["the cat"]), list) and not isinstance(logit_lens(model, TOK, "the cat"), list)
    assert isinstance(causal_trace(model, TOK, ["the cat"], 5, noise_positions=[0], layers=[0]), list)


def test_padded_ids_with_their_mask_equal_a_list_of_texts(model):
    ids, mask = llmlab.tokenization.pad_left([TOK.encode(t) for t in TEXTS], pad_id=7)
    from_texts = logit_lens(model, TOK, TEXTS, k=2)
    from_ids = logit_lens(model, TOK, ids, k=2, attention_mask=mask)
    assert [lens.tokens for lens in from_ids] == [lens.tokens for lens in from_texts]
    for a, b in zip(from_ids, from_texts):
        assert torch.equal(a.top_ids, b.top_ids)
    # the control: the same padded ids without their mask read the padding as text
    with torch.no_grad():
        unmasked, masked = model(ids)[0, -1], model(ids, attention_mask=mask)[0, -1]
    assert (unmasked - masked).abs().max() > 1e-3


# ------------------------------------------------------------------ the tokenizer side

def test_encode_batch_pads_on_the_left_with_the_eos_id():
    tok = train_bpe("the cat sat on the mat. " * 20, vocab_size=270)
    tok.eos_token_id = 3
    ids, mask = tok.encode_batch(["the cat", "the cat sat on the mat"])
    short, long = tok.encode("the cat"), tok.encode("the cat sat on the mat")
    assert ids.shape == mask.shape == (2, len(long)) and ids.dtype == mask.dtype == torch.long
    assert ids[0, -len(short):].tolist() == short and ids[1].tolist() == long
    assert ids[0, :len(long) - len(short)].tolist() == [tok.pad_token_id] * (len(long) - len(short)) == \
        [3] * (len(long) - len(short))
    assert mask[0].tolist() == [0] * (len(long) - len(short)) + [1] * len(short) and bool(mask[1].all())
    with pytest.raises(TypeError, match="list of texts"):
        tok.encode_batch("the cat")


def test_one_prompt_is_a_1_by_T_tensor_on_the_model_device():
    model = tiny("tiny-llama")
    ids = llmlab.as_ids(model, TOK, "the cat")
    assert ids.shape == (1, 7) and ids.dtype == torch.long and ids.device == model.device
    with pytest.raises(TypeError, match="encode_batch"):
        llmlab.as_ids(model, TOK, TEXTS)


def test_token_id_is_the_one_single_token_lookup():
    assert token_id(TOK, "c") == 3 and token_id(None, 42) == 42
    with pytest.raises(ValueError, match="not one"):
        token_id(TOK, "cat")


# ------------------------------------------------------------------ hooks that cannot fire

def test_hooks_refuses_a_pattern_hook_on_the_fused_attention_path():
    model = tiny("tiny-llama")
    assert model.attn_impl == "sdpa"
    name = hook_name(0, "attn.pattern")
    with pytest.raises(ValueError, match=r"never fires on the 'sdpa' attention path.*attn_impl='eager'"):
        with hooks(model, {name: lambda w: None}):
            pass
    seen = []
    with torch.no_grad(), hooks(model, {name: seen.append}, attn_impl="eager"):
        model(llmlab.as_ids(model, TOK, "the cat"))
    assert len(seen) == 1 and seen[0].shape == (1, model.config.n_heads, 7, 7)
    assert model.attn_impl == "sdpa"  # restored after the block


def test_a_pattern_hook_is_allowed_where_sdpa_falls_back_to_eager():
    config = ModelConfig(**{**ModelConfig.preset("tiny-gemma3").to_dict(), "attn_logit_softcap": 50.0})
    model = Transformer(config).eval()  # Gemma 2-style soft-capped scores always take the eager path
    assert model.attn_impl == "sdpa" and model.blocks[0].attn.softcap == 50.0
    seen = []
    with torch.no_grad(), hooks(model, {hook_name(0, "attn.pattern"): seen.append}):
        model(llmlab.as_ids(model, TOK, "the cat"))
    assert len(seen) == 1


def test_hooks_work_on_any_module_with_hook_points():
    """hooks() is not only for Transformer: the encoder-decoder blocks of llmlab.seq2seq run eager attention,
    so their pattern hooks fire and are not refused."""
    from llmlab.seq2seq import DecoderBlock

    block = DecoderBlock(ModelConfig.preset("tiny-llama")).eval()
    d = ModelConfig.preset("tiny-llama").d_model
    x, memory = torch.randn(1, 4, d), torch.randn(1, 6, d)
    seen = {}
    names = {"attn.hook_pattern": "self", "cross_attn.hook_pattern": "cross"}
    with torch.no_grad(), hooks(block, {name: lambda w, key=key: seen.__setitem__(key, w.shape)
                                        for name, key in names.items()}):
        block(x, memory)
    assert seen == {"self": (1, block.attn.n_heads, 4, 4), "cross": (1, block.attn.n_heads, 4, 6)}


def test_hook_layouts_are_read_from_the_hook_points():
    model = tiny("tiny-llama")
    layouts = {name: model.get_submodule(name).layout for name in (hook_name(0, "attn.q"), hook_name(0, "attn.z"),
                                                                   hook_name(0, "attn.pattern"), "hook_logits")}
    assert layouts == {"blocks.0.attn.hook_q": "B H T hd", "blocks.0.attn.hook_z": "B T H hd",
                       "blocks.0.attn.hook_pattern": "B H T S", "hook_logits": "B T V"}


# ------------------------------------------------------------------ the public names

def test_inspection_names_are_not_at_the_top_level_and_say_where_they_live():
    for name, package in [("logit_lens", "inspection"), ("mean_ci", "stats"), ("StaticKVCache", "kvcache")]:
        with pytest.raises(AttributeError, match=rf"from llmlab\.{package} import {name}"):
            getattr(llmlab, name)
    assert llmlab.inspection.logit_lens is logit_lens
    for name in llmlab.__all__:
        assert getattr(llmlab, name) is not None


def test_the_final_norm_frozen_at_h_is_the_norm():
    for preset in PRESETS:
        model = tiny(preset)
        h = torch.randn(4, model.config.d_model)
        scale, linear = model.final_norm.linear_at(h)
        bias = 0.0 if getattr(model.final_norm, "bias", None) is None else model.final_norm.bias
        torch.testing.assert_close(linear(h) + bias, model.final_norm(h), atol=1e-5, rtol=1e-5)
        parts = torch.randn(3, 4, model.config.d_model)
        torch.testing.assert_close(linear(parts).sum(0), linear(parts.sum(0)), atol=1e-5, rtol=1e-5)  # linear
