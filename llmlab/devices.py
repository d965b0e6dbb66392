"""Where tensors live. Every device and dtype decision in llmlab goes through here.

>>> get_device()            # on a laptop without a GPU  # doctest: +SKIP
device(type='cpu')
>>> get_device("cpu")
device(type='cpu')
"""
from __future__ import annotations

import dataclasses
import json
import os
import platform
import statistics
import time
from pathlib import Path
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
    gb_per_s: float       # the buffer's bytes over its median read, in GB/s (1e9 bytes per second): a typical read
    best_gb_per_s: float  # the same bytes over the fastest read: the most this device delivered
    fastest: float        # seconds of the fastest read
    median: float         # seconds of the median read
    spread: float         # the median read over the fastest (1 or more): how noisy the machine was
    reads: int            # how many single reads were timed
    threads: int          # torch's CPU threads during the measurement: one thread reaches only part of a CPU's bandwidth
    buffer_bytes: int     # bytes of the buffer, read whole at every read
    cache_bytes: int | None  # the last-level cache the buffer was sized against (None: not known, or a buffer passed in)
    reused: bool = False  # True when taken from the file of earlier measurements instead of measured now

    def __repr__(self) -> str:
        return (f"Bandwidth({self.gb_per_s:.1f} GB/s: median of {self.reads} reads of "
                f"{self.buffer_bytes / 2**20:.0f} MiB, "
                f"the fastest {self.best_gb_per_s:.1f} GB/s, a typical read {self.spread:.2f}x the fastest, "
                f"{self.threads} thread(s){', reused' if self.reused else ''})")


# How large a buffer memory_bandwidth reads: at least CACHE_MULTIPLE times the last-level cache, so that
# almost none of it is still in the cache from the read before; never less than MIN_BUFFER_BYTES (a cache
# size may be unknown or per core), never more than MAX_BUFFER_BYTES (the memory of a small laptop or Colab).
CACHE_MULTIPLE = 4
MIN_BUFFER_BYTES = 256 * 2**20
MAX_BUFFER_BYTES = 1024 * 2**20
UNKNOWN_CACHE_BUFFER_BYTES = 512 * 2**20    # when no cache size can be found
# A measurement is reused for this long (a book build takes minutes; a day later, measure again).
REUSE_SECONDS = 24 * 3600
BANDWIDTH_FORMAT = 1     # bumped when the way of measuring changes: older entries are then not reused
CPU_CACHE_FOLDER = Path("/sys/devices/system/cpu/cpu0/cache")   # Linux: one index* folder per cache of CPU 0


def last_level_cache_bytes(device=None) -> int | None:
    """Bytes of the largest cache between `device` and its memory, or None when it cannot be found.

    CPU: the highest-level data or unified cache of CPU 0, from Linux's CPU_CACHE_FOLDER,
    else os.sysconf's level-3 or level-2 size (glibc). CUDA: the GPU's L2 cache. Apple's GPU (mps): None.

    >>> last_level_cache_bytes("cpu") is None or last_level_cache_bytes("cpu") > 0
    True
    """
    device = _device_of(device)
    if device.type == "cuda":
        return getattr(torch.cuda.get_device_properties(device), "L2_cache_size", None) or None
    if device.type != "cpu":
        return None
    best = (0, 0)                                     # (level, bytes)
    for index in CPU_CACHE_FOLDER.glob("index*"):
        try:
            kind = (index / "type").read_text().strip()
            level = int((index / "level").read_text())
            size = (index / "size").read_text().strip()      # e.g. "32768K"
        except (OSError, ValueError):
            continue
        scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(size[-1:].upper(), 1)
        digits = size.rstrip("KkMmGg")
        if kind in ("Data", "Unified") and digits.isdigit():
            best = max(best, (level, int(digits) * scale))
    if best[1]:
        return best[1]
    for name in ("SC_LEVEL3_CACHE_SIZE", "SC_LEVEL2_CACHE_SIZE"):
        try:
            size = os.sysconf(name)
        except (ValueError, OSError, AttributeError):
            continue
        if size > 0:
            return size
    return None


