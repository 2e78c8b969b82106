"""``python -m bench.results --only DATA --merge``: a partial run's rows and sections merged into the page.

A full run of docs/RESULTS.md takes hours on two cores, and its work folder (every tuned configuration
and report) does not outlive the machine it ran on. A dataset rerun alone (``--only``) writes a page of
that dataset only; ``--merge`` puts its parts into the existing page instead:

* its sections under "## Per dataset" (``### DATA — MODE``) replace the page's;
* in the summary tables (before "## Per dataset"), its rows replace the page's rows of the same dataset
  (matched by the table's heading and header line, and by the row's first word), new rows go before the
  table's mean row, and rows of the dataset the rerun no longer has are dropped;
* its notes in "## Where tuning did not carry over" replace the dataset's;
* the "Generated ..." line says which datasets were regenerated when.

Datasets whose scores feed a mean of the page (:data:`MEAN_DATASETS`) are merged only all together: the
page's means (the tables' ``**mean ...`` rows) and the sentences that state them (:data:`MEAN_LINES`) are
computed from exactly those datasets, so a rerun of all of them writes them anew, while a rerun of one
would leave them stale (refused). A rerun of all three need not run every candidate again:
``python -m bench.results_seed`` rebuilds their work folder from the page, and ``--resume`` then runs
only what is missing. Everything else of the page stays as generated before.

>>> old = "# Results\\n\\nGenerated 2026-11-26 by x.\\n\\n## Table\\n\\n| dataset | score |\\n|---|---|\\n" \\
...       "| r8 | 0.9 |\\n| reuters21578 | 0.8 |\\n\\n## Per dataset\\n\\n### reuters21578 — split\\n\\nold\\n"
>>> new = "# Results\\n\\nGenerated 2026-11-27 by x.\\n\\n## Table\\n\\n| dataset | score |\\n|---|---|\\n" \\
...       "| reuters21578 | 0.85 |\\n\\n## Per dataset\\n\\n### reuters21578 — split\\n\\nnew\\n"
>>> print(merge_page(old, new, {"reuters21578"}, "2026-11-27 18:00 UTC"))  # doctest: +NORMALIZE_WHITESPACE
# Results
<BLANKLINE>
Generated 2026-11-26 by x. Regenerated since by `python -m bench.results --only ... --merge`: reuters21578 (2026-11-27 18:00 UTC).
<BLANKLINE>
## Table
<BLANKLINE>
| dataset | score |
|---|---|
| r8 | 0.9 |
| reuters21578 | 0.85 |
<BLANKLINE>
## Per dataset
<BLANKLINE>
### reuters21578 — split
<BLANKLINE>
new
<BLANKLINE>
"""
from __future__ import annotations

import re

#: Datasets behind the page's means (the split and topic-set tables): a rerun of one changes the means.
MEAN_DATASETS = frozenset({"r8", "r52", "webkb"})
#: The sentences of the summaries that state those means (replaced with the means, by their first words).
MEAN_LINES = ("Target (issue 5;", "Goal (issue 19):")
#: A table's mean row: its first word.
_MEAN = "**mean"

_PER_DATASET = "## Per dataset"
_NOTES = "## Where tuning did not carry over"
_MERGED = " Regenerated since by `python -m bench.results --only ... --merge`: "


class MergeError(ValueError):
    """The partial page does not fit the page it is merged into (run the full page instead)."""


def _key(row: str) -> str:
    """A table row's dataset: the first word of its first cell (``spamassassin (ts order)`` -> spamassassin)."""
    cell = row.strip().strip("|").split("|")[0].strip()
    key = cell.split(" ")[0] if cell else ""
    return _MEAN if key.startswith(_MEAN) else key  # "**mean**", "**mean r8, r52, webkb**"


def _tables(lines: list[str], end: int) -> dict[tuple[str, str], tuple[int, int]]:
    """The tables before line ``end``: (## heading, header line) -> (first line, one past the last)."""
    found, heading, i = {}, "", 0
    while i < end:
        if lines[i].startswith("## "):
            heading = lines[i]
        if lines[i].startswith("|"):
            start = i
            while i < end and lines[i].startswith("|"):
                i += 1
            found.setdefault((heading, lines[start]), (start, i))
            continue
        i += 1
    return found


