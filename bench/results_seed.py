"""``python -m bench.results_seed``: rebuild the work folder of ``python -m bench.results`` from the page.

A run's work folder (every tuned configuration and JSON report) lives in ``/tmp`` and does not outlive
the machine; ``docs/RESULTS.md`` is then the only record of the run. To add one candidate to an entry
without rerunning the others (each topic set's 12 candidates, peers and pool take ~30-60 min)::

    python -m bench.results_seed --only r8,r52,webkb --work /tmp/sgm-results-s11
    python -m bench.results --only r8,r52,webkb --resume --merge --work /tmp/sgm-results-s11

The first writes, for every candidate of the entries' sections on the page, the files that the run
would have left (marked ``"seeded_from"``); the second runs only what is missing (the new candidates)
and merges the three datasets back into the page, means included (:mod:`bench.results_merge`).

What comes from where:

* tuned configurations: the section's "Reproduce" ``sgm eval ... --param`` lines, read by ``sgm eval``'s
  own argument parser. They are exact: the search rounds its points to 6 significant digits and the
  line prints them with ``%g`` (``python -m bench.results_seed --check`` re-evaluates them);
* accuracies (test, dev, dev CV, peers): the page's 4 digits, mapped back to the exact share
  ``k / n`` of the known document count (test split, dev-test, or the training side for the CV
  scores, pooled over folds), where one share lies within the rounding; so the RER computed again
  from them equals the one computed from the run's own files. Otherwise (a different count) the
  rounded value is kept and said so;
* Macro-F1, log loss, docs/s, search sizes and seconds, a pool's chosen variant: as printed.

A pool's fitted weights are not on the page: its seeded files say so (``"config": null``), and a run
that needs them (a pool with other bases) refits it (``bench.results`` checks a pool fit's bases).
The regeneration from a seeded folder alone reproduces the sections byte for byte (tested).
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from .results_plan import PLAN, TDM_CANDIDATES, Candidate, Entry

REPO = Path(__file__).resolve().parents[1]
SEEDED = "docs/RESULTS.md"


class SeedError(ValueError):
    """The page does not hold what a seeded file needs."""


def section(page: str, entry: Entry) -> list[str]:
    """The lines of the entry's ``### DATA — MODE`` section."""
    lines = page.splitlines()
    heading = f"### {entry.data} — {entry.mode}"
    if heading not in lines:
        raise SeedError(f"the page has no section {heading!r}")
    start = lines.index(heading) + 1
    stop = next((i for i in range(start, len(lines)) if lines[i].startswith(("### ", "## "))), len(lines))
    return lines[start:stop]


def cells(row: str) -> list[str]:
    return [c.strip() for c in row.strip().strip("|").split("|")]


def table(lines: list[str], first: str) -> tuple[list[str], list[list[str]]]:
    """The header and body rows of the table whose header's first cell is ``first``."""
    for i, line in enumerate(lines):
        if line.startswith("|") and cells(line)[0] == first:
            body = []
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                body.append(cells(row))
            return cells(line), body
    raise SeedError(f"no table starting with {first!r}")


def number(text: str) -> float | None:
    return None if text in ("–", "") else float(text)


def exact(value: float | None, n: int) -> float | None:
    """The share ``k / n`` that prints as ``value`` with 4 digits, where there is exactly one; else ``value``.

    >>> exact(0.9408, 2568) == 2416 / 2568
    True
    >>> exact(0.9408, 3)  # no third prints so
    0.9408
    """
    if value is None or n <= 0:
        return value
    fits = [k / n for k in range(max(0, round(value * n) - 1), round(value * n) + 2) if f"{k / n:.4f}" == f"{value:.4f}"]
    return fits[0] if len(fits) == 1 else value


def counts(entry: Entry) -> dict[str, int]:
    """Document counts of the entry's protocol: test split, training side, dev-test of the default partition."""
    from sgm.consumers.evaluation.harness import labelled, load_examples, train_test

    from sgm.consumers.commands.dev_partition import DEV_DEFAULTS

    train, test = train_test(load_examples(entry.data))
    train, test = labelled(train), labelled(test)
    return {"test": len(test), "train": len(train), "dev": round(len(train) * DEV_DEFAULTS["dev_fraction"])}


def eval_config(line: str) -> dict[str, Any]:
    """The configuration an ``sgm eval`` line of the page evaluates, as ``sgm tune --out`` writes it."""
    from sgm.consumers.commands import eval as eval_command
    from sgm.model import build_model, model_config

    parser = argparse.ArgumentParser()
    eval_command.add_arguments(parser)
    args = parser.parse_args(shlex.split(line)[2:])
    return model_config(build_model(eval_command.config_from_args(args)))


