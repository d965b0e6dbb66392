"""The Chinese edition: its catalogs, and the two built sites side by side (_build/html, _build/html/zh)."""
import html as html_lib
import re
from pathlib import Path

import pytest
from script_loader import load_file

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / "_build" / "html"
ZH = HTML / "zh"
book_i18n = load_file(ROOT / "scripts" / "book_i18n.py")

CJK = re.compile(r"[\u3400-\u9fff\u3000-\u303f\uff00-\uffef]")
LATIN = re.compile(r"[A-Za-z]")


def toc_pages() -> list[str]:
    import yaml

    def walk(node):
        if isinstance(node, dict):
            for key in ("root", "file"):
                if key in node:
                    yield str(node[key])
            for value in node.values():
                yield from walk(value)
        elif isinstance(node, list):
            for item in node:
                yield from walk(item)
    return sorted(set(walk(yaml.safe_load((ROOT / "_toc.yml").read_text()))))


def test_every_page_has_one_catalog():
    catalogs = {p.relative_to(book_i18n.CATALOGS).with_suffix("").as_posix()
                for p in book_i18n.CATALOGS.rglob("*.po") if not p.is_relative_to(book_i18n.CODE_CATALOGS)}
    pages = set(toc_pages())
    assert not pages - catalogs, f"pages without a catalog (python scripts/book_i18n.py catalogs): {sorted(pages - catalogs)}"
    assert not catalogs - pages, f"catalogs of pages that are not in the book: {sorted(catalogs - pages)}"


def test_translations_keep_code_formulas_roles_and_links():
    problems = book_i18n.check()
    assert not problems, "\n".join(problems[:20])


def test_the_markup_check_catches_what_breaks_a_page():
    check = book_i18n.check_entry
    english = "See {doc}`chapter 5 <05_self_attention>`: `x @ W` is $x W$, {glue:text}`n:d` heads."
    assert check(english, "见{doc}`第 5 章 <05_self_attention>`：`x @ W` 即 $x W$，共 {glue:text}`n:d` 个头。") == []
    assert any("roles" in p for p in check(english, "见第 5 章：`x @ W` 即 $x W$，共 {glue:text}`n:d` 个头。"))
    assert any("code" in p for p in check(english, "见{doc}`第 5 章 <05_self_attention>`：`x@W` 即 $x W$，{glue:text}`n:d`。"))
    assert any("formulas" in p for p in check(english, "见{doc}`第 5 章 <05_self_attention>`：`x @ W` 即 xW，{glue:text}`n:d`。"))
    assert any("list" in p for p in check("5. Self-attention", "5. 自注意力"))
    assert check(english, "") == []     # untranslated: shown in English, not broken
    assert any("asterisks" in p for p in check("**A lab is for proof.** Under", "**实验页留给读者。**在目录中"))
    assert check("**A lab is for proof.** Under", "**实验页留给读者**。在目录中") == []


def test_the_catalogs_hold_the_current_english_text(tmp_path):
    """Every block of English text the pages have today is an entry of its page's catalog, so an
    edited paragraph cannot silently keep an old translation (or none)."""
    from babel.messages.pofile import read_po

    templates = book_i18n.extract(tmp_path / "gettext")
    missing = {}
    for pot in templates.rglob("*.pot"):
        page = pot.relative_to(templates).with_suffix("").as_posix()
        if page.startswith("_"):
            continue
        with open(pot, "rb") as f:
            wanted = {m.id for m in read_po(f) if m.id}
        po = book_i18n.CATALOGS / f"{page}.po"
        have = set()
        if po.exists():
            with open(po, "rb") as f:
                have = {m.id for m in read_po(f, locale="zh_CN") if m.id}
        if wanted - have:
            missing[page] = sorted(wanted - have)[:3]
    assert not missing, f"English text missing from the catalogs (python scripts/book_i18n.py catalogs): {missing}"


# ---------------------------------------------------------------- the built sites


def built(page: Path) -> str:
    if not page.exists():
        pytest.fail(f"{page} is missing: run `make book` (it builds both languages)")
    return page.read_text(encoding="utf-8")


def english_pages() -> list[Path]:
    return sorted(p for p in HTML.rglob("*.html")
                  if not p.relative_to(HTML).parts[0] in {"zh", "_static", "_sources", "_images"}
                  and p.name not in {"genindex.html", "search.html"}
                  and not (p.parent == HTML and p.name == "index.html"))   # a redirect to intro.html


def article(text: str) -> str:
    found = re.search(r'<article class="bd-article"[^>]*>(.*?)</article>', text, re.S)
    assert found, "no article in the page"
    return found.group(1)


