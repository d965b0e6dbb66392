"""Where `llmlab grade` runs a notebook: a bubblewrap sandbox. Where none can be made, grade runs
nothing (SandboxUnavailable) unless the instructor opts out with --unsafe-no-sandbox.

A Box is one submission's temporary folder and the command that starts its kernel inside the
sandbox (a private file system with only the box writable, no network, its own process tree, a
clean environment and HOME). Whatever the kernel leaves running is found under the grader (a
"subreaper" on Linux) and killed before the next notebook.
"""
from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_PROBLEMS: dict = {}  # bwrap path -> why it cannot make a sandbox ("" when it can), tried once per process
ETC = ["ld.so.cache", "ld.so.conf", "ld.so.conf.d", "fonts", "localtime", "passwd", "group", "nsswitch.conf",
       "ssl", "alternatives", "mime.types", "matplotlibrc"]


class SandboxUnavailable(RuntimeError):
    """No sandbox can be made here, so `llmlab grade` runs no submission (see NO_SANDBOX)."""


NO_SANDBOX = (
    "no sandbox can be made on this machine ({why}). A submission is untrusted code, so grade runs none "
    "without one.\n"
    "  What to do: install bubblewrap (Debian/Ubuntu: sudo apt-get install bubblewrap; Fedora: sudo dnf install "
    "bubblewrap) and run grade again.\n"
    "  Where that is impossible (macOS, Windows, Colab, a container that forbids user namespaces), grade inside a "
    "Linux virtual machine or a container that allows them; the instructor guide shows how.\n"
    "  Only for notebooks you trust: --unsafe-no-sandbox runs them with your own permissions.")


def sandbox_problem() -> str:
    """Why bubblewrap cannot make a sandbox here (user, PID and network namespaces), or "" when it can."""
    path = shutil.which("bwrap")
    if not path:
        return "bubblewrap (bwrap) is not installed"
    if path not in _PROBLEMS:
        try:
            test = subprocess.run([path, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/",
                                   "--proc", "/proc", "--dev", "/dev", "true"], capture_output=True, timeout=30)
            said = test.stderr.decode("utf-8", "replace").strip().splitlines()
            _PROBLEMS[path] = "" if test.returncode == 0 else \
                f"{path} cannot make a sandbox here: {said[-1][:200] if said else f'exit status {test.returncode}'}"
        except (OSError, subprocess.TimeoutExpired) as e:
            _PROBLEMS[path] = f"{path} could not be run ({type(e).__name__}: {e})"
    return _PROBLEMS[path]


def bwrap_works() -> bool:
    """True when bubblewrap can make a sandbox here."""
    return not sandbox_problem()


LIMITS = ("import os, resource, sys\n"
          "resource.setrlimit(resource.RLIMIT_CORE, (0, 0))\n"
          "resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 30, 1 << 30))\n"
          "os.execv(sys.argv[1], sys.argv[1:])")


class Box:
    """One submission's sandbox: a temporary folder with home/, work/ (the kernel's cwd) and run/
    (the kernel's connection file and sockets), and the command that starts a kernel inside it."""

    def __init__(self, sandboxed: bool, threads: int | None = None):
        self.sandboxed = sandboxed
        self.threads = threads   # compute threads of the kernel (its share of the cores), None: as the grader's
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
                # torch's threads wait passively unless the grader says otherwise: submissions graded side
                # by side share the cores, and spinning threads stall when a core is taken (10x and more)
                "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE"),
                **{k: os.environ[k] for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS") if k in os.environ},
                **({"OMP_NUM_THREADS": str(self.threads), "MKL_NUM_THREADS": str(self.threads)} if self.threads else {})}

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
    return Path(__file__).resolve().parents[1]


def _cache_dir() -> Path:
    return Path(os.environ.get("LLMLAB_CACHE") or Path.home() / ".cache" / "llmlab").expanduser()


def kernel_manager_class(box: Box):
    """A Jupyter kernel manager whose kernel starts inside `box` and talks over unix sockets there."""
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


def set_subreaper(on: bool) -> bool:
    """Make this process (on=True) the subreaper of its descendants, or stop; False where Linux's prctl is missing."""
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


def job_threads(jobs: int, cores: int) -> int | None:
    """Compute threads for each of `jobs` side-by-side submissions: the cores shared out (at least 1),
    so N jobs do not run N times the cores' threads; None for one job, or where the instructor
    set OMP_NUM_THREADS (then every kernel gets that)."""
    if jobs <= 1 or "OMP_NUM_THREADS" in os.environ:
        return None
    return max(1, cores // jobs)


def cpu_seconds(pids) -> float:
    """CPU seconds the processes `pids` have used so far (with their children they waited for), from /proc."""
    total = 0
    for pid in pids:
        try:
            text = Path(f"/proc/{pid}/stat").read_text()
            fields = text[text.rindex(")") + 2:].split()
            total += sum(int(f) for f in fields[11:15])   # utime, stime, cutime, cstime
        except (OSError, ValueError, IndexError):
            continue
    return total / os.sysconf("SC_CLK_TCK")


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



def say_containment(sandboxed: bool, private: list[Path]) -> None:
    """Tell the instructor what the sandbox (or, opted out, its absence) contains, and warn when a
    `private` folder (submissions, reports) is one the sandbox can read."""
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
    print("WARNING: --unsafe-no-sandbox: the notebooks are NOT sandboxed.\n"
          "  Contained: each runs in a new temporary folder with a clean environment and HOME, in its own\n"
          "  session; every process it starts is killed afterwards; grades are decided by the grader.\n"
          "  NOT contained: the code runs with your user's permissions. It can read and write your files\n"
          "  (other submissions, your sources, the report folder while it is graded), use the network and\n"
          "  see other processes. Use this only for notebooks you trust.", file=sys.stderr)
