"""The memory rule of llmlab.inspection.budget, on tiny random models: a readout read in chunks gives the
result it gives in one go, the LM head runs only where logits are read, and a result too large is refused
before anything runs, with its size and the way out. (The peaks themselves, on a real model and a long
prompt: tests/test_readout_memory.py.)"""
import pytest
import torch

from llmlab import assert_same_bits, assert_same_up_to_rounding, forward_depth
from llmlab.inspection import (
    ablate, capture, causal_trace, estimate_memory, hooks, logit_lens, memory_budget, patch, position_similarity,
)
from llmlab.inspection.budget import check_size, chunks
from fakes import CharTokenizer, tiny

TOK = CharTokenizer()
PRESETS = ["tiny-llama", "tiny-gemma3", "tiny-gpt2"]


def ids_for(model, T=12, batch=1, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, model.config.vocab_size, (batch, T), generator=g)


def head_depth(model) -> int:
    """Terms summed from a residual vector to a probability: the norm, the LM head, the softmax."""
    return 2 * model.config.d_model + model.config.vocab_size


def test_chunks_cover_every_row_once_within_the_budget():
    for n, row, budget in [(10, 100, 250), (7, 1, 3), (5, 1000, 10), (1, 8, 8), (100, 3, 10**9)]:
        parts = chunks(n, row, budget)
        assert [i for part in parts for i in range(n)[part]] == list(range(n))
        assert all(len(range(n)[part]) * row <= budget for part in parts) or len(parts) == n   # 1 row at least
    with pytest.raises(MemoryError, match=r"would hold 2 MiB \(limit 1 MiB\)\. Pass less\."):
        check_size("This", 2 * 2**20, 2**20, "Pass less.")
    check_size("This", 2 * 2**20, None, "no limit: nothing is refused")
    with pytest.raises(ValueError, match="positive int"):
        with memory_budget(0):
            pass


@pytest.mark.parametrize("preset", PRESETS)
def test_the_lens_read_in_chunks_is_the_lens_read_at_once(preset):
    model = tiny(preset)
    texts = ["the cat sat on the mat", "a dog ran"]                 # a padded batch
    whole = logit_lens(model, TOK, texts, k=3, target="e")
    with memory_budget(1):                                         # one position per chunk
        parts = logit_lens(model, TOK, texts, k=3, target="e")
    for a, b in zip(parts, whole):
        assert a.tokens == b.tokens and a.positions == b.positions and a.top_tokens == b.top_tokens
        assert_same_bits(a.top_ids, b.top_ids)                    # the same ids: the order is not a rounding
        assert_same_bits(a.target_rank, b.target_rank)
        # one row through the head against all of them at once: the same sums, in another order
        assert_same_up_to_rounding(a.top_probs, b.top_probs, depth=head_depth(model))
        assert_same_up_to_rounding(a.target_prob, b.target_prob, depth=head_depth(model))


def test_the_lens_runs_the_head_once_at_the_last_position_and_keeps_only_what_it_reads():
    model = tiny()
    ids = ids_for(model, T=12)
    seen = []
    with hooks(model, {"hook_logits": lambda x: seen.append(tuple(x.shape))}):
        lens = logit_lens(model, TOK, ids, positions=[2, -1])
    assert seen == [(1, 1, model.config.vocab_size)]    # the forward's own head: the last position only
    assert lens.positions == [2, 11] and lens.top_ids.shape == (model.config.n_layers + 1, 2, 5)
    # read from a cache of all positions (the same attention path: no pattern captured), the same lens
    streams = ["blocks.0.hook_resid_pre", "*hook_resid_post"]
    _, cache = capture(model, None, ids, names=streams)
    again = logit_lens(model, TOK, ids, positions=[2, -1], cache=cache)
    assert_same_bits(again.top_probs, lens.top_probs)   # the same vectors through the same head, two rows
    # a cache of some positions serves the lens at those positions, and says which it lacks
    _, part = capture(model, None, ids, names=streams, positions=[2, 11])
    assert_same_bits(logit_lens(model, TOK, ids, positions=[2, -1], cache=part).top_probs, lens.top_probs)
    with pytest.raises(ValueError, match=r"holds positions \[2, 11\] only; the lens reads columns \[0, 1"):
        logit_lens(model, TOK, ids, cache=part)


def test_a_lens_too_large_is_refused_before_it_runs():
    model = tiny()
    seen = []
    with hooks(model, {"hook_embed": lambda x: seen.append(1)}), \
            pytest.raises(MemoryError, match=r"This logit lens \(3 rows x 12 positions, k=5\) would hold .* MiB "
                                             r"\(limit 9\.5e-05 MiB\)\. Read fewer positions \(positions=\[-1\]"):
        logit_lens(model, TOK, ids_for(model), max_bytes=100)
    assert not seen                                     # refused before the model ran


