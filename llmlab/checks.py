"""Checks at the boundary: every public llmlab function tests its arguments here, once, and says
what it was given, what it expected and what to do -- instead of a deep torch traceback or,
worse, a silently wrong answer.

>>> resolve_layer(30, -1)            # layers count like Python indices
29
>>> resolve_layer(30, 45)
Traceback (most recent call last):
    ...
IndexError: layer 45 does not exist: the model has 30 layers, 0..29 (or -30..-1 from the end).
>>> check_number("top_p", float("nan"), low=0, high=1, low_open=True)
Traceback (most recent call last):
    ...
ValueError: top_p must be a number in (0, 1]; got nan.
"""
from __future__ import annotations

import math
import numbers

import torch


# ---------------------------------------------------------------- numbers and layer indices

def check_number(name: str, value, low=None, high=None, low_open: bool = False, high_open: bool = False,
                 hint: str = ""):
    """A real number (not NaN, not a bool) inside [low, high] (ends open where asked); returns it as a float."""
    interval = f"{'(' if low_open else '['}{'-inf' if low is None else low}, {'inf' if high is None else high}" \
               f"{')' if high_open or high is None else ']'}"
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and not math.isnan(value)
    if ok and low is not None:
        ok = value > low if low_open else value >= low
    if ok and high is not None:
        ok = value < high if high_open else value <= high
    if not ok:
        raise ValueError(f"{name} must be a number in {interval}; got {value!r}." + (f" {hint}" if hint else ""))
    return float(value)


def check_int(name: str, value, low: int | None = None, high: int | None = None, hint: str = "") -> int:
    """A whole number (an int or an integer-valued 0-d tensor, not a bool or a float) in [low, high]."""
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_floating_point():
        value = int(value)
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise TypeError(f"{name} must be a whole number (int); got {value!r} ({type(value).__name__})."
                        + (f" {hint}" if hint else ""))
    if (low is not None and value < low) or (high is not None and value > high):
        where = f">= {low}" if high is None else f"in {low}..{high}" if low is not None else f"<= {high}"
        raise ValueError(f"{name} must be {where}; got {value}." + (f" {hint}" if hint else ""))
    return int(value)


def resolve_layer(n_layers: int, layer) -> int:
    """A layer number as Python takes an index: 0..n-1, or -n..-1 counted from the end. Never wraps."""
    if isinstance(layer, bool) or not isinstance(layer, numbers.Integral):
        raise TypeError(f"layer must be a whole number; got {layer!r} ({type(layer).__name__}).")
    if not -n_layers <= layer < n_layers:
        raise IndexError(f"layer {layer} does not exist: the model has {n_layers} layers, 0..{n_layers - 1} "
                         f"(or {-n_layers}..-1 from the end).")
    return int(layer) % n_layers


def resolve_position(position, n_tokens: int, what: str = "position") -> int:
    """A token position as Python takes an index (negative from the end); out of range raises."""
    position = check_int(what, position)
    if not -n_tokens <= position < n_tokens:
        raise IndexError(f"{what} {position} is outside the prompt of {n_tokens} tokens "
                         f"(0..{n_tokens - 1}, or {-n_tokens}..-1 from the end).")
    return position % n_tokens


# ---------------------------------------------------------------- token ids and devices

def check_ids(ids, model, start: int = 0, check_values: bool = True) -> torch.Tensor:
    """Token ids (B, T) the model can take, returned on the model's device (ids may come from any device).

    Raises a clear error for anything else: a list, floats, the wrong number of dimensions, an empty
    row, ids outside the vocabulary, or more positions than the model's context. check_values=False
    skips the vocabulary range, the one check that reads the ids (a GPU round trip): the model's forward
    checks values on a sequence's first pass only, so a generate call validates its ids once.
    """
    c = model.config
    if not isinstance(ids, torch.Tensor):
        raise TypeError(f"ids must be a torch.LongTensor of shape (batch, seq_len); got {type(ids).__name__}. "
                        "For text use llmlab.as_ids(model, tokenizer, text); for a list of ids, as_ids(model, None, ids).")
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise TypeError(f"ids must hold integer token ids (torch.long); got dtype {ids.dtype}. Token ids index "
                        "the embedding table -- pass the tokenizer's output, or ids.long() if they are whole numbers.")
    if ids.dim() != 2:
        raise ValueError(f"ids must be 2-D (batch, seq_len); got shape {tuple(ids.shape)}. "
                         "For a single sequence use ids.unsqueeze(0).")
    if ids.shape[1] == 0 or ids.shape[0] == 0:
        raise ValueError(f"ids is empty (shape {tuple(ids.shape)}); give at least one token per row"
                         + (f", e.g. the BOS id {c.bos_token_id}." if c.bos_token_id is not None else "."))
    if ids.device.type == "meta" and model.device.type != "meta":
        raise ValueError("ids are on the meta device, which holds shapes but no values; build them on a real "
                         "device (torch.tensor([...]) or the tokenizer's output).")
    if check_values and ids.device.type != "meta":  # a meta tensor has no values to check
        lo, hi = int(ids.min()), int(ids.max())
        if lo < 0 or hi >= c.vocab_size:
            bad = lo if lo < 0 else hi
            raise ValueError(f"token id {bad} is outside the vocabulary: this model knows ids 0..{c.vocab_size - 1}. "
                             "Was the text encoded with a different model's tokenizer?")
    if start + ids.shape[1] > c.max_seq_len:
        raise ValueError(f"sequence too long: {start} cached + {ids.shape[1]} new = {start + ids.shape[1]} positions, "
                         f"but the model's context is max_seq_len={c.max_seq_len}. Shorten the input "
                         "(e.g. keep the last max_seq_len tokens).")
    return ids.to(model.device, torch.long)


