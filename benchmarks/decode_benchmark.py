"""Decode speed: llmlab's generate vs transformers.generate on the same SmolLM2-135M weights.

    .venv/bin/python benchmarks/decode_benchmark.py            # CPU (and CUDA when present)
    .venv/bin/python benchmarks/decode_benchmark.py --profile  # + where llmlab's decode time goes
    .venv/bin/python benchmarks/decode_benchmark.py --cuda     # the GPU comparison alone (see cuda_mode)

Greedy decoding, a ~20-token prompt, 100 new tokens, EOS ignored so both make exactly 100.
Printed per device: tokens/s for both, their ratio, prefill tokens/s, and llmlab's share of the
memory-bandwidth bound. The bound: producing one token reads every weight once, so
tokens/s <= (bytes/s a matrix-vector product streams from memory) / (weight bytes per token).

Then one table per device with every configuration side by side: transformers in float32 and bf16,
llmlab in every dtype `llmlab.load` offers (float32, bf16, fp16 where the device has fast fp16,
weight-only int8 and int4, with float or bf16 activations). For each: tokens/s, bytes of weights read per token, the bandwidth
bound, the share of it reached, and the top-1 agreement with llmlab float32 on a teacher-forced
120-token continuation; for int8/int4 the kernel that llmlab.quantize picked on this machine. Last,
a torch.profiler summary of the fastest llmlab configuration (--no-profile skips it).
A number, not a test: timings depend on the machine and on what else runs on it.
"""
from __future__ import annotations

import argparse
import copy
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


def timed(fn, device, repeats: int) -> float:
    """Median wall time of fn() over `repeats` runs (after the caller's warm-up): llmlab.timed's median."""
    return llmlab.timed(fn, device, repeats=repeats, warmup=0).median


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


PRODUCTS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::_weight_int4pack_mm_for_cpu", "aten::_weight_int8pack_mm",
            "aten::_weight_int4pack_mm", "aten::_int4pack_mm")


def profile_decode(model, ids, device, steps: int = 20, bound_tps: float | None = None):
    """torch.profiler over llmlab's decode loop: which operators take the time, then a per-pass summary
    (the wall time without the profiler; matrix products, attention and every other operator under it)."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    ids = ids.to(device)
    generate(model, ids, steps)
    wall = timed(lambda: generate(model, ids, steps), device, repeats=3)   # without the profiler's overhead
    with profile(activities=activities) as prof:
        generate(model, ids, steps)
    sort = "cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    print(f"\n== torch.profiler: llmlab generate, {steps} new tokens on {device.type} ==")
    events = prof.key_averages()
    print(events.table(sort_by=sort, row_limit=12))
    if device.type != "cpu":
        return
    passes = steps                                     # forward passes: the prefill and steps - 1 decode steps

    def per_pass(microseconds):                        # a total over the run -> milliseconds per pass
        return microseconds / 1e3 / passes

    products = sum(e.self_cpu_time_total for e in events if e.key in PRODUCTS)
    attention = sum(e.self_cpu_time_total for e in events if "scaled_dot_product" in e.key)
    everything = sum(e.self_cpu_time_total for e in events)
    calls = sum(e.count for e in events if e.key in PRODUCTS)
    print(f"  per forward pass: {wall * 1e3 / passes:.1f} ms without the profiler. Operator time under it "
          f"(which adds its own overhead): matrix products {per_pass(products):.1f} ms ({calls // passes} calls, "
          f"{products / everything:.0%}), attention {per_pass(attention):.1f} ms, "
          f"other operators {per_pass(everything - products - attention):.1f} ms")
    if bound_tps:
        print(f"  the bandwidth bound allows {1e3 / bound_tps:.1f} ms a token (80% of it: "
              f"{1e3 / (0.8 * bound_tps):.1f} ms)")


CONTINUATION = 120   # tokens of llmlab float32's greedy continuation, re-read by every configuration


def llmlab_bytes_per_token(model) -> int:
    """Weight bytes one decode step reads. A quantized model's LM head has its own integer copy, so
    the float embedding table is only looked up (one row); a float model with a tied head reads it all."""
    quantization = getattr(model, "quantization", None)
    if not quantization:
        return weight_bytes_per_token(model)
    linear = sum(m.weight.numel() * m.weight.element_size()
                 for m in model.modules() if isinstance(m, torch.nn.Linear))   # layers left in float
    small = sum(p.numel() * p.element_size() for name, p in model.named_parameters()
                if not name.startswith("tok_embed") and p.dim() == 1)         # norms
    row = model.tok_embed.weight.shape[1] * model.tok_embed.weight.element_size()
    return linear + quantization["linear_bytes_after"] + small + row


def top1(logits_fn, full_ids, T) -> torch.Tensor:
    """Top-1 predictions for the continuation's positions, teacher-forced (one pass over all of it)."""
    with torch.inference_mode():
        logits = logits_fn(full_ids)                                    # (1, T + CONTINUATION, V)
    return logits[0, T - 1:-1].argmax(-1).cpu()                         # (CONTINUATION,)


