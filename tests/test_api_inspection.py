"""The inspection calls that replace code the chapters wrote by hand, each checked against that hand
version (the same numbers): ablating a set of heads (attn.z hooks), stacking a cache over blocks
(torch.stack of cache.pattern(l)), the top (layer, head) pairs of a score table (divmod of a flat
argmax), capture's positions reaching the LM head (logits_to_keep), and the tables the results print.
"""
import dataclasses
import html.parser

import pytest
import torch
import torch.nn.functional as F

from llmlab import assert_same_bits, assert_same_up_to_rounding, forward_depth
from llmlab.config import ModelConfig
from llmlab.hooks import hook_name
from llmlab.inspection import (
    ablate, capture, causal_trace, direct_logit_attribution, hooks, logit_diff, logit_lens, top_heads,
)
from llmlab.model import Transformer
from fakes import CharTokenizer, tiny

TOK = CharTokenizer()
TEXTS = ["the cat sat", "a dog ran home fast", "hi"]


def ids_for(model, T=9, batch=2, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, model.config.vocab_size, (batch, T), generator=g)


def zero_heads_by_hand(heads, positions=None):
    """What chapters 5 and 12 write: one attn.z hook per block that zeroes the chosen heads."""
    by_layer = {}
    for layer, head in heads:
        by_layer.setdefault(layer, []).append(head)

    def zero(heads_here):
        def fn(z):  # (B, T, n_heads, head_dim)
            z = z.clone()
            if positions is None:
                z[:, :, heads_here] = 0.0
            else:
                for p in positions:
                    z[:, p, heads_here] = 0.0
            return z
        return fn
    return {hook_name(layer, "attn.z"): zero(hs) for layer, hs in by_layer.items()}


# ------------------------------------------------------------------ ablate(heads=...)

@pytest.mark.parametrize("preset", ["tiny-llama", "tiny-gemma3", "tiny-gpt2"])
def test_ablating_a_set_of_heads_equals_the_hand_written_hooks(preset):
    model = tiny(preset)
    ids = ids_for(model)
    n = model.config.n_layers
    heads = [(0, 1), (n - 1, 0), (n - 1, 3), (0, 2)]
    with torch.no_grad():
        base = model(ids)
        with hooks(model, zero_heads_by_hand(heads)):
            by_hand = model(ids)
    ablated = ablate(model, None, ids, heads=heads)
    assert torch.equal(ablated, by_hand)
    assert (ablated - base).abs().max() > 1e-3                     # the heads mattered: the check can fail
    # negative layers count from the end; a repeated pair is zeroed once
    assert torch.equal(ablate(model, None, ids, heads=[(0, 1), (-1, 0), (-1, 3), (0, 2), (0, 1)]), by_hand)
    # only at some positions
    with torch.no_grad(), hooks(model, zero_heads_by_hand(heads, positions=[3, 8])):
        at_two = model(ids)
    assert torch.equal(ablate(model, None, ids, heads=heads, positions=[3, -1]), at_two)
    # before position 3 nothing changed, bit for bit: the same shapes run the same kernels, and causal
    # attention gives the later positions weight exactly 0
    assert_same_bits(at_two[:, :3], base[:, :3])


def test_one_head_has_one_meaning_in_both_forms_and_no_heads_is_the_intact_run():
    model = tiny()
    ids = ids_for(model)
    one = ablate(model, None, ids, layer=1, head=2)
    assert torch.equal(one, ablate(model, None, ids, heads=[(1, 2)]))
    assert torch.equal(one, ablate(model, None, ids, layer=1, sublayer="attn", head=2))   # the older spelling
    with torch.no_grad():
        assert torch.equal(ablate(model, None, ids, heads=[]), model(ids))


def test_ablate_returns_the_loss_or_a_metric_computed_as_by_hand():
    model = tiny()
    ids = ids_for(model, T=12)
    heads = [(0, 0), (1, 3)]
    with torch.no_grad(), hooks(model, zero_heads_by_hand(heads)):
        logits = model(ids)
        last = model(ids, logits_to_keep=1)[:, -1]
    # chapter 12's loss: cross-entropy of every next token, kept per position
    by_hand = F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")  # (B, T - 1)
    loss = ablate(model, None, ids, heads=heads, metric="loss")
    assert loss.shape == (2, 11)
    # bit for bit, here and below: ablate runs the same hooks, the same forward on the same shapes and
    # the same cross-entropy (or metric) as the hand version
    assert_same_bits(loss, by_hand)
    # chapter 5's metric: log-probabilities at the last position, the head run there alone
    logp = ablate(model, None, ids, heads=heads, metric=lambda lg: lg.log_softmax(-1))
    assert_same_bits(logp, last.log_softmax(-1))
    # against the head run on every position: the final norm and head (d_model terms each) on other
    # shapes, then a log-softmax over the vocabulary
    assert_same_up_to_rounding(logp, logits[:, -1].log_softmax(-1),
                               depth=2 * model.config.d_model + model.config.vocab_size)
    diff = ablate(model, None, ids, heads=heads, metric=logit_diff(5, 9))
    assert_same_bits(diff, last[:, 5] - last[:, 9])


