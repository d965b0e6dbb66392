"""One contract at the boundary: bad arguments raise a clear error, layers count like Python
indices, inspection takes (model, tokenizer, prompt, ...) and no other order, and ids or vectors from
another device are moved to the model's."""
import ast
import pathlib

import pytest
import torch

from llmlab import ModelConfig, Transformer, assert_same_up_to_rounding, generate
from llmlab.checks import as_ids, check_int, check_number, resolve_layer
from llmlab.hooks import hook_name
from llmlab.inspection import (
    ablate, capture, causal_trace, hook_names, logit_lens, neuron_activations, patch, patchscope,
    position_similarity, prompt_similarity, select_names, steer, top_activating_tokens,
)
from llmlab.sampling import filtered_probs, sample_next_token, top_k_filter, top_p_filter
from fakes import CharTokenizer

TOK = CharTokenizer()
NAN = float("nan")


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return Transformer(ModelConfig.preset("tiny-llama")).eval()  # 2 layers, vocab 128, max_seq_len 64


# ------------------------------------------------------------------ numbers

@pytest.mark.parametrize("kwargs, match", [
    (dict(temperature=1.0, top_p=1.5), r"top_p must be a number in \(0, 1\]; got 1\.5"),
    (dict(temperature=1.0, top_p=NAN), r"top_p must be a number in \(0, 1\]; got nan"),
    (dict(temperature=1.0, top_p=0.0), r"top_p must be a number in \(0, 1\]; got 0\.0"),
    (dict(temperature=NAN), r"temperature must be a number in \[0, inf\); got nan"),
    (dict(temperature=-1.0), r"temperature must be a number in \[0, inf\); got -1\.0"),
    (dict(temperature="hot"), r"temperature must be a number"),
    (dict(temperature=1.0, top_k=2.5), r"top_k must be a whole number \(int\); got 2\.5"),
    (dict(temperature=1.0, top_k=0), r"top_k must be >= 1; got 0"),
    (dict(temperature=1.0, top_k=True), r"top_k must be a whole number"),
    (dict(top_p=1.5), r"top_p"),   # invalid even when greedy decoding would not use it
])
def test_generate_rejects_bad_sampling_settings(model, kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        generate(model, [1, 2, 3], 2, **kwargs)


@pytest.mark.parametrize("kwargs, match", [
    (dict(max_new_tokens=2.5), r"max_new_tokens must be a whole number"),
    (dict(max_new_tokens=-1), r"max_new_tokens must be >= 0; got -1"),
    (dict(max_new_tokens=2, eos_token_id=500), r"eos_token_id must be in 0\.\.127; got 500"),
    (dict(max_new_tokens=2, kv_cache="paged"), r"kv_cache='paged'"),
    (dict(max_new_tokens=2, cache="static"), r"unexpected keyword argument 'cache'"),
    (dict(max_new_tokens=2, do_sample=True, temperature=0), r"do_sample=True with temperature=0"),
    (dict(max_new_tokens=2, do_sample=False, temperature=0.7), r"do_sample=False is greedy"),
    (dict(max_new_tokens=2, seed=1.5), r"seed must be a whole number"),
    (dict(max_new_tokens=2, stream="print"), r"stream must be a function"),
])
def test_generate_rejects_bad_arguments(model, kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        generate(model, [1, 2, 3], **kwargs)


def test_sampling_functions_check_their_own_arguments():
    logits = torch.randn(2, 10)
    with pytest.raises(ValueError, match="top_p"):
        top_p_filter(logits, NAN)
    with pytest.raises(TypeError, match="top_k"):
        top_k_filter(logits, 2.5)
    with pytest.raises(ValueError, match="temperature"):
        sample_next_token(logits, NAN)
    # the edges that are allowed: p = 1 and k >= vocab keep everything
    assert torch.equal(top_p_filter(logits, 1.0), logits) and torch.equal(top_k_filter(logits, 10), logits)


def test_filtered_probs_is_what_sampling_draws_from():
    logits = torch.tensor([3.0, 1.0, 0.2, -2.0, 0.0])
    probs, keep = filtered_probs(logits, 0.7, 3, 0.9)
    expected = torch.softmax(top_p_filter(top_k_filter(logits[None].double() / 0.7, 3), 0.9), -1)[0]
    # the same filters and a softmax over the 5 logits, computed apart: rounding in probs' own dtype
    assert_same_up_to_rounding(torch.from_numpy(probs), expected.to(torch.from_numpy(probs).dtype), depth=5)
    assert keep.tolist() == (expected > 0).tolist()
    assert_same_up_to_rounding(probs.sum(), 1.0, depth=5)          # 5 rounded probabilities sum to 1
    greedy, keep = filtered_probs([0.1, 2.0, 0.3], 0.0)
    assert greedy.tolist() == [0.0, 1.0, 0.0] and keep.tolist() == [False, True, False]
    with pytest.raises(ValueError, match="top_p"):
        filtered_probs(logits, 1.0, 0, 1.5)


def test_check_helpers_say_what_was_given_and_expected():
    assert check_number("x", 3) == 3.0 and check_int("n", torch.tensor(4)) == 4
    with pytest.raises(ValueError, match=r"x must be a number in \[0, 1\]; got 2"):
        check_number("x", 2, low=0, high=1)
    with pytest.raises(TypeError, match=r"n must be a whole number \(int\); got 1\.0 \(float\)"):
        check_int("n", 1.0)


# ------------------------------------------------------------------ layers and hook names

def test_resolve_layer_works_like_a_python_index():
    assert [resolve_layer(30, i) for i in (0, 29, -1, -30)] == [0, 29, 29, 0]
    for bad in (30, 45, -31):
        with pytest.raises(IndexError, match=rf"layer {bad} does not exist: the model has 30 layers, 0\.\.29"):
            resolve_layer(30, bad)
    with pytest.raises(TypeError, match="whole number"):
        resolve_layer(30, 1.0)


def test_every_layer_argument_raises_out_of_range_and_accepts_negatives(model):
    n = model.config.n_layers  # 2: layer 2 would have wrapped to 0, layer 3 to 1
    _, cache = capture(model, TOK, "hello world")
    assert torch.equal(cache.resid(-1), cache["blocks.1.hook_resid_post"])
    assert torch.equal(cache.resid(-2, "pre"), cache["blocks.0.hook_resid_pre"])
    _, eager = capture(model, TOK, "hello world", names=["*hook_pattern"])
    assert torch.equal(eager.pattern(-1), eager["blocks.1.attn.hook_pattern"])
    assert torch.equal(position_similarity(cache, -1), position_similarity(cache, n - 1))
    calls = {
        "cache.resid": lambda layer: cache.resid(layer),
        "cache.pattern": lambda layer: eager.pattern(layer),
        "select_names": lambda layer: select_names(model, ["*resid_post"], layers=[layer]),
        "neuron_activations": lambda layer: neuron_activations(model, TOK, "abc", layer, 0),
        "top_activating_tokens": lambda layer: top_activating_tokens(model, TOK, ["abc"], layer, 0),
        "prompt_similarity": lambda layer: prompt_similarity(model, TOK, ["abc", "abd"], layer),
        "position_similarity": lambda layer: position_similarity(cache, layer),
        "ablate": lambda layer: ablate(model, TOK, "abc", layer),
        "steer": lambda layer: steer(model, torch.zeros(model.config.d_model), layer).__enter__(),
        "patchscope": lambda layer: patchscope(model, TOK, "abc", layer, template="a b ?"),
    }
    for what, call in calls.items():
        for bad in (n, n + 1, -n - 1):
            with pytest.raises(IndexError, match=rf"layer {bad} does not exist"):
                call(bad)
    a = neuron_activations(model, TOK, "abc", -1, 3)[1]
    assert torch.equal(a, neuron_activations(model, TOK, "abc", n - 1, 3)[1])


def test_hook_name_builds_the_names_the_model_has(model):
    assert hook_name(3, "resid_pre") == "blocks.3.hook_resid_pre"
    assert hook_name(0, "attn.pattern") == hook_name(0, "attn.hook_pattern") == "blocks.0.attn.hook_pattern"
    names = set(hook_names(model))
    for point in ("resid_pre", "resid_mid", "resid_post", "attn_out", "mlp_out", "attn.q", "attn.k", "attn.v",
                  "attn.z", "attn.pattern", "mlp.post"):
        assert hook_name(1, point) in names, point
    with pytest.raises(ValueError, match="resolve_layer"):
        hook_name(-1, "resid_pre")


def test_no_hand_written_block_names_in_the_inspection_code():
    root = pathlib.Path(__file__).resolve().parents[1] / "llmlab"
    own = ["capture", "causal", "embeddings", "intervene", "lens", "neurons", "patchscope", "similarity", "steering"]
    for name in own:
        source = (root / "inspection" / f"{name}.py").read_text()
        assert 'f"blocks.{' not in source, name


# ------------------------------------------------------------------ one argument order

def test_the_old_argument_order_is_refused_with_the_order_to_use(model):
    text = "hello there"
    old_order = {
        "capture": lambda: capture(model, text, TOK),
        "logit_lens": lambda: logit_lens(model, text, TOK),
        "ablate": lambda: ablate(model, text, TOK, 1, "mlp"),
        "patch": lambda: patch(model, text, TOK, "blocks.0.hook_resid_post", torch.zeros(1, 1, model.config.d_model)),
        "causal_trace": lambda: causal_trace(model, "abc", TOK, 4, corrupt="abd"),
        "as_ids": lambda: as_ids(model, text, TOK),
    }
    for fn_name, call in old_order.items():
        with pytest.raises(TypeError, match=r"f\(model, tokenizer, prompt, \.\.\.\)"):
            call()
    # keywords, and ids without a tokenizer, are fine
    ids = as_ids(model, TOK, text)
    assert torch.equal(capture(model, prompt=text, tokenizer=TOK)[0], capture(model, TOK, text)[0])
    assert torch.equal(capture(model, None, ids)[0], capture(model, TOK, text)[0])
    assert torch.equal(ablate(model, None, ids, layer=1, sublayer="mlp"), ablate(model, TOK, text, 1, "mlp"))


def test_a_text_prompt_without_a_tokenizer_says_what_to_do(model):
    with pytest.raises(ValueError, match=r"needs a tokenizer: f\(model, tokenizer, 'text'"):
        capture(model, None, "hello")
    with pytest.raises(ValueError, match="needs the tokenizer"):
        logit_lens(model, None, [1, 2, 3])
    with pytest.raises(ValueError, match="different lengths"):
        as_ids(model, None, [[1, 2], [3]])


def test_inspection_never_imports_visualization():
    """Imports run one way: the views import inspection's results, never the other way round."""
    root = pathlib.Path(__file__).resolve().parents[1] / "llmlab" / "inspection"
    for path in root.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert not (node.module or "").startswith("llmlab.visualization"), path.name
            elif isinstance(node, ast.Import):
                assert not any(a.name.startswith("llmlab.visualization") for a in node.names), path.name


# ------------------------------------------------------------------ devices

def test_ids_and_vectors_from_another_device_are_moved_to_the_model():
    """A model on the meta device runs its forward pass on shapes alone (no values, no GPU needed).
    Feeding it ids built on the CPU, as a reader does with tokenizer output, must not raise a device
    mismatch: every entry point moves ids (and steering vectors, patched values) to the model's
    device, so the results come back on meta with the right shapes. On a machine with a GPU the
    same calls move CPU ids to CUDA; this test checks the moving without one."""
    torch.manual_seed(0)
    model = Transformer(ModelConfig.preset("tiny-llama")).eval().to("meta")
    cpu_ids = torch.tensor([[1, 2, 3, 4]])
    d, V = model.config.d_model, model.config.vocab_size

    logits = model(cpu_ids)
    assert logits.device.type == "meta" and logits.shape == (1, 4, V)
    _, cache = capture(model, None, cpu_ids, names=["*hook_resid_post"])
    assert cache.resid(-1).device.type == "meta" and cache.resid(-1).shape == (1, 4, d)
    with steer(model, torch.ones(d), layer=0, scale=2.0):  # a CPU steering vector
        assert model(cpu_ids).device.type == "meta"
    assert ablate(model, TOK, "abcd", 0, "attn", head=1).shape == (1, 4, V)
    assert patch(model, None, cpu_ids, "blocks.0.hook_resid_pre", torch.zeros(1, 1, d), positions=[0]).shape == (1, 4, V)
    out = generate(model, cpu_ids, max_new_tokens=3)
    assert out.device.type == "meta" and out.shape == (1, 7)
    assert model(cpu_ids, attention_mask=torch.ones(1, 4)).shape == (1, 4, V)
