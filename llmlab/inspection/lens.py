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
from llmlab.inspection.capture import capture, token_strings
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
               cache=None, attention_mask=None):
    """Apply final norm + LM head (model.unembed) to the residual stream after the embedding and every block.

    prompt   : text or ids (see capture) -> a LensResult; a list of texts (or a padded (B, T) batch with its
               attention_mask) -> a list of LensResult, one per prompt over its real tokens, from one batched run.
    cache    : reuse an ActivationCache of this prompt instead of running.
    k        : how many top tokens to keep per cell.
    target   : a token string (must be one token) or id whose rank is tracked in every cell.
    positions: which positions to read (default all), counted within each prompt (-1: its last token).
    """
    if tokenizer is None:
        raise ValueError("logit_lens needs the tokenizer to decode the top tokens: "
                         "logit_lens(model, tokenizer, prompt).")
    ids, attention_mask = as_batch(model, tokenizer, prompt, attention_mask)
    k = check_int("k", k, low=1, high=model.config.vocab_size)
    target_id = None if target is None else \
        check_int("target", token_id(tokenizer, target), 0, model.config.vocab_size - 1)
    if cache is None:
        _, cache = capture(model, None, ids, names=["blocks.0.hook_resid_pre", "*hook_resid_post"],
                           attention_mask=attention_mask)
    elif attention_mask is None:
        attention_mask = cache.attention_mask
    resid = cache.accumulated_resid()  # (L+1, B, T, d)
    lenses = [_lens_of_row(model, tokenizer, ids[r], resid[:, r], real_positions(attention_mask, r, ids.shape[1]),
                           k, target_id, positions) for r in range(ids.shape[0])]
    return lenses if is_batch(prompt, ids) else lenses[0]


def _lens_of_row(model, tokenizer, ids, resid, real: list[int], k: int, target_id, positions) -> LensResult:
    """The lens of one prompt: ids (T,), resid (L+1, T, d), real = the columns holding its real tokens."""
    n = len(real)
    positions = list(range(n)) if positions is None else \
        [resolve_position(p, n) for p in ([positions] if isinstance(positions, int) else positions)]
    resid = resid[:, [real[p] for p in positions]]  # (L+1, P, d)
    top_ids, top_probs, ranks, target_probs = [], [], [], []
    for layer_resid in resid:  # one layer at a time keeps memory at (P, vocab)
        logits = model.unembed(layer_resid.to(model.device)).float()  # (P, vocab); the cache may live elsewhere
        probs = torch.softmax(logits, dim=-1)          # (P, vocab)
        p, i = probs.topk(k, dim=-1)                   # (P, k)
        top_probs.append(p.cpu())
        top_ids.append(i.cpu())
        if target_id is not None:
            # rank by logits: far-off probabilities underflow to 0 and would all tie
            beat = logits > logits[:, target_id, None]  # (P, vocab)
            ranks.append(beat.sum(-1).cpu())
            target_probs.append(probs[:, target_id].cpu())
    top_ids = torch.stack(top_ids)  # (L+1, P, k)
    top_tokens = [[[tokenizer.decode([int(t)]) for t in cell] for cell in row] for row in top_ids.tolist()]
    labels = ["embed"] + [f"block {i}" for i in range(model.config.n_layers)]  # row i + 1: after blocks[i]
    prompt_tokens = token_strings(tokenizer, ids[real])
    return LensResult(
        tokens=[prompt_tokens[p] for p in positions], positions=positions, layer_labels=labels,
        top_ids=top_ids, top_probs=torch.stack(top_probs), top_tokens=top_tokens,
        target=None if target_id is None else tokenizer.decode([target_id]), target_id=target_id,
        target_rank=torch.stack(ranks) if ranks else None, target_prob=torch.stack(target_probs) if ranks else None,
    )
