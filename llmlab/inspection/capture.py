"""Run a prompt once and keep every named intermediate: the activation cache.

Every place worth looking at inside llmlab's Transformer is a `HookPoint` module with a stable
name (`hook_embed`, `blocks.3.hook_resid_post`, `blocks.3.attn.hook_pattern`, ...). `capture`
attaches a torch forward hook to the ones you ask for, runs the model, and hands back what
passed through them.

    logits, cache = capture(model, tokenizer, "Hello there")   # everything
    cache["blocks.3.attn.hook_pattern"].shape                 # (B, n_heads, T, T)
    logits, cache = capture(model, None, ids, names=["*hook_resid_post"], layers=[10, 11], positions=[-1])

Like every inspection function it takes (model, tokenizer, prompt, ...); the tokenizer may be None
when the prompt is token ids. A list of texts runs as one batch, padded on the left, so position -1
is every text's last real token:

    logits, cache = capture(model, tokenizer, ["Paris is", "The capital of Italy is"], positions=[-1])
    cache["blocks.3.hook_resid_post"].shape                   # (2, 1, d)

Write `blocks.3.hook_resid_post` as hook_name(3, "resid_post"). Each hook's tensor layout (which
dimension is the position) is stored on its HookPoint (`.layout`), not guessed from its name.

Before running, `estimate_memory` says how many bytes the cache will take, and `capture`
refuses (with a hint) to build a cache and logits larger than `max_bytes` (the rule every readout
follows: llmlab.inspection.budget). A readout that reads the cache but not the logits passes
logits_to_keep=1, so the LM head runs at the last position alone.
"""
from __future__ import annotations

import contextlib
import fnmatch
import math
import re

import torch

from llmlab.attention import Attention
from llmlab.checks import as_batch, check_int, is_batch, real_positions, resolve_layer, resolve_position
from llmlab.hooks import HookPoint, hook_name
from llmlab.inspection.budget import RESULT_LIMIT, check_size, mib

_LAYER = re.compile(r"^blocks\.(\d+)\.")


def hook_names(model) -> list[str]:
    """Names of all hook points in the model (in the order the modules were created)."""
    return [name for name, module in model.named_modules() if isinstance(module, HookPoint)]


def select_names(model, names=None, layers=None) -> list[str]:
    """Hook names matching `names` (exact names or glob patterns like '*hook_resid_post'; None = all)
    and, for per-block hooks, whose block index is in `layers` (None = all; negatives count from the end).

    >>> select_names(model, ["*resid_post"], layers=[0, -1])   # doctest: +SKIP
    ['blocks.0.hook_resid_post', 'blocks.29.hook_resid_post']
    """
    available = hook_names(model)
    if names is None:
        chosen = list(available)
    else:
        if isinstance(names, str):
            names = [names]
        chosen = []
        for pattern in names:
            hits = [n for n in available if n == pattern or fnmatch.fnmatchcase(n, pattern)]
            if not hits:
                raise KeyError(f"No hook point matches {pattern!r}. Hook names look like 'hook_embed', "
                               f"'blocks.0.hook_resid_post', 'blocks.0.attn.hook_pattern'; see hook_names(model).")
            chosen += [h for h in hits if h not in chosen]
        chosen = [n for n in available if n in chosen]
    if layers is not None:
        n_layers = model.config.n_layers
        keep = {resolve_layer(n_layers, layer) for layer in ([layers] if isinstance(layers, int) else layers)}
        chosen = [n for n in chosen if not _LAYER.match(n) or int(_LAYER.match(n).group(1)) in keep]
    return chosen


def hook_point(model, name: str) -> HookPoint:
    """The HookPoint module called `name` (a KeyError that lists where to look otherwise)."""
    try:
        module = model.get_submodule(name) if isinstance(name, str) else None
    except AttributeError:
        module = None
    if not isinstance(module, HookPoint):
        raise KeyError(f"No hook point named {name!r}. Hook names look like 'hook_embed', 'blocks.0.hook_resid_post', "
                       "'blocks.0.attn.hook_pattern'; build them with hook_name(layer, point), list them with "
                       "hook_names(model).")
    return module


def hook_shape(model, name: str, n_tokens: int, batch: int = 1, n_positions: int | None = None) -> tuple:
    """The shape a hook's tensor will have, from its layout and the config (used for the memory estimate).

    n_positions: how many (query) positions are kept, when fewer than n_tokens.
    """
    c = model.config
    sizes = {"B": batch, "T": n_tokens if n_positions is None else n_positions, "S": n_tokens, "H": c.n_heads,
             "K": c.n_kv_heads, "hd": c.head_dim, "d": c.d_model, "ff": c.d_ff, "V": c.vocab_size}
    return hook_point(model, name).shape(sizes)


