"""The batch contract: a list of prompts of different lengths, left-padded, gives through every
inspection function the same per-prompt results as one prompt at a time.

Tiny random models of three architectures (RoPE, learned positions, Gemma 3's sliding layers and
soft-caps); the prompts have 3, 9 and 14 tokens, so two rows are padded. A padded batch and a single
row run the same mathematics through other matrix shapes, so the kernels add in another order: those
comparisons are equal up to float32 rounding over the sums on the way there (`depth`, see
llmlab.numerics), not bit for bit. Functions that run each prompt of a batch alone (causal tracing,
attribution) are compared bit for bit.
"""
import pytest
import torch

import llmlab
from llmlab import ModelConfig, Transformer, assert_same_bits, assert_same_up_to_rounding, forward_depth
from llmlab.inspection import (
    ablate, capture, causal_trace, direct_logit_attribution, hook_name, hooks, layer_similarity, logit_diff,
    logit_lens, mean_resid, neuron_activations, patch, patchscope, position_similarity, prompt_similarity,
    generate_steered, steering_vector, token_id, top_activating_tokens,
)
from llmlab.devices import available_devices
from llmlab.tokenization import train_bpe
from fakes import CharTokenizer, tiny

TOK = CharTokenizer()
TEXTS = ["the cat", "a dog ran far", "where is the red house"]
PRESETS = ["tiny-llama", "tiny-gpt2", "tiny-gemma3"]
LONGEST = max(len(TOK.encode(t)) for t in TEXTS)  # 14 tokens: the most values a weighted sum of values adds


def depth(model, block=None):
    """The terms summed on the way to the logits, or to the output of block `block` (an upper bound for
    a hook inside that block)."""
    if block is None:
        return forward_depth(model.config, LONGEST)
    return forward_depth(model.config, LONGEST, n_layers=block + 1, head=False)


def head_depth(model):
    """The final norm (a mean over d_model) and the LM head (d_model products): what runs on other shapes
    when only some positions' logits are kept; the blocks before run on the same shapes."""
    return 2 * model.config.d_model


def block_of(name):
    return int(name.split(".")[1])


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
    assert_same_up_to_rounding(ends_logits[:, -1], logits[:, -1], depth=head_depth(model))
    _, head = capture(model, TOK, TEXTS, names=["hook_logits", "hook_final_norm"], positions=[-1])
    assert_same_up_to_rounding(head["hook_logits"][:, 0], logits[:, -1], depth=head_depth(model))
    for row, text in enumerate(TEXTS):
        alone_logits, alone = capture(model, TOK, text, names=names)
        real = cache.real_positions(row)
        assert len(real) == alone_logits.shape[1] and cache.tokens[row] == alone.tokens
        assert_same_up_to_rounding(logits[row, real], alone_logits[0], depth=depth(model))
        # -1: last real token
        assert_same_up_to_rounding(last_logits[row, -1], alone_logits[0, -1], depth=depth(model))
        for name in names:
            assert_same_up_to_rounding(cache[name][row, real], alone[name][0], depth=depth(model, block_of(name)))
            assert_same_up_to_rounding(last[name][row, -1], alone[name][0, -1], depth=depth(model, block_of(name)))


def test_patterns_of_a_batch_match_each_prompt_alone(model):
    name = hook_name(1, "attn.pattern")
    _, cache = capture(model, TOK, TEXTS, names=[name])
    for row, text in enumerate(TEXTS):
        _, alone = capture(model, TOK, text, names=[name])
        real = cache.real_positions(row)
        assert_same_up_to_rounding(cache[name][row][:, real][:, :, real], alone[name][0], depth=depth(model, 1))


def test_hooks_with_a_padded_forward_write_each_row_as_alone(model):
    ids, mask = llmlab.tokenization.pad_left([TOK.encode(t) for t in TEXTS], pad_id=0)
    shift = torch.linspace(-1, 1, model.config.d_model, device=model.device)
    with torch.no_grad(), hooks(model, {hook_name(0, "resid_post"): lambda h: h + shift}):
        batch = model(ids, attention_mask=mask)[:, -1]
        alone = [model(llmlab.as_ids(model, TOK, t))[0, -1] for t in TEXTS]
    assert_same_up_to_rounding(batch, torch.stack(alone), depth=depth(model))


def test_logit_lens_of_a_batch_is_one_lens_per_prompt(model):
    lenses = logit_lens(model, TOK, TEXTS, k=3, target="e")
    assert isinstance(lenses, list) and len(lenses) == len(TEXTS)
    for lens, text in zip(lenses, TEXTS):
        alone = logit_lens(model, TOK, text, k=3, target="e")
        assert lens.tokens == alone.tokens and lens.positions == alone.positions
        # probabilities: the logits' rounding, then a softmax that sums vocab_size exponentials
        assert_same_up_to_rounding(lens.top_probs, alone.top_probs, depth=depth(model) + model.config.vocab_size)
        assert_same_up_to_rounding(lens.target_prob, alone.target_prob, depth=depth(model) + model.config.vocab_size)
    # one position per prompt, counted within each prompt
    last = logit_lens(model, TOK, TEXTS, k=3, positions=[-1])
    assert [lens.tokens for lens in last] == [[text[-1]] for text in TEXTS]


