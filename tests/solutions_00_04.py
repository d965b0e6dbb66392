"""Learner-style solutions, right and wrong, for the build-it exercise of chapter 2 (bpe_encode:
apply learned BPE merges, earliest-learned first). Written the way a learner would, apart from
llmlab's code and from the checker's own variants. tests/test_exercises.py runs them with every
other exercise; tests/test_chapters_00_04.py runs them against llmlab's tokenizer."""
from __future__ import annotations


def merge_everywhere(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def bpe_encode(ids, merges):
    ids = list(ids)
    while len(ids) >= 2:
        candidates = [pair for pair in zip(ids, ids[1:]) if pair in merges]
        if not candidates:
            break
        best = min(candidates, key=lambda pair: merges[pair])     # learned earliest
        ids = merge_everywhere(ids, best, merges[best])
    return ids


def bpe_encode_in_rank_order(ids, merges):
    # also right: every merge once, in the order learned (a merge never creates an earlier one)
    ids = list(ids)
    for pair, new_id in sorted(merges.items(), key=lambda item: item[1]):
        ids = merge_everywhere(ids, pair, new_id)
    return ids


def bpe_encode_leftmost(ids, merges):
    ids = list(ids)
    merged = True
    while merged:
        merged = False
        for i in range(len(ids) - 1):
            if (ids[i], ids[i + 1]) in merges:
                ids[i:i + 2] = [merges[(ids[i], ids[i + 1])]]
                merged = True
                break
    return ids


def bpe_encode_once(ids, merges):
    candidates = [pair for pair in zip(ids, ids[1:]) if pair in merges]
    if not candidates:
        return list(ids)
    best = min(candidates, key=lambda pair: merges[pair])
    return merge_everywhere(list(ids), best, merges[best])


def bpe_encode_one_sweep(ids, merges):
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) in merges:
            out.append(merges[(ids[i], ids[i + 1])])
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def bpe_encode_latest_first(ids, merges):
    ids = list(ids)
    while True:
        candidates = [pair for pair in zip(ids, ids[1:]) if pair in merges]
        if not candidates:
            return ids
        best = max(candidates, key=lambda pair: merges[pair])
        ids = merge_everywhere(ids, best, merges[best])


RIGHT = {"bpe_encode": bpe_encode}

WRONG = [
    ("bpe_encode", bpe_encode_leftmost, ["LEFTMOST", "EARLIEST"]),
    ("bpe_encode", bpe_encode_once, ["one round", "repeat"]),
    ("bpe_encode", bpe_encode_one_sweep, ["single pass"]),
    ("bpe_encode", bpe_encode_latest_first, ["LATEST", "smallest new id"]),
]
