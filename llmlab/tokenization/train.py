"""Training a byte-level BPE tokenizer: learn merges from a corpus.

The whole idea fits in four lines (``train_bpe_naive``):

    ids = list(text.encode("utf-8"))                  # start from bytes: tokens 0..255
    for new_id in range(256, vocab_size):
        pair = most frequent pair in get_pair_counts(ids)
        ids = merge(ids, pair, new_id)                # the pair becomes one new token

``train_bpe`` learns exactly the same merges, much faster, with two tricks:

1. Unique chunks. The corpus is pre-split by a regex (merges never cross chunk boundaries) and
   each distinct chunk is stored once with its count: " the" may occur 30,000 times in 1 MB but is
   processed once.
2. Incremental counts. Merging (a, b) only changes pair counts inside chunks that contain
   (a, b). An index ``pair -> chunks containing it`` finds them, only their counts are updated,
   and a heap of (-count, pair) finds the next most frequent pair without scanning all pairs.
"""
from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from typing import NamedTuple

import regex

from llmlab.tokenization.bpe import count_and_pick, get_pair_counts, merge
from llmlab.tokenization.bytelevel import ByteLevelBPE
from llmlab.tokenization.patterns import pre_split, resolve_patterns


class MergeStep(NamedTuple):
    """One training step, for replaying training in a widget."""
    pair: tuple       # (left id, right id) that was merged
    new_id: int       # the id of the new token
    count: int        # how often the pair occurred in the corpus at that moment
    token: bytes      # the bytes the new token stands for


TIE_BREAKS = ("smallest", "greatest_bytes")


class _Greatest:
    """Orders byte pairs in reverse, so that a min-heap pops the lexicographically greatest first."""
    __slots__ = ("key",)

    def __init__(self, key):
        self.key = key

    def __lt__(self, other):
        return self.key > other.key

    def __eq__(self, other):
        return self.key == other.key


def _tie_key(tie_break: str, token_bytes: list):
    """Among pairs of equal count, which merges first: the one with the smallest key.
    "smallest": the pair of smallest ids (llmlab's convention: the first bytes in byte order, and older
    tokens before newer ones). "greatest_bytes": the pair whose bytes are greatest, compared as
    (bytes of the left token, bytes of the right token), as GPT-2's trainer and Stanford CS336's do."""
    if tie_break not in TIE_BREAKS:
        raise ValueError(f"tie_break must be one of {TIE_BREAKS}; got {tie_break!r}.")
    if tie_break == "smallest":
        return lambda pair: pair
    return lambda pair: _Greatest((token_bytes[pair[0]], token_bytes[pair[1]]))


def _unique_chunks(text: str, patterns: list, special_tokens: list) -> tuple:
    """Pre-split the corpus -> (chunks as lists of byte values, how often each occurs).

    >>> _unique_chunks("ab ab", [r" ?\\p{L}+"], [])
    ([[97, 98], [32, 97, 98]], [1, 1])
    """
    pieces = [text]
    if special_tokens:                   # special tokens are never learned from: cut them out
        pieces = regex.split("|".join(regex.escape(s) for s in special_tokens), text)
    counts = Counter()
    for piece in pieces:
        counts.update(pre_split(piece, patterns))
    return [list(chunk.encode("utf-8")) for chunk in counts], list(counts.values())


def _check(text, vocab_size: int, special_tokens: list) -> int:
    """Validate the arguments; return how many merges to learn."""
    if not isinstance(text, str):
        raise TypeError(f"train_bpe() expects the corpus as one str, got {type(text).__name__}.")
    n_merges = vocab_size - 256 - len(special_tokens)
    if n_merges < 0:
        raise ValueError(f"vocab_size={vocab_size} is too small: the 256 byte tokens and "
                         f"{len(special_tokens)} special tokens alone need {256 + len(special_tokens)}.")
    return n_merges


def _finish(history: list, patterns: list, special_tokens: list) -> ByteLevelBPE:
    """Wrap learned merges into a tokenizer: ids 0..255 are the bytes, then merges, then special tokens."""
    token_bytes = [bytes([b]) for b in range(256)] + [step.token for step in history]
    special = {s: len(token_bytes) + k for k, s in enumerate(special_tokens)}
    token_bytes += [s.encode("utf-8") for s in special_tokens]
    tok = ByteLevelBPE(token_bytes, [step.pair for step in history], patterns, special)
    tok.merge_history = history
    return tok