def bandwidth_buffer_bytes(device=None) -> int:
    """How many bytes memory_bandwidth reads on `device`: CACHE_MULTIPLE times its last-level cache, between
    MIN_BUFFER_BYTES and MAX_BUFFER_BYTES (UNKNOWN_CACHE_BUFFER_BYTES when the cache size is not known). On a
    GPU, MAX_BUFFER_BYTES (several times any GPU's L2 cache) or a quarter of its free memory if that is less.
    A multiple of 16 KiB, a whole number of 4096-float rows.

    >>> bandwidth_buffer_bytes("cpu") >= MIN_BUFFER_BYTES
    True
    """
    device = _device_of(device)
    cache = last_level_cache_bytes(device)
    size = UNKNOWN_CACHE_BUFFER_BYTES if cache is None else CACHE_MULTIPLE * cache
    size = min(max(size, MIN_BUFFER_BYTES), MAX_BUFFER_BYTES)
    if device.type == "cuda":   # a GPU reads 256 MiB in a tenth of a millisecond: read the most, so the clock's
        size = min(MAX_BUFFER_BYTES, torch.cuda.mem_get_info(device)[0] // 4)   # own cost is a small part
    return max(size // (4 * 4096), 1) * 4 * 4096


def bandwidth_file() -> Path:
    """Where measurements are kept for reuse: $LLMLAB_BANDWIDTH_FILE if set (the book's build points it into
    _build, and starts each build without it), else bandwidth.json in llmlab's cache folder."""
    from llmlab.disk_cache import cache_root

    return Path(os.environ.get("LLMLAB_BANDWIDTH_FILE") or cache_root() / "bandwidth.json")


def _machine_key(device: torch.device, buffer_bytes: int) -> str:
    """What a reused measurement must share with this one: the machine, the device, torch's threads, the buffer."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
    else:
        name = platform.processor() or platform.machine()
        try:                                          # Linux names the CPU model here
            name = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                        if line.startswith("model name"))
        except (OSError, StopIteration):
            pass
    return "|".join([f"v{BANDWIDTH_FORMAT}", platform.node(), str(device), name, f"{os.cpu_count()} cpus",
                     f"{torch.get_num_threads()} threads", f"torch {torch.__version__}", f"{buffer_bytes} bytes"])


def _read_reused(key: str) -> Bandwidth | None:
    try:
        entry = json.loads(bandwidth_file().read_text())[key]
        if not 0 <= time.time() - entry.pop("measured_at") <= REUSE_SECONDS:
            return None
        return Bandwidth(**entry, reused=True)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):   # no file, another format, a stale entry
        return None


def _store(key: str, bw: Bandwidth) -> None:
    """Add one measurement to the file; a folder that cannot be written to only means no reuse."""
    path = bandwidth_file()
    try:
        try:
            entries = json.loads(path.read_text())
            entries = entries if isinstance(entries, dict) else {}
        except (OSError, ValueError):
            entries = {}
        fields = {k: v for k, v in dataclasses.asdict(bw).items() if k != "reused"}
        entries[key] = {**fields, "measured_at": time.time()}
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(entries, indent=1))
        os.replace(tmp, path)                         # readers see the old file or the new one, never half of one
    except OSError:
        pass


def memory_bandwidth(device=None, matrix: torch.Tensor | None = None, repeats: int = 15,
                     reuse: bool = True) -> Bandwidth:
    """How fast this device reads memory: single reads of a buffer far larger than its caches, timed.

    A decode step streams every weight of a model (hundreds of MB) once, so what sets its floor is the
    rate at which main memory delivers bytes. A buffer that fits in a cache, wholly or partly, is read
    partly from the cache, faster: it would measure the cache, not the memory. So the default buffer is
    bandwidth_buffer_bytes(device): CACHE_MULTIPLE (4) times the last-level cache (last_level_cache_bytes),
    at least 256 MiB, at most 1 GiB. Three ways of reading every element once are each timed `repeats`
    times after a warm-up: a plain sum, a matrix-vector product W @ x, and the same product as a one-column
    matrix product W @ X (the T = 1 point of a roofline). The bandwidth is the bytes over the median read
    (a typical read); the fastest read and the spread (median over fastest) come with it, and torch's
    thread count.

    matrix: a 2-D floating-point matrix to read instead (a model's own weight matrix, say); it is measured
    every time, never reused, and should be larger than the caches for the result to mean main memory.
    reuse: the default buffer's result is kept in bandwidth_file() (a small JSON, one entry per machine,
    device, thread count, torch version and buffer size) and reused for REUSE_SECONDS (a day), so that the
    pages of one build, and a reader's chapters, use one measurement; reuse=False measures again (and keeps
    the new result).

    >>> b = memory_bandwidth("cpu", matrix=torch.ones(256, 256), repeats=2)
    >>> b.reads, b.gb_per_s > 0, b.best_gb_per_s >= b.gb_per_s, b.spread >= 1, b.reused
    (6, True, True, True, False)
    """
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be a whole number >= 1; got {repeats!r}.")
    if matrix is not None and (not isinstance(matrix, torch.Tensor) or matrix.dim() != 2
                               or not matrix.is_floating_point()):
        raise ValueError("memory_bandwidth(matrix=...) reads a 2-D floating-point tensor; got "
                         f"{type(matrix).__name__} {tuple(getattr(matrix, 'shape', ()))}. Pass e.g. torch.randn(4096, 4096).")
    device = _device_of(matrix if matrix is not None else device)
    key = cache = None
    if matrix is None:
        n_bytes, cache = bandwidth_buffer_bytes(device), last_level_cache_bytes(device)
        key = _machine_key(device, n_bytes)
        reused = _read_reused(key) if reuse else None
        if reused is not None:
            return reused
        matrix = torch.randn(n_bytes // (4 * 4096), 4096, device=device)      # float32: 4 bytes a number
    x = torch.randn(matrix.shape[1], device=matrix.device, dtype=matrix.dtype)
    jobs = [lambda: matrix.sum(), lambda: matrix @ x, lambda: matrix @ x[:, None]]
    seconds = [s for fn in jobs for s in timed(fn, matrix.device, repeats=repeats).seconds]
    fastest, median = min(seconds), statistics.median(seconds)
    n_bytes = matrix.numel() * matrix.element_size()
    bw = Bandwidth(gb_per_s=n_bytes / median / 1e9, best_gb_per_s=n_bytes / fastest / 1e9, fastest=fastest,
                   median=median, spread=median / fastest, reads=len(seconds), threads=torch.get_num_threads(),
                   buffer_bytes=n_bytes, cache_bytes=cache)
    if key is not None:                               # a fresh measurement replaces an older one
        _store(key, bw)
    return bw
