"""What a chapter opened alone (in Colab) relies on from llmlab.notebook: no font warnings without a CJK font."""
import logging
import warnings

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib import font_manager

import llmlab.notebook as notebook


def draw_labels():
    fig, ax = plt.subplots()
    ax.set_title("attention")
    ax.set_xticks([0, 1, 2, 3], ["the", "cat", "天气", "很好"])
    fig.canvas.draw()
    plt.close(fig)


@pytest.fixture
def restore_style():
    saved = dict(matplotlib.rcParams)
    yield
    matplotlib.rcParams.update(saved)
    notebook._cjk_note_shown = False


def test_without_a_cjk_font_one_note_and_no_findfont_lines(monkeypatch, capsys, caplog, restore_style):
    kept = [f for f in font_manager.fontManager.ttflist if "CJK" not in f.name]
    monkeypatch.setattr(font_manager.fontManager, "ttflist", kept)
    font_manager.fontManager._findfont_cached.cache_clear()
    notebook._cjk_note_shown = False
    with caplog.at_level(logging.WARNING, logger="matplotlib.font_manager"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        notebook.use_book_style()
        notebook.use_book_style()              # a second chapter cell: no second note
        draw_labels()
    font_manager.fontManager._findfont_cached.cache_clear()
    assert not [r for r in caplog.records if "findfont" in r.getMessage()]
    assert not [w for w in caught if "missing from font" in str(w.message)], "one warning per Chinese glyph"
    assert capsys.readouterr().out.count("no CJK font is installed") == 1
    assert "Noto Sans CJK SC" not in matplotlib.rcParams["font.family"]


def test_with_a_cjk_font_it_is_the_fallback(monkeypatch, capsys, restore_style):
    fake = font_manager.FontEntry(fname="/nonexistent/NotoSansCJK.ttc", name="Noto Sans CJK SC")
    monkeypatch.setattr(font_manager.fontManager, "ttflist", [*font_manager.fontManager.ttflist, fake])
    notebook._cjk_note_shown = False
    notebook.use_book_style()
    assert matplotlib.rcParams["font.family"][:2] == ["DejaVu Sans", "Noto Sans CJK SC"]
    assert capsys.readouterr().out == ""
