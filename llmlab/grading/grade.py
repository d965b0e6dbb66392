"""`llmlab grade`: run every submitted notebook in its own sandbox and grade its exercises.

How a class is graded:
1. Every submission is found (at any depth; Canvas and Moodle file names give the student id) and
   read into memory first (symbolic links and non-files are refused with a row that says so); one
   notebook per student is kept (the newest); a roster adds the students who handed nothing in
   (submissions.py). --shard K/N keeps a stable share of the students.
2. A notebook runs top to bottom in its own Jupyter kernel, inside a bubblewrap sandbox (a private
   file system with only the sandbox folder writable, no network, its own process tree, a clean
   environment and HOME). Where no sandbox can be made, nothing runs (SandboxUnavailable) unless
   the instructor passes --unsafe-no-sandbox. Cells that raise do not stop the run. A cell the
   student did not change is skipped when no exercise needs what it makes (needed.py: a chapter's
   figures and measurements); --run-every-cell runs them all. With --jobs N each kernel gets
   1/N of the cores' threads.
3. check("<id>", fn) in the notebook only hands `fn` to the grader. The grader then runs each
   expected exercise's check in its own process: every call of the learner's function sends the
   inputs to the kernel as plain data and gets the answer back as plain data (wire.py), which the
   check compares here, counting partial credit. The grader times each call and interrupts the
   kernel when time is up. Hidden random cases are drawn with a secret salt.
4. The kernel and every process it started are killed before the worker takes its next notebook.
   With --jobs N, N worker processes grade side by side, each notebook in its own sandbox; the
   models the assignment loads are converted once, before, into the cache every sandbox reads.
5. The expected exercises come from the instructor (--assignment and/or --expected), never from
   the submission.
6. The reports (reports.py, lms.py) and a feedback file per submitting student (feedback.py) are written
   atomically into a new --out folder, and their SHA-256 printed.
"""
from __future__ import annotations

import os
import re
import secrets
import subprocess
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from llmlab.exercises import run_check
from llmlab.exercises.language import speaking
from llmlab.exercises.core import set_hidden_salt
from llmlab.exercises.results import DEFAULT_TIME_LIMIT, CheckResult, _TimeUp
from llmlab.grading.needed import NOT_RUN, assigned_cells, plan
from llmlab.grading.remote import INTERRUPT_GRACE, BadAnswer, Kernel, KernelGone, RemoteLearner
from llmlab.grading.sandbox import (NO_SANDBOX, Box, SandboxUnavailable, cpu_seconds, descendants, job_threads,
                                    kernel_manager_class, kill_new_descendants, sandbox_problem, say_containment,
                                    set_subreaper)
from llmlab.grading.submissions import Submission, cell_label, parse

CALL_LIMIT = DEFAULT_TIME_LIMIT  # seconds for one call of a learner's function, timed by the grader


def require_instructor_tools() -> None:
    """Raise ImportError with what to install when nbclient or ipykernel is missing."""
    from llmlab.notebook import install_command

    try:
        import ipykernel  # noqa: F401
        import nbclient  # noqa: F401
    except ImportError as e:
        raise ImportError(f"the instructor extra is not installed: {install_command('instructor')} (it brings "
                          f"nbformat, nbclient and ipykernel); {e}") from None


