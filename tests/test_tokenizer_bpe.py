"""BPE from scratch: worked examples, training (fast == naive), 1 MB training, tokenizer.json parity."""
import json
import os

import pytest
from tokenizers import Regex, Tokenizer as HFTokenizer, decoders, models, pre_tokenizers, processors, trainers

from llmlab.tokenization import (PATTERNS, ByteLevelBPE, apply_merges, get_pair_counts, load_tokenizer, merge,
                                 pre_split, tokenizer_from_json, train_bpe, train_bpe_naive)
from llmlab.tokenization.patterns import LLAMA3
from script_loader import load_file

DATA = os.path.join(os.path.dirname(__file__), "data")
with open(os.path.join(DATA, "tokenizer_corpus.json"), encoding="utf-8") as f:
    CORPUS = json.load(f)


def _make_corpus(n_bytes):
    return load_file(os.path.join(DATA, "make_corpus.py")).make_corpus(n_bytes)


@pytest.fixture(scope="module")
def megabyte():
    return _make_corpus(1_000_000)


# ----- worked examples (the chapter shows these) -----
def test_get_pair_counts_and_merge_worked_examples():
    assert get_pair_counts([1, 2, 3, 1, 2]) == {(1, 2): 2, (2, 3): 1, (3, 1): 1}
    assert get_pair_counts([7, 7, 7]) == {(7, 7): 2}
    assert get_pair_counts([]) == {} and get_pair_counts([5]) == {}
    assert get_pair_counts([1, 2], {(1, 2): 3}, weight=10) == {(1, 2): 13}
    assert merge([1, 2, 3, 1, 2], (1, 2), 4) == [4, 3, 4]
    assert merge([7, 7, 7], (7, 7), 8) == [8, 7]
    assert merge([1, 3], (1, 2), 4) == [1, 3]


def test_apply_merges_equals_repeated_merge():
    merges = {(1, 2): (0, 4), (4, 3): (1, 5), (5, 5): (2, 6), (3, 3): (3, 7)}
    for ids in ([1, 2, 3, 1, 2, 3], [3, 3, 3, 1, 2], [1, 2, 3] * 5, [2, 1], []):
        expected = list(ids)
        for (pair, (_, new_id)) in sorted(merges.items(), key=lambda kv: kv[1][0]):
            expected = merge(expected, pair, new_id)
        assert apply_merges(ids, merges.get) == expected


def test_pre_split_patterns():
    assert pre_split("Hello world!!  123", PATTERNS["gpt2"]) == ["Hello", " world", "!!", " ", " 123"]
    assert pre_split("x 2024", PATTERNS["smollm"]) == ["x", " ", "2", "0", "2", "4"]
    assert pre_split("", [LLAMA3]) == []
    assert "".join(pre_split(CORPUS[-1], [LLAMA3])) == CORPUS[-1]


# ----- training -----
def test_fast_trainer_matches_naive_trainer():
    text = _make_corpus(20_000)
    fast = train_bpe(text, 256 + 200, special_tokens=["<|endoftext|>"])
    naive = train_bpe_naive(text, 256 + 200, special_tokens=["<|endoftext|>"])
    assert fast.merges == naive.merges
    assert [s.count for s in fast.merge_history] == [s.count for s in naive.merge_history]
    assert fast.vocab_size == 256 + 200 and fast.special_tokens == {"<|endoftext|>": 455}


def test_merge_history_replays_encoding():
    text = _make_corpus(20_000)
    tok = train_bpe(text, 400, pattern="gpt2")
    steps = tok.merge_history
    assert [s.new_id for s in steps] == list(range(256, 400))
    assert steps[0].count >= steps[-1].count
    for chunk in pre_split(text[:2000], tok.patterns):
        ids = list(chunk.encode("utf-8"))
        for step in steps:                          # replaying merges in order = encoding
            ids = merge(ids, step.pair, step.new_id)
        assert ids == tok.encode(chunk)
        assert tok.decode(ids) == chunk


def test_special_tokens_are_never_split_or_learned():
    text = "hello world<|endoftext|>" * 200
    tok = train_bpe(text, 300, special_tokens=["<|endoftext|>"])
    eot = tok.special_tokens["<|endoftext|>"]
    assert all(b"<|" not in s.token for s in tok.merge_history)
    ids = tok.encode("hi<|endoftext|>there")
    assert ids.count(eot) == 1 and tok.decode(ids) == "hi<|endoftext|>there"
    assert eot not in tok.encode("hi<|endoftext|>", allowed_special="none")
    with pytest.raises(ValueError, match="special token '<\\|endoftext\\|>'"):
        tok.encode("hi<|endoftext|>", allowed_special="raise")


