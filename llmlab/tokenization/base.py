"""The Tokenizer base class: what every tokenizer in llmlab shares.

A subclass knows how to turn plain text into ids (``_encode_ordinary``) and which bytes each id
stands for (``token_bytes``). Everything else lives here: special tokens, the BOS token,
decoding, token spans for display, chat templates and saving.

    text ──split on special/added tokens──> pieces ──_encode_ordinary──> ids
    ids  ──token_bytes──> bytes ──UTF-8──> text
"""
from __future__ import annotations

import json
import os
import re

from llmlab.tokenization import chat

SAVE_NAME = "llmlab_tokenizer.json"  # the file `save(dir)` writes and `load_tokenizer(dir)` reads

# Special tokens that end a model's turn or its text, whichever vocabulary has them: ChatML's and
# Gemma's end of turn, GPT-2's and Llama 3's end of text, Llama 3's end of turn.
STOP_TOKENS = ("<|im_end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<|eot_id|>")


class Tokenizer:
    """Base class. Subclasses: ``ByteLevelBPE`` (GPT-2, SmolLM2, trained ones), ``SentencePieceBPE`` (Gemma).

    special_tokens: str -> id, control tokens such as "<bos>" or "<|im_start|>". Whether they are
        recognised inside user text is the ``allowed_special`` choice of ``encode``.
    added_tokens: str -> id, ordinary tokens that are always matched whole before BPE runs
        (Gemma's "\\n\\n" or "<b>"; none for GPT-2-style vocabularies).
    stop_token_ids: every id after which the model has finished (pass it to ``generate(...,
        eos_token_id=tok.stop_token_ids)``). Default: the EOS id and each of ``STOP_TOKENS`` in the
        vocabulary. Gemma: (1, 106), ``<eos>`` and ``<end_of_turn>``, which is what ends a chat turn;
        SmolLM2: (2, 0), ``<|im_end|>`` (also its EOS) and ``<|endoftext|>``.

    BOS, one rule: a text holds at most one. ``encode(text)`` prepends BOS (for models that expect it)
    unless the text already starts with the BOS token, as the text of ``apply_chat_template`` does
    for Gemma. So ``encode(apply_chat_template(messages))`` equals
    ``apply_chat_template(messages, tokenize=True)``.
    """

    def __init__(self, token_bytes: list, special_tokens: dict, added_tokens: dict | None = None,
                 bos_token_id: int | None = None, eos_token_id: int | None = None,
                 add_bos: bool = False, chat_template: str | None = None, system_prompt: str | None = None,
                 stop_token_ids=None):
        self.token_bytes = token_bytes            # id -> the bytes that token stands for
        self.special_tokens = dict(special_tokens)
        self.added_tokens = dict(added_tokens or {})
        self.whole_tokens = {i: t for t, i in {**self.special_tokens, **self.added_tokens}.items()}  # id -> text
        self.bos_token_id, self.eos_token_id = bos_token_id, eos_token_id
        self.add_bos = add_bos                    # does encode(..., add_special_tokens=True) prepend BOS?
        self.chat_template, self.system_prompt = chat_template, system_prompt
        if stop_token_ids is None:
            found = [eos_token_id] + [self.special_tokens.get(t) for t in STOP_TOKENS]
            stop_token_ids = [i for i in found if i is not None]
        self.stop_token_ids = tuple(dict.fromkeys(int(i) for i in stop_token_ids))   # unique, EOS first
        self._splitters = {}                      # compiled on first use (see _splitter)

    # ----- what subclasses provide -----
    def _encode_ordinary(self, text: str) -> list:
        """Ids for text that contains no special or added tokens."""
        raise NotImplementedError

    def to_dict(self) -> dict:
        """Everything ``save`` writes (see ``load_tokenizer``)."""
        raise NotImplementedError

    # ----- encoding -----
    @property
    def vocab_size(self) -> int:
        return len(self.token_bytes)

    def encode(self, text: str, add_special_tokens: bool = True, allowed_special: str = "all") -> list:
        """Text -> token ids.

        add_special_tokens: prepend BOS if this tokenizer's model expects it (Gemma: yes, SmolLM2:
            no) and the text does not already start with it (a chat prompt from
            ``apply_chat_template`` does). Here llmlab differs from ``transformers``, whose
            ``encode`` would give Gemma's chat prompt two BOS tokens (ids [2, 2, 105, ...]).
        allowed_special: what to do with special-token strings such as "<bos>" inside ``text``:
            "all" -> encode them as the special token (the default of ``transformers``),
            "none" -> encode them as ordinary text ("<", "bos", ">"),
            "raise" -> raise ValueError (safest for untrusted user text).
        """
        if not isinstance(text, str):
            raise TypeError(f"encode() expects a str, got {type(text).__name__}. "
                            "Decode bytes first (data.decode('utf-8')) or join a list of strings.")
        ids = []
        try:
            for piece, token_id in self._pieces(text, allowed_special):
                ids.extend([token_id] if token_id is not None else self._encode_ordinary(piece))
        except UnicodeEncodeError as e:
            raise ValueError(f"The text contains {e.object[e.start:e.end]!r}, which is not valid Unicode text "
                             "(a lone surrogate, often half of an emoji cut by a bad decode). Clean it with "
                             "text.encode('utf-8', 'replace').decode('utf-8').") from None
        return [self.bos_token_id] + ids if add_special_tokens and self._needs_bos(ids) else ids

    def _needs_bos(self, ids: list) -> bool:
        """Does a text with these ids get a BOS in front? Only if the model expects one and the text
        does not already start with it (the one-BOS rule, see the class docstring)."""
        return self.add_bos and self.bos_token_id is not None and ids[:1] != [self.bos_token_id]

    def _pieces(self, text: str, allowed_special: str):
        """Split on special/added tokens: yields (text, id) for a whole token, (text, None) between them."""
        if allowed_special not in ("all", "none", "raise"):
            raise ValueError(f"allowed_special must be 'all', 'none' or 'raise', got {allowed_special!r}.")
        find_special = self._splitter("special")
        if allowed_special == "raise" and find_special and (m := find_special.search(text)):
            raise ValueError(f"The text contains the special token {m.group()!r} at character {m.start()}. "
                             "Pass allowed_special='all' to encode it as that token, or 'none' to encode it "
                             "as plain text.")
        splitter = self._splitter("all" if allowed_special == "all" else "added")
        start = 0
        for m in (splitter.finditer(text) if splitter else ()):
            if m.start() > start:
                yield text[start:m.start()], None
            token = m.group()
            yield token, self.special_tokens.get(token, self.added_tokens.get(token))
            start = m.end()
        if start < len(text):
            yield text[start:], None

    def _splitter(self, which: str):
        """Regex finding special and/or added tokens in text. Compiled once, on first use, because
        Gemma has 6,384 such tokens and loading should stay fast."""
        if which not in self._splitters:
            tokens = {"all": {**self.special_tokens, **self.added_tokens},
                      "added": self.added_tokens, "special": self.special_tokens}[which]
            self._splitters[which] = _alternation(tokens)
        return self._splitters[which]

    @property
    def pad_token_id(self) -> int:
        """The id that fills padding in ``encode_batch``: the EOS id (0 if there is none). Padded
        positions are masked out, so no real token ever sees it."""
        return self.eos_token_id if self.eos_token_id is not None else 0

    def encode_batch(self, texts: list, add_special_tokens: bool = True):
        """Several texts -> (ids, attention_mask), both (B, T_max) torch.long, padded on the LEFT.

        Left padding puts every text's last token at position -1, where a language model reads the next
        token's logits; the mask (1 = token, 0 = padding) goes to the model with the ids.

        >>> ids, mask = tok.encode_batch(["Hello world", "Hi"])     # doctest: +SKIP
        >>> mask.tolist()                                           # doctest: +SKIP
        [[1, 1], [0, 1]]
        """
        if isinstance(texts, str) or not isinstance(texts, (list, tuple)):
            raise TypeError(f"encode_batch takes a list of texts; got {type(texts).__name__}. For one text use "
                            "[text], or llmlab.as_ids(model, tokenizer, text) for a (1, T) tensor.")
        rows = [self.encode(text, add_special_tokens) for text in texts]
        check_texts_give_tokens(texts, rows)
        return pad_left(rows, self.pad_token_id)

    # ----- decoding -----
    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        """Token ids -> text. Accepts a list, a 1-D tensor or a numpy array.

        Bytes that are not valid UTF-8 (for example half of an emoji when generation stopped
        mid-character) become U+FFFD, the replacement character "\ufffd", so decode never fails
        on a valid id.
        """
        return self.decode_bytes(ids, skip_special_tokens).decode("utf-8", errors="replace")

    def decode_bytes(self, ids, skip_special_tokens: bool = False) -> bytes:
        """Token ids -> the raw bytes they stand for."""
        ids = self._check_ids(ids)
        skip = set(self.special_tokens.values()) if skip_special_tokens else ()
        return b"".join(self.token_bytes[i] for i in ids if i not in skip)

    def _check_ids(self, ids) -> list:
        if hasattr(ids, "tolist"):                # torch tensor / numpy array
            ids = ids.tolist()
        if isinstance(ids, int):
            ids = [ids]
        ids = list(ids)
        for i in ids:
            if not isinstance(i, int) or isinstance(i, bool):
                raise TypeError(f"decode() expects integer token ids, got {i!r} ({type(i).__name__}).")
            if not 0 <= i < self.vocab_size:
                raise ValueError(f"Token id {i} is outside the vocabulary: valid ids are 0..{self.vocab_size - 1} "
                                 f"for this tokenizer. Was it produced by a different tokenizer or model?")
        return ids

    # ----- display -----
    def id_to_token(self, token_id: int) -> str:
        """A token as readable text (invalid UTF-8 shown as \ufffd)."""
        return self.token_bytes[self._check_ids([token_id])[0]].decode("utf-8", errors="replace")

    def tokens_with_spans(self, text: str, add_special_tokens: bool = False, allowed_special: str = "all",
                          unit: str = "char") -> list:
        """[(id, token text, (start, end)), ...] where text[start:end] is what the token covers.

        >>> tok.tokens_with_spans("Hi there")                 # doctest: +SKIP
        [(26843, 'Hi', (0, 2)), (665, ' there', (2, 8))]

        unit="byte" gives offsets into text.encode("utf-8") instead. A token that holds part of a
        multi-byte character (byte-level BPE can split an emoji) gets the whole character's char span.
        An added BOS gets the empty span (0, 0) (none is added when the text starts with BOS, as in ``encode``).
        """
        ids = self.encode(text, add_special_tokens=False, allowed_special=allowed_special)
        char_of_byte = [i for i, ch in enumerate(text) for _ in range(len(ch.encode("utf-8")))]
        char_of_byte.append(len(text))
        out = [(self.bos_token_id, self.id_to_token(self.bos_token_id), (0, 0))] \
            if add_special_tokens and self._needs_bos(ids) else []
        pos = 0
        for i in ids:
            end = pos + len(self.token_bytes[i])
            span = (pos, end) if unit == "byte" else (char_of_byte[pos], char_of_byte[end - 1] + 1 if end > pos else char_of_byte[pos])
            out.append((i, self.id_to_token(i), span))
            pos = end
        return out

    # ----- chat -----
    def apply_chat_template(self, messages: list, add_generation_prompt: bool = True, tokenize: bool = False):
        """Render a conversation [{"role": "user", "content": "..."}, ...] in this model's chat format.

        Returns the prompt text, or its ids with ``tokenize=True``. The text starts with BOS where the
        model's own template writes one (Gemma: "<bos><start_of_turn>user\\n..."), and ``encode`` or
        ``llmlab.as_ids`` add no second one, so text and ids give the same model input.
        Generation should stop at ``stop_token_ids``, which hold the token that ends a turn.
        """
        if self.chat_template is None:
            raise ValueError("This tokenizer has no chat template (a base model or a tokenizer you trained). "
                             f"Known templates: {sorted(chat.TEMPLATES)}; set tok.chat_template to one of them.")
        text = chat.render(self.chat_template, messages, add_generation_prompt,
                           bos_token=self.id_to_token(self.bos_token_id) if self.bos_token_id is not None else "",
                           system_prompt=self.system_prompt)
        return self.encode(text, add_special_tokens=False) if tokenize else text

    # ----- saving -----
    def save(self, directory: str) -> str:
        """Write this tokenizer to ``directory/llmlab_tokenizer.json``; ``load_tokenizer(directory)`` reads it."""
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, SAVE_NAME)
        common = dict(format="llmlab-tokenizer", version=1, special_tokens=self.special_tokens,
                      added_tokens=self.added_tokens, bos_token_id=self.bos_token_id,
                      eos_token_id=self.eos_token_id, add_bos=self.add_bos,
                      chat_template=self.chat_template, system_prompt=self.system_prompt,
                      stop_token_ids=list(self.stop_token_ids))
        with open(path, "w", encoding="utf-8") as f:
            json.dump({**common, **self.to_dict()}, f, ensure_ascii=False)
        return path

    def __repr__(self) -> str:
        return f"{type(self).__name__}(vocab_size={self.vocab_size}, special_tokens={len(self.special_tokens)})"


