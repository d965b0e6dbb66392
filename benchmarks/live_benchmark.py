"""The live model in headless Chromium: load time, forward time per prompt length, peak memory, sizes.

    .venv/bin/python benchmarks/live_benchmark.py [--http] [--repeats 3]

Opens a page laid out like the built book (from file://, or from a local server with --http), loads
the model with llmlabLive.ready(), then times llmlabLive.run() on prompts of 4, 16, 32 and 64 tokens
(the median of --repeats runs, measured inside the page). The peak is the renderer process's peak
resident memory (VmHWM), which includes the Web Worker that runs the model. Needs `make live` first.
Budgets (the book's): load <= 20 s, a 16-token pass <= 1.5 s on one thread, peak <= 2 GB, model
files <= 110 MB in all and <= 50 MB each.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from live_driver import Chromium, static_server  # noqa: E402
from test_live_browser import VENDOR, make_site   # noqa: E402

LENGTHS = (4, 16, 32, 64)


def prompt_of(n_tokens: int) -> str:
    """A prompt of exactly n_tokens SmolLM2 tokens (" the" is one token; "The" starts it)."""
    return "The" + " the" * (n_tokens - 1)


def sizes() -> list[tuple[str, int]]:
    manifest = (VENDOR / "manifest.js").read_text()
    files = json.loads(manifest[manifest.index("{"):manifest.rindex("}") + 1])["files"]
    return [(f["script"], f["script_bytes"]) for f in files]


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
            start = time.perf_counter()
            timings = page.evaluate("llmlabLive.ready().then(info => info.timings)", timeout=600)
            load_s = time.perf_counter() - start
            times = {}
            for n in LENGTHS:
                runs = page.evaluate(f"""(async () => {{
                    const out = [];
                    for (let i = 0; i < {args.repeats}; i++) {{
                      const t = performance.now();
                      const r = await llmlabLive.run({json.dumps(prompt_of(n))});
                      out.push([performance.now() - t, r.ids.length]);
                    }}
                    return out; }})()""", timeout=600)
                assert all(length == n for _, length in runs), runs
                times[n] = statistics.median(ms for ms, _ in runs) / 1000
            peak = browser.renderer_peak_bytes()
        finally:
            if server:
                server.__exit__(None, None, None)

    files = sizes()
    model = sum(b for name, b in files if name.startswith("model."))
    import os

    print(f"live model benchmark ({'http://127.0.0.1' if args.http else 'file://'}, headless Chromium, one wasm "
          f"thread; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    print(f"{'measure':<34}{'value':>12}")
    print(f"{'load (ready())':<34}{load_s:>10.1f} s")
    for part, label in (("files_ms", "  reading the script files"), ("decode_ms", "  decoding them (worker)"),
                        ("session_ms", "  onnxruntime session")):
        print(f"{label:<34}{timings[part] / 1000:>10.1f} s")
    for n in LENGTHS:
        print(f"{f'forward pass, {n} tokens':<34}{times[n]:>10.2f} s")
    print(f"{'peak renderer memory':<34}{peak / 1e9:>10.2f} GB")
    print(f"{'model files (graph + weights)':<34}{model / 1e6:>10.1f} MB")
    print(f"{'largest file':<34}{max(b for _, b in files) / 1e6:>10.1f} MB")
    print(f"{'all live files (+ runtime, tokenizer)':<34}{sum(b for _, b in files) / 1e6:>10.1f} MB")
    for name, b in files:
        print(f"  {name:<32}{b / 1e6:>10.2f} MB")


if __name__ == "__main__":
    main()
