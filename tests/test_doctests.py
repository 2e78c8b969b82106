"""The runnable examples in the installed package's docstrings (numpydoc ``Examples`` sections).

Collected from the ``sgm`` package as it is imported, so every module runs under its
installed name (``sgm.model.mnb``), never as a second copy loaded from a file path.
"""
from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

#: The installed package's parts (the design card's folders).
PARTS = ("sgm.model", "sgm.stream", "sgm.consumers")


def _modules() -> list[str]:
    # sgm is a namespace package (its editable install's path hook lists nothing): walk its parts
    names = []
    for part in PARTS:
        package = importlib.import_module(part)
        names.append(part)
        names += [info.name for info in pkgutil.walk_packages(package.__path__, part + ".")]
    return sorted(names)


#: Test helpers with examples of their own (they ran under --doctest-modules before).
MODULES = _modules() + ["tests.test_deploy"]


def test_the_package_has_modules_to_check():
    assert {"sgm.model.mnb", "sgm.stream.records", "sgm.consumers.logs"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    tests = finder.find(module, name)
    for test in tests:
        runner.run(test, out=lambda text: None, clear_globs=False)
    result = runner.summarize(verbose=False)
    if result.failed:
        report = []
        for test in tests:
            one = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
            lines: list[str] = []
            one.run(test, out=lines.append)
            if one.failures:
                report.append("".join(lines))
        pytest.fail(f"{result.failed} of {result.attempted} examples failed in {name}:\n" + "\n".join(report)[:6000])
