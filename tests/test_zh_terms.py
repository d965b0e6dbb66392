"""One Chinese name per idea: the glossary's Chinese column is the single source.

An entry in glossary/chNN.yml may list `zh_not`: names a Chinese page must not use for that idea
(a literal translation that misleads, such as 逻辑值 for logits, which reads as "Boolean value", or a
second name for the same thing, such as 键/值头 beside KV 头). This test reads every piece of
Chinese text the book ships (the page catalogs, the views' strings, the exercise feedback, the
diagrams' labels) and fails on any listed variant, naming the file and the sentence.
"""
import json
import re
import sys
from pathlib import Path

import pytest
from babel.messages.pofile import read_po

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import make_glossary  # noqa: E402


def avoided() -> dict[str, str]:
    """{variant: the glossary's name} for every zh_not of every entry."""
    out = {}
    for entry in make_glossary.load_entries():
        for variant in entry.get("zh_not", []):
            out[str(variant)] = f"{entry['en']} = {entry['zh']}"
    return out


def chinese_texts():
    """(where, text) for every shipped piece of Chinese text."""
    for po in sorted([*(ROOT / "locales").rglob("*.po"), *(ROOT / "llmlab").rglob("*.po")]):
        with open(po, "rb") as f:
            catalog = read_po(f, locale="zh_CN")
        for message in catalog:
            if message.id and message.string:
                strings = message.string if isinstance(message.string, (list, tuple)) else [message.string]
                for s in strings:
                    yield po.relative_to(ROOT), s
    for notebook in sorted((ROOT / "chapters").glob("*.ipynb")):   # Chinese glued values live in code cells
        for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "code":
                for line in "".join(cell["source"]).splitlines():
                    if re.search(r"[\u4e00-\u9fff]", line):
                        yield notebook.relative_to(ROOT), line
    sources = [*(ROOT / "llmlab").rglob("*.py"), *(ROOT / "llmlab").rglob("*.js"), *(ROOT / "figures").glob("*.py")]
    for path in sorted(sources):
        for line in path.read_text(encoding="utf-8").splitlines():
            if re.search(r"[\u4e00-\u9fff]", line):
                yield path.relative_to(ROOT), line


def test_every_avoided_name_is_not_the_glossary_name_itself():
    entries = make_glossary.load_entries()
    assert any(e.get("zh_not") for e in entries), "no glossary entry lists zh_not: the test below would check nothing"
    for entry in entries:
        for variant in entry.get("zh_not", []):
            assert str(variant) not in str(entry["zh"]), (entry["en"], variant)


def test_chinese_pages_use_the_glossary_name_for_each_idea():
    variants = avoided()
    found = []
    for where, text in chinese_texts():
        for variant, name in variants.items():
            if variant in text:
                at = text.index(variant)
                found.append(f"{where}: {variant!r} (glossary: {name}) in ...{text[max(0, at - 30):at + 30]}...")
    assert not found, f"{len(found)} uses of a name the glossary rules out:\n" + "\n".join(found[:40])


@pytest.mark.parametrize("variant", ["逻辑值", "键/值头"])
def test_the_check_sees_a_variant(variant):
    # the scan above would have caught a page that writes the variant
    assert variant in avoided()
