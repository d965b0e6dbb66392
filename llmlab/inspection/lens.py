"""The logit lens: read every layer's residual stream as if it were the last one.

The model turns its final residual stream into next-token logits with `final_norm` and the LM
head. Nothing stops us from applying the same two steps to the residual stream after block 3,
or right after the embedding: the result says which token that layer "would predict" if the
model stopped there. Watching the top token settle layer by layer is the logit lens.

    lens = logit_lens(model, tokenizer, "The Eiffel Tower is in the city of", target=" Paris")
    lens.top_tokens[-1][-1]        # the model's own top-5 at the last position
    lens.first_row(" Paris")       # first row whose top-1 is " Paris" (0 = embed, i + 1 = after block i)
    lens                           # a table: input tokens across, blocks down (HTML in a notebook)
    print(lens)                    # all of it as text (llmlab.visualization.LensView draws it with hovers)
    lenses = logit_lens(model, tokenizer, ["Paris is in", "Rome is the capital of"])   # one LensResult per text

At the last layer the lens *is* the model's output (a test checks this), so every other row is
the same readout applied earlier.
"""
from __future__ import annotations

import dataclasses

import torch

from llmlab.checks import as_batch, check_int, is_batch, real_positions, resolve_position, token_id
from llmlab.inspection.budget import RESULT_LIMIT, check_size, chunks, logits_row_bytes
from llmlab.inspection.capture import capture
from llmlab.inspection.tables import TableResult


@dataclasses.dataclass(repr=False)
class LensResult(TableResult):
    """What the logit lens read: for every row (the stream after the embedding, then after each block)
    and every position shown, the k most likely next tokens.

    Rows are indexed 0..L: row 0 is the embedding, row i + 1 the stream after block i, so a row is not a
    block number; `layer_labels[row]` names it ("embed", "block 0", ...). In a notebook the result shows
    itself as a table (input tokens across, blocks down); in a REPL `lens` prints the first and last rows
    of that table and `print(lens)` all of it.

        lens.top_tokens[row][p][0]      # top-1 token of row `row` at the p-th position shown
        lens.first_row(" Paris")        # first row where " Paris" is top-1 at the last position
        lens.column(-1)                 # [(label, top-1 token, probability), ...] down the last position
    """
    tokens: list[str]               # the prompt's tokens, one per position shown
    positions: list[int]            # which positions of the prompt they are
    layer_labels: list[str]         # "embed", "block 0", ..., "block L-1": the stream after that block
    top_ids: torch.Tensor           # (L+1, P, k) most likely next-token ids at each row/position
    top_probs: torch.Tensor         # (L+1, P, k) their probabilities
    top_tokens: list                # [L+1][P][k] the ids decoded
    target: str | None = None       # the token we are tracking, if any
    target_id: int | None = None
    target_rank: torch.Tensor | None = None  # (L+1, P) rank of the target (0 = top-1)
    target_prob: torch.Tensor | None = None  # (L+1, P) its probability

    def first_row(self, token: str | None = None, position: int = -1) -> int | None:
        """The first row whose top-1 at `position` is `token` (default: the target), or None if none is.

        A row, not a block: 0 is the embedding and i + 1 the stream after block i; name it with
        layer_labels[row] ("block 13"), or take row - 1 for the block number.
        """
        token = self.target if token is None else token
        for row, tops in enumerate(self.top_tokens):
            if tops[position][0] == token:
                return row
        return None

    def column(self, position: int = -1) -> list[tuple[str, str, float]]:
        """(layer label, top-1 token, probability) down one position."""
        return [(label, self.top_tokens[row][position][0], float(self.top_probs[row, position, 0]))
                for row, label in enumerate(self.layer_labels)]

    def _title(self) -> str:
        target = "" if self.target is None else f"; target {self.target!r}"
        return (f"LensResult: top-1 next token and its probability after each block (rows) at each input token "
                f"(columns){target}; top_tokens[row][position] holds the top {self.top_ids.shape[-1]}")

    def _table(self):
        rows = [(label, [f"{self.top_tokens[row][p][0]!r} {float(self.top_probs[row, p, 0]):.2f}"
                         for p in range(len(self.positions))]) for row, label in enumerate(self.layer_labels)]
        shades = self.top_probs[:, :, 0].tolist()  # (L+1, P): the top-1 probability shades its cell
        return "block \\ token", [repr(t) for t in self.tokens], rows, shades