def estimate_memory(model, n_tokens: int, names=None, layers=None, positions=None, batch: int = 1) -> int:
    """Bytes a capture of `n_tokens` tokens will hold (activations only, model dtype).

    >>> estimate_memory(smollm2, 30) / 2**20          # doctest: +SKIP
    32.4...
    """
    element = next(model.parameters()).element_size()
    n_positions = None if positions is None else len(_positions(positions, n_tokens))
    total = 0
    for name in select_names(model, names, layers):
        numel = 1
        for size in hook_shape(model, name, n_tokens, batch, n_positions):
            numel *= size
        total += numel * element
    return total


def _n_logits(logits_to_keep, n_tokens: int) -> int:
    """How many positions the LM head runs at (checked the way the model checks it, before the run)."""
    from llmlab.model import _logits_positions

    kept = _logits_positions(logits_to_keep, n_tokens)
    return n_tokens if kept is None else len(range(n_tokens)[kept]) if isinstance(kept, slice) else len(kept)


def _positions(positions, n_tokens: int) -> list[int]:
    if isinstance(positions, int):
        positions = [positions]
    return [resolve_position(p, n_tokens) for p in positions]


class ActivationCache:
    """Captured tensors by hook name, plus a few shortcuts a chapter uses over and over.

    cache["blocks.2.hook_resid_post"]   # (B, T, d) (or (B, P, d) when positions were selected)
    cache.resid(2)                     # the same
    cache.pattern(2)                   # (B, n_heads, T, T)
    cache.accumulated_resid()          # (n_layers + 1, B, T, d): after the embedding, after each block
    cache.stack("pattern")             # (n_layers, B, n_heads, T, T): every block's weights in one tensor
    cache.attention_mask               # (B, T) bool, False = padding (all True when no row is padded)
    """

    def __init__(self, store: dict, config, positions: list[int] | None = None, tokens: list | None = None,
                 attention_mask: torch.Tensor | None = None):
        self.store = store
        self.config = config
        self.positions = positions      # which (padded) columns were kept (None: all)
        self.tokens = tokens            # token strings when a tokenizer was given: a list for one prompt,
        #                                 one list per row (real tokens only) for a batch
        self.attention_mask = attention_mask

    def real_positions(self, row: int = 0) -> list[int]:
        """The columns of the captured tensors that hold row `row`'s real tokens (padding left out)."""
        if self.attention_mask is None:
            raise ValueError("This cache has no attention_mask (it was not made by capture); build it with "
                             "ActivationCache(..., attention_mask=torch.ones(B, T, dtype=torch.bool)).")
        columns = self.positions
        if columns is None:
            return real_positions(self.attention_mask, row, self.attention_mask.shape[1])
        real = set(real_positions(self.attention_mask, row, self.attention_mask.shape[1]))
        return [i for i, column in enumerate(columns) if column in real]  # kept columns that are real tokens

    def __getitem__(self, name: str) -> torch.Tensor:
        if name not in self.store:
            raise KeyError(f"{name!r} was not captured. Captured: {len(self.store)} names, e.g. "
                           f"{list(self.store)[:4]}. Pass names=None (all) or include it in names=.")
        return self.store[name]

    def __contains__(self, name) -> bool:
        return name in self.store

    def __len__(self) -> int:
        return len(self.store)

    def __iter__(self):
        return iter(self.store)

    def keys(self):
        return self.store.keys()

    def items(self):
        return self.store.items()

    def resid(self, layer: int, where: str = "post") -> torch.Tensor:
        """Residual stream at block `layer`: where = "pre", "mid" or "post". (B, T, d)"""
        if where not in ("pre", "mid", "post"):
            raise ValueError(f"where must be 'pre', 'mid' or 'post', got {where!r}.")
        return self[hook_name(resolve_layer(self.config.n_layers, layer), "resid_" + where)]

    def pattern(self, layer: int) -> torch.Tensor:
        """Attention weights of block `layer`: (B, n_heads, T_query, T_key)."""
        return self[hook_name(resolve_layer(self.config.n_layers, layer), "attn.pattern")]

    def accumulated_resid(self) -> torch.Tensor:
        """The residual stream after the embedding and after every block: (n_layers + 1, B, T, d).

        Entry 0 is what enters block 0 (the embeddings), entry i + 1 what leaves block i.
        """
        return torch.stack(self.resid_streams())  # (L+1, B, T, d)

    def resid_streams(self) -> list[torch.Tensor]:
        """accumulated_resid as a list of n_layers + 1 tensors (B, T, d), without stacking them into a copy."""
        first = self.store.get("blocks.0.hook_resid_pre", self.store.get("hook_embed"))
        if first is None:
            raise KeyError("accumulated_resid needs 'blocks.0.hook_resid_pre' (or 'hook_embed') and every "
                           "'blocks.{i}.hook_resid_post'; capture with names=None or names=['*resid*', 'hook_embed'].")
        return [first] + [self.resid(i) for i in range(self.config.n_layers)]

    def stack(self, point: str, layers=None, dim: int = 0) -> torch.Tensor:
        """One hook point of every block (or of `layers`), stacked along a new dimension `dim`.

        point: what follows "blocks.{i}." as hook_name takes it ("attn.pattern", "resid_post", "mlp.post"), or
        just its last part when that names one point of the block ("pattern", "z", "resid_post").

            cache.stack("pattern")                 # (L, B, n_heads, T, T): entry i is block i
            cache.stack("pattern", dim=1)          # (B, L, n_heads, T, T)
            cache.stack("resid_post", layers=[10, 11])   # (2, B, T, d)

        Row i is block i, so every block must have been captured (or pass layers= for the ones that were).
        """
        n = self.config.n_layers
        layers = [layers] if isinstance(layers, int) else range(n) if layers is None else layers
        layers = [resolve_layer(n, layer) for layer in layers]
        names = [self._block_name(layer, point) for layer in layers]
        missing = [layer for layer, name in zip(layers, names) if name is None]
        if missing:
            raise KeyError(f"{point!r} was not captured in block(s) {missing}; stack needs it in every block asked "
                           f"for. Capture it everywhere (names=['*{point.rpartition('.')[2]}'] without layers=) or "
                           "pass layers=[the blocks you captured].")
        return torch.stack([self.store[name] for name in names], dim=dim)

    def _block_name(self, layer: int, point: str) -> str | None:
        """The captured name of `point` in block `layer`: hook_name(layer, point), else the one captured name
        of that block ending in the same part (so "pattern" finds "blocks.3.attn.hook_pattern")."""
        full = hook_name(layer, point)
        if full in self.store:
            return full
        last = full.rpartition(".")[2]
        hits = [n for n in self.store if _LAYER.match(n) and int(_LAYER.match(n).group(1)) == layer
                and n.rpartition(".")[2] == last]
        if len(hits) > 1:
            raise KeyError(f"{point!r} names several hook points of block {layer}: {hits}; give the full point, "
                           f"e.g. {hits[0].split('.', 2)[2]!r}.")
        return hits[0] if hits else None

    def memory_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.store.values())

    def to(self, device) -> "ActivationCache":
        return ActivationCache({k: v.to(device) for k, v in self.store.items()}, self.config, self.positions,
                               self.tokens, self.attention_mask)

    def __repr__(self) -> str:
        return f"ActivationCache({len(self.store)} tensors, {self.memory_bytes() / 2**20:.1f} MiB)"


