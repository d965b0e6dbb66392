"""Causal tracing, direct logit attribution and linear probes with a control task.

Tiny random models check each method against a computation done another way: a restore
computed by a single hand-made patch, the restores whose result is known without running
(undoing the noise at its own position, restoring the last layer's output), the embedding's
share of a logit from the weights, and the shares adding up to the logit.
"""
import pytest
import torch

from llmlab import assert_same_bits, assert_same_up_to_rounding, forward_depth
from llmlab.config import ModelConfig
from llmlab.devices import available_devices
from llmlab.inspection import capture, hooks, patch
from llmlab.inspection import causal_trace, direct_logit_attribution, logit_diff
from llmlab.inspection import control_labels, probe_accuracy, probe_with_control, train_probe
from llmlab.model import Transformer
from llmlab.numerics import largest_difference, rounding_tolerance

from fakes import tiny

DEVICES = available_devices()
PRESETS = ["tiny-llama", "tiny-gemma3", "tiny-gpt2"]


def ids_for(model, T=7, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, model.config.vocab_size, (1, T), generator=g).to(model.device)


def prob(model, ids, answer, fns=None):
    """p(answer) at the last position, a 0-d float32 tensor (so a comparison knows it is float32)."""
    with torch.no_grad(), hooks(model, fns or {}):
        return torch.softmax(model(ids)[0, -1].float(), -1)[answer]


def trace_depth(model, T=7):
    """A trace's restored runs are a batch with one row per position and the LM head on the last position;
    a plain run is one row: the whole model on other shapes, then a softmax over the vocabulary."""
    return forward_depth(model.config, T) + model.config.vocab_size


# ------------------------------------------------------------------ causal tracing

@pytest.mark.parametrize("device", DEVICES, ids=str)
@pytest.mark.parametrize("preset", PRESETS)
def test_trace_with_a_corrupted_prompt_matches_single_patches(preset, device):
    model = tiny(preset, device)
    clean, corrupt = ids_for(model, seed=1), ids_for(model, seed=1).clone()
    corrupt[0, 2] = (corrupt[0, 2] + 1) % model.config.vocab_size    # another token at position 2
    answer = int(model(clean)[0, -1].argmax())
    trace = causal_trace(model, None, clean, answer, corrupt=corrupt, site="resid_post")
    assert trace.effect.shape == (model.config.n_layers, 7)
    depth = trace_depth(model)
    # the clean run: the same blocks on the same shape (capture only reads), the final norm and the LM head
    # (d_model terms each) on the last position alone, then a softmax over the vocabulary
    assert_same_up_to_rounding(trace.clean, prob(model, clean, answer),
                               depth=2 * model.config.d_model + model.config.vocab_size)
    # the corrupted run: the LM head on the last position only
    assert_same_up_to_rounding(trace.corrupted, prob(model, corrupt, answer), depth=depth)
    _, cache = capture(model, None, clean)          # eager (it holds the patterns); the trace's own is sdpa
    for layer, pos in [(0, 2), (1, 2), (1, 6), (0, 0)]:
        name = f"blocks.{layer}.hook_resid_post"
        by_hand = torch.softmax(patch(model, None, corrupt, name, cache[name], positions=[pos])[0, -1].float(), -1)
        assert_same_up_to_rounding(trace.effect[layer, pos], by_hand[answer], depth=depth)
    # positions before the changed token see the same past in both runs: restoring them changes nothing
    # (up to rounding: the restored runs are a batch, the corrupted run one row)
    assert_same_up_to_rounding(trace.effect[:, :2], torch.full((model.config.n_layers, 2), trace.corrupted),
                               depth=depth)
    # the last block's output at the last position is all the readout sees: restoring it is the clean run
    assert_same_up_to_rounding(trace.effect[-1, -1], trace.clean, depth=depth)
    # recovered() divides by clean - corrupted, which scales the rounding of the probabilities
    assert_same_up_to_rounding(trace.recovered()[-1, -1], torch.tensor(1.0), depth=depth,
                               scale=max(trace.clean, trace.corrupted) / abs(trace.clean - trace.corrupted))


