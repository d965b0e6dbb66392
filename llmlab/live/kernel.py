"""The live model's decode kernel: llmlab/live/decode.c built to decode.wasm (checked in next to it).

    python -m llmlab.live.kernel            # rebuild decode.wasm (what `make live` runs)
    python -m llmlab.live.kernel --check    # exit 1 if decode.wasm is not what decode.c builds to

The compiler is zig's C compiler from the `ziglang` wheel (pinned in requirements.txt): one version on
every machine, so the same source gives the same bytes (tests/test_live_kernel.py rebuilds and compares).
The module is freestanding WebAssembly with 128-bit SIMD: no libc, no imports, five exports (memory,
model, alloc, setup, forward; see decode.c). The page's side is assets/live/kernel.js.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE = Path(__file__).with_name("decode.c")
WASM = Path(__file__).with_name("decode.wasm")
EXPORTS = ("model", "alloc", "setup", "forward")
FLAGS = ["--target=wasm32-freestanding", "-mcpu=generic+simd128", "-O3", "-nostdlib",
         "-s",                                  # no names or paths in the output: the bytes depend on the source only
         "-Wl,--no-entry", *[f"-Wl,--export={name}" for name in EXPORTS]]


def build_kernel(out: str | Path = WASM, source: str | Path = SOURCE) -> Path:
    """Compile decode.c to `out` with the pinned zig cc; returns `out`."""
    try:
        import ziglang  # noqa: F401  (the wheel that carries the compiler)
    except ImportError:
        raise RuntimeError("Building the decode kernel needs the `ziglang` wheel: pip install -r requirements.txt "
                           "(it pins ziglang==0.13.0).") from None
    out = Path(out)
    run = subprocess.run([sys.executable, "-m", "ziglang", "cc", *FLAGS, "-o", str(out), str(source)],
                         capture_output=True, text=True)
    if run.returncode:
        raise RuntimeError(f"zig cc could not build {source}:\n{run.stderr}")
    return out


def kernel_is_current() -> bool:
    """True when the checked-in decode.wasm is byte for byte what decode.c builds to now."""
    with tempfile.TemporaryDirectory() as tmp:
        return WASM.is_file() and build_kernel(Path(tmp) / "decode.wasm").read_bytes() == WASM.read_bytes()


if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        if not kernel_is_current():
            sys.exit(f"{WASM} is not what {SOURCE.name} builds to: run `python -m llmlab.live.kernel` and commit it.")
        print(f"decode kernel: {WASM.name} matches {SOURCE.name}")
    elif sys.argv[1:]:
        sys.exit("usage: python -m llmlab.live.kernel [--check]")
    else:
        print(f"decode kernel: wrote {build_kernel()} ({WASM.stat().st_size} bytes)")
