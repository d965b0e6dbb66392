"""The decode-side calls chapters reach for, each against the hand-rolled code it replaces:
generate continuing from a cache, logits_to_keep, kv_cache_bytes, synchronize / timed, the noise a
causal trace used, and the one EOS normaliser and context-length check of every decode loop."""
import copy
import dataclasses
import statistics

import pytest
import torch

import llmlab
from llmlab import (ModelConfig, Transformer, assert_same_bits, assert_same_up_to_rounding, beam_search, decode_step,
                    forward_depth, generate, kv_cache_bytes, prefill)
from llmlab import devices
from llmlab.generation import check_context_length, eos_ids
from llmlab.inspection import causal_trace, hooks
from llmlab.kvcache import GrowingKVCache, StaticKVCache
from llmlab.lookup import generate_lookup
from llmlab.tokenization import pad_left

V = 97
CACHES = [GrowingKVCache, StaticKVCache]


def _tiny(**kw):
    torch.manual_seed(0)
    cfg = ModelConfig(**{**ModelConfig.preset("tiny-llama").to_dict(), "vocab_size": V, "tie_embeddings": False, **kw})
    model = Transformer(cfg).eval()
    with torch.no_grad():  # sharper logits than the default init, so greedy paths are not near-ties; an untied
        model.tok_embed.weight.mul_(20)   # head, so that greedy text does not just repeat the last token, and
        model.lm_head.weight.mul_(20)     # stronger attention, so that it depends on the earlier tokens
        for name, p in model.named_parameters():
            if ".attn." in name and p.dim() == 2:
                p.mul_(6)
    return model


@pytest.fixture(autouse=True)
def no_grad():
    with torch.no_grad():      # these tests only run models; generate's outputs are inference tensors
        yield


@pytest.fixture(scope="module")
def tiny():
    return _tiny()


@pytest.fixture(scope="module")
def sliding():
    return _tiny(sliding_window=3, layer_types=["sliding", "full"])


def _ids(B, T, seed=0):
    return torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(seed))


def _filled(model, cache_cls, prefix, max_len=64, mask=None):
    cache = cache_cls.for_model(model, max_len=max_len)
    prefill(model, prefix, cache, mask)
    return cache


def _snapshot(cache):
    return cache.seq_len, [k.clone() for k in cache.keys], [v.clone() for v in cache.values]


# ------------------------------------------------------------------ generate(..., kv_cache=<a cache>)

@pytest.mark.parametrize("cache_cls", CACHES)
@pytest.mark.parametrize("model_name", ["tiny", "sliding"])
@pytest.mark.parametrize("P", [1, 5, 9, 10])       # cached tokens of the 10 in ids (10: all of them)
def test_generate_from_a_cache_gives_the_tokens_of_a_plain_generate(request, model_name, cache_cls, P):
    model = request.getfixturevalue(model_name)
    ids = _ids(1, 10, seed=P)
    plain = generate(model, ids, 12)
    shared = _filled(model, cache_cls, ids[:, :P])
    before = _snapshot(shared)
    out = generate(model, ids, 12, kv_cache=shared.copy())
    assert torch.equal(out, plain)
    seq_len, keys, values = before                # the copy was extended, the original is untouched
    assert shared.seq_len == seq_len == P
    assert all(torch.equal(a, b) for a, b in zip(shared.keys, keys))
    assert all(torch.equal(a, b) for a, b in zip(shared.values, values))


@pytest.mark.parametrize("cache_cls", CACHES)
def test_the_tiny_model_writes_texts_that_depend_on_the_cached_tokens(tiny, cache_cls):
    """What makes the test above able to fail: the texts vary, and a cache of other tokens changes them."""
    changed = 0
    for seed in range(6):
        ids = _ids(1, 10, seed=seed)
        plain = generate(tiny, ids, 12)
        assert len(set(plain[0, 10:].tolist())) > 3                  # a text, not one token repeated
        wrong = _filled(tiny, cache_cls, (ids[:, :5] + 1) % V)
        changed += not torch.equal(generate(tiny, ids, 12, kv_cache=wrong), plain)
    assert changed >= 5


