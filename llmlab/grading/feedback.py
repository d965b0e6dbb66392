"""A feedback file for each student who handed in a notebook, safe to send as it is, and the executed
notebook beside it (a student who handed in nothing gets a gradebook row, no file).

REPORT/feedback/<student>.html holds that student's exercises only: status, points, and the
checker's message (what went in, what was expected, what came back, the hint, the error), in English
or in Chinese (`llmlab grade --language zh_CN`; the CSV and JSON reports stay English). Paths of
the grading machine (the sandbox folder, Python's folders, the model cache, your home, the
submissions and report folders) are replaced by a short label such as <python>, in the feedback and
in the executed notebook REPORT/feedback/<student>.ipynb.

>>> scrub("File /tmp/llmlab-grade-x1y2/work/a.py, line 3", [])
'File <sandbox>/work/a.py, line 3'
"""
from __future__ import annotations

import hashlib
import html
import re
import sys
from pathlib import Path

SANDBOX = re.compile(r"/tmp/llmlab-grade-[A-Za-z0-9_]+")


def private_paths(extra: list) -> list[tuple[str, str]]:
    """(path, label) for the grading machine's folders that a message may mention, longest first."""
    from llmlab.grading.sandbox import _cache_dir, _package_dir, site_dirs

    labelled = [(p, "<python>") for p in site_dirs() + [sys.prefix, sys.base_prefix]]
    labelled += [(str(_package_dir()), "<llmlab>"), (str(_cache_dir()), "<model cache>"),
                 (str(Path.home()), "<home>")] + [(str(p), "<instructor>") for p in extra]
    found = {}
    for path, label in labelled:
        for form in {str(path), str(Path(path).resolve())}:
            if len(form) > 1:
                found.setdefault(form, label)
    return sorted(found.items(), key=lambda item: -len(item[0]))


def scrub(text: str, paths: list[tuple[str, str]]) -> str:
    text = SANDBOX.sub("<sandbox>", str(text))
    for path, label in paths:
        text = text.replace(path, label)
    return text


def safe_name(student: str) -> str:
    """A file name for the student's files: letters, digits, '.', '_' and '-' only (and a short hash
    of the real key when anything had to change, so two students never share a file)."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", student).lstrip(".") or "student"
    return name if name == student else f"{name[:60]}-{hashlib.sha256(student.encode()).hexdigest()[:6]}"


STYLE = ("body{font-family:system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;color:#222}"
         "table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #ddd;padding:.4rem;text-align:left;"
         "vertical-align:top}pre{white-space:pre-wrap;margin:0;font-size:.9rem}.pass{color:#2e7d32}.fail{color:#c62828}"
         ".error{color:#ef6c00}.not-attempted,.missing{color:#757575}")


# The page's own words, per language (llmlab.exercises.language.LANGUAGES). The messages, the checker's
# and the grader's own, are translated with the catalog of check()'s messages (llmlab.exercises.messages.translate).
PAGE = {
    "en": {"lang": "en", "feedback": "feedback", "for": "Feedback for <b>{name}</b>: <b>{total} of {max} points</b>.",
           "late": " The submission was marked late.", "exercise": "Exercise", "result": "Result",
           "points": "Points", "says": "What the checker says",
           "hidden": "The hidden cases that grading uses differ from the ones the notebook checks itself; the "
                     "result above is the one that counts.",
           "status": {}},
    "zh_CN": {"lang": "zh-CN", "feedback": "反馈", "for": "<b>{name}</b> 的反馈：<b>得分 {total} / {max}</b>。",
              "late": "这份提交被标记为迟交。", "exercise": "练习", "result": "结果", "points": "得分",
              "says": "检查程序的说明",
              "hidden": "评分所用的隐藏测试用例与笔记本自带的检查不同；以上结果才是最终成绩。",
              "status": {"pass": "通过", "fail": "尚未通过", "not-attempted": "尚未作答", "error": "出错",
                         "missing": "未提交"}},
}


def feedback_html(entry: dict, rows: list[dict], title: str, paths: list[tuple[str, str]], language: str = "en") -> str:
    """The feedback page of one student (`rows`: that student's grade rows), in `language` ("en" or
    "zh_CN": the page's words and the messages; exercise ids and statuses' classes stay as they are)."""
    if language not in PAGE:
        raise ValueError(f"feedback pages can be written in {', '.join(map(repr, PAGE))}; got {language!r}.")
    words = PAGE[language]
    if language == "en":
        message = str
    else:
        from llmlab.exercises.messages import translate as message

    def esc(text):
        return html.escape(scrub(text, paths))

    name = esc(entry["name"] or entry["student"])
    lines = [f"<!doctype html><html lang=\"{words['lang']}\"><meta charset=\"utf-8\">"
             f"<title>{esc(title)}: {words['feedback']}</title>",
             f"<style>{STYLE}</style>",
             f"<h1>{esc(title)}</h1><p>" + words["for"].format(name=name, total=entry["total"], max=entry["max"])
             + (words["late"] if entry.get("late") else "") + "</p>",
             f"<table><tr><th>{words['exercise']}</th><th>{words['result']}</th><th>{words['points']}</th>"
             f"<th>{words['says']}</th></tr>"]
    for r in rows:
        shown = words["status"].get(r["status"], r["status"])
        lines.append(f"<tr><td><code>{esc(r['exercise'])}</code></td><td class=\"{esc(r['status'])}\">"
                     f"{esc(shown)}</td><td>{r['points']} / {r['max_points']}</td>"
                     f"<td><pre>{esc(message(r['message']))}</pre></td></tr>")
    lines.append(f"</table><p>{words['hidden']}</p></html>")
    return "\n".join(lines) + "\n"


def scrub_notebook(nb, paths: list[tuple[str, str]]):
    """The executed notebook with the grading machine's paths replaced in every output (in place)."""
    def clean(value):
        if isinstance(value, str):
            return scrub(value, paths)
        if isinstance(value, list):
            return [clean(v) for v in value]
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        return value

    for cell in nb.cells:
        if cell.cell_type == "code":
            for out in cell.get("outputs", []):
                for key in ("text", "traceback", "evalue", "data"):
                    if key in out:
                        out[key] = clean(out[key])
    return nb


def feedback_files(done, rows: list[dict], run: dict, paths: list) -> dict[str, bytes]:
    """feedback/<student>.html for every graded student, and the executed notebook beside it."""
    import nbformat

    from llmlab.grading.reports import gradebook

    files = {}
    book = {entry["student"]: entry for entry in gradebook(run, rows)}
    for sub, info in done:
        mine = [r for r in rows if r["student"] == sub.student]
        here = paths + ([(info["sandbox"], "<sandbox>")] if info else [])
        name = safe_name(sub.student)
        files[f"feedback/{name}.html"] = feedback_html(book[sub.student], mine, run["title"], here,
                                                       run.get("feedback_language", "en")).encode()
        if sub.notebook is not None and info is not None:
            files[f"feedback/{name}.ipynb"] = nbformat.writes(scrub_notebook(sub.notebook, here)).encode()
    return files
