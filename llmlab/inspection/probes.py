"""Linear probes, and the control task that says what their accuracy is worth.

A probe is a small linear classifier trained on a layer's vectors to predict a label (the sense of
"apple", a part of speech). High test accuracy says the label can be read off linearly. But a
probe can also *memorise*: with few examples in many dimensions, it separates almost any labelling.

The control task (Hewitt and Liang, 2019) measures that. Give every word type (or, for a
single word in many sentences, every sentence frame) a random label, keep everything else the
same, and train the same probe. The model's vectors do not "know" random labels, so whatever
the probe reaches on them is the probe's own doing. Selectivity = task accuracy - control
accuracy on held-out examples: a probe that scores high on the task and low on the control
reads the model, not itself.

    result = probe_with_control(X, senses, types=frames)       # X (n, d), labels and types (n,)
    result.test_accuracy, result.control_test_accuracy, result.selectivity
"""
from __future__ import annotations

import dataclasses

import torch


def _check(X, labels, name="labels"):
    if not isinstance(X, torch.Tensor) or X.dim() != 2:
        raise ValueError(f"X must be a (n_examples, d) tensor of vectors; got "
                         f"{tuple(X.shape) if isinstance(X, torch.Tensor) else type(X).__name__}.")
    labels = torch.as_tensor(labels)
    if labels.shape != (X.shape[0],) or labels.is_floating_point():
        raise ValueError(f"{name} must be n = {X.shape[0]} integer class ids, one per row of X; got shape "
                         f"{tuple(labels.shape)}, dtype {labels.dtype}.")
    return labels.long()


def train_probe(X: torch.Tensor, labels, alpha: float = 1.0, n_classes: int | None = None) -> torch.nn.Linear:
    """A linear probe fitted in closed form: ridge regression from the standardised vectors to one-hot
    labels, W = argmin |Z W - Y|^2 + lam |W|^2 with lam = alpha * d; the predicted class is the
    largest score. (Logistic regression gives much the same boundary; this one needs no iterations,
    so a chapter can fit thousands.) With n examples and d >> n features, the solution is computed in
    its n x n form: W = Z^T (Z Z^T + lam I)^-1 Y.
    """
    labels = _check(X, labels)
    if alpha <= 0:
        raise ValueError(f"alpha must be positive (the strength of the ridge penalty), got {alpha}.")
    X = X.detach().double().cpu()
    mean, std = X.mean(0), X.std(0).clamp_min(1e-6)
    Z = (X - mean) / std                                      # (n, d) standardised
    n_classes = int(labels.max()) + 1 if n_classes is None else n_classes
    Y = torch.nn.functional.one_hot(labels, n_classes).double()
    Y = Y - Y.mean(0)                                         # the bias is the mean label
    n, d = Z.shape
    W = Z.T @ torch.linalg.solve(Z @ Z.T + alpha * d * torch.eye(n, dtype=Z.dtype), Y)   # (d, n_classes)
    probe = torch.nn.Linear(d, n_classes).double()
    with torch.no_grad():
        probe.weight.copy_(W.T)
        probe.bias.copy_(torch.nn.functional.one_hot(labels, n_classes).double().mean(0))
    probe.register_buffer("mean", mean)
    probe.register_buffer("std", std)
    return probe


@torch.no_grad()
def probe_accuracy(probe: torch.nn.Linear, X: torch.Tensor, labels) -> float:
    """Share of rows of X whose predicted class is their label."""
    labels = _check(X, labels)
    Z = (X.detach().double().cpu() - probe.mean) / probe.std
    return float((probe(Z).argmax(-1) == labels).double().mean())


def control_labels(types, n_classes: int, seed: int = 0) -> torch.Tensor:
    """One random class per distinct type, the same for every example of that type: (n,) long.

    >>> control_labels(["a", "b", "a", "c"], 2, seed=0).tolist()
    [0, 1, 0, 1]
    """
    distinct = sorted(set(types), key=str)
    g = torch.Generator().manual_seed(seed)
    random_class = torch.randint(0, n_classes, (len(distinct),), generator=g)
    which = {t: i for i, t in enumerate(distinct)}
    return torch.stack([random_class[which[t]] for t in types])


@dataclasses.dataclass
class ProbeResult:
    train_accuracy: float
    test_accuracy: float
    control_train_accuracy: float
    control_test_accuracy: float

    @property
    def selectivity(self) -> float:
        """Task accuracy minus control accuracy on the held-out examples."""
        return self.test_accuracy - self.control_test_accuracy


def probe_with_control(X: torch.Tensor, labels, types, test_fraction: float = 0.5, seed: int = 0,
                       alpha: float = 1.0) -> ProbeResult:
    """Train the same probe on the real labels and on control labels (random per type); one random split.

    X (n, d): one vector per example; labels (n,): class ids; types (n,): the word type (or frame)
    of each example, which fixes its control label. The split is random over examples, so a type
    seen in training can come back in the test set: that is what lets the control be memorised.
    """
    labels = _check(X, labels)
    if len(types) != X.shape[0]:
        raise ValueError(f"types must give one type per row of X ({X.shape[0]}), got {len(types)}.")
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be between 0 and 1, got {test_fraction}.")
    n = X.shape[0]
    n_test = round(n * test_fraction)
    if n_test < 1 or n - n_test < 2:
        raise ValueError(f"{n} examples cannot be split into train and test with test_fraction={test_fraction}.")
    g = torch.Generator().manual_seed(seed)
    order = torch.randperm(n, generator=g)
    test, train = order[:n_test], order[n_test:]
    n_classes = int(labels.max()) + 1
    control = control_labels(types, n_classes, seed)
    scores = []
    for y in (labels, control):
        probe = train_probe(X[train], y[train], alpha, n_classes=n_classes)
        scores += [probe_accuracy(probe, X[train], y[train]), probe_accuracy(probe, X[test], y[test])]
    return ProbeResult(*scores)

