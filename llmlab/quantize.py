"""Weight-only quantization: the model's matrices stored in 8 or 4 bits, its activations in float.

Decoding one token reads every weight once and does one multiply-add with it (chapter 10), so its
speed is set by bytes read, not by arithmetic. Fewer bytes per weight, more tokens per second, as
long as the kernel that multiplies by the small integers is as good at streaming as the float one.

- ``int8``: per output row (channel), w ~ q * s with q in [-127, 127] and s = max|w_row| / 127.
  One byte per weight plus one scale per row.
- ``int4``: per group of 32 weights along the input, w ~ (q - 8) * s + z with q in [0, 15],
  s = (max - min) / 15 and z = min + 8 s: the Q4_1-style asymmetric layout. Half a byte per
  weight plus two numbers per 32 weights. A group that already lies on a 16-level grid (weights
  read from a 4-bit GGUF file do) keeps that grid, so it is stored exactly.

>>> w = torch.tensor([[0.5, -1.0, 0.25, 0.0]])
>>> q, s = quantize_int8(w)
>>> q.tolist(), round(s.item(), 6)
([[64, -127, 32, 0]], 0.007874)
>>> (dequantize_int8(q, s) - w).abs().max().item() < s.item() / 2 + 1e-7
True

``quantize_model(model, "int8")`` replaces every ``nn.Linear`` (the LM head included; a tied head
gets its own quantized copy, the embedding lookup keeps its float table) by a module that holds the
integers. Where q, k and v (or gate and up) get the same format, they are stacked into one matrix
first: one product per token instead of three. The quantized LM head recomputes its 32 largest
logits per position from the float rows (ExactTopHead), so the candidates a decoder picks from
carry no rounding of the head. Which matrix product runs is decided once per device and dtype by
timing the candidates on layers of the model's own size, streamed from memory as in a decode step:
a fused int8/int4 kernel where torch has one for the device (with float32 or bfloat16 activations),
or "dequantize, then multiply" (always available, always exact to the stored integers).
"""
from __future__ import annotations

import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from llmlab.checks import check_int
from llmlab.devices import timed
from llmlab.fusing import ExactTopHead, describe_fusion, fusable_groups, fuse_group

GROUP = 32     # int4 group size along the input dimension (GGUF's Q4_0/Q4_1 blocks are 32 weights too)
DTYPES = ("int8", "int4", "int8-bf16", "int4-bf16")   # "-bf16": the matrix products take bfloat16 activations

# How far a fused kernel may be from "dequantize, then multiply", as a share of the largest output. Not
# float32 rounding (llmlab.numerics): a "-bf16" kernel rounds every activation (and int4's group scales)
# to bfloat16, 8 significant bits, unit roundoff u = 2^-8, so each of the summed products carries a
# relative error up to u, and those add up like a random walk to about u of the largest output (measured:
# 0.65 u to 1.3 u on int8 and int4 layers of 64 to 2048 inputs). Five u is deliberately loose: the check
# keeps out a kernel that computes something else, whose outputs are off by their own size. A float kernel,
# off by float32 rounding alone (about 1e-6 of the output), passes by far.
BF16_AGREEMENT = 5 * 2.0 ** -8   # 0.0195


# ----------------------------------------------------------------------------- the arithmetic

