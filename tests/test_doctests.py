"""Every `>>>` example in llmlab's docstrings runs, and prints what the docstring says it prints.

A docstring's worked example is part of the text a learner reads; a wrong one teaches the wrong
thing. Examples that would need the real models or the network are marked ``# doctest: +SKIP``
(they are still read, so a test below can count them).
"""
import doctest
import importlib
import pkgutil
from pathlib import Path

import pytest

import llmlab

MODULES = ["llmlab"] + sorted(m.name for m in pkgutil.walk_packages(llmlab.__path__, "llmlab."))
FLAGS = doctest.ELLIPSIS   # "..." stands for a long or machine-dependent part of an output


def docstring_tests(name: str) -> list:
    module = importlib.import_module(name)
    return [test for test in doctest.DocTestFinder().find(module, name) if test.examples]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    report = []
    for test in docstring_tests(name):
        runner.run(test, out=report.append)
    failed, attempted = runner.failures, runner.tries
    assert failed == 0, f"{failed} of {attempted} examples in {name} fail:\n" + "".join(report)


def test_every_written_example_is_found():
    """The finder sees every `>>>` line of the package: none sits where doctest cannot reach it."""
    written = sum(line.lstrip().startswith(">>> ")
                  for path in Path(llmlab.__file__).parent.rglob("*.py")
                  for line in path.read_text(encoding="utf-8").splitlines())
    found = sum(len(test.examples) for name in MODULES for test in docstring_tests(name))
    assert written > 0
    assert found == written, f"{written} '>>>' lines in llmlab's sources, but doctest finds {found} examples"
