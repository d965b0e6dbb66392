"""Terms in reading order: a lesson uses no glossary term before the page that teaches it.

The lesson path is the book's own order (_toc.yml), lessons only: a reader may skip every lab. Each
glossary/chNN.yml entry names the page that teaches its term (chapter NN's lesson or lab). A lesson that
uses a term taught by a later lesson, or by any lab, stops a newcomer, unless the very sentence defines
it: the term in bold, or followed by a parenthesis that says in words what it is ("the KV cache (the
keys and values of past tokens, kept for the next step)"); a bare "(chapter 10)" is a pointer, not a
definition. A lesson that defines a term in place has taught it: the lessons after it may use it.
Code, formulas and links are not prose and are not read. Chapter 0 (setting up) is not on the path:
the lessons start at chapter 1.
"""
import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import make_glossary  # noqa: E402

_spec = importlib.util.spec_from_file_location("llmlab_book_ext", ROOT / "_ext" / "llmlab_book.py")
_ext = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ext)


def lesson_path() -> list:
    """The lessons in reading order, as chapters/NN_name."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    return [c["file"] for part in toc["parts"] for c in part["chapters"] if re.match(r"chapters/\d", c["file"])]


LESSONS = lesson_path()
PATH = [lesson for lesson in LESSONS if not lesson.startswith("chapters/00_")]

# Glossary names that are also everyday words, and mean the glossary's narrow sense only when the prose
# says so: "memory" (an encoder's output, chapter 13), "kernel" (a fused GPU kernel, chapter 11) and
# "decode" (a decoding step, chapter 10; also what a tokenizer does to ids, chapter 2).
EVERYDAY = {"memory (encoder output)", "kernel (fused kernel)", "decode (decoding step)"}


def position(chapter, page) -> float:
    """Where a page sits on the lesson path: lesson k at k; a lab is off the path (never read before a lesson)."""
    index = next(k for k, f in enumerate(LESSONS) if make_glossary.page_of(f.split("/")[1])[0] == chapter)
    return index if page == "lesson" else float("inf")


def terms() -> list:
    """(glossary name, the pattern of its forms in prose, position of the first page that teaches it)."""
    out = {}
    for entry in make_glossary.load_entries(ROOT):
        key = make_glossary.normalise(entry["en"])
        where = position(entry["chapter"], entry["taught_in"])
        name, forms, first = out.get(key, (entry["en"], [], where))
        out[key] = (name, forms + [str(f) for f in entry.get("in_text", [])] + [entry["en"]], min(first, where))
    return [(name, _ext._pattern(forms[-1], forms[:-1]), first) for name, forms, first in out.values()
            if name not in EVERYDAY]


def prose(notebook: Path) -> str:
    """A lesson's markdown as a reader reads it: no code blocks, inline code, formulas, roles or link targets."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    text = "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    kept, open_fences = [], []                   # the fences open at this line: ("code" or "directive", its ticks)
    for line in text.splitlines():
        fence = re.match(r"^\s*(`{3,}|~{3,})(.*)$", line)
        if fence and open_fences and fence.group(1) == open_fences[-1][1] and not fence.group(2).strip():
            open_fences.pop()                    # a bare fence closes the innermost block
        elif fence and not (open_fences and open_fences[-1][0] == "code"):
            open_fences.append(("directive" if fence.group(2).startswith("{") else "code", fence.group(1)))
        elif not (open_fences and open_fences[-1][0] == "code") and not re.match(r"^:[a-z-]+:", line):
            kept.append(line)                    # prose, inside a directive (an exercise, a box) or not
    text = "\n".join(kept)
    text = re.sub(r"\$\$.*?\$\$|\$[^$\n]+\$", " ", text, flags=re.S)        # formulas
    text = re.sub(r"\{(?:glue:text|glue|numref|ref|eq)\}`[^`]*`", " 1 ", text)
    text = re.sub(r"\{doc\}`([^`<]*)<[^`]*>`", r"\1", text)                # {doc}`words <target>` -> words
    text = re.sub(r"\{doc\}`[^`]*`", " ", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)                                # [words](target) -> [words]
    text = re.sub(r"`[^`\n]*`", " ", text)                                   # inline code
    return text


