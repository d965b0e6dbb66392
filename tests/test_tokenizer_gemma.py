"""Gemma 3's SentencePiece BPE read from its GGUF file: ids identical to transformers' tokenizer.

The GGUF reader (~15 s for 262k tokens) and the reference tokenizer are loaded once per module.
"""
import json
import os
import time

import pytest

from llmlab.tokenization import SentencePieceBPE, load_tokenizer, tokenizer_from_gguf

with open(os.path.join(os.path.dirname(__file__), "data", "tokenizer_corpus.json"), encoding="utf-8") as f:
    CORPUS = json.load(f)


pytestmark = pytest.mark.slow                    # loads the real Gemma 3 tokenizer with transformers (~1 min)


@pytest.fixture(scope="module")
def path():
    import llmlab
    return llmlab.gguf_path("gemma3-270m")       # joined once into $LLMLAB_CACHE/gguf


@pytest.fixture(scope="module")
def ref(path):
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path))


@pytest.fixture(scope="module")
def tok(path):
    import gguf
    reader = gguf.GGUFReader(path)               # parsed once; the model loader passes its reader the same way
    return tokenizer_from_gguf(reader)


def test_metadata(tok, ref):
    assert isinstance(tok, SentencePieceBPE)
    assert tok.vocab_size == len(ref) == 262144
    assert (tok.bos_token_id, tok.eos_token_id) == (ref.bos_token_id, ref.eos_token_id) == (2, 1)
    assert tok.add_bos
    assert len(tok.special_tokens) + len(tok.added_tokens) == len(ref.backend_tokenizer.get_added_tokens_decoder())


def one_bos(ids: list) -> list:
    """The reference's ids under llmlab's one-BOS rule: a text that starts with <bos> gets no second one."""
    return ids[1:] if ids[:2] == [2, 2] else ids


@pytest.mark.parametrize("add_special_tokens", [True, False])
def test_ids_equal_reference_on_corpus(tok, ref, add_special_tokens):
    mismatches = [text for text in CORPUS
                  if tok.encode(text, add_special_tokens=add_special_tokens)
                  != one_bos(ref.encode(text, add_special_tokens=add_special_tokens))]
    assert mismatches == []
    assert any(text.startswith("<bos>") for text in CORPUS)      # the rule is exercised


def test_bos_handling(tok, ref):
    assert tok.encode("") == ref.encode("") == [2]             # Gemma adds <bos> by default
    assert tok.encode("", add_special_tokens=False) == []
    assert tok.encode("Hello world") == [2, 9259, 1902]
    # One BOS: a text that starts with it gets no second one (the reference would double it).
    assert ref.encode("<bos>Hi")[:2] == [2, 2]
    assert tok.encode("<bos>Hi") == tok.encode("Hi") == [2, 10979]
    plain = tok.encode("<bos>Hi", add_special_tokens=False, allowed_special="none")   # "<bos>" as text
    assert 2 not in plain and tok.encode("<bos>Hi", allowed_special="none") == [2] + plain
    assert tok.encode("Hi<bos>") == [2, 10979, 2]                             # BOS only counts at the start
    assert [t for _, t, _ in tok.tokens_with_spans("<bos>Hi", add_special_tokens=True)] == ["<bos>", "Hi"]
    ids, _ = tok.encode_batch(["<bos>Hi", "Hi"])
    assert ids.tolist() == [[2, 10979], [2, 10979]]


def test_round_trip_where_reference_round_trips(tok, ref):
    for text in CORPUS:
        ids = tok.encode(text)
        assert tok.decode(ids) == ref.decode(ids)
        if ref.decode(ref.encode(text), skip_special_tokens=True) == text:
            assert tok.decode(ids, skip_special_tokens=True) == text, text
            assert tok.decode(tok.encode(text, add_special_tokens=False)) == text


def test_byte_fallback_and_spaces(tok):
    ids = tok.encode("𓀀", add_special_tokens=False)          # not in the vocabulary: 4 byte pieces
    assert [tok.id_to_piece(i) for i in ids] == ["<0xF0>", "<0x93>", "<0x80>", "<0x80>"]
    assert tok.decode(ids) == "𓀀"
    assert tok.decode(ids[:2]) == "\ufffd"                     # half a character: replacement char
    assert [tok.id_to_piece(i) for i in tok.encode("  a b", add_special_tokens=False)] == ["▁▁", "a", "▁b"]


