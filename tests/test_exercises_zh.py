"""The checks' feedback in Chinese (llmlab.exercises.set_language / LLMLAB_LANGUAGE).

The checks write English; messages_zh translates the finished message piece by piece. These tests
run every known typical mistake of test_exercises.py in Chinese and find no English sentence left,
keep the English output unchanged, reject bad settings, and fail when a message template in the
checks' source has no Chinese pattern.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import torch

from llmlab.exercises import check, set_language
from llmlab.exercises.language import current_language
from llmlab.exercises.messages_zh import PAIRS, translate
from llmlab.exercises.messages_zh_checks import LATER_PAIRS
from test_exercises import RIGHT, WRONG, causal_mask_upper, softmax_no_max

SOURCE = Path(__file__).resolve().parent.parent / "llmlab" / "exercises"

# Strings in the exercises' source that check() never shows as feedback: text matched against an
# exception's message to choose a hint, an internal assertion, the English texts a check feeds the
# model, the English status labels (results.py has Chinese ones beside them), and the language
# setting's own errors (raised, in English, to whoever set it).
NOT_SHOWN = {"must match the size", "shapes cannot be multiplied", "size of tensor",
             "Sizes of tensors must match except in dimension 3", "expected m1 and m2 to have the same dtype",
             "expected scalar type", "Expected input batch_size", "\"addmm_impl_cpu_\" not implemented for 'Long'", "bad test block",
             "the environment variable {}", "NOT YET", "NOT ATTEMPTED", "&#10008; Not yet", "&#8230; Not attempted",
             '{} got {}; the feedback of the checks can be in {}. Use llmlab.exercises.set_language("zh_CN") for '
             'Chinese or set_language("en") for English.'}
# Files whose strings are not check() feedback: the exercises' titles (the chapters show them, and they
# are translated with the chapters' text), the setting itself and the translation table.
NOT_FEEDBACK = {"registry.py", "language.py", "messages_zh.py", "messages_zh_checks.py"}


@pytest.fixture(autouse=True)
def english_afterwards(monkeypatch):
    monkeypatch.delenv("LLMLAB_LANGUAGE", raising=False)
    yield
    set_language(None)


def english_sentences(text: str) -> list[str]:
    """Runs of two or more English words outside code: what a Chinese message should not contain.
    Code spans, identifiers (with dots, underscores, brackets or digits), one-letter names (x A + b),
    proper names and the learner's own exception text are left out."""
    text = re.sub(r"`[^`]*`", " ", text)
    text = re.sub(r"抛出了 \w+: .*", " ", text)  # the exception's own text is Python's or torch's, not ours
    text = re.sub(r"\S*[._()\[\]=<>*/+'\"\d^|@][^\s，。；：（）、]*", " ", text)
    text = text.replace("Hugging Face", " ")
    return re.findall(r"\b[A-Za-z]{2,}(?: [A-Za-z]{2,})+\b", text)


@pytest.mark.parametrize("exercise, fn, words", WRONG, ids=[f"{e}-{f.__name__}" for e, f, _ in WRONG])
def test_typical_mistakes_get_chinese_feedback(exercise, fn, words):
    set_language("zh_CN")
    result = check(exercise, fn, quiet=True)
    assert result.status == "fail" and str(result).startswith(f"[尚未通过] {exercise}: ")
    assert result.language == "zh_CN"
    assert not english_sentences(result.message), f"English left in:\n{result.message}"
    assert re.search(r"[\u4e00-\u9fff]", result.message)


@pytest.mark.parametrize("exercise", ["softmax", "causal_mask", "top_p"])
def test_pass_and_not_attempted_in_chinese(exercise, monkeypatch):
    monkeypatch.setenv("LLMLAB_LANGUAGE", "zh_CN")  # the environment variable is read when check runs
    result = check(exercise, RIGHT[exercise], quiet=True)
    assert str(result).startswith(f"[通过] {exercise}: 做得好：") and not english_sentences(result.message)
    assert "通过" in result._repr_html_()

    def stub(*args):
        raise NotImplementedError("write your code here")
    result = check(exercise, stub, quiet=True)
    assert result.status == "not-attempted" and str(result).startswith(f"[尚未作答] {exercise}: 尚未作答")