def eval_lines(lines: list[str], entry: Entry, candidate: Candidate) -> str | None:
    """The section's ``sgm eval`` line of ``candidate``'s tuned configuration."""
    prefix = shlex.join(["sgm", "eval", *entry.data_args(), "--model", candidate.spec, *candidate.options]) + " --param "
    found = [line for line in lines if line.startswith(prefix)]
    return found[0] if found else None


def entry_candidates(entry: Entry) -> list[Candidate]:
    extra = list(TDM_CANDIDATES) if entry.mode == "split" and entry.data != "reuters21578" else []
    every = [*entry.candidates, *extra]
    return [c for c in every if not c.bases] + [c for c in every if c.bases]  # pools after their bases


def chosen_of(text: str, candidate: Candidate, label: str) -> dict[str, Any]:
    """A pool's chosen variant from its setting cell (the inverse of ``bench.results.pool_choice``)."""
    def value(v: str):
        return {"True": True, "False": False}.get(v, v)

    names, _, rest = text.partition(": ") if text.startswith("pool") else ("", "", "")
    if not text.startswith("pool"):  # "`name` alone" or "`a`, `b` alone"
        kept = [candidate.bases.index(n.strip(" `")) for n in text.removesuffix(" alone").split(",")]
        if " of " in label:
            return {"bases": kept, "reg": None}
        return {"base": kept[0]}
    chosen: dict[str, Any] = {}
    for item in rest.split(", "):
        key, _, v = item.partition("=")
        chosen[key] = float(v) if key in ("reg", "floor") else value(v)
    if names.startswith("pool of "):
        chosen["bases"] = [candidate.bases.index(n.strip(" `")) for n in names[len("pool of "):].split(",")]
    return chosen


def seed_entry(page: str, entry: Entry, work: Path, n: dict[str, int]) -> list[str]:
    """Write the entry's seeded files into ``work``; returns their names."""
    if entry.label_rule or entry.objective or entry.config_from:
        raise SeedError(f"{entry.key}: only single-label split entries chosen by accuracy are seeded")
    lines = section(page, entry)
    head, systems = table(lines, "system")
    col = {name: i for i, name in enumerate(head)}
    _, tuned_rows = table(lines, "candidate")
    by_label = {row[0]: row for row in tuned_rows}
    written: list[str] = []
    cv = entry.choose_folds > 1

    def write(name: str, data: Any) -> None:
        if (work / name).is_file():  # a run's own file (or an earlier seed) is kept
            return
        (work / name).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        written.append(name)

    def search_of(text: str) -> dict[str, Any]:
        size, _, rest = text.partition(": ")
        points, _, seconds = rest.partition(" points, ")
        return {"search": size, "evaluations": int(points), "search_seconds": float(seconds.removesuffix(" s"))}

    ours = [row for row in systems if row[0].startswith("**sgm ")]
    shown = {row[0].removeprefix("**sgm ").removesuffix(" ✓").removesuffix("**"): row for row in ours}
    for candidate in entry_candidates(entry):
        stem = f"{entry.key}-{candidate.stem}{entry.suffix}"
        label = candidate.label if not candidate.bases else next((s for s in shown if s.startswith(candidate.spec)), None)
        if label not in shown:
            continue  # not on the page: the run does it
        row = shown[label]
        measures = {"accuracy": exact(number(row[col["accuracy"]]), n["test"]),
                    "macro_f1": number(row[col["Macro-F1"]]), "log_loss": number(row[col["log loss"]]),
                    "learn_docs_per_s": number(row[col["learn docs/s"]]),
                    "score_docs_per_s": number(row[col["score docs/s"]]),
                    "docs": n["test"], "test_docs": n["test"], "train_docs": n["train"], "multilabel": None,
                    "roc_auc": None, "one_minus_roca_pct": None, "micro_f1": None, "seeded_from": SEEDED}
        tuned = by_label.get(candidate.label)
        if tuned is None:
            raise SeedError(f"{entry.key}: no dev default → dev tuned row for {candidate.label!r}")
        if candidate.bases:
            kind = ("cv.config", "cv", "cv.eval") if cv else ("config", "tune", "eval")
            chosen = chosen_of(row[col["setting (chosen on dev)"]], candidate, label)
            configs = [json.loads((work / f"{entry.key}-{b}{entry.suffix}.config.json").read_text(encoding="utf-8"))
                       for b in candidate.bases]
            write(f"{stem}.{kind[1]}.json", {
                **search_of(tuned[5]), "chosen": chosen, "bases": configs, "seeded_from": SEEDED,
                "dev": {"folds": entry.choose_folds if cv else 1},
                "dev_default": exact(number(tuned[1]), n["train"] if cv else n["dev"]),
                "dev_tuned": exact(number(tuned[2]), n["train"] if cv else n["dev"]), "tuned_config": None})
            write(f"{stem}.{kind[2]}.json", {**measures, "config": {"params": {}, "weights": None}})
            continue
        line = eval_lines(lines, entry, candidate)
        if line is None:
            raise SeedError(f"{entry.key}: no 'sgm eval' line of {candidate.label!r} in Reproduce")
        config = eval_config(line)
        write(f"{stem}.config.json", config)
        write(f"{stem}.tune.json", {
            **search_of(tuned[5]), "seeded_from": SEEDED, "data": entry.data, "mode": entry.mode,
            "dev": {"folds": 1, "test_docs": n["dev"], "train_docs": n["train"] - n["dev"]},
            "dev_default": exact(number(tuned[1]), n["dev"]), "dev_tuned": exact(number(tuned[2]), n["dev"]),
            "tuned_config": config, "objective": "accuracy"})
        write(f"{stem}.eval.json", {**measures, "config": config})
        write(f"{stem}.default.json", {**measures, "accuracy": exact(number(tuned[3]), n["test"]),
                                       "macro_f1": None, "log_loss": None, "config": None})
        if cv:
            write(f"{stem}.cv.json", {"dev": {"folds": entry.choose_folds}, "seeded_from": SEEDED,
                                      "dev_tuned": exact(number(row[col["dev CV"]]), n["train"]),
                                      "tuned_config": config})
    # the peers: their rows, and the naive Bayes test scores per alpha
    by_alpha: dict[str, list[dict]] = {}
    nb = next((line for line in lines if line.startswith("scikit-learn naive Bayes on test for every alpha")), None)
    if nb:
        for part in nb.split("): ", 1)[1].removesuffix(".").split("; "):
            peer, _, rest = part.partition(" ")
            by_alpha[peer] = [{"setting": {"alpha": float(a.split("=")[1])}, "accuracy": exact(float(v), n["test"])}
                              for a, v in (item.split(": ") for item in rest.split(", "))]
    peers = []
    for row in systems:
        if row[0].startswith("**sgm "):
            continue
        if row[1].startswith("skipped: "):
            peers.append({"peer": row[0], "skipped": row[1].removeprefix("skipped: ")})
            continue
        setting = {k: float(v) for k, v in (item.split("=") for item in row[1].split())}
        peer = {"peer": row[0], "setting": setting, "dev": exact(number(row[col["dev"]]), n["dev"]),
                "accuracy": exact(number(row[col["accuracy"]]), n["test"]), "macro_f1": number(row[col["Macro-F1"]]),
                "log_loss": number(row[col["log loss"]]), "docs": n["test"], "roc_auc": None,
                "one_minus_roca_pct": None, "seeded_from": SEEDED}
        if row[0] in by_alpha:
            peer["test_by_setting"] = by_alpha[row[0]]
        peers.append(peer)
    write(f"{entry.key}.peers{entry.suffix}.json", peers)
    return written