def default_jobs() -> int:
    """The cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def run_submission(sub: Submission, ids: list[str], timeout: float, kernel_name: str = "python3",
                   sandboxed: bool = True, call_limit: float = CALL_LIMIT, instructor=None,
                   threads: int | None = None) -> dict:
    """Run one parsed submission in a fresh sandbox and grade `ids`. `instructor` (needed.instructor_cells
    of the assignment) lets it skip the cells no exercise needs (needed.py); `threads` caps the
    kernel's compute threads. Returns {"status": "ok" | "timeout" | "dead-kernel" | "failed", "detail",
    "stopped_at", "results": {id: CheckResult}, "seconds", "skipped": [cell index, ...], "phases"}."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    problem = sandbox_problem() if sandboxed else ""
    if problem:  # never run a submission unsandboxed because the sandbox went missing
        raise SandboxUnavailable(NO_SANDBOX.format(why=problem))
    start = time.perf_counter()
    info = {"status": "ok", "detail": "", "stopped_at": None, "results": {}}
    nb = sub.notebook
    skip = plan(nb, instructor)
    info["skipped"] = sorted(skip)
    info["phases"] = phases = {}   # seconds: kernel start, cells, checks; CPU seconds of the kernel's processes
    box = Box(sandboxed, threads)
    info["sandbox"] = str(box.root)
    before = descendants()
    deadline = time.monotonic() + timeout
    state = {"cell": None}

    def on_cell_start(cell, cell_index, **kw):
        state["cell"] = cell_index

    client = NotebookClient(
        nb, kernel_name=kernel_name, allow_errors=True, startup_timeout=max(30, int(timeout)),
        timeout_func=lambda cell: max(1, int(deadline - time.monotonic())), interrupt_on_timeout=False,
        on_cell_start=on_cell_start, record_timing=False, shutdown_kernel="immediate",
        kernel_manager_class=kernel_manager_class(box))
    try:
        env = box.env()
        with client.setup_kernel(env=env, cwd=str(box.root / "work"), stderr=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL):
            phases["kernel start"] = time.perf_counter() - start
            try:
                for index, cell in enumerate(nb.cells):
                    if index in skip:
                        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=NOT_RUN)]
                        continue
                    client.execute_cell(cell, index)
            except CellTimeoutError:
                info.update(status="timeout", stopped_at=state["cell"],
                            detail=f"did not finish within {timeout:g} s (cell {cell_label(state['cell'])} was still running)")
                from jupyter_core.utils import run_sync
                run_sync(client.km.interrupt_kernel)()
                _drain(client, INTERRUPT_GRACE)
            phases["cells"] = time.perf_counter() - start - phases["kernel start"]
            kernel = Kernel(client)
            try:
                listed = kernel.request({"op": "list"}, 30).get("ok")
            except (Exception, KernelGone, BadAnswer, _TimeUp):
                listed = []
            recorded = {i for i in listed if isinstance(i, str)} if isinstance(listed, list) else set()
            for ex in ids:
                if ex not in recorded:
                    continue
                try:
                    with speaking("en"):  # the reports stay English; the feedback pages translate them
                        info["results"][ex] = run_check(ex, RemoteLearner(kernel, ex, call_limit), partial=True)
                except (KernelGone, BadAnswer) as e:
                    info["results"][ex] = CheckResult(ex, "error", f"not graded: {e}")
            phases["kernel cpu"] = cpu_seconds(descendants() - before)
    except DeadKernelError as e:
        info.update(status="dead-kernel", stopped_at=state["cell"],
                    detail=f"the kernel died in cell {cell_label(state['cell'])} ({str(e)[:200]})")
    except Exception as e:  # kernel did not start, ...
        info.update(status="failed", stopped_at=state["cell"], detail=f"{type(e).__name__}: {str(e)[:300]}")
    finally:
        if "cells" in phases:
            phases["checks"] = time.perf_counter() - start - phases["kernel start"] - phases["cells"]
        kill_new_descendants(before)
        box.remove()
    for index, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if out.get("output_type") == "error":
                sub.cell_errors[index] = f"{str(out.get('ename'))[:80]}: {str(out.get('evalue'))[:300]}"
                break
    info["seconds"] = time.perf_counter() - start
    return info


def _drain(client, seconds: float) -> None:
    """Wait for the interrupted cell's reply so the kernel is idle again."""
    from jupyter_core.utils import run_sync
    import queue
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            msg = run_sync(client.kc.get_shell_msg)(timeout=end - time.monotonic())
        except (queue.Empty, TimeoutError):
            return
        if msg.get("msg_type") == "execute_reply":
            return



