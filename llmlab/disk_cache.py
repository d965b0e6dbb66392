"""The on-disk conversion cache (not the KV cache of llmlab.kvcache): a GGUF file is dequantised once,
and later loads read the result.

One entry per model, under ``$LLMLAB_CACHE`` (default ``~/.cache/llmlab``)::

    smollm2-135m-3f9c2a61d0/
        config.json          llmlab's ModelConfig
        model.safetensors    float32 weights in llmlab's naming
        tokenizer/           whatever the tokenizer's save() writes
        manifest.json        format version + sha256 of every file above (written last)
        verified.json        which files a read has checked against the manifest, and as they stood then
        used_by.txt          other copies of the same GGUF file that loaded this entry
    gguf/                    model files assembled from a package's parts (Gemma's)

The folder's suffix hashes the GGUF file's size and samples of its content, not its path or name:
a load by name, by path, or from a second virtual environment finds the entry that has that suffix,
whatever its name (the name only says which model it is). A read checks
every checksum before trusting the files (a file unchanged since a read verified it, by its size, times
and inode, is not hashed again: ``verified.json``); anything missing, truncated or corrupt raises
``CacheInvalid`` and the caller converts again. Files are readable by whoever the umask allows
(0644 or 0640 usually), so a cache can be shared. A folder that cannot be written to is not an
error: ``store`` warns and the model simply stays in memory.
``llmlab cache`` lists the entries and their sizes; ``llmlab cache --clean`` deletes the stale ones.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

CACHE_FORMAT_VERSION = 1
SAMPLE_BYTES = 1 << 20      # source_identity hashes the first and last MiB ...
SAMPLE_BLOCKS = 32          # ... and this many blocks of 64 KiB spread evenly between them
USED_BY = "used_by.txt"     # other paths of the same source file that loaded an entry, one per line
MODEL_FILES = "gguf"        # the folder of the cache that holds model files assembled from parts


class CacheInvalid(Exception):
    """A cache folder that must not be trusted (missing, truncated, corrupt, old format)."""


class CacheNotWritable(UserWarning):
    """The cache location cannot hold a new entry; the model was returned from memory."""


def cache_root() -> Path:
    """``$LLMLAB_CACHE`` if set, else ``~/.cache/llmlab``."""
    return Path(os.environ.get("LLMLAB_CACHE") or Path.home() / ".cache" / "llmlab").expanduser()


# --------------------------------------------------------------------------- identity of a source file

def source_identity(path: Path) -> str:
    """A short hash of the source file's size and of samples of its content.

    The same file gets the same cache folder wherever it is installed; a different or edited file
    gets a new one. Hashing all of a 100 MB-1 GB file on every load would cost more than the load
    itself, so only its first and last MiB (the GGUF header with all its metadata, and the end of
    the tensor data) and 32 evenly spaced 64 KiB blocks are read.
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


def entry_folder(path: Path, name: str | None = None) -> Path:
    """The cache folder of a source file: the entry with its content's identity, whatever name or
    path made it; else a new one, ``<name or file stem>-<source_identity>``."""
    identity = source_identity(path)
    same = same_model(cache_root(), identity)
    if same:
        return same[0]
    name = name or re.sub(r"[^\w.-]+", "-", path.stem.lower())
    return cache_root() / f"{name}-{identity}"


def same_model(root: Path, identity: str) -> list[Path]:
    """The entries of one source file's content, the one loads use first.

    Earlier versions of llmlab named an entry after the name or the path that loaded it, so one
    model could be converted twice; loads use the complete entry with the shortest name (the
    registry's name, when the model was ever loaded by name) and ``clean_cache`` deletes the others.
    """
    folders = [p for p in root.glob(f"*-{identity}") if p.is_dir() and not p.name.startswith(".")
               and _ENTRY_NAME.fullmatch(p.name)] if root.is_dir() else []
    return sorted(folders, key=lambda p: (not (p / "manifest.json").is_file(), len(p.name), p.name))


def model_files_folder() -> Path:
    """Where model files assembled from a package's parts are kept: ``$LLMLAB_CACHE/gguf``."""
    return cache_root() / MODEL_FILES


# --------------------------------------------------------------------------- write

def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)).replace(os.sep, "/") for p in folder.rglob("*") if p.is_file())


