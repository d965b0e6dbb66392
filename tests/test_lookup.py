"""Prompt-lookup decoding gives exactly greedy decoding's tokens, in fewer passes."""
import pytest
import torch

import llmlab
from llmlab.config import ModelConfig
from llmlab.devices import available_devices
from llmlab.lookup import generate_lookup, propose_draft
from llmlab.model import Transformer


def test_propose_draft_finds_the_latest_earlier_copy():
    assert propose_draft([5, 6, 7, 9, 5, 6], max_ngram=2, draft_len=3) == [7, 9, 5]
    assert propose_draft([1, 2, 1, 3, 1], max_ngram=1, draft_len=2) == [3, 1]   # latest "1" wins
    assert propose_draft([4, 5, 6], max_ngram=3, draft_len=4) == []             # nothing repeats
    assert propose_draft([1, 2, 3, 9, 2, 3], max_ngram=3, draft_len=2) == [9, 2]  # falls back to n=2


@pytest.mark.parametrize("device", available_devices(), ids=str)
@pytest.mark.parametrize("preset", ["tiny-llama", "tiny-gemma3", "tiny-gpt2"])
def test_same_tokens_as_greedy_generate(preset, device):
    torch.manual_seed(0)
    model = Transformer(ModelConfig.preset(preset)).to(device).eval()
    accepted = 0
    for seed in range(4):
        torch.manual_seed(seed)
        prompt = torch.randint(0, 128, (1, 6), device=device).repeat(1, 2)   # a prompt that repeats itself
        want = llmlab.generate(model, prompt, max_new_tokens=40)
        stats = {}
        got = generate_lookup(model, prompt, max_new_tokens=40, draft_len=4, stats=stats)
        assert torch.equal(got, want), (preset, seed)
        assert stats["new_tokens"] == 40 and stats["passes"] <= 40
        accepted += stats["accepted"]
    assert accepted > 0, "no guess was ever accepted: the lookup never paid off on repetitive text"


def test_stops_at_eos_and_respects_the_limits():
    torch.manual_seed(1)
    model = Transformer(ModelConfig.preset("tiny-llama")).eval()
    prompt = torch.randint(0, 128, (1, 5)).repeat(1, 3)
    full = llmlab.generate(model, prompt, max_new_tokens=30)
    eos = int(full[0, prompt.shape[1] + 7])            # a token greedy decoding produces at step 8
    want = llmlab.generate(model, prompt, max_new_tokens=30, eos_token_id=eos)   # stops at the first EOS
    assert int(want[0, -1]) == eos and want.shape[1] <= prompt.shape[1] + 8
    got = generate_lookup(model, prompt, max_new_tokens=30, eos_token_id=eos)
    assert torch.equal(got, want)
    assert generate_lookup(model, prompt, max_new_tokens=1).shape[1] == prompt.shape[1] + 1
    assert torch.equal(generate_lookup(model, prompt, max_new_tokens=0), prompt)
    with pytest.raises(ValueError, match="one sequence at a time"):
        generate_lookup(model, prompt.repeat(2, 1), max_new_tokens=3)
    with pytest.raises(ValueError, match="max_seq_len"):
        generate_lookup(model, prompt, max_new_tokens=model.config.max_seq_len)


@pytest.mark.slow
def test_real_model_same_100_tokens():
    model, tokenizer = llmlab.load("smollm2-135m")
    for text in ["The history of the printing press begins in the fifteenth century, when",
                 "def fibonacci(n):\n    if n < 2:\n        return n\n"]:
        ids = torch.tensor([tokenizer.encode(text)])
        stats = {}
        got = generate_lookup(model, ids, max_new_tokens=100, stats=stats)
        assert torch.equal(got, llmlab.generate(model, ids, max_new_tokens=100)), text
        print(f"{text[:30]!r}: {stats['passes']} passes for 100 tokens ({stats['accepted']} guesses accepted)")