@pytest.mark.parametrize("preset", PRESETS)
def test_noise_trace_undoing_the_noise_restores_the_clean_run(preset):
    model = tiny(preset)
    ids = ids_for(model)
    answer = int(model(ids)[0, -1].argmax())
    trace = causal_trace(model, None, ids, answer, noise_positions=[3], site="resid_pre", seed=5)
    assert trace.corrupted < trace.clean                       # the noise hurt the answer
    # resid_pre of block 0 is the embedding: restoring it at the noised position removes the noise (up to
    # rounding: the restored runs are a batch, the clean run one row)
    depth = trace_depth(model)
    assert_same_up_to_rounding(trace.effect[0, 3], trace.clean, depth=depth)
    assert_same_up_to_rounding(trace.effect[:, :3], torch.full((model.config.n_layers, 3), trace.corrupted),
                               depth=depth)
    # the same noise every time (seeded), so two traces agree bit for bit: the same computation twice
    again = causal_trace(model, None, ids, answer, noise_positions=[3], site="resid_pre", seed=5)
    assert_same_bits(trace.effect, again.effect)


def test_trace_metric_layers_positions_and_windows():
    model = tiny("tiny-gemma3")
    ids = ids_for(model)
    a, b = 5, 9
    trace = causal_trace(model, None, ids, logit_diff(a, b), noise_positions=[1, 2], site="mlp_out",
                         layers=[-1, 0], positions=[-1, 2])
    assert trace.layers == [2, 0] and trace.positions == [6, 2]
    with torch.no_grad():
        logits = model(ids)[0, -1]
    # the trace's clean run runs the final norm and LM head on the last position alone (d_model terms
    # each, on another shape): up to that rounding, at the size of the logits (not of their difference)
    assert_same_up_to_rounding(trace.clean, logits[a] - logits[b], depth=2 * model.config.d_model,
                               scale=float(logits.abs().max()))
    # a window of every layer restores every FFN output at that position
    full = causal_trace(model, None, ids, a, noise_positions=[1], site="attn_out", layers=[0],
                        window=model.config.n_layers)
    single = causal_trace(model, None, ids, a, noise_positions=[1], site="attn_out", layers=[0])
    assert full.effect.shape == single.effect.shape == (1, 7)
    # a real difference, beyond what rounding allows
    assert largest_difference(full.effect[0, 1:], single.effect[0, 1:]) > rounding_tolerance(single.effect[0, 1:],
                                                                                              trace_depth(model))


def test_trace_errors_are_actionable():
    model = tiny()
    ids = ids_for(model)
    with pytest.raises(IndexError, match="layer 2 does not exist"):
        causal_trace(model, None, ids, 3, noise_positions=[1], layers=[2])
    with pytest.raises(IndexError, match="layer -3 does not exist"):
        causal_trace(model, None, ids, 3, noise_positions=[1], layers=[-3])
    with pytest.raises(IndexError, match="noise position 7 is outside"):
        causal_trace(model, None, ids, 3, noise_positions=[7])
    with pytest.raises(ValueError, match="exactly one corruption"):
        causal_trace(model, None, ids, 3)
    with pytest.raises(ValueError, match="same number of tokens"):
        causal_trace(model, None, ids, 3, corrupt=ids[:, :5])
    with pytest.raises(ValueError, match="site must be one of"):
        causal_trace(model, None, ids, 3, noise_positions=[1], site="resid")
    with pytest.raises(TypeError, match="answer must be a token id"):
        causal_trace(model, None, ids, "Paris", noise_positions=[1])


# ------------------------------------------------------------------ direct logit attribution

@pytest.mark.parametrize("device", DEVICES, ids=str)
@pytest.mark.parametrize("preset", PRESETS)
def test_attributions_add_up_to_the_logit(preset, device):
    model = tiny(preset, device)
    if getattr(model.final_norm, "bias", None) is not None:      # LayerNorm: give its bias (zero at init) something to add
        with torch.no_grad():
            model.final_norm.bias.normal_()
    ids = ids_for(model)
    target = int(model(ids)[0, 3].argmax())
    dla = direct_logit_attribution(model, None, ids, target, position=3)
    n = model.config.n_layers
    assert dla.labels[:3] == ["embed", "attn 0", "mlp 0"] and len(dla.labels) == 2 * n + 1
    assert dla.by_layer().shape == (n, 2)
    d = model.config.d_model
    with torch.no_grad():
        logits = model(ids)[0, 3]
    # dla.logit runs the final norm and head on one vector, the forward on all 7 positions: up to rounding
    # over those two sums of d_model terms
    assert_same_up_to_rounding(dla.logit, logits[target], depth=2 * d)
    # the shares add up to the logit: the forward summed the 2L+1 parts into h in float32, then the final
    # norm and the head each summed d_model terms; the shares are the sizes of the terms
    shares_depth = 2 * d + len(dla.contributions)
    assert_same_up_to_rounding(dla.contributions.sum() + dla.bias, logits[target], depth=shares_depth,
                               scale=float(dla.contributions.abs().sum()) + abs(dla.bias))
    assert (preset == "tiny-gpt2") == (dla.bias != 0.0)         # only LayerNorm has a bias of its own
    # a logit difference: target against the mean of two other tokens
    diff = direct_logit_attribution(model, None, ids, target, position=3, minus=[1, 2])
    expected = (logits[target].double() - logits[[1, 2]].double().mean()).float()
    # a difference of logits rounds at the size of the logits, not of the difference
    assert_same_up_to_rounding(diff.logit, expected, depth=2 * d, scale=float(logits.abs().max()))
    assert_same_up_to_rounding(diff.contributions.sum() + diff.bias, expected, depth=shares_depth,
                               scale=float(diff.contributions.abs().sum()) + abs(diff.bias))


