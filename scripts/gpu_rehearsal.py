"""The GPU rehearsal: every chapter and practise copy run on CUDA, compared with the CPU build.

    make gpu                                               # on a machine with an NVIDIA GPU: all three parts
    .venv/bin/python scripts/gpu_rehearsal.py [NOTEBOOK ...] [--jobs N] [--out _build/gpu]
    .venv/bin/python scripts/gpu_rehearsal.py --cpu chapters/00_setup.ipynb   # the same pipeline, on the CPU
    .venv/bin/python scripts/gpu_rehearsal.py --dry-run                      # what would run; runs nothing

Three parts, in this order, each reported even when an earlier one failed:

1. `pytest -m gpu tests/test_gpu.py`: the real models on CUDA against transformers on the same card.
2. Every notebook (chapters/*.ipynb and practise/*.ipynb, or the ones named) executed in its own
   kernel, N at a time (--jobs; the default fits the card's memory). The notebooks need no change:
   `llmlab.load` picks `cuda` when torch sees a GPU (llmlab.devices.get_device), and a second GPU is
   never used (cuda means cuda:0). The kernels run as a reader's do: LLMLAB_BOOK_BUILD is unset, so
   the explorers draw their first view on the GPU too. Per notebook: seconds (with the kernel's
   start), peak CUDA memory (torch.cuda.max_memory_allocated / _reserved, read in the kernel after
   the last cell; a notebook's own reset_peak_memory_stats first hands its peak on), passed or the
   first error. Then what must not depend on the device is compared with the CPU build's
   executed notebooks (_build/jupyter_execute/chapters, written by `make book`):
   - every glued value: integers and words exactly, other numbers within --rtol (plus one unit of
     the last printed digit); glued values whose name says they measure the machine (times,
     bandwidths, speeds) are counted apart and not compared;
   - every printed line (stdout and plain-text results): greedy continuations, argmax tokens and
     counts must be equal, printed numbers within the same tolerance; lines that name a device or a
     time unit are counted apart. A notebook edited since the CPU build is not compared (the
     report says so).
   The largest relative difference is reported with the tolerance. Sampled text may legitimately
   differ (CUDA draws other random numbers than the CPU for the same seed): differences are listed
   for a reader to judge, and only fail the run with --strict.
3. `benchmarks/decode_benchmark.py --cuda`: llmlab's fastest faithful decoding against transformers'
   fastest, tokens/s at batch 1 and 16, share of the card's memory-bandwidth bound.

Writes OUT/<folder>/<notebook>.ipynb (executed on the GPU), OUT/report.json and OUT/report.md. A full
run on CUDA (every notebook, all parts) also writes benchmarks/gpu_rehearsal.md, the record that the
build report appendix shows (commit it). Exit status: 0 all passed, 1 something failed, 2 no CUDA.
--cpu runs part 2 with the GPU hidden from the kernels, to rehearse the pipeline on any machine.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CPU_BUILD = ROOT / "_build" / "jupyter_execute"
RECORD = ROOT / "benchmarks" / "gpu_rehearsal.md"
NO_CUDA_EXIT = 2
GIB = 2**30
# Memory one notebook may hold on the card: both models in float32 with a transformers copy, caches,
# activations and the CUDA context. The table reports the real peaks; --jobs overrides the default.
NOTEBOOK_BUDGET = 6 * GIB
RTOL, ATOL = 1e-3, 1e-6
PEAK_MARK = "LLMLAB_PEAK "
# Run in the kernel before the notebook's first cell: a chapter that measures memory itself resets the
# peak (torch.cuda.reset_peak_memory_stats, chapter 11), so each reset first keeps the peak so far.
PEAK_HOOK = """
import torch as _torch
_llmlab_peaks = [0, 0]
def _llmlab_keep_peak_then_reset(device=None, _reset=_torch.cuda.reset_peak_memory_stats):
    if _torch.cuda.is_initialized():
        _llmlab_peaks[0] = max(_llmlab_peaks[0], _torch.cuda.max_memory_allocated(0))
        _llmlab_peaks[1] = max(_llmlab_peaks[1], _torch.cuda.max_memory_reserved(0))
    return _reset(device)
