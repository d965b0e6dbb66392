"""Capture, logit lens, similarity, ablation/patching, steering, Patchscope, embeddings, neurons.

Tiny random models check the exact properties (the lens at the last layer is the output, a
self-patch changes nothing, steering with scale 0 changes nothing, CKA(X, X) = 1, ...); the
real offline models pin what the lens shows on known prompts.
"""
import pytest
import torch
import torch.nn.functional as F

from llmlab.devices import available_devices
from llmlab import as_ids, assert_same_bits, assert_same_up_to_rounding, forward_depth
from llmlab.inspection import (
    ablate, analogy, capture, causal_trace, cka_matrix, cosine, cosine_matrix, estimate_memory, generate_steered,
    hook_names, layer_cka, layer_similarity, linear_cka, logit_diff, logit_lens, nearest_tokens, patch,
    patchscope, position_similarity, prompt_similarity, select_names, steer, steering_vector, top_activating_tokens,
)
from llmlab.inspection.capture import hook_shape
from fakes import CharTokenizer, tiny

DEVICES = available_devices()
PRESETS = ["tiny-llama", "tiny-gemma3", "tiny-gpt2"]


TOK = CharTokenizer()


def ids_for(model, T=9, seed=1, batch=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, model.config.vocab_size, (batch, T), generator=g).to(model.device)


# ------------------------------------------------------------------ capture

@pytest.mark.parametrize("device", DEVICES, ids=str)
@pytest.mark.parametrize("preset", PRESETS)
def test_capture_matches_forward_shapes_and_estimate(preset, device):
    model = tiny(preset, device)
    ids = ids_for(model, batch=2)
    logits, cache = capture(model, None, ids)
    with torch.no_grad():
        # bit for bit: capturing every hook (the patterns too) runs the eager path, and the hooks only read
        assert_same_bits(logits, model(ids, attn_impl="eager"))
        # the default (sdpa) path: the same model, its attention summed in another order
        assert_same_up_to_rounding(logits, model(ids), depth=forward_depth(model.config, 9))
    assert sorted(cache) == sorted(hook_names(model))
    assert list(cache)[:2] == ['hook_embed', 'blocks.0.hook_resid_pre']  # stored in forward order
    for name, tensor in cache.items():
        assert tuple(tensor.shape) == hook_shape(model, name, 9, batch=2), name
        assert tensor.device.type == torch.device(device).type
    assert estimate_memory(model, 9, batch=2) == cache.memory_bytes()
    assert_same_bits(cache["hook_logits"], logits)                       # the very tensor the forward returned
    assert_same_bits(cache.accumulated_resid()[-1], cache.resid(-1))     # a stack of the same tensors


@pytest.mark.parametrize("device", DEVICES, ids=str)
@pytest.mark.parametrize("preset", PRESETS)
def test_attention_rows_sum_to_one_and_are_causal(preset, device):
    model = tiny(preset, device)
    _, cache = capture(model, None, ids_for(model, T=11), names=["*hook_pattern"])
    assert len(cache) == model.config.n_layers
    for layer in range(model.config.n_layers):
        p = cache.pattern(layer)  # (B, H, T, T)
        assert_same_up_to_rounding(p.sum(-1), torch.ones_like(p.sum(-1)), depth=11)  # 11 rounded weights sum to 1
        assert p.triu(1).abs().max().item() == 0.0
        assert (p >= 0).all()


