"""How a token is written on screen, everywhere in the book: one rule, one function.

A token is a piece of bytes, and three kinds of piece need a visible form:

- whitespace inside a token: a space is "␣", a newline "↵", a tab "⇥", a carriage return "␍"
  (" Paris" -> "␣Paris"), so that " Paris" and "Paris" look different;
- a piece of a multi-byte character (byte-level BPE splits 天 = e5 a4 a9 into fragments):
  each byte that is not part of a whole UTF-8 character is written "<e5>", so that fragments
  stay distinguishable instead of all becoming "�";
- a special token ("<bos>", "<|im_start|>", "<end_of_turn>"): its name in angle quotes,
  "⟨bos⟩", "⟨im_start⟩", "⟨end_of_turn⟩", so that it cannot be mistaken for text.

Labels that are not tokens (a layer name, "SmolLM2 15", "q@3") are shown as they are: the rule is
for tokens only.

    >>> show_token(" Paris")
    '␣Paris'
    >>> show_token(b"\\xe5\\xa4")
    '<e5><a4>'
    >>> show_token(b" \\xe5\\xa4\\xa9")
    '␣天'
    >>> show_token("<|im_start|>", special=True)
    '⟨im_start⟩'
"""
from __future__ import annotations

import re

WHITESPACE = {" ": "\u2423", "\n": "\u21b5", "\t": "\u21e5", "\r": "\u240d"}

# The names special tokens have in the book's tokenizers; a token string given without its
# tokenizer is treated as special when it is one of these or looks like "<|name|>" / "<name_x>".
KNOWN_SPECIAL = {"<bos>", "<eos>", "<pad>", "<unk>", "<mask>", "<s>", "</s>", "<cls>", "<sep>",
                 "<filename>", "<reponame>"}   # the last two: SmolLM2's, without an underscore
SPECIAL_PATTERN = re.compile(r"<\|[A-Za-z0-9_.:-]+\|>|<[A-Za-z0-9]+_[A-Za-z0-9_]+>|<unused[0-9]+>")


def looks_special(token: str) -> bool:
    """True for strings such as "<bos>", "<|endoftext|>", "<start_of_turn>"; False for "<div" or "a<b".

    >>> [looks_special(t) for t in ("<bos>", "<|im_end|>", "<end_of_turn>", "<div>", "<")]
    [True, True, True, False, False]
    """
    return token in KNOWN_SPECIAL or SPECIAL_PATTERN.fullmatch(token) is not None


def _special_name(token: str) -> str:
    name = token.strip()
    name = name[1:] if name.startswith("<") else name
    name = name[:-1] if name.endswith(">") else name
    return "\u27e8" + name.strip("|") + "\u27e9"


def _decode(piece: bytes) -> str:
    """UTF-8 with every byte that is not part of a whole character written as <xx>."""
    out, i = [], 0
    while i < len(piece):
        try:
            text = piece[i:].decode("utf-8")
            out.append(text)
            break
        except UnicodeDecodeError as error:
            out.append(piece[i:i + error.start].decode("utf-8"))
            bad = piece[i + error.start:i + error.end]
            out.append("".join(f"<{b:02x}>" for b in bad))
            i += error.end
    return "".join(out)


def show_token(token, special: bool | None = None) -> str:
    """The book's display form of one token.

    token  : the token's bytes (exact: byte fragments become <xx>) or its text (a "�" that a
             decoder already put there cannot be undone; pass bytes where you have them).
    special: True for a special token, False for text; None (default) recognises a string such
             as "<bos>" or "<|im_start|>" by its form (see `looks_special`).
    """
    if isinstance(token, (bytes, bytearray)):
        text = _decode(bytes(token))
    else:
        text = str(token)
    if special is None:
        special = looks_special(text)
    if special:
        return _special_name(text)
    out = []
    for ch in text:
        if ch in WHITESPACE:
            out.append(WHITESPACE[ch])
        elif ord(ch) < 32 or ord(ch) == 127:
            out.append(f"<{ord(ch):02x}>")
        else:
            out.append(ch)
    return "".join(out)


def show_token_ids(tokenizer, ids) -> list[str]:
    """Display forms of token ids, from the tokenizer's bytes where it has them (llmlab tokenizers),
    else from decoding each id on its own."""
    ids = [int(i) for i in (ids.tolist() if hasattr(ids, "tolist") else ids)]
    raw = getattr(tokenizer, "token_bytes", None)
    specials = set(getattr(tokenizer, "special_tokens", {}).values())
    shown = []
    for i in ids:
        if raw is not None and 0 <= i < len(raw):
            shown.append(show_token(raw[i], special=i in specials or None))
        else:
            shown.append(show_token(tokenizer.decode([i])))
    return shown


_BYTE_RUN = re.compile(r"(?:<[0-9a-f]{2}>)+")
_UNSHOW = {v: k for k, v in WHITESPACE.items()}


def text_of_shown(tokens) -> str:
    """Back from display forms to text (for a prompt box): "␣" -> " ", "<e5><a4><a9>" -> "天",
    special tokens dropped.

    >>> text_of_shown(["The", "␣cat", "<e5><a4>", "<a9>", "⟨im_end⟩"])
    'The cat天'
    """
    text = "".join(t for t in tokens if not (t.startswith("\u27e8") and t.endswith("\u27e9")))
    text = "".join(_UNSHOW.get(ch, ch) for ch in text)
    return _BYTE_RUN.sub(lambda m: bytes.fromhex(m.group().replace("<", "").replace(">", ""))
                         .decode("utf-8", "replace"), text)