def test_train_4096_on_a_megabyte_round_trips(megabyte, tmp_path):
    assert 900_000 <= len(megabyte.encode("utf-8")) <= 1_000_000
    tok = train_bpe(megabyte, 4096)
    assert tok.vocab_size == 4096 and len(tok.merge_history) == 4096 - 256
    ids = tok.encode(megabyte)
    assert tok.decode(ids) == megabyte
    assert len(ids) < len(megabyte.encode("utf-8")) / 2.5      # BPE compresses
    tok.save(tmp_path)
    again = load_tokenizer(tmp_path)
    sample = megabyte[:50_000]
    assert again.encode(sample) == tok.encode(sample)


def test_training_errors():
    with pytest.raises(ValueError, match="too small"):
        train_bpe("abc", 100)
    with pytest.raises(TypeError, match="str"):
        train_bpe(b"abc", 300)
    tok = train_bpe("ab", 1000)                     # runs out of pairs: stops early, still works
    assert len(tok.merge_history) == 1 and tok.decode(tok.encode("abab")) == "abab"


# ----- tokenizer.json written by the `tokenizers` library, read by llmlab -----
def _train_hf(pre_tokenizer, post_processor=None, vocab_size=700):
    tk = HFTokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizer
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|endoftext|>", "<|begin_of_text|>"])
    tk.train_from_iterator(CORPUS + [_make_corpus(30_000)], trainer)
    if post_processor is not None:
        tk.post_processor = post_processor
    return tk


BYTELEVEL_FLAVOURS = {
    "gpt2": lambda: _train_hf(pre_tokenizers.ByteLevel(add_prefix_space=False)),
    "llama3": lambda: _train_hf(
        pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3), behavior="isolated"),
                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", 1)])),
    "smollm2-hub": lambda: _train_hf(
        pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                 pre_tokenizers.ByteLevel(add_prefix_space=False)])),
}


@pytest.mark.parametrize("flavour", sorted(BYTELEVEL_FLAVOURS))
def test_tokenizer_json_matches_tokenizers_library(flavour, tmp_path):
    ref = BYTELEVEL_FLAVOURS[flavour]()
    ref.save(str(tmp_path / "tokenizer.json"))
    tok = tokenizer_from_json(tmp_path / "tokenizer.json")
    assert isinstance(tok, ByteLevelBPE) and tok.vocab_size == ref.get_vocab_size()
    for text in CORPUS:
        for add in (True, False):
            assert tok.encode(text, add_special_tokens=add) == ref.encode(text, add_special_tokens=add).ids, text
        ids = tok.encode(text)
        assert tok.decode(ids, skip_special_tokens=True) == ref.decode(ids)
    tok.save(tmp_path / "saved")
    again = load_tokenizer(tmp_path / "saved")
    assert [again.encode(t) for t in CORPUS] == [tok.encode(t) for t in CORPUS]


def test_not_a_tokenizer_file(tmp_path):
    (tmp_path / "notes.txt").write_text("just some text")
    (tmp_path / "other.json").write_text('{"hello": 1}')
    with pytest.raises(ValueError, match="not a tokenizer.json"):
        tokenizer_from_json(tmp_path / "notes.txt")
    with pytest.raises(ValueError, match="BPE tokenizer.json"):
        tokenizer_from_json(tmp_path / "other.json")
    with pytest.raises(FileNotFoundError, match="save"):
        load_tokenizer(tmp_path / "empty")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "llmlab_tokenizer.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="not a tokenizer saved by llmlab"):
        load_tokenizer(tmp_path / "bad")


def test_unsupported_tokenizer_json_fails_loudly(tmp_path):
    tk = HFTokenizer(models.BPE(unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()            # a word-level BPE, not byte-level
    tk.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=300, show_progress=False, special_tokens=["[UNK]"]))
    tk.save(str(tmp_path / "tokenizer.json"))
    with pytest.raises(ValueError, match="byte-level"):
        tokenizer_from_json(tmp_path / "tokenizer.json")