@contextlib.contextmanager
def hooks(model, fns: dict, attn_impl: str | None = None):
    """Temporarily attach forward hooks: {hook name: fn(tensor) -> tensor or None}.

    A fn that returns a tensor replaces the value (ablation, patching, steering); one that returns
    None only reads it. The hooks are removed on exit, even after an error. Run any forward inside
    (with its own attention_mask=). attn_impl: the attention path for forwards inside the block
    ("eager" makes hook_pattern fire); a hook that cannot fire on the path the model will take is refused.
    """
    if attn_impl not in (None, "eager", "sdpa"):
        raise ValueError(f"attn_impl={attn_impl!r}: use 'eager' (weights pass through hook_pattern) or 'sdpa'.")
    points = {name: hook_point(model, name) for name in fns}
    old_impl = getattr(model, "attn_impl", None)         # a Transformer's default path (other modules: unknown,
    #                                                      e.g. llmlab.seq2seq's blocks always run eager)
    path = attn_impl or old_impl
    for name in points:
        attention = model.get_submodule(name.rpartition(".")[0]) if name.endswith("hook_pattern") else None
        if isinstance(attention, Attention) and path == "sdpa" and attention.softcap is None:
            raise ValueError(f"{name!r} never fires on the {path!r} attention path (the fused kernel computes no "
                             "weights). Use hooks(model, fns, attn_impl='eager'), or capture(), which switches by itself.")
    handles = []
    try:
        if old_impl is not None:
            model.attn_impl = path
        for name, fn in fns.items():
            handles.append(points[name].register_forward_hook(lambda module, inputs, output, fn=fn: fn(output)))
        yield model
    finally:
        if old_impl is not None:
            model.attn_impl = old_impl
        for handle in handles:
            handle.remove()