def kernel_note(quantization) -> str:
    """Which matrix-product kernel a quantized model runs (per integer kind: the LM head may differ),
    and the per-layer times it was chosen on."""
    if not quantization:
        return "-"
    parts = []
    for kind, kernel in quantization.get("kernels", {quantization["dtype"]: quantization["kernel"]}).items():
        times = quantization["kernel_seconds"].get(kind, {})
        timed = ", ".join(f"{name} {seconds * 1e3:.2f} ms" for name, seconds in times.items())
        parts.append(f"{kind}: {kernel}" + (f" (timed per layer: {timed})" if timed else ""))
    if quantization.get("promoted_to_int8"):
        parts.append(f"{len(quantization['promoted_to_int8'])} layers kept in int8 (finer than 4 bits in the file)")
    return "; ".join(parts)


def llmlab_dtypes(device: torch.device) -> list[str]:
    """Every dtype llmlab.load offers; fp16 only where the device has fast fp16 arithmetic."""
    from llmlab.loading import dtype_cast

    names = ["float32", "bf16"] + (["fp16"] if device.type in ("cuda", "mps") else []) + \
        ["int8", "int4", "int8-bf16", "int4-bf16"]
    offered = []
    for name in names:
        try:
            dtype_cast(name)
            offered.append(name)
        except ValueError:
            print(f"  (llmlab.load does not offer dtype={name!r} in this installation)")
    return offered


