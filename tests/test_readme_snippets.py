"""Every ```python block of the README, each run alone in a fresh interpreter, as a reader pastes it.

A block must hold its own imports and load its own model by name: nothing carries over from the block
before. What a block prints must equal the comment lines that follow its print() call in the README,
and every `llmlab.generate` call must stop at the end of the answer: its last token is one of the stop
ids it was given, well before max_new_tokens.
"""
import doctest
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")

pytestmark = pytest.mark.slow                    # loads SmolLM2 and Gemma, and SmolLM2 in transformers


def section(title: str) -> str:
    start = README.index(f"## {title}")
    return README[start:README.index("\n## ", start + 1)]


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README, re.S)


def block_with(text: str) -> int:
    return next(i for i, block in enumerate(python_blocks()) if text in block)


def expected_output(block: str) -> str:
    """The comment lines right after the print() call(s) of a block: what the README says it prints
    ("..." stands for the rest of a long line)."""
    lines, out, after_print = block.splitlines(), [], False
    for line in lines:
        if line.startswith("print("):
            after_print = True
        elif after_print and line.startswith("# "):
            out.append(line[2:])
        else:
            after_print = False
    return "\n".join(out)


def prints_as_written(printed: str, expected: str) -> bool:
    return doctest.OutputChecker().check_output(expected + "\n", printed.rstrip("\n") + "\n", doctest.ELLIPSIS)


# Runs in the child process: records every generate call, runs one block in an empty namespace, prints
# one JSON report. Importing llmlab here puts nothing into the block's namespace: a block that uses
# `llmlab` without importing it fails as it would for a reader.
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
space, printed = {"__name__": "__main__"}, io.StringIO()
with contextlib.redirect_stdout(printed):
    exec(compile(sys.argv[1], "README.md", "exec"), space)
report.update(printed=printed.getvalue(), calls=calls)
if "model" in space:
    report["vocab"] = space["model"].config.vocab_size
if "lens" in space:
    lens = space["lens"]
    report["lens"] = {"type": type(lens).__name__, "last": lens.top_tokens[-1][-1][0], "rows": len(lens.layer_labels)}
if "model" in space and space["model"].config.vocab_size == 262144:   # the chat path of the README, on Gemma
    chat = space["tokenizer"].apply_chat_template([{"role": "user", "content": "Hi"}])
    report["gemma_chat_ids"] = llmlab.as_ids(space["model"], space["tokenizer"], chat)[0, :3].tolist()
print(json.dumps(report))
'''


def run_alone(block: str, cwd: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "LLMLAB_LANGUAGE")}
    env["HF_HUB_OFFLINE"] = "1"                  # the README's blocks read local files only
    proc = subprocess.run([sys.executable, "-c", RUNNER, block], cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        return {"error": proc.stderr[-3000:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """One report per block, each from its own interpreter (two at a time)."""
    cwd = tmp_path_factory.mktemp("run")
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(lambda block: run_alone(block, cwd), python_blocks()))


def test_the_readme_names_the_chat_model_and_the_base_model():
    text = " ".join(section("Using llmlab").split())
    assert "SmolLM2-135M-Instruct** was fine-tuned on conversations: it chats" in text
    assert "Gemma-3-270M** is a base model" in text
    blocks = python_blocks()
    assert len(blocks) >= 5
    assert 'llmlab.load("smollm2-135m")' in blocks[0] and "apply_chat_template" in blocks[0]
    assert 'llmlab.load("gemma3-270m")' in blocks[1] and "apply_chat_template" not in blocks[1]
    assert all("stop_token_ids" in block for block in blocks[:2])


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_each_block_runs_alone_and_prints_what_the_readme_says(reports, index):
    block, report = python_blocks()[index], reports[index]
    assert "error" not in report, f"README block {index + 1}, run alone, fails:\n{block}\n{report.get('error')}"
    if expected_output(block):
        assert prints_as_written(report["printed"], expected_output(block)), (report["printed"], expected_output(block))
    if "llmlab.load(" in block:                  # each block that loads a model says which
        assert re.search(r'model, tokenizer = llmlab\.load\("[\w.-]+"', block), block


def test_import_llmlab_first_sets_the_thread_policy(reports):
    assert reports[0]["torch_before_llmlab"] is False and reports[0]["omp"] == "PASSIVE"


@pytest.mark.parametrize("index, vocab_size", [(0, 49152), (1, 262144)], ids=["smollm2", "gemma3"])
def test_each_model_answers_and_stops_at_the_end_of_the_answer(reports, index, vocab_size):
    block, report = python_blocks()[index], reports[index]
    assert report["vocab"] == vocab_size
    assert expected_output(block) and prints_as_written(report["printed"], expected_output(block))
    [call] = report["calls"]
    assert call["last"] in call["stops"], call              # it stopped on a stop id ...
    assert call["new"] <= call["max_new_tokens"] // 4, call  # ... well before max_new_tokens


def test_the_gemma_chat_prompt_has_one_bos(reports):
    assert reports[1]["gemma_chat_ids"] == [2, 105, 2364]   # <bos> <start_of_turn> user


def test_the_lens_prints_a_table(reports):
    report = reports[block_with("logit_lens(")]
    lens = report["lens"]
    assert lens["type"] == "LensResult" and lens["last"] == " Paris"   # what the README says the table shows
    lines = report["printed"].strip("\n").splitlines()
    assert lens["rows"] <= len(lines) <= lens["rows"] + 3 and "Paris" in report["printed"]
    assert "tensor(" not in report["printed"]


def test_the_reference_recipe_loads_the_same_file_in_transformers(reports):
    index = block_with("AutoModelForCausalLM")
    block = python_blocks()[index]
    assert "llmlab.gguf_path(" in block and "gguf_file=path.name" in block
    assert "assert_same_up_to_rounding(" in block and "forward_depth(" in block   # never a guessed tolerance
    assert len([line for line in block.splitlines() if line and not line.startswith("#")]) <= 12
    assert "error" not in reports[index] and expected_output(block)


def test_the_exercise_workflow_and_the_languages():
    from llmlab.exercises.language import LANGUAGES

    text = " ".join(section("Using llmlab").split())
    assert "`llmlab exercises`" in text and "check(id, fn)" in text
    assert "Both take exactly `en` or `zh_CN`" in text and LANGUAGES == ("en", "zh_CN")
    block = python_blocks()[block_with("from llmlab.exercises import check")]
    assert re.search(r'check\("\w+", \w+\)', block)