def quantize_int8(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row symmetric int8: w (out, in) -> q int8 (out, in), s (out,) with w ~ q * s[:, None]."""
    w = w.detach().float()
    s = w.abs().amax(dim=1).clamp(min=1e-12) / 127                        # (out,)
    q = torch.round(w / s[:, None]).clamp(-127, 127).to(torch.int8)       # (out, in)
    return q, s


def dequantize_int8(q: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    return q.float() * s[:, None]                                          # (out, in)


CHUNK_ROWS = 256   # quantize_int4 works through a matrix this many rows at a time


def quantize_int4(w: torch.Tensor, group: int = GROUP) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Groupwise asymmetric int4: w (out, in) -> q (out, in) in 0..15, s and z (out, in // group)."""
    out_features, in_features = w.shape
    if in_features % group:
        raise ValueError(f"int4 needs the input size to be a multiple of {group}; this matrix is {tuple(w.shape)}. "
                         f"Quantize it to int8 instead.")
    if out_features > CHUNK_ROWS:          # rows are independent: a few at a time stay in the cache
        parts = [quantize_int4(rows, group) for rows in w.split(CHUNK_ROWS)]
        return tuple(torch.cat(part) for part in zip(*parts))
    g = w.detach().float().reshape(out_features, in_features // group, group)   # (out, n_groups, group)
    lo, hi = g.amin(dim=-1), g.amax(dim=-1)                                       # (out, n_groups)
    s = (hi - lo).clamp(min=1e-12) / 15
    # Weights that came from a 4-bit file already sit on a 16-level grid per block of 32 (Q4_0, Q4_1,
    # Q4_K); its step is the smallest gap between distinct values. Where the whole group lies on that
    # grid and fits in 16 levels, use it: re-quantizing such a block is then exact, not a second rounding.
    # numpy's sort of short rows is about ten times torch's on a CPU; both give the same sorted values
    if g.device.type == "cpu" and g.dtype in (torch.float32, torch.float64, torch.float16):
        ordered = torch.from_numpy(np.sort(g.detach().numpy(), axis=-1))
    else:                                   # a GPU, or bfloat16 (which NumPy has no type for)
        ordered = g.sort(dim=-1).values
    gaps = ordered[..., 1:] - ordered[..., :-1]
    tiny = (hi - lo)[..., None] * 1e-4
    step = torch.where(gaps > tiny, gaps, torch.full_like(gaps, float("inf"))).amin(dim=-1)  # (out, n_groups)
    levels = (g - lo[..., None]) / step[..., None]
    on_grid = torch.isfinite(step) & ((levels - levels.round()).abs().amax(dim=-1) < 1e-3) & \
        (levels.round().amax(dim=-1) <= 15)
    s = torch.where(on_grid, step, s)
    q = torch.round((g - lo[..., None]) / s[..., None]).clamp(0, 15)
    z = lo + 8 * s                                  # so that w ~ (q - 8) * s + z, the kernel's convention
    return q.reshape(out_features, in_features).to(torch.uint8), s, z


def share_on_4bit_grid(w: torch.Tensor, group: int = GROUP, quantized=None) -> float:
    """The share of groups of `w` that int4 stores exactly (1.0 for a matrix read from a 4-bit file)."""
    q, s, z = quantize_int4(w, group) if quantized is None else quantized
    error = torch.cat([(dequantize_int4(*part) - rows.float()).abs().reshape(*part[1].shape, group).amax(dim=-1)
                       for *part, rows in zip(q.split(CHUNK_ROWS), s.split(CHUNK_ROWS), z.split(CHUNK_ROWS),
                                              w.detach().split(CHUNK_ROWS))])   # (out, n_groups), a few rows at a time
    return (error <= 1e-5 * w.detach().abs().amax().clamp(min=1e-12)).float().mean().item()


def dequantize_int4(q: torch.Tensor, s: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    out_features, n_groups = s.shape
    g = q.float().reshape(out_features, n_groups, -1)                  # (out, n_groups, group)
    return ((g - 8) * s[..., None] + z[..., None]).reshape(out_features, -1)


# ----------------------------------------------------------------------------- the modules

class Int8Linear(nn.Module):
    """A Linear layer whose weight is stored as int8 with one scale per output row."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        q, s = quantize_int8(linear.weight)
        device = linear.weight.device
        self.register_buffer("q", q.to(device))
        self.register_buffer("scale", s.to(device))
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().float(), requires_grad=False)
        self.kernel = "dequantize"                  # set by quantize_model after timing the candidates
        self.register_buffer("kernel_scale", None, persistent=False)

    def dequantized(self, dtype=torch.float32) -> torch.Tensor:
        return dequantize_int8(self.q, self.scale).to(dtype)

    def set_kernel(self, kernel: str, dtype=torch.float32) -> None:
        """Run `kernel` from now on; keep the scales in the dtype it computes in (`dtype`: the activations')."""
        self.kernel = kernel
        if kernel.startswith("int8pack"):             # converted once here, not at every call
            self.register_buffer("kernel_scale", self.scale.to(_compute_dtype(kernel, dtype)), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kernel.startswith("int8pack"):
            a = x.reshape(-1, self.in_features).to(_compute_dtype(self.kernel, x.dtype))
            scale = self.kernel_scale if self.kernel_scale is not None and self.kernel_scale.dtype == a.dtype \
                else self.scale.to(a.dtype)
            y = torch._weight_int8pack_mm(a, self.q, scale)
            y = y.reshape(*x.shape[:-1], self.out_features).to(x.dtype)
        else:
            y = F.linear(x, self.q.to(x.dtype) * self.scale[:, None].to(x.dtype))
        return y if self.bias is None else y + self.bias.to(y.dtype)

    def extra_repr(self) -> str:
        return f"in={self.in_features}, out={self.out_features}, int8 per-row, kernel={self.kernel}"


class Int4Linear(nn.Module):
    """A Linear layer whose weight is stored in 4 bits, groups of 32 along the input."""

    def __init__(self, linear: nn.Linear, group: int = GROUP, quantized=None):
        super().__init__()
        self.in_features, self.out_features, self.group = linear.in_features, linear.out_features, group
        q, s, z = quantize_int4(linear.weight, group) if quantized is None else quantized
        device = linear.weight.device
        self.register_buffer("q", q.to(device))                          # (out, in) uint8, values 0..15
        self.register_buffer("scale", s.to(device))                      # (out, n_groups)
        self.register_buffer("zero", z.to(device))
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().float(), requires_grad=False)
        self.kernel = "dequantize"
        self.register_buffer("packed", None, persistent=False)           # the fused kernel's own layout
        self.register_buffer("scale_zero", None, persistent=False)

    def dequantized(self, dtype=torch.float32) -> torch.Tensor:
        return dequantize_int4(self.q, self.scale, self.zero).to(dtype)

    def set_kernel(self, kernel: str, dtype=torch.float32) -> None:
        """Run `kernel` from now on. For torch's CPU int4 kernel, pack the integers two per byte in its
        layout (the unpacked copy stays until quantize_model drops it) and keep the group scales in the
        dtype it computes in (`dtype`: the activations')."""
        if kernel == "dequantize" and self.q.numel() == 0:
            raise ValueError("This int4 layer keeps only the packed copy of its integers (quantize_model dropped "
                             "the other), so it cannot switch to kernel='dequantize'; quantize the float model "
                             "again with kernel='dequantize'.")
        if kernel.startswith("int4pack"):
            if self.packed is None:
                self.register_buffer("packed", torch._convert_weight_to_int4pack_for_cpu(self.q.to(torch.int32), 1),
                                     persistent=False)                                    # (out, in / 2)
            scale_zero = torch.stack([self.scale.t(), self.zero.t()], dim=-1).contiguous()  # (n_groups, out, 2)
            self.register_buffer("scale_zero", scale_zero.to(_compute_dtype(kernel, dtype)), persistent=False)
        self.kernel = kernel

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kernel.startswith("int4pack"):
            a = x.reshape(-1, self.in_features).to(_compute_dtype(self.kernel, x.dtype))
            scale_zero = self.scale_zero if self.scale_zero.dtype == a.dtype else self.scale_zero.to(a.dtype)
            y = torch._weight_int4pack_mm_for_cpu(a, self.packed, self.group, scale_zero)
            y = y.reshape(*x.shape[:-1], self.out_features).to(x.dtype)
        else:
            y = F.linear(x, self.dequantized(x.dtype))
        return y if self.bias is None else y + self.bias.to(y.dtype)

    def stored_bytes(self) -> int:
        """Bytes of the weight as a 4-bit format stores it: half a byte a weight, two fp16 numbers a group."""
        return self.q.numel() // 2 + self.scale.numel() * 2 * 2

    def extra_repr(self) -> str:
        return f"in={self.in_features}, out={self.out_features}, int4 groups of {self.group}, kernel={self.kernel}"


# ----------------------------------------------------------------------------- choosing a kernel
#
# "-bf16" kernels hand the fused kernel bfloat16 activations and return the layer's own dtype: torch's
# CPU int4/int8 kernels are fast for bf16 inputs and take a slow generic path for float32 ones. The
# stored integers are the same; only the activations (and the int4 group scales) are rounded to bf16.

def _compute_dtype(kernel: str, dtype: torch.dtype) -> torch.dtype:
    return torch.bfloat16 if kernel.endswith("-bf16") else dtype


def _candidates(kind: str, device: torch.device) -> list[str]:
    names = ["dequantize"]
    if kind == "int8" and hasattr(torch, "_weight_int8pack_mm") and device.type in ("cpu", "cuda", "mps"):
        names += ["int8pack", "int8pack-bf16"]
    if kind == "int4" and device.type == "cpu" and hasattr(torch, "_weight_int4pack_mm_for_cpu"):
        names += ["int4pack", "int4pack-bf16"]
    return names


def _kernels_for(kind: str, activations: str, device: torch.device) -> list[str]:
    """The candidates that keep the activations as asked: float ones, or bf16 ones ("dequantize" where none)."""
    bf16 = [name for name in _candidates(kind, device) if name.endswith("-bf16")]
    if activations == "bf16":
        return bf16 or ["dequantize"]
    return [name for name in _candidates(kind, device) if name not in bf16]


TIMING_BYTES = 96 * 2**20    # weights streamed per timed pass: more than any CPU cache, as in a real decode step


def _time_kernel(layers: list[nn.Module], kernel: str, x: torch.Tensor, repeats: int = 7) -> float:
    """Seconds per layer for one token through `layers` (distinct copies, so nothing stays in cache)."""
    for layer in layers:
        layer.set_kernel(kernel, x.dtype)
    with torch.no_grad():
        reference = F.linear(x, layers[0].dequantized(x.dtype))
        if not (layers[0](x) - reference).abs().max() <= BF16_AGREEMENT * reference.abs().max():   # NaN fails too
            return float("inf")                      # a kernel that disagrees with the stored integers is never used
        timing = timed(lambda: [layer(x) for layer in layers], x.device, repeats, warmup=1)
    # The fastest pass, not the median: other work on the machine and threads slow to wake only ever
    # add time (with OMP_WAIT_POLICY=PASSIVE the median once picked torch's slow float32 int4 path).
    return timing.min / len(layers)


def pick_kernel(kind: str, in_features: int, out_features: int, device, dtype=torch.float32,
                activations: str = "float") -> tuple[str, dict]:
    """Time every available kernel for one token through layers of this size; return the fastest and the times.

    A decode step streams every weight from memory once. Timing one small layer again and again
    would measure it from the cache instead, where "dequantize, then multiply" looks fast; so the
    timed pass goes through enough distinct copies to read TIMING_BYTES of float32 weights.
    """
    linear = nn.Linear(in_features, out_features, bias=False).to(device)
    x = torch.randn(1, in_features, device=device, dtype=dtype)
    copies = max(2, min(64, TIMING_BYTES // (in_features * out_features * 4)))
    first = (Int8Linear if kind == "int8" else Int4Linear)(linear)
    times = {}
    for kernel in _kernels_for(kind, activations, torch.device(device)):
        layers = [copy.deepcopy(first) for _ in range(copies)]
        try:
            times[kernel] = _time_kernel(layers, kernel, x)
        except (RuntimeError, NotImplementedError):  # no such kernel for this device/dtype in this torch
            times[kernel] = float("inf")
        del layers
    return min(times, key=times.get), times


# ----------------------------------------------------------------------------- the model

def quantize_model(model: nn.Module, dtype: str, kernel: str | None = None, keep: tuple = (),
                   head: str | None = None, exact_only: bool = True, fuse: bool = True,
                   exact_top: int = 32) -> nn.Module:
    """Replace the nn.Linear layers of `model` by int8 or int4 versions, in place; returns the model.

    dtype "int8" / "int4" keeps the activations in the model's float dtype, so the result is exact to
    the stored integers; "int8-bf16" / "int4-bf16" rounds the activations entering each matrix product
    to bfloat16, which lets torch's fused CPU kernels run fast, at a cost in agreement that depends
    on the model (measure it: benchmarks/decode_benchmark.py, tests/test_quantize.py).
    kernel=None times the candidates once per format (see pick_kernel) and keeps the fastest;
    "dequantize", "int8pack", "int4pack" (or their "-bf16" forms) force one. `head` says how the LM head is stored:
    None = like the other layers, "int8", or "float" (left as it is). The layers named in `keep`
    and the model's other parameters (embeddings, norms) stay as they are. With exact_only (the
    default), "int4" goes only to matrices that already lie on a 4-bit grid (the Q4 tensors of a
    GGUF file); a matrix the file stores more finely (Q6_K, Q8_0) gets int8 instead, and is listed
    in model.quantization["promoted_to_int8"].
    fuse=True stacks q/k/v (and gate/up) into one matrix where all parts get the same format: fewer,
    larger products per token, the same numbers. exact_top=k > 0 makes a quantized LM head an
    ExactTopHead: its k largest logits per position are recomputed from the float weights (0: off).
    model.quantization records what was done.
    """
    if dtype not in DTYPES:
        raise ValueError(f"quantize_model(dtype={dtype!r}): expected one of {DTYPES}.")
    full_dtype = dtype
    dtype, _, activations = dtype.partition("-")            # "int4-bf16" -> int4 weights, bf16 activations
    activations = activations or "float"
    if head not in (None, "float", *DTYPES):
        raise ValueError(f"quantize_model(head={head!r}): expected None, 'float', 'int8' or 'int4'.")
    exact_top = check_int("exact_top", exact_top, low=0, hint="It is a number of logits; 0 turns it off.")
    if getattr(model, "quantization", None):
        raise ValueError(f"This model is already quantized ({model.quantization['dtype']}); "
                         f"load it again in float32 to quantize it differently.")
    linears = [(name, module) for name, module in model.named_modules() if isinstance(module, nn.Linear)]
    if not linears:
        raise ValueError("quantize_model found no nn.Linear layer in this model: nothing to quantize.")
    device = linears[0][1].weight.device
    float_dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.float32)
    allowed = _kernels_for(dtype, activations, device)
    if kernel is not None and kernel not in allowed:
        raise ValueError(f"kernel={kernel!r} is not available for {full_dtype} ({activations} activations) on "
                         f"{device}; available: {allowed}.")

    blocks = [linear for name, linear in linears if name != "lm_head"] or [linears[0][1]]
    biggest = max(blocks, key=lambda linear: linear.weight.numel())
    kernels, times = {}, {}

    def kernel_for(kind: str) -> str:
        if kind not in kernels:
            if kernel is not None and kind == dtype:
                kernels[kind] = kernel
            else:
                kernels[kind], times[kind] = pick_kernel(kind, biggest.in_features, biggest.out_features,
                                                         device, float_dtype, activations)
        return kernels[kind]

    # What each matrix becomes, decided on the matrices as they are.
    plan, promoted = {}, []
    for name, linear in linears:
        kind = ((head or dtype) if name == "lm_head" else dtype).partition("-")[0]
        if name in keep or kind == "float" or (kind == "int4" and linear.in_features % GROUP):
            continue                                 # int4 groups need in % 32 == 0; else the float weight stays
        quantized = quantize_int4(linear.weight) if kind == "int4" else None
        if kind == "int4" and exact_only and share_on_4bit_grid(linear.weight, quantized=quantized) < 0.999:
            kind, quantized = "int8", None           # finer than 4 bits in the file: a 4-bit copy would lose it
            promoted.append(name)
        plan[name] = (linear, kind, quantized)

    # Stack q/k/v and gate/up where every part gets the same format.
    fused = []
    if fuse:
        for module, fused_name, parts in fusable_groups(model):
            if all(p in plan for p in parts) and len({plan[p][1] for p in parts}) == 1 and \
                    len({plan[p][0].bias is None for p in parts}) == 1:
                part_layers, kinds, quantized = zip(*(plan.pop(p) for p in parts))
                linear = fuse_group(module, fused_name, parts, list(part_layers))
                # rows are quantized independently: the stacked integers are the parts' integers, stacked
                stacked = None if kinds[0] != "int4" else tuple(torch.cat(c) for c in zip(*quantized))
                plan[fused_name] = (linear, kinds[0], stacked)
                fused.append(fused_name)
        describe_fusion(model)

    bytes_before = bytes_after = 0
    for name, (linear, kind, quantized) in plan.items():
        layer = Int8Linear(linear) if kind == "int8" else Int4Linear(linear, quantized=quantized)
        layer.set_kernel(kernel_for(kind), float_dtype)
        bytes_before += linear.weight.numel() * linear.weight.element_size()
        bytes_after += (layer.q.numel() + layer.scale.numel() * 4 if kind == "int8" else
                        linear.weight.numel() // 2 + layer.scale.numel() * 8)
        if layer.kernel.startswith("int4pack"):
            layer.q = torch.empty(0, dtype=torch.uint8, device=device)   # the packed copy replaces it
        if name == "lm_head" and exact_top:
            layer = ExactTopHead(layer, linear.weight, linear.bias, exact_top)
            bytes_after += exact_top * linear.in_features * linear.weight.element_size()   # k float rows a token
        parent = model.get_submodule(name.rsplit(".", 1)[0]) if "." in name else model
        setattr(parent, name.rsplit(".", 1)[-1], layer)
    model.quantization = {"dtype": full_dtype, "activations": activations, "head": head or full_dtype,
                          "exact_top": exact_top if "lm_head" in plan else 0,
                          "kernel": kernels.get(dtype), "kernels": kernels, "fused": fused,
                          "kernel_seconds": times, "promoted_to_int8": promoted, "linear_bytes_before": bytes_before,
                          "linear_bytes_after": bytes_after}
    return model
