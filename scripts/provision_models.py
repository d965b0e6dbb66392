"""Convert the book's two offline models once, so that chapters and tests load them in seconds."""
import time

import llmlab

for name in ("smollm2-135m", "gemma3-270m"):
    start = time.perf_counter()
    llmlab.load(name)
    print(f"{name}: ready in {time.perf_counter() - start:.1f} s")
