"""Execute the book's notebooks, several at a time, into the build's execution cache.

`make book` runs this before `jupyter-book build`. The book is configured with
`execute_notebooks: cache`, so the build then takes every notebook's outputs from
`_build/.jupyter_cache` instead of running the notebooks one after another itself; a notebook
that is not in the cache (a page written as MyST markdown, or one changed since) is still executed
by the build. Running two notebooks at once on a 2-core machine, each kernel on one thread, keeps
both cores busy through the Python-bound stretches of a page, where one kernel alone leaves a core
idle.

The pages that time themselves (`TIMED_PAGES`) run afterwards, one at a time with every core, so
what they measure is the machine and not the page running beside them. The cache is cleared first
(`--keep` reuses entries whose code is unchanged), so every `make book` executes every page once.

    python scripts/execute_book.py              # as many kernels as cores (at most 2 by default)
    python scripts/execute_book.py --jobs 1     # one at a time, as the build alone would
    python scripts/execute_book.py --list       # what would run, in which order
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "_build" / ".jupyter_cache"
TIMEOUT = 300  # seconds per cell, as _config.yml's execute.timeout

# Pages whose prose is chosen from a timing (bandwidth, ms per token, a speed ratio): they run
# alone. tests/test_execute_book.py fails if a page that calls llmlab's timers
# (timed, memory_bandwidth, synchronize) is missing here. Pages that only print how long a
# training run took (chapters 12 and 13) share the cores: that print is not a claim.
TIMED_PAGES = {
    "chapters/01_a_model_is_a_function_lab",
    "chapters/10_kv_cache",
    "chapters/10_kv_cache_lab",
    "chapters/10b_how_weights_are_stored",
    "chapters/10b_how_weights_are_stored_lab",
    "chapters/11_attention_at_scale",
    "chapters/11_attention_at_scale_lab",
}


def book_notebooks(toc: Path = ROOT / "_toc.yml") -> list[str]:
    """The .ipynb pages of the table of contents, as docnames ("chapters/05_self_attention")."""
    def walk(node):
        if isinstance(node, dict):
            if "file" in node:
                yield str(node["file"])
            if "root" in node:
                yield str(node["root"])
            for value in node.values():
                yield from walk(value)
        elif isinstance(node, list):
            for item in node:
                yield from walk(item)

    names = []
    for name in walk(yaml.safe_load(toc.read_text())):
        name = name.removesuffix(".ipynb")
        if (ROOT / f"{name}.ipynb").exists() and name not in names:
            names.append(name)
    return names


def _execute(docname: str, threads: int | None) -> tuple[str, dict, float, str | None]:
    """Run one notebook in a fresh kernel (in a worker process); return it executed."""
    from jupyter_cache.executors.utils import single_nb_execution

    if threads:
        # read by torch when the kernel imports it: one thread per kernel when kernels share cores
        os.environ["OMP_NUM_THREADS"] = str(threads)
        os.environ["MKL_NUM_THREADS"] = str(threads)
    path = ROOT / f"{docname}.ipynb"
    nb = nbformat.read(path, as_version=4)
    result = single_nb_execution(nb, cwd=str(path.parent), timeout=TIMEOUT, allow_errors=False,
                                 meta_override=True)
    return docname, result.nb, result.time, result.exc_string


BANDWIDTH_FILE = ROOT / "_build" / "bandwidth.json"


def one_bandwidth(path: Path = BANDWIDTH_FILE, fresh: bool = True) -> Path:
    """Make every page of this run use one measurement of the memory bandwidth.

    `llmlab.memory_bandwidth` keeps its result in $LLMLAB_BANDWIDTH_FILE and reuses it; pointing that at the
    build folder makes chapters 10, 10b and 11 quote the same number. A fresh build deletes the file first,
    so each build measures once, on the machine and at the moment of that build.
    """
    os.environ["LLMLAB_BANDWIDTH_FILE"] = str(path)       # the kernels inherit it
    if fresh:
        path.unlink(missing_ok=True)
    return path


FIGURE_COPIES = ROOT / "_build" / "figure_copies"


def keep_figures(path: Path = FIGURE_COPIES, fresh: bool = True) -> Path:
    """Keep a copy of every figure the pages show, for the Chinese site to draw with Chinese words.

    llmlab's notebook style (`use_book_style`) writes each shown figure into $LLMLAB_FIGURE_COPIES, named by
    the hash of its English image (llmlab/visualization/figure_language.py); `book_i18n.py build` draws
    them in Chinese. A fresh build starts from an empty folder, as it starts from an empty cache.
    """
    import shutil

    os.environ["LLMLAB_FIGURE_COPIES"] = str(path)        # the kernels inherit it
    if fresh:
        shutil.rmtree(path, ignore_errors=True)
    return path


def order(names: list[str], jobs: int) -> tuple[list[str], list[str]]:
    """(pages that share the cores, pages that run alone afterwards)."""
    if jobs <= 1:
        return [], names
    shared = [n for n in names if n not in TIMED_PAGES]
    # labs are the long pages: start them first so that the last minutes are not one long page
    shared.sort(key=lambda n: not n.endswith("_lab"))
    return shared, [n for n in names if n in TIMED_PAGES]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="kernels at once (default: the number of cores, at most 2)")
    parser.add_argument("--keep", action="store_true",
                        help="keep cache entries whose code is unchanged (faster; a change inside "
                             "llmlab then does not re-run the pages)")
    parser.add_argument("--only", nargs="+", metavar="DOCNAME",
                        help="run only these pages (as in _toc.yml: chapters/05_self_attention)")
    parser.add_argument("--list", action="store_true", help="print the order and exit")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")

    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    names = book_notebooks()
    if args.only:
        unknown = [n for n in args.only if n.removesuffix(".ipynb") not in names]
        if unknown:
            parser.error(f"--only: {unknown} are not notebooks of _toc.yml; give names such as "
                         f"{names[1]!r}")
        names = [n.removesuffix(".ipynb") for n in args.only]
    shared, alone = order(names, args.jobs)
    if args.list:
        for n in shared:
            print(f"shared ({args.jobs} at a time, 1 thread each): {n}")
        for n in alone:
            print(f"alone: {n}")
        return 0

    cache = get_cache(str(CACHE))
    if not args.keep and not args.only:
        cache.clear_cache()
        cache = get_cache(str(CACHE))

    def todo(batch):
        if not args.keep:
            return batch
        left = []
        for n in batch:
            try:
                cache.match_cache_notebook(nbformat.read(ROOT / f"{n}.ipynb", as_version=4))
            except KeyError:
                left.append(n)
        return left

    one_bandwidth(fresh=not args.keep and not args.only)
    keep_figures(fresh=not args.keep and not args.only)
    failed = []
    start = time.perf_counter()

    def store(docname, nb, seconds, error, alone=False):
        if error:
            failed.append(docname)
            print(f"FAILED {docname} after {seconds:.1f} s\n{error}", file=sys.stderr, flush=True)
            return
        record = cache.add_nb_to_project(str(ROOT / f"{docname}.ipynb"))
        data = {"execution_seconds": seconds, "executed_by": "scripts/execute_book.py",
                "kernels_at_once": 1 if alone else args.jobs}
        cache.cache_notebook_bundle(CacheBundleIn(nb, record.uri, data=data),
                                    check_validity=False, overwrite=True)
        print(f"executed {docname} in {seconds:.1f} s", flush=True)

    threads = max(1, (os.cpu_count() or 1) // args.jobs)
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(_execute, n, threads) for n in todo(shared)]
        for future in as_completed(futures):
            store(*future.result())
    with ProcessPoolExecutor(max_workers=1) as pool:
        for n in todo(alone):
            store(*pool.submit(_execute, n, None).result(), alone=True)

    seconds = time.perf_counter() - start
    print(f"{len(names) - len(failed)} of {len(names)} pages executed or cached in {seconds:.0f} s "
          f"({args.jobs} at a time)")
    if not args.only:     # the build report says how the pages ran (_ext/llmlab_site.py reads this)
        plan = {"jobs": args.jobs, "threads_shared": threads if args.jobs > 1 else os.cpu_count(),
                "threads_alone": os.cpu_count(), "seconds": seconds, "kept": args.keep}
        (ROOT / "_build" / "execution.json").write_text(json.dumps(plan))
    if failed:
        print("These pages failed (their tracebacks are above): " + ", ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