def test_capture_subsets_agree_with_full_capture():
    model = tiny()
    ids = ids_for(model, T=7)
    _, full = capture(model, None, ids)
    _, part = capture(model, None, ids, names=["*hook_resid_post", "*attn.hook_pattern", "*attn.hook_q", "hook_embed"],
                      layers=[-1], positions=[0, -1])
    assert sorted(part) == sorted(["hook_embed", "blocks.1.hook_resid_post", "blocks.1.attn.hook_pattern",
                                   "blocks.1.attn.hook_q"])
    # bit for bit: both captures ask for patterns, so both run the same eager forward on the same shapes;
    # positions= only selects what passes the hooks (and the LM head, which these hooks come before)
    assert_same_bits(part["blocks.1.hook_resid_post"], full["blocks.1.hook_resid_post"][:, [0, 6]])
    assert_same_bits(part["blocks.1.attn.hook_pattern"], full["blocks.1.attn.hook_pattern"][:, :, [0, 6]])
    assert_same_bits(part["blocks.1.attn.hook_q"], full["blocks.1.attn.hook_q"][:, :, [0, 6]])
    assert part.memory_bytes() == estimate_memory(model, 7, part.keys(), positions=[0, -1])
    _, cpu_cache = capture(model, None, ids, names="hook_embed", store_device="cpu")
    assert cpu_cache["hook_embed"].device.type == "cpu"


def test_capture_errors_are_actionable():
    model = tiny()
    with pytest.raises(MemoryError, match="positions=\\[-1\\]"):
        capture(model, None, ids_for(model), max_bytes=1000)
    with pytest.raises(KeyError, match="No hook point matches"):
        select_names(model, ["blocks.0.hook_nothing"])
    with pytest.raises(IndexError, match="2 layers"):
        select_names(model, None, layers=[5])
    with pytest.raises(ValueError, match="needs a tokenizer"):
        capture(model, None, "some text")
    with pytest.raises(ValueError, match="vocab|outside"):
        capture(model, None, [1, 2, 999])
    _, cache = capture(model, None, ids_for(model), names=["hook_embed"])
    with pytest.raises(KeyError, match="was not captured"):
        cache["blocks.0.hook_resid_post"]


# ------------------------------------------------------------------ logit lens

@pytest.mark.parametrize("device", DEVICES, ids=str)
@pytest.mark.parametrize("preset", PRESETS)
def test_lens_at_the_last_layer_is_the_output_distribution(preset, device):
    model = tiny(preset, device)
    ids = ids_for(model)
    lens = logit_lens(model, TOK, ids, k=5, target=3)
    with torch.no_grad():
        probs = torch.softmax(model(ids)[0].float(), -1).cpu()  # (T, vocab)
    top = probs.topk(5, -1)
    # the lens and model(ids) reach the last residual on the same (sdpa) path, bit for bit; the lens runs
    # the final norm and LM head (d_model terms each) on other shapes, then a softmax over the vocabulary
    head_depth = 2 * model.config.d_model + model.config.vocab_size
    assert_same_up_to_rounding(lens.top_probs[-1], top.values, depth=head_depth)
    assert torch.equal(lens.top_ids[-1], top.indices)
    assert_same_up_to_rounding(lens.target_prob[-1], probs[:, 3], depth=head_depth)
    assert lens.target_rank[-1].tolist() == (probs > probs[:, 3:4]).sum(-1).tolist()  # no ties in a tiny vocab
    assert lens.layer_labels == ["embed"] + [f"block {i}" for i in range(model.config.n_layers)]
    # the first row reads the embeddings themselves
    _, cache = capture(model, None, ids, names=["hook_embed"])
    assert torch.equal(lens.top_ids[0], model.unembed(cache["hook_embed"][0]).topk(5, -1).indices.cpu())  # token ids


def test_lens_result_helpers():
    model = tiny()
    lens = logit_lens(model, TOK, "hello there", positions=[-2, -1], k=3)
    assert lens.tokens == ["r", "e"] and lens.positions == [9, 10]
    assert len(lens.column(-1)) == model.config.n_layers + 1
    top_last = lens.top_tokens[-1][-1][0]
    assert lens.first_row(top_last) is not None and lens.first_row("no such token") is None
    assert "block 1" in str(lens)
    with pytest.raises(ValueError, match="2 tokens"):
        logit_lens(model, TOK, "ab", target="xy")


