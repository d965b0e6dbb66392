"""Training a language model from scratch: each piece short, and each the same numbers as torch's own.

    logits = model(x)                                            # (B, T, V)
    loss = cross_entropy(logits, y)                              # mean -log p(target)
    loss.backward()
    clip_grad_norm_(model.parameters(), 1.0)                     # the whole gradient's length at most 1
    for group in optimizer.param_groups:
        group["lr"] = cosine_schedule(step, 3e-3, 3e-4, warmup=20, cycle=400)
    optimizer.step(); optimizer.zero_grad()

- `cross_entropy(logits, targets)`: stable for large logits (the max is subtracted before exp), the
  same as `torch.nn.functional.cross_entropy` up to float32 rounding.
- `AdamW`: a `torch.optim.Optimizer` written out step by step (moment estimates, bias correction,
  decoupled weight decay), the same operations in the same order as `torch.optim.AdamW(foreach=False)`.
- `cosine_schedule(it, max_lr, min_lr, warmup, cycle)`: linear warm-up, then a half cosine down to min_lr.
- `clip_grad_norm_(params, max_norm)`: scale every gradient by max_norm / (norm + 1e-6) when the norm
  of all gradients together is above max_norm, as `torch.nn.utils.clip_grad_norm_`.
- `get_batch(tokens, batch_size, context_length, device)`: random windows of a 1-D array of ids (a NumPy
  array or an `np.memmap`, so a corpus larger than memory trains: only the windows are read).
- `save_checkpoint` / `load_checkpoint`: model, optimizer, iteration (and the batch sampler's random
  state), so a run resumes where it stopped, bit for bit on the CPU.
- `train(...)`: the loop that uses them, with a progress bar and a loss log.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import torch

__all__ = ["cross_entropy", "AdamW", "cosine_schedule", "clip_grad_norm_", "get_batch", "save_checkpoint",
           "load_checkpoint", "train"]


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean over positions of -log softmax(logits)[target]: logits (..., V), targets (...) of ids.

    Subtracting each row's max before exp changes nothing mathematically (softmax is shift-invariant)
    and keeps exp from overflowing: logits of 1000 give exp(0), not inf.

    >>> cross_entropy(torch.tensor([[1000.0, 0.0]]), torch.tensor([0])).item()
    0.0
    """
    if not torch.is_tensor(logits) or not logits.is_floating_point() or logits.dim() < 1:
        raise TypeError(f"logits must be a float tensor of shape (..., V); got {type(logits).__name__} "
                        f"{getattr(logits, 'dtype', '')}.")
    if not torch.is_tensor(targets) or targets.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"targets must be a tensor of integer ids; got {getattr(targets, 'dtype', type(targets))}.")
    if targets.shape != logits.shape[:-1]:
        raise ValueError(f"targets have shape {tuple(targets.shape)}; logits {tuple(logits.shape)} need targets "
                         f"of shape {tuple(logits.shape[:-1])} (one id per row of logits).")
    V = logits.shape[-1]
    if targets.numel() and (targets.min() < 0 or targets.max() >= V):
        raise ValueError(f"targets must be ids from 0 to {V - 1}; got values from {int(targets.min())} to "
                         f"{int(targets.max())}.")
    shifted = logits - logits.max(dim=-1, keepdim=True).values           # (..., V), every row's max is 0
    log_total = shifted.exp().sum(dim=-1).log()                          # (...,) log sum exp
    picked = shifted.gather(-1, targets.long().unsqueeze(-1)).squeeze(-1)   # (...,) the target's shifted logit
    return (log_total - picked).mean()


