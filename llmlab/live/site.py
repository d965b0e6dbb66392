"""The live model's files for a static site: script files that load from file:// and from any server.

A page opened from file:// may not fetch() anything, but it may run classic <script src> files.
So every binary (the ONNX graph, its weight chunks, onnxruntime-web's .wasm) ships as a script
that hands its bytes to the page:

    llmlabLiveFiles["model.data.0"] = {bytes: 41943040, text: function () {/*...*/}};

The text is the bytes cut into 15-bit numbers, each written as one character U+3000 + n, in a
file saved as UTF-16 with a byte-order mark. Each character costs 2 bytes for 15 bits (+6.7%;
base64 in UTF-8 would cost +33%), no character needs escaping, and the byte-order mark makes
every browser read the file as UTF-16 whatever the server says. The text sits in a comment inside
a function that is never called: the browser only skims a comment (a string literal of 22 million
characters took about five times as long to parse, and the engine kept a second copy of it), and
the page reads it back with String(function), a slice of the script's own source.
assets/live/llmlab-live.js undoes it.

    write_site("assets/vendor/live", npm_folder="web/node_modules/onnxruntime-web/dist")
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from llmlab.live.blocks import smollm2_config, smollm2_gguf_path
from llmlab.live.export import CONTEXT, LENS_K, MAX_TOKENS, export_onnx
from llmlab.live.kernel import WASM as KERNEL_WASM

ORT_FILES = ("ort.wasm.min.js", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm")
MAX_FILE_BYTES = 50_000_000      # what common static hosts accept comfortably
BASE_CHAR = 0x3000               # 0x3000 .. 0xAFFF: no surrogates, quotes, backslashes or line breaks


def encode_15bit(data: bytes) -> str:
    """Bytes -> characters U+3000 + (15-bit number), big-endian bit order, zero-padded.

    >>> [hex(ord(c) - BASE_CHAR) for c in encode_15bit(b"\\xff\\xff")]   # 16 bits -> 2 characters
    ['0x7fff', '0x4000']
    """
    pad = (-len(data)) % 15
    groups = np.frombuffer(data + b"\0" * pad, dtype=np.uint8).reshape(-1, 15).astype(np.uint64)  # (n, 15)
    a = np.zeros(len(groups), np.uint64)   # the first 8 bytes as one 64-bit number
    b = np.zeros(len(groups), np.uint64)   # the last 7 bytes as one 56-bit number
    for i in range(8):
        a = (a << np.uint64(8)) | groups[:, i]
    for i in range(8, 15):
        b = (b << np.uint64(8)) | groups[:, i]
    mask = np.uint64(0x7FFF)
    chars = np.empty((len(groups), 8), np.uint64)                  # 8 characters of 15 bits = 120 bits
    for k in range(4):
        chars[:, k] = (a >> np.uint64(64 - 15 * (k + 1))) & mask
    chars[:, 4] = ((a & np.uint64(0xF)) << np.uint64(11)) | (b >> np.uint64(45))
    for k in range(5, 8):
        chars[:, k] = (b >> np.uint64(56 - 11 - 15 * (k - 4))) & mask
    n_chars = -(-len(data) * 8 // 15)
    codes = (chars.reshape(-1)[:n_chars] + BASE_CHAR).astype(np.uint16)
    return codes.tobytes().decode("utf-16-le")


def decode_15bit(text: str, n_bytes: int) -> bytes:
    """The inverse of encode_15bit (what loader.js does), for tests."""
    out, acc, bits = bytearray(), 0, 0
    for ch in text:
        acc, bits = (acc << 15) | (ord(ch) - BASE_CHAR), bits + 15
        while bits >= 8:
            bits -= 8
            out.append((acc >> bits) & 0xFF)
        acc &= (1 << bits) - 1
    return bytes(out[:n_bytes])


def write_binary_script(path: Path, key: str, data: bytes) -> int:
    """Write data as a UTF-16 script file that stores it in llmlabLiveFiles[key]; returns the file's size."""
    text = f'llmlabLiveFiles[{json.dumps(key)}] = {{bytes: {len(data)}, text: function () {{/*{encode_15bit(data)}*/}}}};\n'
    path.write_bytes(b"\xff\xfe" + text.encode("utf-16-le"))
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise ValueError(f"{path} has {size} bytes, more than {MAX_FILE_BYTES}: make the export's chunks smaller.")
    return size