@pytest.mark.parametrize("cache_cls", CACHES)
def test_generate_extends_the_cache_it_is_given(tiny, cache_cls):
    ids = _ids(1, 6)
    cache = _filled(tiny, cache_cls, ids[:, :4])
    out = generate(tiny, ids, 5, kv_cache=cache)
    assert cache.seq_len == out.shape[1] - 1      # every position but the last new token (never fed back)
    reference = cache_cls.for_model(tiny, max_len=64)
    prefill(tiny, out[:, :-1], reference)
    # the keys of one long prefill against those of a shorter prefill and decode steps (other shapes): equal up
    # to rounding over the blocks below the layer, its norm and the key projection (d_model terms each)
    d = tiny.config.d_model
    for layer, (a, b) in enumerate(zip(cache.keys, reference.keys)):
        depth = forward_depth(tiny.config, cache.seq_len, n_layers=layer, head=False) + 2 * d
        assert_same_up_to_rounding(a[:, :, :cache.seq_len], b[:, :, :cache.seq_len], depth=depth)


def test_the_cache_path_keeps_eos_sampling_streaming_and_the_penalty(tiny):
    ids = _ids(1, 8, seed=3)
    free = generate(tiny, ids, 10)[0, 8:].tolist()
    k = next(k for k in range(1, 10) if free[k] not in free[:k])
    eos = free[k]                                 # the first new token not written before: a stop there
    settings = [dict(eos_token_id=eos), dict(eos_token_id=[V - 1, eos]),
                dict(temperature=0.9, top_k=20, top_p=0.9, seed=1), dict(do_sample=True, min_p=0.05, seed=2),
                dict(repetition_penalty=1.5)]
    for kw in settings:
        streamed_plain, streamed_cached = [], []
        plain = generate(tiny, ids, 10, stream=streamed_plain.append, **kw)
        cached = generate(tiny, ids, 10, stream=streamed_cached.append,
                          kv_cache=_filled(tiny, StaticKVCache, ids[:, :5]), **kw)
        assert torch.equal(plain, cached), kw
        stops = eos_ids(kw.get("eos_token_id"), V)                      # the stop token is returned, not streamed
        assert streamed_plain == streamed_cached == [t for t in cached[0, 8:].tolist() if t not in stops], kw
    assert generate(tiny, ids, 10, eos_token_id=eos, kv_cache=_filled(tiny, GrowingKVCache, ids[:, :5])).shape[1] \
        == 8 + k + 1


def test_a_padded_batch_continues_from_its_cached_prefix(tiny):
    ids, mask = pad_left([[5, 6, 7, 8, 9, 10, 11], [20, 21, 22, 23, 24]], pad_id=0)   # (2, 7), left-padded
    plain = generate(tiny, ids, 6, attention_mask=mask)
    cache = _filled(tiny, GrowingKVCache, ids[:, :4], mask=mask[:, :4])
    assert torch.equal(generate(tiny, ids, 6, attention_mask=mask, kv_cache=cache), plain)


def test_an_empty_cache_is_filled_and_kept(tiny):
    ids = _ids(1, 5)
    cache = GrowingKVCache.for_model(tiny)
    assert torch.equal(generate(tiny, ids, 4, kv_cache=cache), generate(tiny, ids, 4))
    assert cache.seq_len == 5 + 4 - 1


def test_a_cache_that_does_not_fit_is_a_clear_error(tiny):
    ids = _ids(1, 6)
    longer = _filled(tiny, GrowingKVCache, _ids(1, 8))
    with pytest.raises(ValueError, match="cache holds 8 positions but ids has only 6"):
        generate(tiny, ids, 3, kv_cache=longer)
    with pytest.raises(TypeError, match="kv_cache must be 'static', 'growing' or a KV cache"):
        generate(tiny, ids, 3, kv_cache={"keys": []})
    with pytest.raises(ValueError, match="kv_cache='fast'"):
        generate(tiny, ids, 3, kv_cache="fast")
    with pytest.raises(ValueError, match="made for another model"):
        generate(tiny, ids, 3, kv_cache=GrowingKVCache(n_layers=5))
    with pytest.raises(ValueError, match=r"cache.expand\(B\)"):
        generate(tiny, ids.repeat(3, 1), 3, kv_cache=_filled(tiny, GrowingKVCache, ids[:, :2]))
    with pytest.raises(ValueError, match="a batch of 2 rows but ids has 3"):
        generate(tiny, _ids(3, 6), 3, kv_cache=_filled(tiny, GrowingKVCache, _ids(2, 2)))
    with pytest.raises(ValueError, match="max_len=8 positions, but 6 tokens \\+ 5 new ones need 10"):
        generate(tiny, ids, 5, kv_cache=_filled(tiny, StaticKVCache, ids[:, :2], max_len=8))
    with pytest.raises(ValueError, match="use_cache=False"):
        generate(tiny, ids, 3, use_cache=False, kv_cache=_filled(tiny, GrowingKVCache, ids[:, :2]))
    with pytest.raises(ValueError, match="max_seq_len=64"):
        generate(tiny, ids, 60, kv_cache=_filled(tiny, GrowingKVCache, ids[:, :2]))


