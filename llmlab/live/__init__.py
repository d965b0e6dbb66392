"""SmolLM2-135M for the browser: the book's live model.

The built book runs SmolLM2 in the reader's browser with onnxruntime-web. This package writes
what that needs, from the same GGUF file llmlab loads:

    export.py   the model as an ONNX graph written node by node from llmlab's config, keeping
                the file's own 4- and 8-bit numbers (no re-quantization), with the outputs the
                views show: next-token probabilities, every attention pattern, the logit lens.
    blocks.py   the GGUF file's Q4_1 and Q8_0 blocks, and their expansion to float32 (as gguf.quants).
    decode.c    the forward pass that writes tokens, in WebAssembly with SIMD, reading those blocks
                directly (no float32 copy); kernel.py builds it to decode.wasm with the pinned zig cc.
    site.py     the files a static page can load from file:// or any web server (the graph and
                its weights in script files of at most 50 MB, the tokenizer), rebuilt only when
                their inputs change.

    python -m llmlab.live _build/html/live      # what `make book` runs

The page side (loading, the Web Worker, the tokenizer in JavaScript) lives in assets/live/.
"""
from llmlab.live.export import CONTEXT, LIVE_OUTPUTS, MAX_TOKENS, export_onnx, run_onnx

__all__ = ["CONTEXT", "LIVE_OUTPUTS", "MAX_TOKENS", "export_onnx", "run_onnx"]
