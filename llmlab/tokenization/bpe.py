"""Byte-pair encoding, the core: count pairs, merge a pair, apply learned merges.

Chapter 2 builds BPE from these three functions:

>>> ids = [1, 2, 3, 1, 2]
>>> get_pair_counts(ids)
{(1, 2): 2, (2, 3): 1, (3, 1): 1}
>>> merge(ids, (1, 2), 4)
[4, 3, 4]

Training (``train.py``) repeats "count, pick the most frequent pair, merge" until the vocabulary
is big enough. Encoding (``apply_merges``) replays the learned merges on new text, earliest
learned merge first.
"""
from __future__ import annotations

import heapq
from typing import Callable, Hashable, Iterable, Optional


def get_pair_counts(ids: Iterable[int], counts: Optional[dict] = None, weight: int = 1) -> dict:
    """Count how often each adjacent pair occurs in ``ids``.

    >>> get_pair_counts([1, 2, 3, 1, 2])
    {(1, 2): 2, (2, 3): 1, (3, 1): 1}
    >>> get_pair_counts([7, 7, 7])          # overlapping pairs all count
    {(7, 7): 2}

    Pass ``counts`` to add into an existing dict, and ``weight`` when ``ids`` stands for a chunk
    that occurs ``weight`` times in the corpus (the trainer works on unique chunks).
    """
    counts = {} if counts is None else counts
    ids = list(ids)
    for pair in zip(ids, ids[1:]):
        counts[pair] = counts.get(pair, 0) + weight
    return counts


def merge(ids: list, pair: tuple, new_id: int) -> list:
    """Replace every non-overlapping occurrence of ``pair`` in ``ids`` by ``new_id``, left to right.

    >>> merge([1, 2, 3, 1, 2], (1, 2), 4)
    [4, 3, 4]
    >>> merge([7, 7, 7], (7, 7), 8)         # leftmost first: (7 7) 7 -> 8 7
    [8, 7]
    """
    out = []
    i = 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def apply_merges(ids: list, lookup: Callable[[tuple], Optional[tuple]]) -> list:
    """Encode one chunk: merge adjacent pairs, lowest rank first (leftmost on ties), until none apply.

    ``lookup((left, right))`` returns ``(rank, new_id)`` for a pair the tokenizer knows, else None.
    The rank is any comparable value: the merge's position in the merge list for GPT-2-style
    files, a (position, tie-break) tuple for Gemma.

    >>> merges = {(1, 2): (0, 4), (4, 3): (1, 5)}      # learned: 1 2 -> 4, then 4 3 -> 5
    >>> apply_merges([1, 2, 3, 1, 2], merges.get)
    [5, 4]

    This gives the same result as "find the best pair, ``merge`` it, repeat", but a heap of
    candidate pairs and a linked list of symbols make it O(n log n) instead of O(n^2), which
    matters for long chunks (a paragraph is one chunk for Gemma).
    """
    n = len(ids)
    if n < 2:
        return list(ids)
    ids = list(ids)                      # ids[i] is None once symbol i was merged into its left neighbour
    nxt = list(range(1, n)) + [-1]       # linked list over the surviving symbols
    prv = list(range(-1, n - 1))

    heap = []                            # entries: (rank, position, left id, right id, new id)

    def push(i: int) -> None:
        j = nxt[i]
        if i >= 0 and j >= 0:
            found = lookup((ids[i], ids[j]))
            if found is not None:
                heapq.heappush(heap, (found[0], i, ids[i], ids[j], found[1]))

    for i in range(n - 1):
        push(i)
    while heap:
        _, i, left, right, new_id = heapq.heappop(heap)
        j = nxt[i]
        if ids[i] != left or j < 0 or ids[j] != right:
            continue                     # stale: one of the two symbols has changed since the push
        ids[i], ids[j] = new_id, None    # symbol j is absorbed into symbol i
        nxt[i] = nxt[j]
        if nxt[j] >= 0:
            prv[nxt[j]] = i
        push(prv[i])                     # the new symbol forms new pairs with both neighbours
        push(i)
    return [t for t in ids if t is not None]


def count_and_pick(counts: dict, tie: Callable = lambda pair: pair) -> Optional[Hashable]:
    """The most frequent pair; ties go to the pair of smallest `tie(pair)` (by default the smallest
    pair), so training is deterministic.

    >>> count_and_pick({(5, 6): 3, (1, 9): 3, (0, 0): 1})
    (1, 9)
    """
    if not counts:
        return None
    return min(counts, key=lambda pair: (-counts[pair], tie(pair)))
