"""The `llmlab` command line: tools for instructors, and for the converted-model cache.

    llmlab assign SRC... --out DIR            student copies without solutions
    llmlab grade SUBMISSIONS --assignment NB --out REPORT
                                              run each submission in a sandbox, grade it, write grades.csv/.json
    llmlab exercises                          list the automatically checked exercises
    llmlab cache [--clean [--dry-run]]        list the cache entries; delete the stale ones

assign and grade need the instructor extra: pip install "llmlab[instructor]".
See the instructor guide appendix of the book for an example run.
"""
from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="llmlab", description="llmlab tools for instructors and for the model cache.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("assign", help="write student notebooks: solution cells become NotImplementedError stubs")
    p.add_argument("sources", nargs="+", help="notebooks, or folders of notebooks, with cells tagged 'solution'")
    p.add_argument("--out", required=True, help="folder for the student copies (created if needed)")

    p = sub.add_parser("grade", help="run each submitted notebook in a sandbox and grade its exercises")
    p.add_argument("submissions", help="folder with one submitted .ipynb per student (file name = student)")
    p.add_argument("--out", required=True, help="folder for grades.csv and grades.json")
    p.add_argument("--timeout", type=float, default=120, help="seconds allowed per notebook (default 120)")
    p.add_argument("--assignment", default=None,
                   help="the assigned notebook (or folder): its check() calls are the exercises to grade "
                        "(this or --expected is required; the list never comes from the submissions)")
    p.add_argument("--expected", default=None,
                   help="comma-separated exercise ids to grade, e.g. softmax,causal_mask (with or instead of --assignment)")
    p.add_argument("--call-limit", type=float, default=10,
                   help="seconds for one call of a learner's function, timed by the grader (default 10)")
    p.add_argument("--no-sandbox", action="store_true",
                   help="do not use bubblewrap even where it works (weaker containment; a warning says what)")
    p.add_argument("--kernel", default="python3", help="Jupyter kernel name (default python3)")

    sub.add_parser("exercises", help="list the automatically checked exercises")

    p = sub.add_parser("cache", help="list llmlab's converted-model cache ($LLMLAB_CACHE, default ~/.cache/llmlab)")
    p.add_argument("--clean", action="store_true",
                   help="delete the stale entries (source file gone or changed, unfinished conversions)")
    p.add_argument("--dry-run", action="store_true", help="with --clean: only say what would be deleted")
    return parser


def _cache_command(clean: bool, dry_run: bool) -> None:
    from llmlab.cache import cache_entries, cache_root, clean_cache

    def mib(n):
        return f"{n / 2**20:,.0f} MiB"

    entries = cache_entries()
    print(f"llmlab cache: {cache_root()} ({len(entries)} entries, {mib(sum(e.bytes for e in entries))})")
    for entry in entries:
        print(f"  {entry.folder.name:<36} {mib(entry.bytes):>10}  {entry.status}")
    if clean:
        removed = clean_cache(dry_run=dry_run)
        verb = "would delete" if dry_run else "deleted"
        print(f"{verb} {len(removed)} stale entries, {mib(sum(e.bytes for e in removed))}")
    elif any(e.stale for e in entries):
        print("llmlab cache --clean deletes the stale entries (a later load converts again if ever needed).")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "assign":
            from llmlab.exercises.assign import assign
            assign(args.sources, args.out)
        elif args.command == "grade":
            from llmlab.exercises.grading import grade
            expected = [e.strip() for e in args.expected.split(",") if e.strip()] if args.expected else None
            grade(args.submissions, args.out, timeout=args.timeout, expected=expected,
                  assignment=args.assignment, kernel=args.kernel, call_limit=args.call_limit,
                  sandbox=False if args.no_sandbox else None)
        elif args.command == "cache":
            if args.dry_run and not args.clean:
                raise ValueError("--dry-run goes with --clean: llmlab cache --clean --dry-run")
            _cache_command(args.clean, args.dry_run)
        else:
            from llmlab.exercises import EXERCISES
            for ex in EXERCISES:
                print(f"ch. {ex.chapter:>2}  {ex.id:<22} {ex.signature}")
    except (FileNotFoundError, ValueError) as e:
        print(f"llmlab {args.command}: error: {e}", file=sys.stderr)
        return 2
    except ImportError as e:  # nbformat, nbclient or ipykernel missing
        if args.command not in ("assign", "grade"):
            raise
        print(f"llmlab {args.command}: error: this command needs the instructor extra, which is not installed "
              f"({e.name or e}). Install it with: pip install \"llmlab[instructor]\"", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