def dtype_table(reference_fp32, ids, device, repeats: int):
    """Every configuration side by side (see the module docstring); returns the fastest llmlab model."""
    ids = ids.to(device)
    T = ids.shape[1]
    base, _ = llmlab.load("smollm2-135m", device=device)
    full = generate(base, ids, CONTINUATION)                             # (1, T + 120) llmlab fp32 greedy
    truth = top1(lambda x: base(x), full, T)
    bandwidth = max(matvec_bandwidth(device, torch.float32), matvec_bandwidth(device, torch.bfloat16))
    gen_config = __import__("transformers").GenerationConfig(
        do_sample=False, max_new_tokens=NEW_TOKENS, eos_token_id=None, pad_token_id=0)

    # Every configuration is built first, then timed in rounds (one run of each per round, the median
    # over rounds kept): a machine that slows down for a minute then slows all of them alike, and the
    # ratios stay fair. Timed one after the other, a shared machine once made the same code 1.5x or 2.5x.
    configs = [("transformers", "float32"), ("transformers", "bf16")] + \
              [("llmlab", name) for name in llmlab_dtypes(device)]
    built = []
    for library, dtype in configs:
        if library == "transformers":
            torch_dtype = torch.float32 if dtype == "float32" else torch.bfloat16
            model = copy.deepcopy(reference_fp32).to(device=device, dtype=torch_dtype)

            @torch.inference_mode()
            def run(model=model):
                return model.generate(ids, generation_config=gen_config, attention_mask=torch.ones_like(ids))

            logits_fn, per_token, kernel = (lambda x, model=model: model(x).logits), weight_bytes_per_token(model), "-"
        else:
            model = base if dtype == "float32" else llmlab.load("smollm2-135m", device=device, dtype=dtype)[0]
            run = (lambda model=model: generate(model, ids, NEW_TOKENS))
            logits_fn, per_token = (lambda x, model=model: model(x)), llmlab_bytes_per_token(model)
            kernel = kernel_note(getattr(model, "quantization", None))
        run()                                                           # warm-up
        agree = float((top1(logits_fn, full, T) == truth).float().mean())
        built.append((library, dtype, model, run, per_token, agree, kernel))
    seconds = {(library, dtype): [] for library, dtype, *_ in built}
    for _ in range(repeats):
        for library, dtype, _, run, *_ in built:
            seconds[library, dtype].append(timed(run, device, 1))

    rows, fastest = [], (0.0, None, None)
    for library, dtype, model, run, per_token, agree, kernel in built:
        tps = NEW_TOKENS / statistics.median(seconds[library, dtype])
        bound = bandwidth / per_token
        rows.append((library, dtype, tps, per_token, bound, agree, kernel))
        if library == "llmlab" and agree >= 0.97 and tps > fastest[0]:
            fastest = (tps, dtype, model)

    print(f"\n== {device.type}: every configuration, {NEW_TOKENS} new tokens, greedy (median of {repeats} "
          f"interleaved rounds); "
          f"bandwidth {bandwidth / 1e9:.1f} GB/s (fastest matrix-vector read, float32 or bf16) ==")
    print(f"  {'library':13}{'dtype':11}{'tokens/s':>9}{'MB/token':>10}{'bound':>8}{'of bound':>9}"
          f"{'top-1 vs llmlab fp32':>22}  kernel")
    for library, dtype, tps, per_token, bound, agree, kernel in rows:
        print(f"  {library:13}{dtype:11}{tps:9.1f}{per_token / 1e6:10.1f}{bound:8.1f}{tps / bound:9.0%}"
              f"{agree:22.1%}  {kernel}")
    best_theirs = max(r[2] for r in rows if r[0] == "transformers")
    if fastest[2] is not None:
        share = next(tps / bound for library, dtype, tps, _, bound, *_ in rows
                     if library == "llmlab" and dtype == fastest[1])
        print(f"  fastest llmlab with top-1 >= 97%: {fastest[1]} at {fastest[0]:.1f} tokens/s = "
              f"{fastest[0] / best_theirs:.2f}x transformers' fastest (target >= 1.5x), "
              f"{share:.0%} of its bandwidth bound (target >= 80%)")
    bound = next((bound for library, dtype, _, _, bound, *_ in rows
                  if library == "llmlab" and dtype == fastest[1]), None)
    return (*fastest, bound)               # tokens/s, dtype and model of the fastest >= 97%, its bound


# --------------------------------------------------------------------------- --cuda: the GPU comparison

BATCHES = (1, 16)


