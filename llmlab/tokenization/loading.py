"""Reading tokenizers from files: GGUF metadata, Hugging Face ``tokenizer.json``, llmlab's own format.

Each reader turns a file's description into ``ByteLevelBPE`` or ``SentencePieceBPE`` and fails
loudly on anything it does not understand, instead of guessing. GGUF files are parsed by
``llmlab.gguf``, the one reader of that format for weights and tokenizers alike.
"""
from __future__ import annotations

import json
import os

import regex

from llmlab.gguf import open_reader, tokenizer_metadata
from llmlab.tokenization import chat
from llmlab.tokenization.base import SAVE_NAME, STOP_TOKENS
from llmlab.tokenization.bytelevel import BYTE_TO_CHAR, ByteLevelBPE, unspell
from llmlab.tokenization.patterns import GGUF_PRE_AS_TRANSFORMERS, GPT2
from llmlab.tokenization.sentencepiece import SPACE, SentencePieceBPE

CONTROL, USER_DEFINED = 3, 4          # llama.cpp token types in `tokenizer.ggml.token_type`


# ----- GGUF -----
def tokenizer_from_gguf(path_or_reader, pattern=None):
    """The tokenizer stored in a GGUF file's ``tokenizer.ggml.*`` metadata.

    path_or_reader: a path, or a ``gguf.GGUFReader`` that is already open (the model loader
        passes its reader so the metadata is parsed once).
    pattern: the pre-split for byte-level files. Default: what ``transformers`` uses for this
        file (our reference). For SmolLM2 that is GPT-2's regex; the model itself was trained
        with every digit split off first, which ``pattern="smollm"`` reproduces (llama.cpp and
        the hub's tokenizer.json do that). The two differ only around digits after spaces.
    """
    meta = tokenizer_metadata(open_reader(path_or_reader))
    kind = meta.get("tokenizer.ggml.model")
    if kind is None:
        raise ValueError("This GGUF file has no tokenizer (no 'tokenizer.ggml.model' in its metadata).")
    tokens = meta["tokenizer.ggml.tokens"]
    types = meta.get("tokenizer.ggml.token_type") or [1] * len(tokens)
    arch = meta.get("general.architecture", "")
    common = dict(bos_token_id=meta.get("tokenizer.ggml.bos_token_id"), eos_token_id=meta.get("tokenizer.ggml.eos_token_id"))
    template, system = chat.detect(meta.get("tokenizer.chat_template"), set(tokens))

    if kind == "gpt2":
        alphabet = set(BYTE_TO_CHAR.values())
        # Control tokens spelled outside the byte alphabet are llama.cpp mislabels; transformers skips them.
        special = {t: i for i, (t, k) in enumerate(zip(tokens, types)) if k == CONTROL and set(t) <= alphabet}
        added = {t: i for i, (t, k) in enumerate(zip(tokens, types)) if k == USER_DEFINED}
        vocab = {t: i for i, t in enumerate(tokens)}
        merges = [tuple(vocab[p] for p in m.split(" ")) for m in meta["tokenizer.ggml.merges"]]
        pre = GGUF_PRE_AS_TRANSFORMERS.get(meta.get("tokenizer.ggml.pre"), "gpt2")
        whole = set(special.values()) | set(added.values())
        token_bytes = [t.encode("utf-8") if i in whole else unspell(t) for i, t in enumerate(tokens)]
        return ByteLevelBPE(token_bytes, merges, pattern or pre, special, added_tokens=added,
                            add_bos=bool(meta.get("tokenizer.ggml.add_bos_token", False)),
                            chat_template=template, system_prompt=system, **common)
    if kind == "llama":
        if arch.startswith("gemma"):
            # Gemma stores runs of spaces as real spaces ("  "), every other piece with "▁".
            pieces = [SPACE * len(t) if " " in t and not t.strip() else t for t in tokens]
            ranks = None                         # Gemma merges in vocabulary order, not by score
        else:
            pieces, scores = tokens, meta["tokenizer.ggml.scores"]
            ranks = [-s for s in scores]
        known = set(pieces)
        special = {t: i for i, (t, k) in enumerate(zip(tokens, types)) if k == CONTROL}
        added = {t: i for i, (t, k) in enumerate(zip(tokens, types)) if k == USER_DEFINED and t in known}
        return SentencePieceBPE(pieces, special, ranks=ranks, added_tokens=added,
                                add_bos=bool(meta.get("tokenizer.ggml.add_bos_token", True)),
                                chat_template=template or ("gemma" if arch.startswith("gemma") else None),
                                system_prompt=system, **common)
    raise ValueError(f"GGUF tokenizer model {kind!r} is not supported; llmlab reads 'gpt2' (byte-level BPE) "
                     "and 'llama' (SentencePiece BPE).")


# ----- tokenizer.json -----
def _json_patterns(pre) -> list:
    """Hugging Face pre-tokenizer description -> list of regexes for ``pre_split``."""
    if pre is None:
        return []
    kind = pre["type"]
    if kind == "Sequence":
        return [p for step in pre["pretokenizers"] for p in _json_patterns(step)]
    if kind == "ByteLevel":
        if pre.get("add_prefix_space"):
            raise ValueError("ByteLevel(add_prefix_space=True) is not supported by llmlab.")
        return [GPT2] if pre.get("use_regex", True) else []
    if kind == "Split" and pre.get("behavior") == "Isolated" and not pre.get("invert"):
        pattern = pre["pattern"]
        return [pattern["Regex"] if "Regex" in pattern else regex.escape(pattern["String"])]
    if kind == "Digits":
        return [r"\p{N}" if pre.get("individual_digits") else r"\p{N}+"]
    raise ValueError(f"Pre-tokenizer {kind} ({pre}) is not supported by llmlab's tokenizer.json reader.")


