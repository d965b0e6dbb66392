"""Chinese feedback for check(): a table of (English template, Chinese template) pairs.

The checks build their messages in English (checks_*.py, compare.py, core.py); this module
translates the finished message without touching how it was built. Each English template is the
text of one message piece as the source writes it, with its {placeholders}; it is compiled into a
regular expression whose placeholders are named groups, and the Chinese
template puts the captured text back (identifiers, code, shapes and numbers stay as they are).
Messages are often several pieces joined ("... returned wrong values." + "\\nHint: " + a hint), so
every pattern is applied wherever it matches, longest first; a piece with no pattern stays English.

>>> translate("softmax(x) returned shape (3,); expected shape (2, 3).")
'softmax(x) 返回的形状是 (3,)，应为 (2, 3)。'
"""
from __future__ import annotations

import re
from functools import lru_cache

from llmlab.exercises.messages_zh_checks import LATER_PAIRS

_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def _compile(english: str) -> re.Pattern:
    parts, seen, pos = [], set(), 0
    for m in _PLACEHOLDER.finditer(english):
        parts.append(re.escape(english[pos:m.start()]))
        name = m.group(1)
        last = m.end() == len(english)
        if name in seen:
            parts.append(f"(?P={name})")
        elif name.startswith("shape"):  # a shape such as (2, 3)
            parts.append(f"(?P<{name}>\\([0-9, ]*\\))")
        elif name.startswith("word"):  # one name: a dtype, a class
            parts.append(f"(?P<{name}>[\\w.]+)")
        elif name.startswith("num"):  # a whole number
            parts.append(f"(?P<{name}>\\d+)")
        elif last:  # a placeholder that ends the template takes the rest of the line
            parts.append(f"(?P<{name}>.*)")
        else:  # the shortest text up to the literal that follows, across lines (a value's repr may have several)
            parts.append(f"(?P<{name}>(?s:.*?))")
        seen.add(name)
        pos = m.end()
    parts.append(re.escape(english[pos:]))
    # whole English words only ("got 0.2." must not end at the "0." of the number); a piece already in
    # Chinese may follow directly
    start = "(?<![A-Za-z0-9_])" if english[:1].isalnum() else ""
    end = "(?![A-Za-z0-9_.])" if english[-1:] in ".,;:)" or english[-1:].isalnum() else ""
    return re.compile(start + "".join(parts) + end)


def _literal(english: str) -> str:
    return _PLACEHOLDER.sub("", english)


@lru_cache(maxsize=1)
def _table() -> list[tuple[re.Pattern, str]]:
    pairs = sorted(PAIRS + LATER_PAIRS, key=lambda p: -len(_literal(p[0])))
    table = []
    for english, chinese in pairs:
        missing = set(_PLACEHOLDER.findall(chinese)) - set(_PLACEHOLDER.findall(english))
        if missing:
            raise ValueError(f"the Chinese template {chinese!r} uses {sorted(missing)}, which {english!r} lacks")
        table.append((_compile(english), chinese))
    return table


def translate(message: str) -> str:
    """The Chinese version of a check's English message (pieces without a pattern stay English)."""
    for pattern, chinese in _table():
        message = pattern.sub(lambda m: _PLACEHOLDER.sub(lambda p: m.group(p.group(1)), chinese), message)
    return message


