"""Chinese feedback for check(): a table of (English template, Chinese template) pairs.

The checks build their messages in English (checks_*.py, compare.py, core.py); this module
translates the finished message without touching how it was built. Each English template is the
text of one message piece as the source writes it, with its {placeholders}; it is compiled into a
regular expression whose placeholders are named groups (one line at most), and the Chinese
template puts the captured text back (identifiers, code, shapes and numbers stay as they are).
Messages are often several pieces joined ("... returned wrong values." + "\\nHint: " + a hint), so
every pattern is applied wherever it matches, longest first; a piece with no pattern stays English.

>>> translate("softmax(x) returned shape (3,); expected shape (2, 3).")
'softmax(x) 返回的形状是 (3,)，应为 (2, 3)。'
"""
from __future__ import annotations

import re
from functools import lru_cache

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
        else:  # one line at most; a placeholder that ends the template takes the rest of the line
            parts.append(f"(?P<{name}>.*)" if last else f"(?P<{name}>.*?)")
            seen.add(name)
        pos = m.end()
    parts.append(re.escape(english[pos:]))
    # whole words only: "got 0.2." must not end at the "0." of the number
    start = "(?<!\\w)" if english[:1].isalnum() else ""
    end = "(?!\\w)" if english[-1:] in ".,;:)" or english[-1:].isalnum() else ""
    return re.compile(start + "".join(parts) + end)


def _literal(english: str) -> str:
    return _PLACEHOLDER.sub("", english)


@lru_cache(maxsize=1)
def _table() -> list[tuple[re.Pattern, str]]:
    pairs = sorted(PAIRS, key=lambda p: -len(_literal(p[0])))
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
# names of its English one. Terms follow the glossary's Chinese column.
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
    (" (in {f}, line {n}{code})", "（在 {f} 的第 {n} 行{code}）"),
    ("\nHint: {hint}", "\n提示：{hint}"),
    ("two tensors with incompatible shapes met. Print the shape of each intermediate (x.shape) and compare with the "
     "shapes in the exercise text.",
     "两个形状不兼容的张量相遇了。打印每个中间结果的形状（x.shape），与练习说明中的形状对照。"),
    ("check that your function takes the arguments in the order given in the exercise.",
     "检查你的函数是否按练习给出的顺序接收参数。"),
    ("a name is used before it is defined (did you run the cell that defines it?).",
     "某个名字在定义之前就被使用了（定义它的单元格运行过了吗？）。"),
    # describe()
    ("{p} = an empty tensor of shape {shape}", "{p} = 形状为 {shape} 的空张量"),
    ("an empty tensor of shape {shape}", "形状为 {shape} 的空张量"),
    ("{p} = a {d} tensor of shape {shape}", "{p} = 形状为 {shape} 的 {d} 张量"),
    ("a {d} tensor of shape {shape}", "形状为 {shape} 的 {d} 张量"),
    ("a {t} of {n} items starting {start}", "以 {start} 开头、共 {n} 项的 {t}"),
    ("a {t} model", "{t} 模型"),
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
    (" {d} keeps only about {n} significant digits: compute in float32 (call .float() on the inputs, or do not "
     "convert them).",
     "{d} 只保留约 {n} 位有效数字：请用 float32 计算（对输入调用 .float()，或者不要转换它们）。"),
    ("a NaN (not a number) came out of finite inputs. Look for 0 / 0, inf - inf, 0 * inf, or the square root or log "
     "of a negative number in your code.",
     "有限的输入却算出了 NaN（非数）。请在代码里找 0 / 0、inf - inf、0 * inf，或对负数开平方、取对数的地方。"),
    ("an infinite value came out of finite inputs. Look for a division by zero or exp() of a large number.",
     "有限的输入却算出了无穷大。请找一找除以零或对很大的数取 exp() 的地方。"),
    ("{call} returned a {t} ({v}); expected a {e}: {w}.", "{call} 返回了 {t}（{v}）；应为 {e}：{w}。"),
]
