"""Chapters 0-4: the bpe_encode exercise (ch. 2) against llmlab's own tokenizer, and the checker
against right and wrong learner solutions that the exercise table does not list."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from solutions_00_04 import bpe_encode, bpe_encode_in_rank_order  # noqa: E402

from llmlab.exercises import check  # noqa: E402
from llmlab.tokenization import PATTERNS, pre_split, train_bpe  # noqa: E402

CORPUS = ("the lower tower is lower than the newest tower. the newer tower is the lowest. "
          "a tower, a flower, a power: lower, newer, lowest, newest. 今天天气很好。明天天气也很好。") * 3


def test_a_right_encode_reproduces_llmlab_tokenizer_chunk_by_chunk():
    trained = train_bpe(CORPUS, vocab_size=256 + 40, pattern="gpt4")
    merges = {step.pair: step.new_id for step in trained.merge_history}
    for text in ["the lowest flower", "towering newness", "天气预报", "a power tower"]:
        ids = [i for chunk in pre_split(text, PATTERNS["gpt4"])
               for i in bpe_encode(list(chunk.encode("utf-8")), merges)]
        assert ids == trained.encode(text), text


def test_every_merge_once_in_learned_order_is_also_right():
    # a merge never creates a pair that was learned before it, so one sweep over the merge list works
    assert check("bpe_encode", bpe_encode_in_rank_order, quiet=True).passed
