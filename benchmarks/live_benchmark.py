"""The live model in headless Chromium: load, prefill, decode step, a view's run, peak memory, file sizes.

    .venv/bin/python benchmarks/live_benchmark.py [--http] [--repeats 3]

Opens a page laid out like the built book (from file://, or from a local server with --http) and
measures, inside the page, on one WebAssembly thread:
  - load: llmlabLive.ready() on a first page (the files read, the session started with the weights
    expanded as onnxruntime copies them), then on a second page of the same browser (the bytes kept
    in IndexedDB, as a reader's next chapter), and the longest task on the page's main thread while
    the first page loads (how long hovers and clicks may wait);
  - the first token of a 32-token prompt (prefill) and a greedy decode step (the median over 32
    written tokens, with the KV cache), and the same writing without the cache;
  - a view's run (llmlabLive.run on 32 tokens: attention, the lens at the last 8 positions);
  - the peak resident memory of the page's renderer (VmHWM, which includes the model's Web Worker).
It prints each figure next to the book's target; no figure is asserted. Needs `make live` first.
The backend is onnxruntime-web's WebAssembly one (the book's pages use it everywhere, from file://
too); the output says whether the browser offered a WebGPU adapter, which the page does not use yet.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from live_driver import Chromium, static_server  # noqa: E402
from test_live_browser import VENDOR, make_site   # noqa: E402

TARGETS = {"load": "<= 8 s", "prefill": "<= 0.5 s", "decode": "<= 50 ms", "peak": "<= 1 GB"}


def prompt_of(n_tokens: int) -> str:
    """A prompt of exactly n_tokens SmolLM2 tokens (" the" is one token; "The" starts it)."""
    return "The" + " the" * (n_tokens - 1)


def sizes() -> list[tuple[str, int]]:
    manifest = (VENDOR / "manifest.js").read_text()
    files = json.loads(manifest[manifest.index("{"):manifest.rindex("}") + 1])["files"]
    return [(f["script"], f["script_bytes"]) for f in files]


WRITE = """(async () => {
  const out = [];
  for (let i = 0; i < %d; i++) {
    const g = await llmlabLive.generate(%s, {maxNewTokens: %d, cache: %s});
    if (g.promptIds.length !== %d) throw new Error('prompt of ' + g.promptIds.length + ' tokens');
    out.push([g.timings.prefill_ms, g.steps]);
  }
  return out; })()"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", action="store_true", help="serve the page from a local web server instead of file://")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as folder, Chromium(loopback=args.http) as browser:
        page_path = make_site(Path(folder))
        server = static_server(folder) if args.http else None
        url = server.__enter__() + "page.html" if server else page_path.as_uri()
        try:
            page = browser.open(url)
            webgpu = page.evaluate("navigator.gpu ? navigator.gpu.requestAdapter().then(a => !!a, () => false) : false")
            page.evaluate("window.longest = 0; new PerformanceObserver(list => list.getEntries().forEach(e => "
                          "{ window.longest = Math.max(window.longest, e.duration); })).observe({type: 'longtask'}); 1")
            start = time.perf_counter()
            first = page.evaluate("llmlabLive.ready().then(info => [info.source, info.timings])", timeout=600)
            load_s = time.perf_counter() - start
            longest_task = page.evaluate("window.longest")
            n = 32
            cached = page.evaluate(WRITE % (args.repeats, json.dumps(prompt_of(n)), n, "true", n), timeout=900)
            plain = page.evaluate(WRITE % (1, json.dumps(prompt_of(n)), 16, "false", n), timeout=900)
            runs = page.evaluate(f"""(async () => {{ const out = [];
                for (let i = 0; i < {args.repeats}; i++) out.push((await llmlabLive.run({json.dumps(prompt_of(n))},
                  {{lensLast: 8}})).ms);
                return out; }})()""", timeout=600)
            peak_first = browser.renderer_peak_bytes()
            second = browser.open(url)
            start = time.perf_counter()
            again = second.evaluate("llmlabLive.ready().then(info => [info.source, info.timings])", timeout=600)
            load2_s = time.perf_counter() - start
            peak = browser.renderer_peak_bytes()
        finally:
            if server:
                server.__exit__(None, None, None)

    prefill = statistics.median(p for p, _ in cached) / 1000
    decode = statistics.median(ms for _, steps in cached for ms in steps) / 1000
    no_cache = plain[0][1]
    files = sizes()
    model = sum(b for name, b in files if name.startswith("model."))
    print(f"live model benchmark ({'http://127.0.0.1' if args.http else 'file://'}, headless Chromium, "
          f"onnxruntime-web WebAssembly backend, one thread; a WebGPU adapter: {'offered, not used' if webgpu else 'none'}; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    print(f"{'measure':<44}{'value':>10}   target")
    print(f"{'load, first page (ready())':<44}{load_s:>8.1f} s   {TARGETS['load']}   (files from: {first[0]})")
    for part, label in (("files_ms", "  reading the files"), ("store_ms", "  keeping them in IndexedDB"),
                        ("session_ms", "  onnxruntime session"), ("expand_ms", "    of which expanding the weights")):
        print(f"{label:<44}{first[1].get(part, 0) / 1000:>8.1f} s")
    print(f"{'  longest main-thread task while loading':<44}{longest_task:>8.0f} ms")
    print(f"{'load, next page (ready())':<44}{load2_s:>8.1f} s   {TARGETS['load']}   (files from: {again[0]})")
    print(f"{'first token of a 32-token prompt':<44}{prefill:>8.2f} s   {TARGETS['prefill']}")
    print(f"{'greedy decode step (KV cache)':<44}{decode * 1000:>8.0f} ms  {TARGETS['decode']}")
    print(f"{'  tokens per second':<44}{1 / decode:>8.1f}")
    print(f"{'decode step without the cache (tokens 33-48)':<44}{statistics.median(no_cache):>8.0f} ms")
    print(f"{'a view run, 32 tokens (attention, lens x 8)':<44}{statistics.median(runs) / 1000:>8.2f} s")
    print(f"{'peak renderer memory (first page)':<44}{peak_first / 1e9:>8.2f} GB  {TARGETS['peak']}")
    print(f"{'peak renderer memory (both pages)':<44}{peak / 1e9:>8.2f} GB")
    print(f"{'model files (graph, blocks, recipe)':<44}{model / 1e6:>8.1f} MB")
    print(f"{'largest file':<44}{max(b for _, b in files) / 1e6:>8.1f} MB")
    print(f"{'all live files (+ runtime, tokenizer)':<44}{sum(b for _, b in files) / 1e6:>8.1f} MB")
    for name, b in files:
        print(f"  {name:<42}{b / 1e6:>8.2f} MB")


if __name__ == "__main__":
    main()