_torch.cuda.reset_peak_memory_stats = _llmlab_keep_peak_then_reset
"""
# Run in the kernel after the notebook's last cell (or its failure). Does not start CUDA itself.
PEAK_PROBE = f"""
import json as _json
_used = bool(_torch.cuda.is_available() and _torch.cuda.is_initialized())
print({PEAK_MARK!r} + _json.dumps({{"cuda_used": _used,
      "allocated": max(_llmlab_peaks[0], _torch.cuda.max_memory_allocated(0)) if _used else 0,
      "reserved": max(_llmlab_peaks[1], _torch.cuda.max_memory_reserved(0)) if _used else 0}}))
"""
RECORD_NONE = """No run on a GPU has been recorded yet. Run `make gpu` on a machine with an NVIDIA GPU and commit
the `benchmarks/gpu_rehearsal.md` it writes: this section then shows its tables, with the card, the
torch and CUDA versions and the date.
"""


# --------------------------------------------------------------------------- CUDA present?

def cuda_problem() -> str | None:
    """None when torch can use a CUDA GPU; otherwise what is missing and what to do."""
    import torch

    if torch.cuda.is_available():
        return None
    if torch.version.cuda is None:
        why = (f"torch {torch.__version__} is a build without CUDA. On a machine with an NVIDIA GPU, install a "
               f"CUDA build of torch {torch.__version__.split('+')[0]} into this environment (pytorch.org gives the "
               f"pip command for your CUDA version) and run this again.")
    else:
        why = (f"torch {torch.__version__} (built for CUDA {torch.version.cuda}) sees no GPU: check `nvidia-smi`, "
               f"the driver, and CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '(unset)')!r}.")
    return (f"No CUDA GPU: {why}\nThe GPU rehearsal needs one and has run nothing. To rehearse the pipeline on "
            f"the CPU instead, run `{shown(Path(sys.executable))} scripts/gpu_rehearsal.py --cpu [NOTEBOOK ...]`.")


def default_jobs(total_memory: int, cpus: int) -> int:
    """Notebooks at a time: as many as the card's memory holds (85% of it, NOTEBOOK_BUDGET each),
    at most one per two CPU cores (each kernel's Python and tokenizers work on the CPU), at least 1.

    >>> default_jobs(80 * 2**30, 16), default_jobs(16 * 2**30, 16), default_jobs(80 * 2**30, 2)
    (8, 2, 1)
    """
    return max(1, min(cpus // 2, int(0.85 * total_memory // NOTEBOOK_BUDGET)))


# --------------------------------------------------------------------------- one notebook in one kernel

def run_one(notebook: Path, executed: Path, result: Path, timeout: int) -> None:
    """Execute `notebook` in a fresh kernel (cwd: its folder, as the book build does), write the executed
    notebook (also when a cell failed: its outputs show how far it got) and a JSON line of results."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    nb = nbformat.read(notebook, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(notebook.parent)}})
    outcome = {"notebook": str(notebook), "ok": True, "error": "", "cuda_used": False, "allocated": 0, "reserved": 0}
    start = time.perf_counter()
    with client.setup_kernel():
        hidden(client, nb, PEAK_HOOK)
        index, alive = -1, True
        try:
            for index, cell in enumerate(nb.cells):
                client.execute_cell(cell, index, execution_count=client.code_cells_executed + 1)
        except CellExecutionError as error:
            outcome.update(ok=False, error=f"cell {index}: {error.ename}: {first_line(error.evalue)}")
        except (CellTimeoutError, DeadKernelError) as error:
            outcome.update(ok=False, error=f"cell {index}: {type(error).__name__}: {first_line(str(error))}")
            alive = False
        outcome["seconds"] = time.perf_counter() - start
        if alive:
            try:
                outcome.update(json.loads(hidden(client, nb, PEAK_PROBE).split(PEAK_MARK, 1)[1].splitlines()[0]))
            except Exception as error:  # the table says so instead of losing the notebook's row
                outcome["error"] += f" (peak memory not read: {type(error).__name__})"
    executed.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, executed)
    result.write_text(json.dumps(outcome))


