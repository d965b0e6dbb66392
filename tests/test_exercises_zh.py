"""The checks' feedback in Chinese (llmlab.exercises.set_language / LLMLAB_LANGUAGE).

Every message piece is written as say(English template, **fields) and looked up in the catalog
llmlab/exercises/locale/zh_CN/LC_MESSAGES/llmlab.po. These tests run every known typical mistake of
test_exercises.py in Chinese (a template without an entry raises there) and find no English sentence
left, keep the English output unchanged, reject bad settings, and read the checks' source: every string
that reads as English prose is a say() template, and every template has a Chinese entry with the same
fields and none of its English words.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import torch

from llmlab.exercises import check, messages, set_language
from llmlab.exercises.language import current_language
from llmlab.exercises.messages import catalog, read_po, translate
from test_exercises import RIGHT, WRONG, causal_mask_upper, softmax_no_max

SOURCE = Path(__file__).resolve().parent.parent / "llmlab" / "exercises"

# Strings in the exercises' source that check() never shows as feedback: text matched against an
# exception's message to choose a hint, an internal assertion, the English texts a check feeds the
# model, and the language setting's own errors (raised, in English, to whoever set it).
NOT_SHOWN = {"must match the size", "shapes cannot be multiplied", "size of tensor",
             "Sizes of tensors must match except in dimension 3", "expected m1 and m2 to have the same dtype",
             "expected scalar type", "Expected input batch_size", "\"addmm_impl_cpu_\" not implemented for 'Long'",
             "bad test block", "CheckResult(exercise={}, status={})"}
# Files whose strings are not check() feedback: the exercises' titles (the chapters show them, and they
# are translated with the chapters' text), the setting itself and the catalog's reader.
NOT_FEEDBACK = {"registry.py", "language.py", "messages.py"}


@pytest.fixture(autouse=True)
def english_afterwards(monkeypatch):
    monkeypatch.delenv("LLMLAB_LANGUAGE", raising=False)
    monkeypatch.setattr(messages, "STRICT", True)  # a template without a Chinese entry raises
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
    chinese = check(exercise, fn, quiet=True).message
    assert chinese != before.message and translate(before.message) == chinese  # the grader's pages agree


def test_bad_language_settings_are_refused(monkeypatch):
    with pytest.raises(ValueError, match=r"set_language got 'zh'.*'en', 'zh_CN'"):
        set_language("zh")
    assert current_language() == "en"
    monkeypatch.setenv("LLMLAB_LANGUAGE", "chinese")
    with pytest.raises(ValueError, match=r"LLMLAB_LANGUAGE got 'chinese'.*'en', 'zh_CN'"):
        check("softmax", RIGHT["softmax"], quiet=True)
    set_language("zh_CN")  # an explicit choice wins over the environment variable
    assert check("softmax", RIGHT["softmax"], quiet=True).passed


def _say_calls():
    """(where, template, field names) of every say() call in the exercises' source. A template is the
    call's first argument: a string, a module constant (say(NAN_HINT)) or an item of a module dict
    (say(LABELS[status]): each of its values)."""
    found = []
    for path in sorted(SOURCE.glob("*.py")):
        tree = ast.parse(path.read_text())
        constants = {t.id: node.value for node in tree.body if isinstance(node, ast.Assign)
                     for t in node.targets if isinstance(t, ast.Name)}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "say") or path.name == "messages.py":
                continue
            arg, where = node.args[0], f"{path.name}:{node.lineno}"
            if isinstance(arg, ast.Subscript):
                arg = arg.value
            if isinstance(arg, ast.Name):
                arg = constants[arg.id]
            values = ast.literal_eval(arg)
            for template in values.values() if isinstance(values, dict) else [values]:
                found.append((where, template, {k.arg for k in node.keywords}))
    return found


def test_every_template_has_a_chinese_entry_with_its_fields_and_no_english_words():
    """A new or reworded message without its Chinese entry fails here, as does a Chinese template that
    keeps a run of English words of its template (code, identifiers and names aside) or drops a field."""
    calls, zh = _say_calls(), catalog("zh_CN")
    assert len(calls) > 250
    missing, english, fields = [], [], []
    for where, template, given in calls:
        if template not in zh:
            missing.append(f"{where}: {template!r}")
            continue
        placeholders = set(re.findall(r"\{(\w+)\}", template))
        if placeholders != set(re.findall(r"\{(\w+)\}", zh[template])) or (given and given != placeholders):
            fields.append(f"{where}: {template!r} fields {sorted(given)} -> {zh[template]!r}")
        left = set(english_sentences(zh[template].replace("{", " ").replace("}", " ")))
        if left & set(english_sentences(template)) or any(s in template for s in left):
            english.append(f"{where}: {template!r} -> {zh[template]!r}: {sorted(left)}")
    assert not missing, f"{len(missing)} templates without a Chinese entry in the catalog:\n" + "\n".join(missing)
    assert not fields, "fields that differ:\n" + "\n".join(fields)
    assert not english, "English words kept in Chinese templates:\n" + "\n".join(english)


def test_every_english_message_in_the_source_is_a_template():
    """Every string of the exercises' source that reads as English prose (docstrings aside) is the first
    argument of say() or a constant that say() receives: a message built any other way would stay English."""
    said = {template for _, template, _ in _say_calls()}
    loose = []
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
            if isinstance(parents.get(node), (ast.JoinedStr, ast.Expr, ast.FormattedValue)) or text in said:
                continue
            prose = re.findall(r"\b[A-Za-z]{2,}(?: [A-Za-z]{2,})+\b", text.replace("{}", " "))
            if prose and text not in NOT_SHOWN and not text.startswith("<div") \
                    and not (path.name == "checks_tuned_lens.py" and isinstance(parents.get(node), ast.List)):
                loose.append(f"{path.name}:{node.lineno}: {text!r}")
    assert not loose, f"{len(loose)} English strings not written with say():\n" + "\n".join(loose)


def test_catalog_is_well_formed():
    text = (SOURCE / "locale" / "zh_CN" / "LC_MESSAGES" / "llmlab.po").read_text(encoding="utf-8")
    entries = read_po(text)
    assert len(entries) == text.count("\nmsgid ") - 1  # no fuzzy or empty entry, no msgid twice
    for english, chinese in entries.items():
        assert re.search(r"[\u4e00-\u9fff]", chinese), chinese
    used = {template for _, template, _ in _say_calls()}
    # llmlab grade's own messages (llmlab/grading), which its Chinese feedback pages translate
    grading = set()
    for path in (SOURCE.parent / "grading").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                grading.add(node.value)
            elif isinstance(node, ast.JoinedStr):
                grading.add("".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values))
    unused = [e for e in entries if e not in used and re.sub(r"\{\w+\}", "{}", e) not in grading]
    assert not unused, f"entries that neither a say() nor llmlab grade writes: {unused}"


def test_the_grader_translates_finished_english_messages_with_the_same_catalog():
    set_language("en")
    english = check("causal_mask", causal_mask_upper, quiet=True).message
    set_language("zh_CN")
    assert translate(english) == check("causal_mask", causal_mask_upper, quiet=True).message
