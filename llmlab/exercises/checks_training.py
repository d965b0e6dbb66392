"""Checks for the training exercises (ch. 12): the next-token loss with shifted targets."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from llmlab.exercises.compare import expect_tensor
from llmlab.exercises.core import Learner, generator


def check_cross_entropy_shifted(fn: Learner) -> str:
    """cross_entropy_shifted(logits, ids) -> the mean next-token loss (a scalar): position t predicts
    token t + 1, so logits[:, :-1] are scored against ids[:, 1:]. logits (B, T, V), ids (B, T)."""
    g = generator(61)
    fn.error_hints = [("Expected input batch_size", "flatten both to (B*(T-1), V) and (B*(T-1),) after shifting: "
                       "logits[:, :-1].reshape(-1, V) and ids[:, 1:].reshape(-1).")]
    for B, T, V in [(1, 5, 7), (2, 6, 11), (3, 4, 5)]:
        logits = torch.randn(B, T, V, generator=g) * 2
        ids = torch.randint(0, V, (B, T), generator=g)
        got = fn(logits, ids, names=("logits", "ids"))
        flat = lambda lg, tg: F.cross_entropy(lg.reshape(-1, V), tg.reshape(-1))  # noqa: E731
        expected = flat(logits[:, :-1], ids[:, 1:])
        picked = logits[:, :-1].gather(-1, ids[:, 1:, None])  # (B, T-1, 1): the raw logit of each target
        expect_tensor(fn, got, expected, atol=1e-5, mistakes=[
            ("the targets are not shifted: position t must predict the NEXT token, so compare logits[:, :-1] "
             "with ids[:, 1:]. Scoring logits[:, t] against ids[:, t] asks the model to copy its input.",
             flat(logits, ids)),
            ("shifted the wrong way: logits[:, :-1] go with ids[:, 1:] (position t predicts token t + 1), "
             "not logits[:, 1:] with ids[:, :-1].", flat(logits[:, 1:], ids[:, :-1])),
            ("you summed the losses; the exercise asks for the MEAN over all predicted positions.",
             F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1), reduction="sum")),
            ("the log-softmax is missing: the loss is -log softmax(logits)[target], not -logits[target].",
             -picked.mean()),
            ("you averaged per sequence over T positions instead of T - 1 predicted ones.",
             F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1), reduction="sum") / (B * T)),
        ])
    return "the mean next-token loss with shifted targets equals F.cross_entropy on 3 hidden batches."