def hidden(client, nb, code: str) -> str:
    """Run `code` in the notebook's kernel outside the notebook; return what it printed."""
    import nbformat

    cell = nbformat.v4.new_code_cell(code)
    nb.cells.append(cell)                            # nbclient keeps every cell it runs in the notebook...
    try:
        client.execute_cell(cell, len(nb.cells) - 1, store_history=False)
    finally:
        nb.cells.pop()                               # ... and the executed notebook is written without it
    return "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")


def first_line(text: str, limit: int = 300) -> str:
    """An error's first line without terminal colours, cut to `limit` characters."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(text)).strip()
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= limit else line[:limit - 3] + "..."


# --------------------------------------------------------------------------- comparing with the CPU build

NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
# Glued values that measure the machine rather than the model (chapters 10, 10b and 11 time things).
MACHINE_GLUE = re.compile(r"(^|_)(ms|t\d+|t|time|times|seconds|speed|speedup|bandwidth|gbs|gflops|tps|bound|"
                          r"balance|roof|floor|kernel|fastest|verdict|intensity)(_|\d|$)|_ms_|_ms$|ms_cpu", re.I)
# Printed lines that name a device or give a time or a rate: they describe the machine.
MACHINE_LINE = re.compile(r"\b(cpu|cuda|gpu|mps|device|threads?)\b|\d\s*(ms|µs|us|ns|s|sec|seconds?|minutes?|"
                          r"[kMGT]?B/s|[GT]FLOP/s|tokens/s|tok/s|it/s)\b", re.I)


@dataclass
class Verdict:
    """How two texts compare: 'same', 'close' (numbers within tolerance) or 'differs', and why."""
    kind: str
    largest: float = 0.0       # the largest relative difference between paired non-integer numbers
    why: str = ""


def compare_texts(cpu: str, gpu: str, rtol: float = RTOL, atol: float = ATOL) -> Verdict:
    """Compare a value as the CPU build printed it with the GPU run's: the words (and integers) must be
    equal, other numbers within rtol (relative), atol, or one unit of the last digit either printed.

    >>> compare_texts("' Paris.'", "' Paris.'").kind, compare_texts("p = 0.1234", "p = 0.1235").kind
    ('same', 'close')
    >>> compare_texts("' Paris.'", "' Lyon.'").why, compare_texts("id 42", "id 43").why
    ('text', 'integer 42 != 43')
    """
    if cpu == gpu:
        return Verdict("same")
    if NUMBER.sub("#", cpu) != NUMBER.sub("#", gpu):
        return Verdict("differs", why="text")
    largest, beyond = 0.0, None
    for a, b in zip(NUMBER.findall(cpu), NUMBER.findall(gpu)):
        if a == b:
            continue
        if is_integer(a) and is_integer(b):
            return Verdict("differs", why=f"integer {a} != {b}")
        x, y = float(a), float(b)
        if not (math.isfinite(x) and math.isfinite(y)):
            return Verdict("differs", why=f"{a} != {b}")
        scale = max(abs(x), abs(y))
        relative = abs(x - y) / scale if scale else 0.0
        largest = max(largest, relative)
        allowed = max(atol + rtol * scale, last_digit(a), last_digit(b)) * (1 + 1e-9)   # 0.13 - 0.12 > 0.01
        if abs(x - y) > allowed and beyond is None:
            beyond = f"{a} vs {b} (relative difference {relative:.1e})"
    if beyond:
        return Verdict("differs", largest, why=beyond)
    return Verdict("close", largest)


def is_integer(number: str) -> bool:
    return not any(c in number for c in ".eE")


def last_digit(number: str) -> float:
    """One unit of the last digit printed: 0.12 -> 0.01, 3.5e-03 -> 1e-4, 42 -> 1 (0 for a full repr)."""
    mantissa, _, exponent = number.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    if decimals >= 12:                 # a repr, not a rounded print: no rounding to allow for
        return 0.0
    return 10.0 ** (int(exponent or 0) - decimals)


def glued_values(executed: dict) -> dict[str, str]:
    """name -> text/plain of every glue() in an executed notebook's outputs (as MyST-NB records them)."""
    values = {}
    for cell in executed.get("cells", []):
        for output in cell.get("outputs", []):
            scrapbook = output.get("metadata", {}).get("scrapbook")
            if scrapbook:
                prefix = scrapbook.get("mime_prefix", "")
                values[scrapbook["name"]] = str(output.get("data", {}).get(prefix + "text/plain", ""))
    return values