# ------------------------------------------------------------------ similarity

def test_cka_of_a_representation_with_itself_is_one():
    torch.manual_seed(0)
    X = torch.randn(40, 16)
    # linear_cka computes in float64 (its own rounding is ~1e-15) and rounds the result to float32 once
    assert_same_up_to_rounding(linear_cka(X, X), torch.tensor(1.0), depth=1)
    Q, _ = torch.linalg.qr(torch.randn(16, 16))
    # rotation, scale, shift: X @ Q sums 16 terms in float32 (and QR's Q is orthogonal up to rounding)
    assert_same_up_to_rounding(linear_cka(X, 2.5 * X @ Q + 3.0), torch.tensor(1.0), depth=16)
    assert linear_cka(X, torch.randn(40, 7)).item() < 0.6


def test_cka_matches_the_kernel_formula():
    torch.manual_seed(1)
    X, Y = torch.randn(30, 5, dtype=torch.float64), torch.randn(30, 9, dtype=torch.float64)
    Y = Y + X @ torch.randn(5, 9, dtype=torch.float64)
    n = X.shape[0]
    H = torch.eye(n, dtype=torch.float64) - 1.0 / n          # centering matrix
    K, L = X @ X.T, Y @ Y.T                                   # linear kernels (n, n)
    hsic = lambda A, B: torch.trace(A @ H @ B @ H)           # noqa: E731
    expected = hsic(K, L) / torch.sqrt(hsic(K, K) * hsic(L, L))
    # both sides compute in float64 (orders differ by ~1e-15); linear_cka rounds to float32 once
    assert_same_up_to_rounding(linear_cka(X, Y), expected, depth=1)
    m = cka_matrix([X, Y])
    assert m.shape == (2, 2)
    assert_same_up_to_rounding(m[0, 1], expected, depth=1)
    with pytest.raises(ValueError, match="same n rows"):
        linear_cka(X, Y[:5])


@pytest.mark.parametrize("n", [6, 40])   # fewer inputs than every width, and more
def test_cka_matrix_equals_linear_cka_on_every_pair(n):
    torch.manual_seed(n)
    base = torch.randn(n, 12)
    reps_a = [base, base @ torch.randn(12, 20), torch.randn(n, 9)]
    reps_b = [base + 0.1 * torch.randn(n, 12), torch.randn(n, 30)]
    expected = torch.tensor([[linear_cka(a, b).item() for b in reps_b] for a in reps_a])
    # two float64 formulas (Gram matrices, or three d x d products), each rounded to float32 once at the end
    assert_same_up_to_rounding(cka_matrix(reps_a, reps_b), expected, depth=1)
    square = cka_matrix(reps_a)
    assert_same_up_to_rounding(square, square.T, depth=1)        # (i, j) and (j, i) add their products apart
    assert_same_up_to_rounding(torch.diagonal(square), torch.ones(3), depth=1)
    with pytest.raises(ValueError, match="same n rows"):
        cka_matrix([base, base[:-1]])


