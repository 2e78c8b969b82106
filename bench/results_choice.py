"""Issue 19: choose ours by K-fold cross-validation of each tuned configuration (``Entry.choose_folds``).

A candidate's dev score is the best of its own search's points on one dev-test partition, so it is
biased upwards: the more points a search tries on the same 1,400-1,600 documents, the more of its lead
is luck (the winner's curse of model selection; Cawley and Talbot, JMLR 2010). Choosing among
candidates by those maxima prefers the luckiest search. With ``choose_folds = K`` each tuned
configuration is scored once more, with its numbers fixed, by K-fold cross-validation over the whole
training side (``sgm tune --iters 0 --dev-folds K``, folds seeded with :data:`CHOICE_SEED`, not the
search's partition), and ours is the candidate with the best cross-validated score. The test
data still chooses nothing. An ensemble is scored on the same folds by ``sgm ensemble --dev-folds K``
(``sgm.consumers.evaluation.ensemble_cv``): for each fold its pool, bases and variant are chosen and fitted on
the other folds only, and its bases fitted there score the fold.
"""
from __future__ import annotations

import shlex
import sys
from typing import Any

#: Seed of the choice's folds (0 seeds the search's own dev partition).
CHOICE_SEED = 1


def choice_of(ours: dict) -> float | None:
    """The score that chooses among candidates: the cross-validated one where it was run, else the dev score."""
    if ours.get("cv") is not None:
        return ours["cv"]
    return ours["summary"]["dev_tuned"] if ours["summary"] else None


def run_cv_choice(entry: Any, runner: Any, ours: list[dict], rel) -> None:
    """Score every tuned single candidate of ``ours`` by ``entry.choose_folds``-fold cross-validation (adds
    ``"cv"`` and the printed command to each); an ensemble's score is its ``--dev-folds`` fit's."""
    folds = entry.choose_folds
    for one in ours:
        if one["candidate"].bases:  # an ensemble: run_ensemble ran it with --dev-folds (its pool refitted per fold)
            if one["summary"]["dev"]["folds"] != folds:
                raise RuntimeError(f"the {one['candidate'].label} fit holds {one['summary']['dev']['folds']} folds, "
                                   f"not {folds}: use a fresh --work folder")
            one["cv"] = one["summary"]["dev_tuned"]
            continue
        if not one["summary"]:
            continue
        stem = f"{entry.key}-{one['candidate'].stem}{entry.suffix}"
        config = runner.path(f"{stem}.config.json")
        cv_config, cv_json = runner.path(f"{stem}.cv.config.json"), runner.path(f"{stem}.cv.json")
        common = ["tune", *entry.data_args(), "--config", "CONFIG", *entry.dev_args,
                  *(["--objective", entry.objective] if entry.objective else []),
                  "--iters", "0", "--points", "1", "--dev-folds", str(folds), "--dev-seed", str(CHOICE_SEED)]
        shown = [rel(config) if a == "CONFIG" else a for a in common]
        real = [str(config) if a == "CONFIG" else a for a in common]
        report = runner.run(["sgm", *shown, "--out", rel(cv_config)],
                            [sys.executable, "-m", "sgm.consumers.cli", *real, "--no-test", "--out", str(cv_config),
                             "--json", str(cv_json)], cv_json)
        if report["dev"]["folds"] != folds:  # --resume must not mix in another fold count
            raise RuntimeError(f"{cv_json} holds {report['dev']['folds']} folds, not {folds}: use a fresh --work folder")
        one["cv"] = report["dev_tuned"]
        one["commands"].append(" ".join(w if w.startswith("$WORK/") else shlex.quote(w)
                                        for w in ["sgm", *shown, "--out", rel(cv_config)]))


def choose(entry: Any, ours: list[dict]) -> dict:
    """Ours: the candidate (ensembles included) with the best cross-validated score under ``choose_folds`` (the first
    of ties: singles come first), else the candidate with the best dev score."""
    if entry.choose_folds > 1:
        return max((o for o in ours if o.get("cv") is not None), key=lambda o: o["cv"])
    return max(ours, key=lambda o: o["summary"]["dev_tuned"] if o["summary"] else 0.0)
