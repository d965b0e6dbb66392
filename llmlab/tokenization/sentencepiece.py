"""SentencePiece-style BPE: Gemma 3 (and Llama 2, Mistral before v3).

Three differences from byte-level BPE:

1. It works on characters, not bytes. A space is written "▁" (U+2581), so "▁the" is " the".
2. A character that is not in the vocabulary falls back to its UTF-8 bytes, each a token
   "<0xNN>": "𝔸" (not in a vocabulary) -> <0xF0> <0x9D> <0x94> <0xB8>.
3. There is no regex pre-split: everything between two special/added tokens is one "word", and
   merges may cross spaces. The merge order comes from the vocabulary itself: two adjacent
   pieces merge if their concatenation is a piece, and the piece with the best priority merges
   first. For Gemma the priority is the token id (a lower id merges earlier); this is how
   ``transformers`` rebuilds Gemma's merges from a GGUF file, which carries none.

With Gemma 3's vocabulary:

>>> [tok.id_to_piece(i) for i in tok.encode("Hello world", add_special_tokens=False)]  # doctest: +SKIP
['Hello', '▁world']
"""
from __future__ import annotations

from llmlab.tokenization.base import Tokenizer
from llmlab.tokenization.bpe import apply_merges

SPACE = "\u2581"                                  # "▁", SentencePiece's visible space


class SentencePieceBPE(Tokenizer):
    """pieces: id -> piece as the vocabulary spells it ("▁the", "<0x0A>", "<bos>").
    ranks: id -> merge priority of that piece, lower merges first (default: the id, as for Gemma;
        minus the SentencePiece score for Llama 2). Between two ways to build the same piece, the
        longer left part wins, as in ``transformers``.
    merges: optional explicit [(left id, right id), ...] best first (a tokenizer.json may list
        them); when given they replace the vocabulary-derived order.
    """

    def __init__(self, pieces: list, special_tokens: dict | None = None, ranks: list | None = None,
                 merges: list | None = None, **kwargs):
        self.pieces = list(pieces)
        self.piece_to_id = dict(zip(self.pieces, range(len(self.pieces))))
        try:
            self.byte_ids = [self.piece_to_id[f"<0x{b:02X}>"] for b in range(256)]
        except KeyError as missing:
            raise ValueError(f"A SentencePiece vocabulary with byte fallback needs the 256 pieces <0x00>..<0xFF>; "
                             f"{missing} is missing.") from None
        # What each piece stands for: "▁the" -> b" the", "<0x0A>" -> b"\n", special/added: their text.
        joined = "\0".join(self.pieces)               # one pass over all pieces instead of 262k small ones
        token_bytes = joined.replace(SPACE, " ").encode("utf-8").split(b"\0")
        if len(token_bytes) != len(self.pieces):       # some piece contains a NUL: do it one by one
            token_bytes = [p.replace(SPACE, " ").encode("utf-8") for p in self.pieces]
        for b, i in enumerate(self.byte_ids):
            token_bytes[i] = bytes([b])
        for t, i in {**(special_tokens or {}), **(kwargs.get("added_tokens") or {})}.items():
            token_bytes[i] = t.encode("utf-8")
        super().__init__(token_bytes, special_tokens or {}, **kwargs)
        self.ranks = list(ranks) if ranks is not None else None
        self.merges = [tuple(m) for m in merges] if merges is not None else None
        if self.merges is not None:
            self._explicit = {(a, b): (rank, self.piece_to_id[self.pieces[a] + self.pieces[b]])
                              for rank, (a, b) in reversed(list(enumerate(self.merges)))}

    def _encode_ordinary(self, text: str) -> list:
        """Spaces -> "▁", characters -> pieces (or byte pieces), then merges."""
        symbols = []
        for ch in text.replace(" ", SPACE):
            token_id = self.piece_to_id.get(ch)
            if token_id is None:
                symbols.extend(self.byte_ids[b] for b in ch.encode("utf-8"))   # byte fallback
            else:
                symbols.append(token_id)
        return apply_merges(symbols, self._lookup)

    def _lookup(self, pair: tuple):
        """(rank, new id) if the two pieces may merge, else None."""
        if self.merges is not None:
            return self._explicit.get(pair)
        left, right = self.pieces[pair[0]], self.pieces[pair[1]]
        new_id = self.piece_to_id.get(left + right)
        if new_id is None:
            return None
        priority = new_id if self.ranks is None else self.ranks[new_id]
        # transformers' order: priority, then the longer left part, then the longer right part, then the id
        return (priority, -len(left), -len(right), new_id), new_id

    def id_to_piece(self, token_id: int) -> str:
        """The token as the vocabulary spells it ("▁world")."""
        return self.pieces[token_id]

    def to_dict(self) -> dict:
        return dict(kind="sentencepiece", pieces=self.pieces, ranks=self.ranks,
                    merges=None if self.merges is None else [list(m) for m in self.merges])

    @classmethod
    def from_dict(cls, d: dict) -> "SentencePieceBPE":
        return cls(d["pieces"], d.get("special_tokens"), ranks=d.get("ranks"), merges=d.get("merges"),
                   added_tokens=d.get("added_tokens"), bos_token_id=d.get("bos_token_id"),
                   eos_token_id=d.get("eos_token_id"), add_bos=d.get("add_bos", False),
                   chat_template=d.get("chat_template"), system_prompt=d.get("system_prompt"),
                   stop_token_ids=d.get("stop_token_ids"))