def test_cosine_helpers_and_cache_similarities():
    torch.manual_seed(2)
    a, b = torch.randn(6, 8), torch.randn(4, 8)
    # float64 inside cosine_matrix and cosine; torch's float32 kernel sums the 8 products and squares
    assert_same_up_to_rounding(cosine_matrix(a, b), F.cosine_similarity(a[:, None], b[None], dim=-1), depth=8)
    assert_same_up_to_rounding(cosine(a[0], b[0]), F.cosine_similarity(a[0], b[0], dim=0), depth=8)
    model = tiny()
    ids = ids_for(model)
    _, cache = capture(model, None, ids)
    pos = position_similarity(cache, layer=0)
    assert_same_bits(pos, cosine_matrix(cache.resid(0)[0]))  # the same function on the same vectors
    lay = layer_similarity(cache, position=-1)
    assert lay.shape == (model.config.n_layers + 1,) * 2
    # a vector's cosine with itself, in float64, rounded once to float32
    assert_same_up_to_rounding(lay.diagonal(), torch.ones(model.config.n_layers + 1), depth=1)
    cka = layer_cka(cache)
    assert_same_up_to_rounding(cka.diagonal(), torch.ones(model.config.n_layers + 1), depth=1)
    sims = prompt_similarity(model, TOK, ["abc", "xbc", "abd"], layer=1)
    _, c1 = capture(model, TOK, "abc")
    _, c2 = capture(model, TOK, "abd")
    # a batch of 3 against one prompt at a time: the residuals of blocks 0 and 1 in another order
    assert_same_up_to_rounding(sims[0, 2], cosine(c1.resid(1)[0, -1], c2.resid(1)[0, -1]),
                               depth=forward_depth(model.config, 3, n_layers=2, head=False))
    assert_same_up_to_rounding(sims.diagonal(), torch.ones(3), depth=1)
    # two different models of different widths on the same tokens
    other = tiny("tiny-gemma3")
    _, cache_b = capture(other, None, ids)
    assert layer_cka(cache, cache_b).shape == (model.config.n_layers + 1, other.config.n_layers + 1)


# ------------------------------------------------------------------ ablation and patching

@pytest.mark.parametrize("device", DEVICES, ids=str)
@pytest.mark.parametrize("preset", PRESETS)
def test_patching_a_state_into_the_same_position_reproduces_the_logits(preset, device):
    model = tiny(preset, device)
    ids = ids_for(model)
    _, cache = capture(model, None, ids)
    with torch.no_grad():
        logits = model(ids)  # the default attention path, which patch also uses
    # the cache comes from capture's eager path (it holds the patterns), patch runs the default sdpa path:
    # the same values up to rounding, carried through the rest of the model
    depth = forward_depth(model.config, 9)
    for name in ["blocks.0.hook_resid_pre", "blocks.1.hook_resid_mid", "blocks.1.attn.hook_z",
                 "blocks.0.attn.hook_v", "blocks.0.mlp.hook_post"]:
        assert_same_up_to_rounding(patch(model, None, ids, name, cache[name], positions=[3]), logits, depth=depth)
        assert_same_up_to_rounding(patch(model, None, ids, name, cache[name]), logits, depth=depth)  # every position
    # a different state does change them (the test can fail)
    other = patch(model, None, ids, "blocks.0.hook_resid_pre", torch.randn(1, 1, model.config.d_model, device=device),
                  positions=[3])
    assert (other[0, 3:] - logits[0, 3:]).abs().max() > 1e-3
    # earlier positions cannot see position 3, bit for bit: the same shapes run the same kernels, and a
    # masked key gets weight exactly 0, so the changed values add exactly nothing
    assert_same_bits(other[0, :3], logits[0, :3])


def test_a_patching_sweep_finds_the_changed_token():
    model = tiny()
    clean = torch.tensor([[1, 2, 3, 4, 5, 6]])
    corrupt = torch.tensor([[1, 2, 9, 4, 5, 6]])
    with torch.no_grad():
        target = int(model(clean)[0, -1].argmax())
        rival = int(model(corrupt)[0, -1].argmax())
    if target == rival:
        rival = (target + 1) % model.config.vocab_size
    metric = logit_diff(target, rival)
    trace = causal_trace(model, None, clean, metric, corrupt=corrupt, site="resid_pre")
    effect = trace.recovered()
    assert effect.shape == (model.config.n_layers, 6)
    # Up to rounding: the restored runs are a batch of 6 rows, the clean and corrupted runs one row each.
    # The metric is a difference of two logits, rounded at the logits' scale; recovered() divides it by
    # clean - corrupted, so that is the scale of its rounding.
    with torch.no_grad():
        logit_scale = float(torch.cat([model(clean)[0, -1], model(corrupt)[0, -1]]).abs().max())
    depth, scale = forward_depth(model.config, 6), logit_scale / abs(trace.clean - trace.corrupted)
    # before block 0, only the changed position carries the difference: patching it restores everything
    assert_same_up_to_rounding(effect[0], torch.tensor([0.0, 0.0, 1.0, 0.0, 0.0, 0.0]), depth=depth, scale=scale)
    # after the last block only the last position's own state feeds its logits
    trace = causal_trace(model, None, clean, metric, corrupt=corrupt, site="resid_post")
    scale = logit_scale / abs(trace.clean - trace.corrupted)
    assert_same_up_to_rounding(trace.recovered()[-1], torch.tensor([0.0, 0.0, 0.0, 0.0, 0.0, 1.0]), depth=depth,
                               scale=scale)


