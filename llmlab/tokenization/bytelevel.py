"""Byte-level BPE: GPT-2, SmolLM2, Llama 3, Qwen2 and the tokenizers you train in chapter 2.

Text -> UTF-8 bytes -> one starting token per byte -> merges. Any string can be encoded (there
are only 256 bytes) and nothing is ever "unknown".

    "héllo"  ->  bytes 68 c3 a9 6c 6c 6f  ->  6 byte tokens  ->  merges  ->  "h" "é" "llo" (say)

Files spell each byte as a printable character (GPT-2's byte alphabet: the space byte is "Ġ",
newline is "Ċ"), so "Ġthe" in a vocabulary means the bytes of " the".
"""
from __future__ import annotations

from llmlab.tokenization.base import Tokenizer
from llmlab.tokenization.bpe import apply_merges
from llmlab.tokenization.patterns import pre_split, resolve_patterns


def bytes_to_unicode() -> dict:
    """GPT-2's byte alphabet: byte -> a printable character standing for it.

    Printable bytes stand for themselves; the other 68 (control characters, space, ...) are
    moved to characters 256, 257, ... in byte order.

    >>> alphabet = bytes_to_unicode()
    >>> alphabet[ord("a")], alphabet[ord(" ")], alphabet[ord("\\n")]
    ('a', 'Ġ', 'Ċ')
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    alphabet = {b: chr(b) for b in printable}
    for b in range(256):
        if b not in alphabet:
            alphabet[b] = chr(256 + len(alphabet) - len(printable))
    return dict(sorted(alphabet.items()))


BYTE_TO_CHAR = bytes_to_unicode()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}


def spell(data: bytes) -> str:
    """Bytes in GPT-2's alphabet: spell(b" the") == "Ġthe"."""
    return "".join(BYTE_TO_CHAR[b] for b in data)


_UNSPELL = str.maketrans({c: chr(b) for b, c in BYTE_TO_CHAR.items()})   # "Ġ" -> "\x20", for speed


def unspell(token: str) -> bytes:
    """The inverse of ``spell``: unspell("Ġthe") == b" the". A character outside the alphabet
    (some files store a few tokens as plain text) stands for its own UTF-8 bytes."""
    try:
        return token.translate(_UNSPELL).encode("latin-1")      # every char is now one byte value
    except UnicodeEncodeError:
        return b"".join(bytes([CHAR_TO_BYTE[c]]) if c in CHAR_TO_BYTE else c.encode("utf-8") for c in token)