def check_texts_give_tokens(texts: list, rows: list) -> None:
    """Each text must encode to at least one token (its row): an empty text gives a model nothing to continue.

    >>> check_texts_give_tokens(["Hi", ""], [[6023], []])
    Traceback (most recent call last):
    ...
    ValueError: text 1 of 2 is '', which gives no tokens: a prompt needs some text for the model to continue, e.g. 'Once upon a time'.
    """
    if not texts:
        raise ValueError("the list of texts is empty; give at least one text, e.g. ['Once upon a time'].")
    for i, (text, row) in enumerate(zip(texts, rows)):
        if len(row) == 0:
            which = "the prompt text" if len(texts) == 1 else f"text {i} of {len(texts)}"
            raise ValueError(f"{which} is {text!r}, which gives no tokens: a prompt needs some text for the model "
                             "to continue, e.g. 'Once upon a time'.")


def pad_left(rows: list, pad_id: int = 0):
    """Rows of token ids of different lengths -> (ids, attention_mask), both (B, T_max), padded on the left.

    >>> ids, mask = pad_left([[5, 6, 7], [8]], pad_id=0)
    >>> ids.tolist(), mask.tolist()
    ([[5, 6, 7], [0, 0, 8]], [[1, 1, 1], [0, 0, 1]])
    """
    import torch  # here, so that tokenizers alone load without torch

    if not rows or any(len(row) == 0 for row in rows):
        raise ValueError("pad_left needs at least one row, and every row needs at least one token.")
    T = max(len(row) for row in rows)
    ids = torch.tensor([[pad_id] * (T - len(row)) + [int(t) for t in row] for row in rows], dtype=torch.long)
    mask = torch.tensor([[0] * (T - len(row)) + [1] * len(row) for row in rows], dtype=torch.long)
    return ids, mask  # (B, T), (B, T)


def _alternation(tokens: dict):
    """One regex matching any of ``tokens`` (longest match wins); None when there are none.

    The tokens are stored as a trie, so Gemma's 6,384 added tokens make a small, fast regex:

    >>> splitter = _alternation({"<b>": 0, "<bos>": 1})
    >>> splitter.pattern
    '<b(?:>|os>)'
    >>> splitter.findall("<bos>hi<b>")
    ['<bos>', '<b>']
    """
    if not tokens:
        return None
    trie = {}
    for token in tokens:
        node = trie
        for ch in token:
            node = node.setdefault(ch, {})
        node[""] = {}                                # a token ends here

    def pattern(node: dict) -> str:
        branches = [re.escape(ch) + pattern(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        group = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        if "" in node:                               # may stop here, but a longer token is tried first
            return f"(?:{group})?" if len(branches) == 1 else group + "?"
        return group

    return re.compile(pattern(trie))