def test_ablating_every_head_equals_ablating_the_sublayer():
    model = tiny()  # tiny-llama has no output-projection bias, so zero heads -> zero attention output
    ids = ids_for(model)
    whole = ablate(model, None, ids, layer=1, sublayer="attn")
    with torch.no_grad():
        from llmlab.inspection import hooks

        def zero_all_heads(z):
            return torch.zeros_like(z)

        with hooks(model, {"blocks.1.attn.hook_z": zero_all_heads}):
            heads = model(ids)
        base = model(ids)
    # bit for bit: zero heads through a bias-free W_o add exactly 0, as the zeroed sublayer output does,
    # and x + 0 is x; the rest of the forward is the same
    assert_same_bits(whole, heads)
    assert (whole - base).abs().max() > 1e-3
    one = ablate(model, None, ids, layer=1, sublayer="attn", head=2)
    assert (one - base).abs().max() > 1e-4 and (one - whole).abs().max() > 1e-4
    mlp = ablate(model, None, ids, layer=0, sublayer="mlp", positions=[4])
    assert_same_bits(mlp[0, :4], base[0, :4])  # causal, bit for bit: earlier positions never read position 4
    with pytest.raises(ValueError, match="sublayer"):
        ablate(model, None, ids, layer=0, sublayer="ffn")
    with pytest.raises(ValueError, match="head"):
        ablate(model, None, ids, layer=0, sublayer="mlp", head=0)


# ------------------------------------------------------------------ steering and Patchscope

@pytest.mark.parametrize("device", DEVICES, ids=str)
def test_steering_with_scale_zero_changes_nothing(device):
    model = tiny("tiny-gemma3", device)
    ids = ids_for(model)
    vector = steering_vector(model, TOK, ["good day", "so happy"], ["bad day", "so sad"], layer=1)
    assert vector.shape == (model.config.d_model,) and vector.abs().max() > 0
    with torch.no_grad():
        base = model(ids)
        with steer(model, vector, layer=1, scale=0.0):
            same = model(ids)
        with steer(model, vector, layer=1, scale=4.0):
            moved = model(ids)
    assert torch.equal(base, same)
    assert (moved - base).abs().max() > 1e-3
    plain = generate_steered(model, TOK, "good", vector, layer=1, scale=0.0, max_new_tokens=8)
    from llmlab.generation import generate

    expected = generate(model, as_ids(model, TOK, "good"), max_new_tokens=8)[0, 4:].tolist()
    assert plain == TOK.decode(expected)


def test_steering_at_the_last_block_adds_the_vector_before_the_unembedding():
    model = tiny()
    ids = ids_for(model)
    vector = torch.randn(model.config.d_model)
    _, cache = capture(model, None, ids, names=["*hook_resid_post"])
    with torch.no_grad(), steer(model, vector, layer=-1, scale=2.0):
        steered = model(ids)
    # bit for bit: capture and the steered forward reach the last block's output on the same (sdpa) path,
    # steer adds 2.0 * vector just as written here, and unembed is the forward's final norm and head
    assert_same_bits(steered, model.unembed(cache.resid(-1) + 2.0 * vector))


