"""`llmlab grade`: run every submitted notebook in its own sandbox and grade its exercises.

How a submission is graded:
1. Every submission is read into memory first (symbolic links and non-files are refused with a row
   that says so), then the notebooks are run one at a time.
2. A notebook runs top to bottom in its own Jupyter kernel, inside a sandbox (bubblewrap where it
   works: a private file system with only the sandbox folder writable, no network, its own process
   tree, a clean environment and HOME). Cells that raise do not stop the run.
3. check("<id>", fn) in the notebook only hands `fn` to the grader (wire.record). The grader then
   runs each expected exercise's check in its own process: every call of the learner's function
   sends the inputs to the kernel as plain data and gets the answer back as plain data
   (wire.encode / decode), which the check compares here. The grader times each call and
   interrupts the kernel when time is up. Hidden random cases are drawn with a secret salt.
4. The kernel and every process it started are killed before the next notebook.
5. The expected exercises come from the instructor (--assignment and/or --expected), never from
   the submission. Rows have one of four statuses: pass, fail, not-attempted, error.
6. grades.csv (cells escaped against spreadsheet formulas) and grades.json are written atomically
   and their SHA-256 printed.

Without bubblewrap the notebook runs in a temporary folder with a clean environment, in its own
session, with every process it leaves behind killed; a warning says what is then not contained.

This module runs the steps in order; each step lives in its own module: submissions.py (1, 5),
sandbox.py (2, 4), remote.py (3), reports.py (6).
"""
from __future__ import annotations

import secrets
import subprocess
import time
from pathlib import Path

from llmlab.exercises import core
from llmlab.exercises.remote import INTERRUPT_GRACE, BadAnswer, Kernel, KernelGone, RemoteLearner  # noqa: F401
from llmlab.exercises.reports import STATUSES, csv_cell, rows_for, summary_table, write_reports  # noqa: F401
from llmlab.exercises.sandbox import (Box, bwrap_works, descendants, kernel_manager_class,  # noqa: F401
                                      kill_new_descendants, say_containment, set_subreaper)
from llmlab.exercises.submissions import Submission, cell_label, collect, expected_exercises, parse  # noqa: F401

CALL_LIMIT = core.DEFAULT_TIME_LIMIT  # seconds for one call of a learner's function, timed by the grader
MISSING = ("the instructor extra is not installed: pip install \"llmlab[instructor]\" "
           "(it brings nbformat, nbclient and ipykernel)")


def require_instructor_tools() -> None:
    """Raise ImportError with what to install when nbclient or ipykernel is missing."""
    try:
        import ipykernel  # noqa: F401
        import nbclient  # noqa: F401
    except ImportError as e:
        raise ImportError(f"{MISSING}; {e}") from None