def token_strings(tokenizer, ids) -> list[str]:
    """Each id decoded on its own (what the views print as column labels)."""
    return [tokenizer.decode([int(i)]) for i in ids]


@torch.no_grad()
def capture(model, tokenizer=None, prompt=None, names=None, layers=None, positions=None, store_device=None,
            max_bytes: int | None = RESULT_LIMIT, attn_impl: str | None = None, attention_mask=None,
            logits_to_keep=None):
    """Run the model on a prompt (or a batch) and return (logits (B, T, vocab), ActivationCache).

    With positions, the logits too are kept at those positions only, (B, P, vocab): they are passed to the
    forward as logits_to_keep, so the final norm and the LM head run there alone (a 262k-token vocabulary
    makes (B, T, vocab) large), and hook_final_norm / hook_logits hold those positions only.

    tokenizer   : encodes text and labels the tokens (None: the prompt is ids).
    prompt      : text, a list of texts (one left-padded batch), a list of ids, or a (T,) / (B, T) tensor of ids.
    names       : hook names or glob patterns to keep (None: every hook point).
    layers      : only these blocks' hooks (non-block hooks like hook_embed are kept); a selection that keeps
                  nothing (a block-0 name with layers=[3]) is an error, not an empty cache.
    positions   : only these token positions, e.g. [-1]: the last real token of every row (left padding).
    store_device: where the cached tensors live (default: the model's device; "cpu" saves GPU memory).
    max_bytes   : refuse to build a bigger cache, the returned logits included (None: no limit).
    attn_impl   : forced to "eager" when an attention pattern is asked for (the fast path has no weights).
    attention_mask: (B, T), 0 = padding, for a padded ids tensor; kept as cache.attention_mask (B, T) bool
                  (all True when nothing is padded).
    logits_to_keep: where the LM head runs, as the model takes it (1: the last position only, for a readout
                  that reads the cache and not the logits); None: at the kept positions (all without positions).
    """
    ids, attention_mask = as_batch(model, tokenizer, prompt, attention_mask)
    B, T = ids.shape
    if max_bytes is not None:
        check_int("max_bytes", max_bytes, low=0, hint="None means no limit.")
    chosen = select_names(model, names, layers)
    if not chosen:
        raise ValueError(f"names={names!r} with layers={layers!r} selects no hook point: the names exist, but not in "
                         "those blocks (hook_embed, hook_final_norm and hook_logits are outside every block). Widen "
                         "layers= or names=; select_names(model, names, layers) shows what a selection keeps.")
    keep = None if positions is None else _positions(positions, T)
    head = {"hook_final_norm", "hook_logits"}  # after logits_to_keep: they see the kept positions only
    if logits_to_keep is None:
        logits_to_keep = 0 if keep is None else keep
    n_logits = _n_logits(logits_to_keep, T)
    element = next(model.parameters()).element_size()
    activations = estimate_memory(model, T, [n for n in chosen if n not in head], None, positions, batch=B)
    activations += sum(math.prod(hook_shape(model, n, T, B, n_logits)) * element for n in chosen if n in head)
    logit_bytes = 0 if "hook_logits" in chosen else B * n_logits * model.config.vocab_size * element  # else: the same
    check_size(f"This capture ({B} x {T} tokens: {mib(activations)} MiB of activations, {mib(logit_bytes)} MiB of "
               "logits)", activations + logit_bytes, max_bytes,
               "Keep less: names=['*hook_resid_post'], layers=[...], positions=[-1] (the LM head then runs there "
               "alone), logits_to_keep=1 (when you do not read the logits), or raise max_bytes.")
    store = {}

    def saver(name):
        dim = hook_point(model, name).position_dim

        def save(tensor):
            kept = tensor.detach()
            if keep is not None and name not in head:
                kept = kept.index_select(dim, torch.tensor(keep, device=kept.device))
            store[name] = kept if store_device is None else kept.to(store_device)
        return save

    if any(n.endswith("hook_pattern") for n in chosen):
        attn_impl = "eager"
    with hooks(model, {name: saver(name) for name in chosen}, attn_impl):
        # the LM head runs only at the kept positions (or logits_to_keep): (B, P, vocab); (B, T, vocab) for all
        logits = model(ids, attention_mask=attention_mask, logits_to_keep=logits_to_keep)
    tokens = None
    if tokenizer is not None:
        rows = [token_strings(tokenizer, ids[r, real_positions(attention_mask, r, T)]) for r in range(B)]
        tokens = rows if is_batch(prompt, ids) else rows[0]
    mask = torch.ones(B, T, dtype=torch.bool, device=ids.device) if attention_mask is None else attention_mask
    return logits, ActivationCache(store, model.config, keep, tokens, mask)
