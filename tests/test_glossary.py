"""The glossary appendix: one entry per term, text shown as written, an anchor per term, and the
chapters' first use of each term linked to it (by the book's Sphinx extension)."""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import make_glossary  # noqa: E402


def test_one_entry_per_term_with_the_other_names_listed():
    terms = make_glossary.load_terms()
    keys = [make_glossary.normalise(t["en"]) for t in terms]
    assert len(keys) == len(set(keys))
    names = [t["en"].lower() for t in terms]
    assert names.count("lm head") == 1 and "lm head (unembedding)" not in names
    contextual = [t for t in terms if "contextual" in t["en"].lower()]
    assert len(contextual) == 1
    assert set(contextual[0]["names"]) == {"contextual representation", "contextualized embedding"}
    assert contextual[0]["chapters"] == [3, 14]


def test_definitions_are_shown_as_written():
    assert make_glossary.plain("such as <bos>, <eos>") == "such as \\<bos\\>, \\<eos\\>"
    page = make_glossary.render(make_glossary.load_terms(), {})
    assert "<bos>" not in page.replace("\\<bos\\>", "")


def test_terms_have_anchors_and_chapters_link_to_them(tmp_path):
    src = tmp_path / "book"
    (src / "chapters").mkdir(parents=True)
    (src / "conf.py").write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT / '_ext')!r})\n"
        "extensions = ['myst_parser', 'llmlab_book']\n"
        "myst_enable_extensions = ['dollarmath']\n"
        "html_static_path = []\n")
    (src / "index.md").write_text("# Book\n\n```{toctree}\nchapters/02_tokens\nchapters/appendix_glossary\n```\n")
    (src / "chapters" / "02_tokens.md").write_text(
        "# Tokens\n\n```{note}\nYou will learn what the vocabulary is.\n```\n\n"
        "A `special token` in code is not linked. A special token such as <bos> marks structure.\n\n"
        "Later special tokens are not linked again. The **vocabulary** is a list.\n")
    (src / "chapters" / "appendix_glossary.md").write_text(
        make_glossary.render(make_glossary.load_terms(), {}))
    result = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-W", "-q", str(src),
                             str(tmp_path / "html")], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    glossary = (tmp_path / "html" / "chapters" / "appendix_glossary.html").read_text()
    assert 'id="term-special-token"' in glossary and 'id="term-LM-head"' in glossary
    text = re.sub(r"<[^>]+>", "", glossary)
    assert "such as &lt;bos&gt;, &lt;eos&gt;, padding" in text
    chapter = (tmp_path / "html" / "chapters" / "02_tokens.html").read_text()
    links = re.findall(r'<a class="reference internal" href="appendix_glossary.html#(term-[^"]+)"', chapter)
    assert links.count("term-special-token") == 1 and links.count("term-vocabulary") == 1
    # the bold definition gets the link, not the note above it
    assert re.search(r'<strong><a class="reference internal" href="appendix_glossary.html#term-vocabulary"', chapter)
    assert '<span class="pre">token</span></code> in code is not linked' in chapter     # code stays code


def test_a_term_is_found_in_the_forms_prose_uses():
    sys.path.insert(0, str(ROOT / "_ext"))
    from llmlab_book import _pattern

    def first(name, text, extra=()):
        found = _pattern(name, extra).search(text)
        return found and found.group(1)

    assert first("recurrent neural network (RNN)", "An RNN reads") == "RNN"
    assert first("similarity matrix", "two similarity matrices") == "similarity matrices"
    assert first("key-value memory", "neurons as key value memories") == "key value memories"
    assert first("tokenization", "tokenisation differs") == "tokenisation"
    assert first("decoder-only model", "a decoder-only Transformer", ["decoder-only"]) == "decoder-only"
    assert first("head", "a headline") is None and first("head", "multi-head") is None
    assert any(forms for entries in make_glossary.chapter_terms().values() for _, _, forms in entries)