def sentences(text: str) -> list:
    return [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z*(\[])|\n\s*\n|\n\s*[-*] ", text) if s.strip()]


def defined_in_place(sentence: str, match: re.Match) -> bool:
    """The sentence defines the term where it uses it: the term in bold or in italics (the book's way of
    introducing a word), or followed by what it is: a parenthesis of words, or an apposition (", a random
    draw of the next token"), or it opens a parenthesis that explains it ("(sampling: the next token is
    drawn at random)")."""
    for marked in re.finditer(r"\*\*(.+?)\*\*|(?<![*\w])\*([^*\n]+?)\*(?![*\w])", sentence, flags=re.S):
        if marked.start() <= match.start() and match.end() <= marked.end():
            return True
    after, before = sentence[match.end():], sentence[:match.start()]
    paren = re.match(r"\s*(?:[\w-]+\s+)?\(([^()]*)\)", after)      # "sliding-window layers (whose ...)"
    if paren and len(paren.group(1).split()) >= 3 and not re.fullmatch(
            r"(?:see |as in |from |in )?(?:chapter|the lab of chapter|lab) \w+[^,;]*", paren.group(1).strip()):
        return True
    if re.match(r",\s+(?:a|an|the|one|which|whose|that)\s+\w+\s+\w+", after):
        return True
    return before.endswith("(") and re.match(r":\s+\S+\s+\S+\s+\S+", after) is not None


def early_uses(root: Path = ROOT) -> list:
    """(lesson, term, the sentence) for every use of a term on a lesson before the page that teaches it
    (or an earlier lesson that defines it in place)."""
    catalogue = terms()
    pages = {lesson: sentences(prose(root / (lesson + ".ipynb"))) for lesson in PATH}
    introduced = {}
    for name, pattern, first in catalogue:
        defines = [LESSONS.index(lesson) for lesson in PATH for s in pages[lesson]
                   if any(defined_in_place(s, m) for m in pattern.finditer(s))]
        introduced[name] = min([first] + defines)
    found = []
    for lesson in PATH:
        index = LESSONS.index(lesson)
        for sentence in pages[lesson]:
            for name, pattern, first in catalogue:
                if introduced[name] <= index:
                    continue
                if pattern.search(sentence):
                    found.append((lesson.split("/")[1], name, " ".join(sentence.split())[:160]))
    return found


def test_no_lesson_uses_a_term_before_the_page_that_teaches_it():
    early = early_uses()
    assert not early, (f"{len(early)} uses of a term before the lesson that teaches it (define it in the "
                       "sentence, in bold or in a parenthesis of words, or say it in plain words):\n"
                       + "\n".join(f"  {lesson}: {name!r} in: {sentence}" for lesson, name, sentence in early))


def test_prose_keeps_directive_text_and_drops_code(tmp_path):
    notebook = tmp_path / "page.ipynb"
    source = ("```{exercise} Title\n:label: x\nWrite the **final norm**.\n```\n\nBetween.\n\n"
              "```python\nkv_cache = 1\n```\nAfter the code.\n")
    notebook.write_text(json.dumps({"cells": [{"cell_type": "markdown", "source": [source]}]}))
    text = prose(notebook)
    assert "Write the **final norm**." in text and "Between." in text and "After the code." in text
    assert "kv_cache" not in text and ":label:" not in text


def test_the_check_sees_an_early_term_and_accepts_one_defined_in_place():
    later = next((name, pattern) for name, pattern, first in terms() if first == LESSONS.index("chapters/10_kv_cache"))
    name, pattern = later
    plain = f"Grouped heads shrink the {name} of a long text."
    match = pattern.search(plain)
    assert match and not defined_in_place(plain, match)
    bold = f"Grouped heads shrink the **{name}** of a long text."
    assert defined_in_place(bold, pattern.search(bold))
    words = f"Grouped heads shrink the {name} (what a model keeps of past tokens) of a long text."
    assert defined_in_place(words, pattern.search(words))
    pointer = f"Grouped heads shrink the {name} (chapter 10) of a long text."
    assert not defined_in_place(pointer, pattern.search(pointer))
    apposition = f"Grouped heads shrink the {name}, the stored keys and values of past tokens."
    assert defined_in_place(apposition, pattern.search(apposition))
    opened = f"Grouped heads shrink it ({name}: the stored keys and values of past tokens)."
    assert defined_in_place(opened, pattern.search(opened))
