"""The Chinese pages' code cells and plots: comments, printed lines, check() messages, exercise titles and
plot labels read in Chinese, from catalogs, on the same execution as the English pages."""
import json
import re
from pathlib import Path

import pytest
from script_loader import load_file

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / "_build" / "html"
ZH = HTML / "zh"
book_i18n = load_file(ROOT / "scripts" / "book_i18n.py")

FIELDS = re.compile(r"\{\d+\}")
PLOT_IMAGE = re.compile(r'<img[^>]+src="[^"]*/_images/([0-9a-f]{64})(\.zh_CN)?\.png"')


def entries(po: Path) -> dict:
    from babel.messages.pofile import read_po

    with open(po, "rb") as f:
        return {m.id: m for m in read_po(f, locale="zh_CN") if m.id}


def lessons_and_labs() -> list[str]:
    return [p for p in book_i18n.book_pages() if p.startswith("chapters/")]


@pytest.mark.parametrize("page", lessons_and_labs())
def test_every_comment_of_the_shown_code_reads_in_chinese(page):
    """Each comment of a page's shown code cells has a translation in the page's code catalog (run
    `python scripts/book_i18n.py code --only PAGE` after changing a comment, then translate it)."""
    comments, _ = book_i18n.code_texts(page)
    po = book_i18n.CODE_CATALOGS / f"{page}.po"
    have = entries(po) if po.exists() else {}
    missing = [c for c in comments if c not in have or not have[c].string or have[c].fuzzy]
    assert not missing, f"{page}: {len(missing)} comments without a Chinese entry in {po.relative_to(ROOT)}: {missing[:5]}"


def test_code_catalogs_are_translated_and_keep_their_fields():
    """Every entry of the code catalogs is translated; a printed line keeps each of its number fields
    ({0}, {1}, ...) exactly once, so the Chinese line shows the numbers of the English one."""
    problems = []
    for po in sorted(book_i18n.CODE_CATALOGS.rglob("*.po")):
        for text, m in entries(po).items():
            if not m.string or m.fuzzy:
                problems.append(f"{po.name}: untranslated {text[:60]!r}")
            elif sorted(FIELDS.findall(text)) != sorted(FIELDS.findall(m.string)):
                problems.append(f"{po.name}: fields of {text[:60]!r} are not those of {m.string[:60]!r}")
            elif "\n" in m.string:
                problems.append(f"{po.name}: a translation of one line spans several: {m.string[:60]!r}")
    assert not problems, "\n".join(problems[:20])


def test_every_plot_label_of_the_build_reads_in_chinese():
    """Each title, axis label, legend entry and note that the build's plots show has an entry in llmlab's
    figure catalog (`python scripts/book_i18n.py figures` adds the new ones), with the same number fields."""
    from llmlab.visualization.figure_language import catalog_path

    folder = book_i18n.FIGURE_COPIES
    assert folder.is_dir() and any(folder.glob("*.json")), f"no kept figures in {folder}: run `make book`"
    wanted, ticks = book_i18n.figure_words(folder)
    have = entries(catalog_path("zh_CN"))
    missing = [w for w in wanted if w not in have or not have[w].string or have[w].fuzzy]
    assert not missing, f"{len(missing)} plot labels without a Chinese entry: {missing[:8]}"
    bad = [t for t, m in have.items() if m.string and sorted(FIELDS.findall(t)) != sorted(FIELDS.findall(m.string))]
    assert not bad, f"figure catalog entries whose number fields differ from the English: {bad[:5]}"


def test_chinese_pages_show_their_plots_drawn_in_chinese():
    """Every plot on a Chinese chapter page is the Chinese drawing of the English page's plot (same
    execution, NAME.zh_CN.png next to NAME.png), and the Chinese drawing differs from the English image."""
    pages = sorted(ZH.glob("chapters/*.html"))
    assert pages, "no Chinese pages: run `make book`"
    drawn = 0
    for page in pages:
        english = (HTML / page.relative_to(ZH)).read_text(encoding="utf-8")
        chinese = page.read_text(encoding="utf-8")
        plots_en = [name for name, suffix in PLOT_IMAGE.findall(english)]
        plots_zh = PLOT_IMAGE.findall(chinese)
        assert [name for name, _ in plots_zh] == plots_en, f"{page.name}: not the English page's plots"
        left = [name for name, suffix in plots_zh if not suffix]
        assert not left, f"{page.name}: {len(left)} plots still drawn in English: {left[:3]}"
        for name, _ in plots_zh:
            zh = ZH / "_images" / f"{name}.zh_CN.png"
            assert zh.read_bytes() != (HTML / "_images" / f"{name}.png").read_bytes(), f"{page.name}: {name} unchanged"
        drawn += len(plots_zh)
    assert drawn >= 50, f"only {drawn} plots on the Chinese chapter pages"