def test_every_page_links_to_its_twin_and_back():
    pages = english_pages()
    assert len(pages) >= 40
    for page in pages:
        rel = page.relative_to(HTML)
        twin = ZH / rel
        text, zh = built(page), built(twin)
        to_zh = re.search(r'<nav class="llmlab-lang"[^>]*>.*?href="([^"]+)" hreflang="zh-CN"', text, re.S)
        assert to_zh, f"{rel}: no link to the Chinese page"
        assert (page.parent / to_zh.group(1)).resolve() == twin.resolve(), rel
        to_en = re.search(r'<nav class="llmlab-lang"[^>]*>.*?href="([^"]+)" hreflang="en"', zh, re.S)
        assert to_en and (twin.parent / to_en.group(1)).resolve() == page.resolve(), f"zh/{rel}: no link back"
        assert '<html lang="zh-CN"' in zh or "<html lang=\"zh_CN\"" in zh, f"zh/{rel} is not marked Chinese"


def blocks(text: str, css: str) -> list[str]:
    return [html_lib.unescape(re.sub(r"<[^>]+>", "", b)).strip()
            for b in re.findall(rf'<div class="{css}[^"]*"[^>]*>(.*?)</div>', text, re.S)]


COMMENT_SPAN = re.compile(r'<span class="(?:c[h1m]?|sd)">[^<]*</span>')   # a comment or a docstring, as the highlighter marks it
NUMBER = re.compile(r"\d+(?:\.\d+)?")


def test_chinese_pages_show_the_same_code_outputs_and_numbers():
    """The Chinese page runs the same code and shows the same outputs: its comments and the words of its
    printed lines are translated (code catalogs), its code and every number are the English page's."""
    from collections import Counter

    for page in english_pages():
        rel = page.relative_to(HTML)
        en, zh = built(page), built(ZH / rel)
        code = lambda t: blocks(COMMENT_SPAN.sub("", t), "cell_input")
        assert code(en) == code(zh), f"{rel}: the code (comments aside) differs between the languages"
        # a view's labels ("top-1 probability" -> 第一名的概率) come from the views' dictionary, not the run
        outputs = lambda t: [Counter(NUMBER.findall(html_lib.unescape(re.sub(r"<[^>]+>", "", b))))
                             for b in re.findall(r'<div class="cell_output[^"]*"[^>]*>(.*?)</div>', t, re.S)
                             if "llmlab-view" not in b]
        assert outputs(en) == outputs(zh), f"{rel}: the outputs' numbers differ between the languages"
        # the numbers the build glued into the text: every glued number of one edition is among the
        # numbers glued into the other (a glued sentence may have a Chinese variant that carries its
        # numbers, or writes them the Chinese way: 1.35 亿 for 135 million)
        from collections import Counter

        values = lambda t: re.findall(r'<span class="pasted-text">([^<]*)</span>', t)
        numeric = lambda t: Counter(n for v in values(t) if re.fullmatch(r"[\s\d.,%x×+\-−–eE]+", v)
                                    for n in re.findall(r"\d+(?:\.\d+)?", v))
        every = lambda t: Counter(n for v in values(t) for n in re.findall(r"\d+(?:\.\d+)?", v))
        for one, other, side in ((en, zh, "English"), (zh, en, "Chinese")):
            lost = numeric(one) - every(other)
            assert not lost, f"{rel}: glued numbers of the {side} page missing from the other: {dict(lost)}"


def prose(text: str) -> str:
    body = article(text)
    body = re.sub(r"<(pre|code|math|script|style|div class=\"cell_output)[^>]*>.*?</\1>", " ", body, flags=re.S)
    body = re.sub(r'<span class="pasted-text">[^<]*</span>', " ", body)
    return html_lib.unescape(re.sub(r"<[^>]+>", " ", body))


def test_translated_pages_read_in_chinese_and_the_others_say_they_are_not():
    """A page whose catalog is complete is mostly Chinese prose; a page with entries left says so
    at its top, with the count, until a translator fills them."""
    from babel.messages.pofile import read_po

    complete = []
    for page in toc_pages():
        with open(book_i18n.CATALOGS / f"{page}.po", "rb") as f:
            left = sum(1 for m in read_po(f, locale="zh_CN") if m.id and (not m.string or m.fuzzy))
        zh = built(ZH / f"{page}.html")
        notice = re.search(r'llmlab-untranslated"><p>本页还有 (\d+) 段', zh)
        if left:
            assert notice and int(notice.group(1)) == left, f"zh/{page}: {left} entries left, notice {notice}"
            continue
        assert not notice, f"zh/{page}: complete catalog, yet the page says it is not"
        text = prose(zh)
        cjk, latin = len(CJK.findall(text)), len(LATIN.findall(text))
        # a Chinese character carries about as much as an English word of 4-5 letters
        assert cjk > latin / 4, f"zh/{page}: {cjk} Chinese characters against {latin} Latin letters"
        complete.append(page)
    print(f"{len(complete)} of {len(toc_pages())} pages complete in Chinese: {complete}")