class AdamW(torch.optim.Optimizer):
    """Adam with decoupled weight decay (Loshchilov & Hutter, 2019), one parameter at a time.

    For each parameter p with gradient g, at step t (from 1):
        p  <- p - lr * weight_decay * p                  decay, kept out of the moments
        m  <- beta1 * m + (1 - beta1) * g                running mean of the gradient
        v  <- beta2 * v + (1 - beta2) * g * g            running mean of its square
        p  <- p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
    The divisions by 1 - beta^t undo the pull towards 0 of moments that start at 0 (bias correction).
    The operations are torch.optim.AdamW's (foreach=False) in the same order, so the two give the same
    bits on the same machine.
    """

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.01):
        if not lr >= 0.0:
            raise ValueError(f"lr must be a number >= 0; got {lr!r}.")
        if not (len(betas) == 2 and all(0.0 <= b < 1.0 for b in betas)):
            raise ValueError(f"betas must be two numbers in [0, 1), e.g. (0.9, 0.999); got {betas!r}.")
        if not eps > 0.0 or not weight_decay >= 0.0:
            raise ValueError(f"eps must be > 0 and weight_decay >= 0; got eps={eps!r}, weight_decay={weight_decay!r}.")
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, (beta1, beta2), eps, decay = group["lr"], group["betas"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad
                state = self.state[p]
                if not state:
                    state["step"] = torch.tensor(0.0)
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                m, v = state["exp_avg"], state["exp_avg_sq"]
                state["step"] += 1
                t = state["step"].item()
                p.mul_(1 - lr * decay)
                m.lerp_(g, 1 - beta1)
                v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
                step_size = lr / (1 - beta1 ** t)
                denom = (v.sqrt() / math.sqrt(1 - beta2 ** t)).add_(eps)
                p.addcdiv_(m, denom, value=-step_size)
        return loss


def cosine_schedule(it: int, max_lr: float, min_lr: float, warmup: int, cycle: int) -> float:
    """The learning rate at iteration `it`: linear from 0 to max_lr over the first `warmup` iterations,
    then half a cosine from max_lr down to min_lr at iteration `cycle`, then min_lr.

    >>> [round(cosine_schedule(t, 1.0, 0.1, warmup=2, cycle=6), 3) for t in range(8)]
    [0.0, 0.5, 1.0, 0.868, 0.55, 0.232, 0.1, 0.1]
    """
    if not (isinstance(warmup, int) and isinstance(cycle, int) and 0 <= warmup < cycle):
        raise ValueError(f"need whole numbers 0 <= warmup < cycle; got warmup={warmup!r}, cycle={cycle!r}.")
    if it < warmup:
        return it / warmup * max_lr
    if it <= cycle:
        progress = (it - warmup) / (cycle - warmup)                  # 0 at the end of warm-up, 1 at `cycle`
        return min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (max_lr - min_lr)
    return min_lr


def clip_grad_norm_(params, max_norm: float, eps: float = 1e-6) -> torch.Tensor:
    """Scale all gradients together so that their joint L2 norm is at most max_norm; return the norm
    before clipping. Like torch.nn.utils.clip_grad_norm_, it multiplies by max_norm / (norm + eps),
    capped at 1 (eps keeps a zero gradient from dividing by zero)."""
    grads = [p.grad for p in ([params] if torch.is_tensor(params) else params) if p.grad is not None]
    if not max_norm > 0:
        raise ValueError(f"max_norm must be > 0; got {max_norm!r}.")
    if not grads:
        return torch.tensor(0.0)
    norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g, 2.0) for g in grads]), 2.0)
    scale = torch.clamp(max_norm / (norm + eps), max=1.0)
    for g in grads:
        g.mul_(scale.to(g.device))
    return norm


def get_batch(tokens, batch_size: int, context_length: int, device="cpu", generator: torch.Generator | None = None):
    """(x, y): batch_size random windows of context_length ids from the 1-D array `tokens`, and the same
    windows shifted by one (the targets). Both (batch_size, context_length) int64 on `device`.

    `tokens` may be a NumPy array or an np.memmap of a file of ids: only the chosen windows are read.
    >>> x, y = get_batch(np.arange(10), 2, 4)
    >>> bool((y == x + 1).all())
    True
    """
    n = len(tokens)
    if getattr(tokens, "ndim", 1) != 1:
        raise ValueError(f"tokens must be a 1-D array of ids; got shape {getattr(tokens, 'shape', None)}.")
    if n < context_length + 1:
        raise ValueError(f"{n} tokens are too few for windows of {context_length} and their next token: "
                         f"give at least {context_length + 1}, or a shorter context_length.")
    starts = torch.randint(0, n - context_length, (batch_size,), generator=generator)
    rows = [np.asarray(tokens[s:s + context_length + 1], dtype=np.int64) for s in starts.tolist()]
    both = torch.from_numpy(np.stack(rows))                              # (B, T + 1)
    return both[:, :-1].to(device), both[:, 1:].to(device)


