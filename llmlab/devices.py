"""Where tensors live. Every device and dtype decision in llmlab goes through here.

>>> get_device()            # on a laptop without a GPU  # doctest: +SKIP
device(type='cpu')
>>> get_device("cpu")
device(type='cpu')
"""
from __future__ import annotations

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
