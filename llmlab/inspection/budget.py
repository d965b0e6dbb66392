"""Memory a readout will take, estimated before it is spent.

Some readouts grow with the prompt much faster than the model does: the logit lens reads every
position through the LM head (positions x vocabulary: 10,000 tokens x Gemma's 262,144 ids are 10 GB
of float32 logits, and as much again for their softmax); attention maps grow with layers x heads x
positions squared; a patching sweep runs a whole batch of copies of the prompt. Left alone, such a
readout on a long prompt takes all the machine has, and the system kills the process without a word.

One rule, for every readout in llmlab:

* **Working memory stays within a budget.** What a readout holds only while it computes (a block of
  logits, a batch of patched runs) is split into chunks of positions (or rows) that each fit
  `working_budget()`, 1 GiB unless lowered with `memory_budget`. A prompt small enough to fit runs
  in one chunk, exactly as without the rule.
* **A result too large is refused up front.** What a readout hands back (a cache, logits, a table)
  is estimated before anything runs; above its `max_bytes` (default `RESULT_LIMIT`, 2 GiB) the readout
  raises MemoryError with the size, the limit and the way out (fewer positions, a smaller k, ...).

    >>> chunks(10, bytes_per_row=100, budget=250)
    [slice(0, 2, None), slice(2, 4, None), slice(4, 6, None), slice(6, 8, None), slice(8, 10, None)]
    >>> chunks(10, bytes_per_row=100, budget=2**30)          # it fits: one chunk, as without the rule
    [slice(0, 10, None)]
    >>> check_size("This lens", 3 * 2**30, 2**31, "Pass positions=[-1].")
    Traceback (most recent call last):
        ...
    MemoryError: This lens would hold 3072 MiB (limit 2048 MiB). Pass positions=[-1].
"""
from __future__ import annotations

import contextlib

RESULT_LIMIT = 2**31        # bytes a result may hold before a readout refuses it (capture's max_bytes)
WORKING_BUDGET = 2**30      # bytes a readout's working tensors may take at once
_budget = [WORKING_BUDGET]  # what working_budget() answers; memory_budget() changes it for a while


def working_budget() -> int:
    """Bytes a readout's working tensors may take at once (1 GiB, or what memory_budget set)."""
    return _budget[0]


@contextlib.contextmanager
def memory_budget(nbytes: int):
    """Lower (or raise) the working budget of every readout run inside the `with`:

        with memory_budget(256 * 2**20):           # a small machine: chunks of at most 256 MiB
            lens = logit_lens(model, tok, long_text)

    The results are the same; smaller chunks only take longer.
    """
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 1:
        raise ValueError(f"memory_budget takes a number of bytes, a positive int (e.g. 256 * 2**20 for 256 MiB); "
                         f"got {nbytes!r}.")
    old = _budget[0]
    _budget[0] = nbytes
    try:
        yield nbytes
    finally:
        _budget[0] = old


def mib(nbytes: float) -> str:
    """Bytes as MiB, the way the refusals print them: 3221225472 -> '3072', 1536 -> '0.0015'."""
    value = nbytes / 2**20
    return f"{value:.0f}" if value >= 10 or value == 0 else f"{value:.2g}"


def check_size(what: str, needed: int, max_bytes: int | None, way_out: str) -> None:
    """Refuse, before anything is spent, a result of `needed` bytes above `max_bytes` (None: no limit).

    what: the result, as the message's subject ("This logit lens (19 rows x 10000 positions, k=5)");
    way_out: what to pass instead ("Pass positions=[-1] ..., or raise max_bytes.").
    """
    if max_bytes is not None and needed > max_bytes:
        raise MemoryError(f"{what} would hold {mib(needed)} MiB (limit {mib(max_bytes)} MiB). {way_out}")


def chunks(n_rows: int, bytes_per_row: int, budget: int | None = None) -> list[slice]:
    """Slices that cover 0..n_rows-1, each of as many rows as fit in `budget` bytes (default
    working_budget()), at least one row each. One slice over everything when it all fits."""
    budget = working_budget() if budget is None else budget
    step = max(1, budget // max(1, int(bytes_per_row)))
    return [slice(start, min(start + step, n_rows)) for start in range(0, n_rows, step)] or [slice(0, 0)]


def logits_row_bytes(model, copies_float32: int = 1, extra_per_id: int = 0) -> int:
    """Bytes the LM head's readout of one position takes: its logits in the model's dtype (and the
    soft-cap's temporaries), `copies_float32` float32 tensors of the vocabulary's size (the float32
    logits when the model is not float32, a softmax, ...), and `extra_per_id` more bytes per id
    (a bool comparison: 1; and its sum, which torch counts in int64: 8 more)."""
    c = model.config
    element = model.dtype.itemsize if hasattr(model.dtype, "itemsize") else 4
    head = element * (3 if c.final_logit_softcap is not None else 1)   # cap * tanh(logits / cap): two temporaries
    return c.vocab_size * (head + 4 * copies_float32 + extra_per_id)


def forward_row_bytes(model, n_tokens: int, eager: bool = False) -> int:
    """Working memory of one sequence of n_tokens in a forward pass (an upper estimate): the residual
    stream and every intermediate of one block (projections, the FFN's hidden layer, norms, a hook's
    copy), plus attention scores (heads x n_tokens x n_tokens, and their softmax) where they are
    materialised (eager attention; llmlab's fused path on the CPU computes them a block at a time)."""
    c = model.config
    element = model.dtype.itemsize if hasattr(model.dtype, "itemsize") else 4
    per_token = 8 * c.d_model + 3 * c.n_heads * c.head_dim + 2 * c.n_kv_heads * c.head_dim + 4 * c.d_ff
    scores = 2 * c.n_heads * n_tokens * 4 if eager else 0
    return n_tokens * (per_token * element + scores)
