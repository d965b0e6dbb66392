"""Statistics for measurements over prompts: the mean and a bootstrap interval around it.

A number measured on one prompt says little; the book measures over a prompt set and shows the
mean with a 95% interval. `mean_ci` is the one helper every chapter uses for that.

>>> mean, low, high = mean_ci([1.0, 2.0, 3.0, 4.0])
>>> mean, low <= mean <= high
(2.5, True)
"""
from __future__ import annotations

import torch

__all__ = ["mean_ci"]


def mean_ci(values, n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> tuple[float, float, float]:
    """Mean of `values` (one number per prompt) and a bootstrap confidence interval for it.

    Resample the values with replacement n_boot times; the interval holds the middle `level` of
    the resampled means. Returns (mean, low, high). The values may be a list, an array or a tensor
    on any device.
    """
    if isinstance(values, torch.Tensor):
        values = values.detach()
    else:
        try:                     # a list (nested or not) or an array
            values = torch.as_tensor(values, dtype=torch.float64)
        except (TypeError, ValueError, RuntimeError):   # e.g. a list of 0-d tensors living on a GPU
            values = torch.tensor([float(v) for v in values], dtype=torch.float64)
    values = values.to("cpu", torch.float64).flatten()   # resampled on the CPU, whatever the device
    if values.numel() < 2:
        raise ValueError(f"mean_ci needs at least 2 values (one per prompt) to resample; got {values.numel()}.")
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1 (0.95 for a 95% interval); got {level}.")
    g = torch.Generator().manual_seed(seed)
    picks = torch.randint(0, values.numel(), (n_boot, values.numel()), generator=g)
    means = values[picks].mean(1)                                     # (n_boot,)
    tail = (1 - level) / 2
    low, high = torch.quantile(means, torch.tensor([tail, 1 - tail], dtype=torch.float64)).tolist()
    return float(values.mean()), low, high
