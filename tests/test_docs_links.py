"""No link in the documentation leaves the repository, and every one resolves: relative links point at
files that exist inside the repository, and an ``#anchor`` at a heading of the file it names."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "deploy" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", text))


def anchors(page: Path) -> set[str]:
    lines = page.read_text(encoding="utf-8").splitlines()
    in_code = False
    found = set()
    for line in lines:
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            found.add(slug(line.lstrip("#")))
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_stay_in_the_repository_and_resolve(page):
    problems = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"^[a-z]+:", target):  # http(s), mailto: outside links are fine
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if ROOT not in resolved.parents and resolved != ROOT:
            problems.append(f"{target}: leaves the repository")
        elif not resolved.exists():
            problems.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            problems.append(f"{target}: no heading #{anchor} in {resolved.relative_to(ROOT)}")
    assert not problems, f"{page.relative_to(ROOT)}:\n" + "\n".join(problems)


def test_the_readme_names_the_guide_and_the_schemas():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    own = text[text.index("## Your own data"):text.index("## A short tour")]
    commands = [line.split()[0] for line in own.split("```bash")[1].split("```")[0].strip().splitlines()]
    assert len(commands) == 6 and all(c == ".venv/bin/sgm" for c in commands)
    assert "docs/SCHEMAS.md" in own and "docs/YOUR_DATA.md" in own
    assert text.index("## Your own data") < text.index("## A short tour")  # right after the two commands