class ByteLevelBPE(Tokenizer):
    """Regex pre-split + byte-level BPE.

    token_bytes: id -> bytes (special and added tokens: their UTF-8 text).
    merges: [(left id, right id), ...] in the order they were learned; merge k joins the two
        tokens into the token whose bytes are their concatenation, and earlier merges win.
    patterns: a pattern name from ``patterns.PATTERNS`` ("gpt2", "gpt4", "llama3", "smollm", ...),
        a regex, or a list of them.
    """

    def __init__(self, token_bytes: list, merges: list, patterns="gpt2", special_tokens: dict | None = None,
                 **kwargs):
        super().__init__(list(token_bytes), special_tokens or {}, **kwargs)
        self.patterns = resolve_patterns(patterns)
        self.merges = [tuple(pair) for pair in merges]
        id_of_bytes = {b: i for i, b in enumerate(self.token_bytes) if i not in self.whole_tokens}
        # byte value -> starting token id. SmolLM2 has no token for 21 bytes (rare control characters
        # and bytes that never occur in UTF-8); like the reference `tokenizers`, such bytes are dropped.
        self.byte_ids = [id_of_bytes.get(bytes([b])) for b in range(256)]
        if sum(i is None for i in self.byte_ids[ord("!"):ord("~") + 1]):
            raise ValueError("A byte-level vocabulary needs a token for every byte (at least every printable "
                             "ASCII byte); this one lacks some. Is this a byte-level BPE file?")
        self.ranks = {}                                                    # (left, right) -> (rank, new id)
        for rank, (a, b) in enumerate(self.merges):
            joined = self.token_bytes[a] + self.token_bytes[b]
            if joined not in id_of_bytes:
                raise ValueError(f"Merge {rank} ({spell(self.token_bytes[a])!r} + {spell(self.token_bytes[b])!r}) "
                                 "makes a token that is not in the vocabulary: the file is inconsistent.")
            self.ranks.setdefault((a, b), (rank, id_of_bytes[joined]))
        self._cache = {}                                                   # chunk -> ids (chunks repeat a lot)

    def _encode_ordinary(self, text: str) -> list:
        """Pre-split, then BPE inside each chunk.

        >>> tok._encode_ordinary("Hello world")  # SmolLM2   # doctest: +SKIP
        [19556, 905]
        """
        ids = []
        for chunk in pre_split(text, self.patterns):
            chunk_ids = self._cache.get(chunk)
            if chunk_ids is None:
                chunk_ids = self.encode_chunk(chunk)
                if len(self._cache) < 200_000:
                    self._cache[chunk] = chunk_ids
            ids.extend(chunk_ids)
        return ids

    def encode_iterable(self, texts, allowed_special: str = "all"):
        """Ids of the strings of `texts` joined together, produced as the strings come: the same ids as
        ``encode("".join(texts), add_special_tokens=False)``, for a corpus too large to hold (a text file
        opened for reading yields its lines). Only the unfinished end of the text is kept: its last
        pre-split chunk and the whitespace before it, which the next string may change, and a possible
        start of a special token ("<|endof" before "text|>").

        >>> tok = ByteLevelBPE([bytes([b]) for b in range(256)], [], "gpt2", {"<|end|>": 256})
        >>> list(tok.encode_iterable(["hi <|e", "nd|>!"])) == tok.encode("hi <|end|>!")
        True
        """
        if isinstance(texts, (str, bytes)):
            raise TypeError("encode_iterable takes an iterable of strings (e.g. an open text file, or a list of "
                            "lines); for one string use encode(text).")
        whole = self.special_tokens if allowed_special == "all" else {}
        whole = {**whole, **self.added_tokens}
        starts = {token[:k] for token in whole for k in range(1, len(token))}   # proper prefixes of whole tokens
        longest = max(map(len, whole), default=1)
        carry = ""
        for text in texts:
            if not isinstance(text, str):
                raise TypeError(f"encode_iterable expects strings; got {type(text).__name__}. Open files in text "
                                f"mode (open(path, encoding='utf-8')).")
            carry += text
            if not carry:
                continue
            cut = self._unfinished_from(carry, allowed_special, starts, longest)
            if cut > 0:
                yield from self.encode(carry[:cut], add_special_tokens=False, allowed_special=allowed_special)
                carry = carry[cut:]
        if carry:
            yield from self.encode(carry, add_special_tokens=False, allowed_special=allowed_special)

    def _unfinished_from(self, text: str, allowed_special: str, starts: set, longest: int) -> int:
        """Where the part of `text` that more text could still change begins: its last pre-split chunk
        (or last whole token), or an earlier end that may be the start of a special token."""
        last, token_id = list(self._pieces(text, allowed_special))[-1]
        cut = len(text) - len(last)
        if token_id is None:
            # the last chunk, and the whitespace chunks before it: whitespace splits by what follows it
            # ("\n\n" before a letter is "\n", "\n"; at the end of a text it is one chunk "\n\n")
            chunks = pre_split(last, self.patterns)
            k = len(chunks) - 1
            while k > 0 and chunks[k - 1].isspace():
                k -= 1
            cut = len(text) - sum(map(len, chunks[k:]))
        for k in range(min(longest - 1, len(text)), 0, -1):
            if text[-k:] in starts:
                return min(cut, len(text) - k)
        return cut

    def encode_chunk(self, chunk: str) -> list:
        """BPE on one pre-split chunk: its bytes, then the learned merges, earliest first."""
        byte_ids = [self.byte_ids[b] for b in chunk.encode("utf-8")]
        return apply_merges([i for i in byte_ids if i is not None], self.ranks.get)

    def id_to_piece(self, token_id: int) -> str:
        """The token as the vocabulary file spells it ("Ġthe")."""
        if token_id in self.whole_tokens:
            return self.token_bytes[token_id].decode("utf-8")
        return spell(self.token_bytes[token_id])

    def to_dict(self) -> dict:
        return dict(kind="bytelevel", patterns=self.patterns,
                    tokens=[self.id_to_piece(i) for i in range(self.vocab_size)],
                    merges=[list(pair) for pair in self.merges])

    @classmethod
    def from_dict(cls, d: dict, **kwargs) -> "ByteLevelBPE":
        """Rebuild from spelled tokens (see ``to_dict``); special and added tokens are plain text."""
        whole = {**d.get("special_tokens", {}), **d.get("added_tokens", {})}
        whole_ids = {i: t for t, i in whole.items()}
        token_bytes = [whole_ids[i].encode("utf-8") if i in whole_ids else unspell(t) for i, t in enumerate(d["tokens"])]
        return cls(token_bytes, d["merges"], d["patterns"], d.get("special_tokens"),
                   added_tokens=d.get("added_tokens"), bos_token_id=d.get("bos_token_id"),
                   eos_token_id=d.get("eos_token_id"), add_bos=d.get("add_bos", False),
                   chat_template=d.get("chat_template"), system_prompt=d.get("system_prompt"),
                   stop_token_ids=d.get("stop_token_ids"), **kwargs)
