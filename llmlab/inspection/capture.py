"""Run a prompt once and keep every named intermediate: the activation cache.

Every place worth looking at inside llmlab's Transformer is a `HookPoint` module with a stable
name (`hook_embed`, `blocks.3.hook_resid_post`, `blocks.3.attn.hook_pattern`, ...). `capture`
attaches a torch forward hook to the ones you ask for, runs the model, and hands back what
passed through them.

    logits, cache = capture(model, tokenizer, "Hello there")   # everything
    cache["blocks.3.attn.hook_pattern"].shape                 # (B, n_heads, T, T)
    logits, cache = capture(model, None, ids, names=["*hook_resid_post"], layers=[10, 11], positions=[-1])

Like every inspection function it takes (model, tokenizer, prompt, ...); the tokenizer may be None
when the prompt is token ids.

Before running, `estimate_memory` says how many bytes the cache will take, and `capture`
refuses (with a hint) to build a cache larger than `max_bytes`.
"""
from __future__ import annotations

import contextlib
import fnmatch
import re

import torch

# as_ids is used here and stays importable from llmlab.inspection.capture, as before
from llmlab.checks import as_ids, check_int, resolve_layer, resolve_position, tokenizer_first
from llmlab.hooks import HookPoint, hook_name

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


def position_dim(name: str) -> int:
    """Which dimension of a hook's tensor is the token position.

    q/k/v are (B, heads, T, head_dim) and the pattern is (B, heads, T_query, T_key): dim 2.
    Everything else, including z (B, T, heads, head_dim), has T in dim 1.
    """
    return 2 if name.endswith(("hook_q", "hook_k", "hook_v", "hook_pattern")) else 1


def hook_shape(config, name: str, n_tokens: int, batch: int = 1, n_positions: int | None = None) -> tuple:
    """The shape a hook's tensor will have, from the config alone (used for the memory estimate)."""
    B, T, P = batch, n_tokens, n_tokens if n_positions is None else n_positions
    d, hd, H, K = config.d_model, config.head_dim, config.n_heads, config.n_kv_heads
    if name.endswith("hook_q"):
        return (B, H, P, hd)
    if name.endswith(("hook_k", "hook_v")):
        return (B, K, P, hd)
    if name.endswith("hook_pattern"):
        return (B, H, P, T)
    if name.endswith("hook_z"):
        return (B, P, H, hd)
    if name.endswith(("mlp.hook_pre", "mlp.hook_post")):
        return (B, P, config.d_ff)
    if name.endswith("hook_logits"):
        return (B, P, config.vocab_size)
    return (B, P, d)


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
        for size in hook_shape(model.config, name, n_tokens, batch, n_positions):
            numel *= size
        total += numel * element
    return total


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
    """

    def __init__(self, store: dict, config, positions: list[int] | None = None, tokens: list[str] | None = None):
        self.store = store
        self.config = config
        self.positions = positions      # which positions were kept (None: all)
        self.tokens = tokens            # token strings of the prompt, when a tokenizer was given

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
        first = self.store.get("blocks.0.hook_resid_pre", self.store.get("hook_embed"))
        if first is None:
            raise KeyError("accumulated_resid needs 'blocks.0.hook_resid_pre' (or 'hook_embed') and every "
                           "'blocks.{i}.hook_resid_post'; capture with names=None or names=['*resid*', 'hook_embed'].")
        return torch.stack([first] + [self.resid(i) for i in range(self.config.n_layers)])  # (L+1, B, T, d)

    def memory_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.store.values())

    def to(self, device) -> "ActivationCache":
        return ActivationCache({k: v.to(device) for k, v in self.store.items()}, self.config, self.positions,
                               self.tokens)

    def __repr__(self) -> str:
        return f"ActivationCache({len(self.store)} tensors, {self.memory_bytes() / 2**20:.1f} MiB)"


@contextlib.contextmanager
def hooks(model, fns: dict):
    """Temporarily attach forward hooks: {hook name: fn(tensor) -> tensor or None}.

    A fn that returns a tensor replaces the value (ablation, patching, steering); one that returns
    None only reads it. The hooks are removed on exit, even after an error.
    """
    modules = dict(model.named_modules())
    handles = []
    try:
        for name, fn in fns.items():
            if name not in modules or not isinstance(modules[name], HookPoint):
                raise KeyError(f"No hook point named {name!r}; see llmlab.inspection.capture.hook_names(model).")
            handles.append(modules[name].register_forward_hook(lambda module, inputs, output, fn=fn: fn(output)))
        yield model
    finally:
        for handle in handles:
            handle.remove()


def token_strings(tokenizer, ids) -> list[str]:
    """Each id decoded on its own (what the views print as column labels)."""
    return [tokenizer.decode([int(i)]) for i in ids]


@tokenizer_first("prompt", "tokenizer", "names", "layers", "positions", "store_device", "max_bytes", "attn_impl")
@torch.no_grad()
def capture(model, tokenizer=None, prompt=None, names=None, layers=None, positions=None, store_device=None,
            max_bytes: int | None = 2**31, attn_impl: str | None = None):
    """Run the model on a prompt and return (logits, ActivationCache).

    tokenizer   : encodes a text prompt and labels the tokens (None: the prompt is ids).
    prompt      : text (needs tokenizer), a list of ids, or a (T,) / (B, T) tensor of ids (any device).
    names       : hook names or glob patterns to keep (None: every hook point).
    layers      : only these blocks' hooks (non-block hooks like hook_embed are kept).
    positions   : only these token positions (e.g. [-1]); the pattern keeps these query rows.
    store_device: where the cached tensors live (default: the model's device; "cpu" saves GPU memory).
    max_bytes   : refuse to build a bigger cache (None: no limit).
    attn_impl   : forced to "eager" when an attention pattern is asked for (the fast path has no weights).
    """
    ids = as_ids(model, tokenizer, prompt)
    B, T = ids.shape
    if max_bytes is not None:
        check_int("max_bytes", max_bytes, low=0, hint="None means no limit.")
    chosen = select_names(model, names, layers)
    keep = None if positions is None else _positions(positions, T)
    if max_bytes is not None:
        needed = estimate_memory(model, T, names, layers, positions, batch=B)
        if needed > max_bytes:
            raise MemoryError(f"This capture would hold {needed / 2**20:.0f} MiB of activations (limit "
                              f"{max_bytes / 2**20:.0f} MiB). Keep less: names=['*hook_resid_post'], layers=[...], "
                              "positions=[-1], or raise max_bytes.")
    store = {}

    def saver(name):
        dim = position_dim(name)

        def save(tensor):
            kept = tensor.detach()
            if keep is not None:
                kept = kept.index_select(dim, torch.tensor(keep, device=kept.device))
            store[name] = kept if store_device is None else kept.to(store_device)
        return save

    if any(n.endswith("hook_pattern") for n in chosen):
        attn_impl = "eager"
    kwargs = {} if attn_impl is None else {"attn_impl": attn_impl}
    with hooks(model, {name: saver(name) for name in chosen}):
        logits = model(ids, **kwargs)  # (B, T, vocab)
    tokens = token_strings(tokenizer, ids[0]) if tokenizer is not None else None
    return logits, ActivationCache(store, model.config, keep, tokens)
