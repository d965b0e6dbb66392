"""The README's "Using llmlab" snippets, run as written in a fresh process, for both models.

Each ```python block runs in turn in one namespace. What a block prints must equal the comment lines
that follow its print() call in the README, and every `llmlab.generate` call must stop at the end of
the answer: its last token is one of the stop ids it was given, well before max_new_tokens.
"""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")

pytestmark = pytest.mark.slow                    # loads SmolLM2 and Gemma


def using_section() -> str:
    start = README.index("## Using llmlab")
    return README[start:README.index("\n## ", start + 1)]


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", using_section(), re.S)


def expected_output(block: str) -> str:
    """The comment lines right after the print() call(s) of a block: what the README says it prints."""
    lines, out, after_print = block.splitlines(), [], False
    for line in lines:
        if line.startswith("print("):
            after_print = True
        elif after_print and line.startswith("# "):
            out.append(line[2:])
        else:
            after_print = False
    return "\n".join(out)


# Runs in the child process: records every generate call, runs the blocks, prints one JSON report.
RUNNER = r'''
import contextlib, io, json, os, sys
report = {"torch_before_llmlab": "torch" in sys.modules}
import llmlab                                   # what the README's first line does; torch is not loaded yet
report["omp"] = os.environ.get("OMP_WAIT_POLICY")
calls, generate = [], llmlab.generate

def recording_generate(model, ids, max_new_tokens, *args, eos_token_id=None, **kwargs):
    out = generate(model, ids, max_new_tokens, *args, eos_token_id=eos_token_id, **kwargs)
    stops = [eos_token_id] if isinstance(eos_token_id, int) else list(eos_token_id or [])
    calls.append({"stops": [int(i) for i in stops], "max_new_tokens": max_new_tokens,
                  "new": out.shape[1] - ids.shape[1], "last": int(out[0, -1])})
    return out

llmlab.generate = recording_generate
blocks, space, report["blocks"] = json.loads(sys.argv[1]), {}, []
for code in blocks:
    printed, calls[:] = io.StringIO(), []
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "README.md", "exec"), space)
    entry = {"printed": printed.getvalue(), "calls": list(calls), "vocab": space["model"].config.vocab_size}
    if "lens" in space:
        lens = space["lens"]
        entry["lens"] = {"type": type(lens).__name__, "last": lens.top_tokens[-1][-1][0],
                         "rows": len(lens.layer_labels)}
    if space["model"].config.vocab_size == 262144:   # the chat path of the README, on Gemma: one BOS
        chat = space["tokenizer"].apply_chat_template([{"role": "user", "content": "Hi"}])
        entry["gemma_chat_ids"] = llmlab.as_ids(space["model"], space["tokenizer"], chat)[0, :3].tolist()
    report["blocks"].append(entry)
print(json.dumps(report))
'''


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    proc = subprocess.run([sys.executable, "-c", RUNNER, json.dumps(python_blocks())], cwd=tmp_path_factory.mktemp("run"),
                          env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_readme_names_the_chat_model_and_the_base_model():
    text = " ".join(using_section().split())
    assert "SmolLM2-135M-Instruct** was fine-tuned on conversations: it chats" in text
    assert "Gemma-3-270M** is a base model" in text
    blocks = python_blocks()
    assert len(blocks) >= 3
    assert 'llmlab.load("smollm2-135m")' in blocks[0] and "apply_chat_template" in blocks[0]
    assert 'llmlab.load("gemma3-270m")' in blocks[1] and "apply_chat_template" not in blocks[1]
    assert all("stop_token_ids" in block for block in blocks[:2])


def test_import_llmlab_first_sets_the_thread_policy(report):
    assert report["torch_before_llmlab"] is False and report["omp"] == "PASSIVE"


@pytest.mark.parametrize("index, vocab_size", [(0, 49152), (1, 262144)], ids=["smollm2", "gemma3"])
def test_each_model_answers_and_stops_at_the_end_of_the_answer(report, index, vocab_size):
    block, entry = python_blocks()[index], report["blocks"][index]
    assert entry["vocab"] == vocab_size
    assert expected_output(block) and entry["printed"].rstrip("\n") == expected_output(block)
    [call] = entry["calls"]
    assert call["last"] in call["stops"], call              # it stopped on a stop id ...
    assert call["new"] <= call["max_new_tokens"] // 4, call  # ... well before max_new_tokens


def test_the_gemma_chat_prompt_has_one_bos(report):
    assert report["blocks"][1]["gemma_chat_ids"] == [2, 105, 2364]   # <bos> <start_of_turn> user


def test_the_lens_prints_a_table(report):
    entry = report["blocks"][next(i for i, block in enumerate(python_blocks()) if "logit_lens(" in block)]
    lens = entry["lens"]
    assert lens["type"] == "LensResult" and lens["last"] == " Paris"   # what the README says the table shows
    lines = entry["printed"].strip("\n").splitlines()
    assert lens["rows"] <= len(lines) <= lens["rows"] + 3 and "Paris" in entry["printed"]
    assert "tensor(" not in entry["printed"]