def run_submission(sub: Submission, ids: list[str], timeout: float, kernel_name: str = "python3",
                   sandboxed: bool = True, call_limit: float = CALL_LIMIT) -> dict:
    """Run one parsed submission in a fresh sandbox and grade `ids`. Returns
    {"status": "ok" | "timeout" | "dead-kernel" | "failed", "detail", "stopped_at", "results": {id: CheckResult},
     "seconds"}."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    from llmlab.exercises import run_check

    start = time.perf_counter()
    info = {"status": "ok", "detail": "", "stopped_at": None, "results": {}}
    nb = sub.notebook
    box = Box(sandboxed)
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
            try:
                for index, cell in enumerate(nb.cells):
                    client.execute_cell(cell, index)
            except CellTimeoutError:
                info.update(status="timeout", stopped_at=state["cell"],
                            detail=f"did not finish within {timeout:g} s (cell {cell_label(state['cell'])} was still running)")
                from jupyter_core.utils import run_sync
                run_sync(client.km.interrupt_kernel)()
                _drain(client, INTERRUPT_GRACE)
            kernel = Kernel(client)
            try:
                listed = kernel.request({"op": "list"}, 30).get("ok")
            except (Exception, KernelGone, BadAnswer, core._TimeUp):
                listed = []
            recorded = {i for i in listed if isinstance(i, str)} if isinstance(listed, list) else set()
            for ex in ids:
                if ex not in recorded:
                    continue
                try:
                    info["results"][ex] = run_check(ex, RemoteLearner(kernel, ex, call_limit))
                except (KernelGone, BadAnswer) as e:
                    info["results"][ex] = core.CheckResult(ex, "error", f"not graded: {e}")
    except DeadKernelError as e:
        info.update(status="dead-kernel", stopped_at=state["cell"],
                    detail=f"the kernel died in cell {cell_label(state['cell'])} ({str(e)[:200]})")
    except Exception as e:  # kernel did not start, ...
        info.update(status="failed", stopped_at=state["cell"], detail=f"{type(e).__name__}: {str(e)[:300]}")
    finally:
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


def grade(submissions, out_dir, timeout: float = 120, expected: list[str] | None = None, assignment=None,
          kernel: str = "python3", verbose: bool = True, call_limit: float = CALL_LIMIT,
          sandbox: bool | None = None) -> list[dict]:
    """Grade every *.ipynb in `submissions` against the instructor's exercises (`assignment` notebook
    or folder, and/or `expected` ids); write grades.csv and grades.json into out_dir; return the rows.
    sandbox=None uses bubblewrap when it works; False forces the weaker fallback."""
    require_instructor_tools()
    submissions, out_dir = Path(submissions), Path(out_dir)
    if not submissions.is_dir():
        raise FileNotFoundError(f"{submissions} is not a folder. Pass the folder that holds the submitted .ipynb files.")
    if out_dir.resolve() == submissions.resolve() or submissions.resolve() in out_dir.resolve().parents:
        raise ValueError("--out must not be in the submissions folder: grade never writes there.")
    if not expected and not assignment:
        raise ValueError("say which exercises to grade: --assignment NOTEBOOK (the assigned notebook or folder) "
                         "or --expected id1,id2. The list never comes from the submissions.")
    ids = expected_exercises(expected, assignment)
    if not ids:
        raise ValueError(f"the assignment {assignment} has no check(\"<id>\", ...) calls: nothing to grade.")
    subs = collect(submissions)  # every submission is in memory before any code runs
    if not subs:
        raise FileNotFoundError(f"no .ipynb files in {submissions}.")
    sandboxed = bwrap_works() if sandbox is None else sandbox
    if verbose:
        say_containment(sandboxed, [submissions, out_dir] + ([Path(assignment)] if assignment else []))
    rows = []
    salt = secrets.randbits(31)
    reaper = set_subreaper(True)
    try:
        core.set_hidden_salt(salt)
        for sub in subs:
            if verbose:
                print(f"grading {sub.name} ...", end=" ", flush=True)
            parse(sub)
            info = None
            if not sub.problem:
                try:
                    info = run_submission(sub, ids, timeout, kernel, sandboxed, call_limit)
                except Exception as e:  # one bad file never stops the run
                    sub.problem = f"grading failed: {type(e).__name__}: {str(e)[:300]}"
            student_rows = rows_for(sub, info, ids)
            rows += student_rows
            if verbose:
                passed = sum(r["status"] == "pass" for r in student_rows)
                state = info["status"] if info else "not run: " + sub.problem.split(" (")[0].split(":")[0]
                seconds = f", {info['seconds']:.1f} s" if info else ""
                print(f"{passed}/{len(student_rows)} passed ({state}{seconds})")
    finally:
        core.set_hidden_salt(0)
        if reaper:
            set_subreaper(False)
    digests = write_reports(rows, out_dir)
    if verbose:
        print()
        print(summary_table(rows))
        print()
        for name, digest in digests.items():
            print(f"wrote {out_dir / name}  sha256 {digest}")
    return rows