@pytest.mark.parametrize("preset", ["tiny-llama", "tiny-gemma3"])
def test_embedding_share_computed_from_the_weights(preset):
    model = tiny(preset)
    ids = ids_for(model)
    target = 11
    dla = direct_logit_attribution(model, None, ids, target)
    with torch.no_grad():
        _, cache = capture(model, None, ids)
        h = cache[f"blocks.{model.config.n_layers - 1}.hook_resid_post"][0, -1].double()
        rms = torch.sqrt(h.pow(2).mean() + model.final_norm.eps)
        w = model.final_norm.weight.double() + (1.0 if model.config.norm_unit_offset else 0.0)
        e = model.tok_embed.weight[ids[0, -1]].double() * (model.config.embed_scale or 1.0)
        terms = (e / rms * w) * model.lm_head.weight[target].double()        # (d,)
        by_hand = float(terms.sum())
    # float64 on both sides, but from float32 values rounded apart: this h comes from capture's eager path
    # (the cache holds patterns), the attribution's from sdpa; the embedding scale and 1 + w round in
    # float32 there. So: float32 rounding over the blocks and the d_model terms, at the terms' size
    depth = forward_depth(model.config, 7, head=False) + model.config.d_model
    assert_same_up_to_rounding(dla.contributions[0], by_hand, depth=depth, scale=float(terms.abs().sum()))
    assert_same_up_to_rounding(torch.tensor(dla.norm_scale, dtype=torch.float32), float(1 / rms), depth=depth)


def test_attribution_errors():
    with pytest.raises(ValueError, match="pre-norm or sandwich"):
        direct_logit_attribution(tiny("tiny-2017"), None, torch.tensor([[1, 2, 3]]), 4)
    model = tiny()
    with pytest.raises(ValueError, match="target and minus must be token ids"):
        direct_logit_attribution(model, None, torch.tensor([[1, 2, 3]]), 128)
    with pytest.raises(IndexError, match="position 3 is outside"):
        direct_logit_attribution(model, None, torch.tensor([[1, 2, 3]]), 4, position=3)


# ------------------------------------------------------------------ probes