def test_ablate_and_patch_of_a_batch_match_each_prompt_alone(model):
    name = hook_name(0, "resid_post")
    value = torch.ones(1, 1, model.config.d_model)
    ablated = ablate(model, TOK, TEXTS, layer=0, sublayer="attn", head=1, positions=[-1])
    patched = patch(model, TOK, TEXTS, name, value, positions=[-2])
    for row, text in enumerate(TEXTS):
        assert_same_up_to_rounding(ablated[row, -1], ablate(model, TOK, text, 0, "attn", head=1, positions=[-1])[0, -1],
                                   depth=depth(model))
        assert_same_up_to_rounding(patched[row, -1], patch(model, TOK, text, name, value, positions=[-2])[0, -1],
                                   depth=depth(model))


def test_causal_trace_and_attribution_give_one_result_per_prompt(model):
    metric = logit_diff(5, 9)
    traces = causal_trace(model, TOK, TEXTS, metric, noise_positions=[0], positions=[-1, -2])
    if model.config.block != "post":
        shares = direct_logit_attribution(model, TOK, TEXTS, target=5, minus=9)
    for row, text in enumerate(TEXTS):
        alone = causal_trace(model, TOK, text, metric, noise_positions=[0], positions=[-1, -2])
        # bit for bit: causal_trace and direct_logit_attribution run each prompt of a batch alone, without
        # its padding (llmlab.checks.prompt_rows), with the same seed: the very computation of `alone`
        assert_same_bits(traces[row].effect, alone.effect)
        assert traces[row].tokens == alone.tokens
        if model.config.block != "post":
            one = direct_logit_attribution(model, TOK, text, target=5, minus=9)
            assert_same_bits(shares[row].contributions, one.contributions)  # bit for bit, as above
            share = shares[row]
            # the parts add up to the logit: the forward summed the 2L+1 parts into h in float32, then the
            # final norm and the head each summed d_model terms; the parts' shares are the terms' sizes
            assert_same_up_to_rounding(share.contributions.sum() + share.bias, share.logit,
                                       depth=2 * model.config.d_model + len(share.contributions),
                                       scale=float(share.contributions.abs().sum()) + abs(share.bias))


def test_neurons_similarity_steering_and_patchscope_of_a_batch(model):
    pairs = neuron_activations(model, TOK, TEXTS, layer=1, neuron=3)
    for (tokens, acts), text in zip(pairs, TEXTS):
        alone_tokens, alone_acts = neuron_activations(model, TOK, text, layer=1, neuron=3)
        assert tokens == alone_tokens
        assert_same_up_to_rounding(acts, alone_acts, depth=depth(model, 1))
    top = top_activating_tokens(model, TOK, TEXTS, layer=1, neuron=3, k=4)
    everything = sorted((v for _, acts in pairs for v in acts.tolist()), reverse=True)
    assert [round(v, 4) for v, _, _ in top] == [round(v, 4) for v in everything[:4]]

    _, cache = capture(model, TOK, TEXTS)
    for row, text in enumerate(TEXTS):
        _, alone = capture(model, TOK, text)
        # cosines of residual vectors: the residuals' rounding, then dot products and norms of d_model terms
        similarity_depth = depth(model) + model.config.d_model
        assert_same_up_to_rounding(position_similarity(cache, -1, batch=row), position_similarity(alone, -1),
                                   depth=similarity_depth)
        assert_same_up_to_rounding(layer_similarity(cache, -1, batch=row), layer_similarity(alone, -1),
                                   depth=similarity_depth)
    lasts = torch.stack([capture(model, TOK, t, names=[hook_name(1, "resid_post")])[1].resid(1)[0, -1] for t in TEXTS])
    expected = torch.nn.functional.cosine_similarity(lasts[:, None], lasts[None], dim=-1)
    assert_same_up_to_rounding(prompt_similarity(model, TOK, TEXTS, layer=1), expected,
                               depth=depth(model, 1) + model.config.d_model)

    # means: the residuals' rounding, then a sum of 3 prompts (and of up to 14 positions each)
    assert_same_up_to_rounding(mean_resid(model, TOK, TEXTS, layer=1), lasts.mean(0), depth=depth(model, 1) + 3)
    means = torch.stack([capture(model, TOK, t)[1].resid(1)[0].mean(0) for t in TEXTS]).mean(0)
    assert_same_up_to_rounding(mean_resid(model, TOK, TEXTS, layer=1, position="mean"), means,
                               depth=depth(model, 1) + LONGEST + 3)
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
    assert (unmasked - masked).abs().max() > 1e-3  # a real difference, far beyond rounding


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
        d = model.config.d_model
        # the formula against torch's fused norm: a mean and (LayerNorm) a variance of d values each
        assert_same_up_to_rounding(linear(h) + bias, model.final_norm(h), depth=2 * d)
        parts = torch.randn(3, 4, d)
        # linear: the same sum of 3 parts before or after (LayerNorm also takes a mean over d inside)
        assert_same_up_to_rounding(linear(parts).sum(0), linear(parts.sum(0)), depth=d + 3)
