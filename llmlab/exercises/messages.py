"""The words of check()'s feedback, in the learner's language (language.py), from a message catalog.

Every piece of feedback is written as say(template, **fields): the English template itself is the
msgid of the catalog locale/<language>/LC_MESSAGES/llmlab.po (gettext's format, read here without
dependencies), whose msgstr is the same template in that language; the fields (code, shapes,
numbers, other pieces) are filled into whichever template the current language picks. A template
with no entry stays English (tests/test_exercises_zh.py fails on any such template in the source).

>>> from llmlab.exercises.language import set_language
>>> set_language("zh_CN")
>>> say("{call} returned shape {got}; expected shape {expected}.", call="softmax(x)", got=(3,), expected=(2, 3))
'softmax(x) 返回的形状是 (3,)，应为 (2, 3)。'
>>> set_language(None)

The grader's feedback pages translate finished English messages (its reports keep English ones):
translate() matches the catalog's templates against the text, every field a group.
"""
from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path

from llmlab.exercises.language import current_language

LOCALE = Path(__file__).resolve().parent / "locale"
DOMAIN = "llmlab"


def catalog_path(language: str) -> Path:
    return LOCALE / language / "LC_MESSAGES" / f"{DOMAIN}.po"


@lru_cache(maxsize=None)
def catalog(language: str) -> dict[str, str]:
    """msgid -> msgstr of the language's .po file (fuzzy and untranslated entries left out; {} for English)."""
    path = catalog_path(language)
    if language == "en" or not path.exists():
        return {}
    return read_po(path.read_text(encoding="utf-8"))


def read_po(text: str) -> dict[str, str]:
    """The entries of a .po file: msgid -> msgstr. Only what this catalog uses: msgid, msgstr, comments,
    the fuzzy flag, strings continued over several lines (no plurals, no contexts)."""
    entries, fields, key, fuzzy = {}, {}, None, False

    def finish():
        nonlocal fields, key, fuzzy
        if fields.get("msgid") and fields.get("msgstr") and not fuzzy:
            entries[fields["msgid"]] = fields["msgstr"]
        fields, key, fuzzy = {}, None, False

    for line in text.splitlines() + [""]:
        line = line.strip()
        if not line:
            finish()
        elif line.startswith("#"):
            fuzzy = fuzzy or (line.startswith("#,") and "fuzzy" in line)
        elif line.startswith('"'):
            fields[key] += ast.literal_eval(line)
        else:
            word, _, rest = line.partition(" ")
            if word == "msgid" and "msgid" in fields:
                finish()
            key = word
            fields[key] = ast.literal_eval(rest)
    return entries


def write_po_string(text: str) -> str:
    """A msgid or msgstr as .po writes it (one quoted line, \\n and quotes escaped)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"'


STRICT = False  # the tests set it: a template without an entry in the current language's catalog raises


def say(template: str, **fields) -> str:
    """The template in the current language (the English one when the catalog lacks it), fields filled in."""
    language = current_language()
    text = template
    if language != "en":
        text = catalog(language).get(template)
        if text is None:
            if STRICT:
                raise KeyError(f"no {language} entry in {catalog_path(language)} for {template!r}")
            text = template
    return text.format(**fields) if fields else text


# ----------------------------------------------------------------------------------------------
# Finished English messages (the grader's reports) -> the catalog's language

_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def _compile(english: str) -> re.Pattern:
    """A template as a regular expression whose fields are named groups. A field named shape* matches a
    shape such as (2, 3), word* one name, num* a whole number; a field that ends the template the rest
    of the line, any other the shortest text up to the literal that follows."""
    parts, seen, pos = [], set(), 0
    for m in _PLACEHOLDER.finditer(english):
        parts.append(re.escape(english[pos:m.start()]))
        name = m.group(1)
        if name in seen:
            parts.append(f"(?P={name})")
        elif name.startswith("shape"):
            parts.append(f"(?P<{name}>\\([0-9, ]*\\))")
        elif name.startswith("word"):
            parts.append(f"(?P<{name}>[\\w.]+)")
        elif name.startswith("num"):
            parts.append(f"(?P<{name}>\\d+)")
        elif m.end() == len(english):
            parts.append(f"(?P<{name}>.*)")
        else:
            parts.append(f"(?P<{name}>(?s:.*?))")
        seen.add(name)
        pos = m.end()
    parts.append(re.escape(english[pos:]))
    start = "(?<![A-Za-z0-9_])" if english[:1].isalnum() else ""
    end = "(?![A-Za-z0-9_.])" if english[-1:] in ".,;:)" or english[-1:].isalnum() else ""
    return re.compile(start + "".join(parts) + end)


@lru_cache(maxsize=None)
def _patterns(language: str) -> list[tuple[re.Pattern, str]]:
    entries = sorted(catalog(language).items(), key=lambda e: -len(_PLACEHOLDER.sub("", e[0])))
    return [(_compile(english), translated) for english, translated in entries]


def translate(message: str, language: str = "zh_CN") -> str:
    """A finished English message in `language`: every catalog template found in it is replaced by its
    translation, longest first (messages are pieces joined: a text, then "\\nHint: " and a hint)."""
    for pattern, translated in _patterns(language):
        message = pattern.sub(lambda m: _PLACEHOLDER.sub(lambda p: m.group(p.group(1)), translated), message)
    return message
