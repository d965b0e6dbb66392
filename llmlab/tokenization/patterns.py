"""Pre-splitting: the regexes that cut text into chunks before BPE runs inside each chunk.

Merges never cross a chunk boundary, so " dog." becomes " dog" + "." and a vocabulary never
learns tokens like "dog." or "g. T". Each family of models has its own pattern:

>>> pre_split("Hello world!!  123", PATTERNS["gpt2"])
['Hello', ' world', '!!', ' ', ' 123']
>>> pre_split("Hello world!!  123", PATTERNS["gpt4"])     # digits in groups of at most 3
['Hello', ' world', '!!', ' ', ' ', '123']
>>> pre_split("x 2024", PATTERNS["smollm"])                # every digit alone, then GPT-2's regex
['x', ' ', '2', '0', '2', '4']
"""
from __future__ import annotations

import regex  # the `regex` package: \p{L} (any letter), \p{N} (any digit), possessive quantifiers

# GPT-2 (2019): contractions, optional space + letters / digits / punctuation, then whitespace.
# `\s+(?!\S)` keeps the last space of a run for the next word: "a   b" -> "a", "  ", " b".
GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

# GPT-4 (cl100k_base): case-insensitive contractions, numbers in groups of 1-3 digits,
# newlines kept apart from other whitespace.
GPT4 = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}"""
        r"""| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+""")

# Llama 3 (as transformers and llama.cpp spell it): like GPT-4 without possessive quantifiers.
LLAMA3 = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"""
          r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")

# Qwen2: like Llama 3 but every digit alone.
QWEN2 = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"""
         r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")

# A list of patterns is applied in turn: each one splits the chunks the previous one produced.
PATTERNS = {
    "gpt2": [GPT2],
    "gpt4": [GPT4],
    "llama3": [LLAMA3],
    "qwen2": [QWEN2],
    # SmolLM2 as trained (its hub tokenizer.json and llama.cpp's `tokenizer.ggml.pre = "smollm"`):
    # isolate every digit, then GPT-2's regex.
    "smollm": [r"\p{N}", GPT2],
}

# What `tokenizer.ggml.pre` in a GGUF file means, as transformers' GGUF loader reads it (our
# reference). Names it does not know (SmolLM2's "smollm" among them) fall back to GPT-2's regex.
GGUF_PRE_AS_TRANSFORMERS = {
    "llama3": "llama3", "llama-v3": "llama3", "llama-bpe": "llama3", "smaug-bpe": "llama3",
    "dbrx": "llama3", "falcon3": "llama3", "qwen2": "qwen2", "deepseek-r1-qwen": "qwen2",
}

_compiled: dict = {}


def compile_pattern(pattern: str):
    """Compile once and reuse (tokenizers share patterns)."""
    if pattern not in _compiled:
        _compiled[pattern] = regex.compile(pattern)
    return _compiled[pattern]


def resolve_patterns(pattern) -> list:
    """A pattern name, a regex string, or a list of either -> a list of regex strings.

    >>> resolve_patterns("gpt2") == [GPT2]
    True
    """
    if isinstance(pattern, str):
        return list(PATTERNS.get(pattern, [pattern]))
    return [p for item in pattern for p in resolve_patterns(item)]


def pre_split(text: str, patterns: list) -> list:
    """Cut ``text`` into chunks with each pattern in turn; text between matches is kept as a chunk.

    >>> pre_split("a1b", [r"\\p{N}"])
    ['a', '1', 'b']
    """
    chunks = [text] if text else []
    for pattern in patterns:
        compiled = compile_pattern(pattern)
        out = []
        for chunk in chunks:
            start = 0
            for m in compiled.finditer(chunk):
                if m.start() > start:
                    out.append(chunk[start:m.start()])   # a gap the pattern did not match
                out.append(m.group())
                start = m.end()
            if start < len(chunk):
                out.append(chunk[start:])
        chunks = out
    return chunks
