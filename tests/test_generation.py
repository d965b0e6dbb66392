"""Generation: caches change nothing but speed, greedy matches transformers, sampling is reproducible."""
import pytest
import torch
import transformers

import llmlab
from llmlab import (ModelConfig, Transformer, assert_same_up_to_rounding, available_devices, decode_step, forward_depth,
                    generate, prefill)
from llmlab.tokenization import pad_left
from llmlab.kvcache import GrowingKVCache, StaticKVCache
from llmlab.sampling import sample_next_token, top_k_filter, top_p_filter

DEVICES = available_devices()
V = 97


def _tiny(device="cpu", **kw):
    torch.manual_seed(0)
    cfg = ModelConfig(**{**ModelConfig.preset("tiny-llama").to_dict(), "vocab_size": V, **kw})
    model = Transformer(cfg).to(device).eval()
    with torch.no_grad():  # sharper logits than the default init, so greedy paths are not near-ties
        model.tok_embed.weight.mul_(20)
    return model


ARCHS = {
    "llama-gqa": dict(),
    "sliding": dict(sliding_window=4, layer_types=["sliding", "full"]),
    "gemma-like": dict(block="sandwich", qk_norm=True, norm_unit_offset=True, embed_scale=2.0, ffn="geglu",
                       activation="gelu_tanh", rope_local_theta=100.0, sliding_window=3,
                       layer_types=["sliding", "full"], final_logit_softcap=30.0),
    "gpt2-like": dict(positions="learned", norm="layer", ffn="mlp", activation="gelu_tanh", fused_qkv=True,
                      qkv_bias=True, tie_embeddings=False),
    "alibi-post": dict(positions="alibi", block="post"),
}


@pytest.mark.parametrize("device", DEVICES, ids=str)
@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_cached_and_uncached_generation_give_identical_tokens(device, arch):
    model = _tiny(device, **ARCHS[arch])
    ids = torch.randint(0, V, (2, 5), generator=torch.Generator().manual_seed(0)).to(device)
    slow = generate(model, ids, 12, use_cache=False)
    static = generate(model, ids, 12, kv_cache="static")
    growing = generate(model, ids, 12, kv_cache="growing")
    assert slow.shape == (2, 17)
    assert torch.equal(slow, static) and torch.equal(slow, growing)
    assert torch.equal(slow[:, :5], ids)


@pytest.mark.parametrize("device", DEVICES, ids=str)
@pytest.mark.parametrize("cache_cls", [GrowingKVCache, StaticKVCache])
def test_prefill_and_decode_step_logits_match_full_forward(device, cache_cls):
    model = _tiny(device, sliding_window=3, layer_types=["sliding", "full"])
    ids = torch.randint(0, V, (1, 10), generator=torch.Generator().manual_seed(1)).to(device)
    with torch.no_grad():
        full = model(ids)  # (1, 10, V)
        cache = cache_cls.for_model(model, max_len=10)
        logits = [prefill(model, ids[:, :4], cache)]
        for t in range(4, 10):
            logits.append(decode_step(model, ids[:, t], cache))
    assert cache.seq_len == 10
    stepped = torch.stack(logits[:-1], dim=1)  # logits for positions 3..8
    # one token at a time against all ten at once: the same model, its sums in other shapes and orders
    depth = forward_depth(model.config, 10)
    assert_same_up_to_rounding(stepped, full[:, 3:9], depth=depth)
    assert_same_up_to_rounding(logits[-1], full[:, 9], depth=depth)