def test_the_loss_of_a_padded_batch_is_nan_at_padding_and_each_row_alone_elsewhere():
    model = tiny()
    loss = ablate(model, TOK, TEXTS, heads=[(1, 1)], metric="loss")   # (3, T - 1), left padded
    T = max(len(t) for t in TEXTS)
    assert loss.shape == (3, T - 1)
    for row, text in enumerate(TEXTS):
        alone = ablate(model, TOK, text, heads=[(1, 1)], metric="loss")[0]   # (len - 1,)
        pad = T - len(text)
        assert loss[row, :pad].isnan().all() and not loss[row, pad:].isnan().any()
        # a padded batch against one row: the whole model on other shapes, then a log-sum-exp over the vocabulary
        assert_same_up_to_rounding(loss[row, pad:], alone,
                                   depth=forward_depth(model.config, T) + model.config.vocab_size)


def test_ablate_refuses_unclear_requests():
    model = tiny()
    ids = ids_for(model)
    with pytest.raises(ValueError, match="either heads="):
        ablate(model, None, ids, layer=1, heads=[(1, 2)])
    with pytest.raises(TypeError, match=r"heads=\[\(1, 2\)\]"):
        ablate(model, None, ids, heads=(1, 2))                   # one pair without its list
    with pytest.raises(TypeError, match="pairs"):
        ablate(model, None, ids, heads=[1, 2])
    with pytest.raises(ValueError, match="head must be in 0..3"):
        ablate(model, None, ids, heads=[(0, 4)])
    with pytest.raises(IndexError, match="layer 2 does not exist"):
        ablate(model, None, ids, heads=[(2, 0)])
    with pytest.raises(ValueError, match="Say what to ablate"):
        ablate(model, None, ids)
    with pytest.raises(ValueError, match="sublayer='mlp' does not go"):
        ablate(model, None, ids, heads=[(0, 0)], sublayer="mlp")
    with pytest.raises(ValueError, match="metric must be None"):
        ablate(model, None, ids, heads=[(0, 0)], metric="accuracy")


# ------------------------------------------------------------------ cache.stack and top_heads

def test_stack_equals_the_hand_stack_for_patterns_and_other_points():
    model = tiny("tiny-gemma3")
    L = model.config.n_layers
    _, cache = capture(model, None, ids_for(model))
    hand = torch.stack([cache.pattern(layer) for layer in range(L)])   # what chapters 5, 7 and 12 write
    assert torch.equal(cache.stack("pattern"), hand)
    assert torch.equal(cache.stack("attn.pattern"), hand)
    assert torch.equal(cache.stack("pattern", dim=1), torch.stack([cache.pattern(l) for l in range(L)], dim=1))
    assert torch.equal(cache.stack("resid_post"), torch.stack([cache.resid(l) for l in range(L)]))
    assert torch.equal(cache.stack("z"), torch.stack([cache[hook_name(l, "attn.z")] for l in range(L)]))
    assert torch.equal(cache.stack("mlp.post", layers=[-1, 0]),
                       torch.stack([cache[hook_name(L - 1, "mlp.post")], cache[hook_name(0, "mlp.post")]]))
    assert cache.stack("pattern").shape == (L, 2, model.config.n_heads, 9, 9)


def test_stack_says_which_blocks_are_missing():
    model = tiny("tiny-gemma3")
    _, cache = capture(model, None, ids_for(model), names=["*hook_pattern"], layers=[0, 2])
    with pytest.raises(KeyError, match=r"block\(s\) \[1\]"):
        cache.stack("pattern")
    assert cache.stack("pattern", layers=[0, 2]).shape[0] == 2
    with pytest.raises(KeyError, match="not captured"):
        cache.stack("resid_post", layers=[0])


