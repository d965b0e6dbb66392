"""Decode speed: llmlab's generate vs transformers.generate on the same SmolLM2-135M weights.

    .venv/bin/python benchmarks/decode_benchmark.py            # CPU (and CUDA when present)
    .venv/bin/python benchmarks/decode_benchmark.py --profile  # + where llmlab's decode time goes

Greedy decoding, a ~20-token prompt, 100 new tokens, EOS ignored so both make exactly 100.
Printed per device: tokens/s for both, their ratio, prefill tokens/s, and llmlab's share of the
memory-bandwidth bound. The bound: producing one token reads every weight once, so
tokens/s <= (bytes/s a matrix-vector product streams from memory) / (weight bytes per token).
A number, not a test: timings depend on the machine and on what else runs on it.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import llmlab  # noqa: E402
from llmlab.generation import generate, prefill  # noqa: E402
from llmlab.kvcache import StaticKVCache  # noqa: E402
from llmlab.registry import OFFLINE_MODELS, offline_gguf_path  # noqa: E402
from llmlab.lookup import generate_lookup  # noqa: E402

PROMPT = "In a quiet village at the edge of the forest, an old clockmaker spent his days repairing"
NEW_TOKENS = 100


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def timed(fn, device, repeats: int) -> float:
    """Median wall time of fn() over `repeats` runs (after the caller's warm-up)."""
    times = []
    for _ in range(repeats):
        sync(device)
        start = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def timed_pair(fn_a, fn_b, device, repeats: int) -> tuple[float, float]:
    """Median times of two functions run alternately, so a change in machine load hits both alike."""
    a, b = [], []
    for _ in range(repeats):
        a.append(timed(fn_a, device, 1))
        b.append(timed(fn_b, device, 1))
    return statistics.median(a), statistics.median(b)


def matvec_bandwidth(device: torch.device, dtype: torch.dtype, megabytes: int = 512) -> float:
    """Bytes/s that y = W @ x streams, with W far larger than any cache (what decoding does)."""
    cols = 4096
    rows = megabytes * 2**20 // (cols * torch.tensor([], dtype=dtype).element_size())
    W = torch.randn(rows, cols, device=device, dtype=dtype)
    x = torch.randn(cols, device=device, dtype=dtype)
    for _ in range(3):
        W @ x
    seconds = timed(lambda: [W @ x for _ in range(10)], device, repeats=5) / 10
    return W.numel() * W.element_size() / seconds


def weight_bytes_per_token(model) -> int:
    """Every parameter is read once per token (a tied embedding/LM head counts once: the head reads it all)."""
    seen, total = set(), 0
    for p in model.parameters():
        if p.data_ptr() not in seen:
            seen.add(p.data_ptr())
            total += p.numel() * p.element_size()
    return total


def bench_device(model, reference, ids, device, dtype, repeats):
    model = model.to(device=device, dtype=dtype)
    reference = reference.to(device=device, dtype=dtype)
    ids = ids.to(device)
    T = ids.shape[1]
    gen_config = __import__("transformers").GenerationConfig(
        do_sample=False, max_new_tokens=NEW_TOKENS, eos_token_id=None, pad_token_id=0)

    def ours():
        return generate(model, ids, NEW_TOKENS)

    @torch.inference_mode()
    def theirs():
        return reference.generate(ids, generation_config=gen_config, attention_mask=torch.ones_like(ids))

    @torch.inference_mode()
    def our_prefill():
        prefill(model, ids, StaticKVCache(model.config.n_layers, T))

    @torch.inference_mode()
    def their_prefill():
        reference(ids)

    ours(), theirs()  # warm-up (first calls allocate, pick kernels, fill caches)
    same = torch.equal(ours().cpu(), theirs().cpu())
    t_ours, t_theirs = timed_pair(ours, theirs, device, repeats)
    p_ours, p_theirs = timed_pair(our_prefill, their_prefill, device, 5 * repeats)

    bandwidth = matvec_bandwidth(device, dtype)
    per_token = weight_bytes_per_token(model)
    bound = bandwidth / per_token
    ours_tps, theirs_tps = NEW_TOKENS / t_ours, NEW_TOKENS / t_theirs
    name = f"{device.type} {str(dtype).replace('torch.', '')}"
    threads = f", {torch.get_num_threads()} threads" if device.type == "cpu" else ""
    print(f"\n== {name}{threads}: prompt {T} tokens, {NEW_TOKENS} new tokens, greedy (median of {repeats}) ==")
    print(f"  llmlab        {ours_tps:7.1f} tokens/s   ({t_ours:.2f} s incl. prefill)")
    print(f"  transformers  {theirs_tps:7.1f} tokens/s   ({t_theirs:.2f} s incl. prefill)")
    print(f"  ratio         {ours_tps / theirs_tps:7.2f}x   (target >= 1.5x)")
    print(f"  prefill       llmlab {T / p_ours:8.0f} tokens/s   transformers {T / p_theirs:8.0f} tokens/s")
    print(f"  bandwidth     {bandwidth / 1e9:.1f} GB/s matrix-vector; weights {per_token / 1e6:.0f} MB/token "
          f"-> bound {bound:.1f} tokens/s; llmlab reaches {100 * ours_tps / bound:.0f}% of it "
          f"(transformers {100 * theirs_tps / bound:.0f}%)")
    print(f"  same 100 tokens from both: {same}")

    # The faster path beside the plain loop: prompt-lookup decoding (llmlab/lookup.py), exactly the
    # greedy tokens in fewer passes. transformers has the same trick (prompt_lookup_num_tokens), so
    # both are timed with it too: the fair comparison of the two libraries is like with like.
    stats = {}
    lookup_same = torch.equal(generate_lookup(model, ids, NEW_TOKENS, stats=stats).cpu(), ours().cpu())
    their_lookup_config = __import__("transformers").GenerationConfig(
        do_sample=False, max_new_tokens=NEW_TOKENS, eos_token_id=None, pad_token_id=0, prompt_lookup_num_tokens=8)

    @torch.inference_mode()
    def theirs_lookup():
        return reference.generate(ids, generation_config=their_lookup_config, attention_mask=torch.ones_like(ids))

    theirs_lookup()
    t_lookup, t_theirs_lookup = timed_pair(lambda: generate_lookup(model, ids, NEW_TOKENS), theirs_lookup,
                                           device, repeats)
    lookup_tps, theirs_lookup_tps = NEW_TOKENS / t_lookup, NEW_TOKENS / t_theirs_lookup
    print(f"  prompt lookup: llmlab {lookup_tps:.1f} tokens/s ({stats['passes']} passes for {NEW_TOKENS} tokens, "
          f"same tokens as greedy: {lookup_same}); transformers with prompt_lookup_num_tokens=8 "
          f"{theirs_lookup_tps:.1f} tokens/s")
    print(f"  ratio         {lookup_tps / theirs_tps:7.2f}x  llmlab lookup vs transformers' default generate; "
          f"{lookup_tps / theirs_lookup_tps:.2f}x like for like (both with lookup)")
    return ours_tps, theirs_tps


def profile_decode(model, ids, device, steps: int = 20):
    """torch.profiler over llmlab's decode loop: which operators take the time."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    ids = ids.to(device)
    generate(model, ids, steps)
    with profile(activities=activities) as prof:
        generate(model, ids, steps)
    sort = "cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    print(f"\n== torch.profiler: llmlab generate, {steps} new tokens on {device.type} ==")
    print(prof.key_averages().table(sort_by=sort, row_limit=15))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="also profile llmlab's decode loop")
    parser.add_argument("--cpu-only", action="store_true")
    args = parser.parse_args()

    import transformers

    start = time.perf_counter()
    model, tokenizer = llmlab.load("smollm2-135m", device="cpu")
    print(f"llmlab.load('smollm2-135m'): {time.perf_counter() - start:.1f} s")
    path = offline_gguf_path(OFFLINE_MODELS["smollm2-135m"])
    start = time.perf_counter()
    reference = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32).eval()
    print(f"transformers from the same GGUF file: {time.perf_counter() - start:.1f} s "
          f"(transformers {transformers.__version__}, torch {torch.__version__})")
    ids = torch.tensor([tokenizer.encode(PROMPT)])

    bench_device(model, reference, ids, torch.device("cpu"), torch.float32, args.repeats)
    if args.profile:
        profile_decode(model, ids, torch.device("cpu"))
    if torch.cuda.is_available() and not args.cpu_only:
        cuda = torch.device("cuda")
        print(f"\nGPU: {torch.cuda.get_device_name()}")
        for dtype in (torch.float32, torch.bfloat16):
            bench_device(model, reference, ids, cuda, dtype, args.repeats)
        if args.profile:
            profile_decode(model.to(cuda, torch.bfloat16), ids, cuda)


if __name__ == "__main__":
    main()