@pytest.mark.parametrize("cache_cls", [GrowingKVCache, StaticKVCache])
def test_kv_cache_crop_and_expand_continue_like_a_fresh_run(cache_cls):
    """crop(n) forgets everything after position n; expand(N) turns one prefilled prefix into N rows.
    Both give the logits a run without the cache gives (the control: without crop they differ)."""
    model = _tiny()
    ids = torch.randint(0, V, (1, 8), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        full = model(ids)                                              # (1, 8, V)
        cache = cache_cls.for_model(model, max_len=16)
        prefill(model, ids[:, :6], cache)
        prefill(model, torch.tensor([[7, 7]]), cache)                  # two wrong guesses ...
        cache.crop(6)                                                  # ... dropped again
        assert cache.seq_len == 6
        # a cached prefix and one step against one full pass: equal up to rounding (other shapes)
        assert_same_up_to_rounding(decode_step(model, ids[:, 6], cache), full[:, 6],
                                   depth=forward_depth(model.config, 8))
        cache.reset()
        prefill(model, ids[:, :6], cache)
        cache.expand(3)
        nexts = torch.tensor([ids[0, 6], 5, 9])
        stepped = decode_step(model, nexts, cache)                     # (3, V): three continuations
        for row, token in enumerate(nexts.tolist()):
            alone = model(torch.cat([ids[:, :6], torch.tensor([[token]])], dim=1))[:, -1]
            assert_same_up_to_rounding(stepped[row:row + 1], alone, depth=forward_depth(model.config, 7))
        assert cache.memory_bytes() > 0
    with pytest.raises(ValueError, match="crop keeps the first n positions"):
        cache.crop(99)
    with pytest.raises(ValueError, match="batch of 3"):
        cache.expand(2)


def _flat():
    torch.manual_seed(0)
    return Transformer(ModelConfig.preset("tiny-llama")).eval()  # default init: nearly flat distributions


def test_do_sample_means_what_it_means_in_transformers():
    model = _flat()
    ids = torch.tensor([[1, 2, 3]])
    sampled = generate(model, ids, 6, do_sample=True, seed=3)
    assert torch.equal(sampled, generate(model, ids, 6, temperature=1.0, seed=3))
    assert torch.equal(generate(model, ids, 6, do_sample=True, temperature=0.5, seed=3),
                       generate(model, ids, 6, temperature=0.5, seed=3))
    assert torch.equal(generate(model, ids, 6, do_sample=False), generate(model, ids, 6))
    assert not torch.equal(sampled, generate(model, ids, 6))           # sampling is not greedy here


def test_min_p_and_repetition_penalty_in_generate():
    from llmlab.sampling import apply_repetition_penalty

    model = _flat()
    ids = torch.tensor([[1, 2, 3]])
    # min_p=1 keeps only the most likely token: sampling becomes greedy
    assert torch.equal(generate(model, ids, 6, temperature=1.0, min_p=1.0, seed=0), generate(model, ids, 6))
    # the penalty is applied to every row's tokens so far, step by step, like this loop
    by_hand = ids
    for _ in range(6):
        logits = apply_repetition_penalty(model(by_hand)[:, -1], by_hand, 3.0)
        by_hand = torch.cat([by_hand, logits.argmax(-1, keepdim=True)], dim=1)
    penalised = generate(model, ids, 6, repetition_penalty=3.0)
    assert torch.equal(penalised, by_hand) and not torch.equal(penalised, generate(model, ids, 6))
    # padding does not count as text: a padded row is penalised as it would be alone
    rows = [[1, 2, 3], [7, 8, 9, 10, 11]]
    padded, mask = pad_left(rows, pad_id=4)
    batched = generate(model, padded, 6, attention_mask=mask, repetition_penalty=3.0)[:, padded.shape[1]:]
    assert batched.tolist() == [generate(model, [r], 6, repetition_penalty=3.0)[0, len(r):].tolist() for r in rows]
    with pytest.raises(ValueError, match="repetition_penalty"):
        generate(model, ids, 2, repetition_penalty=0)


@pytest.mark.parametrize("cache_cls", [GrowingKVCache, StaticKVCache])
def test_kv_cache_reorder_keeps_the_rows_asked_for(cache_cls):
    model = _tiny()
    ids = torch.randint(0, V, (2, 6), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        cache = cache_cls.for_model(model, max_len=8)
        prefill(model, ids, cache)
        cache.reorder([1, 1, 0])                                       # drop nothing, copy row 1
        nexts = torch.tensor([4, 5, 6])
        stepped = decode_step(model, nexts, cache)                     # (3, V)
        for row, source in enumerate([1, 1, 0]):
            alone = model(torch.cat([ids[source:source + 1], nexts[row].view(1, 1)], dim=1))[:, -1]
            # a batch of cached rows and one step against one row in one pass: up to rounding
            assert_same_up_to_rounding(stepped[row:row + 1], alone, depth=forward_depth(model.config, 7))


def test_ids_are_range_checked_once_per_generate_call(monkeypatch):
    """Reading ids' min and max costs a GPU round trip: the prompt pass checks them, decode steps do not."""
    import llmlab.model

    flags = []
    original = llmlab.model.check_ids
    monkeypatch.setattr(llmlab.model, "check_ids", lambda *a, **k: flags.append(k["check_values"]) or original(*a, **k))
    generate(_flat(), torch.tensor([[1, 2, 3]]), 5)
    assert flags == [True, False, False, False, False]
    with pytest.raises(ValueError, match="outside the vocabulary"):
        generate(_flat(), torch.tensor([[1, 2, 999]]), 5)


def test_generate_stops_at_eos():
    model = _flat()
    ids = torch.tensor([[1, 2, 3]])
    free = generate(model, ids, 6, temperature=1.0, seed=0)[0, 3:].tolist()
    eos = free[2]
    stopped = generate(model, ids, 6, temperature=1.0, seed=0, eos_token_id=eos)[0, 3:].tolist()
    assert stopped == free[:free.index(eos) + 1] and len(stopped) < len(free)


def _hf_pair(kind):
    torch.manual_seed(0)
    if kind == "llama":
        cfg = transformers.LlamaConfig(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                       bos_token_id=None, eos_token_id=None, pad_token_id=0)
    else:
        cfg = transformers.Gemma3TextConfig(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                                            num_attention_heads=4, num_key_value_heads=1, head_dim=16,
                                            max_position_embeddings=128, sliding_window=4,
                                            layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                                            bos_token_id=None, eos_token_id=None, pad_token_id=0)
    hf = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").eval()
    with torch.no_grad():
        for p in hf.parameters():
            p.normal_(0, 0.3 if p.dim() == 2 else 0.1)
    return hf, llmlab.from_hf(hf)


@pytest.mark.parametrize("kind", ["llama", "gemma3"])
def test_greedy_generation_matches_transformers(kind):
    hf, model = _hf_pair(kind)
    ids = torch.randint(1, V, (1, 6), generator=torch.Generator().manual_seed(3))
    ref = hf.generate(ids, max_new_tokens=20, do_sample=False, attention_mask=torch.ones_like(ids))
    ours = generate(model, ids, 20)
    assert torch.equal(ours, ref)


def test_seeded_sampling_is_reproducible():
    model = _tiny()
    ids = torch.tensor([[1, 2, 3]])
    a = generate(model, ids, 15, temperature=5.0, top_k=20, top_p=0.95, seed=123)
    b = generate(model, ids, 15, temperature=5.0, top_k=20, top_p=0.95, seed=123)
    c = generate(model, ids, 15, temperature=5.0, top_k=20, top_p=0.95, seed=124)
    assert torch.equal(a, b) and not torch.equal(a, c)
    # with a cache or without, the same seed draws the same tokens
    assert torch.equal(a, generate(model, ids, 15, temperature=5.0, top_k=20, top_p=0.95, seed=123, use_cache=False))


def test_top_k_filter_worked_example():
    logits = torch.tensor([[1.0, 4.0, 3.0, 2.0]])
    assert top_k_filter(logits, 2).tolist() == [[float("-inf"), 4.0, 3.0, float("-inf")]]
    assert torch.equal(top_k_filter(logits, None), logits) and torch.equal(top_k_filter(logits, 10), logits)


def test_top_p_filter_worked_example_and_vs_transformers():
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
    logits = probs.log()
    assert torch.isfinite(top_p_filter(logits, 0.5)).tolist() == [[True, False, False, False]]
    assert torch.isfinite(top_p_filter(logits, 0.7)).tolist() == [[True, True, False, False]]
    assert torch.isfinite(top_p_filter(logits, 0.9)).tolist() == [[True, True, True, False]]
    assert torch.isfinite(top_p_filter(logits, 0.01)).sum() == 1  # always at least the top token
    from transformers.generation.logits_process import TopKLogitsWarper, TopPLogitsWarper
    x = torch.randn(5, 50, generator=torch.Generator().manual_seed(0)) * 3
    for p in (0.3, 0.75, 0.95):
        assert torch.equal(torch.isfinite(top_p_filter(x, p)), torch.isfinite(TopPLogitsWarper(p)(None, x.clone())))
    assert torch.equal(top_k_filter(x, 7), TopKLogitsWarper(7)(None, x.clone()))


def test_sampling_follows_the_filtered_distribution():
    logits = torch.tensor([[0.0, 1.0, 2.0, 3.0]])
    g = torch.Generator().manual_seed(0)
    draws = torch.stack([sample_next_token(logits, 1.0, top_k=2, generator=g) for _ in range(2000)])
    assert set(draws.flatten().tolist()) == {2, 3}
    frac3 = (draws == 3).float().mean().item()
    # a statistical check, not rounding: 2000 draws with p = 0.73 have a standard deviation of
    # sqrt(p (1 - p) / 2000) = 0.0099, and 0.05 is five of them
    assert abs(frac3 - torch.softmax(torch.tensor([2.0, 3.0]), 0)[1].item()) < 0.05
    assert sample_next_token(logits, temperature=0.0).item() == 3


def test_stream_receives_each_token_as_produced():
    model = _tiny()
    seen = []
    out = generate(model, torch.tensor([[5, 6]]), 7, stream=seen.append)
    assert seen == out[0, 2:].tolist() and all(isinstance(t, int) for t in seen)
    seen_b = []
    out_b = generate(model, torch.tensor([[5, 6], [7, 8]]), 3, stream=seen_b.append)
    assert seen_b == out_b[:, 2:].t().tolist()


def test_eos_stops_generation():
    model = _tiny()
    ids = torch.tensor([[5, 6]])
    free = generate(model, ids, 10)
    eos = free[0, 4].item()  # the third generated token, used as EOS
    first = free[0, 2:].tolist().index(eos)
    stopped = generate(model, ids, 10, eos_token_id=eos)
    assert stopped[0].tolist() == free[0, :2 + first + 1].tolist()
    # in a batch, a finished row keeps emitting EOS until every row is done
    batch = torch.cat([ids, torch.tensor([[9, 10]])])
    free_b = generate(model, batch, 10)
    out_b = generate(model, batch, 10, eos_token_id=[eos])
    for row, ref in zip(out_b.tolist(), free_b.tolist()):
        gen, ref_gen = row[2:], ref[2:]
        if eos in ref_gen:
            k = ref_gen.index(eos)
            assert gen[:k + 1] == ref_gen[:k + 1] and set(gen[k:]) == {eos}
        else:
            assert gen == ref_gen[:len(gen)]


def test_generate_accepts_a_list_and_greedy_is_deterministic():
    model = _tiny()
    a = generate(model, [5, 6, 7], 4)
    assert a.shape == (1, 7) and torch.equal(a, generate(model, torch.tensor([[5, 6, 7]]), 4))


# ------------------------------------------------------------------ padded batches

PROMPTS = [[11, 12, 13], [21, 22, 23, 24, 25, 26, 27], [31, 32, 33, 34, 35]]


def _contextual(arch):
    """A tiny model whose greedy continuation depends on the whole prompt (untied head, larger weights),
    so that a row that saw padding would show it."""
    torch.manual_seed(0)
    cfg = ModelConfig(**{**ModelConfig.preset("tiny-llama").to_dict(), "vocab_size": V, **ARCHS[arch],
                         "tie_embeddings": False})
    model = Transformer(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(4.0) if p.dim() > 1 else None
    return model


def _alone_and_batched(model, prompts, n_new, pad_id=0, mask=True, **kwargs):
    """Each prompt continued on its own, and all of them as one left-padded batch (new tokens only)."""
    alone = [generate(model, [p], n_new, **kwargs)[0, len(p):].tolist() for p in prompts]
    ids, attention_mask = pad_left(prompts, pad_id)
    batched = generate(model, ids, n_new, attention_mask=attention_mask if mask else None, **kwargs)
    return alone, batched[:, ids.shape[1]:].tolist()


@pytest.mark.parametrize("how", [dict(kv_cache="static"), dict(kv_cache="growing"), dict(use_cache=False)], ids=str)
@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_a_left_padded_batch_continues_each_row_as_it_would_alone(arch, how):
    model = _contextual(arch)
    alone, batched = _alone_and_batched(model, PROMPTS, 8, **how)
    assert batched == alone
    assert all(len(set(row)) >= 2 for row in alone)  # not a model that repeats one token whatever it sees


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_padding_id_does_not_matter_and_without_the_mask_it_would(arch):
    """Padded positions are never attended to, so the pad id changes nothing; the control: the same
    padded batch with the mask left out continues differently."""
    model = _contextual(arch)
    alone, batched = _alone_and_batched(model, PROMPTS, 8, pad_id=50)
    assert batched == alone
    ids, _ = pad_left(PROMPTS, pad_id=0)
    assert generate(model, ids, 8)[:, ids.shape[1]:].tolist() != alone


def test_attention_mask_must_be_left_padding_of_the_right_shape():
    model = _tiny()
    ids, mask = pad_left(PROMPTS)
    with pytest.raises(ValueError, match="left-padded"):
        generate(model, ids, 2, attention_mask=mask.flip(-1))
    with pytest.raises(ValueError, match="shape"):
        generate(model, ids, 2, attention_mask=mask[:, 1:])
    with pytest.raises(ValueError, match="no real token"):
        generate(model, ids, 2, attention_mask=torch.zeros_like(mask))
    with pytest.raises(ValueError, match="pad_left"):
        generate(model, PROMPTS, 2)  # rows of different lengths and no padding


@pytest.mark.slow
@pytest.mark.parametrize("name", ["smollm2-135m", "gemma3-270m"])
def test_real_models_continue_padded_rows_as_they_would_alone(name):
    model, tok = llmlab.load(name)
    texts = ["Hello", "The capital of France is", "Once upon a time, in a small village by the sea,"]
    prompts = [tok.encode(t) for t in texts]
    assert len({len(p) for p in prompts}) == 3
    pad = tok.pad_token_id if getattr(tok, "pad_token_id", None) is not None else 0
    alone, batched = _alone_and_batched(model, prompts, 12, pad_id=pad)
    print(name, [tok.decode(row) for row in batched])
    assert batched == alone