def test_top_heads_equals_divmod_of_the_flat_argmax_and_topk():
    g = torch.Generator().manual_seed(0)
    scores = torch.rand(6, 9, generator=g)                 # (layers, heads), no ties
    n_heads = scores.shape[1]
    pairs, values = top_heads(scores, k=5)
    assert pairs == [divmod(int(i), n_heads) for i in scores.flatten().topk(5).indices]   # chapters 5 and 16
    assert values.tolist() == scores.flatten().topk(5).values.tolist()
    assert [scores[l, h].item() for l, h in pairs] == values.tolist()
    (best,), _ = top_heads(scores)
    assert best == divmod(int(scores.argmax()), n_heads)                                    # chapter 12
    (least,), _ = top_heads(scores.abs(), largest=False)
    assert least == divmod(int(scores.abs().argmin()), n_heads)                             # chapter 16's control
    ties = torch.tensor([[0.0, 2.0, 1.0], [2.0, 0.0, 2.0]])
    assert top_heads(ties, k=3)[0] == [(0, 1), (1, 0), (1, 2)]            # equal scores in table order
    assert top_heads(ties)[0][0] == divmod(int(ties.argmax()), 3)
    assert top_heads([[1, 5], [3, 2]], k=2)[0] == [(0, 1), (1, 0)]          # a nested list works too


def test_top_heads_refuses_what_has_no_ranking():
    with pytest.raises(ValueError, match=r"2-D table .* got shape \(2, 3, 4\)"):
        top_heads(torch.zeros(2, 3, 4))
    with pytest.raises(ValueError, match="k must be in 1..6"):
        top_heads(torch.zeros(2, 3), k=7)
    with pytest.raises(ValueError, match=r"NaN at \[\[1, 0\]\]"):
        top_heads(torch.tensor([[0.0, 1.0, 2.0], [float("nan"), 0.0, 0.0]]))


def test_heads_found_by_top_heads_go_straight_into_ablate():
    model = tiny()
    ids = ids_for(model)
    _, cache = capture(model, None, ids, names=["*hook_pattern"])
    to_first = cache.stack("pattern")[:, :, :, -1, 0].mean(1)              # (L, H): last query -> first key
    heads, _ = top_heads(to_first, k=2)
    with torch.no_grad(), hooks(model, zero_heads_by_hand(heads)):
        by_hand = model(ids)
    assert torch.equal(ablate(model, None, ids, heads=heads), by_hand)


# ------------------------------------------------------------------ capture: empty selection, positions

def test_capture_refuses_a_selection_that_keeps_nothing():
    model = tiny()   # two blocks: block 1's names exist, but layers=[0] leaves none of them
    with pytest.raises(ValueError, match=r"names=\['blocks.1.hook_resid_post'\] with layers=\[0\] selects no hook"):
        capture(model, None, ids_for(model), names=["blocks.1.hook_resid_post"], layers=[0])
    with pytest.raises(KeyError, match="No hook point matches"):   # an unknown name keeps its own message
        capture(model, None, ids_for(model), names=["blocks.9.hook_resid_post"])
    _, cache = capture(model, None, ids_for(model), names=["blocks.1.hook_resid_post", "hook_embed"], layers=[0])
    assert list(cache) == ["hook_embed"]   # a selection that keeps something runs as before


@pytest.mark.parametrize("positions", [[-1], [2, 5], [8, 0, 3, 1, 2, 4, 5, 6, 7]])
def test_capture_positions_run_the_lm_head_only_there(positions):
    model = tiny("tiny-gemma3")
    ids = ids_for(model)
    seen = []
    handle = model.lm_head.register_forward_hook(lambda module, inputs, output: seen.append(inputs[0].shape[1]))
    try:
        logits, cache = capture(model, None, ids, positions=positions)
    finally:
        handle.remove()
    assert seen == [len(positions)]                   # the head saw the kept positions only
    full_logits, full = capture(model, None, ids)
    kept = [p % 9 for p in positions]
    # both captures run the blocks on the same eager path and shapes; only the final norm (a mean over
    # d_model) and the LM head (d_model products) run on the kept positions alone, other shapes
    d = model.config.d_model
    assert_same_up_to_rounding(logits, full_logits[:, kept], depth=2 * d)
    assert_same_up_to_rounding(cache["hook_final_norm"], full["hook_final_norm"][:, kept], depth=d)
    assert_same_up_to_rounding(cache["hook_logits"], full["hook_logits"][:, kept], depth=2 * d)
    # bit for bit before the head: the same forward, positions= only selects what is kept
    assert_same_bits(cache[hook_name(1, "resid_post")], full[hook_name(1, "resid_post")][:, kept])
    assert_same_bits(cache[hook_name(2, "attn.pattern")], full[hook_name(2, "attn.pattern")][:, :, kept])


# ------------------------------------------------------------------ results print as tables

