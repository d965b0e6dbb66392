"""A fixed multilingual training corpus of about 1 MB, generated deterministically.

Used by tests/test_tokenizer_train.py and benchmarks/tokenizer_benchmark.py. Words are the real
words of tokenizer_corpus.json (texts written for llmlab's tests) plus pseudo-words built from
each script's syllables; sentences draw words with a Zipf-like frequency, as in natural text.
So the corpus has what BPE feeds on (frequent words, a long tail of rare ones, several scripts,
code, numbers, URLs, odd whitespace) without shipping 1 MB of text.
"""
import itertools
import json
import os
import random

import regex

HERE = os.path.dirname(os.path.abspath(__file__))

SYLLABLES = {  # (consonants, vowels) per script; Han and Hangul are built differently below
    "Latin": ("b c d f g h j k l m n p r s t v w z br st tr ch sh th".split(), "a e i o u y ou ea ai".split()),
    "Cyrillic": (list("бвгджзклмнпрстфхцчшщ"), list("аеиоуыэюя")),
    "Greek": (list("βγδζθκλμνξπρστφχψ"), list("αεηιουω")),
    "Arabic": (list("بتثجحخدذرزسشصضطظعغفقكلمنه"), list("اوي")),
    "Devanagari": (list("कखगघचछजझटडतथदधनपबभमयरलवसह"), ["", "ा", "ि", "ी", "ु", "े", "ो"]),
}


def _pseudo_word(rng: random.Random, script: str) -> str:
    n = rng.choice([1, 2, 2, 3, 3, 4])
    if script == "Hangul":                                 # syllable block = initial, medial, final jamo
        return "".join(chr(0xAC00 + (rng.randrange(19) * 21 + rng.randrange(21)) * 28 + rng.choice([0, 0, 4, 8, 16]))
                       for _ in range(n))
    if script == "Han":                                    # 3,000 common-range characters
        return "".join(chr(0x4E00 + rng.randrange(3000) * 7) for _ in range(min(n, 3)))
    consonants, vowels = SYLLABLES[script]
    return "".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(n))


def make_corpus(n_bytes: int = 1_000_000, seed: int = 0) -> str:
    """About ``n_bytes`` of UTF-8 text (never more); the same text for the same arguments."""
    rng = random.Random(seed)
    with open(os.path.join(HERE, "tokenizer_corpus.json"), encoding="utf-8") as f:
        seeds = [s for s in json.load(f) if len(s) > 20]
    share = {"Latin": 12, "Cyrillic": 2, "Han": 2, "Hangul": 1, "Arabic": 1, "Greek": 1, "Devanagari": 1}
    words = {}
    for script in share:
        real = sorted({w for s in seeds for w in regex.findall(rf"\p{{{script}}}+", s)})
        fake = [_pseudo_word(rng, script) for _ in range(400 * share[script])]
        words[script] = real + fake
        rng.shuffle(words[script])                         # which words are frequent: random but fixed
    zipf = {k: list(itertools.accumulate(1.0 / (rank + 1) for rank in range(len(v)))) for k, v in words.items()}
    scripts, script_share = list(share), list(share.values())

    parts, size = [], 0
    while size < n_bytes:
        kind = rng.random()
        if kind < 0.03:
            part = rng.choice(seeds)                       # an original text, verbatim
        elif kind < 0.08:
            name = rng.choice(words["Latin"][:300]).lower()
            part = (f"def {name}_{rng.randint(0, 99)}(x, y={rng.randint(0, 9)}):\n"
                    f"    return x * {rng.randint(2, 999)} + y  # {rng.choice(words['Latin'])}\n")
        elif kind < 0.10:
            part = f"https://example.{rng.choice(['com', 'org', 'net'])}/{rng.choice(words['Latin']).lower()}?id={rng.randint(0, 10**6)}"
        else:
            script = rng.choices(scripts, script_share)[0]
            sentence = rng.choices(words[script], cum_weights=zipf[script], k=rng.randint(4, 18))
            if rng.random() < 0.2:
                sentence.insert(rng.randrange(len(sentence)), str(rng.randint(0, 10 ** rng.randint(1, 7))))
            sep = "" if script == "Han" else " "
            end = "。" if script == "Han" else rng.choice([".", ".", "!", "?", ",", ":"])
            part = sep.join(sentence) + end + rng.choice(["", "", "", " 🙂", " 😀🎉"])
            if script == "Latin":
                part = part[0].upper() + part[1:]
        part += rng.choice([" ", " ", " ", "\n", "\n\n", "  ", "\t"])
        parts.append(part)
        size += len(part.encode("utf-8"))
    return "".join(parts).encode("utf-8")[:n_bytes].decode("utf-8", errors="ignore")
