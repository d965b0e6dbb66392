"""Checks for the text-to-vectors exercises: BPE pair counts, merges and encoding (ch. 2), the embedding
lookup as a one-hot product and cosine similarity (ch. 3)."""
from __future__ import annotations

from collections import Counter

import torch
import torch.nn.functional as F

from llmlab.tokenization.bpe import merge
from llmlab.exercises.compare import expect_equal, expect_tensor, maybe
from llmlab.exercises.core import Learner, generator
from llmlab.exercises.results import Mistake
from llmlab.exercises.messages import say

BPE_CASES = [
    [1, 2, 3, 1, 2, 4],
    [5, 5, 5, 5],                     # overlapping pairs
    [104, 101, 108, 108, 111, 32, 104, 101, 108, 108, 111],  # "hello hello" as bytes
    [7],
    [],
]


def check_bpe_pair_counts(fn: Learner) -> str:
    """bpe_pair_counts(ids) -> dict {(a, b): count} of every adjacent pair: [1, 2, 3, 1, 2] ->
    {(1, 2): 2, (2, 3): 1, (3, 1): 1}."""
    from llmlab.tokenization.bpe import get_pair_counts as reference

    for ids in BPE_CASES:
        got = fn(ids, names=("ids",))
        if isinstance(got, dict):
            got = dict(got)  # a Counter is fine
        pairs = list(zip(ids, ids[1:]))
        expect_equal(fn, got, dict(reference(ids)), mistakes=[
            (say("the last pair is missing: a list of n ids has n - 1 adjacent pairs (zip(ids, ids[1:]), or "
             "range(len(ids) - 1))."), dict(Counter(pairs[:-1]))),
            (say("every pair has count 1: count how OFTEN each pair occurs (counts[pair] = counts.get(pair, 0) + 1)."),
             {p: 1 for p in pairs}),
            (say("overlapping pairs count separately: in [5, 5, 5] the pair (5, 5) occurs twice."),
             dict(Counter(pairs[::2]))),
        ])
    return say("counts every adjacent pair, overlapping ones included, on 5 hidden id lists (empty and one-id lists too).")


def check_bpe_merge(fn: Learner) -> str:
    """bpe_merge(ids, pair, new_id) -> a new list where every non-overlapping occurrence of `pair`,
    scanning left to right, is replaced by new_id: ([1, 2, 3, 1, 2], (1, 2), 99) -> [99, 3, 99]."""
    from llmlab.tokenization.bpe import merge as reference

    cases = [([1, 2, 3, 1, 2], (1, 2), 99), ([5, 5, 5], (5, 5), 7), ([1, 2, 1], (2, 1), 4),
             ([3, 4, 3, 4, 3], (3, 4), 9), ([1, 1, 2, 1], (1, 2), 6), ([8], (8, 8), 0)]
    for ids, pair, new_id in cases:
        original = list(ids)
        got = fn(ids, pair, new_id, names=("ids", "pair", "new_id"))
        expected = list(reference(list(ids), pair, new_id))
        expect_equal(fn, got, expected, mistakes=[
            (say("after a merge, skip BOTH tokens of the pair (i += 2): in [5, 5, 5] the pair (5, 5) merges once, "
             "giving [7, 5], because the middle 5 is used up."), _merge_step_one(ids, pair, new_id)),
            (say("the last token is missing: when the loop ends one position before the end, append the final id "
             "if it was not part of a merge."), expected[:-1]),
            (say("only the first occurrence was merged; replace EVERY occurrence of the pair."),
             _merge_first_only(ids, pair, new_id)),
        ])
        if ids != original:
            raise Mistake(say("{a} changed the input list; build and return a new list instead.", a=fn.last_call))
    return say("merges every non-overlapping occurrence left to right on 6 hidden cases.")


