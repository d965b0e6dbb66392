"""Run readouts on a long prompt and report how far each one raised the process's peak memory.

Run by tests/test_readout_memory.py in a process of its own (python readout_memory_child.py MODEL TOKENS
BUDGET_MIB NAME...); also by hand, e.g. `python tests/readout_memory_child.py gemma3-270m 10000 1024 lens_all`.
It prints one JSON line per readout: {"name", "growth" and "peak" (bytes: how far above the start, and the
peak resident size itself), "seconds", "error" (or null)}.

The peak is the kernel's own (VmHWM in /proc/self/status): before each readout it is reset to the current
resident size (writing 5 to /proc/self/clear_refs), so `growth` is how far above what the process held
the readout went at its worst, every tensor and copy included (tracemalloc does not see torch's memory).
Where the reset is not allowed (exit code 87 when asked for several readouts), run one readout per process:
its growth is then measured from the peak of a warm-up forward pass of the same prompt, which it includes.

A watchdog thread ends the process (exit code 86) as soon as the resident size grows CAP_MIB above where the
readouts started, so a readout that takes all the memory it can (the one this test exists for) fails the
test instead of taking the machine.
"""
import ctypes
import json
import os
import sys
import threading
import time

import torch

TEXT = ("The Eiffel Tower is in the city of Paris, and the Colosseum is in Rome. Every morning the baker opens "
        "the shop at six and sells the first loaves warm; the children count the boats in the harbour while their "
        "parents have lunch, and a thick fog covers the valley until the sun burns it away.")
CAP_MIB = int(os.environ.get("READOUT_MEMORY_CAP_MIB", "3072"))
PAGE = os.sysconf("SC_PAGE_SIZE")


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def peak() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def give_back():
    """Return freed heap memory to the system, so the next readout starts from what is really held."""
    import gc
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass


def watchdog(limit: int, stage: list):
    while True:
        if rss() > limit:
            print(json.dumps({"name": stage[0], "growth": rss() - limit + CAP_MIB * 2**20, "seconds": None,
                              "error": f"killed by the watchdog: over {CAP_MIB} MiB above the start"}), flush=True)
            os._exit(86)
        time.sleep(0.005)


def readouts(model, tok, ids):
    """name -> a function that runs one readout on ids (1, T)."""
    from llmlab.inspection import (
        ablate, causal_trace, capture, direct_logit_attribution, layer_similarity, logit_lens, neuron_activations,
        patchscope, position_similarity,
    )
    T = ids.shape[1]
    answer = int(ids[0, -1])
    cached = {}

    def resid_cache():
        if "cache" not in cached:
            names = ["blocks.0.hook_resid_pre", "*hook_resid_post"]
            keep = {"logits_to_keep": 1} if _has_keep() else {}
            cached["cache"] = capture(model, None, ids, names=names, **keep)[1]
        return cached["cache"]

    def attention_view():                   # 18 x 4 x T x T weights, at 48 bytes each: over a 256 MiB limit
        import inspect

        from llmlab.visualization import AttentionView
        limit = {"max_bytes": 256 * 2**20} if "max_bytes" in inspect.signature(AttentionView.from_model).parameters \
            else {}
        try:
            AttentionView.from_model(model, tok, ids, **limit)
        except MemoryError as error:        # refused up front: what this check wants, when it is too large
            return str(error)

    return {
        "forward": lambda: model(ids, logits_to_keep=1),
        "lens_last": lambda: logit_lens(model, tok, ids, positions=[-1], target=answer),
        "lens_some": lambda: logit_lens(model, tok, ids, positions=list(range(0, T, T // 32)), k=3, target=answer),
        "lens_all": lambda: logit_lens(model, tok, ids),
        "attribution": lambda: direct_logit_attribution(model, None, ids, answer),
        "trace": lambda: causal_trace(model, None, ids, answer, noise_positions=[1, 2], layers=[-1],
                                      positions=[3, -1]),
        "ablate_loss": lambda: ablate(model, None, ids, layer=0, sublayer="mlp", metric="loss"),
        "patchscope": lambda: patchscope(model, tok, ids, source_layer=3, max_new_tokens=2),
        "neurons": lambda: neuron_activations(model, tok, ids, layer=2, neuron=7),
        "resid_cache": resid_cache,
        "layer_similarity": lambda: layer_similarity(resid_cache(), position=-1),
        "position_similarity": lambda: position_similarity(resid_cache(), layer=-1),
        "attention_view": attention_view,
    }


def _has_keep() -> bool:
    import inspect

    from llmlab.inspection import capture
    return "logits_to_keep" in inspect.signature(capture).parameters


def main(model_name: str, n_tokens: int, budget_mib: int, names: list[str]):
    import llmlab

    model, tok = llmlab.load(model_name)
    ids = tok.encode(TEXT)
    while len(ids) < n_tokens:              # the text again and again: a prompt of any length
        ids = ids + tok.encode(" " + TEXT, add_special_tokens=False)
    ids = torch.tensor([ids[:n_tokens]])
    try:
        from llmlab.inspection.budget import memory_budget
        budget = memory_budget(budget_mib * 2**20)
    except ImportError:                     # the code before the budget existed (to see the test fail)
        import contextlib
        budget = contextlib.nullcontext()
    runs = readouts(model, tok, ids)
    can_reset = reset_peak()
    if not can_reset and len(names) > 1:
        print("this kernel does not let a process reset its peak (/proc/self/clear_refs): run one readout per "
              "process", file=sys.stderr)
        sys.exit(87)
    stage = ["start"]
    give_back()
    threading.Thread(target=watchdog, args=(rss() + CAP_MIB * 2**20, stage), daemon=True).start()
    with torch.no_grad(), budget:
        if not can_reset:
            runs["forward"]()               # warm up: the peak of a plain forward is the base then
        for name in names:
            give_back()
            stage[0] = name
            reset_peak()
            before = rss() if can_reset else peak()
            start, error = time.time(), None
            try:
                result = runs[name]()
                if isinstance(result, str):
                    error = "refused: " + result
                del result
            except MemoryError as refused:
                error = "refused: " + str(refused)
            print(json.dumps({"name": name, "growth": peak() - before, "peak": peak(),
                              "seconds": round(time.time() - start, 1), "error": error}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:])