def _sections(lines: list[str]) -> dict[str, tuple[int, int]]:
    """The per-dataset sections: ``### DATA — MODE`` heading -> (its line, one past its last line)."""
    found, i = {}, 0
    while i < len(lines):
        if lines[i].startswith("### "):
            start, i = i, i + 1
            while i < len(lines) and not lines[i].startswith(("### ", "## ")):
                i += 1
            found[lines[start]] = (start, i)
            continue
        i += 1
    return found


def _index(lines: list[str], heading: str) -> int:
    return lines.index(heading) if heading in lines else len(lines)


def check_mergeable(datasets: set[str] | None) -> None:
    """Raise :class:`MergeError` unless a rerun of ``datasets`` alone can be merged into the page."""
    if not datasets:
        raise MergeError("needs --only: the datasets to rerun")
    refused = sorted(set(datasets) & MEAN_DATASETS)
    if refused and not MEAN_DATASETS <= set(datasets):
        raise MergeError(f"{', '.join(refused)} feed the page's means: rerun {', '.join(sorted(MEAN_DATASETS))} "
                         "together (python -m bench.results_seed rebuilds their work folder from the page)")


def merge_page(old: str, new: str, datasets: set[str], when: str) -> str:
    """``old`` with the parts of ``datasets`` taken from ``new`` (a page of those datasets only)."""
    check_mergeable(datasets)
    page, part = old.splitlines(), new.splitlines()
    means = MEAN_DATASETS <= set(datasets)  # the rerun holds every dataset behind the means: they come with it
    keys = set(datasets) | ({_MEAN} if means else set())
    # the per-dataset sections, replaced whole
    sections = _sections(page)
    for heading, (start, stop) in _sections(part).items():
        if heading.split(" ")[1] not in datasets:
            continue
        if heading not in sections:
            raise MergeError(f"the page has no section {heading!r}: regenerate the whole page")
        old_start, old_stop = sections[heading]
        block = part[start:stop]
        page[old_start:old_stop] = block
        sections = _sections(page)
    # the summary tables' rows, by table and dataset
    tables = _tables(page, _index(page, _PER_DATASET))
    for where, (start, stop) in _tables(part, _index(part, _PER_DATASET)).items():
        rows = [row for row in part[start + 2:stop] if _key(row) in keys]
        if where not in tables:
            if rows:
                raise MergeError(f"the page has no table {where[1]!r} under {where[0]!r}: regenerate the whole page")
            continue
        old_start, old_stop = tables[where]
        body, placed = [], set()
        for kept in page[old_start + 2:old_stop]:
            key = _key(kept)
            if key not in keys:
                body.append(kept)
            elif key not in placed:  # the dataset's new rows at its old rows' place
                body += [row for row in rows if _key(row) == key]
                placed.add(key)
        left = [row for row in rows if _key(row) not in placed]  # new rows: before the mean row
        at = next((i for i, kept in enumerate(body) if _key(kept) == _MEAN), len(body))
        body[at:at] = left
        page[old_start + 2:old_stop] = body
        tables = _tables(page, _index(page, _PER_DATASET))
    # the sentences that state the means
    if means:
        for prefix in MEAN_LINES:
            given = [line for line in part[:_index(part, _PER_DATASET)] if line.startswith(prefix)]
            at = [i for i, line in enumerate(page[:_index(page, _PER_DATASET)]) if line.startswith(prefix)]
            if given and at:
                page[at[0]] = given[0]
    # the notes of tuning that did not carry over
    if _NOTES in page:
        notes = [line for line in part[_index(part, _NOTES):] if line.startswith("- ") and _key(line[2:]) in datasets]
        start = page.index(_NOTES)
        stop = next((i for i in range(start + 1, len(page)) if page[i].startswith("## ")), len(page))
        kept = [i for i in range(start, stop) if page[i].startswith("- ")]
        if kept:
            ours = [i for i in kept if _key(page[i][2:]) in datasets]
            at = ours[0] if ours else kept[-1] + 1
            for i in reversed(ours):
                del page[i]
            page[at:at] = notes
    # the line that says when the page was generated
    generated = next((i for i, line in enumerate(page) if line.startswith("Generated ")), None)
    if generated is not None:
        line = page[generated]
        done = dict(re.findall(r"(\S+) \(([^)]*)\)", line.split(_MERGED)[1])) if _MERGED in line else {}
        done.update({data: when for data in sorted(datasets)})
        page[generated] = (line.split(_MERGED)[0] + _MERGED
                           + ", ".join(f"{data} ({at})" for data, at in sorted(done.items())) + ".")
    return "\n".join(page) + "\n"