class Cells(html.parser.HTMLParser):
    """The rows of an HTML table, each a list of its cells' text (th and td)."""

    def __init__(self, text):
        super().__init__()
        self.rows, self.tags, self.cell = [], [], None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "tr":
            self.rows.append([])
        elif tag in ("th", "td"):
            self.cell = ""

    def handle_endtag(self, tag):
        if tag in ("th", "td"):
            self.rows[-1].append(self.cell)
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data


def test_a_lens_prints_a_short_table_in_a_repl_and_all_of_it_with_print():
    torch.manual_seed(0)   # 30 blocks, as many as SmolLM2-135M has
    config = dataclasses.replace(ModelConfig.preset("tiny-llama"), n_layers=30, layer_types=("full",) * 30)
    model = Transformer(config).eval()
    text = "the quick brown fox jumps over the lazy dog again and again"
    lens = logit_lens(model, TOK, text, target="e")
    short, full = repr(lens), str(lens)
    rows = len(lens.layer_labels)
    assert "tensor(" not in short and len(short) < 300 * 8           # not the dataclass dump of every tensor
    assert len(short.splitlines()) == 2 + lens.brief_rows + 2        # title, header, rows, "⋮", the hint
    assert "block \\ token" in short and "embed" in short and f"block {rows - 2}" in short
    brief_header = [c.strip() for c in short.splitlines()[1][len("block \\ token"):].split("  ") if c.strip()]
    assert brief_header == ["…"] + [repr(t) for t in lens.tokens[-lens.brief_columns:]]   # the last tokens
    assert "print() shows all 31 rows and 59 columns" in short
    lines = full.splitlines()
    assert len(lines) == 2 + rows
    assert lines[1].split("  ", 1)[0].strip() == "block \\ token"
    assert [c.strip() for c in lines[1][len("block \\ token"):].split("  ") if c.strip()] == [repr(t) for t in lens.tokens]
    assert [line[:len("block \\ token")].strip() for line in lines[2:]] == lens.layer_labels
    top = f"{lens.top_tokens[-1][-1][0]!r} {float(lens.top_probs[-1, -1, 0]):.2f}"
    assert lines[-1].endswith(top)


def test_a_lens_draws_an_html_table_with_the_tokens_as_header():
    model = tiny()
    lens = logit_lens(model, TOK, "hi there", target="e")
    page = lens._repr_html_()
    assert page.count("<table") == 1 and "<thead>" in page
    rows = Cells(page).rows
    assert rows[0] == ["block \\ token", "'h'", "'i'", "' '", "'t'", "'h'", "'e'", "'r'", "'e'"]
    assert [row[0] for row in rows[1:]] == ["embed", "block 0", "block 1"]
    assert rows[-1][-1] == f"{lens.top_tokens[-1][-1][0]!r} {float(lens.top_probs[-1, -1, 0]):.2f}"


def test_traces_and_attributions_print_tables_too():
    model = tiny()
    trace = causal_trace(model, TOK, "hello there", 5, noise_positions=[1, 2])
    short, full = repr(trace), str(trace)
    assert "tensor(" not in short and "clean run" in short and "block 1" in short and len(short.splitlines()) == 5
    header = full.splitlines()[1][len("block \\ token"):]
    assert [c.strip() for c in header.split("  ") if c.strip()] == [repr(t) for t in trace.tokens]
    assert full.splitlines()[-1].split()[-1] == f"{float(trace.effect[-1, -1]):.3g}"
    rows = Cells(trace._repr_html_()).rows
    assert rows[0][1:] == [repr(t) for t in trace.tokens] and [r[0] for r in rows[1:]] == ["block 0", "block 1"]

    dla = direct_logit_attribution(model, TOK, "hello there", 5)
    rows = Cells(dla._repr_html_()).rows
    assert rows[0] == ["block", "attn", "mlp", "attn + mlp"] and [r[0] for r in rows[1:]] == ["embed", "block 0", "block 1"]
    # block 0's attention, as printed with 3 decimals: off by at most half of 1e-3 (display rounding, not
    # float rounding), so 1e-3 is that bound with room
    assert float(rows[2][1]) == pytest.approx(float(dla.contributions[1]), abs=1e-3)
    assert "tensor(" not in repr(dla) and "block 1" in repr(dla)


def test_the_lens_names_its_rows_as_rows():
    model = tiny()
    lens = logit_lens(model, TOK, "hello there")
    top = lens.top_tokens[-1][-1][0]
    row = lens.first_row(top)
    assert lens.top_tokens[row][-1][0] == top and all(lens.top_tokens[r][-1][0] != top for r in range(row))
    assert lens.first_row("no such token") is None
    assert not hasattr(lens, "first_layer")                       # one name, the one that says what it returns
    assert "row" in type(lens).__doc__ and "first_row" in type(lens).__doc__
