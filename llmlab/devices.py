"""Where tensors live. Every device and dtype decision in llmlab goes through here.

>>> get_device()            # on a laptop without a GPU  # doctest: +SKIP
device(type='cpu')
>>> get_device("cpu")
device(type='cpu')
"""
from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Callable

import torch


def get_device(device: str | torch.device | None = None) -> torch.device:
    """Return the device to use: the one asked for, else cuda -> mps -> cpu.

    Asking for a device that is not present raises a clear error instead of a
    CUDA traceback deep inside a forward pass.
    """
    if device is None:
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"device={device!r} is not a device name torch knows. Use 'cpu', 'cuda', 'cuda:0' or "
                         "'mps' (or leave device=None to pick the best available device).") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(
            f"device={str(device)!r} was asked for, but this machine has no CUDA GPU that torch can see. "
            "Use device='cpu' (or leave device=None to pick the best available device)."
        )
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise RuntimeError(f"device={str(device)!r} was asked for, but this machine has "
                           f"{torch.cuda.device_count()} CUDA GPU(s), numbered from 0. Use device='cuda:0'.")
    if device.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise RuntimeError(f"device={str(device)!r} was asked for, but MPS is not available here. Use device='cpu'.")
    return device


def available_devices() -> list[torch.device]:
    """All devices tests should run on: always the CPU, plus a GPU when one is present."""
    devices = [torch.device("cpu")]
    if torch.cuda.is_available():
        devices.append(torch.device("cuda"))
    return devices


_DTYPES = {"float32": torch.float32, "fp32": torch.float32, "float16": torch.float16, "fp16": torch.float16,
           "bfloat16": torch.bfloat16, "bf16": torch.bfloat16}


def get_dtype(dtype: str | torch.dtype | None) -> torch.dtype:
    """Turn 'float32' / 'bf16' / torch.float16 / None (-> float32) into a torch dtype."""
    if dtype is None:
        return torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in _DTYPES:
        raise ValueError(f"Unknown dtype {dtype!r}. Use one of: {', '.join(sorted(_DTYPES))}.")
    return _DTYPES[dtype]


def synchronize(device=None) -> None:
    """Wait until `device` has finished the work queued on it; on the CPU, return at once.

    A GPU runs asynchronously: a call returns as soon as its kernels are queued, so a clock read right
    after it measures the queueing, not the work. Call this before reading the clock.
    device: a name, a torch.device, or a tensor / model whose device it is (None: get_device()).

    >>> synchronize("cpu")          # nothing to wait for
    """
    device = _device_of(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


@dataclasses.dataclass(frozen=True)
class Timing:
    seconds: tuple      # one entry per timed call, in order
    min: float          # the fastest call: other work on the machine only ever adds time
    median: float       # the typical call

    def __repr__(self) -> str:
        return f"Timing(min={self.min * 1e3:.3f} ms, median={self.median * 1e3:.3f} ms, calls={len(self.seconds)})"


def timed(fn: Callable, device=None, repeats: int = 5, warmup: int = 1) -> Timing:
    """Call fn() warmup + repeats times and time the last `repeats` calls, each between two synchronize(device).

    The warm-up calls are not timed (the first call of a kernel pays for its set-up and caches). Report the
    min (the fastest) for what the code costs, the median for what a run typically took.

    >>> t = timed(lambda: sum(range(1000)), "cpu", repeats=3)
    >>> len(t.seconds), t.min <= t.median
    (3, True)
    """
    if not callable(fn):
        raise TypeError(f"timed(fn, ...) calls fn() with no arguments; got {type(fn).__name__}, which is not "
                        "callable. Wrap the call: timed(lambda: model(ids), device).")
    for name, value, low in (("repeats", repeats, 1), ("warmup", warmup, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be a whole number >= {low}; got {value!r}.")
    device = _device_of(device)
    for _ in range(warmup):
        fn()
    seconds = []
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        fn()
        synchronize(device)
        seconds.append(time.perf_counter() - start)
    return Timing(tuple(seconds), min(seconds), statistics.median(seconds))


def _device_of(device) -> torch.device:
    """A device name, torch.device, tensor or module (its parameters' device) -> torch.device."""
    if isinstance(device, torch.Tensor):
        return device.device
    if isinstance(device, torch.nn.Module):
        first = next(device.parameters(), None)
        return first.device if first is not None else torch.device("cpu")
    return get_device(device)


@dataclasses.dataclass(frozen=True)
class Bandwidth:
    gb_per_s: float     # the matrix's bytes over its fastest read, in GB/s (1e9 bytes per second)
    fastest: float      # seconds of that fastest read
    spread: float       # a typical read (the median) over the fastest: how noisy the machine was
    reads: int          # how many single reads were timed
    threads: int        # torch's CPU threads during the measurement: one thread reaches only part of a CPU's bandwidth

    def __repr__(self) -> str:
        return (f"Bandwidth({self.gb_per_s:.1f} GB/s: fastest of {self.reads} reads, a typical read "
                f"{self.spread:.2f}x slower, {self.threads} thread(s))")


def memory_bandwidth(device=None, matrix: torch.Tensor | None = None, repeats: int = 15) -> Bandwidth:
    """How fast this device reads memory: the fastest of many single reads of a large matrix.

    Three ways of reading every element once are each timed `repeats` times (after a warm-up): a plain
    sum, a matrix-vector product W @ x, and the same product as a one-column matrix product W @ X (the
    T = 1 point of a roofline). A rate is what bytes *can* do, so the fastest read counts; because the
    one-column product is among the reads, no such product measured on the same matrix can beat the
    roof. matrix: the matrix to read (default: 4096 x 4096 float32 = 64 MiB, larger than most CPU
    caches). The spread (median read over the fastest) and torch's thread count come with the number.

    >>> b = memory_bandwidth("cpu", matrix=torch.ones(256, 256), repeats=2)
    >>> b.reads, b.gb_per_s > 0, b.spread >= 1
    (6, True, True)
    """
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be a whole number >= 1; got {repeats!r}.")
    device = _device_of(matrix if matrix is not None else device)
    if matrix is None:
        matrix = torch.randn(4096, 4096, device=device)
    if not isinstance(matrix, torch.Tensor) or matrix.dim() != 2 or not matrix.is_floating_point():
        raise ValueError("memory_bandwidth(matrix=...) reads a 2-D floating-point tensor; got "
                         f"{type(matrix).__name__} {tuple(getattr(matrix, 'shape', ()))}. Pass e.g. torch.randn(4096, 4096).")
    x = torch.randn(matrix.shape[1], device=matrix.device, dtype=matrix.dtype)
    jobs = [lambda: matrix.sum(), lambda: matrix @ x, lambda: matrix @ x[:, None]]
    seconds = [s for fn in jobs for s in timed(fn, matrix.device, repeats=repeats).seconds]
    fastest = min(seconds)
    n_bytes = matrix.numel() * matrix.element_size()
    return Bandwidth(gb_per_s=n_bytes / fastest / 1e9, fastest=fastest, spread=statistics.median(seconds) / fastest,
                     reads=len(seconds), threads=torch.get_num_threads())
