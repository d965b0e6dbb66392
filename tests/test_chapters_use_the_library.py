"""The chapters use llmlab's helpers instead of re-writing them, so a reader sees one way to do each thing:
token ids with llmlab.as_ids / tokenizer.encode_batch, hook names with hook_name, intermediates read with
capture and written with hooks, public names imported from their package, and none of the loops and
formulas llmlab already has (a greedy decode loop, a copied cache, a device sync, a stack of attention
patterns, a flat argmax turned into (layer, head), a read-only hook)."""
import json
import re
from pathlib import Path

import pytest

CHAPTERS = sorted((Path(__file__).resolve().parent.parent / "chapters").glob("*.ipynb"))

RULES = {
    r"torch\.tensor\(\[\s*\w+\.encode\(": "a hand-written ids tensor: use llmlab.as_ids(model, tok, text)",
    r"""f["']blocks\.\{[^"']*hook""": "a hand-written hook name: use hook_name(layer, point)",   # not a weight's name
    r"\.register_forward_hook\(": "a raw torch hook: read with capture(...), write with hooks(...)",
    r"from llmlab\.inspection\.\w+ import": "a submodule path: import from llmlab.inspection",
    r"from llmlab\.generation import .*pad_left": "pad_left lives in llmlab.tokenization (or use tok.encode_batch)",
    r"cache\.(keys|values|seq_len)\s*=": "a KV cache field written by hand: use cache.crop(n) / cache.expand(n)",
    r"decode_step\(.*\)\.argmax\(": "a hand-rolled greedy decode loop: use llmlab.generate (kv_cache=cache.copy() continues from a cache)",
    r"copy\.deepcopy\(\s*\w*(cache|shared)": "a deep copy of a KV cache: use cache.copy()",
    r"torch\.cuda\.synchronize": "a device sync by hand: use llmlab.synchronize(device) or llmlab.timed(fn, device)",
    r"torch\.stack\(\[.*\.pattern\(": "attention patterns stacked by hand: use cache.stack('pattern')",
    r"divmod\(int\(.*\.arg(max|min)\(": "a flat argmax turned into (layer, head) by hand: use top_heads(scores)",
    r"last_only\s*=\s*True": "the forward takes logits_to_keep=1 (or positions)",
}

# A hook that only reads (it stores what it sees and returns None) is what capture(...) does. Chapter 13 reads its
# encoder-decoder through hooks because capture runs decoder-only models (llmlab.Transformer) only.
READ_ONLY_HOOK = re.compile(r"lambda[^:]*:\s*\w+\.(__setitem__|append)\(|:\s*\w+\.append\s*[,}]")
READS_THROUGH_HOOKS_ALLOWED = {"13_encoders_decoders", "13_encoders_decoders_lab"}
BY_HAND = "# by hand:"


def code_lines(path: Path):
    for number, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
        if cell["cell_type"] == "code":
            for line in "".join(cell["source"]).splitlines():
                yield number, line


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_uses_the_library_helpers(path):
    # A line that must do by hand what a rule names says why in a comment "# by hand: <reason>" (chapter 10 steps
    # interleaved requests of a simulated server, which generate cannot).
    found = [f"cell {number}: {what}: {line.strip()[:100]}"
             for number, line in code_lines(path) if BY_HAND not in line
             for pattern, what in RULES.items() if re.search(pattern, line)]
    assert not found, f"{path.name}:\n" + "\n".join(found)


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_reads_with_capture_not_read_only_hooks(path):
    if path.stem in READS_THROUGH_HOOKS_ALLOWED:
        pytest.skip("chapter 13's encoder-decoder is not a llmlab.Transformer, which capture runs")
    found = []
    for number, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
        source = "".join(cell["source"])
        if cell["cell_type"] == "code" and "hooks(" in source and READ_ONLY_HOOK.search(source) and BY_HAND not in source:
            found.append(f"cell {number}: a hook that only stores what it sees: read with capture(...)")
    assert not found, f"{path.name}:\n" + "\n".join(found)


def test_the_rules_catch_what_they_describe():
    """Each rule and the read-only-hook check fire on the hand-rolled code they replace (so none can pass vacuously)."""
    samples = {
        "answer.append(int(decode_step(model, last, cache).argmax()))": "greedy decode loop",
        "cache = copy.deepcopy(shared)": "deep copy of a KV cache",
        'sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)': "device sync",
        "p = torch.stack([c.pattern(l)[0] for l in range(L)])": "stacked by hand",
        "best = divmod(int(scores.argmax()), n_heads)": "flat argmax",
        "model(ids, last_only=True)": "logits_to_keep",
    }
    for line, what in samples.items():
        hits = [message for pattern, message in RULES.items() if re.search(pattern, line)]
        assert any(what in message for message in hits), (line, hits)
    assert READ_ONLY_HOOK.search("with hooks(model, {n: (lambda x, n=n: kept.__setitem__(n, x)) for n in names}):")
    assert READ_ONLY_HOOK.search("with hooks(model, {name: seen.append}, attn_impl='eager'):")
    assert not READ_ONLY_HOOK.search("with hooks(model, {name: lambda z: z * 0}):")
