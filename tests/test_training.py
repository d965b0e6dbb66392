"""llmlab.training against torch's own references: the same numbers (the same bits where the operations
are the same, else up to float32 rounding), and a run that resumes from a checkpoint bit for bit."""
import io

import numpy as np
import pytest
import torch

import llmlab
from llmlab import ModelConfig, Transformer
from llmlab.training import (AdamW, clip_grad_norm_, cosine_schedule, cross_entropy, get_batch, load_checkpoint,
                             save_checkpoint, train)


def test_cross_entropy_is_torch_s_and_stable_for_large_logits():
    torch.manual_seed(0)
    logits, targets = torch.randn(4, 7, 50) * 5, torch.randint(0, 50, (4, 7))
    ours, theirs = cross_entropy(logits, targets), torch.nn.functional.cross_entropy(logits.view(-1, 50), targets.view(-1))
    # a sum of 50 exponentials, then a mean over 28 rows: depth 50 + 28, at the scale of the logits
    llmlab.assert_same_up_to_rounding(ours, theirs, depth=50 + 28, scale=float(logits.abs().max()))
    huge = torch.tensor([[1e4, 0.0, -1e4]])
    assert cross_entropy(huge, torch.tensor([0])).item() == 0.0              # exp(0) / (exp(0) + 0 + 0)
    assert cross_entropy(huge, torch.tensor([1])).item() == 1e4
    naive = -torch.log(torch.exp(huge[0]) / torch.exp(huge[0]).sum())[1]      # without the shift: exp(1e4) = inf
    assert torch.isinf(naive)                                                 # so -log(1 / inf) = inf, not 1e4


def test_cross_entropy_says_what_is_wrong():
    with pytest.raises(ValueError, match=r"need targets of shape \(2,\)"):
        cross_entropy(torch.zeros(2, 5), torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="ids from 0 to 4"):
        cross_entropy(torch.zeros(2, 5), torch.tensor([0, 5]))
    with pytest.raises(TypeError, match="integer ids"):
        cross_entropy(torch.zeros(2, 5), torch.zeros(2))


def model_and_batches(seed=0):
    torch.manual_seed(seed)
    model = Transformer(ModelConfig.preset("tiny-llama"))
    batches = [torch.randint(0, model.config.vocab_size, (2, 9)) for _ in range(6)]
    return model, batches


