"""The instructor's side of the exercises: student copies, and grading a whole class.

What a learner calls (check, the checks, the exercise registry) is llmlab.exercises; this package
builds on it and nothing in llmlab.exercises imports from here. One module per step:

    assign.py       `llmlab assign`: student copies, solutions stubbed out
    submissions.py  finding the submissions, whose they are, the roster, shards, the exercises and points
    sandbox.py      where a notebook runs: a bubblewrap sandbox (or nothing runs)
    remote.py       the grader's requests to a running notebook's kernel
    wire.py         what crosses between grader and kernel: plain data only
    grade.py        `llmlab grade`: the steps in order, --jobs worker processes
    reports.py      grade rows, the long CSV and the wide gradebook
    lms.py          the Canvas and Moodle import files
    outputs.py      every file of a run, in a new --out folder; `llmlab merge` for shards
    feedback.py     a feedback page per submitting student, safe to send
    example.py      `llmlab example`: the guide's example class (data/attention_lesson.ipynb)
"""
