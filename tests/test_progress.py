"""A pip user's first hour (issue #47): progress for the slow steps, streams without the stop token,
an empty text named as text.

Progress goes to a terminal as tqdm's bar and to anything else (a log, a pipe) as whole lines; the
prefill of a long prompt on the CPU shows it block by block and changes no number.
"""
from __future__ import annotations

import dataclasses
import io
import time

import pytest
import torch

import llmlab
from llmlab import ModelConfig, Transformer, assert_same_bits, generate, prefill
from llmlab.checks import as_batch, as_ids
from llmlab.kvcache import GrowingKVCache
from llmlab.progress import LONG_PREFILL_TOKENS, LineProgress, prefill_progress, progress, redraws_in_place
from llmlab.tokenization.base import check_texts_give_tokens


class Terminal(io.StringIO):
    def isatty(self):
        return True


def _long_tiny():
    """tiny-llama (2 blocks) with a context long enough for a prompt past LONG_PREFILL_TOKENS."""
    torch.manual_seed(0)
    config = dataclasses.replace(ModelConfig.preset("tiny-llama"), max_seq_len=LONG_PREFILL_TOKENS + 64)
    return Transformer(config).eval()


# ------------------------------------------------------------------ progress bars: lines off a terminal

def test_progress_is_whole_lines_when_the_output_is_not_a_terminal():
    log = io.StringIO()
    items = list(progress(range(25), desc="Dequantizing x.gguf", unit="tensor", file=log))
    assert items == list(range(25))
    text = log.getvalue()
    assert "\r" not in text
    lines = text.splitlines()
    assert lines[0] == "Dequantizing x.gguf: 0/25 tensors"
    assert lines[-1].startswith("Dequantizing x.gguf: 25/25 tensors, done in ")
    assert 3 <= len(lines) <= LineProgress.STEPS + 2          # a line per tenth at most, not one per item
    assert all(line.startswith("Dequantizing x.gguf: ") for line in lines)


def test_progress_on_a_terminal_is_tqdms_bar_and_disable_prints_nothing():
    screen = Terminal()
    assert redraws_in_place(screen) and not redraws_in_place(io.StringIO())
    list(progress(range(5), desc="Working", unit="step", file=screen))
    assert "\r" in screen.getvalue() and "5/5" in screen.getvalue()       # redrawn in place, as before
    quiet = io.StringIO()
    assert list(progress(range(3), desc="Working", unit="step", disable=True, file=quiet)) == [0, 1, 2]
    assert quiet.getvalue() == ""


def test_progress_stopped_early_says_so():
    log = io.StringIO()
    with LineProgress(total=10, desc="Work", unit="step", file=log, clock=lambda: 0.0) as bar:
        bar.update(3)
    assert log.getvalue().splitlines()[-1] == "Work: 3/10 steps, stopped after 0.0 s"


def test_gguf_dequantizing_writes_lines_to_a_log(monkeypatch, capsys):
    gguf = pytest.importorskip("gguf")
    from llmlab import gguf as llmlab_gguf

    class Tensor:
        def __init__(self, name):
            self.name, self.tensor_type = name, gguf.GGMLQuantizationType.F32
            self.data = torch.ones(4, 4).numpy()

    names = ["token_embd.weight", "output_norm.weight"] + [
        f"blk.0.{part}.weight" for part in ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm",
                                            "ffn_gate", "ffn_up", "ffn_down")]
    reader = type("Reader", (), {"tensors": [Tensor(n) for n in names]})()
    monkeypatch.setattr(llmlab_gguf, "gguf_config_to_hf", lambda r: {"num_attention_heads": 1,
                                                                       "num_key_value_heads": 1,
                                                                       "num_hidden_layers": 1})
    monkeypatch.setattr(llmlab_gguf, "architecture_of", lambda r: "llama")
    _, state_dict = llmlab_gguf.read_gguf_checkpoint("model.gguf", reader=reader)   # stderr: pytest's, no tty
    assert len(state_dict) == len(names)
    err = capsys.readouterr().err
    assert "\r" not in err and err.splitlines()[0] == f"Dequantizing model.gguf: 0/{len(names)} tensors"
    assert err.splitlines()[-1].startswith(f"Dequantizing model.gguf: {len(names)}/{len(names)} tensors, done in ")
    llmlab_gguf.read_gguf_checkpoint("model.gguf", reader=reader, progress=False)
    assert capsys.readouterr().err == ""


# ------------------------------------------------------------------ the prefill of a long prompt

def test_a_long_prefill_on_the_cpu_shows_progress_per_block_and_changes_no_number(capsys):
    model = _long_tiny()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, model.config.vocab_size, (1, LONG_PREFILL_TOKENS), generator=g)
    quiet = prefill(model, ids, GrowingKVCache.for_model(model), progress=False)
    assert capsys.readouterr().err == ""
    shown = prefill(model, ids, GrowingKVCache.for_model(model))                 # long, on the CPU: shown
    assert_same_bits(shown, quiet)
    lines = capsys.readouterr().err.splitlines()
    n = model.config.n_layers
    assert lines[0] == f"llmlab: prefill of {LONG_PREFILL_TOKENS:,} tokens: 0/{n} blocks"
    assert lines[-1].startswith(f"llmlab: prefill of {LONG_PREFILL_TOKENS:,} tokens: {n}/{n} blocks, done in ")
    assert all(not block._forward_hooks for block in model.blocks)              # the hooks are gone again
    out = generate(model, ids, 2)
    assert "prefill of" in capsys.readouterr().err
    assert torch.equal(out, generate(model, ids, 2, progress=False)) and capsys.readouterr().err == ""


