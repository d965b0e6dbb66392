"""Causal tests of what a layer does: activation patching and direct logit attribution.

The logit lens and similarity *read* the residual stream; they cannot say whether the model
*uses* what they read. The two methods here change or split the computation and measure the answer.

Causal tracing (activation patching). Run a clean prompt ("The Eiffel Tower is in the city of")
and a corrupted one (the subject's embeddings drowned in noise, or another subject). Then rerun
the corrupted prompt once per (layer, position), each time restoring that single activation from
the clean run. Where one restored vector brings the answer back, the information lives there.

    trace = causal_trace(model, tok, "The Eiffel Tower is in the city of", paris_id, noise_positions=[1, 2, 3])
    trace.effect          # (n_layers, T): p(answer) after each single restore
    trace.recovered()     # the same on a 0 (corrupted) .. 1 (clean) scale

Direct logit attribution. In a pre-norm model the last residual vector is a plain sum: the
embedding plus what every attention and FFN sublayer added. The final norm is not linear, but
once its scale is frozen at its value on this run, the answer's logit splits into one term per
sublayer, and the terms add up to the logit exactly.

    dla = direct_logit_attribution(model, tok, "The Eiffel Tower is in the city of", paris_id)
    dla.labels, dla.contributions    # ["embed", "attn 0", "mlp 0", ...], (2 * n_layers + 1,)

Both measure one prompt at a time; given a list of prompts they return a list of results, each
equal to that prompt's result alone. A metric is a function of the last position's logits,
(B, vocab) -> (B,), such as logit_diff(a, b).
"""
from __future__ import annotations

import dataclasses

import torch

from llmlab.hooks import hook_name
from llmlab.checks import as_ids, prompt_rows, resolve_layer, resolve_position
from llmlab.inspection.budget import RESULT_LIMIT, chunks, forward_row_bytes
from llmlab.inspection.capture import capture, estimate_memory, hooks, token_strings
from llmlab.inspection.tables import TableResult

SITES = ("resid_pre", "resid_mid", "resid_post", "attn_out", "mlp_out")


def _answer_metric(answer):
    """answer: a token id (metric = its probability) or a function of the last logits (B, vocab) -> (B,)."""
    if callable(answer):
        return answer
    if isinstance(answer, bool) or not isinstance(answer, int):
        raise TypeError(f"answer must be a token id (int) or a function logits (B, vocab) -> (B,); got {answer!r}.")
    return lambda logits: torch.softmax(logits.float(), dim=-1)[:, answer]


def logit_diff(token_a: int, token_b: int):
    """A metric for causal_trace: logit(token_a) - logit(token_b) in each row of (B, vocab) logits."""
    return lambda logits: logits[:, token_a].float() - logits[:, token_b].float()


@dataclasses.dataclass(repr=False)
class TraceResult(TableResult):
    """What causal_trace measured; with noise_positions, also the exact noise it added.

    The corrupted run adds noise[i] to the embedding (hook_embed) at position noise_positions[i], in
    the model's dtype; noise is float32 on the CPU, drawn from torch.Generator().manual_seed(seed) as
    randn(len(noise_positions), d_model) times noise_std = noise_scale x the std of the embedding
    table's entries (times the model's embedding scale). To rerun that corrupted forward:

        def add_noise(x):                       # x: (B, T, d), the output of hook_embed
            x = x.clone()
            x[:, trace.noise_positions] += trace.noise.to(x.device, x.dtype)
            return x
        with hooks(model, {"hook_embed": add_noise}):
            logits = model(ids)                 # metric(logits[:, -1]) == trace.corrupted
    """
    effect: torch.Tensor         # (len(layers), len(positions)): the metric after each single restore
    layers: list[int]            # which layers the rows are
    positions: list[int]         # which positions the columns are
    clean: float                 # the metric on the clean run
    corrupted: float             # the metric on the corrupted run, nothing restored
    site: str                    # what was restored: "resid_post", "mlp_out", ...
    tokens: list[str] | None     # the clean prompt's tokens, when a tokenizer was given
    noise: torch.Tensor | None = None          # (len(noise_positions), d_model) float32, CPU: what was added
    noise_positions: list[int] | None = None   # where it was added (0..T-1); None with a corrupted prompt
    noise_scale: float | None = None           # the noise_scale argument (std in embedding-table stds)
    noise_std: float | None = None             # the std it gave: noise_scale x std of the scaled embeddings
    seed: int | None = None                    # the seed the noise was drawn with

    def recovered(self) -> torch.Tensor:
        """effect on a common scale: 0 = no better than the corrupted run, 1 = back to the clean run."""
        return (self.effect - self.corrupted) / (self.clean - self.corrupted)

    def _title(self) -> str:  # the table that repr(), print() and a notebook show
        return (f"TraceResult: the metric with {self.site} restored at one block (rows) and one token (columns); "
                f"clean run {self.clean:.4g}, corrupted run {self.corrupted:.4g}")

    def _table(self):
        columns = [repr(self.tokens[p]) for p in self.positions] if self.tokens else [str(p) for p in self.positions]
        rows = [(f"block {layer}", [f"{float(v):.3g}" for v in self.effect[r]]) for r, layer in enumerate(self.layers)]
        shades = self.recovered().nan_to_num(0.0, 0.0, 0.0).clamp(0, 1).tolist()  # 1 = the clean answer is back
        return "block \\ token", columns, rows, shades