def check(work: Path, entry: Entry, stems: list[str]) -> list[str]:
    """Re-evaluate seeded configurations (``sgm eval --config``) and compare their test accuracy."""
    import subprocess

    out = []
    for stem in stems:
        config = work / f"{entry.key}-{stem}{entry.suffix}.config.json"
        seeded = json.loads((work / f"{entry.key}-{stem}{entry.suffix}.eval.json").read_text(encoding="utf-8"))
        report = work / f"check-{entry.key}-{stem}.json"
        subprocess.run([sys.executable, "-m", "sgm.consumers.cli", "eval", *entry.data_args(), "--config", str(config),
                        "--json", str(report)], check=True, cwd=REPO, stdout=subprocess.DEVNULL)
        got = json.loads(report.read_text(encoding="utf-8"))["accuracy"]
        out.append(f"{entry.key} {stem}: page {seeded['accuracy']:.6f}, re-evaluated {got:.6f} "
                   f"({'same' if got == seeded['accuracy'] else 'DIFFERENT'})")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.results_seed", description=__doc__.split("\n\n")[0])
    parser.add_argument("--page", default=str(REPO / "docs" / "RESULTS.md"))
    parser.add_argument("--work", required=True, help="the work folder to seed (files already there are kept)")
    parser.add_argument("--only", default="r8,r52,webkb", help="comma-separated datasets (split entries)")
    parser.add_argument("--check", default=None, metavar="STEMS",
                        help="comma-separated candidate stems to re-evaluate from their seeded configuration")
    args = parser.parse_args(argv)
    page = Path(args.page).read_text(encoding="utf-8")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    only = set(args.only.split(","))
    for entry in PLAN:
        if entry.data not in only or entry.mode != "split":
            continue
        n = counts(entry)
        try:
            written = seed_entry(page, entry, work, n)
        except SeedError as exc:
            print(f"python -m bench.results_seed: {exc}", file=sys.stderr)
            return 2
        print(f"{entry.key}: {len(written)} files seeded ({n})", file=sys.stderr)
        for line in check(work, entry, args.check.split(",")) if args.check else []:
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
