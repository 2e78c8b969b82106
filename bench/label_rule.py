"""Issue 19, for ``python -m bench.results``: the output rule of multi-label (label-powerset) candidates.

Each tuned candidate of an entry with ``label_rule`` gets one more step, ``sgm tune --choose-label-threshold``
from its tuned configuration with no new search (0 iterations): it decides on the candidate's dev data between
the arg-max label set and a threshold on label marginals (docs/EVALUATION.md). The page shows the choice and
the test score of both rules.
"""
from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.4f}"


def run_label_rule(entry: Any, runner: Any, stem: str, config: Path) -> tuple[dict, str]:
    """Issue 19: choose a tuned powerset candidate's output rule on its dev data (no new search: 0 iterations
    from its tuned configuration); returns ``sgm tune``'s ``label_threshold`` report and the shown command."""
    out, rule_json = runner.path(f"{stem}.label-rule.config.json"), runner.path(f"{stem}.label-rule.json")
    common = ["tune", *entry.data_args(), *entry.dev_args, "--iters", "0", "--points", "1", "--workers", "1",
              "--choose-label-threshold", "--config"]
    summary = runner.run(["sgm", *common, f"$WORK/{config.name}", "--out", f"$WORK/{out.name}"],
                         [sys.executable, "-m", "sgm.consumers.cli", *common, str(config), "--no-test", "--out",
                          str(out), "--json", str(rule_json)], rule_json)
    return summary["label_threshold"], shlex.join(["sgm", *common]) + f" $WORK/{config.name} --out $WORK/{out.name}"


def label_rule_lines(result: dict, measure: str) -> list[str]:
    """Issue 19: each candidate's powerset output rule as chosen on dev, with the test score of both rules."""
    rows = [o for o in result["ours"] if o.get("rule")]
    if not rows:
        return []
    lines = ["", "Output rule, chosen on dev per candidate (`sgm tune --choose-label-threshold`, docs/EVALUATION.md): "
             "the arg-max label set, or every label whose marginal probability (the summed posterior of the label "
             "sets holding it) reaches a threshold t. Dev Micro-F1 cross-fitted over two halves of dev-test "
             "(t chosen on one half, scored on the other, both ways); the threshold rule is taken only when it "
             "scores higher, with t then chosen on all of dev-test. One threshold per label (labels with ≥ "
             f"{rows[0]['rule']['min_support']} dev documents) is shown for reference; it is not a product option.", "",
             "| candidate | dev arg-max | dev threshold | dev per-label | chosen | test arg-max | test chosen |",
             "|---|---|---|---|---|---|---|"]
    for ours in rows:
        rule, crossed = ours["rule"], ours["rule"]["cross_fitted"]
        chosen = "arg-max" if rule["label_threshold"] is None else f"t = {rule['label_threshold']:g}"
        argmax = ours["argmax"] or ours["tuned"]
        lines.append(f"| {ours['candidate'].label} | {crossed['arg-max']:.4f} | {crossed['threshold']:.4f} | "
                     f"{crossed['per-label']:.4f} | {chosen} | {_fmt(argmax[measure])} | "
                     f"{_fmt(ours['tuned'][measure])} |")
    return lines
