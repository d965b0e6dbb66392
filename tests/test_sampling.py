"""llmlab.sampling's filters, repetition penalty and beam search: worked examples, exact
equalities on a tiny random model, and the errors a learner gets for bad settings."""
import itertools

import pytest
import torch

import llmlab
from llmlab.config import ModelConfig
from llmlab import assert_same_up_to_rounding, beam_search, forward_depth
from llmlab.batched_decoding import beam_search_batch, generate_several
from llmlab.sampling import apply_repetition_penalty, min_p_filter, sample_next_token


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    return llmlab.Transformer(ModelConfig.preset("tiny-llama")).eval()


def test_min_p_keeps_tokens_within_a_factor_of_the_top():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    kept = torch.isfinite(min_p_filter(logits, 0.25))          # 0.25 x 0.5 = 0.125
    assert kept.tolist() == [[True, True, True, False]]
    assert torch.isfinite(min_p_filter(logits, 0.0)).all()     # 0 keeps everything
    assert torch.isfinite(min_p_filter(logits, 1.0)).sum() == 1    # 1 keeps the top token only
    assert torch.equal(min_p_filter(logits, None), logits)


def test_min_p_follows_the_models_confidence():
    sure = torch.log(torch.tensor([[0.9] + [0.1 / 9] * 9]))
    unsure = torch.log(torch.full((1, 10), 0.1))
    assert torch.isfinite(min_p_filter(sure, 0.1)).sum() == 1
    assert torch.isfinite(min_p_filter(unsure, 0.1)).sum() == 10


@pytest.mark.parametrize("bad", [1.5, -0.1, float("nan"), "0.1"])
def test_min_p_rejects_bad_values_with_the_name(bad):
    with pytest.raises(ValueError, match="min_p"):
        min_p_filter(torch.zeros(1, 4), bad)
    with pytest.raises(ValueError, match="min_p"):
        sample_next_token(torch.zeros(1, 4), 1.0, min_p=bad)


def test_sampling_with_min_p_never_draws_a_removed_token():
    logits = torch.log(torch.tensor([[0.6, 0.3, 0.07, 0.03]]))
    g = torch.Generator().manual_seed(0)
    draws = {int(sample_next_token(logits, 1.0, generator=g, min_p=0.2)) for _ in range(200)}
    assert draws == {0, 1}


def test_repetition_penalty_divides_positive_and_multiplies_negative_logits():
    logits = torch.tensor([[2.0, 1.0, -1.0, 0.5]])
    out = apply_repetition_penalty(logits, torch.tensor([[0, 2, 2]]), 2.0)
    assert out.tolist() == [[1.0, 1.0, -2.0, 0.5]]
    assert torch.equal(apply_repetition_penalty(logits, torch.tensor([[0, 2]]), 1.0), logits)


def test_repetition_penalty_errors_name_the_problem():
    with pytest.raises(ValueError, match="repetition_penalty"):
        apply_repetition_penalty(torch.zeros(1, 4), torch.tensor([[0]]), 0.0)
    with pytest.raises(ValueError, match=r"\(B, T\)"):
        apply_repetition_penalty(torch.zeros(2, 4), torch.tensor([0, 1]), 1.2)


def test_one_beam_is_greedy_decoding(tiny):
    ids = torch.tensor([[5, 17, 3, 99]])
    beam, _ = beam_search(tiny, ids, 8, num_beams=1)
    greedy = llmlab.generate(tiny, ids, 8, temperature=0)
    assert torch.equal(beam, greedy)


def sequence_logprob(model, ids, prompt_len):
    with torch.no_grad():
        logp = torch.log_softmax(model(ids).float(), dim=-1)[0]        # (T, V)
    targets = ids[0, prompt_len:]
    return float(logp[prompt_len - 1:-1].gather(1, targets[:, None]).sum())


def test_enough_beams_find_the_most_likely_continuation(tiny):
    # with as many beams as there are continuations, beam search is exhaustive: it must find the best
    small = llmlab.Transformer(ModelConfig.preset("tiny-llama").__class__(
        **{**ModelConfig.preset("tiny-llama").__dict__, "vocab_size": 6})).eval()
    ids = torch.tensor([[1, 2, 3]])
    best = max(itertools.product(range(6), repeat=3),
               key=lambda c: sequence_logprob(small, torch.tensor([[1, 2, 3, *c]]), 3))
    found, score = beam_search(small, ids, 3, num_beams=36, length_penalty=0.0)
    assert found[0, 3:].tolist() == list(best)
    # beam search adds 3 float32 log-probabilities from cached steps, the reference from one full pass:
    # the whole model, a log-softmax over the vocabulary and the 3-term sum (all terms negative, so the
    # sum's size is theirs)
    assert_same_up_to_rounding(torch.tensor(score, dtype=torch.float32), sequence_logprob(small, found, 3),
                               depth=forward_depth(small.config, 6) + small.config.vocab_size + 3)


