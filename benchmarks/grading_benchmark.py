"""How fast does `llmlab grade` get through a class? Grades a synthetic class (copies of a solved
notebook, of the untouched student copy and, for the example lesson, of a wrong answer) and prints
submissions per minute, per minute per core, and what a class of 100 would take here.

    .venv/bin/python benchmarks/grading_benchmark.py [--students 40] [--jobs N] [--lesson NOTEBOOK]

The default lesson is the instructor guide's example (`llmlab example`); --lesson takes a chapter
such as chapters/05_self_attention.ipynb. Each notebook runs in its own sandbox, so bubblewrap must
work here. The load average printed before and after says how busy the machine was: the figures are
only comparable between runs on an idle machine.
"""
import argparse
import copy
import os
import resource
import tempfile
import time
from pathlib import Path

import nbformat

from llmlab.grading.assign import student_copy
from llmlab.grading.example import ANSWERS, LESSON, lesson_text
from llmlab.grading.grade import default_jobs, grade


def synthetic_class(folder: Path, solved, n: int) -> dict[str, int]:
    """n submissions, one folder each, cycling through the kinds; returns how many of each kind."""
    student, exercises = student_copy(solved)
    kinds = {"solved": solved, "empty": student}
    if exercises[:1] == ["softmax"]:   # the example lesson: carol's softmax, right on 4 of 5 cases
        wrong = copy.deepcopy(student)
        stub = next(c for c in wrong.cells if "exercise" in c.metadata.get("tags", []))
        stub.source = ANSWERS["carol"]["softmax"]
        kinds["wrong"] = wrong
    counts = dict.fromkeys(kinds, 0)
    names = list(kinds)
    for i in range(n):
        kind = names[i % len(names)]
        (folder / f"s{i:03d}").mkdir(parents=True)
        nbformat.write(kinds[kind], folder / f"s{i:03d}" / "submission.ipynb")
        counts[kind] += 1
    return counts


def cpu_seconds() -> float:
    """CPU seconds used by this process and the processes it (and they) waited for."""
    return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                 resource.getrusage(resource.RUSAGE_CHILDREN)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--students", type=int, default=40)
    parser.add_argument("--jobs", type=int, default=None, help="default: the cores")
    parser.add_argument("--lesson", default=None, help="a solved notebook (default: the example lesson)")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--run-every-cell", action="store_true", help="run every cell (as grade did before it "
                                                                     "skipped the cells no exercise needs)")
    args = parser.parse_args()

    solved = nbformat.read(args.lesson, as_version=4) if args.lesson else nbformat.reads(lesson_text(), as_version=4)
    jobs = args.jobs or default_jobs()
    with tempfile.TemporaryDirectory(prefix="llmlab-grading-benchmark-") as tmp:
        tmp = Path(tmp)
        counts = synthetic_class(tmp / "submissions", solved, args.students)
        assigned = tmp / "assigned.ipynb"
        nbformat.write(student_copy(solved)[0], assigned)
        phases: list[dict] = []
        cpu_before = cpu_seconds()
        load_before = os.getloadavg()
        start = time.perf_counter()
        rows = grade(tmp / "submissions", tmp / "report", assignment=assigned, jobs=jobs, timeout=args.timeout,
                     verbose=False, run_every_cell=args.run_every_cell, phases=phases)
        seconds = time.perf_counter() - start
        load_after = os.getloadavg()
        cpu = cpu_seconds() - cpu_before
    passed = {s for s in {r["student"] for r in rows} if all(r["status"] == "pass" for r in rows if r["student"] == s)}
    per_minute = args.students / seconds * 60
    print(f"lesson {args.lesson or LESSON}: {args.students} submissions ({', '.join(f'{v} {k}' for k, v in counts.items())}), "
          f"{jobs} jobs on {default_jobs()} cores")
    print(f"load average before {load_before[0]:.1f}, after {load_after[0]:.1f} (1 minute)")
    print(f"graded in {seconds:.0f} s: {per_minute:.1f} submissions per minute, "
          f"{per_minute / min(jobs, default_jobs()):.2f} per minute per core")
    print(f"a class of 100 would take {100 / per_minute:.1f} minutes here")
    cpu += sum(p.get("kernel cpu", 0) for p in phases)
    print(f"CPU time: {cpu / args.students:.1f} s per submission (grader, its workers, the kernels), so about "
          f"{100 * cpu / args.students / 60 / min(jobs, default_jobs()):.1f} minutes for 100 on "
          f"{min(jobs, default_jobs())} cores no one else uses")
    if phases:
        mean = {k: sum(p.get(k, 0) for p in phases) / len(phases) for k in ("kernel start", "cells", "checks")}
        mean["of which kernel CPU"] = sum(p.get("kernel cpu", 0) for p in phases) / len(phases)
        skipped = sum(p.get("skipped", 0) for p in phases) / len(phases)
        print("one submission, on average: " + ", ".join(f"{k} {v:.1f} s" for k, v in mean.items())
              + f"; {skipped:.0f} cells not run" + (" (--run-every-cell)" if args.run_every_cell else ""))
    assert len(passed) == counts["solved"], f"{len(passed)} submissions passed everything; {counts['solved']} were solved"


if __name__ == "__main__":
    main()