def test_patchscope_with_the_templates_own_state_is_plain_generation():
    from llmlab.generation import generate

    model = tiny()
    template = "abc abc abc a"
    out = patchscope(model, TOK, template, source_layer=0, source_position=-1, template=template,
                     placeholder="a", max_new_tokens=6)
    assert out.target_position == len(template) - 1 and out.target_layer == 0
    expected = TOK.decode(generate(model, as_ids(model, TOK, template), max_new_tokens=6)[0, len(template):].tolist())
    assert out.text == expected
    other = patchscope(model, TOK, "zzzz", source_layer=1, template=template, placeholder="a", max_new_tokens=6)
    baseline = patchscope(model, TOK, template, source_layer=1, template=template, placeholder="a", max_new_tokens=6)
    assert baseline.text == expected and isinstance(other.text, str)
    with pytest.raises(ValueError, match="placeholder"):
        patchscope(model, TOK, "ab", source_layer=0, template="bcd", placeholder="x")


# ------------------------------------------------------------------ embeddings and neurons

def test_embedding_neighbours_and_analogy():
    model = tiny()
    table = model.tok_embed.weight
    with torch.no_grad():
        table[2] = 3.0 * table[1]                                  # 'b' points exactly like 'a'
        table[4] = table[2] - table[1] + table[3]                  # 'd' = 'b' - 'a' + 'c'
    neighbours = nearest_tokens(model, TOK, "a", k=3)
    assert neighbours[0][0] == "b"
    # a float32 cosine: 3.0 * the row rounds once, the dot product and the norms sum d_model terms
    assert_same_up_to_rounding(torch.tensor(neighbours[0][1], dtype=torch.float32), torch.tensor(1.0),
                               depth=model.config.d_model + 1)
    assert all(token != "a" for token, _ in neighbours)
    assert analogy(model, TOK, "a", "b", "c", k=1)[0][0] == "d"
    with pytest.raises(ValueError, match="not one"):
        nearest_tokens(model, TOK, "ab")


def test_top_activating_tokens_are_the_largest_activations():
    model = tiny()
    texts = ["the quick brown fox", "jumps over the lazy dog"]
    found = top_activating_tokens(model, TOK, texts, layer=1, neuron=7, k=3)
    values = []
    for text in texts:
        _, cache = capture(model, TOK, text, names=["blocks.1.mlp.hook_post"])
        values += cache["blocks.1.mlp.hook_post"][0, :, 7].tolist()
    assert [round(v, 5) for v, _, _ in found] == [round(v, 5) for v in sorted(values, reverse=True)[:3]]
    assert all("|" in snippet for _, _, snippet in found)
    with pytest.raises(IndexError, match="neurons"):
        top_activating_tokens(model, TOK, texts, layer=0, neuron=10_000)


# ------------------------------------------------------------------ the real offline models

@pytest.fixture(scope="module")
def smol():
    from llmlab.loading import load

    return load("smollm2-135m")


@pytest.fixture(scope="module")
def gemma():
    from llmlab.loading import load

    return load("gemma3-270m")


EIFFEL = "The Eiffel Tower is in the city of"