@torch.no_grad()
def logit_lens(model, tokenizer, prompt, k: int = 5, target: str | int | None = None, positions=None,
               cache=None, attention_mask=None, max_bytes: int | None = RESULT_LIMIT):
    """Apply final norm + LM head (model.unembed) to the residual stream after the embedding and every block.

    prompt   : text or ids (see capture) -> a LensResult; a list of texts (or a padded (B, T) batch with its
               attention_mask) -> a list of LensResult, one per prompt over its real tokens, from one batched run.
    cache    : reuse an ActivationCache of this prompt instead of running (it must hold the positions read).
    k        : how many top tokens to keep per cell.
    target   : a token string (must be one token) or id whose rank is tracked in every cell.
    positions: which positions to read (default all), counted within each prompt (-1: its last token).
    max_bytes: refuse, before running, a result larger than this (rows x positions x k cells; None: no limit).

    Memory: the run keeps the residual stream at the positions read only, its LM head runs at the last
    position alone, and each row is read through the vocabulary a chunk of positions at a time, so the
    working tensors stay within llmlab.inspection.budget's working budget however long the prompt.
    """
    if tokenizer is None:
        raise ValueError("logit_lens needs the tokenizer to decode the top tokens: "
                         "logit_lens(model, tokenizer, prompt).")
    ids, attention_mask = as_batch(model, tokenizer, prompt, attention_mask)
    k = check_int("k", k, low=1, high=model.config.vocab_size)
    target_id = None if target is None else \
        check_int("target", token_id(tokenizer, target), 0, model.config.vocab_size - 1)
    if cache is not None and attention_mask is None and cache.attention_mask is not None:
        attention_mask = None if bool(cache.attention_mask.all()) else cache.attention_mask
    B, T = ids.shape
    reals = [real_positions(attention_mask, r, T) for r in range(B)]
    shown = [_shown(positions, len(real)) for real in reals]   # per prompt, counted within it
    n_cells = (model.config.n_layers + 1) * sum(len(s) for s in shown)
    check_size(f"This logit lens ({model.config.n_layers + 1} rows x {sum(len(s) for s in shown)} positions, "
               f"k={k})", n_cells * _cell_bytes(k, target_id is not None), max_bytes,
               "Read fewer positions (positions=[-1], or range(-20, 0)), a smaller k, or raise max_bytes.")
    columns = sorted({real[p] for real, s in zip(reals, shown) for p in s})   # the padded columns read
    if cache is None:
        _, cache = capture(model, None, ids, names=["blocks.0.hook_resid_pre", "*hook_resid_post"],
                           positions=None if len(columns) == T else columns, attention_mask=attention_mask,
                           logits_to_keep=1)  # the head's logits are not read: it runs at the last position alone
    streams = cache.resid_streams()   # L+1 tensors (B, C, d): after the embedding, after each block
    where = {c: i for i, c in enumerate(range(T) if cache.positions is None else cache.positions)}
    missing = [c for c in columns if c not in where]
    if missing:
        raise ValueError(f"The cache holds positions {cache.positions} only; the lens reads columns {missing[:8]} "
                         "too. Capture all positions (no positions=), or pass the lens positions= the cache holds.")
    decode = _Decoder(tokenizer)
    lenses = [_lens_of_row(model, decode, ids[r], [s[r] for s in streams], reals[r], [where[reals[r][p]] for p in sh],
                           sh, k, target_id) for r, sh in enumerate(shown)]
    return lenses if is_batch(prompt, ids) else lenses[0]


def _shown(positions, n: int) -> list[int]:
    return list(range(n)) if positions is None else \
        [resolve_position(p, n) for p in ([positions] if isinstance(positions, int) else positions)]


def _cell_bytes(k: int, tracked: bool) -> int:
    """What one (row, position) of a LensResult holds: k ids (int64) and probabilities (float32), the list of
    k token strings (the strings themselves are shared), and the target's rank and probability."""
    return 12 * k + 56 + 8 * k + (12 if tracked else 0)


class _Decoder:
    """tokenizer.decode([id]) once per id: a lens repeats the same few thousand tokens over and over."""

    def __init__(self, tokenizer):
        self.tokenizer, self.seen = tokenizer, {}

    def __call__(self, i: int) -> str:
        if i not in self.seen:
            self.seen[i] = self.tokenizer.decode([i])
        return self.seen[i]


def _lens_of_row(model, decode, ids, streams, real: list[int], columns: list[int], positions: list[int], k: int,
                 target_id) -> LensResult:
    """The lens of one prompt: ids (T,), streams L+1 tensors (C, d), real = the padded columns of its real
    tokens, columns = where in the streams each position shown lies."""
    index = torch.tensor(columns, device=streams[0].device)
    # per position: the logits, their softmax, and with a target the comparison (bool) and its count (int64)
    parts = chunks(len(columns), logits_row_bytes(model, 2, extra_per_id=0 if target_id is None else 9))
    cells = []  # per row: top ids (P, k), their probabilities (P, k), the target's rank (P,) and probability (P,)
    for stream in streams:  # one row at a time, a chunk of positions at a time: memory (chunk, vocab)
        layer_resid = stream[index]  # (P, d)
        read = [_read(model, layer_resid[part] if len(parts) > 1 else layer_resid, k, target_id) for part in parts]
        cells.append([None if got[0] is None else got[0] if len(got) == 1 else torch.cat(got) for got in zip(*read)])
    top_ids, top_probs, ranks, target_probs = [None if got[0] is None else torch.stack(got) for got in zip(*cells)]
    top_tokens = [[[decode(t) for t in cell] for cell in row.tolist()] for row in top_ids]   # (L+1, P, k)
    labels = ["embed"] + [f"block {i}" for i in range(model.config.n_layers)]  # row i + 1: after blocks[i]
    prompt_tokens = [decode(int(ids[real[p]])) for p in positions]
    return LensResult(
        tokens=prompt_tokens, positions=positions, layer_labels=labels,
        top_ids=top_ids, top_probs=top_probs, top_tokens=top_tokens,
        target=None if target_id is None else decode(target_id), target_id=target_id,
        target_rank=ranks, target_prob=target_probs,
    )


def _read(model, resid, k: int, target_id):
    """One chunk of one row: resid (P, d) -> top ids, their probabilities (P, k); the target's rank and
    probability (P,) (None without a target)."""
    logits = model.unembed(resid.to(model.device)).float()  # (P, vocab); the cache may live elsewhere
    probs = torch.softmax(logits, dim=-1)                   # (P, vocab)
    p, i = probs.topk(k, dim=-1)                            # (P, k)
    if target_id is None:
        return i.cpu(), p.cpu(), None, None
    # rank by logits: far-off probabilities underflow to 0 and would all tie
    beat = logits > logits[:, target_id, None]               # (P, vocab)
    # a copy of the target's column: a view would keep all of probs alive (on the CPU .cpu() does not copy)
    return i.cpu(), p.cpu(), beat.sum(-1).cpu(), probs[:, target_id].clone().cpu()
