"""The gradebook in the CSV shapes that Canvas and Moodle import.

canvas.csv follows the gradebook CSV that Canvas exports and imports again (Grades > Import):

    Student,ID,SIS User ID,SIS Login ID,Section,attention_lesson
    Points Possible,,,,,3
    alicesmith,12345,,,,3

Canvas finds each student by `ID` (the Canvas user id, the number in the file names of a Canvas
download) or, where that is empty, by `SIS User ID` / `SIS Login ID` (from the roster). The last
column is the assignment: a new name makes a new assignment; to fill an existing one, name it as
Canvas exports it, "Title (assignment id)" (grade --title). The `Points Possible` row gives its
maximum.

moodle.csv follows the grading worksheet of a Moodle assignment (Assignment > View all
submissions > Grading action: Upload grading worksheet, with "Offline grading worksheet" on):

    Identifier,Full name,Email address,Grade,Maximum Grade,Last modified (grade),Feedback comments
    Participant 12345,Alice Smith,,3,3,"Thursday, 26 November 2026, 10:40 AM",3 of 3 points ...

Moodle reads the columns by their names: `Identifier` ("Participant " and the participant id, the
number in the folder names of a Moodle download), `Grade`, `Last modified (grade)` (a grade is only
replaced when this is newer than the one in Moodle, or with "Allow updating records that have been
modified more recently in Moodle than in the spreadsheet" ticked) and `Feedback comments`.

moodle_gradebook.csv is for Moodle's gradebook import (Grades > Import > CSV file), which lets you
choose the column that identifies a student; it needs the roster's `email` column:

    Email address,Full name,attention_lesson,Feedback
    alice@example.org,Alice Archer,3,3 of 3 points ...

Map "Email address" to the user's email address, the title column to the grade item and
`Feedback` to its feedback.

The student key is taken as the LMS id when it is a number (a Canvas or Moodle download, or a roster
of ids); other students get an empty id in canvas.csv and are left out of moodle.csv (the run says
how many). A student on the roster with no submission gets 0.
"""
from __future__ import annotations

import html
import time

from llmlab.grading.reports import csv_bytes, number

CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
MOODLE_COLUMNS = ["Identifier", "Full name", "Email address", "Grade", "Maximum Grade", "Last modified (grade)",
                  "Feedback comments"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]


def lms_id(student: str) -> str:
    return student if student.isdigit() else ""


def canvas_csv(book: list[dict], run: dict) -> bytes:
    title = run.get("title") or "llmlab grade"
    maximum = number(sum(run["points"].values()))
    rows = [["Points Possible", "", "", "", "", maximum]]
    rows += [[b["name"] or b["student"], lms_id(b["student"]), b.get("sis_user_id", ""), b.get("sis_login_id", ""),
              b.get("section", ""), b["total"]] for b in book]
    return csv_bytes(CANVAS_COLUMNS + [title], rows)


def moodle_time(seconds: float) -> str:
    """Moodle's own date format (English names, local time), which its worksheet import reads back:
    'Thursday, 26 November 2026, 10:40 AM'."""
    t = time.localtime(seconds)
    hour = t.tm_hour % 12 or 12
    return (f"{DAYS[t.tm_wday]}, {t.tm_mday} {MONTHS[t.tm_mon - 1]} {t.tm_year}, "
            f"{hour}:{t.tm_min:02d} {'AM' if t.tm_hour < 12 else 'PM'}")


def feedback_comment(entry: dict, rows: list[dict]) -> str:
    """A short comment for the LMS: the total and each exercise's status and points."""
    mine = [r for r in rows if r["student"] == entry["student"]]
    parts = [f"{r['exercise']}: {r['status']} ({r['points']}/{r['max_points']})" for r in mine]
    return html.escape(f"{entry['total']} of {entry['max']} points. " + "; ".join(parts), quote=False)


def moodle_csv(book: list[dict], run: dict, rows: list[dict]) -> bytes:
    stamp = moodle_time(run.get("finished", time.time()))
    out = [[f"Participant {lms_id(b['student'])}", b["name"] or b["student"], b.get("email", ""), b["total"],
            b["max"], stamp, feedback_comment(b, rows)] for b in book if lms_id(b["student"])]
    return csv_bytes(MOODLE_COLUMNS, out)


def moodle_gradebook_csv(book: list[dict], run: dict, rows: list[dict]) -> bytes:
    title = run.get("title") or "llmlab grade"
    out = [[b["email"], b["name"] or b["student"], b["total"], feedback_comment(b, rows)] for b in book if b.get("email")]
    return csv_bytes(["Email address", "Full name", title, "Feedback"], out)