def run(optimizer_class, steps=6, **options):
    model, batches = model_and_batches()
    opt = optimizer_class(model.parameters(), lr=3e-3, weight_decay=0.1, **options)
    for ids in batches[:steps]:
        loss = torch.nn.functional.cross_entropy(model(ids[:, :-1]).flatten(0, 1), ids[:, 1:].flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model, opt


def test_adamw_takes_the_same_steps_as_torch_s():
    ours, ours_opt = run(AdamW)
    theirs, theirs_opt = run(torch.optim.AdamW, foreach=False)
    for (name, a), b in zip(ours.named_parameters(), theirs.parameters()):
        llmlab.assert_same_bits(a, b)                 # the same operations in the same order, on one machine
    state = ours_opt.state[next(ours.parameters())]
    assert state["step"].item() == 6 and set(state) == {"step", "exp_avg", "exp_avg_sq"}


def test_adamw_bias_correction_makes_the_first_step_lr_in_size():
    p = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
    p.grad = torch.tensor([1e-3, -5.0])
    AdamW([p], lr=0.1, weight_decay=0.0).step()
    # m / sqrt(v) after bias correction is g / |g|: every weight moves by lr against its gradient's sign
    llmlab.assert_same_up_to_rounding(p.detach(), torch.tensor([0.9, -1.9]), depth=4)


def test_cosine_schedule_warms_up_decays_and_stays():
    lrs = [cosine_schedule(t, 1.0, 0.1, warmup=4, cycle=12) for t in range(16)]
    assert lrs[:5] == [0.0, 0.25, 0.5, 0.75, 1.0]                 # linear warm-up, max_lr reached at `warmup`
    assert all(a > b for a, b in zip(lrs[4:12], lrs[5:13]))       # then down, every step
    assert lrs[8] == pytest.approx(0.55, abs=1e-12) and lrs[12:] == [0.1] * 4   # halfway, then min_lr
    with pytest.raises(ValueError, match="warmup < cycle"):
        cosine_schedule(0, 1.0, 0.1, warmup=5, cycle=5)


def test_clip_grad_norm_is_torch_s():
    torch.manual_seed(1)
    a, b = [torch.nn.Parameter(torch.randn(5, 3)) for _ in range(2)], None
    grads = [torch.randn(5, 3) * 4 for _ in range(2)]
    b = [torch.nn.Parameter(p.detach().clone()) for p in a]
    for p, q, g in zip(a, b, grads):
        p.grad, q.grad = g.clone(), g.clone()
    ours, theirs = clip_grad_norm_(a, 1.0), torch.nn.utils.clip_grad_norm_(b, 1.0)
    llmlab.assert_same_up_to_rounding(ours, theirs, depth=30)
    for p, q in zip(a, b):
        llmlab.assert_same_up_to_rounding(p.grad, q.grad, depth=30)
    total = torch.linalg.vector_norm(torch.cat([p.grad.flatten() for p in a]))
    assert abs(total.item() - 1.0) < 1e-5 * 30 ** 0.5               # clipped to max_norm (eps 1e-6 aside)
    small = torch.nn.Parameter(torch.zeros(3))
    small.grad = torch.tensor([0.1, 0.0, 0.0])
    clip_grad_norm_([small], 1.0)
    assert small.grad.tolist() == [pytest.approx(0.1)] + [0.0, 0.0]     # below max_norm: unchanged


def test_get_batch_reads_windows_of_a_memmap(tmp_path):
    ids = np.arange(1000, dtype=np.uint16)
    path = tmp_path / "ids.bin"
    ids.tofile(path)
    tokens = np.memmap(path, dtype=np.uint16, mode="r")
    x, y = get_batch(tokens, 8, 16, "cpu", torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (8, 16) and x.dtype == torch.int64
    assert torch.equal(y, x + 1) and torch.equal(x[:, 1:], x[:, :-1] + 1)     # windows of the array, shifted by one
    starts = {int(row[0]) for _ in range(50) for row in get_batch(tokens, 8, 16)[0]}
    assert max(starts) <= 1000 - 17 and len(starts) > 100                     # every window fits, and they vary
    with pytest.raises(ValueError, match="too few"):
        get_batch(np.arange(10), 2, 10)


def test_training_resumes_from_a_checkpoint_bit_for_bit():
    tokens = np.random.default_rng(0).integers(0, 128, 5000)

    def fresh(seed):
        torch.manual_seed(seed)
        model = Transformer(ModelConfig.preset("tiny-llama"))
        return model, AdamW(model.parameters(), lr=3e-3, weight_decay=0.1), torch.Generator().manual_seed(7)

    options = dict(steps=8, batch_size=4, context_length=16, max_lr=3e-3, warmup=2, show_progress=False)
    straight, opt, gen = fresh(3)
    losses = train(straight, tokens, optimizer=opt, generator=gen, **options)
    assert losses[-1] < losses[0]

    first, opt, gen = fresh(3)
    head = train(first, tokens, optimizer=opt, generator=gen, until=3, **options)
    saved = io.BytesIO()
    save_checkpoint(first, opt, 3, saved, generator=gen)
    saved.seek(0)
    second, opt, gen = fresh(4)                                   # another start, overwritten by the checkpoint
    start = load_checkpoint(saved, second, opt, generator=gen)
    tail = train(second, tokens, optimizer=opt, generator=gen, start=start, **options)
    assert start == 3 and head + tail == losses                   # the same losses, to the last bit
    for a, b in zip(straight.parameters(), second.parameters()):
        llmlab.assert_same_bits(a, b)


def test_load_checkpoint_says_what_is_missing(tmp_path):
    torch.save({"model": {}}, tmp_path / "x.pt")
    model, _ = model_and_batches()
    with pytest.raises(ValueError, match="not a training checkpoint.*iteration"):
        load_checkpoint(tmp_path / "x.pt", model, AdamW(model.parameters()))


def test_encode_iterable_gives_encode_s_ids_whatever_the_cuts(tmp_path):
    from llmlab.tokenization import train_bpe

    text = ("Hello  world!\n\nThe year 2024 had 366 days.<|endoftext|>  Tabs\tand   spaces \n"
            "天气很好，我们去公园吧。 It's   done<|endoftext|>\n\n\n  end  ") * 3
    tok = train_bpe(text, 256 + 40, special_tokens=["<|endoftext|>"])
    expected = tok.encode(text, add_special_tokens=False)
    rng = np.random.default_rng(0)
    for _ in range(30):                                      # random cuts, some inside a special token
        cuts = sorted(rng.choice(len(text), size=int(rng.integers(1, 40)), replace=False).tolist())
        parts = [text[a:b] for a, b in zip([0] + cuts, cuts + [len(text)])]
        assert list(tok.encode_iterable(parts)) == expected, parts
    path = tmp_path / "corpus.txt"
    path.write_text(text, encoding="utf-8")
    with open(path, encoding="utf-8") as lines:              # a file yields its lines
        assert list(tok.encode_iterable(lines)) == expected
    with pytest.raises(TypeError, match="for one string use encode"):
        list(tok.encode_iterable(text))


def test_encode_iterable_on_smollm2_s_tokenizer():
    """The real tokenizer's pattern (contractions, letters, digits, the whitespace rule that looks ahead)."""
    _, tok = llmlab.load("smollm2-135m")
    text = (llmlab.__doc__ or "") * 3 + " 天气很好 123456 <|im_start|>user\n hi<|im_end|>\n\n\n  x   \n\nEnd."
    expected = tok.encode(text, add_special_tokens=False)
    rng = np.random.default_rng(1)
    for _ in range(20):
        cuts = sorted(set(rng.integers(1, len(text), int(rng.integers(5, 500))).tolist()))
        parts = [text[a:b] for a, b in zip([0] + cuts, cuts + [len(text)])]
        assert list(tok.encode_iterable(parts)) == expected


def reference_merges(text: str, n: int, pattern: str) -> list:
    """GPT-2's and CS336's rule, written the plain way: pre-split, count pairs of bytes within chunks, merge
    the most frequent pair, ties to the lexicographically greatest (left bytes, right bytes)."""
    from collections import Counter

    from llmlab.tokenization.patterns import pre_split, resolve_patterns

    words = Counter(tuple(bytes([b]) for b in chunk.encode("utf-8")) for chunk in pre_split(text, resolve_patterns(pattern)))
    merges = []
    for _ in range(n):
        counts = Counter()
        for word, freq in words.items():
            for pair in zip(word, word[1:]):
                counts[pair] += freq
        if not counts:
            break
        best = max(counts, key=lambda pair: (counts[pair], pair))
        merges.append(best)
        merged = Counter()
        for word, freq in words.items():
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(word[i] + word[i + 1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            merged[tuple(out)] += freq
        words = merged
    return merges


def test_the_greatest_bytes_tie_break_reproduces_gpt2_style_merges():
    from llmlab.tokenization import train_bpe
    from llmlab.tokenization.train import train_bpe_naive

    text = "low lower lowest newer wider ab ba cd dc xy yx hug pug pun bun hugs " * 4 + "the cat sat on the mat"
    expected = reference_merges(text, 40, "gpt2")
    ours = train_bpe(text, 256 + 40, pattern="gpt2", tie_break="greatest_bytes")
    learned = [(ours.token_bytes[s.pair[0]], ours.token_bytes[s.pair[1]]) for s in ours.merge_history]
    assert learned == expected
    naive = train_bpe_naive(text, 256 + 40, pattern="gpt2", tie_break="greatest_bytes")
    assert [s.pair for s in naive.merge_history] == [s.pair for s in ours.merge_history]
    default = train_bpe(text, 256 + 40, pattern="gpt2")             # llmlab's own rule: the smallest pair of ids
    assert [s.pair for s in default.merge_history] != [s.pair for s in ours.merge_history]
    with pytest.raises(ValueError, match="tie_break must be one of"):
        train_bpe(text, 300, tie_break="largest")
