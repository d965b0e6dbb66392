"""llmlab on a GPU: the real models on CUDA against transformers on the same card, and the paths a
reader takes there (`pytest -m gpu`, run by `make gpu`; skipped with "needs CUDA" where torch sees none).

- parity: SmolLM2 and Gemma 3 in float32 (equal up to float32 rounding over the whole model, see
  llmlab.numerics; the top-1 token equal wherever the reference's top two are further apart than twice the
  largest difference) and in bfloat16 (the tolerance policy's "compare
  top-k": llmlab's top-1 is in transformers' top 5 everywhere and equals its top-1 at >= 90% of positions);
- 30 greedy tokens equal to transformers' in float32;
- the KV cache: cached greedy decoding (static and growing cache, a left-padded batch) gives the
  tokens of recomputing everything at every step;
- int8 / int4: every kernel llmlab.quantize offers on the device equals the dequantized product, and
  the quantized real models agree with float32 as on the CPU;
- inspection: a model on the GPU fed ids, vectors and patch values made on the CPU (as a reader makes
  them) gives the CPU model's results.

LLMLAB_GPU_TEST_DEVICE=cpu runs the same checks on the CPU (to try them on a machine without a GPU).
"""
import copy
import os

import pytest
import torch
import torch.nn.functional as F

transformers = pytest.importorskip("transformers")

import llmlab  # noqa: E402
from llmlab import assert_same_up_to_rounding, forward_depth  # noqa: E402
from llmlab.generation import generate  # noqa: E402
from llmlab.inspection import (  # noqa: E402
    ablate, capture, causal_trace, direct_logit_attribution, generate_steered, induction_scores, logit_lens,
    nearest_tokens, neuron_activations, patch, patchscope, prompt_similarity, steer, steering_vector,
)
from llmlab.quantize import BF16_AGREEMENT, Int4Linear, Int8Linear, _candidates  # noqa: E402
from test_real_models import PROMPTS, gemma_path, smol_path  # noqa: E402

DEVICE = torch.device(os.environ.get("LLMLAB_GPU_TEST_DEVICE", "cuda"))
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.slow,
    pytest.mark.skipif(DEVICE.type == "cuda" and not torch.cuda.is_available(),
                       reason="needs CUDA: torch sees no GPU here (make gpu runs these on a GPU machine)"),
]
PATHS = {"smollm2-135m": smol_path, "gemma3-270m": gemma_path}


class OnDevice:
    """One real model on DEVICE, loaded by llmlab and by transformers from the same GGUF file, float32."""

    def __init__(self, name):
        path = PATHS[name]()
        self.name = name
        self.model, self.tokenizer = llmlab.load(name, device=DEVICE)
        self.reference = transformers.AutoModelForCausalLM.from_pretrained(
            os.path.dirname(path), gguf_file=os.path.basename(path), dtype=torch.float32,
            attn_implementation="eager").eval().to(DEVICE)

    def ids(self, text):
        """(1, T) ids made on the CPU, as a tokenizer gives them; Gemma gets its <bos>."""
        ids = self.tokenizer.encode(text)
        bos = self.model.config.bos_token_id
        if self.model.config.family == "gemma3" and (not ids or ids[0] != bos):
            ids = [bos] + ids
        return torch.tensor([ids])


@pytest.fixture(scope="module", params=list(PATHS))
def pair(request):
    return OnDevice(request.param)


def test_the_models_live_on_the_device(pair):
    assert pair.model.device.type == DEVICE.type
    assert {p.device.type for p in pair.model.parameters()} == {DEVICE.type}


def test_float32_logits_match_transformers(pair, capsys):
    diffs = []
    for text in PROMPTS:
        ids = pair.ids(text)
        with torch.no_grad():
            ours = pair.model(ids)                                      # CPU ids in, moved to the model's device
            ref = pair.reference(ids.to(DEVICE)).logits
        assert ours.device.type == DEVICE.type and ours.shape == ref.shape
        # two implementations of the same model: equal up to float32 rounding over all of it
        diff = assert_same_up_to_rounding(ours, ref, depth=forward_depth(pair.model.config, ids.shape[1]))
        diffs.append(diff)
        top2 = ref.topk(2, dim=-1).values                               # (1, T, 2)
        clear = (top2[..., 0] - top2[..., 1]) > 2 * diff                # positions without a near-tie
        assert torch.equal(ours.argmax(-1)[clear], ref.argmax(-1)[clear]), text
    with capsys.disabled():
        print(f"\n[{pair.name} on {DEVICE} float32: max |logit diff| per prompt "
              f"{', '.join(f'{d:.1e}' for d in diffs)}]")


