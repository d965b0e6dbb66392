"""The learner's language for the feedback of check(): English ("en", the default) or Chinese ("zh_CN").

The checks write every message piece with messages.say(template, **fields), which looks the English
template up in the current language's catalog (locale/<language>/LC_MESSAGES/llmlab.po). The setting
comes from set_language(), else from the environment variable LLMLAB_LANGUAGE, read each time a
message is written; speaking() sets it for a block of code (the grader writes its reports in English).

>>> set_language("zh_CN"); current_language()
'zh_CN'
>>> set_language(None)  # back to LLMLAB_LANGUAGE, or English
"""
from __future__ import annotations

import os
from contextlib import contextmanager

LANGUAGES = ("en", "zh_CN")
ENV = "LLMLAB_LANGUAGE"
_chosen: str | None = None  # set_language(); None: the environment variable decides


def _valid(language, where: str) -> str:
    if language not in LANGUAGES:
        raise ValueError(f"{where} got {language!r}; the feedback of the checks can be in {', '.join(map(repr, LANGUAGES))}. "
                         f"Use llmlab.exercises.set_language(\"zh_CN\") for Chinese or set_language(\"en\") for English.")
    return language


def set_language(language: str | None) -> None:
    """Choose the language of check()'s feedback: "en" or "zh_CN" (None: follow LLMLAB_LANGUAGE again)."""
    global _chosen
    _chosen = None if language is None else _valid(language, "set_language")


def current_language() -> str:
    """The language check() answers in now: set_language()'s choice, else LLMLAB_LANGUAGE, else "en"."""
    if _chosen is not None:
        return _chosen
    value = os.environ.get(ENV, "").strip()
    return _valid(value, f"the environment variable {ENV}") if value else "en"


@contextmanager
def speaking(language: str):
    """Within the block, messages are written in `language` ("en" or "zh_CN"); afterwards the setting is back."""
    global _chosen
    before, _chosen = _chosen, _valid(language, "speaking")
    try:
        yield
    finally:
        _chosen = before