def cpu_glued_values(cpu_notebook: Path) -> dict[str, str]:
    """The CPU build's glued values: MyST-NB moves them out of the executed notebook into <stem>.glue.json."""
    path = cpu_notebook.with_suffix(".glue.json")
    if path.exists():
        return {name: str(entry.get("data", {}).get("text/plain", ""))
                for name, entry in json.loads(path.read_text()).items()}
    return glued_values(json.loads(cpu_notebook.read_text()))


def printed_lines(cell: dict) -> list[str]:
    """What a code cell printed as plain text: stdout, and results shown only as text (no HTML, image
    or widget, whose ids and encodings differ from run to run)."""
    lines = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream" and output.get("name") == "stdout":
            lines += "".join(output.get("text", "")).splitlines()
        elif output.get("output_type") == "execute_result" and set(output.get("data", {})) == {"text/plain"}:
            lines += "".join(output["data"]["text/plain"]).splitlines()
    return lines


def source(cell: dict) -> str:
    text = cell.get("source", "")
    return "".join(text) if isinstance(text, list) else text


@dataclass
class Comparison:
    """One notebook's device-independent results, CPU build vs GPU run."""
    reference: str = ""                 # the CPU build's executed notebook, or why there is none
    compared: bool = True
    glue: dict = field(default_factory=lambda: {"same": 0, "close": 0, "differs": 0, "machine": 0, "missing": 0})
    lines: dict = field(default_factory=lambda: {"same": 0, "close": 0, "differs": 0, "machine": 0})
    cells_changed: int = 0              # code cells whose source is not the CPU build's (then: not compared)
    largest: float = 0.0
    largest_at: str = ""
    differences: list = field(default_factory=list)   # [what, cpu, gpu, why], for the report

    def note(self, what: str, verdict: Verdict, cpu: str, gpu: str, counts: dict) -> None:
        counts[verdict.kind] += 1
        if verdict.largest > self.largest:
            self.largest, self.largest_at = verdict.largest, what
        if verdict.kind == "differs":
            self.differences.append([what, cpu, gpu, verdict.why])


