"""The house rules of the source tree (docs/ARCHITECTURE.md): small files, layers that point one way
(consumers -> stream -> model), no import circle, no private names taken from another module."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PARTS = ("model", "stream", "consumers")
MAX_LINES = 800
#: Which parts each part may import (the layers point one way).
ALLOWED = {"model": {"model"}, "stream": {"stream", "model"}, "consumers": {"consumers", "stream", "model"}}


def _modules() -> dict[str, Path]:
    out = {}
    for part in PARTS:
        for path in sorted((ROOT / part).rglob("*.py")):
            relative = path.relative_to(ROOT).with_suffix("")
            parts = list(relative.parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out["sgm." + ".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> list[tuple[str, list[str], int]]:
    """(imported module, names taken from it, line) for every import in the file, at any depth."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append((alias.name, [], node.lineno))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [a.name for a in node.names]
            # "from package import module" imports the module
            submodules = [f"{target}.{n}" for n in names if f"{target}.{n}" in MODULES]
            if submodules:
                found += [(m, [], node.lineno) for m in submodules]
                names = [n for n in names if f"{target}.{n}" not in MODULES]
                if not names:
                    continue
            found.append((target, names, node.lineno))
    return found


def _resolve(target: str) -> str | None:
    while target and target not in MODULES:
        target = target.rpartition(".")[0]
    return target or None


@pytest.mark.parametrize("name", sorted(MODULES))
def test_file_is_small(name):
    lines = len(MODULES[name].read_text().splitlines())
    assert lines <= MAX_LINES, f"{MODULES[name].relative_to(ROOT)}: {lines} lines (split it by job)"


def test_only_sgm_names_and_layers_point_one_way():
    problems = []
    for name, path in MODULES.items():
        part = name.split(".")[1]
        for target, _, line in _imports(name, path):
            top = target.split(".")[0]
            if top in PARTS:
                problems.append(f"{path.relative_to(ROOT)}:{line}: imports {target!r} (use sgm.{target})")
            if top == "sgm" and target.split(".")[1:2] and target.split(".")[1] not in ALLOWED[part]:
                problems.append(f"{path.relative_to(ROOT)}:{line}: {part} imports {target} (layers: consumers -> stream -> model)")
    assert not problems, "\n".join(problems)


def test_no_private_names_from_other_modules():
    problems = []
    for name, path in MODULES.items():
        for target, names, line in _imports(name, path):
            resolved = _resolve(target)
            if resolved is None or resolved == name:
                continue
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            if private:
                problems.append(f"{path.relative_to(ROOT)}:{line}: takes {private} from {resolved}")
    assert not problems, "\n".join(problems)


def test_no_import_circle():
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        for target, _, _ in _imports(name, path):
            resolved = _resolve(target)
            # a package's __init__ re-exporting its own modules is not a circle with them
            if resolved and resolved != name and not resolved.startswith(name + "."):
                graph[name].add(resolved)
    # Tarjan's strongly connected components
    index, low, on_stack, stack, circles = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not circles, "import circles: " + "; ".join(" <-> ".join(c) for c in circles)