@torch.no_grad()
def causal_trace(model, tokenizer, prompt, answer, corrupt=None, noise_positions=None, noise_scale: float = 3.0,
                 seed: int = 0, site: str = "resid_post", layers=None, positions=None, window: int = 1,
                 attention_mask=None):
    """Restore one clean activation at a time in a corrupted run and measure the answer.

    tokenizer      : encodes text prompts and labels the tokens (None when the prompts are ids).
    prompt         : the clean prompt (text, or ids) -> a TraceResult; a list of texts (or padded ids with
                     attention_mask) -> a list of TraceResult, one per prompt (corrupt: a list as long).
    answer         : a token id (metric: its probability at the last position) or a function
                     of the last position's logits (B, vocab) -> (B,), e.g. logit_diff(a, b).
    corrupt        : a corrupted prompt with the same number of tokens, or
    noise_positions: positions whose embeddings get Gaussian noise instead (the same noise in every
                     run, from `seed`), of standard deviation noise_scale x the std of the
                     embedding table's entries (as the model scales them).
    site           : which activation of block i is restored: one of SITES.
    layers, positions: which rows and columns to compute (default all; negatives count from the end).
    window         : restore `site` at this many consecutive layers starting at each row's layer
                     (sublayer outputs matter little one layer at a time; 1 = a single layer).

    One batch holds one row per (layer, position), each restoring its own activation; it runs from the first
    block it restores, on the corrupted run's input to that block (before it, every row is the corrupted run).
    """
    rows, several = prompt_rows(model, tokenizer, prompt, attention_mask)
    if several:
        corrupts = [None] * len(rows) if corrupt is None else corrupt
        if isinstance(corrupts, str) or len(corrupts) != len(rows):
            raise ValueError(f"With {len(rows)} prompts, corrupt must be a list of {len(rows)} corrupted prompts.")
        return [_trace(model, tokenizer, ids, answer, c, noise_positions, noise_scale, seed, site, layers,
                       positions, window) for ids, c in zip(rows, corrupts)]
    return _trace(model, tokenizer, rows[0], answer, corrupt, noise_positions, noise_scale, seed, site, layers,
                  positions, window)