@pytest.mark.parametrize("cache_cls", CACHES)
def test_copy_is_deep(tiny, cache_cls):
    cache = _filled(tiny, cache_cls, _ids(1, 4))
    twin = cache.copy()
    assert type(twin) is cache_cls and twin.seq_len == cache.seq_len == 4
    assert twin.memory_bytes() == cache.memory_bytes()
    assert all(a.data_ptr() != b.data_ptr() and torch.equal(a, b) for a, b in zip(twin.keys, cache.keys))
    decode_step(tiny, torch.tensor([3]), twin)
    twin.crop(2)
    assert cache.seq_len == 4
    # the original still continues as if the copy never existed
    assert torch.equal(decode_step(tiny, torch.tensor([3]), cache),
                       decode_step(tiny, torch.tensor([3]), _filled(tiny, cache_cls, _ids(1, 4))))


def test_chapter_10_ask_loop_is_one_generate_call(tiny):
    """Chapter 10's prompt-caching ask(): deepcopy the shared cache, prefill the request's own tokens,
    argmax / decode_step until EOS or n_new. generate(..., kv_cache=shared.copy()) gives the same tokens."""
    prefix = _ids(1, 9, seed=11)
    shared = GrowingKVCache(tiny.config.n_layers)
    prefill(tiny, prefix, shared)

    def ask(own_ids, n_new=10, eos=None):
        cache = copy.deepcopy(shared)
        logits = prefill(tiny, own_ids, cache)
        answer = [int(logits.argmax())]
        while len(answer) < n_new and answer[-1] != eos:
            answer.append(int(decode_step(tiny, torch.tensor(answer[-1:]), cache).argmax()))
        return answer

    for seed in range(3):
        own = _ids(1, 4, seed=20 + seed)
        by_hand = ask(own)
        out = generate(tiny, torch.cat([prefix, own], 1), 10, kv_cache=shared.copy())
        assert out[0, 13:].tolist() == by_hand
        eos = by_hand[4]
        out = generate(tiny, torch.cat([prefix, own], 1), 10, eos_token_id=eos, kv_cache=shared.copy())
        assert out[0, 13:].tolist() == ask(own, eos=eos)
    assert shared.seq_len == 9


@pytest.mark.slow
def test_real_smollm2_continues_a_cached_system_prompt():
    model, tok = llmlab.load("smollm2-135m")
    system = [{"role": "system", "content": "You answer in one short sentence. The bakery opens at 7 am."}]
    prefix_ids = tok.encode(tok.apply_chat_template(system, add_generation_prompt=False))
    shared = StaticKVCache.for_model(model, max_len=256)
    prefill(model, llmlab.as_ids(model, tok, prefix_ids), shared)
    for question in ["When does the bakery open?", "What is two plus two?"]:
        chat = tok.apply_chat_template(system + [{"role": "user", "content": question}])
        ids = llmlab.as_ids(model, tok, chat)
        assert ids[0, :len(prefix_ids)].tolist() == prefix_ids       # the cache holds a true prefix
        plain = generate(model, ids, 24, eos_token_id=tok.eos_token_id)
        cached = generate(model, ids, 24, eos_token_id=tok.eos_token_id, kv_cache=shared.copy())
        assert torch.equal(plain, cached), question
        assert shared.seq_len == len(prefix_ids)


# ------------------------------------------------------------------ logits_to_keep

def test_logits_to_keep_equals_slicing_the_full_logits(sliding):
    ids = _ids(2, 9)
    with torch.no_grad():
        full = sliding(ids)                                                       # (2, 9, V)
        assert torch.equal(sliding(ids, logits_to_keep=0), full)
        # the blocks run on the same shapes; the final norm and the LM head (d_model terms each) run on the
        # kept positions only, other shapes: equal up to that rounding
        head_depth = 2 * sliding.config.d_model
        for n in (1, 3, 9):
            assert_same_up_to_rounding(sliding(ids, logits_to_keep=n), full[:, -n:], depth=head_depth)
        for keep in ([0, -1, 4], [8, 8, 2], torch.tensor([1, 5]), torch.tensor(3)):
            got = sliding(ids, logits_to_keep=keep)
            positions = [p % 9 for p in torch.as_tensor(keep).reshape(-1).tolist()]
            if torch.is_tensor(keep) and keep.dim() == 0:
                positions = list(range(9 - 3, 9))                                 # a 0-d tensor is a count
            assert_same_up_to_rounding(got, full[:, positions], depth=head_depth)
        cache = GrowingKVCache.for_model(sliding)
        sliding(ids[:, :5], cache=cache)
        # 5 cached positions and 4 new ones: the whole model on other shapes
        assert_same_up_to_rounding(sliding(ids[:, 5:], cache=cache, logits_to_keep=[0, 2]), full[:, [5, 7]],
                                   depth=forward_depth(sliding.config, 9))