def compare_notebooks(cpu_notebook: Path, gpu_executed: dict, rtol: float = RTOL, atol: float = ATOL) -> Comparison:
    """Glued values and printed lines of the GPU run against the CPU build's executed notebook. Only a
    build of the same code is compared: a notebook edited since `make book` is reported, not compared."""
    comparison = Comparison(reference=str(cpu_notebook))
    cpu_cells = [c for c in json.loads(cpu_notebook.read_text())["cells"] if c["cell_type"] == "code"]
    gpu_cells = [c for c in gpu_executed["cells"] if c["cell_type"] == "code"]
    changed = abs(len(cpu_cells) - len(gpu_cells)) + sum(source(a) != source(b) for a, b in zip(cpu_cells, gpu_cells))
    if changed:
        comparison.cells_changed, comparison.compared = changed, False
        comparison.reference = (f"the CPU build ran an older version ({changed} code cells differ; "
                                f"run make book to compare)")
        return comparison
    cpu_glue, gpu_glue = cpu_glued_values(cpu_notebook), glued_values(gpu_executed)
    for name in sorted(set(cpu_glue) | set(gpu_glue)):
        if name not in cpu_glue or name not in gpu_glue:
            comparison.glue["missing"] += 1
            comparison.differences.append([f"glue {name}", cpu_glue.get(name, "(absent)"),
                                           gpu_glue.get(name, "(absent)"), "glued in one run only"])
        elif MACHINE_GLUE.search(name) or MACHINE_LINE.search(cpu_glue[name]) and cpu_glue[name] != gpu_glue[name]:
            comparison.glue["machine"] += 1
        else:
            comparison.note(f"glue {name}", compare_texts(cpu_glue[name], gpu_glue[name], rtol, atol),
                            cpu_glue[name], gpu_glue[name], comparison.glue)
    for number, (cpu_cell, gpu_cell) in enumerate(zip(cpu_cells, gpu_cells)):
        cpu_lines, gpu_lines = printed_lines(cpu_cell), printed_lines(gpu_cell)
        if len(cpu_lines) != len(gpu_lines):
            comparison.lines["differs"] += 1
            comparison.differences.append([f"code cell {number}", f"{len(cpu_lines)} lines", f"{len(gpu_lines)} lines",
                                           "printed a different number of lines"])
            continue
        for cpu_line, gpu_line in zip(cpu_lines, gpu_lines):
            if cpu_line != gpu_line and (MACHINE_LINE.search(cpu_line) or MACHINE_LINE.search(gpu_line)):
                comparison.lines["machine"] += 1
            else:
                comparison.note(f"code cell {number}", compare_texts(cpu_line, gpu_line, rtol, atol),
                                cpu_line, gpu_line, comparison.lines)
    return comparison


def reference_for(notebook: Path, cpu_build: Path) -> Path:
    """Where the CPU build keeps its executed copy of `notebook`: <cpu_build>/<folder>/<name>."""
    return cpu_build / notebook.parent.name / notebook.name


# --------------------------------------------------------------------------- the tables

def gib(n: int) -> str:
    return f"{n / GIB:.2f}"


def run_table(results: list[dict]) -> str:
    """The markdown table of the notebook runs: one row per notebook."""
    rows = ["| notebook | seconds | peak CUDA memory, GiB (allocated / reserved) | result |",
            "| --- | ---: | ---: | --- |"]
    for r in results:
        memory = f"{gib(r['allocated'])} / {gib(r['reserved'])}" if r.get("cuda_used") else "CUDA not used"
        verdict = "passed" if r["ok"] else "**failed**: " + r["error"].replace("|", "\\|")
        rows.append(f"| {r['notebook']} | {r.get('seconds', 0):.1f} | {memory} | {verdict} |")
    return "\n".join(rows)