def _trace(model, tokenizer, ids, answer, corrupt, noise_positions, noise_scale, seed, site, layers, positions,
           window) -> TraceResult:
    """causal_trace of one prompt, ids (1, T)."""
    if site not in SITES:
        raise ValueError(f"site must be one of {SITES}, got {site!r}.")
    if (corrupt is None) == (noise_positions is None):
        raise ValueError("Give exactly one corruption: corrupt=<a prompt of the same length> or "
                         "noise_positions=[positions whose embeddings get noise].")
    if window < 1:
        raise ValueError(f"window must be at least 1 (layers restored per row), got {window}.")
    metric = _answer_metric(answer)
    T = ids.shape[1]
    n_layers = model.config.n_layers
    layers = list(range(n_layers)) if layers is None else [resolve_layer(n_layers, l) for l in layers]
    positions = list(range(T)) if positions is None else [resolve_position(p, T) for p in positions]

    corrupt_hooks, used = {}, {}
    if corrupt is not None:
        corrupt_ids = as_ids(model, tokenizer, corrupt)
        if corrupt_ids.shape != ids.shape:
            raise ValueError(f"clean and corrupted prompts must have the same number of tokens so positions line "
                             f"up; got {T} and {corrupt_ids.shape[1]}. Use noise_positions= for any subject length.")
    else:
        corrupt_ids = ids
        where = torch.tensor([resolve_position(p, T, "noise position") for p in noise_positions], device=ids.device)
        scale = model.tok_embed.scale or 1.0
        std = float(model.tok_embed.weight.float().std()) * scale * noise_scale
        g = torch.Generator().manual_seed(seed)
        cpu_noise = torch.randn(len(where), model.config.d_model, generator=g) * std   # (N, d), float32
        noise = cpu_noise.to(ids.device)
        used = dict(noise=cpu_noise, noise_positions=where.tolist(), noise_scale=noise_scale, noise_std=std, seed=seed)

        def add_noise(x):  # (B, T, d)
            x = x.clone()
            x[:, where] += noise.to(x.dtype)
            return x
        corrupt_hooks["hook_embed"] = add_noise

    names = [hook_name(i, site) for i in range(n_layers)]
    inputs = [hook_name(i, "resid_pre") for i in range(n_layers)]
    # the sweep may start at the first block it restores: each of its rows is the corrupted run up to there
    saved = list(dict.fromkeys(names + inputs))
    resume = _can_resume(model) and estimate_memory(model, T, saved, batch=2) <= RESULT_LIMIT
    if resume:
        # the clean run (row 0) and the corrupted run (row 1) in one batch, every position kept: the clean
        # activations to restore, and the input of every block of the corrupted run; the LM head at the last only
        noised = {name: lambda x, fn=fn: torch.cat([x[:1], fn(x[1:])]) for name, fn in corrupt_hooks.items()}
        with hooks(model, noised):
            logits, both = capture(model, None, torch.cat([ids, corrupt_ids]), names=saved, logits_to_keep=1)
        clean_value, corrupted_value = (float(v) for v in metric(logits[:, -1]))
        cache = {name: both[name][:1, positions] for name in names}           # (1, P, d): the restored positions
        starts = {name: both[name][1:] for name in inputs}                     # (1, T, d): each block's input
    else:
        # the clean run keeps the restored positions only, and its LM head runs where the metric reads (the last)
        clean_logits, cache = capture(model, None, ids, names=names, positions=positions, logits_to_keep=1)
        clean_value = float(metric(clean_logits[:, -1]))
        with hooks(model, corrupt_hooks):
            corrupted_value = float(metric(model(corrupt_ids, logits_to_keep=1)[:, -1]))

    # the sweep runs one row per (layer, position), each restoring its own activation, in batches that fit the
    # working budget. A batch starts at the first block it restores (the corrupted run is the same up to
    # there). With a few positions per layer, all layers share a batch (the weights are read once, not once per
    # layer); with several, each layer has its own, which skips the blocks before it.
    per_layer = len(positions) >= 4 and resume
    groups = [[row] for row in range(len(layers))] if per_layer else [list(range(len(layers)))]
    budget = forward_row_bytes(model, T, eager=getattr(model, "attn_impl", "eager") == "eager")
    batches = []                                  # each a list of (row, column): its row r restores cell r
    for group in groups:
        cells = [(row, col) for row in group for col in range(len(positions))]
        batches += [cells[part] for part in chunks(len(cells), budget)]
    effect = torch.zeros(len(layers), len(positions))
    for chosen in batches:
        first = min(layers[row] for row, _ in chosen)
        fns = {} if resume else dict(corrupt_hooks)
        for l in range(first, n_layers):
            # the batch rows that restore block l (window: a row restores blocks layer .. layer + window - 1)
            at = [r for r, (row, _) in enumerate(chosen) if layers[row] <= l < layers[row] + window]
            if not at:
                continue
            rows = torch.tensor(at, device=ids.device)
            cols = torch.tensor([positions[chosen[r][1]] for r in at], device=ids.device)
            kept = torch.tensor([chosen[r][1] for r in at], device=ids.device)   # where the clean run kept them

            def restore(x, name=names[l], rows=rows, cols=cols, kept=kept):  # (R, T, d)
                x = x.clone()
                x[rows, cols] = cache[name][0, kept].to(x.dtype)
                return x
            fns[names[l]] = restore
        with hooks(model, fns):
            if resume:   # blocks first.. on the corrupted run's input to block `first`, (R, T, d)
                start = starts[hook_name(first, "resid_pre")]
                logits = _blocks_from(model, first, start.expand(len(chosen), *start.shape[1:]))
            else:
                logits = model(corrupt_ids.expand(len(chosen), T), logits_to_keep=1)
        values = metric(logits[:, -1]).float().cpu()
        for r, (row, col) in enumerate(chosen):
            effect[row, col] = values[r]
    tokens = token_strings(tokenizer, ids[0]) if tokenizer is not None else None
    return TraceResult(effect, layers, positions, clean_value, corrupted_value, site, tokens, **used)