# ---------------------------------------------------------------------------------------------- a class


def grade_one(sub: Submission, ids: list[str], timeout: float, kernel: str, sandboxed: bool,
              call_limit: float, instructor=None, threads: int | None = None) -> tuple[Submission, dict | None]:
    """Parse and run one submission; one bad file never stops the run."""
    parse(sub)
    info = None
    if not sub.problem:
        try:
            info = run_submission(sub, ids, timeout, kernel, sandboxed, call_limit, instructor, threads)
        except Exception as e:
            sub.problem = f"grading failed: {type(e).__name__}: {str(e)[:300]}"
    sub.data = None  # the bytes are not needed any more (and need not travel back from a worker)
    return sub, info


def _start_worker(salt: int, threads: int | None = None) -> None:
    """A worker process of --jobs: the grader's salt, the subreaper that finds detached processes, and
    its share of the cores for the checks it computes."""
    set_hidden_salt(salt)
    set_subreaper(True)
    if threads:
        import torch
        torch.set_num_threads(threads)



def default_title(assignment) -> str:
    """The assignment's name in the reports: the assigned notebook's file name (without .ipynb)."""
    from llmlab.grading.assign import notebook_paths

    paths = notebook_paths([assignment]) if assignment else []
    return paths[0].stem if len(paths) == 1 else Path(assignment).name if assignment else "llmlab grade"


MODEL_LOAD = re.compile(r"""\bload\(\s*(['"])([^'"]+)\1""")


def warm_model_cache(assignment, verbose: bool) -> list[str]:
    """Convert the offline models the assignment loads (load("smollm2-135m")) into the cache once, here:
    every sandbox then reads the converted weights instead of converting them again."""
    import nbformat

    from llmlab.grading.assign import notebook_paths
    from llmlab.registry import offline_model

    names = []
    for path in notebook_paths([assignment]) if assignment else []:
        for cell in nbformat.read(path, as_version=4).cells:
            for m in MODEL_LOAD.finditer(cell.source if cell.cell_type == "code" else ""):
                model = offline_model(m.group(2))
                if model is not None and model.name not in names:
                    names.append(model.name)
    for name in names:
        from llmlab.loading import load
        start = time.perf_counter()
        load(name)
        if verbose:
            print(f"model cache: {name} ready ({time.perf_counter() - start:.0f} s); every sandbox reads it")
    return names


