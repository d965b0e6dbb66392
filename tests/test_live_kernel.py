"""The live model's decode kernel (llmlab/live/decode.c, run by assets/live/kernel.js) against llmlab.

The kernel reads the GGUF file's Q4_1 / Q8_0 blocks directly and adds in another order than llmlab's
float32 matmuls, so its logits are held to llmlab.numerics' float32 rounding rule over the whole
forward pass (forward_depth), its next-token probabilities to the live parity tests' 1e-4, and its
greedy ids must be llmlab.generate's, on every prompt the live tests use. tests/live_kernel.js runs it
in Node, as the page's worker runs it.
"""
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

import llmlab
from llmlab.hooks import hook_name
from llmlab.inspection.capture import hooks
from llmlab.inspection.steering import steer, steering_vector
from llmlab.live import export_onnx
from llmlab.live.kernel import SOURCE, WASM, build_kernel, kernel_is_current
from llmlab.numerics import forward_depth, rounding_tolerance

ROOT = Path(__file__).resolve().parents[1]
HARNESS = ROOT / "tests" / "live_kernel.js"
# every prompt of tests/test_live*.py that generates or reads the next token
PROMPTS = ["The Eiffel Tower is in the city of", "我喜欢喝茶，因为", "今天天气很好，我们去公园",
           "The capital of France is", "def fibonacci(n):", "Once upon a time", "Today I feel", "The sea is",
           "The cat sat on the mat", "I love it", "What a pain"]
N_NEW = 12

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="the kernel tests run it in Node (node not found)")


@pytest.fixture(scope="module")
def smol():
    return llmlab.load("smollm2-135m", device="cpu")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The site's files (blocks, recipe, norms) as `make live` ships them."""
    folder = tmp_path_factory.mktemp("kernel")
    export_onnx(folder, expanded=False)
    return folder


def run_kernel(files, ids, n_new, tmp_path, mode="prompt", wasm=WASM, interventions=None):
    """(greedy ids, logits (n_new + 1, V), timings) from the kernel in Node."""
    out = tmp_path / "logits.f32"
    args = ["node", str(HARNESS), str(files), str(wasm), ",".join(map(str, ids)), str(n_new), str(out), mode]
    if interventions is not None:
        (tmp_path / "iv.f32").write_bytes(np.concatenate(interventions).astype(np.float32).tobytes())
        args.append(str(tmp_path / "iv.f32"))
    run = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    return report["ids"], np.fromfile(out, np.float32).reshape(n_new + 1, -1), report


def check_logits(model, got, want, n_tokens):
    """Logits up to float32 rounding over the forward pass; probabilities within the parity tests' 1e-4."""
    tolerance = rounding_tolerance(torch.from_numpy(want), depth=forward_depth(model.config, n_tokens))
    diff = np.abs(got - want).max()
    assert diff <= tolerance, f"logits differ by {diff:.3g}, rounding allows {tolerance:.3g}"
    p = torch.softmax(torch.from_numpy(got).double(), -1) - torch.softmax(torch.from_numpy(want).double(), -1)
    assert p.abs().max().item() < 1e-4
    return diff, tolerance


def reference(model, tokenizer, prompt, n_new):
    """llmlab's greedy ids and the logits it saw before writing each of them, (n_new + 1, V)."""
    ids = tokenizer.encode(prompt)
    written = llmlab.generate(model, torch.tensor([ids]), max_new_tokens=n_new, eos_token_id=None)[0].tolist()
    with torch.no_grad():
        logits = model(torch.tensor([written]))[0].numpy()                     # (T + n_new, V)
    return ids, written[len(ids):], logits[len(ids) - 1:]


@pytest.mark.parametrize("prompt", PROMPTS)
def test_kernel_writes_llmlab_greedy_tokens_with_its_logits(smol, files, tmp_path, prompt):
    model, tokenizer = smol
    ids, want_ids, want = reference(model, tokenizer, prompt, N_NEW)
    got_ids, got, _ = run_kernel(files, ids, N_NEW, tmp_path)
    assert got_ids[:N_NEW] == want_ids
    for k in range(N_NEW + 1):
        check_logits(model, got[k], want[k], len(ids) + k)


def test_prompt_at_once_and_token_by_token_agree(smol, files, tmp_path):
    """The prompt path (blocks unpacked once for 4 tokens) and the decode path give the same numbers up to rounding."""
    model, tokenizer = smol
    ids = tokenizer.encode("The Eiffel Tower is in the city of Paris, and the Colosseum is in")
    at_once_ids, at_once, _ = run_kernel(files, ids, 4, tmp_path)
    steps_ids, steps, _ = run_kernel(files, ids, 4, tmp_path, mode="steps")
    assert at_once_ids == steps_ids
    for k in range(5):
        check_logits(model, steps[k], at_once[k], len(ids) + k)


def test_knock_outs_and_steering_give_llmlab_numbers(smol, files, tmp_path):
    model, tokenizer = smol
    c = model.config
    layer, scale = 10, 4.0
    vector = steering_vector(model, tokenizer, ["I love it", "What a joy"], ["I hate it", "What a pain"], layer)
    mask, rows = np.ones((c.n_layers, c.n_heads), np.float32), np.zeros((c.n_layers, c.d_model), np.float32)
    mask[4, 2] = mask[7, 8] = 0.0
    rows[layer] = scale * vector.numpy()

    def zero(head):
        def fn(z):  # (B, T, H, hd)
            z = z.clone()
            z[:, :, head] = 0.0
            return z
        return fn
    ids = tokenizer.encode("Today I feel")
    with torch.no_grad(), steer(model, vector, layer, scale), \
            hooks(model, {hook_name(4, "attn.z"): zero(2), hook_name(7, "attn.z"): zero(8)}):
        want = model(torch.tensor([ids]))[0, -1].numpy()
    _, got, _ = run_kernel(files, ids, 0, tmp_path, interventions=(mask.ravel(), rows.ravel()))
    check_logits(model, got[0], want, len(ids))
    _, plain, _ = run_kernel(files, ids, 0, tmp_path)
    assert np.abs(plain[0] - got[0]).max() > 0.1                       # the interventions changed the output


def test_decode_wasm_is_built_from_decode_c():
    assert kernel_is_current(), f"{WASM} is stale: run `python -m llmlab.live.kernel` and commit decode.wasm"


def test_a_broken_kernel_is_caught(smol, files, tmp_path):
    """The checks above can fail: a kernel that reads the wrong nibble mask builds to other bytes and misses llmlab."""
    source = SOURCE.read_text()
    assert source.count("wasm_i8x16_splat(0x0F)") == 1
    broken = tmp_path / "decode.c"
    broken.write_text(source.replace("wasm_i8x16_splat(0x0F)", "wasm_i8x16_splat(0x07)"))
    wasm = build_kernel(tmp_path / "broken.wasm", broken)
    assert wasm.read_bytes() != WASM.read_bytes()
    model, tokenizer = smol
    ids, _, want = reference(model, tokenizer, PROMPTS[0], 0)
    _, got, _ = run_kernel(files, ids, 0, tmp_path, wasm=wasm)
    with pytest.raises(AssertionError, match="logits differ"):
        check_logits(model, got[0], want[0], len(ids))
