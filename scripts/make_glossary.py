"""Write chapters/appendix_glossary.md from the per-chapter term lists in glossary/chNN.yml.

Each chapter adds its terms as a YAML list of {en, zh, definition}; `make book` runs this script
before the build, so the glossary always holds exactly the terms the chapters define.
"""
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def load_terms():
    terms = {}
    for path in sorted((ROOT / "glossary").glob("ch*.yml")):
        chapter = int(path.stem.removeprefix("ch"))
        entries = yaml.safe_load(path.read_text(encoding="utf-8")) or []
        for entry in entries:
            missing = {"en", "zh", "definition"} - set(entry)
            if missing:
                sys.exit(f"{path}: the entry {entry!r} lacks {', '.join(sorted(missing))}")
            key = entry["en"].strip().lower()
            terms.setdefault(key, {**entry, "chapter": chapter})  # the first chapter to define it wins
    return sorted(terms.values(), key=lambda t: t["en"].lower())


def main():
    terms = load_terms()
    lines = [
        "# Glossary 术语表",
        "",
        "Every term the chapters introduce, in English and Chinese, with the chapter that explains it.",
        "",
        "| English | 中文 | Meaning | Chapter |",
        "| --- | --- | --- | --- |",
    ]
    for term in terms:
        meaning = " ".join(str(term["definition"]).split()).replace("|", "\\|")
        lines.append(f"| **{term['en']}** | {term['zh']} | {meaning} | {term['chapter']} |")
    out = ROOT / "chapters" / "appendix_glossary.md"
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"glossary: {len(terms)} terms -> {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