def check_attention_mask(attention_mask, B: int, T_k: int, device, left_padded: bool = False) -> torch.Tensor:
    """A (B, T_k) mask of 1 (real token) and 0 (padding), returned as bool on `device`.

    left_padded=True also requires every row to be zeros then ones with at least one 1 (what generation
    needs: the new tokens are appended on the right).
    """
    if not isinstance(attention_mask, torch.Tensor) or tuple(attention_mask.shape) != (B, T_k):
        shape = tuple(attention_mask.shape) if isinstance(attention_mask, torch.Tensor) \
            else type(attention_mask).__name__
        raise ValueError(f"attention_mask must be a tensor of shape (batch, cached + new tokens) = {(B, T_k)}, "
                         f"with 1 for real tokens and 0 for padding; got {shape}.")
    if attention_mask.device.type != "meta":
        if attention_mask.is_floating_point() and bool(((attention_mask != 0) & (attention_mask != 1)).any()):
            raise ValueError("attention_mask must hold only 0 (padding) and 1 (real token); got other values.")
        mask = attention_mask.bool()
        if left_padded:
            if not bool(mask.any(-1).all()):
                raise ValueError("attention_mask has a row with no real token (all 0); every row needs at least one.")
            if bool((mask[:, :-1] & ~mask[:, 1:]).any()):
                raise ValueError("attention_mask must be left-padded for generation (0s first, then 1s): the new "
                                 "tokens go on the right. Pad on the left, e.g. with "
                                 "tokenizer.encode_batch(texts) or llmlab.tokenization.pad_left(rows, pad_id).")
    return attention_mask.to(device).bool()


def check_vector(name: str, vector, size: int, device=None) -> torch.Tensor:
    """A 1-D tensor of `size` numbers (a direction in the residual stream), moved to `device`."""
    if not isinstance(vector, torch.Tensor):
        raise TypeError(f"{name} must be a torch tensor of shape ({size},); got {type(vector).__name__}.")
    if tuple(vector.shape) != (size,):
        raise ValueError(f"{name} must have shape ({size},) (d_model); got {tuple(vector.shape)}. "
                         "For a batch of vectors, pass one at a time.")
    if not vector.is_floating_point():
        raise TypeError(f"{name} must hold floats; got dtype {vector.dtype}.")
    if vector.device.type != "meta" and not bool(torch.isfinite(vector).all()):
        raise ValueError(f"{name} holds NaN or inf; check how it was computed.")
    return vector if device is None else vector.to(device)


# ---------------------------------------------------------------- prompts and tokenizers

def is_tokenizer(obj) -> bool:
    """Anything with encode() and decode() (llmlab's tokenizers and Hugging Face's alike); str is not one."""
    return not isinstance(obj, (str, bytes)) and hasattr(obj, "encode") and hasattr(obj, "decode")


def _check_tokenizer(tokenizer, what: str = "A text prompt"):
    if tokenizer is None:
        raise ValueError(f"{what} needs a tokenizer: f(model, tokenizer, 'text', ...); pass token ids to leave "
                         "it out, e.g. llmlab.as_ids(model, tokenizer, text).")
    if not is_tokenizer(tokenizer):
        raise TypeError(f"tokenizer must have encode() and decode(); got {type(tokenizer).__name__}. The order is "
                        "f(model, tokenizer, prompt, ...).")