def comparison_table(results: list[dict], rtol: float, atol: float) -> str:
    """The markdown table of the comparisons with the CPU build, then the differences found."""
    rows = [f"Tolerance: relative {rtol:g}, absolute {atol:g}, or one unit of the last printed digit; integers "
            f"and words exactly. 'machine' counts values that measure the machine (times, rates, device names), "
            f"not compared.", "",
            "| notebook | glued: same | within tolerance | differ | machine | printed lines: same | within tolerance "
            "| differ | machine | largest relative difference |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    details = []
    for r in results:
        c = r.get("comparison")
        if not c or not c["compared"]:
            continue
        g, lines = c["glue"], c["lines"]
        largest = f"{c['largest']:.1e} ({c['largest_at']})" if c["largest"] else "0"
        rows.append(f"| {r['notebook']} | {g['same']} | {g['close']} | {g['differs'] + g['missing']} | {g['machine']} "
                    f"| {lines['same']} | {lines['close']} | {lines['differs']} | {lines['machine']} | {largest} |")
        for what, cpu, gpu, why in c["differences"][:12]:
            details.append(f"- {r['notebook']}, {what}: CPU `{clip(cpu)}`, GPU `{clip(gpu)}` ({why})")
        if len(c["differences"]) > 12:
            details.append(f"- {r['notebook']}: {len(c['differences']) - 12} more (OUT/report.json)")
    without = [r for r in results if r.get("comparison") and not r["comparison"]["compared"]]
    stale = [r["notebook"] for r in without if r["comparison"]["cells_changed"]]
    absent = [r["notebook"] for r in without if not r["comparison"]["cells_changed"]]
    for names, why in [(absent, "no executed copy in the CPU build"),
                       (stale, "edited since the CPU build ran them; make book, then compare again")]:
        if names:
            rows += ["", f"Not compared ({why}): {len(names)} notebooks, "
                         f"{', '.join(sorted(names)[:3])}{', ...' if len(names) > 3 else ''}."]
    if details:
        rows += ["", "Differences:", ""] + details
    return "\n".join(rows)


def clip(text: str, limit: int = 90) -> str:
    text = str(text).replace("`", "'").replace("|", "\\|")
    return text if len(text) <= limit else text[:limit - 3] + "..."


def card_memory() -> int:
    """Bytes of memory on cuda:0."""
    import torch

    return torch.cuda.get_device_properties(0).total_memory


def card_line() -> str:
    """The card, its memory, torch and CUDA versions (what a GPU table must say it ran on)."""
    import torch

    props = torch.cuda.get_device_properties(0)
    return (f"{torch.cuda.get_device_name(0)} ({props.total_memory / GIB:.0f} GiB), torch {torch.__version__}, "
            f"CUDA {torch.version.cuda}")


def write_record(path: Path, when: str, card: str, jobs: int, table: str, comparisons: str, tests: str,
                 benchmark: str) -> None:
    """The record the build report appendix shows: the last full run on a GPU."""
    path.write_text(f"Recorded on {when} on {card}, {jobs} notebooks at a time (`make gpu`).\n\n"
                    f"{table}\n\n**Compared with the CPU build.** {comparisons}\n\n"
                    f"**Tests on the GPU** (`pytest -m gpu`): {tests}\n\n"
                    f"**Decode speed on the GPU** (`benchmarks/decode_benchmark.py --cuda`):\n\n"
                    f"```text\n{benchmark.strip()}\n```\n")


# --------------------------------------------------------------------------- the other two parts

def run_tests() -> tuple[bool, str]:
    """pytest -m gpu on tests/test_gpu.py; returns (passed, pytest's summary line)."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "gpu",
                           "tests/test_gpu.py"], cwd=ROOT, capture_output=True, text=True)
    print(proc.stdout[-6000:] + proc.stderr[-2000:])
    lines = [line.strip("= ") for line in proc.stdout.splitlines() if line.strip()]
    return proc.returncode == 0, (lines[-1] if lines else "") or f"pytest exited with {proc.returncode}"


def run_benchmark() -> tuple[bool, str]:
    """The decode benchmark's CUDA mode; returns (ran, what it printed)."""
    proc = subprocess.run([sys.executable, "benchmarks/decode_benchmark.py", "--cuda"], cwd=ROOT,
                          capture_output=True, text=True)
    text = proc.stdout + (f"\n(exit {proc.returncode})\n{proc.stderr[-3000:]}" if proc.returncode else "")
    print(text)
    return proc.returncode == 0, text


# --------------------------------------------------------------------------- main

def notebooks_to_run(names: list[str]) -> list[Path]:
    if not names:
        return sorted((ROOT / "chapters").glob("*.ipynb")) + sorted((ROOT / "practise").glob("*.ipynb"))
    paths = [Path(n).resolve() for n in names]
    missing = [str(p) for p in paths if not (p.is_file() and p.suffix == ".ipynb")]
    if missing:
        raise SystemExit(f"Not a notebook file: {', '.join(missing)}. Give paths to .ipynb files, e.g. "
                         f"chapters/00_setup.ipynb, or none for every chapter and practise copy.")
    return paths


def shown(path: Path) -> str:
    """A path as the table shows it: relative to the repository when inside it."""
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


def kernel_environment(on_cpu: bool, threads: int) -> dict:
    env = dict(os.environ)
    env.pop("LLMLAB_BOOK_BUILD", None)               # as a reader runs it: the explorers compute
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    env["OMP_NUM_THREADS"] = str(threads)
    if on_cpu:
        env["CUDA_VISIBLE_DEVICES"] = ""             # torch sees no GPU: llmlab.load picks the CPU
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", help="notebooks to run (default: chapters/*.ipynb, practise/*.ipynb)")
    parser.add_argument("--jobs", type=int, help="notebooks at a time (default: what the card's memory holds)")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "gpu", help="where the executed notebooks "
                        "and the report go (default: _build/gpu)")
    parser.add_argument("--cpu-build", type=Path, default=CPU_BUILD, help="the CPU build's executed notebooks "
                        "(default: _build/jupyter_execute, written by make book)")
    parser.add_argument("--rtol", type=float, default=RTOL, help=f"relative tolerance for numbers (default {RTOL})")
    parser.add_argument("--atol", type=float, default=ATOL, help=f"absolute tolerance for numbers (default {ATOL})")
    parser.add_argument("--timeout", type=int, default=900, help="seconds a cell may run (default 900)")
    parser.add_argument("--strict", action="store_true", help="differences from the CPU build fail the run too")
    parser.add_argument("--notebooks-only", action="store_true", help="skip pytest -m gpu and the decode benchmark")
    parser.add_argument("--cpu", action="store_true", help="rehearse the notebook part on the CPU (no GPU needed; "
                        "no tests, no benchmark, no record)")
    parser.add_argument("--dry-run", action="store_true", help="say what would run, run nothing")
    parser.add_argument("--record", type=Path, default=RECORD, help="the record a full CUDA run writes "
                        "(default: benchmarks/gpu_rehearsal.md)")
    parser.add_argument("--run-one", nargs=3, metavar=("NOTEBOOK", "EXECUTED", "RESULT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.run_one:
        run_one(*map(Path, args.run_one), timeout=args.timeout)
        return 0
    if args.jobs is not None and args.jobs < 1:
        parser.error(f"--jobs must be 1 or more; got {args.jobs}.")
    notebooks = notebooks_to_run(args.notebooks)
    cpus = os.cpu_count() or 1

    on_cpu = args.cpu
    problem = None if on_cpu else cuda_problem()
    if problem and not args.dry_run:
        print(problem, file=sys.stderr)
        return NO_CUDA_EXIT
    if problem:                                      # a dry run says so, then shows the plan --cpu would follow
        print(problem.splitlines()[0] + "\nWhat --cpu would run:")
        on_cpu = True
    if on_cpu:
        jobs, card = args.jobs or 1, "the CPU (GPU hidden from the kernels)"
    else:
        jobs, card = args.jobs or default_jobs(card_memory(), cpus), card_line()
    threads = max(1, cpus // jobs)
    full = not args.notebooks and not on_cpu and not args.notebooks_only

    print(f"GPU rehearsal on {card}: {len(notebooks)} notebooks, {jobs} at a time, {threads} CPU threads each")
    if args.dry_run:
        for notebook in notebooks:
            reference = reference_for(notebook, args.cpu_build)
            print(f"  {shown(notebook)}  -> {shown(args.out / notebook.parent.name / notebook.name)}; compared with "
                  f"{shown(reference) if reference.exists() else 'nothing (no CPU build of it)'}")
        parts = "notebooks only" if on_cpu or args.notebooks_only else "pytest -m gpu, the notebooks, the decode benchmark"
        print(f"Would run: {parts}" + (f"; would write the record {shown(args.record)}" if full else ""))
        return 0

    tests_ok, tests_summary = True, "not run"
    if not on_cpu and not args.notebooks_only:
        print("\n== 1. pytest -m gpu ==")
        tests_ok, tests_summary = run_tests()

    print(f"\n== 2. {len(notebooks)} notebooks on {'the CPU' if on_cpu else 'cuda:0'} ==")
    args.out.mkdir(parents=True, exist_ok=True)
    env = kernel_environment(on_cpu, threads)
    done = []

    def execute(notebook: Path) -> dict:
        executed = args.out / notebook.parent.name / notebook.name
        result = executed.with_suffix(".result.json")
        result.unlink(missing_ok=True)
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--run-one", str(notebook), str(executed),
                               str(result), "--timeout", str(args.timeout)], env=env, capture_output=True, text=True)
        if result.exists():
            outcome = json.loads(result.read_text())
        else:                                        # the runner itself failed (no kernel, unreadable notebook)
            last = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
            outcome = {"ok": False, "error": f"the runner failed: {first_line(last)}", "cuda_used": False,
                       "allocated": 0, "reserved": 0, "seconds": 0.0}
        outcome["notebook"] = shown(notebook)
        reference = reference_for(notebook, args.cpu_build)
        if not executed.exists():
            outcome["comparison"] = asdict(Comparison(reference="no executed notebook to compare", compared=False))
        elif reference.exists():
            outcome["comparison"] = asdict(compare_notebooks(reference, json.loads(executed.read_text()),
                                                             args.rtol, args.atol))
        else:
            outcome["comparison"] = asdict(Comparison(reference=f"no CPU build of it ({shown(reference)})",
                                                      compared=False))
        done.append(outcome)
        memory = f"peak {gib(outcome['reserved'])} GiB reserved" if outcome["cuda_used"] else "CUDA not used"
        print(f"  [{len(done)}/{len(notebooks)}] {outcome['notebook']}: {'passed' if outcome['ok'] else 'FAILED'} "
              f"in {outcome['seconds']:.1f} s, {memory}{'' if outcome['ok'] else ': ' + outcome['error']}", flush=True)
        return outcome

    start = time.perf_counter()
    with ThreadPoolExecutor(jobs) as pool:
        results = list(pool.map(execute, notebooks))   # in the order given, whatever order they finish in
    wall = time.perf_counter() - start
    failed = [r for r in results if not r["ok"]]
    differing = sum(r["comparison"]["glue"]["differs"] + r["comparison"]["glue"]["missing"]
                    + r["comparison"]["lines"]["differs"] for r in results)
    table, comparisons = run_table(results), comparison_table(results, args.rtol, args.atol)
    print(f"\n{table}\n\n{comparisons}\n")
    peak = max((r["reserved"] for r in results), default=0)
    print(f"{len(results) - len(failed)} of {len(results)} notebooks passed in {wall:.0f} s ({jobs} at a time); "
          f"largest peak {gib(peak)} GiB reserved; {differing} values or lines differ from the CPU build"
          f"{' (--strict: a failure)' if args.strict and differing else ''}")

    bench_ok, bench_text = True, "not run"
    if not on_cpu and not args.notebooks_only:
        print("\n== 3. decode benchmark on the GPU ==")
        bench_ok, bench_text = run_benchmark()

    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    (args.out / "report.json").write_text(json.dumps({"when": when, "card": card, "jobs": jobs, "wall_seconds": wall,
                                                      "rtol": args.rtol, "atol": args.atol, "tests": tests_summary,
                                                      "notebooks": results}, indent=1))
    (args.out / "report.md").write_text(f"GPU rehearsal, {when}, {card}\n\n{table}\n\n{comparisons}\n")
    print(f"Executed notebooks and the report: {shown(args.out)}/")
    if full:
        write_record(args.record, when, card, jobs, table, comparisons, tests_summary, bench_text)
        print(f"Record for the build report appendix: {shown(args.record)} (commit it)")
    ok = not failed and tests_ok and bench_ok and not (args.strict and differing)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