def _can_resume(model) -> bool:
    """Whether the sweep may start at a block: a llmlab Transformer whose forward is the stock one."""
    from llmlab.model import Transformer

    return isinstance(model, Transformer) and type(model).forward is Transformer.forward


def _blocks_from(model, first: int, x: torch.Tensor) -> torch.Tensor:
    """Transformer.forward from block `first` on: x (R, T, d) is the input of that block (no padding, no
    KV cache); -> the last position's logits (R, 1, vocab). Hooks inside the blocks fire as in a full run."""
    from llmlab.positions import alibi_bias

    T = x.shape[1]
    positions = model.position_ids(0, T, None)
    rope = model.rope_tables(0, T, positions, x)
    masks = model.attention_masks(0, T, None, x.device)
    bias = alibi_bias(model.config.n_heads, T, x.device, 0).to(x.dtype) if model.config.positions == "alibi" else None
    for block, kind in zip(model.blocks[first:], model.config.layer_types[first:]):
        x = block(x, rope[kind], masks[kind], bias, None, model.attn_impl)
    return model.hook_logits(model._logits(model.hook_final_norm(model.final_norm(x[:, -1:]))))


@dataclasses.dataclass(repr=False)
class AttributionResult(TableResult):
    labels: list[str]            # "embed", "attn 0", "mlp 0", ..., "attn L-1", "mlp L-1"
    contributions: torch.Tensor  # (2 * n_layers + 1,): each part's share of the target logit
    bias: float                  # what no part owns: the final LayerNorm's bias (0 for RMSNorm)
    logit: float                 # the target's logit (minus the mean logit of `minus`), before any soft-cap
    norm_scale: float            # the final norm's 1 / rms (or 1 / std), frozen at this run's value
    target: int

    def by_layer(self) -> torch.Tensor:
        """(n_layers, 2): the attention and FFN contribution of each block."""
        return self.contributions[1:].view(-1, 2)

    def _title(self) -> str:  # the table that repr(), print() and a notebook show
        return (f"AttributionResult: each part's share of the logit of token id {self.target} (logit {self.logit:.4g} "
                f"= the shares + the final norm's bias term {self.bias:.4g})")

    def _table(self):
        parts = self.by_layer().tolist()                    # (L, 2)
        rows = [("embed", ["", "", f"{float(self.contributions[0]):+.3f}"])]
        rows += [(f"block {i}", [f"{a:+.3f}", f"{m:+.3f}", f"{a + m:+.3f}"]) for i, (a, m) in enumerate(parts)]
        top = float(self.contributions.abs().max()) or 1.0
        shades = [[0.0, 0.0, abs(float(self.contributions[0])) / top]]
        shades += [[abs(a) / top, abs(m) / top, 0.0] for a, m in parts]
        return "block", ["attn", "mlp", "attn + mlp"], rows, shades


@torch.no_grad()
def direct_logit_attribution(model, tokenizer, prompt, target: int, position: int = -1, minus=None,
                             attention_mask=None):
    """Split the target token's logit at `position` into the embedding's and each sublayer's share.

    prompt: text or ids -> an AttributionResult; a list of texts (or padded ids with attention_mask) ->
    a list of AttributionResult, one per prompt, `position` counted within each prompt.

    minus: a token id or a list of ids; then the attributed quantity is the logit *difference*
    logit(target) - mean(logit(minus)), e.g. " Paris" against other cities: what a part adds to
    the answer beyond what it adds to every answer of that kind.

    The final residual vector is h = embed + sum_i (attn_i + mlp_i) in a pre-norm (or sandwich)
    block. The final norm divides h by its rms (LayerNorm: centres it and divides by its std);
    we freeze that divisor at its value on this run, which makes the readout linear in h:

        logit = sum over parts c of  (w * c / rms) . W_U[target]     (+ bias . W_U[target] for LayerNorm)

    so the parts add up to the logit exactly. The freeze is the approximation: a part's share is
    what it adds *given* this run's norm, not what the logit would be without it. A final
    soft-cap (Gemma 2) is left out: the shares add up to the logit before the cap.
    """
    if model.config.block == "post":
        raise ValueError("direct_logit_attribution needs a pre-norm or sandwich block: in a post-norm block the "
                         "residual stream is renormalised after every sublayer and is no longer a sum of parts.")
    minus = [] if minus is None else [minus] if isinstance(minus, int) else list(minus)
    for token in [target, *minus]:
        if isinstance(token, bool) or not isinstance(token, int) or not 0 <= token < model.config.vocab_size:
            raise ValueError(f"target and minus must be token ids in 0..{model.config.vocab_size - 1}, got {token!r}.")
    rows, several = prompt_rows(model, tokenizer, prompt, attention_mask)
    results = [_attribute(model, ids, target, position, minus) for ids in rows]
    return results if several else results[0]


