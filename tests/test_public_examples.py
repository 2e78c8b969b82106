"""Every public class a package of ``sgm`` exports has a numpydoc ``Examples`` section that runs.

The owners' guide asks for numpydoc docstrings with runnable examples on public classes. Public here:
each class a package (a folder with ``__init__.py`` under ``sgm.model``, ``sgm.stream``,
``sgm.consumers``) lists in its ``__all__`` (or, without one, defines or imports from its own
modules), and the classes of ``sgm.stream.records``, the public face of the record schemas. The
examples themselves run in tests/test_doctests.py; this checks that there is one on the class, in
the module test_doctests.py collects it from.
"""
from __future__ import annotations

import doctest
import importlib
import inspect
import pkgutil

PARTS = ("sgm.model", "sgm.stream", "sgm.consumers")
#: Modules that are a public face without being a package.
FACES = ("sgm.stream.records",)


def exported_classes() -> list[tuple[str, str, type]]:
    names = list(FACES)
    for part in PARTS:
        package = importlib.import_module(part)
        names.append(part)
        names += [info.name for info in pkgutil.walk_packages(package.__path__, part + ".") if info.ispkg]
    found = []
    for name in sorted(set(names)):
        module = importlib.import_module(name)
        public = getattr(module, "__all__", None)
        if public is None:
            public = [key for key, value in vars(module).items() if not key.startswith("_") and inspect.isclass(value)
                      and value.__module__.startswith(name + ".")]
        found += [(name, key, getattr(module, key)) for key in public if inspect.isclass(getattr(module, key))]
    return found


def test_every_exported_class_has_a_running_example():
    classes = exported_classes()
    assert len(classes) >= 40, "fewer exported classes than expected: has __all__ changed shape?"
    missing = []
    for package, name, cls in classes:
        own = cls.__dict__.get("__doc__") or ""
        if "Examples\n" not in own or ">>>" not in own:
            missing.append(f"{package}.{name} ({cls.__module__}): no Examples section with >>> in its docstring")
            continue
        module = importlib.import_module(cls.__module__)
        found = {test.name for test in doctest.DocTestFinder().find(module, cls.__module__) if test.examples}
        if f"{cls.__module__}.{cls.__qualname__}" not in found:
            missing.append(f"{package}.{name}: its example is not collected from {cls.__module__}")
    assert not missing, "\n".join(missing)