def test_chinese_pages_show_exercise_titles_and_check_messages_in_chinese():
    """No exercise keeps its English title, no check() result reads "well done", and no folded cell's
    toggle says "Show code cell source" on a Chinese page."""
    problems = []
    for page in lessons_and_labs():
        notebook = ROOT / f"{page}.ipynb"
        built = ZH / f"{page}.html"
        assert built.exists(), f"{built} is missing: run `make book`"
        text = built.read_text(encoding="utf-8")
        po = book_i18n.CATALOGS / f"{page}.po"
        same = {t for t, m in entries(po).items() if m.string == t}    # a name such as "RoPE" stays as it is
        for title in book_i18n.exercise_titles(notebook):
            from html import escape

            if title not in same and f"({escape(title, quote=False)})" in text:
                problems.append(f"{page}: exercise title {title!r} in English")
        if "well done:" in text:
            problems.append(f"{page}: a check message in English ('well done: ...')")
        if "Show code cell" in text or "Hide code cell" in text:
            problems.append(f"{page}: a folded cell's toggle in English ('Show code cell ...')")
        for prompt in book_i18n.code_prompts(notebook):
            from html import escape

            if f">{escape(prompt, quote=False)}<" in text:
                problems.append(f"{page}: a folded cell's toggle in English ({prompt!r})")
    assert not problems, "\n".join(problems)


def test_the_figure_words_are_taken_from_the_figure(monkeypatch):
    """figure_language finds a plot's labels, asks the catalog for each, fills in the numbers, and leaves
    the figure as it was; a label without an entry stays English."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from llmlab.visualization import figure_language as fl

    fig = Figure()
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1], label="mean over the prompts")
    ax.set_title("Knocking out one FFN at a time (grey: each prompt)")
    ax.set_xlabel("after block 12: 0.93")
    ax.legend()
    assert fl.wanted(fig) == ["Knocking out one FFN at a time (grey: each prompt)", "after block {0}: {1}",
                              "mean over the prompts"]
    english = fl.render_png(fig)
    monkeypatch.setattr(fl, "catalog", lambda language: {"after block {0}: {1}": "第 {0} 块之后：{1}"})
    seen = []
    real_render = fl.render_png
    monkeypatch.setattr(fl, "render_png", lambda f: seen.append([t.get_text() for _, t in fl.labels(f)]) or b"")
    fl.draw_in_language(fig, "zh_CN")
    assert "第 12 块之后：0.93" in seen[0] and "Knocking out one FFN at a time (grey: each prompt)" in seen[0]
    assert ax.get_xlabel() == "after block 12: 0.93" and real_render(fig) == english


VIEW_ENGLISH = ("tokens can be drawn", ">attention weight<", ">query \\ key<", "In the built book, this box")


def test_views_write_chinese_into_chinese_pages_before_their_scripts_run():
    """A view writes its readout into the page as text (what a reader sees before the script runs, or
    without scripts); on a Chinese page that text comes from the views' own dictionary (zh.js)."""
    left = []
    for page in sorted(ZH.glob("chapters/*.html")):
        text = page.read_text(encoding="utf-8")
        body = re.sub(r"<script\b.*?</script>", "", text, flags=re.S)
        left += [f"{page.name}: {words!r}" for words in VIEW_ENGLISH if words in body]
    assert not left, "English view text on Chinese pages: " + "; ".join(left[:10])


def test_the_view_dictionary_translates_a_readout():
    import sys

    sys.path.insert(0, str(ROOT / "_ext"))
    from llmlab_i18n import translate_view_html

    html = ('<div class="llmlab-view"><span>attention weight</span><div>all other 49,137 tokens</div>'
            '<script>var s = "attention weight";</script></div>')
    out = translate_view_html(html)
    assert "注意力权重" in out and "其余 49,137 个词元" in out and 'var s = "attention weight"' in out