def test_capture_counts_the_logits_it_returns_and_keeps_them_where_asked():
    model = tiny()
    ids = ids_for(model, T=12, batch=2)
    names = ["*hook_resid_post"]
    activations = estimate_memory(model, 12, names, batch=2)
    logits_bytes = 2 * 12 * model.config.vocab_size * 4
    with pytest.raises(MemoryError, match=r"This capture \(2 x 12 tokens: .* MiB of activations, 0\.012 MiB of "
                                          r"logits\) would hold .*logits_to_keep=1"):
        capture(model, None, ids, names=names, max_bytes=activations + logits_bytes - 1)
    logits, cache = capture(model, None, ids, names=names, max_bytes=activations + logits_bytes)
    last, same = capture(model, None, ids, names=names, logits_to_keep=1, max_bytes=activations + 2 * 4 * 128)
    with torch.no_grad():
        assert_same_bits(last, model(ids, logits_to_keep=1))   # the same call: the head on the last position
    for name in cache:
        assert_same_bits(same[name], cache[name])              # the head changes nothing before it
    # the head hooks see the positions the head runs at
    _, head = capture(model, None, ids, names=["hook_logits", "hook_final_norm"], positions=[0, 1, 2],
                      logits_to_keep=1)
    assert head["hook_logits"].shape == (2, 1, model.config.vocab_size) and head["hook_final_norm"].shape[1] == 1


@pytest.mark.parametrize("preset", ["tiny-llama", "tiny-gemma3"])
def test_a_sweep_in_batches_is_the_sweep_at_once(preset):
    model = tiny(preset)
    ids = ids_for(model, T=8)
    whole = causal_trace(model, None, ids, 3, noise_positions=[1, 2])
    with memory_budget(1):                             # one patched run per forward
        parts = causal_trace(model, None, ids, 3, noise_positions=[1, 2])
    assert_same_bits(parts.clean, whole.clean)            # the clean and corrupted runs are not split
    assert_same_bits(parts.corrupted, whole.corrupted)
    assert_same_up_to_rounding(parts.effect, whole.effect, depth=forward_depth(model.config, 8) + head_depth(model))


def test_the_loss_read_in_chunks_is_the_loss_read_at_once_and_logits_too_large_are_refused():
    model = tiny("tiny-gemma3")
    texts = ["the cat sat on the mat", "a dog ran"]
    whole = ablate(model, TOK, texts, layer=0, sublayer="mlp", metric="loss")
    with memory_budget(1):
        parts = ablate(model, TOK, texts, layer=0, sublayer="mlp", metric="loss")
    assert torch.equal(parts.isnan(), whole.isnan())      # padding is NaN in both
    assert_same_up_to_rounding(parts.nan_to_num(0.0), whole.nan_to_num(0.0), depth=head_depth(model))
    with pytest.raises(MemoryError, match=r"ablate's logits \(2 x 22 positions x 128 ids\) would hold .* Pass "
                                          r"metric='loss'"):
        ablate(model, TOK, texts, layer=0, sublayer="mlp", max_bytes=1000)
    value = torch.zeros(1, 22, model.config.d_model)
    with pytest.raises(MemoryError, match=r"patch's logits .* causal_trace reads the last position only"):
        patch(model, TOK, texts, "blocks.0.hook_resid_post", value, max_bytes=1000)


def test_tables_and_views_too_large_are_refused_with_the_way_out():
    from llmlab.visualization import AttentionView

    model = tiny()
    _, cache = capture(model, None, ids_for(model, T=12), logits_to_keep=1)
    with pytest.raises(MemoryError, match=r"position_similarity over 12 positions .* shorter prompt"):
        position_similarity(cache, -1, max_bytes=100)
    with pytest.raises(MemoryError, match=r"This attention view \(2 layers x 4 heads x 12 x 12 weights\) would "
                                          r"hold .* Show fewer layers \(layers=\[0, -1\]\)"):
        AttentionView.from_model(model, TOK, ids_for(model, T=12), max_bytes=1000)
    from llmlab.inspection import budget
    from llmlab.visualization.widgets import token_similarity

    seen = []
    with pytest.MonkeyPatch.context() as patched, hooks(model, {"hook_embed": lambda x: seen.append(1)}):
        patched.setattr(budget, "RESULT_LIMIT", 1000)
        with pytest.raises(MemoryError, match=r"token_similarity's table of 11 x 9 token pairs would hold .* Use "
                                              r"shorter prompts"):
            token_similarity(model, TOK, "the cat sat", "a dog ran", -1, -1)
    assert not seen                                     # refused before either prompt ran