def test_probe_reads_a_linear_label_and_the_control_shows_memorisation():
    g = torch.Generator().manual_seed(0)
    n, d = 80, 10
    X = torch.randn(n, d, generator=g)
    labels = (X[:, 0] > 0).long()                               # linearly readable
    types = [i // 2 for i in range(n)]                           # pairs of examples share a type
    result = probe_with_control(X, labels, types, seed=1)
    assert result.train_accuracy >= 0.9 and result.test_accuracy >= 0.85
    assert result.control_test_accuracy < 0.75                   # random labels: near chance on held-out
    # bit for bit: selectivity is this very subtraction
    assert_same_bits(result.selectivity, result.test_accuracy - result.control_test_accuracy)
    # many dimensions, few examples: the probe fits even random labels on the training set
    wide = torch.randn(20, 200, generator=g)
    random = torch.randint(0, 2, (20,), generator=g)
    assert probe_accuracy(train_probe(wide, random), wide, random) == 1.0


def test_control_labels_are_one_random_label_per_type():
    types = ["a", "b", "a", "c", "b", "a"] * 5
    y = control_labels(types, 3, seed=2)
    assert y.shape == (30,) and y.dtype == torch.long and 0 <= int(y.min()) and int(y.max()) < 3
    for t in set(types):
        assert len({int(y[i]) for i in range(30) if types[i] == t}) == 1
    assert control_labels(types, 3, seed=2).tolist() == y.tolist()


def test_probe_errors():
    X = torch.randn(10, 4)
    with pytest.raises(ValueError, match="integer class ids"):
        train_probe(X, torch.rand(10))
    with pytest.raises(ValueError, match="one type per row"):
        probe_with_control(X, torch.zeros(10, dtype=torch.long), ["a"] * 9)
    with pytest.raises(ValueError, match="test_fraction"):
        probe_with_control(X, torch.zeros(10, dtype=torch.long), ["a"] * 10, test_fraction=1.0)


def test_text_prompts_with_a_tokenizer():
    from fakes import CharTokenizer

    tok = CharTokenizer()
    model = tiny()
    trace = causal_trace(model, tok, "hello world", 7, noise_positions=[0, 1], layers=[0])
    assert trace.tokens == list("hello world") and trace.effect.shape == (1, 11)
    dla = direct_logit_attribution(model, tok, "hello world", 7)
    # bit for bit: the text and its ids are the same prompt, run the same way
    assert_same_bits(dla.contributions, direct_logit_attribution(model, None, [tok.encode("hello world")], 7)
                     .contributions)


def test_mean_ci_brackets_the_mean_and_shrinks_with_more_values():
    from llmlab.stats import mean_ci

    g = torch.Generator().manual_seed(0)
    few, many = torch.randn(10, generator=g) + 3, torch.randn(1000, generator=g) + 3
    m, lo, hi = mean_ci(few)
    assert lo < m < hi
    assert_same_up_to_rounding(few.mean(), m, depth=10)   # mean_ci sums the 10 values in float64, this in float32
    m2, lo2, hi2 = mean_ci(many)
    assert hi2 - lo2 < (hi - lo) / 3 and lo2 < 3 < hi2
    assert mean_ci([2.0, 2.0, 2.0]) == (2.0, 2.0, 2.0)
    with pytest.raises(ValueError, match="at least 2 values"):
        mean_ci([1.0])


def test_induction_scores_by_hand():
    """On a tiny model, the score of every head equals the attention weight read off the captured
    pattern by hand at (t, t - L + 1), averaged; and an evenly spreading head scores induction_chance."""
    from llmlab.inspection import capture, induction_chance, induction_scores

    torch.manual_seed(0)
    model = Transformer(ModelConfig.preset("tiny-llama")).eval()
    L, n = 6, 3
    scores = induction_scores(model, length=L, n_sequences=n, seed=5)
    assert scores.shape == (model.config.n_layers, model.config.n_heads)
    g = torch.Generator().manual_seed(5)
    halves = torch.stack([torch.randperm(model.config.vocab_size, generator=g)[:L] for _ in range(n)])
    ids = torch.cat([halves, halves], dim=1)
    _, cache = capture(model, None, ids, names=["blocks.1.attn.hook_pattern"])
    pattern = cache["blocks.1.attn.hook_pattern"]                       # (n, heads, 2L, 2L)
    by_hand = sum(pattern[:, :, t, t - L + 1] for t in range(L, 2 * L - 1)) / (L - 1)
    # the same weights (the same eager forward), averaged over L - 1 queries and n sequences in another order
    assert_same_up_to_rounding(scores[1], by_hand.mean(0), depth=(L - 1) + n)
    # a float32 mean of L - 1 fractions against the float64 sum
    assert_same_up_to_rounding(torch.tensor(induction_chance(L), dtype=torch.float32),
                               sum(1 / (t + 1) for t in range(L, 2 * L - 1)) / (L - 1), depth=L - 1)
    with pytest.raises(ValueError, match="length"):
        induction_scores(model, length=1)


def test_mean_ci_takes_lists_arrays_and_tensors_alike():
    """Chapters pass a list of 0-d tensors (possibly on a GPU), an array or a tensor: the same interval."""
    import numpy as np

    from llmlab.stats import mean_ci

    values = [0.25, 1.5, 0.75, 2.0, 0.125]                 # exact in float32 too, so every form holds the same numbers
    expected = mean_ci(values)
    assert mean_ci(torch.tensor(values, requires_grad=True)) == expected
    assert mean_ci([torch.tensor(v) for v in values]) == expected
    assert mean_ci(np.array(values)) == expected