@pytest.mark.slow
@pytest.mark.parametrize("which", ["smol", "gemma"])
def test_real_models_attention_lens_patch_and_steer(which, request):
    model, tok = request.getfixturevalue(which)
    ids = as_ids(model, tok, EIFFEL)
    logits, cache = capture(model, None, ids)
    assert len(cache) == len(hook_names(model)) and cache.memory_bytes() == estimate_memory(model, ids.shape[1])
    for layer in range(model.config.n_layers):
        p = cache.pattern(layer)
        assert_same_up_to_rounding(p.sum(-1), torch.ones_like(p.sum(-1)), depth=ids.shape[1])  # T weights sum to 1
        assert p.triu(1).abs().max().item() == 0.0
    # the lens at the last layer is the model's own next-token distribution: the same residual (one cache),
    # the final norm and LM head (d_model terms each) on other shapes, then a softmax over the vocabulary
    lens = logit_lens(model, tok, ids, k=10, cache=cache)
    probs = torch.softmax(logits[0].float(), -1).topk(10, -1)
    assert_same_up_to_rounding(lens.top_probs[-1], probs.values,
                               depth=2 * model.config.d_model + model.config.vocab_size)
    assert torch.equal(lens.top_ids[-1], probs.indices)
    # self-patching and zero steering change nothing
    with torch.no_grad():
        base = model(ids)  # the default (sdpa) path, which patch and steer also use
    name = f"blocks.{model.config.n_layers // 2}.hook_resid_pre"
    _, sdpa_cache = capture(model, None, ids, names=[name])  # no pattern asked for: the same sdpa path
    assert torch.equal(patch(model, None, ids, name, sdpa_cache[name], positions=[4]), base)
    with torch.no_grad(), steer(model, torch.randn(model.config.d_model), layer=5, scale=0.0):
        assert torch.equal(model(ids), base)


@pytest.mark.slow
def test_smollm2_lens_finds_paris_late(smol):
    model, tok = smol
    lens = logit_lens(model, tok, EIFFEL, target=" Paris")
    ranks = lens.target_rank[:, -1].tolist()          # one per row: embed, layer 0 .. layer 29
    assert lens.top_tokens[-1][-1][0] == " Paris"
    # measured: rank 3 after layer 27, top-1 (0.072 vs 0.069 for ' T') after layer 28, rank > 3000 before layer 20
    assert ranks[28] <= 5 and ranks[29] <= 1, ranks
    assert min(ranks[:21]) > 50, ranks


@pytest.mark.slow
def test_gemma_lens_tianqi_passes_through_english_weather_words(gemma):
    model, tok = gemma
    lens = logit_lens(model, tok, "天气", k=5)
    assert lens.tokens == ["<bos>", "天气"]
    top1 = {label: lens.top_tokens[row][-1][0] for row, label in enumerate(lens.layer_labels)}
    weather = {" weather", " climates", " climate", " inclement", " rainy", " rains", " temperatures"}
    # measured: layer 11 ' climates', 12 ' weather', 13 ' climates', 14 ' inclement'; 17 (last) '预'
    english_layers = [label for label, token in top1.items() if token in weather]
    assert english_layers == ["block 11", "block 12", "block 13", "block 14"], top1
    for row in range(12, 16):  # layers 11..14: English weather words fill the top-5
        assert len(weather & set(lens.top_tokens[row][-1])) >= 2, lens.top_tokens[row][-1]
    assert top1["block 17"] == "预"
    assert all("\u4e00" <= ch <= "\u9fff" for ch in top1["block 17"])  # a Chinese character


@pytest.mark.slow
def test_gemma_lens_reaches_paris_before_the_last_layer(gemma):
    model, tok = gemma
    lens = logit_lens(model, tok, EIFFEL, target=" Paris")
    # measured: ' Paris' is top-1 from layer 13 of 0..17 on (rank 1 after ' Eiffel' at layer 12)
    assert lens.layer_labels[lens.first_row(" Paris")] == "block 13"
    ranks = lens.target_rank[:, -1].tolist()
    assert ranks[14:] == [0] * 5 and ranks[13] == 1, ranks
    assert min(ranks[:11]) > 1000, ranks
    assert lens.top_tokens[12][-1][0] == " cities"  # layer 11: "some city" before the specific one


@pytest.mark.slow
def test_gemma_patchscope_reads_the_last_token_from_an_early_layer(gemma):
    model, tok = gemma
    out = patchscope(model, tok, "The Eiffel Tower", source_layer=3, max_new_tokens=3)
    assert out.text.startswith(" Tower"), out  # measured: ' Tower; 113'