def test_framework_messages_in_chinese():
    set_language("zh_CN")
    for message in [check("no_such_exercise", print, quiet=True).message, check("softmax", 3, quiet=True).message]:
        assert not english_sentences(message), message

    def slow(x, dim=-1):
        while True:
            pass
    message = check("softmax", slow, time_limit=0.3, quiet=True).message
    assert "0.3 秒内没有返回" in message and not english_sentences(message), message

    def returns_numpy(x, dim=-1):  # a value whose description has several lines
        return torch.softmax(x, dim).numpy()

    def returns_bfloat16(x, dim=-1):  # the dtype note and the precision hint after the values
        return torch.softmax(x, dim).bfloat16()
    for fn in (returns_numpy, returns_bfloat16):
        message = check("softmax", fn, quiet=True).message
        assert not english_sentences(message), message
    assert "你的结果的 dtype 是 torch.bfloat16" in message and "bfloat16 只保留约 3 位有效数字" in message

    def crashes(x, dim=-1):
        return x @ torch.ones(1, 1)
    message = check("softmax", crashes, quiet=True).message
    assert "抛出了 RuntimeError: " in message and "提示：" in message and re.search(r"的第 \d+ 行", message), message


@pytest.mark.parametrize("exercise, fn", [("causal_mask", causal_mask_upper), ("softmax", softmax_no_max)])
def test_english_unchanged_at_en(exercise, fn, monkeypatch):
    before = check(exercise, fn, quiet=True)
    set_language("en")
    after = check(exercise, fn, quiet=True)
    assert str(after) == str(before) and after._repr_html_() == before._repr_html_()
    assert str(after).startswith(f"[NOT YET] {exercise}: ")
    set_language(None)
    monkeypatch.setenv("LLMLAB_LANGUAGE", "en")
    assert str(check(exercise, fn, quiet=True)) == str(before)
    set_language("zh_CN")
    assert translate(before.message) == check(exercise, fn, quiet=True).message != before.message


def test_bad_language_settings_are_refused(monkeypatch):
    with pytest.raises(ValueError, match=r"set_language got 'zh'.*'en', 'zh_CN'"):
        set_language("zh")
    assert current_language() == "en"
    monkeypatch.setenv("LLMLAB_LANGUAGE", "chinese")
    with pytest.raises(ValueError, match=r"LLMLAB_LANGUAGE got 'chinese'.*'en', 'zh_CN'"):
        check("softmax", RIGHT["softmax"], quiet=True)
    set_language("zh_CN")  # an explicit choice wins over the environment variable
    assert check("softmax", RIGHT["softmax"], quiet=True).passed


def _templates():
    """Every string the exercises' source writes that reads as English prose (docstrings aside), with
    each f-string's {expression} as a placeholder."""
    found = []
    for path in sorted(SOURCE.glob("*.py")):
        if path.name in NOT_FEEDBACK:
            continue
        tree = ast.parse(path.read_text())
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
            elif isinstance(node, ast.JoinedStr):
                text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
            else:
                continue
            if isinstance(parents.get(node), (ast.JoinedStr, ast.Expr, ast.FormattedValue)):
                continue
            if len(re.findall(r"[A-Za-z]{2,}", text.replace("{}", ""))) >= 2 and text not in NOT_SHOWN \
                    and not (path.name == "checks_tuned_lens.py" and isinstance(parents.get(node), ast.List)):
                found.append((f"{path.name}:{node.lineno}", text))
    return found


def test_every_message_template_has_a_chinese_pattern():
    """Each template, its placeholders filled with stand-ins that read as code (a shape, a name), comes out
    of translate() with no English sentence left: a new English message without a Chinese pattern fails here."""
    templates = _templates()
    assert len(templates) > 250
    missing = []
    for where, text in templates:
        shaped = re.sub(r"(?<=shape )\{\}", "(1, 2)", text)  # a shape where the text says so, a name elsewhere
        shaped = re.sub(r"\{\}(?=[A-Za-z])", "x = ", shaped)  # a prefix glued to a word ("{name = }a ...")
        left = min((english_sentences(translate(shaped.replace("{}", stand_in))) for stand_in in ("(1, 2)", "x1", "1")),
                   key=len)
        if left:
            missing.append(f"{where}: {text!r} -> {left}")
    assert not missing, f"{len(missing)} templates without a Chinese pattern:\n" + "\n".join(missing)


def test_table_is_well_formed():
    englishes = [e for e, _ in PAIRS + LATER_PAIRS]
    assert len(set(englishes)) == len(englishes)
    for english, chinese in PAIRS + LATER_PAIRS:
        assert set(re.findall(r"\{(\w+)\}", chinese)) <= set(re.findall(r"\{(\w+)\}", english)), english
        assert re.search(r"[\u4e00-\u9fff]", chinese), chinese