def _file_mode() -> int:
    """The mode a new file gets under the current umask (0o644 for the usual umask 022).

    safetensors writes its file 0600 whatever the umask; the others in a shared cache could not read it.
    """
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


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
        mode = _file_mode()
        for rel in _files_under(tmp):
            os.chmod(tmp / rel, mode)
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


def store(folder: Path, config, state_dict: dict, tokenizer, source: Path) -> bool:
    """``write_cache``, but a location that cannot be written to only warns. True if stored."""
    try:
        write_cache(folder, config, state_dict, tokenizer, source)
        return True
    except OSError as error:
        warnings.warn(
            f"llmlab could not save the converted model in its cache {folder.parent} "
            f"({type(error).__name__}: {error}). The model is loaded from memory and works, but the next "
            f"load converts {source.name} again. To keep the conversion, point LLMLAB_CACHE at a folder "
            "you can write to (e.g. export LLMLAB_CACHE=~/llmlab-cache), or make this one writable.",
            CacheNotWritable, stacklevel=2)
        return False


# --------------------------------------------------------------------------- read and verify

def read_cache(folder: Path):
    """A verified entry as ``(config, state_dict, tokenizer)``; CacheInvalid if anything does not check out."""
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
    contents, stamps = {}, _verified(folder)
    before = dict(stamps)
    for rel, expected in manifest["files"].items():
        path = folder / rel
        try:
            stat = path.stat()
            size = stat.st_size
            if size != expected["bytes"]:
                raise CacheInvalid(f"{rel} has {size} bytes, expected {expected['bytes']} (truncated?)")
            data = bytearray(size)  # writable, so the weight tensors can use this memory directly
            with open(path, "rb") as f:
                if f.readinto(data) != size:
                    raise CacheInvalid(f"{rel} changed while being read")
        except OSError:
            raise CacheInvalid(f"{rel} is missing or unreadable") from None
        stamp = [expected["sha256"], stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino]
        if stamps.get(rel) != stamp:       # new, or changed since its checksum was last verified
            if _sha256(data) != expected["sha256"]:
                raise CacheInvalid(f"{rel} does not match its checksum (corrupt)")
            stamps[rel] = stamp
        contents[rel] = data
    try:
        config = ModelConfig.from_dict(json.loads(contents["config.json"]))
        state_dict = tensors_from_safetensors(contents["model.safetensors"])
        tokenizer = load_tokenizer(str(folder / "tokenizer"))
    except Exception as error:  # e.g. written by another llmlab version: rebuilding is always safe
        raise CacheInvalid(f"{type(error).__name__}: {error}") from None
    if stamps != before:
        _keep_verified(folder, stamps)
    return config, state_dict, tokenizer


VERIFIED = "verified.json"   # the files whose checksums a read has verified, as they stood then


def _verified(folder: Path) -> dict:
    """{file: [sha256, bytes, mtime_ns, ctime_ns, inode]} of the files a read verified. Hashing costs about a
    second per GB of weights on each load, so a file unchanged since then is not hashed again: any write
    changes its status-change time (even one that puts the modification time back), a copy is a new inode."""
    try:
        return dict(json.loads((folder / VERIFIED).read_text()))
    except (OSError, ValueError, TypeError):
        return {}


def _keep_verified(folder: Path, stamps: dict) -> None:
    """Write the stamps of the verified files; a folder that cannot be written to verifies each time."""
    tmp = folder / f".{VERIFIED}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        tmp.write_text(json.dumps(stamps))
        os.chmod(tmp, _file_mode())
        tmp.replace(folder / VERIFIED)
    except OSError:
        tmp.unlink(missing_ok=True)


_SAFETENSORS_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
                       "F64": torch.float64, "I64": torch.int64, "I32": torch.int32, "BOOL": torch.bool}


