"""Convert the book's two offline models once, so that chapters and tests load them in seconds."""
import time

import llmlab
from llmlab.disk_cache import cache_entries

for name in ("smollm2-135m", "gemma3-270m"):
    start = time.perf_counter()
    llmlab.load(name)
    print(f"{name}: ready in {time.perf_counter() - start:.1f} s")

stale = [entry for entry in cache_entries() if entry.stale]
if stale:
    size = sum(entry.bytes for entry in stale) / 2**20
    print(f"The llmlab cache holds {len(stale)} stale entries ({size:,.0f} MiB) that no load can use any more; "
          "`.venv/bin/llmlab cache --clean` deletes them.")
