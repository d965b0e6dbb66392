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
"""
from __future__ import annotations

import ast
import csv
import ctypes
import hashlib
import io
import json
import os
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from llmlab.exercises import core, wire
from llmlab.exercises.assign import check_ids, declared_exercises, notebook_paths

STATUSES = ("pass", "fail", "not-attempted", "error")
MAX_NOTEBOOK_BYTES = 50 * 2**20
CALL_LIMIT = core.DEFAULT_TIME_LIMIT  # seconds for one call of a learner's function, timed by the grader
INTERRUPT_GRACE = 5.0                 # seconds a kernel gets to come back after an interrupt
MISSING = ("the instructor extra is not installed: pip install \"llmlab[instructor]\" "
           "(it brings nbformat, nbclient and ipykernel)")


def require_instructor_tools() -> None:
    """Raise ImportError with what to install when nbclient or ipykernel is missing."""
    try:
        import ipykernel  # noqa: F401
        import nbclient  # noqa: F401
    except ImportError as e:
        raise ImportError(f"{MISSING}; {e}") from None


# ---------------------------------------------------------------------------------------------- inputs

@dataclass
class Submission:
    student: str
    name: str
    data: bytes | None = None
    problem: str = ""          # why it cannot be run ("" when it can)
    notebook: object = None
    cell_errors: dict = field(default_factory=dict)


def collect(folder: Path) -> list[Submission]:
    """Every *.ipynb (any case) in `folder`, read into memory; symlinks and non-files get a problem."""
    subs = []
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if entry.name.startswith(".") or not entry.name.lower().endswith(".ipynb"):
            continue
        sub = Submission(entry.name[:-len(".ipynb")], entry.name)
        info = os.lstat(entry.path)
        if stat.S_ISLNK(info.st_mode):
            sub.problem = "refused: the submission is a symbolic link, not a notebook file (hand in the file itself)"
        elif not stat.S_ISREG(info.st_mode):
            sub.problem = "refused: the submission is not a regular file"
        elif info.st_size > MAX_NOTEBOOK_BYTES:
            sub.problem = f"refused: {info.st_size / 2**20:.0f} MiB is larger than any notebook should be"
        else:
            try:
                fd = os.open(entry.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
                with os.fdopen(fd, "rb") as f:
                    sub.data = f.read(MAX_NOTEBOOK_BYTES + 1)
            except OSError as e:
                sub.problem = f"could not be read ({e.strerror})"
        subs.append(sub)
    return subs


def parse(sub: Submission) -> None:
    """Turn the bytes into a validated notebook, or set sub.problem to what is wrong."""
    if sub.problem:
        return
    try:
        with warnings.catch_warnings():  # cells without ids (older nbformat) are fine to run
            warnings.simplefilter("ignore")
            nb = nbformat.reads(sub.data.decode("utf-8"), as_version=4)
            nbformat.validate(nb)
    except nbformat.ValidationError as e:
        where = "/".join(str(p) for p in e.absolute_path)
        what = e.message if len(e.message) < 200 else e.message[:200] + " ..."
        sub.problem = f"not a valid notebook file (at {where or 'the top level'}: {what})"
        return
    except UnicodeDecodeError:
        sub.problem = "not a valid notebook file (not UTF-8 text)"
        return
    except Exception as e:  # not JSON, not a notebook
        first = str(e).splitlines()[0] if str(e) else ""
        sub.problem = f"not a valid notebook file ({type(e).__name__}: {first[:200]})"
        return
    sub.notebook = nb


def expected_exercises(expected: list[str] | None = None, assignment=None) -> list[str]:
    """Exercise ids from the instructor: an explicit list and/or the assigned notebooks (file or folder)."""
    from llmlab.exercises.registry import BY_ID

    ids = list(expected or [])
    if assignment:
        for path in notebook_paths([assignment]):
            nb = nbformat.read(path, as_version=4)
            meta = nb.metadata.get("llmlab", {}).get("exercises") or []
            for i in list(meta) + declared_exercises(nb):
                if i not in ids:
                    ids.append(i)
    unknown = [i for i in ids if i not in BY_ID]
    if unknown:
        raise ValueError(f"unknown exercise ids {unknown}; `llmlab exercises` lists the known ones.")
    return ids


# ---------------------------------------------------------------------------------------------- sandbox

_BWRAP_OK: bool | None = None
ETC = ["ld.so.cache", "ld.so.conf", "ld.so.conf.d", "fonts", "localtime", "passwd", "group", "nsswitch.conf",
       "ssl", "alternatives", "mime.types", "matplotlibrc"]


def bwrap_works() -> bool:
    """True when bubblewrap can make a sandbox here (user, PID and network namespaces)."""
    global _BWRAP_OK
    if _BWRAP_OK is None:
        path = shutil.which("bwrap")
        _BWRAP_OK = False
        if path:
            try:
                test = subprocess.run([path, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/",
                                       "--proc", "/proc", "--dev", "/dev", "true"],
                                      capture_output=True, timeout=30)
                _BWRAP_OK = test.returncode == 0
            except (OSError, subprocess.TimeoutExpired):
                pass
    return _BWRAP_OK


LIMITS = ("import os, resource, sys\n"
          "resource.setrlimit(resource.RLIMIT_CORE, (0, 0))\n"
          "resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 30, 1 << 30))\n"
          "os.execv(sys.argv[1], sys.argv[1:])")


class Box:
    """One submission's sandbox: a temporary folder with home/, work/ (the kernel's cwd) and run/
    (the kernel's connection file and sockets), and the command that starts a kernel inside it."""

    def __init__(self, sandboxed: bool):
        self.sandboxed = sandboxed
        self.root = Path(tempfile.mkdtemp(prefix="llmlab-grade-"))
        for sub in ("home", "work", "run", "tmp"):
            (self.root / sub).mkdir()
        self.package = _package_dir()
        self.lib = self.package.parent   # the folder that holds llmlab/
        self.cache = _cache_dir()

    def env(self) -> dict:
        # llmlab first, then the grader's own package folders in its order (user site, .pth additions)
        inside_lib = os.pathsep.join(["/opt/llmlab-lib" if self.sandboxed else str(self.lib)] + site_dirs())
        paths = [str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"]
        return {"PATH": os.pathsep.join(paths), "HOME": str(self.root / "home"), "LANG": "C.UTF-8",
                "TMPDIR": "/tmp" if self.sandboxed else str(self.root / "tmp"), "PYTHONPATH": inside_lib,
                "MPLBACKEND": "Agg", "LLMLAB_GRADING": "1", "LLMLAB_CACHE": str(self.cache),
                "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1",
                **{k: os.environ[k] for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS") if k in os.environ}}

    def wrap(self, cmd: list[str]) -> list[str]:
        limited = [sys.executable, "-c", LIMITS] + cmd
        if not self.sandboxed:
            return limited
        # --cap-drop ALL: graded as root, the kernel would otherwise keep root's capabilities (mounts...)
        args = [shutil.which("bwrap"), "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
                "--clearenv",
                "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/dev/shm"]
        for d in ("/usr", "/bin", "/lib", "/lib64", "/lib32", "/sbin"):
            args += ["--ro-bind-try", d, d]
        for name in ETC:
            args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        for d in {sys.prefix, sys.base_prefix, str(Path(sys.executable).resolve().parents[1]), *site_dirs()}:
            args += ["--ro-bind", d, d]
        args += ["--ro-bind", str(self.package), "/opt/llmlab-lib/llmlab"]
        if self.cache.is_dir():
            args += ["--ro-bind", str(self.cache), str(self.cache)]
        args += ["--bind", str(self.root), str(self.root), "--chdir", str(self.root / "work")]
        for key, value in self.env().items():
            args += ["--setenv", key, value]
        return args + ["--"] + limited

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def site_dirs() -> list[str]:
    """The grader's package folders (site-packages, dist-packages) in import order: the kernel
    imports what the grader would, and nothing else from the grader's sys.path is shown to it."""
    return list(dict.fromkeys(p for p in sys.path if Path(p).name in ("site-packages", "dist-packages")
                              and Path(p).is_dir()))


def visible_paths() -> list[Path]:
    """Host folders a sandbox can read, besides the system's own: Python, llmlab, the model cache."""
    return ([Path(p).resolve() for p in {sys.prefix, sys.base_prefix, *site_dirs()}]
            + [_package_dir(), _cache_dir().resolve()])


def _package_dir() -> Path:
    return Path(core.__file__).resolve().parents[1]


def _cache_dir() -> Path:
    return Path(os.environ.get("LLMLAB_CACHE") or Path.home() / ".cache" / "llmlab").expanduser()


def _manager_class(box: Box):
    from jupyter_client.manager import AsyncKernelManager

    class SandboxedKernelManager(AsyncKernelManager):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.transport = "ipc"                      # unix sockets in the box: no network needed
            self.ip = str(box.root / "run" / "kernel")
            self.connection_file = str(box.root / "run" / "kernel.json")

        @property
        def kernel_spec(self):
            spec = super().kernel_spec
            if spec is not None:  # a signal cannot reach into the sandbox's process tree; a message can
                spec.interrupt_mode = "message"
            return spec

        def format_kernel_cmd(self, extra_arguments=None):
            return box.wrap(super().format_kernel_cmd(extra_arguments))
    return SandboxedKernelManager


# The grader is a "subreaper": a process the kernel starts in a new session (start_new_session=True)
# is re-parented to the grader instead of init when its parent dies, so it can be found and killed.
PR_SET_CHILD_SUBREAPER = 36


def _set_subreaper(on: bool) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def descendants(pid: int | None = None) -> set[int]:
    """Every process below `pid` (default: this process), from /proc."""
    pid = os.getpid() if pid is None else pid
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if entry.isdigit():
            try:
                text = Path(f"/proc/{entry}/stat").read_text()
                ppid = int(text[text.rindex(")") + 2:].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in found:
                found.add(c)
                todo.append(c)
    return found


def kill_new_descendants(before: set[int]) -> int:
    """SIGKILL every descendant of this process not in `before`, until none is left; reap them."""
    killed = 0
    for _ in range(50):
        extra = descendants() - before
        if not extra:
            break
        for pid in extra:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        time.sleep(0.05)
        for pid in extra:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
    return killed


# ---------------------------------------------------------------------------------------------- running

class KernelGone(BaseException):
    """The kernel stopped answering (a call ignored the interrupt). A BaseException, so that no
    check turns it into feedback on the learner's code: the exercise gets an error row."""


class BadAnswer(BaseException):
    """What came back from the kernel is not an answer in the grader's format (error row)."""


class Kernel:
    """Requests to the running kernel of one submission, each with its own nonce and time limit."""

    def __init__(self, client):
        self.client = client
        self.gone = ""

    def request(self, payload: dict, limit: float) -> dict:
        from jupyter_core.utils import run_sync

        if self.gone:
            raise KernelGone(self.gone)
        nonce = secrets.token_hex(8)
        expr = f"__import__('llmlab.exercises.wire', fromlist=['serve']).serve({json.dumps(json.dumps(payload))})"
        kc = self.client.kc
        msg_id = kc.execute("", silent=True, store_history=False, user_expressions={nonce: expr})
        deadline = time.monotonic() + limit
        reply = self._reply(run_sync, kc, msg_id, deadline)
        if reply is None:  # time is up: interrupt (SIGINT), and give up on the kernel if it does not come back
            run_sync(self.client.km.interrupt_kernel)()
            reply = self._reply(run_sync, kc, msg_id, time.monotonic() + INTERRUPT_GRACE)
            if reply is None:
                self.gone = "the kernel stopped answering after a call ran past its time limit and ignored the interrupt"
            raise core._TimeUp()
        result = reply["content"].get("user_expressions", {}).get(nonce, {})
        if result.get("status") != "ok":
            if result.get("ename") == "KeyboardInterrupt":
                raise core._TimeUp()
            raise BadAnswer(f"the grader's request failed in the kernel ({str(result.get('ename'))[:60]})")
        text = result.get("data", {}).get("text/plain", "")
        try:
            answer = json.loads(ast.literal_eval(text))
        except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
            raise BadAnswer("the kernel's answer is not in the grader's format") from None
        if not isinstance(answer, dict):
            raise BadAnswer("the kernel's answer is not in the grader's format")
        return answer

    @staticmethod
    def _reply(run_sync, kc, msg_id, deadline):
        import queue
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                msg = run_sync(kc.get_shell_msg)(timeout=left)
            except (queue.Empty, TimeoutError):
                return None
            if msg.get("parent_header", {}).get("msg_id") == msg_id:
                return msg


class RemoteLearner(core.Learner):
    """A Learner whose function lives in the submission's kernel: inputs go there as plain data,
    the answer comes back as plain data, and the check runs here."""

    def __init__(self, kernel: Kernel, exercise: str, time_limit: float):
        from llmlab.exercises.registry import BY_ID
        super().__init__(None, BY_ID[exercise].signature.split("(")[0], time_limit)
        self.kernel, self.exercise = kernel, exercise

    def invoke(self, args: tuple):
        answer = self.kernel.request({"op": "call", "exercise": self.exercise,
                                      "args": [wire.encode(a) for a in args]}, self.time_limit)
        if answer.get("missing"):
            raise BadAnswer("no function was handed to the grader for this exercise")
        if "raised" in answer:
            raised = answer["raised"] if isinstance(answer["raised"], dict) else {}
            if raised.get("interrupted"):
                raise core._TimeUp()
            if raised.get("not_implemented"):
                raise NotImplementedError()
            raise _rebuilt_exception(raised)
        if "value" not in answer:
            raise BadAnswer("the kernel's answer holds no value (only the grader decides a status)")
        try:
            return wire.decode(answer["value"])
        except (wire.WireError, ValueError, TypeError, RecursionError) as e:
            raise BadAnswer(f"the kernel's answer is not in the grader's format ({e})") from None


def _rebuilt_exception(raised: dict) -> Exception:
    """The learner's exception as the grader shows it: same type name, message and line."""
    import builtins
    name = "".join(c for c in str(raised.get("type", "Exception"))[:60] if c.isalnum() or c == "_") or "Exception"
    cls = getattr(builtins, name, None)
    if not (isinstance(cls, type) and issubclass(cls, Exception)) or cls in (NotImplementedError,):
        cls = type(name, (Exception,), {})
    try:
        e = cls(str(raised.get("message", ""))[:wire.MAX_TEXT])
    except Exception:
        e = type(name, (Exception,), {})(str(raised.get("message", ""))[:wire.MAX_TEXT])
    e.learner_line = str(raised.get("line", ""))[:wire.MAX_TEXT]
    return e


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
        kernel_manager_class=_manager_class(box))
    try:
        env = box.env()
        with client.setup_kernel(env=env, cwd=str(box.root / "work"), stderr=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL):
            try:
                for index, cell in enumerate(nb.cells):
                    client.execute_cell(cell, index)
            except CellTimeoutError:
                info.update(status="timeout", stopped_at=state["cell"],
                            detail=f"did not finish within {timeout:g} s (cell {_label(state['cell'])} was still running)")
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
                    detail=f"the kernel died in cell {_label(state['cell'])} ({str(e)[:200]})")
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


def _label(index) -> str:
    return "?" if index is None else str(index + 1)  # cells counted from 1, as an instructor reads them


# ---------------------------------------------------------------------------------------------- rows

def rows_for(sub: Submission, info: dict | None, expected: list[str]) -> list[dict]:
    """The grade rows of one submission: one per expected exercise, always a known status."""
    rows = []
    for ex in expected:
        result = (info or {}).get("results", {}).get(ex)
        if result is not None and result.status in STATUSES:
            rows.append({"student": sub.student, "exercise": ex, "status": result.status, "message": result.message})
        else:
            rows.append({"student": sub.student, "exercise": ex, "status": "error", "message": _why_missing(ex, sub, info)})
    return rows


def _why_missing(ex: str, sub: Submission, info: dict | None) -> str:
    """Why exercise `ex` has no result."""
    if sub.problem:
        return sub.problem + ("; nothing could be run" if sub.problem.startswith("not a valid") else "")
    cells = [i for i, c in enumerate(sub.notebook.cells) if c.cell_type == "code" and ex in check_ids(c.source)]
    if not cells:
        return f"the check cell for '{ex}' is missing from the submission (deleted or edited); no result"
    cell = cells[0]
    stopped = info["stopped_at"]
    if info["status"] == "timeout" and (stopped is None or stopped <= cell):
        return f"the notebook {info['detail']}; the check in cell {_label(cell)} never ran"
    if info["status"] in ("dead-kernel", "failed") and (stopped is None or stopped <= cell):
        return f"{info['detail']}; the check in cell {_label(cell)} never ran"
    if cell in sub.cell_errors:
        return f"the check cell (cell {_label(cell)}) raised {sub.cell_errors[cell]}"
    earlier = [i for i in sub.cell_errors if i < cell]
    if earlier:
        return (f"the check in cell {_label(cell)} handed no function to the grader; the first error was in cell "
                f"{_label(earlier[0])}: {sub.cell_errors[earlier[0]]}")
    return (f"the check in cell {_label(cell)} handed no function to the grader (was check() from "
            "llmlab.exercises replaced or redefined?)")


# ---------------------------------------------------------------------------------------------- grade

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
        _say_containment(sandboxed, [submissions, out_dir] + ([Path(assignment)] if assignment else []))
    rows = []
    salt = secrets.randbits(31)
    reaper = _set_subreaper(True)
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
            _set_subreaper(False)
    digests = write_reports(rows, out_dir)
    if verbose:
        print()
        print(summary_table(rows))
        print()
        for name, digest in digests.items():
            print(f"wrote {out_dir / name}  sha256 {digest}")
    return rows


def _say_containment(sandboxed: bool, private: list[Path]) -> None:
    if sandboxed:
        print("Each notebook runs in a bubblewrap sandbox: its own file system view (only its own folder "
              "writable), no network, its own process tree, a clean environment and HOME.")
        shared = visible_paths()
        for path in private:
            path = path.resolve()
            if any(path == v or v in path.parents for v in shared):
                print(f"WARNING: {path} lies inside {next(v for v in shared if path == v or v in path.parents)}, "
                      "which the sandbox can read (not write): keep submissions and reports elsewhere.",
                      file=sys.stderr)
        return
    print("WARNING: bubblewrap (bwrap) is not available or does not work here, so the notebooks are NOT sandboxed.\n"
          "  Contained: each runs in a new temporary folder with a clean environment and HOME, in its own\n"
          "  session; every process it starts is killed afterwards; grades are decided by the grader.\n"
          "  NOT contained: the code runs with your user's permissions. It can read and write your files\n"
          "  (other submissions, your sources, the report folder while it is graded), use the network and\n"
          "  see other processes. Install bubblewrap (apt-get install bubblewrap) or grade in a container.",
          file=sys.stderr)


def csv_cell(value) -> str:
    """A cell that a spreadsheet shows as text: a leading =, +, -, @, tab or CR would start a formula."""
    text = str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def write_reports(rows: list[dict], out_dir: Path) -> dict:
    """Write grades.csv and grades.json atomically (temporary file + rename); return their SHA-256."""
    out_dir.mkdir(parents=True, exist_ok=True)
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, fieldnames=["student", "exercise", "status", "message"])
    writer.writeheader()
    writer.writerows({k: csv_cell(v) for k, v in row.items()} for row in rows)
    files = {"grades.csv": buffer.getvalue().encode("utf-8"),
             "grades.json": (json.dumps(rows, indent=1, ensure_ascii=False) + "\n").encode("utf-8")}
    for name, data in files.items():
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=out_dir)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, out_dir / name)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    return {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}


def summary_table(rows: list[dict]) -> str:
    """One line per student: the status of each exercise and the number passed."""
    students = list(dict.fromkeys(r["student"] for r in rows))
    exercises = list(dict.fromkeys(r["exercise"] for r in rows))
    cell = {(r["student"], r["exercise"]): r["status"] for r in rows}
    names = [e or "(notebook)" for e in exercises]
    widths = [max(len("student"), *(len(s) for s in students))] + [max(len(n), 13) for n in names]
    header = ["student"] + names + ["passed"]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths + [6]))]
    for s in students:
        statuses = [cell.get((s, e), "") for e in exercises]
        passed = f"{statuses.count('pass')}/{sum(1 for e in exercises if (s, e) in cell)}"
        lines.append("  ".join(v.ljust(w) for v, w in zip([s] + statuses + [passed], widths + [6])))
    return "\n".join(lines)