def test_the_chinese_site_searches_chinese_words():
    import json

    index = built(ZH / "searchindex.js")
    data = json.loads(index[index.index("(") + 1:index.rindex(")")])
    chinese = [t for t in data["terms"] if CJK.search(t)]
    assert chinese, "the Chinese search index has no Chinese words"
    # words, not whole sentences: jieba cut them (the longest are set phrases and names)
    assert max(len(t) for t in chinese) <= 12, sorted(chinese, key=len)[-3:]
    assert "注意力" in data["terms"], "a word of many Chinese pages is not in the search index"


def test_the_live_model_ships_once():
    assert not (ZH / "_static" / "vendor" / "live").exists(), "the Chinese site copied the live model again"
    page = built(ZH / "chapters" / "05_self_attention.html")
    meta = re.search(r'<meta name="llmlab-live-static" content="([^"]+)"', page)
    assert meta, "Chinese pages must name the English site's _static/ for the live model"
    target = (ZH / "chapters" / meta.group(1)).resolve()
    assert target == (HTML / "_static").resolve() and (target / "live" / "llmlab-live.js").exists()


def test_view_titles_and_legends_are_translated_on_chinese_pages():
    """A view's title and legend come from the page's code, as data: the Chinese site writes the
    catalog's translation into the view (_ext/llmlab_i18n.py translate_views)."""
    import json

    from babel.messages.pofile import read_po

    checked = 0
    for page in toc_pages():
        with open(book_i18n.CATALOGS / f"{page}.po", "rb") as f:
            table = {m.id: m.string for m in read_po(f, locale="zh_CN")
                     if m.id and m.string and not m.fuzzy and book_i18n.VIEW_COMMENT in m.auto_comments}
        zh = built(ZH / f"{page}.html")
        for literal in book_i18n.VIEW_TEXT.findall(zh):
            text = json.loads(literal)
            assert text not in table, f"zh/{page}: the view text {text!r} is shown in English"
            checked += text in table.values()
    assert checked, "no translated view title on any Chinese page"


def test_every_catalog_is_complete():
    """No entry of any catalog is empty or fuzzy: every paragraph of the book reads in Chinese."""
    left = [(page, n - done) for page, n, done, fuzzy, empty in book_i18n.status() if done < n]
    assert not left, f"entries left untranslated or fuzzy (python scripts/book_i18n.py status): {left}"


@pytest.mark.parametrize("page", ["chapters/05_self_attention", "chapters/10b_how_weights_are_stored_lab", "intro"])
def test_a_reader_follows_the_switch_both_ways(page):
    """In a browser, the switch of an English page opens its Chinese twin, and that page's switch
    opens the English page again."""
    from browser import open_in_browser

    follow = ("setTimeout(function () { var a = document.querySelector('nav.llmlab-lang a');"
              " if (a) window.location.href = a.href; }, 50);")
    zh = open_in_browser(HTML / f"{page}.html", js=follow, wait_ms=4000)
    assert '<html lang="zh-CN"' in zh.dom and "llmlab-lang" in zh.dom, f"{page}: the switch did not open a Chinese page"
    en = open_in_browser(ZH / f"{page}.html", js=follow, wait_ms=4000)
    assert '<html lang="en"' in en.dom, f"zh/{page}: the switch did not open the English page"
    title = lambda dom: re.search(r"<title>(.*?)</title>", dom, re.S).group(1)
    assert title(zh.dom) != title(en.dom), "both languages show the same page title"


def test_the_chinese_pages_share_the_english_page_sources(tmp_path):
    """The download button's sources are the same notebooks in both editions: one copy, the English one;
    a source whose Chinese copy differs keeps it."""
    english, zh = tmp_path / "html", tmp_path / "html" / "zh"
    for root, text in ((english, "same"), (zh, "same")):
        (root / "_sources" / "chapters").mkdir(parents=True)
        (root / "_sources" / "chapters" / "a.ipynb").write_text(text)
    (english / "_sources" / "chapters" / "b.md").write_text("English")
    (zh / "_sources" / "chapters" / "b.md").write_text("中文")
    (zh / "chapters").mkdir()
    page = zh / "chapters" / "a.html"
    page.write_text('<a href="../_sources/chapters/a.ipynb">.ipynb</a> <a href="../_sources/chapters/b.md">.md</a>')
    assert book_i18n.share_sources(zh, english) == 1
    text = page.read_text()
    assert 'href="../../_sources/chapters/a.ipynb"' in text and 'href="../_sources/chapters/b.md"' in text
    assert not (zh / "_sources" / "chapters" / "a.ipynb").exists() and (zh / "_sources" / "chapters" / "b.md").exists()
    assert (page.parent / "../../_sources/chapters/a.ipynb").resolve().read_text() == "same"