def _merge_step_one(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == tuple(pair):
            out.append(new_id)
        else:
            out.append(ids[i])
        i += 1
    return out


def _merge_first_only(ids, pair, new_id):
    for i in range(len(ids) - 1):
        if (ids[i], ids[i + 1]) == tuple(pair):
            return ids[:i] + [new_id] + ids[i + 2:]
    return list(ids)


def check_one_hot_embedding(fn: Learner) -> str:
    """one_hot_embedding(ids, table) -> one_hot(ids) @ table, i.e. the rows table[ids]:
    ids (B, T) LongTensor, table (V, d) float -> (B, T, d)."""
    g = generator(53)
    fn.error_hints = [
        ("shapes cannot be multiplied", say("the one-hot vectors need V = table.shape[0] entries "
         "(F.one_hot(ids, num_classes=table.shape[0])), and they multiply the table from the left: one_hot @ table.")),
        ("expected m1 and m2 to have the same dtype", say("F.one_hot returns integers; convert with .float() "
         "(or .to(table.dtype)) before the matrix product.")),
        ("expected scalar type", say("F.one_hot returns integers; convert with .float() before the matrix product.")),
        ("\"addmm_impl_cpu_\" not implemented for 'Long'", say("F.one_hot returns integers; convert with .float().")),
    ]
    for (B, T), V, d in [((1, 3), 5, 4), ((2, 4), 10, 6), ((1, 2), 7, 7)]:
        ids = torch.randint(0, V - 1, (B, T), generator=g)
        table = torch.randn(V, d, generator=g)
        got = fn(ids, table, names=("ids", "table"))
        one_hot = F.one_hot(ids, V).float()
        expect_tensor(fn, got, table[ids], mistakes=[
            (say("you returned the one-hot vectors themselves; multiply them by the table: one_hot @ table."), one_hot),
            (say("you multiplied by the transposed table; table is (V, d), so one_hot (.., V) @ table gives (.., d)."),
             maybe(lambda: one_hot @ table.T)),
            (say("the rows are off by one: ids index the table rows directly, starting at 0."), table[(ids + 1) % V]),
        ])
    return say("one-hot times the table equals the row lookup table[ids] on 3 hidden cases.")


def check_cosine_similarity(fn: Learner) -> str:
    """cosine_similarity(a, b) -> (N, M) matrix of a[i].b[j] / (|a[i]| |b[j]|), for a (N, d), b (M, d)."""
    g = generator(59)
    fn.error_hints = [("shapes cannot be multiplied", say("a is (N, d) and b is (M, d): the matrix of all pairs is "
                       "a_unit @ b_unit.T, which is (N, M)."))]
    for N, M, d in [(2, 3, 4), (4, 4, 8), (3, 5, 6)]:
        a, b = torch.randn(N, d, generator=g) * 3, torch.randn(M, d, generator=g) + 1
        got = fn(a, b, names=("a", "b"))
        an, bn = a / a.norm(dim=-1, keepdim=True), b / b.norm(dim=-1, keepdim=True)
        expect_tensor(fn, got, an @ bn.T, atol=1e-5, mistakes=[
            (say("the vectors were not normalised: this is the plain dot product. Divide each row by its length "
             "(a / a.norm(dim=-1, keepdim=True)) first."), a @ b.T),
            (say("only `a` was normalised; divide the rows of b by their lengths too."), an @ b.T),
            (say("only `b` was normalised; divide the rows of a by their lengths too."), a @ bn.T),
            (say("you normalised over the wrong dimension (the columns); each vector is a ROW: norm(dim=-1)."),
             (a / a.norm(dim=0, keepdim=True)) @ (b / b.norm(dim=0, keepdim=True)).T),
            (say("you compared rows pairwise (a[i] with b[i] only); the exercise asks for all pairs, an (N, M) "
             "matrix: a_unit @ b_unit.T."), F.cosine_similarity(a, b, dim=-1) if N == M else None),
        ])
    return say("the (N, M) cosine-similarity matrix on 3 hidden cases.")


def _encode_by_priority(ids, merges):
    from llmlab.tokenization.bpe import apply_merges

    return apply_merges(list(ids), lambda pair: (merges[pair], merges[pair]) if pair in merges else None)


def _encode_leftmost_first(ids, merges):
    ids = list(ids)
    while True:
        spot = next((i for i in range(len(ids) - 1) if (ids[i], ids[i + 1]) in merges), None)
        if spot is None:
            return ids
        ids = ids[:spot] + [merges[(ids[spot], ids[spot + 1])]] + ids[spot + 2:]


def _encode_latest_first(ids, merges):
    ids = list(ids)
    while True:
        present = [p for p in zip(ids, ids[1:]) if p in merges]
        if not present:
            return ids
        pair = max(present, key=merges.get)
        ids = merge(ids, pair, merges[pair])


def _encode_one_round(ids, merges):
    present = [p for p in zip(ids, ids[1:]) if p in merges]
    if not present:
        return list(ids)
    pair = min(present, key=merges.get)
    return merge(list(ids), pair, merges[pair])


def _encode_single_pass(ids, merges):
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) in merges:
            out.append(merges[(ids[i], ids[i + 1])])
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out