def write_text_script(path: Path, key: str, value) -> int:
    """A UTF-8 script file that stores a string or JSON value in llmlabLiveFiles[key]."""
    path.write_text(f"llmlabLiveFiles[{json.dumps(key)}] = {json.dumps(value, ensure_ascii=True)};\n",
                    encoding="utf-8")
    return path.stat().st_size


def tokenizer_json() -> dict:
    """What the JavaScript tokenizer needs: SmolLM2's vocabulary, merges, pre-split patterns, specials."""
    import llmlab

    _, tokenizer = llmlab.load("smollm2-135m", device="cpu")
    d = tokenizer.to_dict()
    return dict(tokens=d["tokens"], merges=d["merges"], patterns=d["patterns"],
                special_tokens=dict(tokenizer.special_tokens), bos_token_id=tokenizer.bos_token_id)


def inputs_digest(npm_folder: Path) -> str:
    """A digest of everything the files depend on (the GGUF file's identity, the export code, onnxruntime-web)."""
    h = hashlib.sha256()
    gguf = smollm2_gguf_path()
    h.update(f"{gguf.name}:{gguf.stat().st_size}".encode())
    for source in sorted(Path(__file__).parent.glob("*.py")):
        h.update(source.read_bytes())
    for name in ORT_FILES:
        h.update(hashlib.sha256((npm_folder / name).read_bytes()).digest())
    h.update(KERNEL_WASM.read_bytes())
    return h.hexdigest()[:16]


def write_site(folder: str | os.PathLike, npm_folder: str | os.PathLike) -> dict:
    """Write every live file into `folder` (replacing what is there); returns the manifest."""
    folder, npm_folder = Path(folder), Path(npm_folder)
    missing = [name for name in ORT_FILES if not (npm_folder / name).is_file()]
    if missing:
        raise FileNotFoundError(f"onnxruntime-web's files {missing} are not in {npm_folder}. Install them with "
                                f"`npm ci --prefix web` (the Makefile's `live` target does).")
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".llmlab-live-", dir=folder.parent))   # same disk: rename at the end
    try:
        files = []
        config = smollm2_config()
        with tempfile.TemporaryDirectory() as onnx_dir:
            graph = export_onnx(onnx_dir, expanded=False)       # the page expands the weights itself
            for path in sorted(Path(onnx_dir).iterdir(), key=lambda p: (p.suffix != ".onnx", p.name)):
                name = path.name
                if path.suffix == ".json":
                    size = write_text_script(staging / f"{name}.js", name, json.loads(path.read_text()))
                else:
                    size = write_binary_script(staging / f"{name}.js", name, path.read_bytes())
                files.append(dict(script=f"{name}.js", key=name, bytes=path.stat().st_size, script_bytes=size))
        assert graph.name == "model.onnx"
        for name in ORT_FILES:
            data = (npm_folder / name).read_bytes()
            script = f"{name}.js"
            size = write_binary_script(staging / script, name, data) if name.endswith(".wasm") else \
                write_text_script(staging / script, name, data.decode("utf-8"))
            files.append(dict(script=script, key=name, bytes=len(data), script_bytes=size))
        data = KERNEL_WASM.read_bytes()                            # the decode kernel (llmlab.live.kernel)
        size = write_binary_script(staging / "decode.wasm.js", "decode.wasm", data)
        files.append(dict(script="decode.wasm.js", key="decode.wasm", bytes=len(data), script_bytes=size))
        size = write_text_script(staging / "tokenizer.js", "tokenizer", tokenizer_json())
        files.append(dict(script="tokenizer.js", key="tokenizer", bytes=size, script_bytes=size))
        manifest = dict(model="SmolLM2-135M-Instruct (Q4_1 GGUF)", max_tokens=MAX_TOKENS, context=CONTEXT,
                        lens_k=LENS_K, n_layers=config.n_layers, n_heads=config.n_heads,
                        n_kv_heads=config.n_kv_heads, head_dim=config.head_dim, d_model=config.d_model,
                        digest=inputs_digest(npm_folder), files=files)
        (staging / "manifest.js").write_text(f"var llmlabLiveManifest = {json.dumps(manifest, indent=1)};\n")
        staging.chmod(0o755)                       # mkdtemp makes it private; a web server must read it
        if folder.exists():
            shutil.rmtree(folder)
        staging.rename(folder)
        return manifest
    finally:
        if staging.exists():
            shutil.rmtree(staging)
