"""The live model in headless Chromium: load, first token, decode step, a view's run, memory, file sizes.

    .venv/bin/python benchmarks/live_benchmark.py [--before DIR] [--wllama DIR] [--repeats 3]

Opens pages laid out like the built book, from file:// and from a local server, and measures inside the
page, on one WebAssembly thread:
  - load: llmlabLive.ready() on a first page (the files read, the decode kernel given the blocks);
  - the first token of a 32-token prompt and a greedy decode step (the median over 32 written tokens,
    with the KV cache), and a step without the cache;
  - the peak resident memory of the page's renderer (VmHWM, which includes the model's Web Worker)
    after writing only (what a page that writes holds), then after a view's run too (llmlabLive.run on
    32 tokens: attention, the lens at the last 8 positions, which start onnxruntime);
  - a second page of the same browser: its load (the bytes kept in IndexedDB) and its first writing;
  - six pages read one after another in one tab (each loads the model and writes 8 tokens): the
    renderer's resident memory after the sixth and its peak.
--before DIR measures an earlier build in the same run, back to back (DIR/live: its assets/live,
DIR/vendor: its assets/vendor/live). --wllama DIR (an npm folder holding @wllama/wllama) measures
llama.cpp's WebAssembly build on the same GGUF file, one thread, from the local server (it loads an ES
module and fetches the file, which file:// does not allow). No figure is asserted. Needs `make live`.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from live_driver import Chromium, static_server  # noqa: E402

VENDOR = ROOT / "assets" / "vendor" / "live"
TARGETS = {"load": "<= 8 s", "prefill": "<= 0.5 s", "decode": "<= 30 ms", "peak_http": "<= 0.6 GB",
           "peak_file": "<= 0.8 GB"}
N = 32


def prompt_of(n_tokens: int) -> str:
    """A prompt of exactly n_tokens SmolLM2 tokens (" the" is one token; "The" starts it)."""
    return "The" + " the" * (n_tokens - 1)


def make_site(folder: Path, live: Path, vendor: Path) -> Path:
    """page.html and six chapter pages over _static/live (the page code) and _static/vendor/live (the files)."""
    static = folder / "_static"
    shutil.copytree(live, static / "live")
    (static / "vendor").mkdir(parents=True)
    (static / "vendor" / "live").symlink_to(vendor.resolve(), target_is_directory=True)
    for name in ["page"] + [f"chapter{i}" for i in range(6)]:
        (folder / f"{name}.html").write_text(
            "<!DOCTYPE html><html data-content_root='./'><head><meta charset='utf-8'>"
            "<script src='_static/live/llmlab-live.js'></script></head><body></body></html>", encoding="utf-8")
    return folder


WRITE = """(async () => {
  const out = [];
  for (let i = 0; i < %d; i++) {
    const g = await llmlabLive.generate(%s, {maxNewTokens: %d, cache: %s});
    if (g.promptIds.length !== %d) throw new Error('prompt of ' + g.promptIds.length + ' tokens');
    out.push([g.timings.prefill_ms, g.steps]);
  }
  return out; })()"""


def measure(folder: Path, http: bool, repeats: int) -> dict:
    """Every figure of one build, opened one way (a new browser)."""
    r = {}
    with Chromium(loopback=http) as browser:
        server = static_server(str(folder)) if http else None
        base = server.__enter__() if server else folder.as_uri() + "/"
        try:
            page = browser.open(base + "page.html")
            start = time.perf_counter()
            page.evaluate("llmlabLive.ready().then(info => info.source)", timeout=600)
            r["load_s"] = time.perf_counter() - start
            cached = page.evaluate(WRITE % (repeats, json.dumps(prompt_of(N)), N, "true", N), timeout=900)
            plain = page.evaluate(WRITE % (1, json.dumps(prompt_of(N)), 16, "false", N), timeout=900)
            r["prefill_s"] = statistics.median(p for p, _ in cached) / 1000
            r["decode_ms"] = statistics.median(ms for _, steps in cached for ms in steps)
            r["no_cache_ms"] = statistics.median(plain[0][1])
            r["peak_write_gb"] = browser.renderer_peak_bytes() / 1e9
            runs = page.evaluate(f"""(async () => {{ const out = [];
                for (let i = 0; i < {repeats}; i++) {{ const t0 = performance.now();
                  await llmlabLive.run({json.dumps(prompt_of(N))}, {{lensLast: 8}}); out.push(performance.now() - t0); }}
                return out; }})()""", timeout=600)
            r["view_first_s"], r["view_s"] = runs[0] / 1000, statistics.median(runs[1:] or runs) / 1000
            r["peak_view_gb"] = browser.renderer_peak_bytes() / 1e9
            second = browser.open(base + "page.html")
            start = time.perf_counter()
            second.evaluate("llmlabLive.ready().then(info => info.source)", timeout=600)
            r["load2_s"] = time.perf_counter() - start
            again = second.evaluate(WRITE % (1, json.dumps(prompt_of(N)), 8, "true", N), timeout=600)
            r["second_prefill_s"] = again[0][0] / 1000
        finally:
            if server:
                server.__exit__(None, None, None)
    with Chromium(loopback=http) as browser:           # six pages, one tab, as a reader goes through chapters
        server = static_server(str(folder)) if http else None
        base = server.__enter__() if server else folder.as_uri() + "/"
        try:
            tab = browser.open(base + "chapter0.html")
            for i in range(6):
                if i:
                    tab.navigate(base + f"chapter{i}.html")
                tab.evaluate(WRITE % (1, json.dumps(prompt_of(8)), 8, "true", 8), timeout=600)
            r["six_now_gb"] = browser.renderer_bytes() / 1e9
            r["six_peak_gb"] = browser.renderer_peak_bytes() / 1e9
        finally:
            if server:
                server.__exit__(None, None, None)
    return r


WLLAMA_PAGE = """<!DOCTYPE html><html><head><meta charset='utf-8'></head><body><script type='module'>
import { Wllama } from './wllama/esm/index.js';
window.bench = async function (prompt, n) {
  const w = new Wllama({ default: './wllama/esm/wasm/wllama.wasm' });
  const blob = await (await fetch('model.gguf')).blob();
  let t0 = performance.now();
  await w.loadModel([blob], { n_threads: 1, n_gpu_layers: 0, n_ctx: 1024 });
  const load = performance.now() - t0, times = [];
  t0 = performance.now();
  await w.createCompletion({ prompt, max_tokens: n, temperature: 0, stream: true,
                             onData: () => { times.push(performance.now()); } });
  const steps = times.slice(1).map((t, i) => t - times[i]);
  steps.sort((a, b) => a - b);
  return { load_ms: load, first_ms: times[0] - t0, step_ms: steps[steps.length >> 1], threads: w.getNumThreads(),
           tokens: times.length };
};
</script></body></html>"""


def measure_wllama(npm_folder: Path, repeats: int) -> dict:
    from llmlab.live.blocks import smollm2_gguf_path

    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        (folder / "wllama").symlink_to((npm_folder / "node_modules" / "@wllama" / "wllama").resolve())
        (folder / "model.gguf").symlink_to(smollm2_gguf_path().resolve())
        (folder / "wllama.html").write_text(WLLAMA_PAGE, encoding="utf-8")
        with Chromium(loopback=True) as browser, static_server(str(folder)) as base:
            page = browser.open(base + "wllama.html")
            for _ in range(100):
                if page.evaluate("typeof window.bench === 'function'"):
                    break
                time.sleep(0.1)
            runs = [page.evaluate(f"bench({json.dumps(prompt_of(N))}, {N})", timeout=600) for _ in range(repeats)]
            r = {"decode_ms": statistics.median(x["step_ms"] for x in runs),
                 "prefill_s": statistics.median(x["first_ms"] for x in runs) / 1000,
                 "threads": runs[0]["threads"], "peak_gb": browser.renderer_peak_bytes() / 1e9}
    return r


ROWS = [("load_s", "load, first page (ready())", "{:.1f} s", TARGETS["load"]),
        ("prefill_s", "first token of a 32-token prompt", "{:.2f} s", TARGETS["prefill"]),
        ("decode_ms", "greedy decode step (KV cache)", "{:.0f} ms", TARGETS["decode"]),
        ("no_cache_ms", "step without the cache (tokens 33-48)", "{:.0f} ms", ""),
        ("peak_write_gb", "peak renderer memory, writing only", "{:.2f} GB", "http <= 0.6, file <= 0.8"),
        ("view_first_s", "a view's first run (32 tokens, lens x 8)", "{:.2f} s", ""),
        ("view_s", "a view's next runs", "{:.2f} s", ""),
        ("peak_view_gb", "peak renderer memory, writing + a view", "{:.2f} GB", ""),
        ("load2_s", "second page: load (IndexedDB)", "{:.1f} s", ""),
        ("second_prefill_s", "second page: first token", "{:.2f} s", ""),
        ("six_now_gb", "six pages: resident after the sixth", "{:.2f} GB", ""),
        ("six_peak_gb", "six pages: peak", "{:.2f} GB", "")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="an earlier build (DIR/live, DIR/vendor) measured in the same run")
    parser.add_argument("--wllama", type=Path, help="an npm folder holding @wllama/wllama, measured on the same GGUF")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--modes", default="http,file", help="http, file or both (comma-separated)")
    args = parser.parse_args()
    if not (VENDOR / "manifest.js").is_file():
        sys.exit(f"{VENDOR} has no live model files: run `make live` first.")

    builds = [("before", args.before / "live", args.before / "vendor")] if args.before else []
    builds.append(("now", ROOT / "assets" / "live", VENDOR))
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        sites = {label: make_site(Path(tmp) / label, live, vendor) for label, live, vendor in builds}   # copied first
        for label, folder in sites.items():
            for mode in args.modes.split(","):
                results[label, mode] = measure(folder, mode == "http", args.repeats)
        wllama = measure_wllama(args.wllama, args.repeats) if args.wllama else None

    print(f"live model benchmark (headless Chromium, one WebAssembly thread; load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores)")
    columns = list(results)
    print(f"{'measure':<44}" + "".join(f"{label + ' ' + mode:>16}" for label, mode in columns) + "   target")
    for key, name, fmt, target in ROWS:
        print(f"{name:<44}" + "".join(f"{fmt.format(results[c][key]):>16}" for c in columns) + f"   {target}")
    if wllama:
        now = results.get(("now", "http"))
        print(f"wllama (@wllama/wllama, same GGUF, {wllama['threads']} thread, http): decode step "
              f"{wllama['decode_ms']:.0f} ms, first token of 32 {wllama['prefill_s']:.2f} s, peak renderer memory "
              f"{wllama['peak_gb']:.2f} GB")
        if now:
            print(f"  ratios, this book's kernel / wllama: step time {now['decode_ms'] / wllama['decode_ms']:.2f}, "
                  f"peak memory (writing only) {now['peak_write_gb'] / wllama['peak_gb']:.2f}")
    manifest = (VENDOR / "manifest.js").read_text()
    files = json.loads(manifest[manifest.index("{"):manifest.rindex("}") + 1])["files"]
    print(f"{'all live files':<44}{sum(f['script_bytes'] for f in files) / 1e6:>8.1f} MB")
    for f in files:
        print(f"  {f['script']:<42}{f['script_bytes'] / 1e6:>8.2f} MB")


if __name__ == "__main__":
    main()
