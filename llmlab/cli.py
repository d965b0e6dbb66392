"""The `llmlab` command line: tools for instructors.

    llmlab assign SRC... --out DIR            student copies without solutions
    llmlab grade SUBMISSIONS --out REPORT     run submissions, write grades.csv and grades.json
    llmlab exercises                          list the automatically checked exercises

See the instructor guide appendix of the book for an example run.
"""
from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="llmlab", description="llmlab tools for instructors.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("assign", help="write student notebooks: solution cells become NotImplementedError stubs")
    p.add_argument("sources", nargs="+", help="notebooks, or folders of notebooks, with cells tagged 'solution'")
    p.add_argument("--out", required=True, help="folder for the student copies (created if needed)")

    p = sub.add_parser("grade", help="execute submitted notebooks and collect their check results")
    p.add_argument("submissions", help="folder with one submitted .ipynb per student (file name = student)")
    p.add_argument("--out", required=True, help="folder for grades.csv and grades.json")
    p.add_argument("--timeout", type=float, default=120, help="seconds allowed per notebook (default 120)")
    p.add_argument("--expected", default=None,
                   help="comma-separated exercise ids every submission must report, e.g. softmax,causal_mask")
    p.add_argument("--assignment", default=None,
                   help="the assigned notebook (or folder): its check() calls are the expected exercises")
    p.add_argument("--kernel", default="python3", help="Jupyter kernel name (default python3)")

    sub.add_parser("exercises", help="list the automatically checked exercises")
    return parser


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
                  assignment=args.assignment, kernel=args.kernel)
        else:
            from llmlab.exercises import EXERCISES
            for ex in EXERCISES:
                print(f"ch. {ex.chapter:>2}  {ex.id:<22} {ex.signature}")
    except (FileNotFoundError, ValueError) as e:
        print(f"llmlab {args.command}: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