def test_a_normal_prompt_prints_nothing(capsys):
    model = _long_tiny()
    ids = torch.randint(0, model.config.vocab_size, (1, LONG_PREFILL_TOKENS - 1))
    prefill(model, ids, GrowingKVCache.for_model(model))
    generate(model, ids[:, :40], 3)
    generate(model, ids[:, :40], 3, use_cache=False)
    assert capsys.readouterr().err == ""


def test_the_bar_on_a_terminal_changes_no_number():
    # tqdm's update() returns True when it redraws (after 0.1 s); a forward hook that returned it would
    # replace the block's output with True. Slow blocks make the bar redraw at every block.
    model = _long_tiny()
    ids = torch.randint(0, model.config.vocab_size, (1, 32), generator=torch.Generator().manual_seed(2))
    plain = model(ids)
    slow = [block.register_forward_pre_hook(lambda *_: time.sleep(0.15)) for block in model.blocks]
    screen = Terminal()
    try:
        with prefill_progress(model, 32, show=True, file=screen):
            barred = model(ids)
    finally:
        for handle in slow:
            handle.remove()
    assert_same_bits(barred, plain)
    assert "\r" in screen.getvalue() and "2/2" in screen.getvalue()


def test_prefill_progress_can_be_forced_and_checks_its_setting():
    model = _long_tiny()
    log = io.StringIO()
    with prefill_progress(model, 5, show=True, file=log):
        model(torch.tensor([[1, 2, 3, 4, 5]]))
    assert log.getvalue().splitlines()[-1].startswith("llmlab: prefill of 5 tokens: 2/2 blocks, done in ")
    with pytest.raises(TypeError, match="progress must be None .* True or False; got 'yes'"):
        prefill(model, torch.tensor([[1, 2]]), GrowingKVCache.for_model(model), progress="yes")


# ------------------------------------------------------------------ streams leave out the stop token

def test_stream_does_not_get_the_stop_token():
    torch.manual_seed(0)
    model = Transformer(ModelConfig.preset("tiny-llama")).eval()
    ids, sampled = torch.tensor([[5, 6]]), dict(temperature=1.0, seed=3)   # sampled: varied random-model tokens
    free = generate(model, ids, 10, **sampled)[0, 2:].tolist()
    k = next(k for k in range(1, 10) if free[k] not in free[:k])
    stop = free[k]                                 # the first new token not seen before: a stop there
    seen = []
    out = generate(model, ids, 10, eos_token_id=stop, stream=seen.append, **sampled)
    assert out[0, 2:].tolist() == free[:k + 1]     # the returned ids end with the stop token ...
    assert seen == free[:k] and stop not in seen   # ... the stream never gets it
    # a batch: None for a row that has stopped; no call once every row has
    batch = torch.tensor([[5, 6], [9, 10]])
    rows = generate(model, batch, 10, **sampled)[:, 2:].tolist()
    steps = []
    generate(model, batch, 10, eos_token_id=stop, stream=steps.append, **sampled)
    for r, row in enumerate(rows):
        streamed = [step[r] for step in steps]
        if stop in row:
            j = row.index(stop)
            assert streamed[:j] == row[:j] and all(t is None for t in streamed[j:])
        else:
            assert streamed == row
    assert any(t is None for step in steps for t in step)                 # a row did stop (the test shows it)
    assert all(any(t is not None for t in step) for step in steps)


def test_a_real_chat_stream_prints_no_end_of_turn():
    model, tok = llmlab.load("smollm2-135m")
    chat = tok.apply_chat_template([{"role": "user", "content": "Say hi."}])
    ids = as_ids(model, tok, chat)
    printed = []
    out = generate(model, ids, 40, eos_token_id=tok.eos_token_id, stream=lambda t: printed.append(tok.decode([t])))
    assert out[0, -1].item() == tok.eos_token_id                     # it did stop on <|im_end|>
    text = "".join(printed)
    assert text and "<|im_end|>" not in text and text == tok.decode(out[0, ids.shape[1]:-1].tolist())


# ------------------------------------------------------------------ an empty text, in the user's terms

def test_empty_text_error_names_the_text_not_ids():
    model, tok = llmlab.load("smollm2-135m")
    with pytest.raises(ValueError) as error:
        as_ids(model, tok, "")
    message = str(error.value)
    assert message.startswith("the prompt text is '', which gives no tokens") and "Once upon a time" in message
    assert "ids" not in message and "BOS" not in message
    with pytest.raises(ValueError, match=r"^text 1 of 2 is '', which gives no tokens"):
        as_batch(model, tok, ["Hello", ""])
    with pytest.raises(ValueError, match=r"^the prompt text is '', which gives no tokens"):
        tok.encode_batch([""])
    with pytest.raises(ValueError, match="the list of texts is empty"):
        check_texts_give_tokens([], [])
    with pytest.raises(ValueError, match=r"ids is empty \(shape \(1, 0\)\)"):       # ids stay in ids' terms
        as_ids(model, None, [])