def tensors_from_safetensors(buffer: bytearray) -> dict:
    """The tensors of a .safetensors file already in memory, as views into that memory (no copy).

    The format is simple: 8 bytes (little-endian) giving the header length n, then n bytes of JSON
    ``{"name": {"dtype": "F32", "shape": [576], "data_offsets": [start, end]}, ...}``, then the raw
    tensor bytes, offsets counted from the end of the header.

    >>> header = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
    >>> data = bytearray(len(header).to_bytes(8, "little") + header + torch.tensor([1.5, -2.0]).numpy().tobytes())
    >>> tensors_from_safetensors(data)["w"]
    tensor([ 1.5000, -2.0000])
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


# --------------------------------------------------------------------------- list and clean

def remember_source(folder: Path, path: Path) -> None:
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
    folder: Path         # the entry's folder; for a model file in gguf/, the file
    bytes: int
    sources: list        # the model files that were converted into, or loaded, this entry
    status: str          # "in use" | "stale: ..." (safe to delete: it would never be loaded again)

    @property
    def stale(self) -> bool:
        return self.status != "in use"


_ENTRY_NAME = re.compile(r"[\w.-]+-[0-9a-f]{10}")                       # entry_folder's names
_TEMP_NAME = re.compile(r"\.[\w.-]+-[0-9a-f]{10}\.(tmp|old)-[\w-]+")     # write_cache's temporary folders
_TEMP_FILE = re.compile(r"\.[\w.-]+\.gguf\.tmp-[\w-]+")                   # a model file being assembled
SECOND_CONVERSION = "stale: a second conversion of the model in"
_ENTRY_FILES = ("manifest.json", "config.json", "model.safetensors", "tokenizer")


def _folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def cache_entries(root: Path | None = None) -> list[CacheEntry]:
    """Every entry under the cache root, with its size and whether a load could still use it.

    An entry is stale when none of its source files exists any more with the same content (the
    virtual environment or clone it came from was deleted, the package was upgraded), when a load
    uses another entry of the same content (``same_model``), when its manifest is missing (a
    conversion that died), or when it is a leftover temporary folder or file. The model files in
    ``gguf/`` are listed as in use: a load of their model reads them.
    """
    root = cache_root() if root is None else Path(root)
    entries, complete = [], {}
    for folder in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        # Only folders that write_cache names and fills are looked at: $LLMLAB_CACHE may point
        # somewhere that holds other things too, and those are never listed or deleted.
        if _TEMP_NAME.fullmatch(folder.name):
            if _old(folder):   # a younger one may still be being written
                entries.append(CacheEntry(folder, _folder_bytes(folder), [], "stale: leftover temporary folder"))
            continue
        if not _ENTRY_NAME.fullmatch(folder.name) or not any((folder / f).exists() for f in _ENTRY_FILES):
            continue
        if (folder / "manifest.json").is_file():
            complete.setdefault(folder.name[-10:], []).append(folder)
        else:
            entries.append(CacheEntry(folder, _folder_bytes(folder), _entry_sources(folder),
                                      "stale: no manifest (an unfinished conversion)"))
    for identity in complete:
        kept, *copies = same_model(root, identity)
        sources = list(dict.fromkeys(s for folder in (kept, *copies) for s in _entry_sources(folder)))
        used = any(Path(s).is_file() and source_identity(Path(s)) == identity for s in sources)
        entries.append(CacheEntry(kept, _folder_bytes(kept), sources,
                                  "in use" if used else "stale: its source files are gone or changed"))
        entries += [CacheEntry(copy, _folder_bytes(copy), _entry_sources(copy),
                               f"{SECOND_CONVERSION} {kept.name}") for copy in copies]
    entries.sort(key=lambda entry: entry.folder)
    for file in sorted((root / MODEL_FILES).iterdir()) if (root / MODEL_FILES).is_dir() else []:
        if file.is_file() and file.suffix == ".gguf":
            entries.append(CacheEntry(file, file.stat().st_size, [], "in use"))
        elif file.is_file() and _TEMP_FILE.fullmatch(file.name) and _old(file):
            entries.append(CacheEntry(file, file.stat().st_size, [], "stale: leftover temporary file"))
    return entries


def _old(path: Path) -> bool:
    return time.time() - path.stat().st_mtime > 3600


def clean_cache(root: Path | None = None, dry_run: bool = False) -> list[CacheEntry]:
    """Delete the stale entries of cache_entries() (never one in use); return what was (or would be) deleted.

    The sources of a second conversion are noted in the kept entry first, so it stays in use while they exist.
    """
    stale = [entry for entry in cache_entries(root) if entry.stale]
    if not dry_run:
        for entry in stale:
            if entry.status.startswith(SECOND_CONVERSION):
                kept = same_model(entry.folder.parent, entry.folder.name[-10:])[0]
                for source in entry.sources:
                    remember_source(kept, Path(source))
            if entry.folder.is_dir():
                shutil.rmtree(entry.folder, ignore_errors=True)
            else:
                entry.folder.unlink(missing_ok=True)
    return stale