def test_logits_to_keep_runs_the_head_on_the_kept_positions_only(tiny):
    """Chapter 1 sliced hook_final_norm by hand to run the LM head on a few rows; logits_to_keep says it."""
    ids = _ids(3, 10)
    n = 3
    seen = {}
    with torch.no_grad():
        with hooks(tiny, {"hook_final_norm": lambda h: h[:, -n - 1:-1]}):      # the hand-rolled version
            by_hand = tiny(ids)
        with hooks(tiny, {"hook_final_norm": lambda h: seen.__setitem__("h", h)}):
            kept = tiny(ids, logits_to_keep=list(range(10 - n - 1, 10 - 1)))
    assert seen["h"].shape == (3, n, tiny.config.d_model)
    # by hand the final norm runs on all 10 positions and the head on a strided slice; logits_to_keep runs
    # both on the 3 kept rows: the same sums up to rounding (d_model terms each)
    assert_same_up_to_rounding(kept, by_hand, depth=2 * tiny.config.d_model)


def test_logits_to_keep_errors_are_clear(tiny):
    ids = _ids(1, 4)
    with pytest.raises(TypeError, match="is a bool"):
        tiny(ids, logits_to_keep=True)
    with pytest.raises(ValueError, match="logits_to_keep must be >= 0"):
        tiny(ids, logits_to_keep=-1)
    with pytest.raises(ValueError, match="last 5 positions of an input of 4"):
        tiny(ids, logits_to_keep=5)
    with pytest.raises(IndexError, match="logits_to_keep position 4 is outside"):
        tiny(ids, logits_to_keep=[0, 4])
    with pytest.raises(ValueError, match="keeps no position"):
        tiny(ids, logits_to_keep=[])
    with pytest.raises(ValueError, match="1-D integer positions"):
        tiny(ids, logits_to_keep=torch.tensor([[0, 1]]))
    with pytest.raises(TypeError, match="last_only"):
        tiny(ids, last_only=True)                   # the old all-or-last switch is gone


# ------------------------------------------------------------------ kv_cache_bytes

def _chapter_10_cache_bytes(config, T, n_kv_heads=None, sliding=True):
    """Chapter 10's hand-rolled formula (bf16, one sequence), kept here to check the library's."""
    n_kv = n_kv_heads or config.n_kv_heads
    total = 0
    for kind in config.layer_types:
        stored = min(T, config.sliding_window) if (kind == "sliding" and sliding) else T
        total += 2 * 1 * n_kv * config.head_dim * stored * 1 * 2
    return total


def _chapter_5_kv_cache_bytes(cfg, n_kv, n_tokens):
    kept = [min(n_tokens, cfg.sliding_window) if kind == "sliding" else n_tokens for kind in cfg.layer_types]
    return sum(2 * n_kv * cfg.head_dim * 2 * k for k in kept)