def save_checkpoint(model: torch.nn.Module, optimizer: torch.optim.Optimizer, iteration: int, out,
                    generator: torch.Generator | None = None) -> None:
    """Write model, optimizer state and iteration (and the batch sampler's random state) to `out`
    (a path or a file object) so that `load_checkpoint` resumes the run exactly."""
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "iteration": int(iteration)}
    if generator is not None:
        state["generator"] = generator.get_state()
    if isinstance(out, (str, os.PathLike)):
        Path(out).parent.mkdir(parents=True, exist_ok=True)
    torch.save(state, out)


def load_checkpoint(src, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                    generator: torch.Generator | None = None) -> int:
    """Restore what `save_checkpoint` wrote into model, optimizer (and generator); return the iteration."""
    state = torch.load(src, map_location="cpu", weights_only=True)
    missing = {"model", "optimizer", "iteration"} - set(state)
    if missing:
        raise ValueError(f"{src!r} is not a training checkpoint: it lacks {sorted(missing)}. Write one with "
                         f"llmlab.training.save_checkpoint.")
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    if generator is not None:
        if "generator" not in state:
            raise ValueError(f"{src!r} holds no random state for the batches: it was saved without generator=.")
        generator.set_state(state["generator"])
    return state["iteration"]


def train(model: torch.nn.Module, tokens, *, steps: int, batch_size: int = 16, context_length: int = 64,
          max_lr: float = 3e-3, min_lr: float | None = None, warmup: int | None = None, weight_decay: float = 0.1,
          max_norm: float | None = 1.0, seed: int = 0, device=None, optimizer: AdamW | None = None,
          start: int = 0, until: int | None = None, generator: torch.Generator | None = None, log_every: int = 0,
          show_progress: bool = True) -> list:
    """Train `model` (ids (B, T) -> logits (B, T, V)) on random windows of `tokens` for iterations
    start .. steps - 1 of a run of `steps`: AdamW, warm-up then cosine decay to the end of the run (warmup
    defaults to 5 % of the steps, min_lr to max_lr / 10), gradient clipping at max_norm (None: off).
    Returns the loss of every iteration run.

    `until` stops early (the schedule still spans `steps`); pass the run's `optimizer` and `generator`
    and `start` to go on, e.g. after `load_checkpoint`.
    """
    device = next(model.parameters()).device if device is None else torch.device(device)
    warmup = max(1, steps // 20) if warmup is None else warmup
    min_lr = max_lr / 10 if min_lr is None else min_lr
    optimizer = optimizer or AdamW(model.parameters(), lr=max_lr, weight_decay=weight_decay)
    if generator is None:
        generator = torch.Generator().manual_seed(seed)
    from llmlab.progress import progress

    losses = []
    model.train()
    until = steps if until is None else until
    bar = progress(total=until - start, desc="training", unit="step", disable=not show_progress)
    for it in range(start, until):
        x, y = get_batch(tokens, batch_size, context_length, device, generator)
        loss = cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if max_norm is not None:
            clip_grad_norm_(model.parameters(), max_norm)
        for group in optimizer.param_groups:
            group["lr"] = cosine_schedule(it, max_lr, min_lr, warmup, steps)
        optimizer.step()
        losses.append(loss.item())
        bar.update(1)
        if log_every and (it + 1) % log_every == 0:
            print(f"step {it + 1}/{steps}: loss {loss.item():.3f}")
    bar.close()
    model.eval()
    return losses