def test_beam_search_stops_at_eos(tiny):
    ids = torch.tensor([[5, 17, 3]])
    free, _ = beam_search(tiny, ids, 6, num_beams=3)
    eos = int(free[0, 3])                         # the best beam's first token, declared the end
    out, _ = beam_search(tiny, ids, 6, num_beams=3, eos_token_id=eos)
    assert eos in out[0, 3:].tolist() or out.shape[1] == 9


def test_beam_search_errors_are_clear(tiny):
    with pytest.raises(ValueError, match="one prompt"):
        beam_search(tiny, torch.tensor([[1, 2], [3, 4]]), 4)
    with pytest.raises(ValueError, match="num_beams"):
        beam_search(tiny, torch.tensor([[1, 2]]), 4, num_beams=0)
    with pytest.raises(ValueError, match="max_seq_len"):
        beam_search(tiny, torch.tensor([[1, 2]]), 10_000)


def test_beam_search_batch_gives_each_prompt_its_own_beam_search(tiny):
    # prompts of different lengths, left-padded; an end-of-text id that some beams reach and some do not
    prompts = [[5, 17, 3, 99], [8, 2], [40, 41, 42]]
    T = max(map(len, prompts))
    ids = torch.tensor([[0] * (T - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (T - len(p)) + [1] * len(p) for p in prompts])
    for eos in [None, int(beam_search(tiny, torch.tensor([prompts[1]]), 6, num_beams=3)[0][0, 3])]:
        together = beam_search_batch(tiny, ids, 6, num_beams=3, eos_token_id=eos,
                                                       attention_mask=mask)
        for p, (out, score) in zip(prompts, together):
            alone, alone_score = beam_search(tiny, torch.tensor([p]), 6, num_beams=3, eos_token_id=eos)
            assert torch.equal(out, alone)
            # the same sum of up to 6 log-probabilities, each from a padded batch instead of one row
            assert_same_up_to_rounding(torch.tensor(score), torch.tensor(alone_score),
                                       depth=forward_depth(tiny.config, T + 6) + tiny.config.vocab_size + 6)


def test_generate_several_gives_each_setting_its_own_generate(tiny):
    ids, mask = torch.tensor([[0, 5, 17, 3], [8, 2, 9, 9]]), torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]])
    settings = [dict(temperature=0), dict(temperature=0.8, seed=0), dict(temperature=0, repetition_penalty=1.3),
                dict(temperature=1.0, min_p=0.1, seed=1), dict(temperature=1.0, top_k=5, top_p=0.9, seed=2)]
    free = llmlab.generate(tiny, ids, 8, attention_mask=mask)
    for eos in [None, int(free[0, 5])]:                      # an end-of-text id the greedy rows reach
        together = generate_several(tiny, ids, 8, settings, attention_mask=mask, eos_token_id=eos)
        for s, out in zip(settings, together):
            assert torch.equal(out, llmlab.generate(tiny, ids, 8, attention_mask=mask, eos_token_id=eos, **s))
    with pytest.raises(TypeError, match="sampling settings"):
        generate_several(tiny, ids, 4, [dict(max_new_tokens=3)])


def test_generate_several_scores_the_tokens_with_the_models_own_probabilities(tiny):
    ids = torch.tensor([[5, 17, 3, 99]])
    (greedy, lp_greedy), (penalised, lp_pen) = generate_several(
        tiny, ids, 6, [dict(temperature=0), dict(temperature=0, repetition_penalty=2.0)], logprobs=True)
    for out, lp in [(greedy, lp_greedy), (penalised, lp_pen)]:
        with torch.no_grad():                                   # one full pass, no penalty: the reference
            full = torch.log_softmax(tiny(out).float(), dim=-1)[0, 3:-1].gather(1, out[0, 4:, None])[:, 0]
        # cached steps against one full pass: the model, then a log-softmax over the vocabulary
        assert_same_up_to_rounding(lp[0], full, depth=forward_depth(tiny.config, 10) + tiny.config.vocab_size)