def test_bfloat16_logits_match_transformers_in_the_top_k(pair, capsys):
    model = llmlab.load(pair.name, device=DEVICE, dtype="bf16")[0]
    reference = copy.deepcopy(pair.reference).to(torch.bfloat16)
    assert next(model.parameters()).dtype == torch.bfloat16
    agree, total, outside = 0, 0, []
    for text in PROMPTS:
        ids = pair.ids(text)
        with torch.no_grad():
            ours = model(ids)[0].float()                                # (T, V)
            ref = reference(ids.to(DEVICE)).logits[0].float()
        top5 = ref.topk(5, dim=-1).indices                              # (T, 5)
        mine = ours.argmax(-1)                                          # (T,)
        agree += (mine == top5[:, 0]).sum().item()
        total += mine.numel()
        outside += [(text, p) for p in range(mine.numel()) if mine[p] not in top5[p]]
    with capsys.disabled():
        print(f"\n[{pair.name} on {DEVICE} bf16: top-1 equal to transformers' at {agree}/{total} positions]")
    assert not outside, f"llmlab's bf16 top-1 is outside transformers' bf16 top 5 at {outside}"
    assert agree / total >= 0.9


def test_float32_greedy_tokens_match_transformers(pair):
    config = transformers.GenerationConfig(do_sample=False, max_new_tokens=30, eos_token_id=None,
                                           pad_token_id=pair.model.config.pad_token_id or 0)
    for text in [PROMPTS[1], PROMPTS[3]]:
        ids = pair.ids(text)
        ours = generate(pair.model, ids, max_new_tokens=30)
        with torch.no_grad():
            ref = pair.reference.generate(ids.to(DEVICE), generation_config=config,
                                          attention_mask=torch.ones_like(ids, device=DEVICE))
        assert ours.device.type == DEVICE.type
        assert ours.tolist() == ref.tolist(), text


@pytest.mark.parametrize("kv_cache", ["static", "growing"])
def test_cached_greedy_equals_recomputing_everything(pair, kv_cache):
    """The KV cache is a speed-up only: the same tokens as running the whole sequence at every step, for a
    left-padded batch of two prompts of different lengths too (float32: bf16 rounds differently per shape)."""
    tok = pair.tokenizer
    ids = pair.ids(PROMPTS[0])
    cached = generate(pair.model, ids, 20, kv_cache=kv_cache)
    assert torch.equal(cached, generate(pair.model, ids, 20, use_cache=False))
    batch, mask = tok.encode_batch([PROMPTS[0], PROMPTS[1]])             # (2, T) left-padded, on the CPU
    cached = generate(pair.model, batch, 12, attention_mask=mask, kv_cache=kv_cache)
    assert torch.equal(cached, generate(pair.model, batch, 12, attention_mask=mask, use_cache=False))


@pytest.mark.parametrize("kind", ["int8", "int4"])
def test_every_quantized_kernel_on_the_device_equals_the_dequantized_product(kind):
    torch.manual_seed(3)
    linear = torch.nn.Linear(256, 96, bias=True).to(DEVICE)
    x = torch.randn(2, 5, 256, device=DEVICE)
    kernels = _candidates(kind, DEVICE)
    assert "dequantize" in kernels
    for kernel in kernels:
        layer = (Int8Linear(linear) if kind == "int8" else Int4Linear(linear)).to(DEVICE)
        expected = F.linear(x, layer.dequantized(), linear.bias)
        layer.set_kernel(kernel, x.dtype)
        y = layer(x)
        assert y.device.type == DEVICE.type and y.dtype == x.dtype, kernel
        if kernel.endswith("-bf16"):
            # deliberately loose, not float32 rounding: the activations are rounded to bfloat16 first
            # (8 significant bits); llmlab.quantize.BF16_AGREEMENT says how far that goes
            torch.testing.assert_close(y, expected, rtol=0, atol=BF16_AGREEMENT * expected.abs().max().item())
        else:
            # the same dequantized weights in another kernel (or the bias added after the product): 256
            # products and the bias, summed in another order
            assert_same_up_to_rounding(y, expected, depth=256 + 1)


@pytest.mark.parametrize("dtype", ["int8", "int4"])
def test_quantized_real_models_on_the_device_agree_with_float32(pair, dtype, capsys):
    text = ("In a quiet village at the edge of the forest, an old clockmaker spent his days repairing watches "
            "for the farmers and their families. Every morning he opened the shutters, lit the stove and set "
            "out his tools on the long wooden bench.")
    ids = pair.ids(text)
    quantized = llmlab.load(pair.name, device=DEVICE, dtype=dtype)[0]
    assert quantized.quantization["dtype"] == dtype
    assert {b.device.type for b in quantized.buffers()} | {p.device.type for p in quantized.parameters()} == {DEVICE.type}
    with torch.no_grad():
        reference = pair.model(ids)[0].argmax(-1)
        agreement = (quantized(ids)[0].argmax(-1) == reference).float().mean().item()
    with capsys.disabled():
        print(f"\n[{pair.name} {dtype} on {DEVICE} ({quantized.quantization['kernel']}): "
              f"top-1 agreement with float32 {agreement:.3f}]")
    assert agreement >= (0.97 if dtype == "int4" else 0.9)   # the CPU test's bounds (tests/test_quantize.py)


