"""Bad input gives an error a learner can act on, not a deep torch traceback."""
import pytest
import torch
import transformers

from llmlab import ModelConfig, Transformer, generate
from llmlab.convert import convert_hf_checkpoint


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return Transformer(ModelConfig.preset("tiny-llama")).eval()  # vocab 128, max_seq_len 64


def test_ids_outside_the_vocabulary(model):
    with pytest.raises(ValueError, match=r"token id 128 is outside the vocabulary.*0\.\.127"):
        model(torch.tensor([[1, 128]]))
    with pytest.raises(ValueError, match="token id -1"):
        generate(model, torch.tensor([[-1, 2]]), 3)


def test_empty_input(model):
    with pytest.raises(ValueError, match="empty"):
        model(torch.zeros(1, 0, dtype=torch.long))
    with pytest.raises(ValueError, match="empty"):
        generate(model, [], 3)


def test_longer_than_the_context(model):
    with pytest.raises(ValueError, match="max_seq_len=64"):
        model(torch.zeros(1, 65, dtype=torch.long))
    with pytest.raises(ValueError, match="max_seq_len=64"):
        generate(model, torch.zeros(1, 60, dtype=torch.long), 10)


def test_float_ids(model):
    with pytest.raises(TypeError, match="integer token ids"):
        model(torch.tensor([[1.0, 2.0]]))


def test_wrong_shape_and_type(model):
    with pytest.raises(ValueError, match="unsqueeze"):
        model(torch.tensor([1, 2, 3]))
    with pytest.raises(TypeError, match=r"llmlab.as_ids\(model, tokenizer, text\)"):
        model([[1, 2, 3]])


def test_ids_without_values(model):
    meta_ids = torch.zeros(1, 3, dtype=torch.long, device="meta")
    with pytest.raises(ValueError, match=r"meta device, which holds shapes but no values"):
        model(meta_ids)


def test_bad_sampling_arguments(model):
    with pytest.raises(ValueError, match="temperature"):
        generate(model, [1, 2], 2, temperature=-1.0)
    with pytest.raises(ValueError, match="top_k"):
        generate(model, [1, 2], 2, temperature=1.0, top_k=0)
    with pytest.raises(ValueError, match="top_p"):
        generate(model, [1, 2], 2, temperature=1.0, top_p=0.0)


def test_bad_attention_mask(model):
    with pytest.raises(ValueError, match="attention_mask must be a tensor of shape"):
        model(torch.tensor([[1, 2, 3]]), attention_mask=torch.ones(1, 2))


def test_bad_config_values():
    with pytest.raises(ValueError, match="n_kv_heads"):
        ModelConfig(n_heads=4, n_kv_heads=3)
    with pytest.raises(ValueError, match="norm="):
        ModelConfig(norm="batch")
    with pytest.raises(ValueError, match="sliding_window"):
        ModelConfig(n_layers=2, layer_types=("sliding", "full"))
    with pytest.raises(ValueError, match="Unknown ModelConfig fields"):
        ModelConfig.from_dict({"d_model": 8, "dmodel": 8})
    with pytest.raises(ValueError, match="No preset"):
        ModelConfig.preset("gpt-5")


def _tiny_llama_hf():
    cfg = transformers.LlamaConfig(vocab_size=50, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                   num_attention_heads=2, max_position_embeddings=32)
    return transformers.AutoModelForCausalLM.from_config(cfg)


def test_unsupported_architecture():
    cfg = transformers.MistralConfig(vocab_size=50, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                     num_attention_heads=2, num_key_value_heads=1).to_dict()
    with pytest.raises(ValueError, match=r"Unsupported architecture model_type='mistral'.*llama"):
        convert_hf_checkpoint(cfg, {})


def test_strict_conversion_names_the_tensor():
    hf = _tiny_llama_hf()
    cfg, sd = hf.config.to_dict(), dict(hf.state_dict())
    missing = {k: v for k, v in sd.items() if k != "model.layers.0.mlp.up_proj.weight"}
    with pytest.raises(KeyError, match="model.layers.0.mlp.up_proj.weight"):
        convert_hf_checkpoint(cfg, missing)
    extra = {**sd, "model.layers.0.mlp.mystery.weight": torch.zeros(3)}
    with pytest.raises(ValueError, match="model.layers.0.mlp.mystery.weight"):
        convert_hf_checkpoint(cfg, extra)
    wrong = {**sd, "model.layers.0.self_attn.q_proj.weight": torch.zeros(16, 8)}
    with pytest.raises(ValueError, match=r"Shape mismatch for 'model.layers.0.self_attn.q_proj.weight'"):
        convert_hf_checkpoint(cfg, wrong)


def test_unsupported_rope_scaling():
    hf = _tiny_llama_hf()
    cfg = hf.config.to_dict()
    cfg["rope_parameters"] = {"rope_type": "yarn", "factor": 4.0, "rope_theta": 10000.0}
    with pytest.raises(ValueError, match="'yarn' is not supported"):
        convert_hf_checkpoint(cfg, hf.state_dict())


def test_unknown_or_absent_device_names():
    from llmlab.devices import get_device

    with pytest.raises(ValueError, match="'tpu' is not a device name torch knows. Use 'cpu', 'cuda'"):
        get_device("tpu")
    count = torch.cuda.device_count()
    if count == 0:
        with pytest.raises(RuntimeError, match="no CUDA GPU that torch can see. Use device='cpu'"):
            get_device("cuda")
    with pytest.raises(RuntimeError, match=f"has {count} CUDA GPU|no CUDA GPU"):
        get_device(f"cuda:{count}")
    assert get_device("cpu") == torch.device("cpu")
