"""Checks for the training exercises (ch. 12): the next-token loss with shifted targets, a cross-entropy that
stays finite for large logits, and the warm-up + cosine learning-rate schedule."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from llmlab.exercises.compare import expect_tensor
from llmlab.exercises.core import Learner, generator
from llmlab.exercises.results import Mistake
from llmlab.exercises.messages import say


def check_cross_entropy_shifted(fn: Learner) -> str:
    """cross_entropy_shifted(logits, ids) -> the mean next-token loss (a scalar): position t predicts
    token t + 1, so logits[:, :-1] are scored against ids[:, 1:]. logits (B, T, V), ids (B, T)."""
    g = generator(61)
    fn.error_hints = [("Expected input batch_size", say("flatten both to (B*(T-1), V) and (B*(T-1),) after shifting: "
                       "logits[:, :-1].reshape(-1, V) and ids[:, 1:].reshape(-1)."))]
    for B, T, V in [(1, 5, 7), (2, 6, 11), (3, 4, 5)]:
        logits = torch.randn(B, T, V, generator=g) * 2
        ids = torch.randint(0, V, (B, T), generator=g)
        got = fn(logits, ids, names=("logits", "ids"))
        flat = lambda lg, tg: F.cross_entropy(lg.reshape(-1, V), tg.reshape(-1))  # noqa: E731
        expected = flat(logits[:, :-1], ids[:, 1:])
        picked = logits[:, :-1].gather(-1, ids[:, 1:, None])  # (B, T-1, 1): the raw logit of each target
        expect_tensor(fn, got, expected, atol=1e-5, mistakes=[
            (say("the targets are not shifted: position t must predict the NEXT token, so compare logits[:, :-1] "
             "with ids[:, 1:]. Scoring logits[:, t] against ids[:, t] asks the model to copy its input."),
             flat(logits, ids)),
            (say("shifted the wrong way: logits[:, :-1] go with ids[:, 1:] (position t predicts token t + 1), "
             "not logits[:, 1:] with ids[:, :-1]."), flat(logits[:, 1:], ids[:, :-1])),
            (say("you summed the losses; the exercise asks for the MEAN over all predicted positions."),
             F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1), reduction="sum")),
            (say("the log-softmax is missing: the loss is -log softmax(logits)[target], not -logits[target]."),
             -picked.mean()),
            (say("you averaged per sequence over T positions instead of T - 1 predicted ones."),
             F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1), reduction="sum") / (B * T)),
        ])
    return say("the mean next-token loss with shifted targets equals F.cross_entropy on 3 hidden batches.")


def _schedule(it, max_lr, min_lr, warmup, cycle, shift=0, decay_past=False, whole_run=False):
    """The warm-up + cosine schedule, and the mistakes the check names (a shifted warm-up, a cosine that
    goes on past the cycle, a cosine over the whole run including the warm-up)."""
    if it < warmup:
        return (it + shift) / warmup * max_lr
    if it <= cycle or decay_past:
        start, span = (0, cycle) if whole_run else (warmup, cycle - warmup)
        return min_lr + 0.5 * (1 + math.cos(math.pi * (it - start) / span)) * (max_lr - min_lr)
    return min_lr


def check_cosine_schedule(fn: Learner) -> str:
    """cosine_schedule(it, max_lr, min_lr, warmup, cycle) -> the learning rate at iteration it: it / warmup *
    max_lr during the warm-up, then half a cosine from max_lr (at it = warmup) down to min_lr (at it = cycle),
    then min_lr."""
    for max_lr, min_lr, warmup, cycle in [(1.0, 0.1, 4, 12), (3e-3, 3e-4, 10, 50)]:
        its = list(range(0, cycle + 6))
        got = [fn(it, max_lr, min_lr, warmup, cycle, names=("it", "max_lr", "min_lr", "warmup", "cycle")) for it in its]
        if not all(isinstance(v, (int, float, torch.Tensor)) and not isinstance(v, bool) for v in got):
            bad = next(v for v in got if not isinstance(v, (int, float, torch.Tensor)) or isinstance(v, bool))
            raise Mistake(say("{a} returned {b} ({c}); expected a number, the learning rate.", a=fn.last_call,
                              b=type(bad).__name__, c=repr(bad)))
        got = torch.tensor([float(v) for v in got], dtype=torch.float64)
        rate = lambda **kw: torch.tensor([_schedule(it, max_lr, min_lr, warmup, cycle, **kw) for it in its],  # noqa: E731
                                         dtype=torch.float64)
        what = say("the rates for it = 0 .. {a}, warmup = {b}, cycle = {c}", a=its[-1], b=warmup, c=cycle)
        expect_tensor(fn, got, rate(), what=what,
                      atol=1e-9 * max_lr, rtol=1e-9, mistakes=[
            (say("the warm-up is off by one: at it = 0 the rate is 0, and max_lr is reached at it = warmup "
             "(it / warmup * max_lr), not at it = warmup - 1."), rate(shift=1)),
            (say("after the cycle the rate must stay at min_lr; your cosine goes on and climbs back up."), rate(decay_past=True)),
            (say("the cosine starts after the warm-up: progress is (it - warmup) / (cycle - warmup), so the rate is "
             "max_lr at it = warmup."), rate(whole_run=True)),
        ])
    return say("the warm-up, the cosine decay and the floor after the cycle are right on 2 hidden schedules.")


def check_stable_cross_entropy(fn: Learner) -> str:
    """stable_cross_entropy(logits, targets) -> the mean of -log softmax(logits)[target] over the rows:
    logits (N, V), targets (N,). Must stay finite for logits in the thousands."""
    g = generator(62)
    for N, V, size in [(4, 7, 2.0), (6, 11, 5.0), (5, 9, 1000.0)]:
        logits = torch.randn(N, V, generator=g) * size
        targets = torch.randint(0, V, (N,), generator=g)
        got = fn(logits, targets, names=("logits", "targets"))
        picked = logits.gather(-1, targets[:, None])[:, 0]                     # (N,): each target's logit
        expect_tensor(fn, got, F.cross_entropy(logits, targets), atol=1e-5 * max(1.0, size), nonfinite_hint=(
            say("exp() overflowed on logits in the thousands: subtract each row's max before exp. Softmax does not "
            "change when every logit of a row moves by the same amount, and exp(0) = 1 cannot overflow.")), mistakes=[
            (say("you summed over the rows; the loss is the MEAN of -log p(target)."),
             F.cross_entropy(logits, targets, reduction="sum")),
            (say("the log-sum-exp is missing: the loss is logsumexp(row) - row[target], not -row[target]."), -picked.mean()),
            (say("the sign is flipped: the loss is -log p(target), a positive number."), -F.cross_entropy(logits, targets)),
        ])
    return say("the mean cross-entropy equals F.cross_entropy on 3 hidden batches, logits in the thousands included.")