def _attribute(model, ids, target: int, position: int, minus: list) -> AttributionResult:
    """direct_logit_attribution of one prompt, ids (1, T)."""
    pos = resolve_position(position, ids.shape[1])
    n = model.config.n_layers
    # only position `pos` is kept, and the LM head runs there alone: memory does not grow with the prompt
    _, cache = capture(model, None, ids, names=["hook_embed", "*.hook_attn_out", "*.hook_mlp_out",
                                                hook_name(n - 1, "resid_post")], positions=[pos])
    parts = [cache["hook_embed"][0, 0]]
    labels = ["embed"]
    for i in range(n):
        parts += [cache[hook_name(i, "attn_out")][0, 0], cache[hook_name(i, "mlp_out")][0, 0]]
        labels += [f"attn {i}", f"mlp {i}"]
    parts = torch.stack(parts).double()                       # (2L+1, d)
    h = cache[hook_name(n - 1, "resid_post")][0, 0].double()  # (d,) = parts.sum(0)

    norm = model.final_norm
    scale, linear = norm.linear_at(h)                          # the norm's divisor frozen at this run's h
    unembed = model.lm_head.weight[target].double()                # (d,): the target's row of W_U
    if minus:
        unembed = unembed - model.lm_head.weight[minus].double().mean(0)
    bias = 0.0 if getattr(norm, "bias", None) is None else float(norm.bias.double() @ unembed)
    contributions = linear(parts) @ unembed                         # (2L+1,): each part's share of the logit
    # the logits read: the LM head's rows for target and minus only, not the whole head (Gemma's has 262k rows)
    logits = (model.lm_head.weight[[target, *minus]] @ model.final_norm(h.to(model.dtype))).double()
    logit = float(logits[0] - (logits[1:].mean() if minus else 0.0))
    return AttributionResult(labels, contributions.float().cpu(), bias, logit, float(scale), target)


def induction_scores(model, length: int = 15, n_sequences: int = 100, seed: int = 0,
                     vocab: int | None = None) -> torch.Tensor:
    """(layers, heads): how much each head attends the way a copying ("induction") head does.

    The input is `n_sequences` runs of `length` distinct random token ids, each followed by itself.
    At position t of the second copy, an induction head looks at the token right after the earlier
    occurrence of the current token, i.e. at t - length + 1. The score is the attention weight there,
    averaged over the second copy's positions and the sequences; attention spread evenly over the
    visible positions would score about the mean of 1 / (t + 1) (see `induction_chance`).

    Random ids (drawn from the first `vocab` ids, default the whole vocabulary) carry no meaning, so
    a high score is copying by position, not knowledge of the tokens.
    """
    vocab = model.config.vocab_size if vocab is None else vocab
    if not 2 <= length <= vocab:
        raise ValueError(f"length must be between 2 and the number of ids drawn from ({vocab}); got {length}.")
    if n_sequences < 1:
        raise ValueError(f"n_sequences must be at least 1; got {n_sequences}.")
    generator = torch.Generator().manual_seed(seed)
    halves = torch.stack([torch.randperm(vocab, generator=generator)[:length] for _ in range(n_sequences)])
    doubled = torch.cat([halves, halves], dim=1)                                  # (n, 2 * length)
    names = [hook_name(i, "attn.pattern") for i in range(model.config.n_layers)]
    _, cache = capture(model, None, doubled, names=names, logits_to_keep=1)   # the logits are not read
    second = torch.arange(length, 2 * length - 1)                                  # queries in the second copy
    scores = [cache[name][:, :, second, second - length + 1].float().mean(dim=(0, 2)) for name in names]
    return torch.stack(scores).cpu()                                               # (layers, heads)


def induction_chance(length: int = 15) -> float:
    """The induction score of a head that spreads its attention evenly over the visible positions."""
    second = torch.arange(length, 2 * length - 1)
    return (1 / (second + 1).float()).mean().item()