def copy_bandwidth(device: torch.device, megabytes: int = 1024) -> float:
    """Bytes/s a large device-to-device copy moves (each byte read once and written once)."""
    source = torch.empty(megabytes * 2**20, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    for _ in range(3):
        target.copy_(source)
    seconds = timed(lambda: [target.copy_(source) for _ in range(10)], device, repeats=5) / 10
    return 2 * source.numel() / seconds


def kv_bytes_per_step(config, batch: int, prompt_len: int, new_tokens: int, element_size: int) -> float:
    """Average bytes of keys and values one decode step reads: every cached position of every layer,
    for every row (the cache grows from prompt_len to prompt_len + new_tokens - 1 positions).

    >>> from llmlab import ModelConfig
    >>> c = ModelConfig.preset("smollm2-135m")        # 30 layers, 3 KV heads of 64
    >>> kv_bytes_per_step(c, 1, 20, 101, 2) / 1e6     # 2 x 30 x 3 x 64 x 2 bytes x 70 positions on average
    1.6128
    """
    n_kv = config.n_kv_heads or config.n_heads
    head_dim = config.head_dim or config.d_model // config.n_heads
    per_position = 2 * config.n_layers * n_kv * head_dim * element_size              # keys and values
    if config.sliding_window and config.layer_types:   # a sliding layer reads at most its window
        full = sum(t == "full" for t in config.layer_types) / config.n_layers
    else:
        full = 1.0
    mean_len = prompt_len + (new_tokens - 1) / 2
    window = min(mean_len, config.sliding_window or mean_len)
    return batch * per_position * (full * mean_len + (1 - full) * window)


def cuda_mode(repeats: int, device: torch.device | None = None, new_tokens: int = NEW_TOKENS,
              try_compile: bool = True) -> list[dict]:
    """llmlab's fastest faithful decoding against transformers' fastest, bf16 on one card, at batch 1 and 16.

    llmlab: `generate` (static KV cache), the same with the model under torch.compile, and prompt-lookup
    decoding (batch 1); faithful = the same greedy tokens as plain `generate`. transformers: `generate`
    eager (its default cache), and with a static cache compiled by torch.compile (its fast path).
    The bound: a decode step reads every weight once and every cached key and value of every row, so
    tokens/s <= batch x bandwidth / (weight bytes + KV bytes per step), the bandwidth being that of a
    large device-to-device copy. Times include the prefill of the ~20-token prompt.
    """
    import transformers

    device = device or torch.device("cuda")
    dtype = torch.bfloat16
    model, tokenizer = llmlab.load("smollm2-135m", device=device, dtype="bf16")
    path = offline_gguf_path(OFFLINE_MODELS["smollm2-135m"])
    reference = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32).eval().to(device=device, dtype=dtype)
    prompt = torch.tensor([tokenizer.encode(PROMPT)], device=device)
    T = prompt.shape[1]
    bandwidth = copy_bandwidth(device)
    weights = weight_bytes_per_token(model)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else device.type
    print(f"\n== {name}: bf16, prompt {T} tokens, {new_tokens} new tokens, greedy, batch {' and '.join(map(str, BATCHES))} "
          f"(median of {repeats}); torch {torch.__version__}, transformers {transformers.__version__} ==")
    print(f"  bandwidth {bandwidth / 1e9:.0f} GB/s (a {1024} MiB device-to-device copy, read + write); "
          f"weights {weights / 1e6:.0f} MB read per step")

    def their_generate(model_, cache: str | None, compiled: bool):
        config = transformers.GenerationConfig(do_sample=False, max_new_tokens=new_tokens, eos_token_id=None,
                                               pad_token_id=0, cache_implementation=cache,
                                               compile_config=transformers.CompileConfig() if compiled else None,
                                               disable_compile=not compiled)

        @torch.inference_mode()
        def run(ids):
            return model_.generate(ids, generation_config=config, attention_mask=torch.ones_like(ids))
        return run

    compiled_model = None
    if try_compile:
        compiled_model = copy.deepcopy(model)
        compiled_model.forward = torch.compile(compiled_model.forward, dynamic=True)
    paths = [("llmlab", "generate (static KV cache)", lambda ids: generate(model, ids, new_tokens), BATCHES),
             ("llmlab", "generate, torch.compile", lambda ids: generate(compiled_model, ids, new_tokens),
              BATCHES if try_compile else ()),
             ("llmlab", "prompt lookup (exact greedy)", lambda ids: generate_lookup(model, ids, new_tokens), (1,)),
             ("transformers", "generate, eager", their_generate(reference, None, False), BATCHES),
             ("transformers", "static cache, torch.compile", their_generate(reference, "static", True),
              BATCHES if try_compile else ())]
    rows = []
    for batch in BATCHES:
        ids = prompt.expand(batch, T).contiguous()                      # (B, T): the prompt in every row
        plain = generate(model, ids, new_tokens).cpu()
        kv = kv_bytes_per_step(model.config, batch, T, new_tokens, torch.tensor([], dtype=dtype).element_size())
        bound = batch * bandwidth / (weights + kv)
        for library, path_name, run, batches in paths:
            if batch not in batches:
                continue
            row = {"library": library, "path": path_name, "batch": batch, "bound": bound}
            try:
                out = run(ids)                                          # warm-up: compiles, allocates
                out = run(ids).cpu()
                row["same"] = float((out[:, T:] == plain[:, T:]).float().mean())
                row["tps"] = batch * new_tokens / timed(lambda: run(ids), device, repeats)
            except Exception as error:                                  # "where it works": say why not
                row["error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:120] if str(error) else ''}"
            rows.append(row)

    print(f"  {'library':13}{'path':32}{'batch':>6}{'tokens/s':>10}{'bound':>9}{'of bound':>9}"
          f"  same tokens as llmlab generate")
    for r in rows:
        if "error" in r:
            print(f"  {r['library']:13}{r['path']:32}{r['batch']:6}   did not run: {r['error']}")
        else:
            print(f"  {r['library']:13}{r['path']:32}{r['batch']:6}{r['tps']:10.1f}{r['bound']:9.0f}"
                  f"{r['tps'] / r['bound']:9.1%}  {r['same']:.1%}")
    for batch in BATCHES:
        ours = [r for r in rows if r["library"] == "llmlab" and r["batch"] == batch and r.get("same") == 1.0]
        theirs = [r for r in rows if r["library"] == "transformers" and r["batch"] == batch and "tps" in r]
        if ours and theirs:
            best, rival = max(ours, key=lambda r: r["tps"]), max(theirs, key=lambda r: r["tps"])
            print(f"  batch {batch}: llmlab's fastest faithful path ({best['path']}) {best['tps']:.1f} tokens/s = "
                  f"{best['tps'] / rival['tps']:.2f}x transformers' fastest ({rival['path']}, {rival['tps']:.1f}); "
                  f"{best['tps'] / best['bound']:.0%} of the bandwidth bound")
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="also profile llmlab's decode loop")
    parser.add_argument("--cpu-only", action="store_true")
    parser.add_argument("--no-profile", action="store_true", help="skip the profile of the fastest configuration")
    parser.add_argument("--cuda", action="store_true", help="only the GPU comparison: llmlab's fastest faithful "
                        "path vs transformers' fastest, bf16, batch 1 and 16, share of the bandwidth bound")
    args = parser.parse_args()
    if args.cuda:
        if not torch.cuda.is_available():
            sys.exit(f"--cuda needs a CUDA GPU, and torch {torch.__version__} sees none "
                     f"({'a build without CUDA' if torch.version.cuda is None else 'check nvidia-smi'}). "
                     f"Run without --cuda for the CPU benchmark.")
        cuda_mode(args.repeats)
        return

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
    # How idle OpenMP threads wait changes CPU decode speed a lot (spinning wakes fast; PASSIVE, which
    # the Makefile sets, survives a busy core but wakes slowly): say which one this run had.
    print(f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'unset')}, {torch.get_num_threads()} CPU threads")

    reference_fp32 = copy.deepcopy(reference)
    bench_device(model, reference, ids, torch.device("cpu"), torch.float32, args.repeats)
    if args.profile:
        profile_decode(model, ids, torch.device("cpu"))
    devices = [torch.device("cpu")]
    if torch.cuda.is_available() and not args.cpu_only:
        cuda = torch.device("cuda")
        devices.append(cuda)
        print(f"\nGPU: {torch.cuda.get_device_name()}")
        for dtype in (torch.float32, torch.bfloat16):
            bench_device(model, reference, ids, cuda, dtype, args.repeats)
        if args.profile:
            profile_decode(model.to(cuda, torch.bfloat16), ids, cuda)
    for device in devices:
        tps, dtype, fastest, bound = dtype_table(reference_fp32, ids, device, args.repeats)
        if fastest is not None and not args.no_profile:
            print(f"\n(profile of the fastest llmlab configuration: {dtype})")
            profile_decode(fastest, ids, device, bound_tps=bound)


if __name__ == "__main__":
    main()
