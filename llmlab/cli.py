"""The `llmlab` command line: tools for instructors, and for the converted-model cache.

    llmlab example DIR                        the guide's example: a lesson, a class's submissions, a roster
    llmlab assign SRC... --out DIR            student copies without solutions
    llmlab grade SUBMISSIONS --assignment NB --out REPORT [--roster CSV] [--jobs N] [--shard K/N]
                                              run each submission in a sandbox, grade it, write the gradebook,
                                              the Canvas and Moodle import files and a feedback file per submission
    llmlab merge REPORT... --out DIR          one gradebook from the reports of `grade --shard K/N` runs
    llmlab exercises                          list the automatically checked exercises
    llmlab cache [--clean [--dry-run]]        list the cache entries; delete the stale ones
    llmlab --version

assign and grade need the instructor extra (the error message says the pip command).
The instructor guide appendix of the book walks through a whole course.
"""
from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    import llmlab

    parser = argparse.ArgumentParser(prog="llmlab", description="llmlab tools for instructors and for the model cache.")
    parser.add_argument("--version", action="version", version=f"llmlab {llmlab.__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("example", help="write the instructor guide's example: a lesson, submissions and a roster")
    p.add_argument("folder", help="a new folder for lesson/, submissions/ and roster.csv")

    p = sub.add_parser("assign", help="write student notebooks: solution cells become NotImplementedError stubs")
    p.add_argument("sources", nargs="+", help="notebooks, or folders of notebooks, with cells tagged 'solution'")
    p.add_argument("--out", required=True, help="folder for the student copies (created if needed)")

    p = sub.add_parser("grade", help="run each submitted notebook in a sandbox and grade its exercises")
    p.add_argument("submissions", help="folder with the submitted notebooks: one .ipynb per student, a folder per "
                                       "student, or a Canvas or Moodle download (unpacked)")
    p.add_argument("--out", required=True, help="a new folder for the reports and feedback files (never overwritten)")
    p.add_argument("--assignment", default=None,
                   help="the assigned notebook (or folder): its check() calls are the exercises to grade "
                        "(this or --expected is required; the list never comes from the submissions)")
    p.add_argument("--expected", default=None,
                   help="comma-separated exercise ids to grade, e.g. softmax,causal_mask (with or instead of --assignment)")
    p.add_argument("--points", default=None, help="points per exercise, e.g. softmax=2,sdpa=3 (default: the "
                                                  "assignment's metadata, else the registry's, else 1)")
    p.add_argument("--roster", default=None, help="CSV of the class (column `student`; optional name, email, section, "
                                                  "sis_user_id, sis_login_id): absent students get 'missing' rows")
    p.add_argument("--title", default=None, help="the assignment's name in canvas.csv and the feedback "
                                                 "(default: the assignment's file name)")
    p.add_argument("--jobs", type=int, default=None, help="submissions graded side by side (default: the cores)")
    p.add_argument("--shard", default=None, help="K/N: grade only shard K of N (a stable split by student), "
                                                 "e.g. one task of a Slurm array; join the shards with llmlab merge")
    p.add_argument("--timeout", type=float, default=120, help="seconds allowed per notebook (default 120)")
    p.add_argument("--call-limit", type=float, default=10,
                   help="seconds for one call of a learner's function, timed by the grader (default 10)")
    p.add_argument("--unsafe-no-sandbox", action="store_true",
                   help="run the notebooks WITHOUT a sandbox, with your own permissions (only for notebooks you "
                        "trust; without this flag grade refuses where bubblewrap cannot make a sandbox)")
    p.add_argument("--no-sandbox", action="store_true", help=argparse.SUPPRESS)   # the old name: explained below
    p.add_argument("--kernel", default="python3", help="Jupyter kernel name (default python3)")
    p.add_argument("--language", default=None, choices=["en", "zh_CN"],
                   help="language of the students' feedback pages (default: LLMLAB_LANGUAGE, else en); the "
                        "CSV and JSON reports stay English")
    p.add_argument("--run-every-cell", action="store_true",
                   help="run every cell of each notebook (default: skip the unchanged cells no exercise needs, "
                        "such as a chapter's figures; tag a cell grade-run or grade-skip to decide yourself)")

    p = sub.add_parser("merge", help="merge the reports of `grade --shard K/N` runs into one")
    p.add_argument("reports", nargs="+", help="the --out folders of the shards")
    p.add_argument("--out", required=True, help="a new folder for the merged reports")

    sub.add_parser("exercises", help="list the automatically checked exercises")

    p = sub.add_parser("cache", help="list llmlab's converted-model cache ($LLMLAB_CACHE, default ~/.cache/llmlab)")
    p.add_argument("--clean", action="store_true",
                   help="delete the stale entries (source file gone or changed, unfinished conversions)")
    p.add_argument("--dry-run", action="store_true", help="with --clean: only say what would be deleted")
    return parser


def _pairs(text: str | None) -> dict | None:
    """"softmax=2,sdpa=3" -> {"softmax": 2.0, "sdpa": 3.0}."""
    if not text:
        return None
    out = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        name, _, value = part.partition("=")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            raise ValueError(f"--points takes id=number pairs, e.g. softmax=2,sdpa=3; got {part!r}.") from None
    return out


def _shard(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    k, _, n = text.partition("/")
    try:
        return int(k), int(n)
    except ValueError:
        raise ValueError(f"--shard takes K/N, e.g. 2/8 for the second of eight shards; got {text!r}.") from None


def _cache_command(clean: bool, dry_run: bool) -> None:
    from llmlab.disk_cache import cache_entries, cache_root, clean_cache

    def mib(n):
        return f"{n / 2**20:,.0f} MiB"

    root, entries = cache_root(), cache_entries()
    print(f"llmlab cache: {root} ({len(entries)} entries, {mib(sum(e.bytes for e in entries))})")
    names = [entry.folder.relative_to(root).as_posix() for entry in entries]
    width = max(map(len, names), default=0)
    for name, entry in zip(names, entries):
        print(f"  {name:<{width}}  {mib(entry.bytes):>10}  {entry.status}")
    if clean:
        removed = clean_cache(dry_run=dry_run)
        verb = "would delete" if dry_run else "deleted"
        print(f"{verb} {len(removed)} stale entries, {mib(sum(e.bytes for e in removed))}")
    elif any(e.stale for e in entries):
        print("llmlab cache --clean deletes the stale entries (a later load converts again if ever needed).")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from llmlab.grading.sandbox import SandboxUnavailable
    try:
        if args.command == "assign":
            from llmlab.grading.assign import assign
            assign(args.sources, args.out)
        elif args.command == "example":
            from llmlab.grading.example import write_example
            write_example(args.folder)
        elif args.command == "grade":
            from llmlab.grading.grade import grade
            if args.no_sandbox:
                raise ValueError("--no-sandbox is now called --unsafe-no-sandbox, which says what it gives up: the "
                                 "notebooks run with your own permissions. grade uses a sandbox wherever one can "
                                 "be made; use --unsafe-no-sandbox only for notebooks you trust.")
            expected = [e.strip() for e in args.expected.split(",") if e.strip()] if args.expected else None
            grade(args.submissions, args.out, timeout=args.timeout, expected=expected,
                  assignment=args.assignment, kernel=args.kernel, call_limit=args.call_limit,
                  unsafe_no_sandbox=args.unsafe_no_sandbox, jobs=args.jobs, roster=args.roster,
                  shard=_shard(args.shard), points=_pairs(args.points), title=args.title,
                  run_every_cell=args.run_every_cell, language=args.language)
        elif args.command == "merge":
            from llmlab.grading.outputs import merge
            merge(args.reports, args.out)
        elif args.command == "cache":
            if args.dry_run and not args.clean:
                raise ValueError("--dry-run goes with --clean: llmlab cache --clean --dry-run")
            _cache_command(args.clean, args.dry_run)
        else:
            from llmlab.exercises import EXERCISES
            for ex in EXERCISES:
                print(f"ch. {str(ex.chapter):>3}  {ex.id:<22} {ex.points:g} pt  {ex.signature}")
    except (FileNotFoundError, ValueError, SandboxUnavailable) as e:
        print(f"llmlab {args.command}: error: {e}", file=sys.stderr)
        return 2
    except ImportError as e:  # nbformat, nbclient or ipykernel missing
        if args.command not in ("assign", "grade", "example", "merge"):
            raise
        from llmlab.notebook import install_command
        print(f"llmlab {args.command}: error: this command needs the instructor extra, which is not installed "
              f"({e.name or e}). Install it with: {install_command('instructor')}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