def train_bpe(text: str, vocab_size: int, pattern="gpt4", special_tokens=(), verbose: bool = False,
              tie_break: str = "smallest") -> ByteLevelBPE:
    """Learn a byte-level BPE vocabulary of ``vocab_size`` tokens (bytes + merges + special tokens).

    pattern: the pre-split regex, a name from ``PATTERNS`` ("gpt2", "gpt4", ...) or a regex.
    special_tokens: e.g. ["<|endoftext|>"]; they get the last ids and are never split.
    Returns a tokenizer whose ``merge_history`` lists every ``MergeStep`` in order. Training stops
    early if the corpus runs out of pairs. Ties go to the smallest pair of ids (deterministic);
    tie_break="greatest_bytes" breaks them as GPT-2's trainer and Stanford CS336 do instead (the
    lexicographically greatest pair of bytes), which reproduces their merge lists.

    >>> tok = train_bpe("aaabdaaabac", 256 + 3, pattern=r".+")   # one chunk; 97 = "a", 98 = "b"
    >>> [(s.pair, s.new_id, s.count) for s in tok.merge_history]   # "aa", then "ab", then "aaab"
    [((97, 97), 256, 4), ((97, 98), 257, 2), ((256, 257), 258, 2)]
    """
    special_tokens = list(special_tokens)
    n_merges = _check(text, vocab_size, special_tokens)
    patterns = resolve_patterns(pattern)
    words, freqs = _unique_chunks(text, patterns, special_tokens)
    history, token_bytes = [], [bytes([b]) for b in range(256)]
    tie = _tie_key(tie_break, token_bytes)

    counts, where = {}, defaultdict(set)          # pair -> count in corpus; pair -> chunks containing it
    for w, word in enumerate(words):
        for pair in zip(word, word[1:]):
            counts[pair] = counts.get(pair, 0) + freqs[w]
            where[pair].add(w)
    heap = [(-c, tie(pair), pair) for pair, c in counts.items()]
    heapq.heapify(heap)

    for new_id in range(256, 256 + n_merges):
        while heap and counts.get(heap[0][2]) != -heap[0][0]:
            heapq.heappop(heap)                   # stale entry: that pair's count has changed since
        if not heap:
            break                                 # no pairs left: every chunk is a single token
        count, pair = -heap[0][0], heap[0][2]
        a, b = pair
        token_bytes.append(token_bytes[a] + token_bytes[b])   # the new token's bytes (the tie-break reads them)
        changed = set()
        for w in where.pop(pair):
            word, freq = words[w], freqs[w]
            new_word = merge(word, pair, new_id)
            if len(new_word) == len(word):
                continue                          # stale index entry: the pair left this chunk earlier
            # Only pairs touching a, b or the new token can change: take the chunk's old ones out
            # of the counts and put its new ones in.
            for p in zip(word, word[1:]):
                if a in p or b in p:
                    counts[p] -= freq
                    changed.add(p)
            for p in zip(new_word, new_word[1:]):
                if new_id in p:
                    where[p].add(w)
                elif not (a in p or b in p):
                    continue
                counts[p] = counts.get(p, 0) + freq
                changed.add(p)
            words[w] = new_word
        for p in changed:
            if counts[p] > 0:
                heapq.heappush(heap, (-counts[p], tie(p), p))
            else:
                del counts[p]
        history.append(MergeStep(pair, new_id, count, token_bytes[-1]))
        if verbose and (new_id - 255) % 500 == 0:
            print(f"merge {new_id - 255}/{n_merges}: {pair} -> {new_id} {token_bytes[-1]!r} ({count} times)")
    return _finish(history, patterns, special_tokens)


def train_bpe_naive(text: str, vocab_size: int, pattern="gpt4", special_tokens=(),
                    tie_break: str = "smallest") -> ByteLevelBPE:
    """The same training, recounting every pair after every merge (slow; for teaching and the benchmark).

    Uses the same unique chunks as ``train_bpe`` and the same tie-break, so it learns the same merges.
    """
    special_tokens = list(special_tokens)
    n_merges = _check(text, vocab_size, special_tokens)
    patterns = resolve_patterns(pattern)
    words, freqs = _unique_chunks(text, patterns, special_tokens)
    history, token_bytes = [], [bytes([b]) for b in range(256)]
    tie = _tie_key(tie_break, token_bytes)
    for new_id in range(256, 256 + n_merges):
        counts = {}
        for word, freq in zip(words, freqs):
            get_pair_counts(word, counts, weight=freq)
        pair = count_and_pick(counts, tie)
        if pair is None:
            break
        words = [merge(word, pair, new_id) for word in words]
        token_bytes.append(token_bytes[pair[0]] + token_bytes[pair[1]])
        history.append(MergeStep(pair, new_id, counts[pair], token_bytes[-1]))
    return _finish(history, patterns, special_tokens)
