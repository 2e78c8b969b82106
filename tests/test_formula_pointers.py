"""Every code pointer of docs/ARCHITECTURE.md's formula table lands on something that exists.

The table ("Where each formula lives") is how a reader goes from a formula of docs/MODEL.md to the
function computing it. Pointers go stale when code moves (a split file, a method that moved to
another class); this reads each backticked pointer of the table's code column and checks it:

* ``path.py: Name, Other.attr``: the file exists and defines each name (a ``def``, a ``class``, an
  assignment, or ``attr`` inside the file that defines ``Other``);
* ``path.py``: the file exists (``smoothing/`` and ``loops/`` are short for ``model/smoothing/`` and
  ``model/loops/``; a bare file name is looked up in the code folders);
* ``Class.attr``: some module of ``model/``, ``stream/`` or ``consumers/`` defines the class, and its
  file defines ``attr``;
* a CamelCase name (``ClassTerms``): some module defines it.

Anything else in backticks (formulas, parameter names) is not a pointer and is left alone.
"""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODE_DIRS = ("model", "stream", "consumers")
PREFIXES = {"smoothing/": "model/smoothing/", "loops/": "model/loops/"}
IDENT = r"[A-Za-z_]\w*"


def formula_table() -> list[str]:
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text[text.index("## Where each formula lives"):text.index("### Inside model/")]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| [MODEL.md]")]
    assert len(rows) >= 15, "the formula table was not found"
    return [re.split(r"(?<!\\)\|", row)[2] for row in rows]  # the code column


@lru_cache(maxsize=None)
def sources() -> dict[Path, str]:
    return {path: path.read_text(encoding="utf-8") for folder in CODE_DIRS + ("tests",)
            for path in (ROOT / folder).rglob("*.py")}


def resolve(name: str) -> Path | None:
    for short, full in PREFIXES.items():
        if name.startswith(short):
            name = full + name[len(short):]
    if (ROOT / name).is_file():
        return ROOT / name
    if "/" not in name:
        found = [path for path in sources() if path.name == name and "tests" not in path.parts[len(ROOT.parts):][:1]]
        if len(found) == 1:
            return found[0]
    return None


def defines(text: str, name: str) -> bool:
    return re.search(rf"^\s*(?:async\s+)?(?:def|class)\s+{name}\b|^\s*(?:self\.)?{name}\s*(?::[^=\n]*)?=",
                     text, re.MULTILINE) is not None


def defining_file(class_name: str) -> Path | None:
    for path, text in sources().items():
        if re.search(rf"^\s*class\s+{class_name}\b", text, re.MULTILINE):
            return path
    return None


def problems_of(pointer: str) -> list[str]:
    pointer = pointer.replace("\\|", "|")
    with_names = re.fullmatch(rf"([\w/]+\.py): ({IDENT}(?:\.{IDENT})?(?:, {IDENT}(?:\.{IDENT})?)*)", pointer)
    if with_names:
        path = resolve(with_names.group(1))
        if path is None:
            return [f"{pointer}: no file {with_names.group(1)}"]
        text = sources()[path] if path in sources() else path.read_text(encoding="utf-8")
        return [f"{pointer}: {name} is not defined in {path.relative_to(ROOT)}"
                for name in with_names.group(2).split(", ") if not defines(text, name.split(".")[-1])
                or ("." in name and not defines(text, name.split(".")[0]))]
    if re.fullmatch(r"[\w/]+\.py", pointer):
        return [] if resolve(pointer) else [f"{pointer}: no such file"]
    attribute = re.fullmatch(rf"([A-Z]{IDENT})\.({IDENT})", pointer)
    if attribute:
        path = defining_file(attribute.group(1))
        if path is None:
            return [f"{pointer}: no class {attribute.group(1)}"]
        return [] if defines(sources()[path], attribute.group(2)) else [
            f"{pointer}: {attribute.group(2)} is not defined in {path.relative_to(ROOT)}"]
    if re.fullmatch(r"[A-Z][a-z]+[A-Z]\w*", pointer):
        return [] if any(defines(text, pointer) for text in sources().values()) else [f"{pointer}: not defined"]
    return []


def test_every_pointer_of_the_formula_table_resolves():
    problems, checked = [], 0
    for cell in formula_table():
        for pointer in re.findall(r"`([^`]+)`", cell):
            found = problems_of(pointer)
            checked += bool(re.search(r"\.py\b|^[A-Z]", pointer))
            problems += found
    assert checked >= 50, f"only {checked} pointers read: has the table's form changed?"
    assert not problems, "stale pointers in docs/ARCHITECTURE.md's formula table:\n" + "\n".join(problems)


def test_a_stale_pointer_is_reported():
    assert problems_of("smoothing/power_law.py: PowerLawDiscount.label_totals")  # moved to CountDiscount.head_totals
    assert problems_of("PowerLawDiscount.label_totals")
    assert problems_of("model/nowhere.py")
    assert problems_of("NoSuchClass")
    assert not problems_of("smoothing/composite.py: DiscountChain.label_totals, log_smoothing_weight")
    assert not problems_of("CountState.resum_totals") and not problems_of("absolute.py")