def grade(submissions, out_dir, timeout: float = 120, expected: list[str] | None = None, assignment=None,
          kernel: str = "python3", verbose: bool = True, call_limit: float = CALL_LIMIT,
          unsafe_no_sandbox: bool = False, jobs: int | None = None, roster=None,
          shard: tuple[int, int] | None = None, points: dict | None = None, title: str | None = None,
          run_every_cell: bool = False, phases: list | None = None, language: str | None = None) -> list[dict]:
    """Grade every notebook under `submissions` against the instructor's exercises (`assignment`
    notebook or folder, and/or `expected` ids); write the reports and feedback files into the new
    folder out_dir; return the grade rows. See the module docstring for the steps. With an assignment,
    the cells no exercise needs are not run (needed.py) unless run_every_cell. `phases`, a list, receives
    each submission's seconds of kernel start, cells and checks. `language` ("en" or "zh_CN"; None:
    LLMLAB_LANGUAGE, else English) is the language of the students' feedback pages."""
    from llmlab.grading.feedback import feedback_files, private_paths
    from llmlab.grading.outputs import prepare_out, write_reports
    from llmlab.grading.reports import summary_table, write_atomically
    from llmlab.grading.submissions import (collect, exercise_points, expected_exercises, in_shard, match_roster,
                                            newest_per_student, read_roster)

    from llmlab.exercises.language import LANGUAGES, current_language

    require_instructor_tools()
    if language is not None and language not in LANGUAGES:
        raise ValueError(f"--language {language!r}: the feedback pages can be in {', '.join(LANGUAGES)} "
                         "(e.g. --language zh_CN for Chinese).")
    language = language or current_language()
    submissions, out_dir = Path(submissions), Path(out_dir)
    if not submissions.is_dir():
        raise FileNotFoundError(f"{submissions} is not a folder. Pass the folder that holds the submitted .ipynb files.")
    if not expected and not assignment:
        raise ValueError("say which exercises to grade: --assignment NOTEBOOK (the assigned notebook or folder) "
                         "or --expected id1,id2. The list never comes from the submissions.")
    ids = expected_exercises(expected, assignment)
    if not ids:
        raise ValueError(f"the assignment {assignment} has no check(\"<id>\", ...) calls: nothing to grade.")
    worth = exercise_points(ids, assignment, points)
    entries = read_roster(roster) if roster else None
    if shard is not None and not (len(shard) == 2 and 1 <= shard[0] <= shard[1]):
        raise ValueError(f"--shard K/N needs 1 <= K <= N; got {shard[0]}/{shard[1]}.")
    found = collect(submissions)  # every submission is in memory before any code runs
    if not found:
        others = sum(len(files) for _, _, files in os.walk(submissions))
        raise FileNotFoundError(f"no .ipynb files in {submissions} (searched every folder below it; {others} other "
                                "files). Pass the folder that holds the submitted notebooks.")
    subs, superseded = newest_per_student(found)
    absent, unknown = match_roster(subs, entries) if entries is not None else ([], [])
    problem = "" if unsafe_no_sandbox else sandbox_problem()
    if problem:
        raise SandboxUnavailable(NO_SANDBOX.format(why=problem))
    out_dir = prepare_out(out_dir, [submissions] + ([Path(assignment)] if assignment else []))
    subs = [s for s in subs if in_shard(s.student, shard)]
    absent = [e for e in absent if in_shard(e["student"], shard)]
    jobs = max(1, min(jobs or default_jobs(), len(subs) or 1))
    if verbose:
        say_containment(not unsafe_no_sandbox, [submissions, out_dir] + ([Path(assignment)] if assignment else []))
        for sub in superseded:
            print(f"superseded: {sub.path} (student {sub.student} handed in a newer notebook; only that one is graded)")
        for sub in unknown:
            print(f"not on the roster: {sub.path} (student {sub.student!r}); graded, listed as 'not on roster'")
        print(f"grading {len(subs)} submissions" + (f" (shard {shard[0]}/{shard[1]})" if shard else "")
              + f" with {jobs} job{'s' if jobs > 1 else ''}"
              + (f"; {len(absent)} of the {len(entries)} students on the roster handed nothing in" if entries else ""))
    warm_model_cache(assignment, verbose)
    started = time.time()
    salt = secrets.randbits(31)
    instructor = None if run_every_cell else assigned_cells(assignment)
    done = _run_all(subs, ids, timeout, kernel, not unsafe_no_sandbox, call_limit, jobs, salt, verbose, instructor)
    if phases is not None:   # where each submission's time went (the benchmark prints it)
        phases += [{**info["phases"], "skipped": len(info["skipped"])} for _, info in done if info]

    paths = private_paths([submissions.resolve(), out_dir.resolve()] + ([Path(assignment).resolve()] if assignment else []))
    rows, students = class_rows(done, absent, entries, unknown, superseded, ids, worth)
    run = {"title": title or default_title(assignment), "exercises": ids, "points": worth, "students": students,
           "shard": list(shard) if shard else None, "started": started, "finished": time.time(), "jobs": jobs,
           "feedback_language": language}
    digests = write_reports(rows, out_dir, run)
    files = feedback_files(done, rows, run, paths)
    write_atomically(out_dir, files)
    if verbose:
        print()
        print(summary_table(rows))
        print()
        for name, digest in digests.items():
            print(f"wrote {out_dir / name}  sha256 {digest}")
        print(f"wrote {out_dir / 'feedback'}/: a page (.html, safe to send) and the executed notebook (.ipynb) "
              f"for each student who handed in a notebook ({len(subs)})"
              + (f"; no page for the {len(absent)} on the roster who handed in nothing (a 'missing' row in the "
                 "gradebook)" if absent else ""))
    return rows