@pytest.mark.parametrize("name", ["smollm2-135m", "gemma3-270m"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_kv_cache_bytes_equals_what_a_filled_cache_holds(name, dtype):
    config = ModelConfig.preset(name)
    with torch.device("meta"):                         # real shapes, no memory and no arithmetic
        model = Transformer(config).to(dtype)
    T, B = 700, 2                                      # past Gemma's 512-token window
    cache = GrowingKVCache.for_model(model)
    model(torch.zeros(B, T, dtype=torch.long, device="meta"), cache=cache, logits_to_keep=1)
    assert cache.seq_len == T
    assert kv_cache_bytes(config, T, batch=B, dtype=dtype, sliding=False) == cache.memory_bytes()
    assert kv_cache_bytes(model, T, batch=B, dtype=dtype, sliding=False) == cache.memory_bytes()
    # a cache that drops what a sliding layer can no longer see keeps the last `window` positions there
    windowed = sum(k[:, :, -config.sliding_window:].numel() * k.element_size() * 2 if kind == "sliding"
                   else k.numel() * k.element_size() * 2 for k, kind in zip(cache.keys, config.layer_types))
    assert kv_cache_bytes(config, T, batch=B, dtype=dtype) == windowed
    assert (windowed < cache.memory_bytes()) == ("sliding" in config.layer_types)


@pytest.mark.parametrize("name", ["smollm2-135m", "gemma3-270m"])
def test_kv_cache_bytes_gives_the_numbers_of_chapters_5_and_10(name):
    import dataclasses

    config = ModelConfig.preset(name)
    for T in (1, 511, 512, 513, 8192, 100_000):
        assert kv_cache_bytes(config, T) == _chapter_10_cache_bytes(config, T) == \
            _chapter_5_kv_cache_bytes(config, config.n_kv_heads, T)
        assert kv_cache_bytes(config, T, sliding=False) == _chapter_10_cache_bytes(config, T, sliding=False)
        mha = dataclasses.replace(config, n_kv_heads=config.n_heads)
        assert kv_cache_bytes(mha, T) == _chapter_10_cache_bytes(config, T, n_kv_heads=config.n_heads)
    assert kv_cache_bytes(config, 1000, batch=3, dtype="float32") == 2 * 3 * kv_cache_bytes(config, 1000)


def test_kv_cache_bytes_errors_are_clear():
    config = ModelConfig.preset("smollm2-135m")
    with pytest.raises(TypeError, match="needs a ModelConfig"):
        kv_cache_bytes({"n_layers": 30}, 10)
    with pytest.raises(ValueError, match="T must be a whole number >= 0"):
        kv_cache_bytes(config, -1)
    with pytest.raises(ValueError, match="batch must be"):
        kv_cache_bytes(config, 10, batch=1.5)
    with pytest.raises(ValueError, match="Unknown dtype"):
        kv_cache_bytes(config, 10, dtype="float8")


# ------------------------------------------------------------------ synchronize and timed

def test_synchronize_accepts_names_devices_tensors_and_models(tiny):
    for where in ("cpu", torch.device("cpu"), torch.zeros(2), tiny, None):
        assert devices.synchronize(where) is None
    with pytest.raises(ValueError, match="not a device name"):
        devices.synchronize("gpu0")


def test_timed_calls_warmup_plus_repeats_and_syncs_around_each(monkeypatch):
    events = []
    readings = [0.0, 0.5, 1.0, 1.1, 2.0, 2.3, 3.0, 3.2]
    clock = iter(readings)                                     # four calls: 0.5, 0.1, 0.3, 0.2 s
    monkeypatch.setattr(devices.time, "perf_counter", lambda: next(clock))
    monkeypatch.setattr(devices, "synchronize", lambda device: events.append(("sync", str(device))))
    t = devices.timed(lambda: events.append("call"), "cpu", repeats=4, warmup=2)
    assert events[:2] == ["call", "call"]                     # the warm-up, untimed
    assert events[2:] == [("sync", "cpu"), "call", ("sync", "cpu")] * 4
    # bit for bit: the same subtractions of the same clock readings (1.1 - 1.0 is not exactly 0.1), then a
    # min and a median of those very numbers
    durations = tuple(end - start for start, end in zip(readings[0::2], readings[1::2]))
    assert_same_bits(t.seconds, durations)
    assert_same_bits(t.min, min(durations))
    assert_same_bits(t.median, statistics.median(durations))
    assert "calls=4" in repr(t)


def test_timed_errors_are_clear():
    with pytest.raises(TypeError, match="timed\\(lambda: model\\(ids\\), device\\)"):
        devices.timed(3.0, "cpu")
    with pytest.raises(ValueError, match="repeats must be a whole number >= 1"):
        devices.timed(lambda: None, "cpu", repeats=0)
    with pytest.raises(ValueError, match="warmup must be a whole number >= 0"):
        devices.timed(lambda: None, "cpu", warmup=-1)


def test_memory_bandwidth_is_the_median_of_three_reads_with_the_fastest(monkeypatch):
    """Bytes over the median read (a typical read) and over the fastest, with the spread, the read count and the
    threads; the three jobs read the given matrix (a sum, W @ x and the one-column product W @ X)."""
    W = torch.randn(1000, 250)                                  # 1,000,000 bytes in float32
    calls, per_job = [], iter([(0.004, 0.003), (0.002, 0.005), (0.010, 0.001)])

    def fake_timed(fn, device, repeats):
        calls.append(tuple(fn().shape))                          # what the job computed
        s = next(per_job)
        return devices.Timing(s, min(s), statistics.median(s))

    monkeypatch.setattr(devices, "timed", fake_timed)
    b = devices.memory_bandwidth(matrix=W, repeats=2)
    assert calls == [(), (1000,), (1000, 1)]                    # sum, W @ x, W @ X with one column
    # bit for bit: the min and the median of the given numbers, and the same divisions of them (bytes / seconds
    # / 1e9, median / fastest) in the same order
    seconds = [0.004, 0.003, 0.002, 0.005, 0.010, 0.001]
    assert_same_bits(b.fastest, 0.001)
    assert_same_bits(b.median, statistics.median(seconds))
    assert_same_bits(b.gb_per_s, 1e6 / statistics.median(seconds) / 1e9)
    assert_same_bits(b.best_gb_per_s, 1e6 / 0.001 / 1e9)
    assert b.reads == 6 and b.threads == torch.get_num_threads() and b.buffer_bytes == 10**6
    assert b.cache_bytes is None and not b.reused               # a matrix passed in: measured, never reused
    assert_same_bits(b.spread, statistics.median(seconds) / 0.001)
    assert "GB/s" in repr(b) and "6 reads" in repr(b) and "median" in repr(b)


def test_memory_bandwidth_errors_are_clear():
    with pytest.raises(ValueError, match="2-D floating-point tensor"):
        devices.memory_bandwidth(matrix=torch.ones(4, dtype=torch.int64))
    with pytest.raises(ValueError, match="repeats must be a whole number >= 1"):
        devices.memory_bandwidth(matrix=torch.ones(4, 4), repeats=0)


def test_last_level_cache_is_read_from_linux_cache_folders(tmp_path, monkeypatch):
    """The largest level among data and unified caches (an instruction cache never counts); sizes in K, M or G."""
    for i, (level, kind, size) in enumerate([(1, "Data", "32K"), (1, "Instruction", "32K"), (2, "Unified", "512K"),
                                             (3, "Unified", "32768K")]):
        folder = tmp_path / f"index{i}"
        folder.mkdir()
        for name, text in [("level", f"{level}\n"), ("type", f"{kind}\n"), ("size", f"{size}\n")]:
            (folder / name).write_text(text)
    monkeypatch.setattr(devices, "CPU_CACHE_FOLDER", tmp_path)
    assert devices.last_level_cache_bytes("cpu") == 32 * 2**20
    (tmp_path / "index4").mkdir()                                # an L4 of 1 GiB, say, wins over the L3
    for name, text in [("level", "4"), ("type", "Unified"), ("size", "1G")]:
        (tmp_path / "index4" / name).write_text(text)
    assert devices.last_level_cache_bytes("cpu") == 2**30


def test_the_default_buffer_is_four_times_the_last_level_cache(monkeypatch):
    """At least CACHE_MULTIPLE (4) times the cache, so that a read cannot be served from it; between 256 MiB and
    1 GiB (a cache size that is unknown or per core; the memory of a small machine); 512 MiB when unknown."""
    MiB = 2**20
    for cache, expected in [(32 * MiB, 256 * MiB), (96 * MiB, 384 * MiB), (512 * MiB, 1024 * MiB),
                            (None, 512 * MiB)]:
        monkeypatch.setattr(devices, "last_level_cache_bytes", lambda device=None, cache=cache: cache)
        size = devices.bandwidth_buffer_bytes("cpu")
        assert size == expected and size % (4 * 4096) == 0
        if cache is not None and 4 * cache <= devices.MAX_BUFFER_BYTES:
            assert size >= 4 * cache
    # the real machine: whatever its cache, the buffer is at least 4 times it (or the largest buffer)
    monkeypatch.undo()
    cache = devices.last_level_cache_bytes("cpu")
    assert cache is None or devices.bandwidth_buffer_bytes("cpu") >= min(4 * cache, devices.MAX_BUFFER_BYTES)


def _small_default_buffer(monkeypatch, tmp_path, bytes_=4 * 4096 * 8):
    """memory_bandwidth's default path on a tiny buffer, timed by a fake clock, its file under tmp_path."""
    monkeypatch.setenv("LLMLAB_BANDWIDTH_FILE", str(tmp_path / "bandwidth.json"))
    monkeypatch.setattr(devices, "bandwidth_buffer_bytes", lambda device=None: bytes_)
    shapes = []

    def fake_timed(fn, device, repeats):
        shapes.append(tuple(fn().shape))
        s = tuple(0.001 * (1 + i) for i in range(repeats))
        return devices.Timing(s, min(s), statistics.median(s))

    monkeypatch.setattr(devices, "timed", fake_timed)
    return shapes


def test_memory_bandwidth_reads_the_default_buffer_and_reuses_the_result(monkeypatch, tmp_path):
    """One measurement per machine, device, thread count and buffer, kept in a small JSON file: a second call
    (another page of the build) gets the same numbers back, marked reused; reuse=False measures again."""
    shapes = _small_default_buffer(monkeypatch, tmp_path)
    first = devices.memory_bandwidth("cpu", repeats=3)
    assert shapes == [(), (8,), (8, 1)]                          # an (8, 4096) float32 buffer: 8 x 16 KiB
    assert first.buffer_bytes == 8 * 4 * 4096 and not first.reused
    assert first.cache_bytes == devices.last_level_cache_bytes("cpu")
    assert (tmp_path / "bandwidth.json").is_file()
    again = devices.memory_bandwidth("cpu", repeats=3)
    assert again.reused and len(shapes) == 3                     # nothing was timed the second time
    assert dataclasses.replace(again, reused=False) == first     # the same numbers, bit for bit (JSON keeps floats)
    fresh = devices.memory_bandwidth("cpu", repeats=3, reuse=False)
    assert not fresh.reused and len(shapes) == 6


def test_a_reused_bandwidth_must_be_recent_and_from_the_same_setting(monkeypatch, tmp_path):
    import json

    shapes = _small_default_buffer(monkeypatch, tmp_path)
    devices.memory_bandwidth("cpu", repeats=2)
    path = tmp_path / "bandwidth.json"
    # another thread count is another measurement (one thread reaches less of the bandwidth)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(threads + 1)
        assert not devices.memory_bandwidth("cpu", repeats=2).reused
    finally:
        torch.set_num_threads(threads)
    assert devices.memory_bandwidth("cpu", repeats=2).reused
    # an old entry is measured again
    entries = json.loads(path.read_text())
    for entry in entries.values():
        entry["measured_at"] -= devices.REUSE_SECONDS + 1
    path.write_text(json.dumps(entries))
    assert not devices.memory_bandwidth("cpu", repeats=2).reused
    # a damaged file is no error: measure, and write a good one
    path.write_text("{not json")
    assert not devices.memory_bandwidth("cpu", repeats=2).reused
    assert devices.memory_bandwidth("cpu", repeats=2).reused
    # a file that cannot be written is no error either: nothing is reused
    monkeypatch.setenv("LLMLAB_BANDWIDTH_FILE", str(path / "under_a_file.json"))
    assert not devices.memory_bandwidth("cpu", repeats=2).reused
    assert not devices.memory_bandwidth("cpu", repeats=2).reused
    assert len(shapes) == 3 * 6


def test_the_bandwidth_file_defaults_to_the_llmlab_cache(monkeypatch, tmp_path):
    monkeypatch.delenv("LLMLAB_BANDWIDTH_FILE", raising=False)
    monkeypatch.setenv("LLMLAB_CACHE", str(tmp_path))
    assert devices.bandwidth_file() == tmp_path / "bandwidth.json"
    monkeypatch.setenv("LLMLAB_BANDWIDTH_FILE", str(tmp_path / "b.json"))
    assert devices.bandwidth_file() == tmp_path / "b.json"


def test_quantize_times_its_kernels_with_timed(monkeypatch):
    from llmlab import quantize

    calls = []
    real = quantize.timed
    monkeypatch.setattr(quantize, "timed", lambda *a, **k: calls.append(a[1:]) or real(*a, **k))
    kernel, times = quantize.pick_kernel("int8", 64, 64, "cpu")
    assert kernel in times and 0 < times[kernel] < float("inf")
    assert calls and all(device == torch.device("cpu") and repeats == 7 for device, repeats in calls)


# ------------------------------------------------------------------ the noise of a causal trace

def test_trace_reports_the_noise_it_used_and_rerunning_with_it_gives_its_corrupted_value(tiny):
    ids = _ids(1, 7, seed=5)
    top = int(tiny(ids)[0, -1].argmax())
    answer = lambda logits: logits[:, top].float()           # noqa: E731  (the metric: the top token's logit)
    trace = causal_trace(tiny, None, ids, answer, noise_positions=[1, -1], noise_scale=2.5, seed=3)
    assert trace.noise.shape == (2, tiny.config.d_model) and trace.noise.dtype == torch.float32
    assert trace.noise_positions == [1, 6] and trace.noise_scale == 2.5 and trace.seed == 3

    def add_noise(x):                              # the recipe TraceResult's docstring gives
        x = x.clone()
        x[:, trace.noise_positions] += trace.noise.to(x.device, x.dtype)
        return x
    with torch.no_grad(), hooks(tiny, {"hook_embed": add_noise}):
        logits = tiny(ids)
    # the trace's corrupted run and this one run the blocks on the same shapes with the same noise; the
    # trace ran the final norm and the head on the last position only (d_model terms each)
    assert_same_up_to_rounding(answer(logits[:, -1])[0], trace.corrupted, depth=2 * tiny.config.d_model)
    assert abs(trace.corrupted - trace.clean) > 0.01 * abs(trace.clean)   # the noise did change the answer

    # chapter 15 re-derived the recipe by hand; the stored noise is exactly that
    g = torch.Generator().manual_seed(3)
    spread = tiny.tok_embed.weight.float().std() * (tiny.tok_embed.scale or 1.0) * 2.5
    assert torch.equal(trace.noise, torch.randn(2, tiny.config.d_model, generator=g) * spread)
    # the trace multiplies the std by the two factors in float64, this in float32: two roundings
    assert_same_up_to_rounding(spread, trace.noise_std, depth=2)

    other = causal_trace(tiny, None, ids, top, corrupt=_ids(1, 7, seed=6))
    assert other.noise is None and other.noise_positions is None


# ------------------------------------------------------------------ one EOS normaliser, one length check

def test_eos_ids_takes_every_form_and_explains_bad_ones():
    assert eos_ids(None, 10) == []
    assert eos_ids(3, 10) == eos_ids(torch.tensor(3), 10) == [3]
    assert eos_ids([3, 5, 3], 10) == eos_ids((3, 5), 10) == eos_ids({5, 3}, 10) == eos_ids(torch.tensor([3, 5]), 10)
    with pytest.raises(ValueError, match="eos_token_id must be in 0..9; got 10"):
        eos_ids([3, 10], 10)
    with pytest.raises(TypeError, match="eos_token_id must be a whole number"):
        eos_ids("</s>", 10)
    with pytest.raises(TypeError, match="whole number"):
        eos_ids(2.0, 10)
    with pytest.raises(ValueError, match="eos_token_id is empty"):
        eos_ids([], 10)
    with pytest.raises(ValueError, match="0-D or 1-D"):
        eos_ids(torch.tensor([[1, 2]]), 10)


def test_every_decode_loop_takes_the_same_eos_forms(tiny):
    ids = _ids(1, 6, seed=8)
    free = generate(tiny, ids, 8)[0, 6:].tolist()
    k = next(k for k in range(1, 8) if free[k] not in free[:k])
    eos = free[k]                                         # the first new token not written before
    others = [t for t in range(V) if t not in free][:2]   # ids that never come: they change nothing
    for form in (eos, [others[0], eos], (eos,), torch.tensor([eos, others[1]])):
        out = generate(tiny, ids, 8, eos_token_id=form)
        assert out[0, 6:].tolist() == free[:k + 1]        # stopped at the first EOS, whichever form
        assert torch.equal(generate_lookup(tiny, ids, 8, eos_token_id=form), out)
        beam, _ = beam_search(tiny, ids, 8, num_beams=1, eos_token_id=form)
        assert torch.equal(beam, out)
    half = torch.arange(V // 2)                           # half the vocabulary ends a text: beams finish soon
    for seed in range(4):                                 # a search that stops early returns a finished text
        out, _ = beam_search(tiny, _ids(1, 6, seed=seed), 8, num_beams=2, eos_token_id=half)
        assert out.shape[1] < 6 + 8 and out[0, -1].item() < V // 2
        assert all(t >= V // 2 for t in out[0, 6:-1].tolist())
    for loop in (generate, generate_lookup, lambda *a, **k: beam_search(*a, num_beams=2, **k)):
        with pytest.raises(ValueError, match="eos_token_id must be in 0..96"):
            loop(tiny, ids, 4, eos_token_id=[1, V])


def test_every_decode_loop_gives_the_same_context_length_error(tiny):
    messages = set()
    for loop in (generate, generate_lookup, beam_search):
        with pytest.raises(ValueError, match="max_seq_len=64") as error:
            loop(tiny, _ids(1, 60), 10)
        messages.add(str(error.value))
    assert messages == {"prompt (60) + max_new_tokens (10) = 70 exceeds the model's context max_seq_len=64; "
                        "ask for fewer new tokens."}
    check_context_length(tiny, 60, 4)                    # exactly fits: no error


def test_generate_docstring_agrees_with_its_signature():
    import inspect

    assert inspect.signature(generate).parameters["temperature"].default is None
    assert "temperature=None (the default) or 0 is greedy" in generate.__doc__
    assert "beam_search" not in dir(llmlab.sampling)   # one import path: llmlab.beam_search