def _bos_from_template(post) -> int | None:
    """The id a TemplateProcessing post-processor puts before the text, if any (Llama 3's BOS)."""
    if post is None:
        return None
    if post["type"] == "Sequence":
        return next((b for p in post["processors"] if (b := _bos_from_template(p)) is not None), None)
    if post["type"] == "TemplateProcessing" and "SpecialToken" in post["single"][0]:
        name = post["single"][0]["SpecialToken"]["id"]
        return post["special_tokens"][name]["ids"][0]
    return None


def _tokenizer_config(path) -> dict:
    """The tokenizer_config.json beside ``path`` (names of BOS/EOS, chat template), or {}."""
    config_path = os.path.join(os.path.dirname(os.path.abspath(path)), "tokenizer_config.json")
    if not os.path.isfile(config_path):
        return {}
    with open(config_path, encoding="utf-8") as f:
        config = json.load(f)
    for key in ("bos_token", "eos_token"):          # either "<s>" or {"content": "<s>", ...}
        if isinstance(config.get(key), dict):
            config[key] = config[key].get("content")
    return config


def _stop_ids(path, special: dict, common: dict) -> list | None:
    """Every id that ends generation: the tokenizer's EOS and end-of-turn tokens (see Tokenizer) and the
    ``eos_token_id`` list of a ``generation_config.json`` beside ``path`` (Gemma 3's has [1, 106])."""
    config_path = os.path.join(os.path.dirname(os.path.abspath(path)), "generation_config.json")
    if not os.path.isfile(config_path):
        return None                               # the Tokenizer's default
    with open(config_path, encoding="utf-8") as f:
        listed = json.load(f).get("eos_token_id")
    listed = [] if listed is None else [listed] if isinstance(listed, int) else list(listed)
    found = [common["eos_token_id"], *listed, *(special.get(t) for t in STOP_TOKENS)]
    return [i for i in found if i is not None]


def tokenizer_from_json(path):
    """A Hugging Face ``tokenizer.json`` with a BPE model (GPT-2, Llama 3, Qwen2, SmolLM2, Gemma).

    A ``tokenizer_config.json`` beside it, if present, supplies BOS/EOS names and the chat template.
    """
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path!r} is not a tokenizer.json (not JSON: {e}).") from None
    if not isinstance(d, dict) or not isinstance(d.get("model"), dict) or d["model"].get("type") != "BPE":
        raise ValueError(f"{path!r} is not a BPE tokenizer.json (expected a 'model' with type 'BPE').")
    model = d["model"]
    vocab = dict(model["vocab"])
    special = {a["content"]: a["id"] for a in d.get("added_tokens", []) if a["special"]}
    added = {a["content"]: a["id"] for a in d.get("added_tokens", []) if not a["special"]}
    size = max([*vocab.values(), *special.values(), *added.values()]) + 1
    tokens = [None] * size
    for t, i in {**vocab, **special, **added}.items():
        tokens[i] = t
    if None in tokens:
        raise ValueError(f"{path!r}: token id {tokens.index(None)} has no token.")
    merges = [m.split(" ") if isinstance(m, str) else m for m in model.get("merges", [])]
    config = _tokenizer_config(path)
    bos = _bos_from_template(d.get("post_processor"))
    common = dict(added_tokens=added, add_bos=bos is not None,
                  bos_token_id=bos if bos is not None else special.get(config.get("bos_token")),
                  eos_token_id=special.get(config.get("eos_token")))
    template, system = chat.detect(config.get("chat_template"), set(tokens))
    common.update(chat_template=template, system_prompt=system, stop_token_ids=_stop_ids(path, special, common))

    if model.get("byte_fallback"):
        normalizer = d.get("normalizer")
        if not (normalizer and normalizer["type"] == "Replace" and normalizer["content"] == SPACE):
            raise ValueError(f"{path!r}: only Gemma-style SentencePiece files (normalizer Replace ' ' -> '▁') "
                             "are supported.")
        return SentencePieceBPE(tokens, special, merges=[(vocab[a], vocab[b]) for a, b in merges], **common)
    if "ByteLevel" not in json.dumps(d.get("pre_tokenizer")):
        raise ValueError(f"{path!r}: a BPE model without byte fallback must be byte-level (a ByteLevel "
                         "pre-tokenizer); this one is neither, which llmlab does not support.")
    if d.get("normalizer") is not None:
        raise ValueError(f"{path!r}: normalizer {d['normalizer']['type']} is not supported for byte-level BPE.")
    whole = {**special, **added}
    token_bytes = [t.encode("utf-8") if t in whole else unspell(t) for t in tokens]
    return ByteLevelBPE(token_bytes, [(vocab[a], vocab[b]) for a, b in merges],
                        _json_patterns(d.get("pre_tokenizer")), special, **common)


# ----- llmlab's own format -----
def load_tokenizer(directory):
    """Load what ``tokenizer.save(directory)`` wrote (fast: well under a second, even for Gemma)."""
    path = os.path.join(directory, SAVE_NAME) if os.path.isdir(directory) else os.fspath(directory)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No saved llmlab tokenizer at {path!r}. Create one with tok.save(directory), "
                                "or read a model file with tokenizer_from_gguf() / tokenizer_from_json().")
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError):
        d = None
    if not isinstance(d, dict) or d.get("format") != "llmlab-tokenizer":
        raise ValueError(f"{path!r} is not a tokenizer saved by llmlab (tok.save(directory) writes one).")
    if d["kind"] == "bytelevel":
        return ByteLevelBPE.from_dict(d)
    return SentencePieceBPE.from_dict(d)