def test_special_token_options(tok, ref):
    backend = ref.backend_tokenizer
    backend.encode_special_tokens = True
    try:
        for t in CORPUS:
            assert tok.encode(t, add_special_tokens=False, allowed_special="none") == \
                backend.encode(t, add_special_tokens=False).ids
    finally:
        backend.encode_special_tokens = False
    text = "<start_of_turn>user\nHi<end_of_turn>"
    assert tok.encode(text, add_special_tokens=False)[0] == tok.special_tokens["<start_of_turn>"]
    with pytest.raises(ValueError, match="<start_of_turn>"):
        tok.encode(text, allowed_special="raise")


def test_spans_match_reference_offsets(tok, ref):
    for text in CORPUS:
        spans = [span for _, _, span in tok.tokens_with_spans(text)]
        assert spans == ref.backend_tokenizer.encode(text, add_special_tokens=False).offsets, text
    first = tok.tokens_with_spans("Hello world", add_special_tokens=True)
    assert first == [(2, "<bos>", (0, 0)), (9259, "Hello", (0, 5)), (1902, " world", (5, 11))]


def test_chat_template(tok):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "2+2?"}]
    expected = ("<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"
                "<start_of_turn>user\n2+2?<end_of_turn>\n<start_of_turn>model\n")
    assert tok.apply_chat_template(messages) == expected
    ids = tok.apply_chat_template(messages, tokenize=True)
    assert ids[:2] == [2, tok.special_tokens["<start_of_turn>"]] and ids.count(2) == 1
    assert tok.encode(expected) == ids                   # the text of the template encodes to the same ids


def test_as_ids_gives_one_bos_with_either_tokenizer(tok, ref):
    """llmlab.as_ids on a chat prompt: one BOS with llmlab's tokenizer and with transformers' (whose
    encode adds a second one, which as_ids drops)."""
    import dataclasses

    import llmlab
    from llmlab.config import ModelConfig
    from llmlab.model import Transformer

    model = Transformer(dataclasses.replace(ModelConfig.preset("tiny-llama"), vocab_size=262144)).eval()
    prompt = tok.apply_chat_template([{"role": "user", "content": "Hi"}])
    assert ref.encode(prompt)[:3] == [2, 2, 105]
    for tokenizer in (tok, ref):
        assert llmlab.as_ids(model, tokenizer, prompt)[0].tolist() == tok.apply_chat_template(
            [{"role": "user", "content": "Hi"}], tokenize=True)
    assert llmlab.as_ids(model, ref, "Hi")[0].tolist() == [2, 10979]     # a plain text keeps its one BOS


def test_stop_ids_end_a_chat_turn(tok, tmp_path):
    """A turn of Gemma's chat ends with <end_of_turn> (106), a text with <eos> (1): generation stops on both."""
    assert tok.stop_token_ids == (1, 106) and tok.eos_token_id == 1
    assert [tok.id_to_token(i) for i in tok.stop_token_ids] == ["<eos>", "<end_of_turn>"]
    tok.save(tmp_path)
    assert load_tokenizer(tmp_path).stop_token_ids == (1, 106)
    with pytest.raises(ValueError, match="alternate"):
        tok.apply_chat_template([{"role": "assistant", "content": "x"}])


def test_decode_errors(tok):
    with pytest.raises(ValueError, match="outside the vocabulary.*0..262143"):
        tok.decode([262144])
    with pytest.raises(TypeError, match="expects a str"):
        tok.encode(["a", "list"])


def test_save_and_fast_load(tok, tmp_path):
    tok.save(tmp_path)
    start = time.perf_counter()
    again = load_tokenizer(tmp_path)
    elapsed = time.perf_counter() - start
    print(f"load_tokenizer (Gemma, 262k pieces): {elapsed:.2f} s")
    assert [again.encode(t) for t in CORPUS] == [tok.encode(t) for t in CORPUS]
    assert again.decode(again.encode(CORPUS[-1])) == tok.decode(tok.encode(CORPUS[-1]))
