"""Write chapters/appendix_glossary.md from the per-chapter term lists in glossary/chNN.yml.

Each chapter adds its terms as a YAML list of {en, zh, definition, taught_in}; `make book` runs this
script before the build, so the glossary always holds exactly the terms the chapters define.

- `taught_in` says which page of the chapter teaches the term: `lesson` (NN_name.ipynb, the newcomer's
  path) or `lab` (NN_name_lab.ipynb, the evidence). The glossary links that page, and
  tests/test_glossary.py checks that the term really appears in its text.

- One entry per term: entries that name the same thing ("LM head" and "LM head (unembedding)",
  "contextual embedding" and "contextualized embedding") are merged into the first chapter's entry,
  which lists the other names and chapters.
- The page is a Sphinx glossary (a definition list, readable on a phone), so every term has an
  anchor; the book's extension (_ext/llmlab_book.py) links each term from the chapter that
  introduces it, with `chapter_terms()`.
- Definitions are plain text: "<bos>" is shown as written, never taken for an HTML tag.
"""
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]

# Different names for the same idea, by their normalised form (see `normalise`).
SYNONYMS = {
    "contextualized embedding": "contextual embedding",
    "contextual representation": "contextual embedding",
}


def normalise(name: str) -> str:
    """The key two names of one term share: lower case, no parenthetical, single spaces.

    >>> normalise("LM head (unembedding)")
    'lm head'
    """
    key = re.sub(r"\([^)]*\)", " ", name).lower()
    key = " ".join(key.split())
    return SYNONYMS.get(key, key)


def plain(text: str) -> str:
    """Text that Markdown shows exactly as written (backslash before every character it would interpret).

    >>> plain("such as <bos>, W_U and $x$")
    'such as \\\\<bos\\\\>, W\\\\_U and \\\\$x\\\\$'
    """
    text = " ".join(str(text).split())
    return re.sub(r"([\\`*_{}\[\]<>$|#~^=+!:&])", r"\\\1", text)


def chapter_id(text: str):
    """A chapter's number as the book writes it: 5 for "05", "10b" for a chapter between 10 and 11.

    >>> chapter_id("05"), chapter_id("10b")
    (5, '10b')
    """
    return int(text) if text.isdigit() else text.lstrip("0")


PAGES = ("lesson", "lab")


def page_of(stem: str):
    """(chapter number, "lesson" or "lab") of a notebook's name.

    >>> page_of("01_a_model_is_a_function_lab"), page_of("10b_how_weights_are_stored")
    ((1, 'lab'), ('10b', 'lesson'))
    """
    return chapter_id(stem.split("_", 1)[0]), "lab" if stem.endswith("_lab") else "lesson"


def chapter_files(root: Path = ROOT) -> dict:
    """(chapter number, "lesson" or "lab") -> the notebook's file name (without the folder)."""
    return {page_of(path.stem): path.name
            for path in sorted((root / "chapters").glob("[0-9][0-9]*_*.ipynb"))}


def load_entries(root: Path = ROOT) -> list:
    """Every entry of every glossary/chNN.yml, in chapter order, with its chapter number."""
    entries = []
    for path in sorted((root / "glossary").glob("ch*.yml")):
        chapter = chapter_id(path.stem.removeprefix("ch"))
        for entry in yaml.safe_load(path.read_text(encoding="utf-8")) or []:
            missing = {"en", "zh", "definition", "taught_in"} - set(entry)
            if missing:
                sys.exit(f"{path}: the entry {entry!r} lacks {', '.join(sorted(missing))}; every entry needs "
                         f"en, zh, definition and taught_in (lesson or lab: the page of the chapter that teaches it)")
            if entry["taught_in"] not in PAGES:
                sys.exit(f"{path}: the entry {entry['en']!r} has taught_in: {entry['taught_in']!r}; expected "
                         f"'lesson' or 'lab', the page of chapter {chapter} whose text teaches the term")
            entries.append({**entry, "en": str(entry["en"]).strip(), "chapter": chapter})
    return entries


def load_terms(root: Path = ROOT) -> list:
    """Merged terms, sorted by name: {en, zh, definition, chapter, taught_in, names (other names), chapters,
    pages}; `pages` lists (chapter, "lesson" or "lab") of every entry, the first one where it is taught."""
    terms = {}
    for entry in load_entries(root):
        key = normalise(entry["en"])
        if key not in terms:  # the first chapter to define it wins
            terms[key] = {**entry, "names": [], "chapters": [entry["chapter"]],
                          "pages": [(entry["chapter"], entry["taught_in"])]}
            continue
        term = terms[key]
        if entry["en"].lower() != term["en"].lower() and entry["en"] not in term["names"]:
            term["names"].append(entry["en"])
        if entry["chapter"] not in term["chapters"]:
            term["chapters"].append(entry["chapter"])
        if (entry["chapter"], entry["taught_in"]) not in term["pages"]:
            term["pages"].append((entry["chapter"], entry["taught_in"]))
    return sorted(terms.values(), key=lambda t: t["en"].lower())


def chapter_terms(root: Path = ROOT) -> dict:
    """(chapter number, "lesson" or "lab") -> [(the entry's name, the glossary term it links to, other words
    the page's prose uses for it)]: the terms each page teaches. The optional `in_text` list of an entry
    gives those words ("decoder-only" for "decoder-only model") when the prose never writes the name in
    full."""
    merged = {normalise(t["en"]): t["en"] for t in load_terms(root)}
    out = {}
    for entry in load_entries(root):
        forms = [str(f) for f in entry.get("in_text", [])]
        out.setdefault((entry["chapter"], entry["taught_in"]), []).append(
            (entry["en"], merged[normalise(entry["en"])], forms))
    return out


def render(terms: list, files: dict) -> str:
    def page_link(chapter, page):
        words = f"the {page} of chapter {chapter}"
        return f"[{words}]({files[chapter, page]})" if (chapter, page) in files else words

    lines = [
        "# Glossary 术语表",
        "",
        "Every term the chapters introduce, in English and Chinese, with the page that teaches it: a chapter's "
        "lesson (the path through the book) or its lab (the evidence). On that page, the first use of the term "
        "links here.",
        "",
        "```{glossary}",
    ]
    for term in terms:
        lines.append(term["en"])
        also = f" Also called: {', '.join(plain(n) for n in term['names'])}." if term["names"] else ""
        where = "Taught in " + page_link(*term["pages"][0])
        if len(term["pages"]) > 1:
            where += "; see also " + ", ".join(page_link(*p) for p in term["pages"][1:])
        lines.append(f"  **{plain(term['zh'])}** · {plain(term['definition'])}{also} {where}.")
        lines.append("")
    lines[-1] = "```"
    return "\n".join(lines) + "\n"


def main():
    terms = load_terms()
    out = ROOT / "chapters" / "appendix_glossary.md"
    out.write_text(render(terms, chapter_files()), encoding="utf-8")
    print(f"glossary: {len(terms)} terms -> {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
