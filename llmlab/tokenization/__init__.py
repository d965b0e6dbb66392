"""Tokenizers from scratch (chapter 2): BPE training, byte-level BPE, SentencePiece BPE, chat templates.

    from llmlab.tokenization import tokenizer_from_gguf, train_bpe
    tok = tokenizer_from_gguf(path)            # SmolLM2 / Gemma 3, ids identical to transformers
    ids = tok.encode("Hello world")
    tok.decode(ids)                            # 'Hello world'
    ids, mask = tok.encode_batch(["Hi", "Hello world"])   # (B, T) each, left-padded (mask 0 = padding)
    tok.tokens_with_spans("Hello world")       # [(id, 'Hello', (0, 5)), (id, ' world', (5, 11))]
    mine = train_bpe(text, vocab_size=512)     # mine.merge_history replays training step by step
"""
from llmlab.tokenization.base import Tokenizer, pad_left
from llmlab.tokenization.bpe import apply_merges, get_pair_counts, merge
from llmlab.tokenization.bytelevel import ByteLevelBPE, bytes_to_unicode
from llmlab.tokenization.loading import load_tokenizer, tokenizer_from_gguf, tokenizer_from_json
from llmlab.tokenization.patterns import PATTERNS, pre_split
from llmlab.tokenization.sentencepiece import SentencePieceBPE
from llmlab.tokenization.train import MergeStep, train_bpe, train_bpe_naive

__all__ = [
    "Tokenizer", "pad_left", "ByteLevelBPE", "SentencePieceBPE", "get_pair_counts", "merge", "apply_merges",
    "bytes_to_unicode", "tokenizer_from_gguf", "tokenizer_from_json", "load_tokenizer", "PATTERNS",
    "pre_split", "train_bpe", "train_bpe_naive", "MergeStep",
]
