"""Tiny random models of every family: llmlab vs transformers in float32, the logits equal up to float32
rounding over the whole model (llmlab.numerics: the same model, its sums in another order).

The Hugging Face models are built from configs with random weights (no downloads). Every weight,
norms included, is re-drawn so that a wrong (1 + w), a missing bias or a swapped norm shows up.
"""
import pytest
import torch
import transformers

import llmlab
from llmlab import assert_same_up_to_rounding, available_devices, forward_depth
from llmlab.convert import convert_hf_checkpoint

V = 97


def _randomize(hf_model, seed=0):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in hf_model.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            if p.dim() == 1 and "bias" not in name:  # norm weights: around 1 (or around 0 for Gemma's 1 + w)
                p.copy_(1.0 + 0.2 * noise if "gemma" not in type(hf_model).__name__.lower() else 0.2 * noise)
            else:
                p.copy_(0.05 * noise)
    return hf_model


def _llama(**kw):
    base = dict(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, max_position_embeddings=128, tie_word_embeddings=False)
    return transformers.LlamaConfig(**{**base, **kw})


LLAMA3_SCALING = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": 16}

CASES = {
    "gpt2": lambda: transformers.GPT2Config(vocab_size=V, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                                            bos_token_id=0, eos_token_id=0),
    "gpt2-untied": lambda: transformers.GPT2Config(vocab_size=V, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                                                   bos_token_id=0, eos_token_id=0, tie_word_embeddings=False),
    "llama-gqa": lambda: _llama(),
    "llama-mqa-tied": lambda: _llama(num_key_value_heads=1, tie_word_embeddings=True),
    "llama-mha-bias": lambda: _llama(num_key_value_heads=4, attention_bias=True, mlp_bias=True),
    "llama3-rope-scaling": lambda: _llama(rope_theta=500000.0, rope_scaling=LLAMA3_SCALING),
    "qwen2-bias": lambda: transformers.Qwen2Config(vocab_size=V, hidden_size=32, intermediate_size=64,
                                                   num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                                   max_position_embeddings=128, tie_word_embeddings=True),
    "qwen2-sliding": lambda: transformers.Qwen2Config(vocab_size=V, hidden_size=32, intermediate_size=64,
                                                      num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=1,
                                                      max_position_embeddings=128, use_sliding_window=True,
                                                      sliding_window=5, max_window_layers=1, tie_word_embeddings=False),
    "gemma3-sliding": lambda: transformers.Gemma3TextConfig(
        vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, max_position_embeddings=128, sliding_window=5,
        layer_types=["sliding_attention", "sliding_attention", "full_attention", "sliding_attention"],
        query_pre_attn_scalar=12, rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1e6},
                                                   "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}},
        pad_token_id=0, eos_token_id=1, bos_token_id=2),
    "gemma3-softcap-untied": lambda: transformers.Gemma3TextConfig(
        vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, head_dim=8, max_position_embeddings=128, sliding_window=3,
        final_logit_softcapping=3.0, attn_logit_softcapping=5.0, tie_word_embeddings=False,
        pad_token_id=0, eos_token_id=1, bos_token_id=2),
    "phi3": lambda: transformers.Phi3Config(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                            pad_token_id=0, bos_token_id=1, eos_token_id=2),
    "phi3-partial-rope-sliding": lambda: transformers.Phi3Config(
        vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, max_position_embeddings=128, partial_rotary_factor=0.5, sliding_window=6,
        pad_token_id=0, bos_token_id=1, eos_token_id=2),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def pair(request):
    torch.manual_seed(0)
    cfg = CASES[request.param]()
    hf = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").eval()
    _randomize(hf)
    return request.param, hf, llmlab.from_hf(hf)


@pytest.mark.parametrize("device", available_devices(), ids=str)
@pytest.mark.parametrize("attn_impl", ["eager", "sdpa"])
def test_logits_match_transformers(pair, device, attn_impl):
    name, hf, model = pair
    hf, model = hf.to(device), model.to(device)
    ids = torch.randint(0, V, (2, 17), generator=torch.Generator().manual_seed(1)).to(device)
    with torch.no_grad():
        ref = hf(ids).logits
        out = model(ids, attn_impl=attn_impl)
    assert out.shape == ref.shape
    assert_same_up_to_rounding(out, ref, depth=forward_depth(model.config, 17), what=f"{name}'s logits")


def test_logits_match_with_left_padding(pair):
    name, hf, model = pair
    hf, model = hf.to("cpu"), model.to("cpu")
    ids = torch.randint(0, V, (2, 12), generator=torch.Generator().manual_seed(2))
    mask = torch.ones(2, 12, dtype=torch.long)
    mask[1, :5] = 0
    with torch.no_grad():
        # as transformers' generate does: the first real token of a row is position 0
        position_ids = (mask.cumsum(-1) - 1).clamp(min=0)
        ref = hf(ids, attention_mask=mask, position_ids=position_ids).logits
        out = model(ids, attention_mask=mask)
    real = mask.bool()
    assert_same_up_to_rounding(out[real], ref[real], depth=forward_depth(model.config, 12), what=f"{name}'s logits")


def test_config_fields_were_translated(pair):
    name, hf, model = pair
    c = model.config
    assert c.vocab_size == V and c.n_layers == hf.config.num_hidden_layers
    assert c.tie_embeddings == hf.config.tie_word_embeddings
    if c.tie_embeddings:
        assert model.lm_head.weight is model.tok_embed.weight
        assert "lm_head.weight" not in model.state_dict()  # listed once, as tok_embed.weight


def test_tied_head_may_be_missing_from_the_checkpoint():
    hf = transformers.AutoModelForCausalLM.from_config(_llama(tie_word_embeddings=True)).eval()
    sd = {k: v for k, v in hf.state_dict().items() if k != "lm_head.weight"}
    config, weights = convert_hf_checkpoint(hf.config.to_dict(), sd)
    model = llmlab.Transformer(config)
    model.load_state_dict(weights)  # strict
    assert torch.equal(model.lm_head.weight, hf.model.embed_tokens.weight)
    # the untied head must not be missing
    hf2 = transformers.AutoModelForCausalLM.from_config(_llama()).eval()
    sd2 = {k: v for k, v in hf2.state_dict().items() if k != "lm_head.weight"}
    with pytest.raises(KeyError, match="lm_head.weight"):
        convert_hf_checkpoint(hf2.config.to_dict(), sd2)


def test_base_model_checkpoint_without_prefix_converts():
    hf = transformers.AutoModelForCausalLM.from_config(CASES["gpt2"]()).eval()
    sd = {k.removeprefix("transformer."): v for k, v in hf.state_dict().items() if k != "lm_head.weight"}
    config, weights = convert_hf_checkpoint(hf.config.to_dict(), sd)
    assert torch.equal(weights["blocks.0.attn.qkv_proj.weight"], hf.transformer.h[0].attn.c_attn.weight.t())


def test_model_config_round_trips_through_json():
    import json
    for name, make in CASES.items():
        hf_cfg = make()
        config, _ = convert_hf_checkpoint(hf_cfg.to_dict(), transformers.AutoModelForCausalLM.from_config(hf_cfg).state_dict())
        assert llmlab.ModelConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config, name