def as_ids(model, tokenizer=None, prompt=None) -> torch.Tensor:
    """One prompt -> (1, T) LongTensor on the model's device: THE way to turn a text into model input.

    >>> ids = as_ids(model, tok, "Hello there")        # doctest: +SKIP

    prompt may also be a list of ids or a (T,) / (B, T) tensor of ids (then tokenizer may be None).
    Text is encoded with `tokenizer.encode`, which adds BOS for models that expect it (Gemma) unless the
    text already starts with it, as a chat prompt from `apply_chat_template` does: the ids start with one
    BOS, never two (a `transformers` tokenizer's doubled BOS is dropped too). For several texts of
    different lengths use `tokenizer.encode_batch(texts)`, which also gives the mask.
    """
    if is_tokenizer(prompt) or isinstance(tokenizer, (str, list, tuple, torch.Tensor)):
        raise TypeError("the prompt came where the tokenizer goes: llmlab takes f(model, tokenizer, prompt, ...) "
                        "everywhere (tokenizer=None when the prompt is token ids: f(model, None, ids, ...)).")
    if prompt is None:
        raise TypeError("as_ids needs a prompt: as_ids(model, tokenizer, 'text') or as_ids(model, None, ids).")
    if isinstance(prompt, str):
        _check_tokenizer(tokenizer)
        from llmlab.tokenization.base import check_texts_give_tokens
        text, prompt = prompt, list(tokenizer.encode(prompt))
        check_texts_give_tokens([text], [prompt])            # '' -> []: say so in terms of the text
        bos = getattr(tokenizer, "bos_token_id", None)
        if bos is not None and prompt[:2] == [bos, bos]:     # BOS added to a text that starts with it
            prompt = prompt[1:]
    if isinstance(prompt, (list, tuple)):
        if is_texts(prompt):
            raise TypeError("as_ids takes one prompt; for a list of texts use ids, mask = tokenizer.encode_batch(texts).")
        rows = prompt if len(prompt) and isinstance(prompt[0], (list, tuple, torch.Tensor)) else [prompt]
        if len({len(row) for row in rows}) > 1:
            raise ValueError(f"the rows of ids have different lengths {[len(r) for r in rows]}; pad them to one "
                             "length (llmlab.tokenization.pad_left) and pass the attention_mask.")
        prompt = torch.tensor([list(map(int, row)) for row in rows], dtype=torch.long)
    if not isinstance(prompt, torch.Tensor):
        raise TypeError(f"prompt must be text, a list of token ids or a tensor of ids; got {type(prompt).__name__}.")
    if prompt.dim() == 1:
        prompt = prompt[None]  # (1, T)
    return check_ids(prompt, model)


def is_texts(prompt) -> bool:
    """A list (or tuple) of texts: several prompts, which inspection functions run as one padded batch."""
    return isinstance(prompt, (list, tuple)) and bool(prompt) and all(isinstance(p, str) for p in prompt)


def is_batch(prompt, ids: torch.Tensor) -> bool:
    """Several prompts: a list of texts, or ids with more than one row. Then results come one per prompt."""
    return is_texts(prompt) or ids.shape[0] > 1


def pad_id_of(tokenizer) -> int:
    """The padding id: the tokenizer's pad token if it has one, else its EOS, else 0 (padding is masked out)."""
    for name in ("pad_token_id", "eos_token_id"):
        value = getattr(tokenizer, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return 0


def as_batch(model, tokenizer, prompt, attention_mask=None):
    """Any prompt an inspection function takes -> (ids (B, T), attention_mask (B, T) bool or None), on the
    model's device.

    A list of texts is encoded and padded on the left (so position -1 is every row's last real token);
    ids come with the caller's attention_mask, if any. The mask is None when no row is padded.
    """
    if is_texts(prompt):
        _check_tokenizer(tokenizer, "A list of texts")
        if attention_mask is not None:
            raise ValueError("attention_mask goes with token ids; for a list of texts llmlab builds it.")
        from llmlab.tokenization.base import check_texts_give_tokens, pad_left   # encode_batch's steps, any tokenizer
        rows = [tokenizer.encode(text) for text in prompt]
        check_texts_give_tokens(prompt, rows)
        ids, attention_mask = pad_left(rows, pad_id_of(tokenizer))
        ids = check_ids(ids, model)
    else:
        ids = as_ids(model, tokenizer, prompt)
    if attention_mask is not None:
        attention_mask = check_attention_mask(attention_mask, *ids.shape, ids.device, left_padded=True)
        if bool(attention_mask.all()):
            attention_mask = None  # nothing is padded: the plain causal path
    return ids, attention_mask


def prompt_rows(model, tokenizer, prompt, attention_mask=None):
    """Any prompt -> ([(1, T_i) ids of each prompt's real tokens], whether it was several prompts).

    For functions that measure one prompt at a time (causal tracing, attribution, patchscopes): a batch
    gives a list of results, each equal to the result of that prompt alone.
    """
    ids, attention_mask = as_batch(model, tokenizer, prompt, attention_mask)
    B, T = ids.shape
    rows = [ids[r:r + 1, real_positions(attention_mask, r, T)] for r in range(B)]  # each (1, T_r)
    several = is_batch(prompt, ids)
    return rows, several


def real_positions(attention_mask, row: int, T: int) -> list[int]:
    """The padded columns that hold row `row`'s real tokens (all T when there is no mask)."""
    if attention_mask is None:
        return list(range(T))
    return attention_mask[row].nonzero().flatten().tolist()


def token_id(tokenizer, token) -> int:
    """A token string that encodes to exactly one token (no BOS added), or an id -> the id.

    >>> token_id(None, 42)
    42
    """
    if not isinstance(token, str):
        return check_int("token", token, low=0)
    _check_tokenizer(tokenizer, "A token string")
    ids = tokenizer.encode(token, add_special_tokens=False)
    if len(ids) != 1:
        pieces = [tokenizer.decode([i]) for i in ids]
        raise ValueError(f"{token!r} is {len(ids)} tokens {pieces}, not one. Try it with or without a leading "
                         "space (' Paris'), pick a more common word, or pass the token id.")
    return int(ids[0])
