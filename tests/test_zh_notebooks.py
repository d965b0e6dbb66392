"""The Chinese notebooks (zh/chapters, zh/practise): the English code, the catalogs' text, kept current."""
import re
import subprocess
import sys
from pathlib import Path

import nbformat
from script_loader import load_file

ROOT = Path(__file__).resolve().parent.parent
make_zh = load_file(ROOT / "scripts" / "make_zh_notebooks.py")
CJK = re.compile(r"[\u4e00-\u9fff]")


def test_every_chinese_notebook_is_current():
    result = subprocess.run([sys.executable, "scripts/make_zh_notebooks.py", "--check"], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_code_is_the_english_notebooks_code_and_text_comes_from_the_catalog():
    translated_pages = 0
    for english, chinese, page in make_zh.sources():
        en, zh = nbformat.read(english, as_version=4), nbformat.read(chinese, as_version=4)
        assert len(en.cells) == len(zh.cells), chinese
        for a, b in zip(en.cells, zh.cells):
            assert a.cell_type == b.cell_type and a.get("metadata") == b.get("metadata"), chinese
            if a.cell_type == "code" and "colab-setup" in a.metadata.get("tags", []):
                assert b.source.replace(make_zh.LANGUAGE_LINE + "\n", "") == a.source, chinese
                assert make_zh.LANGUAGE_LINE in b.source, f"{chinese}: its checks would answer in English"
            elif a.cell_type == "code":
                comments = make_zh.comment_translations(page)
                assert make_zh.translate_code(a.source, comments) == b.source, \
                    f"{chinese}: a code cell is not the English one with its comments translated"
        table = make_zh.translations(page)
        if table and "practise" not in chinese.parts:
            shown = "\n".join(c.source for c in zh.cells if c.cell_type == "markdown")
            assert CJK.search(shown), f"{chinese}: its catalog has translations but its text has none"
            translated_pages += 1
    print(f"{translated_pages} chapter notebooks carry Chinese text")


def test_a_translation_replaces_whole_blocks_only():
    table = {"Summary": "小结", "the model": "模型"}
    text = "## Summary\n\nIn the model, the Summary is short.\n- the model\n"
    assert make_zh.translate_markdown(text, table) == "## 小结\n\nIn the model, the Summary is short.\n- 模型\n"
    # a paragraph broken over lines in the notebook is one entry of the catalog
    assert make_zh.translate_markdown("```{exercise} A softmax by hand\n:label: x\n", {"A softmax by hand": "手算 softmax"}) \
        == "```{exercise} 手算 softmax\n:label: x\n"
