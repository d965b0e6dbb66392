"""Progress for llmlab's slow steps (dequantizing a GGUF file, the prefill of a long prompt), on stderr.

On a terminal or in a notebook (Jupyter, Colab) it is tqdm's bar, redrawn in place. Anywhere else (a
log file, a pipe, a CI job) a redrawn bar is one long line of carriage-return updates, so there the
progress comes as whole lines: one at the start, one at each further tenth of the way, and one at the
end with the time it took.

    for tensor in progress(reader.tensors, desc="Dequantizing model.gguf", unit="tensor"):
        ...

`prefill_progress` drives such a bar through a model's blocks while a long prompt runs: it only
watches (a forward hook on each block counts it) and changes no number.
"""
from __future__ import annotations

import sys
import time
from contextlib import contextmanager

# A prompt of at least this many tokens (all rows together) shows its prefill's progress on the CPU:
# SmolLM2-135M took 30-60 s for 2,891 tokens on two busy cores; shorter prompts print nothing.
LONG_PREFILL_TOKENS = 2048


def redraws_in_place(file) -> bool:
    """True where a bar can redraw itself: a terminal, or a notebook kernel's output (tqdm.auto's widget)."""
    if type(file).__module__.startswith("ipykernel"):
        return True
    try:
        return bool(file.isatty())
    except (AttributeError, ValueError):      # no isatty, or a closed file
        return False


def progress(iterable=None, *, total: int | None = None, desc: str, unit: str, disable: bool = False,
             file=None):
    """A progress bar with tqdm's interface (iterate over it, or .update(n) and .close()).

    tqdm.auto where the output redraws in place (a terminal, a notebook), LineProgress elsewhere;
    file is where it writes, sys.stderr unless given.
    """
    if disable:
        return _Silent(iterable)
    stream = sys.stderr if file is None else file
    if redraws_in_place(stream):
        from tqdm.auto import tqdm
        return tqdm(iterable, total=total, desc=desc, unit=unit, **({} if file is None else {"file": file}))
    return LineProgress(iterable, total=total, desc=desc, unit=unit, file=stream)


class LineProgress:
    """Progress as whole lines, for output that is not a terminal: the start, each further tenth, the end.

    >>> import io
    >>> out = io.StringIO()
    >>> for _ in LineProgress(range(4), desc="Working", unit="step", file=out, clock=lambda: 0.0):
    ...     pass
    >>> print(out.getvalue(), end="")
    Working: 0/4 steps
    Working: 1/4 steps (25%), 0.0 s
    Working: 2/4 steps (50%), 0.0 s
    Working: 3/4 steps (75%), 0.0 s
    Working: 4/4 steps, done in 0.0 s
    """

    STEPS = 10   # at most one line per tenth of the way

    def __init__(self, iterable=None, *, total: int | None = None, desc: str, unit: str, file=None,
                 clock=time.perf_counter):
        if total is None and hasattr(iterable, "__len__"):
            total = len(iterable)
        self.iterable, self.total, self.desc, self.unit = iterable, total, desc, unit
        self.file = sys.stderr if file is None else file
        self.clock, self.start, self.n, self.tenth, self.closed = clock, clock(), 0, 0, False
        self._write(f"{self.n}/{self.total} {unit}s" if self.total else f"0 {unit}s")

    def __iter__(self):
        for item in self.iterable:
            yield item
            self.update()
        self.close()

    def update(self, n: int = 1) -> None:
        """n more steps done: a line when a new tenth of the total is reached (the last one comes from close)."""
        self.n += n
        if self.total and self.n < self.total and self.n * self.STEPS // self.total > self.tenth:
            self.tenth = self.n * self.STEPS // self.total
            self._write(f"{self.n}/{self.total} {self.unit}s ({100 * self.n // self.total}%), "
                        f"{self.clock() - self.start:.1f} s")

    def close(self) -> None:
        """The last line: done in how long (or where it stopped, when closed before the end)."""
        if self.closed:
            return
        self.closed = True
        seconds = self.clock() - self.start
        count = f"{self.n}/{self.total}" if self.total else f"{self.n}"
        ended = f"done in {seconds:.1f} s" if self.total is None or self.n >= self.total \
            else f"stopped after {seconds:.1f} s"
        self._write(f"{count} {self.unit}s, {ended}")

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _write(self, text: str) -> None:
        print(f"{self.desc}: {text}", file=self.file, flush=True)


class _Silent:
    """progress(..., disable=True): iterates and counts nothing, prints nothing."""

    def __init__(self, iterable):
        self.iterable = iterable

    def __iter__(self):
        return iter(self.iterable)

    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


@contextmanager
def prefill_progress(model, n_tokens: int, show: bool | None = None, file=None):
    """Show the progress of the prompt pass run inside the with-block, one step per block of the model.

    show=None (the default) shows it for a long prompt on the CPU: n_tokens (all rows together) of at
    least LONG_PREFILL_TOKENS, on a model whose weights are on the CPU. Other prompts print nothing.
    A forward hook on each block counts it as done; nothing the model computes changes.
    """
    if show not in (None, True, False):
        raise TypeError(f"progress must be None (shown for a long prompt on the CPU), True or False; got {show!r}.")
    blocks = getattr(model, "blocks", None)
    if show is None:
        device = getattr(model, "device", None)
        show = n_tokens >= LONG_PREFILL_TOKENS and getattr(device, "type", None) == "cpu"
    if not show or not blocks:
        yield
        return
    bar = progress(total=len(blocks), desc=f"llmlab: prefill of {n_tokens:,} tokens", unit="block", file=file)

    def one_block_done(module, inputs, output) -> None:   # None: a forward hook that returns a value replaces
        bar.update()                                      # the block's output (tqdm's update returns True)

    handles = [block.register_forward_hook(one_block_done) for block in blocks]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
        bar.close()