# ------------------------------------------------------------------ inspection with CPU-made inputs

@pytest.fixture(scope="module")
def smol_both():
    """SmolLM2 on the device and on the CPU, float32: the CPU one says what every result should be."""
    on_device, tokenizer = llmlab.load("smollm2-135m", device=DEVICE)
    on_cpu, _ = llmlab.load("smollm2-135m", device="cpu")
    return on_device, on_cpu, tokenizer


def close(gpu, cpu, depth):
    """Equal up to float32 rounding between devices (llmlab.numerics), over `depth` summed terms. The scale is
    at least 1: probabilities, cosines and scores are smaller than the logits and vectors they come from."""
    gpu, cpu = torch.as_tensor(gpu).detach().float().cpu(), torch.as_tensor(cpu).detach().float()
    assert_same_up_to_rounding(gpu, cpu, depth=depth, scale=max(cpu.abs().max().item(), 1.0))


def test_inspection_on_a_gpu_model_takes_cpu_inputs(smol_both):
    gpu, cpu, tok = smol_both
    prompt = "The Eiffel Tower is in the city of"
    ids = torch.tensor([tok.encode(prompt)])                            # made on the CPU
    d = gpu.config.d_model
    # the deepest chain any result below takes: the whole model on at most 20 tokens (induction_scores'
    # sequences), then a softmax over the vocabulary
    depth = forward_depth(cpu.config, 20) + cpu.config.vocab_size

    lens_gpu, lens_cpu = logit_lens(gpu, tok, ids, target=" Paris"), logit_lens(cpu, tok, ids, target=" Paris")
    close(lens_gpu.top_probs, lens_cpu.top_probs, depth)
    close(lens_gpu.target_prob, lens_cpu.target_prob, depth)
    assert lens_gpu.top_tokens[-1][-1][0] == lens_cpu.top_tokens[-1][-1][0]

    (logits_gpu, cache_gpu), (logits_cpu, cache_cpu) = (capture(m, tok, ids, names=["*hook_resid_post"])
                                                        for m in (gpu, cpu))
    close(logits_gpu, logits_cpu, depth)
    close(cache_gpu.resid(-1), cache_cpu.resid(-1), depth)

    close(ablate(gpu, tok, ids, 3, "attn", head=1), ablate(cpu, tok, ids, 3, "attn", head=1), depth)
    value = torch.zeros(1, 1, d)                                        # a CPU patch value
    close(patch(gpu, None, ids, "blocks.3.hook_resid_pre", value, positions=[0]),
          patch(cpu, None, ids, "blocks.3.hook_resid_pre", value, positions=[0]), depth)

    vector = steering_vector(cpu, tok, ["I love the sea"], ["I love the mountains"], layer=10)   # on the CPU
    close(steering_vector(gpu, tok, ["I love the sea"], ["I love the mountains"], layer=10), vector, depth)
    with steer(gpu, vector, layer=10, scale=4.0), torch.no_grad():
        steered_gpu = gpu(ids)
    with steer(cpu, vector, layer=10, scale=4.0), torch.no_grad():
        steered_cpu = cpu(ids)
    close(steered_gpu, steered_cpu, depth)
    assert generate_steered(gpu, tok, ids, vector, 10, 4.0, max_new_tokens=8) == \
        generate_steered(cpu, tok, ids, vector, 10, 4.0, max_new_tokens=8)            # the steered text

    paris = tok.encode(" Paris")[0]
    trace_gpu = causal_trace(gpu, tok, ids, paris, noise_positions=[0, 1, 2, 3], layers=[0, 10, 20])
    trace_cpu = causal_trace(cpu, tok, ids, paris, noise_positions=[0, 1, 2, 3], layers=[0, 10, 20])
    close(trace_gpu.effect, trace_cpu.effect, depth)
    close(direct_logit_attribution(gpu, tok, ids, paris).contributions,
          direct_logit_attribution(cpu, tok, ids, paris).contributions, depth)

    prompts = ["I sat by the river bank", "I paid at the bank"]
    close(prompt_similarity(gpu, tok, prompts, layer=12), prompt_similarity(cpu, tok, prompts, layer=12), depth)
    (tokens_gpu, acts_gpu), (tokens_cpu, acts_cpu) = (neuron_activations(m, tok, prompt, 5, 100) for m in (gpu, cpu))
    assert tokens_gpu == tokens_cpu
    close(acts_gpu, acts_cpu, depth)
    assert patchscope(gpu, tok, ids, 8).text == patchscope(cpu, tok, ids, 8).text
    close(induction_scores(gpu, length=10, n_sequences=8), induction_scores(cpu, length=10, n_sequences=8), depth)
    assert [t for t, _ in nearest_tokens(gpu, tok, " Paris", k=5)] == [t for t, _ in nearest_tokens(cpu, tok, " Paris", k=5)]