# (English template, Chinese template). Placeholder names are free; each Chinese template uses the
# names of its English one; a name that starts with "shape" matches a shape such as (2, 3), "word" one
# name, "num" a whole number, any other name any text on the line. Terms follow the glossary's Chinese
# column. The framework's messages and the attention and block checks' are here, the other checks'
# in messages_zh_checks.py.
PAIRS: list[tuple[str, str]] = [
    # the framework: __init__.py, core.py, compare.py
    ("There is no exercise {x}. Known ids: {known}.", "没有 id 为 {x} 的练习。已有的 id：{known}。"),
    ("check({x}, ...) needs your function itself, e.g. check({y}, {name}), but got {t}. Pass the function's name "
     "without calling it (no parentheses).",
     "check({x}, ...) 需要的是函数本身，例如 check({y}, {name})，收到的却是 {t}。请传入函数名，不要调用它（不加括号）。"),
    ("\n({right} of {n} comparisons right)", "\n（{n} 次比较中对了 {right} 次）"),
    ("not attempted yet: the function still raises NotImplementedError. Replace the `raise NotImplementedError(...)` "
     "line with your code and run the cell again.",
     "尚未作答：函数仍然抛出 NotImplementedError。把 `raise NotImplementedError(...)` 这一行换成你的代码，再运行一次这个单元格。"),
    ("the checker could not evaluate the answer ({t}: {e}). If your function returns something unusual, return a "
     "torch.Tensor as the exercise asks; otherwise please report this.",
     "检查程序无法评估这个答案（{t}: {e}）。如果你的函数返回了不寻常的东西，请按练习要求返回 torch.Tensor；否则请报告这个问题。"),
    ("well done: {note}", "做得好：{note}"),
    ("{call} did not return within {s} s. Look for a loop that never ends (a `while` whose condition never becomes "
     "false, or an index that is never advanced).",
     "{call} 在 {s} 秒内没有返回。请找一找永不结束的循环（条件永远不会变为假的 `while`，或从不前进的下标）。"),
    ("{call} raised {t}: {rest}", "{call} 抛出了 {t}: {rest}"),
    (" (in {f}, line {num}{code})", "（在 {f} 的第 {num} 行{code}）"),
    ("\nHint: {hint}", "\n提示：{hint}"),
    ("two tensors with incompatible shapes met. Print the shape of each intermediate (x.shape) and compare with the "
     "shapes in the exercise text.",
     "两个形状不兼容的张量相遇了。打印每个中间结果的形状（x.shape），与练习说明中的形状对照。"),
    ("check that your function takes the arguments in the order given in the exercise.",
     "检查你的函数是否按练习给出的顺序接收参数。"),
    ("a name is used before it is defined (did you run the cell that defines it?).",
     "某个名字在定义之前就被使用了（定义它的单元格运行过了吗？）。"),
    # the second part of what a comparison names ("f(x) (the scale) returned ...")
    ("the returned k_cache", "返回的 k_cache"),
    ("the returned v_cache", "返回的 v_cache"),
    ("recovered fraction", "恢复比例"),
    ("the scale", "缩放因子"),
    ("the codes q", "编码 q"),
    ("your function", "你的函数"),  # the name of a function without __name__
    # describe()
    ("an empty tensor of shape {shape}", "形状为 {shape} 的空张量"),
    ("a {word} tensor of shape {shape}", "形状为 {shape} 的 {word} 张量"),
    ("a {t} of {n} items starting {start}", "以 {start} 开头、共 {n} 项的 {t}"),
    ("a {word} model", "{word} 模型"),
    # expect_tensor / expect_equal
    ("{call} returned a {t} of {n} items; expected one tensor of shape {s}.",
     "{call} 返回了含 {n} 项的 {t}；应返回一个形状为 {s} 的张量。"),
    ("{call} returned {t} ({v}); expected a torch.Tensor of shape {s}.",
     "{call} 返回了 {t}（{v}）；应返回形状为 {s} 的 torch.Tensor。"),
    (" Use torch operations (or torch.from_numpy) so the result is a torch.Tensor.",
     "请使用 torch 运算（或 torch.from_numpy），让结果是 torch.Tensor。"),
    ("{call} returned shape {a}; expected shape {b}.", "{call} 返回的形状是 {a}，应为 {b}。"),
    ("{call} returned dtype {d}; expected a boolean tensor (torch.bool, True/False values). Compare with `>=`/`<=` "
     "or call .bool().",
     "{call} 返回的 dtype 是 {d}；应为布尔张量（torch.bool，取值 True/False）。请用 `>=`/`<=` 比较，或调用 .bool()。"),
    ("{call} returned dtype {d}; expected a floating-point tensor. Integer tensors cannot hold fractions: convert "
     "with .float().",
     "{call} 返回的 dtype 是 {d}；应为浮点张量。整数张量存不下小数：请用 .float() 转换。"),
    ("{call} returned dtype {d}; expected integers ({e}).", "{call} 返回的 dtype 是 {d}；应为整数（{e}）。"),
    ("{call} returned {v} at index {i} where {e} was expected.", "{call} 在下标 {i} 处返回了 {v}，而期望值是 {e}。"),
    ("{call} returned wrong values.", "{call} 返回的值不对。"),
    ("\n  expected: {e}\n  got:      {g}", "\n  期望值：{e}\n  实际值：{g}"),
    ("  {n} of {m} values differ; first at index {i}: expected {e}, got {g}.",
     "  {m} 个值中有 {n} 个不同；第一个在下标 {i}：期望 {e}，实际 {g}。"),
    ("  largest |difference| {d}.", "  最大 |差值| 为 {d}。"),
    ("\n  Your result has dtype {d}; the expected result is {e}.", "\n  你的结果的 dtype 是 {d}；期望结果是 {e}。"),
    (" {word} keeps only about {num} significant digits: compute in float32 (call .float() on the inputs, or do not "
     "convert them).",
     " {word} 只保留约 {num} 位有效数字：请用 float32 计算（对输入调用 .float()，或者不要转换它们）。"),
    ("a NaN (not a number) came out of finite inputs. Look for 0 / 0, inf - inf, 0 * inf, or the square root or log "
     "of a negative number in your code.",
     "有限的输入却算出了 NaN（非数）。请在代码里找 0 / 0、inf - inf、0 * inf，或对负数开平方、取对数的地方。"),
    ("an infinite value came out of finite inputs. Look for a division by zero or exp() of a large number.",
     "有限的输入却算出了无穷大。请找一找除以零或对很大的数取 exp() 的地方。"),
    ("{call} returned a {t} ({v}); expected a {e}: {w}.", "{call} 返回了 {t}（{v}）；应为 {e}：{w}。"),
    # checks_attention.py
    ('exp() overflowed: e^1000 is inf in float32, and inf/inf is NaN. Subtract the maximum along `dim` before exp, x - x.max(dim, keepdim=True).values: the softmax does not change, and the largest exponent becomes e^0 = 1.',
     'exp() 溢出了：在 float32 中 e^1000 是 inf，而 inf/inf 是 NaN。在取 exp 之前先沿 `dim` 减去最大值，x - x.max(dim, keepdim=True).values：softmax 的结果不变，最大的指数变成 e^0 = 1。'),
    ('matches llmlab.attention.softmax on 5 hidden cases, including dim=0, a -inf entry and logits near 1000 and -1000.',
     '在 5 个隐藏用例上与 llmlab.attention.softmax 一致，其中包括 dim=0、一个 -inf 元素，以及接近 1000 和 -1000 的逻辑值。'),
    ('correct lower-triangular boolean masks for T = 2, 4 and 7.',
     'T = 2、4 和 7 时的下三角布尔掩码都正确。'),
    ('matches llmlab.attention.scaled_dot_product_attention without a mask, with a causal mask, and for one query.',
     '与 llmlab.attention.scaled_dot_product_attention 一致：不带掩码、带因果掩码，以及只有一个查询时。'),
    ('repeats each KV head n_rep times in the right order for n_rep = 1, 2, 3 and 4 (MQA included).',
     'n_rep = 1、2、3 和 4 时（包括 MQA），每个 KV 头都按正确顺序重复了 n_rep 次。'),
    ('correct sliding-window masks for four (T, window) pairs, including a window longer than T.',
     '四组 (T, window) 的滑动窗口掩码都正确，其中包括窗口比 T 更长的情形。'),
    ('equals torch.softmax for blocks of 1, 2, 4 and 8, a short last block and values near 1000 and -900.',
     '分块大小为 1、2、4 和 8、最后一块较短，以及数值接近 1000 和 -900 时，结果都与 torch.softmax 相同。'),
    ('queries from the decoder, keys and values from the encoder, unmasked and scaled: correct on 3 cases.',
     '查询来自解码器，键和值来自编码器，不加掩码并且做了缩放：3 个用例都正确。'),
    ('matches llmlab.attention.Attention for GQA (6 query / 2 KV heads), MQA with n_heads*head_dim != d (like Gemma) and plain MHA, with RoPE and the causal mask.',
     '与 llmlab.attention.Attention 一致：GQA（6 个查询头 / 2 个 KV 头）、n_heads*head_dim != d 的 MQA（与 Gemma 相同）以及普通的 MHA，都带 RoPE 和因果掩码。'),
    ('torch.tril(torch.ones(T, T, dtype=torch.bool)) builds the lower triangle.',
     'torch.tril(torch.ones(T, T, dtype=torch.bool)) 构造的就是下三角。'),
    ('check the shapes: scores = q @ k.transpose(-2, -1) has shape (..., Tq, Tk), and the output weights @ v has shape (..., Tq, dv).',
     '检查形状：scores = q @ k.transpose(-2, -1) 的形状是 (..., Tq, Tk)，输出 weights @ v 的形状是 (..., Tq, dv)。'),
    ('the key/value tensors have n_kv_heads heads and the queries n_heads. Repeat each KV head n_heads // n_kv_heads times along the head axis (k.repeat_interleave(n_rep, dim=1), or llmlab.attention.repeat_kv) before q @ k^T.',
     '键/值张量有 n_kv_heads 个头，查询有 n_heads 个头。在计算 q @ k^T 之前，沿头所在的轴把每个 KV 头重复 n_heads // n_kv_heads 次（k.repeat_interleave(n_rep, dim=1)，或 llmlab.attention.repeat_kv）。'),
    ('{a} returned an additive float mask (0 and -inf). This exercise asks for the boolean mask: True where query i may attend to key j (j <= i), False elsewhere.',
     '{a} 返回的是加性的浮点掩码（0 和 -inf）。这个练习要的是布尔掩码：查询 i 可以关注键 j（j <= i）的位置为 True，其余为 False。'),
    ('the scores were not scaled: divide q k^T by sqrt(d) = sqrt({a}) before the softmax (missing 1/sqrt(d) makes the softmax too peaked as d grows).',
     '注意力分数没有缩放：在 softmax 之前把 q k^T 除以 sqrt(d) = sqrt({a})（缺少 1/sqrt(d) 时，d 越大 softmax 越尖锐）。'),
    ('you divided by d = {a}; the scale is 1/sqrt(d) = 1/{b}.',
     '你除以了 d = {a}；缩放因子应是 1/sqrt(d) = 1/{b}。'),
    ("the softmax ran over the wrong dimension (the queries, dim=-2). Each query's weights over the keys must sum to 1: softmax over the last dim of the (Tq, Tk) scores.",
     'softmax 作用在了错误的维度上（查询所在的 dim=-2）。每个查询对所有键的权重之和必须为 1：应在 (Tq, Tk) 分数的最后一维上做 softmax。'),
    ('you returned the attention weights; the output is weights @ v.',
     '你返回的是注意力权重；输出应是 weights @ v。'),
    ('exp() overflowed: keep a running maximum m and compute exp(x - m), never exp(x).',
     'exp() 溢出了：维护一个运行中的最大值 m，计算 exp(x - m)，永远不要直接算 exp(x)。'),
    ('the attention weights, second item returned',
     '返回的第二项：注意力权重'),
    ("the mask was not applied: positions where mask is False must get -inf before the softmax (scores.masked_fill(~mask, float('-inf'))).",
     "掩码没有生效：mask 为 False 的位置必须在 softmax 之前填上 -inf（scores.masked_fill(~mask, float('-inf'))）。"),
    ("the mask is on the wrong side: you blocked the positions where mask is True. True means 'may attend'; fill -inf where the mask is False (masked_fill(~mask, ...)).",
     '掩码用反了：你屏蔽的是 mask 为 True 的位置。True 表示“可以关注”；应在掩码为 False 的位置填 -inf（masked_fill(~mask, ...)）。'),
    ('your result is the softmax over dim={a}, not over dim={b}: you normalised over the wrong dimension. Take the max and the sum along the `dim` argument, with keepdim=True.',
     '你的结果是在 dim={a} 上做的 softmax，而不是 dim={b}：归一化的维度错了。请沿参数 `dim` 取最大值和求和，并设 keepdim=True。'),
    ('your result is the softmax over dim=-2, not dim=-1: you normalised over the wrong dimension.',
     '你的结果是在 dim=-2 上做的 softmax，而不是 dim=-1：归一化的维度错了。'),
    ('you returned exp(x) without dividing by the sum of the exponentials along `dim`.',
     '你返回了 exp(x)，却没有除以沿 `dim` 的指数之和。'),
    ('you divided by the sum over ALL elements; sum only along `dim` (x.sum(dim, keepdim=True)).',
     '你除以的是所有元素之和；只应沿 `dim` 求和（x.sum(dim, keepdim=True)）。'),
    ('your mask is the upper triangle: True above the diagonal lets each token attend to FUTURE tokens. Row i is the query, column j the key; the allowed keys are j <= i (the lower triangle, torch.tril).',
     '你的掩码是上三角：对角线以上为 True，会让每个词元关注到未来的词元。第 i 行是查询，第 j 列是键；允许的键是 j <= i（下三角，torch.tril）。'),
    ("your mask has the right shape but the wrong side: True marks the future positions (what should be blocked). In llmlab True means 'may attend', so the lower triangle with the diagonal must be True.",
     '你的掩码形状对了，但方向反了：True 标出的是未来的位置（本该屏蔽的部分）。在 llmlab 中 True 表示“可以关注”，所以包含对角线的下三角必须为 True。'),
    ('the diagonal is missing: each token must be allowed to attend to itself (j == i). Use torch.tril with diagonal=0, the default.',
     '缺少对角线：每个词元必须能关注它自己（j == i）。使用 torch.tril 时取 diagonal=0，即默认值。'),
    ('every entry is True, so nothing is masked: the future keys (j > i, above the diagonal) must be False.',
     '所有元素都是 True，什么也没屏蔽：未来的键（j > i，对角线以上）必须为 False。'),
    ('the heads are in the wrong order: you tiled the KV heads (kv0, kv1, kv0, kv1, ...), but query head h belongs to KV head h // n_rep, so each KV head must be repeated n_rep times in a row (kv0, kv0, kv1, kv1, ...): x.repeat_interleave(n_rep, dim=1), or x[:, :, None].expand(...).reshape(...).',
     '头的顺序错了：你把 KV 头平铺成了 (kv0, kv1, kv0, kv1, ...)，但查询头 h 属于 KV 头 h // n_rep，所以每个 KV 头必须连续重复 n_rep 次 (kv0, kv0, kv1, kv1, ...)：x.repeat_interleave(n_rep, dim=1)，或 x[:, :, None].expand(...).reshape(...)。'),
    ('you repeated along the time axis (dim 2); repeat the heads (dim 1).',
     '你沿时间轴（dim 2）做了重复；应重复的是头（dim 1）。'),
    ('you repeated along head_dim (the last axis); repeat the heads (dim 1).',
     '你沿 head_dim（最后一个轴）做了重复；应重复的是头（dim 1）。'),
    ('one key too many: the window counts the query itself, so query i sees keys i - window + 1 .. i (window keys in all), i.e. i - j < window, not i - j <= window.',
     '多了一个键：窗口把查询自己也算在内，所以查询 i 看到的是键 i - window + 1 .. i（共 window 个键），即 i - j < window，而不是 i - j <= window。'),
    ('one key too few: query i must see window keys in all, itself included (i - j < window); you stopped one short.',
     '少了一个键：查询 i 必须一共看到 window 个键，包括它自己（i - j < window）；你少算了一个。'),
    ('the future is not masked: a sliding window in a decoder is still causal (j <= i); you allowed keys on both sides of the query.',
     '未来没有被屏蔽：解码器中的滑动窗口仍然是因果的（j <= i）；你允许了查询两侧的键。'),
    ("True and False are swapped: True means 'may attend'.",
     'True 和 False 互换了：True 表示“可以关注”。'),
    ('when a new block raises the running max from m_old to m_new, the running sum must be rescaled: l = l * exp(m_old - m_new) + sum(exp(block - m_new)). You added the new block without rescaling the old sum.',
     '当新的一块把运行最大值从 m_old 提高到 m_new 时，运行中的和必须重新缩放：l = l * exp(m_old - m_new) + sum(exp(block - m_new))。你加上了新的一块，却没有重新缩放旧的和。'),
    ('the running sum is rescaled in the wrong direction: multiply by exp(m_old - m_new) (a number <= 1), not exp(m_new - m_old).',
     '运行中的和缩放方向反了：应乘以 exp(m_old - m_new)（一个 <= 1 的数），而不是 exp(m_new - m_old)。'),
    ('keys and values must come from the encoder output `memory`; you used the decoder states x (that is self-attention).',
     '键和值必须来自编码器的输出 `memory`；你用的是解码器的状态 x（那是自注意力）。'),
    ('the keys come from x instead of memory: in cross-attention both keys and values come from the encoder output.',
     '键来自 x 而不是 memory：在交叉注意力中，键和值都来自编码器的输出。'),
    ('cross-attention has no causal mask: the whole source sentence is known, so every decoder position may look at every encoder position.',
     '交叉注意力没有因果掩码：整个源句都是已知的，所以解码器的每个位置都可以看编码器的每个位置。'),
    ('the scores were not scaled by 1/sqrt(d_head) = 1/sqrt({a}).',
     '注意力分数没有乘以 1/sqrt(d_head) = 1/sqrt({a}) 进行缩放。'),
    ('queries must come from the decoder states x, not from memory.',
     '查询必须来自解码器的状态 x，而不是 memory。'),
    ('the KV heads are repeated in the wrong order: query head h belongs to KV head h // n_rep, so each KV head must be repeated n_rep times in a row (kv0, kv0, kv1, kv1, ...): repeat_interleave(n_rep, dim=1), not .repeat(1, n_rep, 1, 1), which tiles them (kv0, kv1, kv0, kv1, ...).',
     'KV 头重复的顺序错了：查询头 h 属于 KV 头 h // n_rep，所以每个 KV 头必须连续重复 n_rep 次 (kv0, kv0, kv1, kv1, ...)：用 repeat_interleave(n_rep, dim=1)，而不是会把它们平铺成 (kv0, kv1, kv0, kv1, ...) 的 .repeat(1, n_rep, 1, 1)。'),
    ('RoPE is missing: rotate q and k with cos and sin (x * cos + rotate_half(x) * sin) before the scores.',
     '缺少 RoPE：在计算注意力分数之前，用 cos 和 sin 旋转 q 和 k（x * cos + rotate_half(x) * sin）。'),
    ('RoPE is in the wrong layout: you rotated adjacent pairs (2j, 2j+1). These weights use the split-halves layout, which pairs channel j with channel j + head_dim/2 (rotate_half).',
     'RoPE 的布局错了：你旋转的是相邻的通道对 (2j, 2j+1)。这些权重用的是前后两半的布局，通道 j 与通道 j + head_dim/2 配对（rotate_half）。'),
    ('RoPE went on the values too: only queries and keys are rotated; v stays as it is.',
     'RoPE 也作用到了值上：只有查询和键需要旋转，v 保持不变。'),
    ('the scores were not scaled: divide q k^T by sqrt(head_dim) = sqrt({a}) before the softmax.',
     '注意力分数没有缩放：在 softmax 之前把 q k^T 除以 sqrt(head_dim) = sqrt({a})。'),
    ('you scaled by 1/sqrt(d_model) = 1/sqrt({a}); the scale is 1/sqrt(head_dim) = 1/sqrt({b}), the width of one query.',
     '你用 1/sqrt(d_model) = 1/sqrt({a}) 做了缩放；缩放因子应是 1/sqrt(head_dim) = 1/sqrt({b})，即单个查询的宽度。'),
    ('the causal mask is missing: position i must not see keys j > i (fill -inf above the diagonal before the softmax).',
     '缺少因果掩码：位置 i 不能看到 j > i 的键（在 softmax 之前把对角线以上填成 -inf）。'),
    ('the heads are split the wrong way: view the projection as (B, T, n_heads, head_dim), each head a contiguous slice of head_dim channels, then transpose to (B, n_heads, T, head_dim).',
     '头的拆分方式错了：应把投影结果看成 (B, T, n_heads, head_dim)，每个头是连续的 head_dim 个通道，再转置成 (B, n_heads, T, head_dim)。'),
    ('the output projection is missing: concatenate the heads to (B, T, n_heads*head_dim) and multiply by w_o, which mixes the heads and maps back to width d.',
     '缺少输出投影：把各个头拼接成 (B, T, n_heads*head_dim)，再乘以 w_o，它把各头混合起来并映射回宽度 d。'),
    ("softmax(logits / t) for t = 0.5, 0.7, 1 and 2, including large logits.",
     "t = 0.5、0.7、1 和 2 时都等于 softmax(logits / t)，包括很大的逻辑值。"),
    ("matches llmlab.positions.apply_rope (split halves) on 3 hidden cases, including base=500.",
     "在 3 个隐藏用例上与 llmlab.positions.apply_rope（前后两半的布局）一致，其中包括 base=500。"),
    ("F.one_hot returns integers; convert with .float().", "F.one_hot 返回的是整数；请用 .float() 转换。"),
    # checks_blocks.py
    ('matches (silu(x W_gate) * x W_up) W_down on two hidden cases.',
     '在两个隐藏用例上与 (silu(x W_gate) * x W_up) W_down 一致。'),
    ('matches llmlab.norms.rms_norm on 3 hidden cases, including one where the place of eps matters.',
     '在 3 个隐藏用例上与 llmlab.norms.rms_norm 一致，其中一个用例里 eps 的位置会影响结果。'),
    ('matches llmlab.norms.layer_norm (biased variance, eps inside the root) on 3 hidden cases.',
     '在 3 个隐藏用例上与 llmlab.norms.layer_norm 一致（有偏方差，eps 在根号内）。'),
    ('a correct pre-norm residual block on two hidden inputs.',
     '在两个隐藏输入上都是正确的前归一化残差块。'),
    ("matches llmlab's pre-norm Block (RMSNorm, causal GQA with RoPE, SwiGLU) on two hidden configurations.",
     '在两种隐藏配置上与 llmlab 的前归一化 Block（RMSNorm、带 RoPE 的因果 GQA、SwiGLU）一致。'),
    ('SiLU went on the wrong branch: it acts on the gate (x @ w_gate), and the up projection stays linear.',
     'SiLU 用错了分支：它作用于门控（x @ w_gate），上投影保持线性。'),
    ('you used GELU: that is GeGLU (Gemma). SwiGLU uses SiLU, x * sigmoid(x).',
     '你用了 GELU：那是 GeGLU（Gemma 用的）。SwiGLU 用的是 SiLU，即 x * sigmoid(x)。'),
    ('you used ReLU; SwiGLU uses SiLU, x * sigmoid(x) (torch.nn.functional.silu).',
     '你用了 ReLU；SwiGLU 用的是 SiLU，即 x * sigmoid(x)（torch.nn.functional.silu）。'),
    ('the activation is missing: the gate is silu(x @ w_gate), not x @ w_gate.',
     '缺少激活函数：门控是 silu(x @ w_gate)，而不是 x @ w_gate。'),
    ('the gate multiplication is missing: multiply silu(x @ w_gate) element-wise by x @ w_up before the down projection.',
     '缺少门控乘法：在下投影之前，把 silu(x @ w_gate) 与 x @ w_up 逐元素相乘。'),
    ('sigmoid is not SiLU: SiLU(z) = z * sigmoid(z).',
     'sigmoid 不是 SiLU：SiLU(z) = z * sigmoid(z)。'),
    ('you subtracted the mean: that is LayerNorm. RMSNorm divides by the root mean square and does not centre x.',
     '你减去了均值：那是 LayerNorm。RMSNorm 除以均方根，并不对 x 做中心化。'),
    ('eps belongs inside the square root: x / sqrt(mean(x^2) + eps), not x / (sqrt(mean(x^2)) + eps).',
     'eps 应在平方根之内：x / sqrt(mean(x^2) + eps)，而不是 x / (sqrt(mean(x^2)) + eps)。'),
    ('the weight is missing: multiply the normalised x by `weight`.',
     '缺少权重：把归一化后的 x 乘以 `weight`。'),
    ('you divided by the mean square; take its square root (the root mean square).',
     '你除以的是均方；应取它的平方根（均方根）。'),
    ("the statistics must be over the last dimension (each token's own vector), with keepdim=True.",
     '统计量必须在最后一维上计算（每个词元自己的向量），并设 keepdim=True。'),
    ('eps is missing, or a fixed number stands where the `eps` argument should be: use the eps the function is given, inside the square root: x / sqrt(mean(x^2) + eps) * weight. With a tiny eps the difference is invisible; this case has a large one.',
     '缺少 eps，或者在该用参数 `eps` 的地方写了一个固定的数：应使用函数收到的 eps，并放在平方根之内：x / sqrt(mean(x^2) + eps) * weight。eps 很小时看不出差别；这个用例的 eps 很大。'),
    ('you used the unbiased variance (divide by n - 1): torch.var and torch.std do that by default. LayerNorm divides by n: x.var(-1, keepdim=True, unbiased=False).',
     '你用的是无偏方差（除以 n - 1）：torch.var 和 torch.std 默认如此。LayerNorm 除以 n：x.var(-1, keepdim=True, unbiased=False)。'),
    ('the mean was not subtracted: LayerNorm centres x first (x - mean), then divides by the standard deviation. Without centring it is RMSNorm.',
     '没有减去均值：LayerNorm 先对 x 中心化（x - mean），再除以标准差。不做中心化就成了 RMSNorm。'),
    ('eps belongs inside the square root: sqrt(var + eps), not sqrt(var) + eps.',
     'eps 应在平方根之内：sqrt(var + eps)，而不是 sqrt(var) + eps。'),
    ('weight and bias are missing or swapped: y = normalised * weight + bias.',
     'weight 和 bias 缺失或位置对调了：y = normalised * weight + bias。'),
    ("that is the post-norm block of the 2017 Transformer: norm(x + sublayer(x)). A pre-norm block normalises the sublayer's INPUT and adds its output to the un-normalised residual: x + sublayer(norm(x)).",
     '这是 2017 年 Transformer 的后归一化块：norm(x + sublayer(x))。前归一化块归一化的是子层的输入，再把子层的输出加到未归一化的残差上：x + sublayer(norm(x))。'),
    ("the residual connections are missing: add each sublayer's output to its input (h = x + attn(norm1(x)); out = h + mlp(norm2(h))).",
     '缺少残差连接：把每个子层的输出加到它的输入上（h = x + attn(norm1(x)); out = h + mlp(norm2(h))）。'),
    ('the FFN must read the residual AFTER attention (h), not the block input x: out = h + mlp(norm2(h)). Reading x is the parallel block of GPT-J, a different design.',
     '前馈网络必须读取注意力之后的残差（h），而不是块的输入 x：out = h + mlp(norm2(h))。读取 x 是 GPT-J 的并行块，那是另一种设计。'),
    ('each sublayer has its own norm: norm1 before attention, norm2 before the FFN.',
     '每个子层有自己的归一化：注意力之前用 norm1，前馈网络之前用 norm2。'),
    ('the residual must carry the un-normalised x: h = x + attn(norm1(x)), not norm1(x) + attn(norm1(x)).',
     '残差中必须传递未归一化的 x：h = x + attn(norm1(x))，而不是 norm1(x) + attn(norm1(x))。'),
    ("that is the post-norm block of the 2017 Transformer: norm(x + sublayer(x)). Llama normalises the sublayer's INPUT and adds its output to the un-normalised stream: h = x + attn(rms_norm(x)).",
     '这是 2017 年 Transformer 的后归一化块：norm(x + sublayer(x))。Llama 归一化的是子层的输入，再把子层的输出加到未归一化的残差流上：h = x + attn(rms_norm(x))。'),
    ("the residual connections are missing: add each sublayer's output to the stream it read (h = x + attn(...), out = h + ffn(...)).",
     '缺少残差连接：把每个子层的输出加回到它所读取的残差流上（h = x + attn(...), out = h + ffn(...)）。'),
    ('the FFN must read the stream AFTER attention: out = h + ffn(rms_norm(h)), not rms_norm(x).',
     '前馈网络必须读取注意力之后的残差流：out = h + ffn(rms_norm(h))，而不是 rms_norm(x)。'),
    ("the RMSNorm weights are missing: multiply the normalised vector by w['attn_norm'] (before attention) and w['mlp_norm'] (before the FFN).",
     "缺少 RMSNorm 的权重：把归一化后的向量乘以 w['attn_norm']（注意力之前）和 w['mlp_norm']（前馈网络之前）。"),
    ('SiLU went on the wrong branch of the FFN: silu(x @ gate) * (x @ up), then @ down.',
     'SiLU 用在了前馈网络的错误分支上：应为 silu(x @ gate) * (x @ up)，再 @ down。'),
    ("you used GELU; Llama's FFN is SwiGLU, with SiLU on the gate.",
     '你用了 GELU；Llama 的前馈网络是 SwiGLU，门控上用的是 SiLU。'),
    ('RoPE is missing: rotate q and k (split halves) inside the attention.',
     '缺少 RoPE：在注意力内部旋转 q 和 k（前后两半的布局）。'),
]
