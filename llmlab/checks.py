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

import functools
import math
import numbers
import warnings

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

def check_ids(ids, model, start: int = 0) -> torch.Tensor:
    """Token ids (B, T) the model can take, returned on the model's device (ids may come from any device).

    Raises a clear error for anything else: a list, floats, the wrong number of dimensions, an empty
    row, ids outside the vocabulary, or more positions than the model's context.
    """
    c = model.config
    if not isinstance(ids, torch.Tensor):
        raise TypeError(f"ids must be a torch.LongTensor of shape (batch, seq_len); got {type(ids).__name__}. "
                        "For a list of ids use torch.tensor([ids]).")
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
    if ids.device.type != "meta":  # a meta tensor has no values to check
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
                                 "llmlab.generation.pad_left(rows, pad_id).")
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


def is_prompt(obj) -> bool:
    """Text, a list/tuple of ids (or of rows of ids), or a tensor of ids."""
    return isinstance(obj, (str, list, tuple, torch.Tensor))


def as_ids(model, tokenizer=None, prompt=None) -> torch.Tensor:
    """A prompt (text, a list of ids, or a (T,) / (B, T) tensor) -> (B, T) LongTensor on the model's device.

    Text is encoded with `tokenizer.encode`, which adds BOS for models that expect it (Gemma). The
    tokenizer may be None when the prompt is already ids. The old order as_ids(model, prompt, tokenizer)
    still works, with a DeprecationWarning.
    """
    tokenizer, prompt = _new_order("as_ids", tokenizer, prompt)
    if prompt is None:
        raise TypeError("as_ids needs a prompt: as_ids(model, tokenizer, 'text') or as_ids(model, None, ids).")
    if isinstance(prompt, str):
        if tokenizer is None:
            raise ValueError("A text prompt needs a tokenizer: f(model, tokenizer, 'text', ...) in inspection "
                             "functions; elsewhere pass token ids, e.g. torch.tensor([tokenizer.encode(text)]).")
        if not is_tokenizer(tokenizer):
            raise TypeError(f"tokenizer must have encode() and decode(); got {type(tokenizer).__name__}.")
        prompt = list(tokenizer.encode(prompt))
    if isinstance(prompt, (list, tuple)):
        rows = prompt if len(prompt) and isinstance(prompt[0], (list, tuple, torch.Tensor)) else [prompt]
        if len({len(row) for row in rows}) > 1:
            raise ValueError(f"the rows of ids have different lengths {[len(r) for r in rows]}; pad them to one "
                             "length (llmlab.generation.pad_left) and pass the attention_mask.")
        prompt = torch.tensor([list(map(int, row)) for row in rows], dtype=torch.long)
    if not isinstance(prompt, torch.Tensor):
        raise TypeError(f"prompt must be text, a list of token ids or a tensor of ids; got {type(prompt).__name__}.")
    if prompt.dim() == 1:
        prompt = prompt[None]  # (1, T)
    return check_ids(prompt, model)


def _new_order(fn_name: str, tokenizer, prompt):
    """(tokenizer, prompt) in that order; an old-order call (prompt, tokenizer) is swapped with a warning."""
    if tokenizer is not None and not is_tokenizer(tokenizer) and (prompt is None or is_tokenizer(prompt)):
        if prompt is not None:
            _warn_old_order(fn_name, stacklevel=4)
        return prompt, tokenizer
    return tokenizer, prompt


def _warn_old_order(fn_name: str, stacklevel: int = 3) -> None:
    warnings.warn(f"{fn_name}(model, prompt, tokenizer, ...) is the old argument order; llmlab now takes "
                  f"{fn_name}(model, tokenizer, prompt, ...) everywhere (or use keywords tokenizer=, prompt=).",
                  DeprecationWarning, stacklevel=stacklevel)


def tokenizer_first(*old_order: str):
    """Decorator for f(model, tokenizer, prompt, ...): an old-order call f(model, prompt, ..., tokenizer=...)
    is recognised by a prompt (text, ids) where the tokenizer belongs, and is rebound by the old parameter
    names `old_order` (the positional names after model, old style), with a DeprecationWarning.
    """
    def wrap(fn):
        @functools.wraps(fn)
        def wrapper(model, *args, **kwargs):
            if args and args[0] is not None and not is_tokenizer(args[0]) and is_prompt(args[0]):
                if len(args) > len(old_order):
                    raise TypeError(f"{fn.__name__} got {len(args) + 1} positional arguments; "
                                    f"call {fn.__name__}(model, tokenizer, prompt, ...).")
                given_both = len(args) > old_order.index("tokenizer") if "tokenizer" in old_order else False
                given_both = given_both or kwargs.get("tokenizer") is not None
                for name, value in zip(old_order, args):
                    if name in kwargs:
                        raise TypeError(f"{fn.__name__} got two values for {name!r}.")
                    kwargs[name] = value
                if given_both:  # a prompt alone, without a tokenizer, is fine in either order
                    _warn_old_order(fn.__name__)
                args = ()
            if not args:
                kwargs.setdefault("tokenizer", None)  # the tokenizer may be left out when the prompt is ids
            return fn(model, *args, **kwargs)
        return wrapper
    return wrap