def _trained_case(text: str, n_merges: int):
    """A realistic case: merges learned from `text` by llmlab's trainer, and a chunk to encode."""
    from llmlab.tokenization import train_bpe

    trained = train_bpe(text, vocab_size=256 + n_merges, pattern="gpt4")
    merges = {step.pair: step.new_id for step in trained.merge_history}
    return merges


def check_bpe_encode(fn: Learner) -> str:
    """bpe_encode(ids, merges) -> the ids after applying the learned merges, earliest merge first:
    merges maps a pair to its new id, and a smaller new id was learned earlier (has priority).
    Repeat: among the adjacent pairs that have a merge, take the one learned earliest and merge every
    occurrence; stop when no adjacent pair has a merge.
    ([1, 2, 3, 1, 2], {(1, 2): 4, (4, 3): 5}) -> [5, 4]."""
    g = generator(61)
    words = ["lower", "newest", "tower", "flower", "lowest", "power"]
    text = " ".join(words[int(i)] for i in torch.randint(0, len(words), (60,), generator=g))
    learned = _trained_case(text, 12)
    cases = [
        ([1, 2, 3], {(1, 2): 10, (2, 3): 11}),             # earliest first, not latest
        ([1, 2, 3, 4], {(1, 2): 10, (3, 4): 11, (10, 11): 12}),   # merges of merges: keep going
        ([1, 2, 3], {(2, 3): 10, (1, 2): 11}),             # the right pair is learned first: priority
        ([1, 2, 3, 1, 2], {(1, 2): 4, (4, 3): 5}),
        ([1, 2, 1, 2], {(1, 2): 10, (10, 10): 11}),        # a merge of merges needs a second round
        ([7, 7, 7, 7, 7], {(7, 7): 8, (8, 8): 9}),
        ([5], {(5, 5): 6}),
        ([], {(1, 2): 3}),
        ([1, 3, 2], {(1, 2): 4}),                          # nothing to merge
    ]
    for word in ["lowest", "flower", "towers", "newer"]:
        cases.append((list((" " + word).encode("utf-8")), learned))
    for ids, merges in cases:
        original, merges_before = list(ids), dict(merges)
        got = fn(ids, merges, names=("ids", "merges"))
        expected = _encode_by_priority(ids, merges)
        expect_equal(fn, got, expected, mistakes=[
            (say("you merged the LEFTMOST pair that has a merge first. BPE applies the merge learned EARLIEST (the "
             "smallest new id) first, wherever it is in the sequence: in [1, 2, 3] with {(2, 3): 10, (1, 2): 11} "
             "the pair (2, 3) wins, giving [1, 10]."), _encode_leftmost_first(ids, merges)),
            (say("you applied the merge learned LATEST (the largest new id) first; priority goes to the earliest "
             "merge, the smallest new id: min(pairs, key=merges.get)."), _encode_latest_first(ids, merges)),
            (say("you stopped after one round of merging. A merge creates new pairs (in [1, 2, 1, 2], merging (1, 2) "
             "gives [10, 10], and (10, 10) has a merge too): repeat until no adjacent pair has a merge."),
             _encode_one_round(ids, merges)),
            (say("you made a single pass over the sequence. A merge creates new pairs that may have merges of their "
             "own, so repeat: pick the earliest-learned pair present, merge it everywhere, and look again until "
             "no adjacent pair has a merge."), _encode_single_pass(ids, merges)),
        ])
        if ids != original or merges != merges_before:
            raise Mistake(say("{a} changed its input; build and return a new list instead.", a=fn.last_call))
    return (say("applies the merges earliest-learned first, repeatedly, on {a} hidden cases, among them words "
                "encoded with merges learned by llmlab's trainer.", a=len(cases)))