def class_rows(done, absent, entries, unknown, superseded, ids, worth) -> tuple[list[dict], list[dict]]:
    """The grade rows and the students of a class: the graded ones, then the roster's absent ones
    (with a roster: in its order, then the students who are not on it)."""
    from llmlab.grading.reports import missing_rows, rows_for

    rows, students = [], []
    meta = {e["student"]: e for e in entries or []}
    not_listed = {s.student for s in unknown}
    for sub, info in done:
        rows += rows_for(sub, info, ids, worth)
        extra = {k: v for k, v in meta.get(sub.student, {}).items() if k not in ("student", "name")}
        students.append({"student": sub.student, "name": sub.name, "path": sub.path, "late": sub.late,
                         "status": "not on roster" if sub.student in not_listed else "submitted", **extra,
                         "superseded": [s.path for s in superseded if s.student.lower() == sub.student.lower()]})
    for entry in absent:
        rows += missing_rows(entry["student"], ids, worth)
        students.append({"name": entry.get("name", ""), **entry, "path": "", "late": False, "status": "missing",
                         "superseded": []})
    if entries is not None:
        order = {e["student"]: i for i, e in enumerate(entries)}
        for s in students:
            s["roster_line"] = order[s["student"]] + 2 if s["student"] in order else None   # llmlab merge keeps the order
        students.sort(key=lambda s: order.get(s["student"], len(order)))
        rank = {s["student"]: i for i, s in enumerate(students)}
        rows.sort(key=lambda r: rank[r["student"]])
    return rows, students


def _run_all(subs, ids, timeout, kernel, sandboxed, call_limit, jobs, salt, verbose, instructor=None) -> list:
    """Grade every submission, `jobs` at a time; [(submission, info)] in the order of `subs`."""
    def said(sub, info):
        if verbose:
            state = info["status"] if info else "not run: " + sub.problem.split(" (")[0].split(":")[0]
            passed = sum(r.status == "pass" for r in (info or {}).get("results", {}).values())
            seconds = f", {info['seconds']:.1f} s" if info else ""
            skipped = f", {len(info['skipped'])} cells not needed" if info and info.get("skipped") else ""
            print(f"graded {sub.path}: {passed}/{len(ids)} passed ({state}{seconds}{skipped})", flush=True)

    if jobs == 1:
        reaper = set_subreaper(True)
        set_hidden_salt(salt)
        try:
            done = []
            for sub in subs:
                done.append(grade_one(sub, ids, timeout, kernel, sandboxed, call_limit, instructor))
                said(*done[-1])
            return done
        finally:
            set_hidden_salt(0)
            if reaper:
                set_subreaper(False)
    done = [None] * len(subs)
    threads = job_threads(jobs, default_jobs())
    with ProcessPoolExecutor(jobs, mp_context=get_context("spawn"), initializer=_start_worker,
                             initargs=(salt, threads)) as pool:
        futures = {pool.submit(grade_one, sub, ids, timeout, kernel, sandboxed, call_limit, instructor, threads): i
                   for i, sub in enumerate(subs)}
        from concurrent.futures import as_completed
        for future in as_completed(futures):
            i = futures[future]
            try:
                done[i] = future.result()
            except Exception as e:  # the worker process itself died
                subs[i].problem = f"grading failed: the worker process stopped ({type(e).__name__})"
                done[i] = (subs[i], None)
            said(*done[i])
    return done
