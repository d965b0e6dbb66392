"""Chapter 14 (contextual representations): rules its notebook keeps. The notebook is not executed
here (that is the book build); its cells are read."""
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = next((ROOT / "chapters").glob("14_*.ipynb"))


def cells(kind=None, tagged=None):
    out = []
    for cell in json.loads(CHAPTER.read_text(encoding="utf-8"))["cells"]:
        tags = cell.get("metadata", {}).get("tags", [])
        if (kind is None or cell["cell_type"] == kind) and (tagged is None or tagged(tags)):
            out.append("".join(cell["source"]))
    return out


def test_every_name_the_prose_quotes_is_glued():
    prose = "\n".join(cells("markdown"))
    code = "\n".join(cells("code"))
    quoted = set(re.findall(r"\{glue:text\}`([A-Za-z0-9_]+)", prose))
    glued = set(re.findall(r"glue\(\s*\"([A-Za-z0-9_]+)\"", code)) | set(re.findall(r"glue\(\s*f\"([a-z_]+)\{", code))
    # names glued in a loop as f"best_{tag}" with tag in s_en, s_zh, g_en, g_zh
    expanded = {f"{stem}{tag}" for stem in set(re.findall(r"glue\(\s*f\"([a-z_]+)\{tag\}", code))
                for tag in ["s_en", "s_zh", "g_en", "g_zh"]}
    expanded |= {f"best_{tag}_{end}" for tag in ["s_en", "s_zh", "g_en", "g_zh"] for end in ["depth", "ctrl"]}
    assert quoted - glued - expanded == set()


def test_the_chapter_opens_with_the_ramp():
    prose = "\n".join(cells("markdown"))
    order = [prose.find(heading) for heading in
             ["## The idea in two minutes", "## By hand", "## On the real models", "## The headline"]]
    assert -1 not in order and order == sorted(order)
    first_code = prose.find("```python")
    assert first_code == -1 or first_code > order[1]       # no code before the toy


def test_evidence_is_folded_in_titled_dropdowns():
    prose = "\n".join(cells("markdown"))
    titles = re.findall(r"```\{dropdown\} (.+)", prose)
    assert any("control" in t.lower() for t in titles) and len(titles) >= 3


def test_no_printed_library_source_and_no_visible_glue():
    visible = [c for c in cells("code", tagged=lambda t: not {"remove-cell", "hide-input", "hide-cell"} & set(t))]
    for source in visible:
        assert "show_source" not in source and "getsource" not in source
        assert "glue(" not in source


def test_the_exercises_count_the_sentences_they_use():
    prose = "\n".join(cells("markdown"))
    assert "eight English sentences" not in prose and "24 English sentences" not in prose
    assert "{glue:text}`n_en` English sentences" in prose
