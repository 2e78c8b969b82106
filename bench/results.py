"""Generate ``docs/RESULTS.md``: our tuned models beside every peer on every shared dataset.

One command::

    python -m bench.results                      # everything (see PLAN), writes docs/RESULTS.md
    python -m bench.results --resume             # reuse finished steps in the work folder
    python -m bench.results --only r8,webkb --search 4x8 --out /tmp/RESULTS.md   # a quick partial run

Every number on the page comes from a command line printed beside it (``sgm tune``,
``sgm eval``, ``python -m bench.peers``); this module only runs them (as
subprocesses, exactly as printed) and tabulates their JSON outputs, kept in
``--work`` (default ``/tmp/sgm-results``).

Protocol per dataset (see ``docs/EVALUATION.md``):

* each candidate spec of ours is tuned by ``sgm tune`` on the development data
  (carved from the training side, or the first quarter of a stream), then
  evaluated with its tuned numbers; "ours" is the candidate with the best *dev*
  score (the test data never chooses anything);
* the peers choose their settings on the same development data.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sgm.consumers.evaluation.measures import relative_error_reduction

from .label_rule import label_rule_lines, run_label_rule
from .results_choice import CHOICE_SEED, choice_of, choose, run_cv_choice
from .results_merge import MergeError, check_mergeable, merge_page
from .results_plan import PLAN, TDM_CANDIDATES, Candidate, Entry

REPO = Path(__file__).resolve().parents[1]


def tdm_available() -> bool:
    try:
        import sgm.model.tdm  # noqa: F401
    except ImportError:
        return False
    return True


# ---------------------------------------------------------------- running
class Runner:
    """Runs the printed command lines and remembers them for the page."""

    def __init__(self, work: Path, resume: bool) -> None:
        self.work, self.resume = work, resume
        self.work.mkdir(parents=True, exist_ok=True)
        # seconds per output file, kept across --resume runs so the page can state what a full run costs
        self.timings_path = self.work / "timings.json"
        self.seconds: dict[str, float] = (json.loads(self.timings_path.read_text(encoding="utf-8"))
                                          if resume and self.timings_path.is_file() else {})
        self.used: list[str] = []

    def path(self, name: str) -> Path:
        return self.work / name

    def run(self, shown: list[str], argv: list[str], output: Path) -> dict | list:
        """Run ``argv`` (the real form of the ``shown`` command) unless ``output`` exists and resuming."""
        self.used.append(output.name)
        if not (self.resume and output.is_file()):
            print(f"$ {shlex.join(shown)}", file=sys.stderr, flush=True)
            started = time.perf_counter()
            done = subprocess.run(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"command failed ({done.returncode}): {shlex.join(shown)}\n{done.stderr[-3000:]}")
            self.seconds[output.name] = round(time.perf_counter() - started, 1)
            self.timings_path.write_text(json.dumps(self.seconds, indent=1, sort_keys=True), encoding="utf-8")
            for line in done.stdout.splitlines()[:3]:
                print(f"  {line}", file=sys.stderr)
        return json.loads(output.read_text(encoding="utf-8"))

    def step_seconds(self) -> float | None:
        """Total time of the steps behind this page, if every one was timed."""
        if not all(name in self.seconds for name in self.used):
            return None
        return sum(self.seconds[name] for name in self.used)

    def sgm(self, args: list[str], output: Path) -> dict:
        return self.run(["sgm", *args], [sys.executable, "-m", "sgm.consumers.cli", *args], output)

    def peers(self, args: list[str], output: Path) -> list:
        return self.run(["python", "-m", "bench.peers", *args],
                        [sys.executable, "-m", "bench.peers", *args], output)


def rel(path: Path) -> str:
    """A work-folder path as shown in command lines (``$WORK/...``)."""
    return f"$WORK/{path.name}"


def param_args(params: dict[str, Any]) -> list[str]:
    return [arg for name, value in sorted(params.items()) for arg in ("--param", f"{name}={value:g}")]


def run_entry(entry: Entry, runner: Runner, search: tuple[int, int] | None, done: dict[str, dict]) -> dict[str, Any]:
    iters, points = search or entry.search
    candidates = list(entry.candidates)
    if tdm_available() and entry.mode == "split" and entry.data != "reuters21578":
        candidates += list(TDM_CANDIDATES)  # single-label split sets only (time)
    candidates = [c for c in candidates if not c.bases] + [c for c in candidates if c.bases]  # ensembles last
    ours = []
    if entry.config_from:
        candidates = [done[entry.config_from]["best"]["candidate"]]
    for candidate in candidates:
        stem = f"{entry.key}-{candidate.stem}{entry.suffix}"
        started = time.perf_counter()
        commands = []
        if candidate.bases and entry.config_from:  # the other entry's fitted pool, replayed: no new fit
            ours.append(replay_ensemble(entry, done[entry.config_from]["best"], runner, stem))
            continue
        if candidate.bases:
            ours.append(run_ensemble(entry, candidate, runner, stem))
            continue
        rule, threshold = None, None
        if entry.config_from:
            source = done[entry.config_from]["best"]["tuned"]["config"]
            summary, params, threshold = None, source["params"], source.get("label_threshold")
        else:
            config, tune_json = runner.path(f"{stem}.config.json"), runner.path(f"{stem}.tune.json")
            size = candidate.search if (candidate.search and not search) else (iters, points)
            base = candidate.tune_from(lambda other: runner.path(f"{entry.key}-{other}{entry.suffix}.config.json"))
            common = ["tune", *entry.data_args(), *base, "--model", candidate.spec, *candidate.options, *entry.dev_args,
                      *(["--objective", entry.objective] if entry.objective else []),
                      "--iters", str(size[0]), "--points", str(size[1])]
            summary = runner.run(["sgm", *common, "--out", str(config)],
                                 [sys.executable, "-m", "sgm.consumers.cli", *common, "--no-test", "--out", str(config),
                                  "--json", str(tune_json)], tune_json)
            if summary["search"] != f"{size[0]}x{size[1]}":  # --resume must not mix in another search size
                raise RuntimeError(f"{tune_json} holds a {summary['search']} search, not {size[0]}x{size[1]}: "
                                   "use a fresh --work folder")
            if entry.objective and summary.get("objective") != entry.objective:
                raise RuntimeError(f"{tune_json} was tuned for {summary.get('objective')}, not {entry.objective}")
            params = summary["tuned_config"]["params"]
            shown = ["sgm", *(rel(Path(a)) if a in base[1:2] else a for a in common), "--out", rel(config)]
            commands.append(" ".join(w if w.startswith("$WORK/") else shlex.quote(w) for w in shown))
            if entry.label_rule:
                rule, rule_command = run_label_rule(entry, runner, stem, config)
                threshold = rule["label_threshold"]
                commands.append(rule_command)
        eval_args = ["eval", *entry.data_args(), "--model", candidate.spec, *candidate.options, *param_args(params)]
        argmax = None
        if threshold is not None:  # the arg-max output too, for the page's with/without comparison
            if not entry.config_from:
                argmax = runner.sgm([*eval_args, "--json", str(runner.path(f"{stem}.eval.json"))],
                                    runner.path(f"{stem}.eval.json"))
                commands.append(shlex.join(["sgm", *eval_args]))
            eval_args += ["--label-threshold", f"{threshold:g}"]
        eval_json = runner.path(f"{stem}.eval.json" if threshold is None else f"{stem}.label-threshold.eval.json")
        tuned = runner.sgm([*eval_args, "--json", str(eval_json)], eval_json)
        commands.append(shlex.join(["sgm", *eval_args]))
        default = None
        if not entry.config_from:
            default_args = ["eval", *entry.data_args(), "--model", candidate.spec, *candidate.options]
            default = runner.sgm([*default_args, "--json", str(runner.path(f"{stem}.default.json"))],
                                 runner.path(f"{stem}.default.json"))
        ours.append({"candidate": candidate, "summary": summary, "tuned": tuned, "default": default,
                     "commands": commands, "wall": round(time.perf_counter() - started, 1), "rule": rule,
                     "argmax": argmax})
    peers_json = runner.path(f"{entry.key}.peers{entry.suffix}.json")
    peer_args = [*entry.data_args(), *entry.dev_args, *(["--objective", entry.objective] if entry.objective else [])]
    peer_rows = runner.peers([*peer_args, "--json", str(peers_json)], peers_json)
    if entry.choose_folds > 1 and not entry.config_from:
        run_cv_choice(entry, runner, ours, rel)
    best = choose(entry, ours)
    return {"entry": entry, "search": (iters, points), "ours": ours, "best": best, "peers": peer_rows,
            "peer_command": shlex.join(["python", "-m", "bench.peers", *peer_args])}


def run_ensemble(entry: Entry, candidate: Candidate, runner: Runner, stem: str) -> dict[str, Any]:
    """Issue 19: fit the pool of the entry's tuned ``candidate.bases`` on dev data (the training side, or the
    stream's dev prefix: ``sgm ensemble --mode prequential``), then evaluate it on test (or replay the stream)."""
    started = time.perf_counter()
    cv = entry.choose_folds > 1 and entry.mode == "split"  # scored as the singles are: bench/results_choice.py
    kinds = ("cv.config", "cv", "cv.eval") if cv else ("config", "tune", "eval")
    config, fit_json, eval_json = (runner.path(f"{stem}.{kind}.json") for kind in kinds)
    bases = [runner.path(f"{entry.key}-{base}{entry.suffix}.config.json") for base in candidate.bases]
    common = ["ensemble", *entry.data_args(), *entry.dev_args,
              *(["--objective", entry.objective] if entry.objective else []),
              *(["--dev-folds", str(entry.choose_folds), "--dev-seed", str(CHOICE_SEED)] if cv else [])]
    summary = runner.run(["sgm", *common, *(a for p in bases for a in ("--base", rel(p))), "--out", rel(config)],
                         [sys.executable, "-m", "sgm.consumers.cli", *common,
                          *(a for p in bases for a in ("--base", str(p))), "--out", str(config), "--json", str(fit_json)],
                         fit_json)
    if summary.get("bases") is not None and summary["bases"] != [json.loads(p.read_text(encoding="utf-8")) for p in bases]:
        raise RuntimeError(f"{fit_json} pools other bases than {candidate.label} has now (a --resume after the plan "
                           f"changed, or a seeded pool): delete it and {eval_json.name}")
    eval_args = ["eval", *entry.data_args(), "--config"]
    tuned = runner.run(["sgm", *eval_args, rel(config)],
                       [sys.executable, "-m", "sgm.consumers.cli", *eval_args, str(config), "--json", str(eval_json)],
                       eval_json)
    commands = [shlex.join(["sgm", *common]) + "".join(f" --base {rel(p)}" for p in bases) + f" --out {rel(config)}",
                shlex.join(["sgm", *eval_args]) + " " + rel(config)]
    return {"candidate": candidate, "summary": summary, "tuned": tuned, "default": None, "commands": commands,
            "wall": round(time.perf_counter() - started, 1)}


def replay_ensemble(entry: Entry, source: dict[str, Any], runner: Runner, stem: str) -> dict[str, Any]:
    """An entry with ``config_from`` whose source chose a pool (``source``: its result there): that pool's written
    configuration (weights fixed, fitted on the source's dev data) evaluated under this entry's protocol, as a
    tuned single is replayed."""
    started = time.perf_counter()
    candidate = source["candidate"]
    config = runner.path(f"{entry.config_from}-{candidate.stem}{entry.suffix}.config.json")
    eval_json = runner.path(f"{stem}.eval.json")
    eval_args = ["eval", *entry.data_args(), "--config"]
    tuned = runner.run(["sgm", *eval_args, rel(config)],
                       [sys.executable, "-m", "sgm.consumers.cli", *eval_args, str(config), "--json", str(eval_json)],
                       eval_json)
    return {"candidate": candidate, "summary": None, "chosen": source["summary"]["chosen"], "tuned": tuned,
            "default": None, "commands": [shlex.join(["sgm", *eval_args]) + " " + rel(config)],
            "wall": round(time.perf_counter() - started, 1)}


# ---------------------------------------------------------------- the page
def fmt(value: Any, digits: int = 4) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:+.1f}%"


def primary(entry: Entry, multi: bool) -> str:
    return "micro_f1" if multi else "accuracy"


def peer_setting(row: dict) -> str:
    setting = row.get("setting") or {}
    return " ".join(f"{k}={v:g}" for k, v in setting.items() if not k.startswith("_"))


def dev_of(ours: dict) -> float | None:
    return ours["summary"]["dev_tuned"] if ours["summary"] else None


def roca_pct(auc: float | None) -> float | None:
    """1-ROCA% of a ROC AUC (the page shows dev ROC AUC this way)."""
    return None if auc is None else 100.0 * (1.0 - auc)


def dev_text(entry: Entry, value: float | None) -> str:
    """A dev score as the page shows it: 1-ROCA% for entries chosen by ROC AUC, else the measure itself."""
    return fmt(roca_pct(value), 3) if entry.objective == "roc_auc" else fmt(value)


def dataset_section(result: dict) -> list[str]:
    entry: Entry = result["entry"]
    best = result["best"]
    multi = best["tuned"].get("multilabel") == "powerset" and entry.data == "reuters21578"
    measure = primary(entry, multi)
    two_labels = best["tuned"].get("roc_auc") is not None
    iters, points = result["search"]
    how = ("" if entry.config_from else
           f"Search {iters}x{points} per candidate unless the search column below says otherwise; ours = the candidate "
           + (f"whose tuned configuration scores best in {entry.choose_folds}-fold cross-validation over the training "
              "side (✓; \"dev CV\", `bench/results_choice.py`: a search's own best dev score is biased upwards)."
              if entry.choose_folds > 1 else "with the best dev score (✓)."))
    lines = [f"### {entry.data} — {entry.mode}", "", f"{entry.note}. {how}", ""]
    head = ["system", "setting (chosen on dev)", "dev 1-ROCA%" if entry.objective == "roc_auc" else "dev",
            "Micro-F1" if multi else "accuracy", "Macro-F1", "log loss"]
    cv = entry.choose_folds > 1 and not entry.config_from
    if cv:
        head.insert(3, "dev CV")
    if two_labels:
        head += ["ROC AUC", "1-ROCA%"]
    head += ["learn docs/s", "score docs/s"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for ours in sorted(result["ours"], key=lambda o: (-(o.get("cv") or 0.0), -(dev_of(o) or 0.0))):
        report = ours["tuned"]
        params = ", ".join(f"{k}={v:.3g}" for k, v in sorted(report["config"]["params"].items()))
        if ours["candidate"].bases:  # an ensemble: its pool, as chosen on dev (a replayed one: on its source's)
            params = pool_choice((ours["summary"] or ours)["chosen"], ours["candidate"])
        if report["config"].get("label_threshold") is not None:
            params += f"; output: labels with marginal ≥ {report['config']['label_threshold']:g}"
        mark = " ✓" if ours is best and len(result["ours"]) > 1 else ""
        cells = [f"**sgm {shown_label(ours)}**{mark}", params, dev_text(entry, dev_of(ours)), fmt(report[measure]),
                 fmt(report["macro_f1"]), fmt(report["log_loss"], 3)]
        if cv:
            cells.insert(3, fmt(ours.get("cv")))
        if two_labels:
            cells += [fmt(report["roc_auc"], 5), fmt(report["one_minus_roca_pct"], 3)]
        cells += [fmt(report["learn_docs_per_s"], 0), fmt(report["score_docs_per_s"], 0)]
        lines.append("| " + " | ".join(cells) + " |")
    for row in result["peers"]:
        if "skipped" in row:
            lines.append(f"| {row['peer']} | skipped: {row['skipped']} |" + " |" * (len(head) - 2))
            continue
        cells = [row["peer"], peer_setting(row), dev_text(entry, row["dev"]), fmt(row[measure]), fmt(row["macro_f1"]),
                 fmt(row["log_loss"], 3)]
        if cv:
            cells.insert(3, "")
        if two_labels:
            cells += [fmt(row["roc_auc"], 5), fmt(row["one_minus_roca_pct"], 3)]
        cells += ["", ""]
        lines.append("| " + " | ".join(cells) + " |")
    nb = [r for r in result["peers"] if r.get("test_by_setting")]
    if nb:
        lines += ["", "scikit-learn naive Bayes on test for every alpha (reference only; the dev choice is above): " +
                  "; ".join(f"{r['peer']} " + ", ".join(f"alpha={s['setting']['alpha']:g}: {s[measure]:.4f}"
                                                      for s in r["test_by_setting"]) for r in nb) + "."]
    tuned_rows = [o for o in result["ours"] if o["summary"]]
    if tuned_rows:
        where = "test" if entry.mode == "split" else "stream"
        auc = entry.objective == "roc_auc"
        shown = "one_minus_roca_pct" if auc else measure
        lines += ["", "Dev default → dev tuned (the search starts from the documented defaults of "
                  "`model.spec.PARAMS`), and the " + ("test score" if entry.mode == "split" else
                  "score over the whole stream (whose first part was the dev stream)") + " of each configuration"
                  + (" (1-ROCA%: lower is better)" if auc else "") + ":", "",
                  f"| candidate | dev default | dev tuned | {where} default | {where} tuned | search |",
                  "|---|---|---|---|---|---|"]
        for ours in tuned_rows:
            s = ours["summary"]
            lines.append(f"| {ours['candidate'].label} | {dev_text(entry, s['dev_default'])} | "
                         f"{dev_text(entry, s['dev_tuned'])} | "
                         f"{fmt(ours['default'][shown] if ours['default'] else None, 3 if auc else 4)} | "
                         f"{fmt(ours['tuned'][shown], 3 if auc else 4)} | "
                         f"{s['search']}: {s['evaluations']} points, {s['search_seconds']:.0f} s |")
    lines += label_rule_lines(result, measure)
    lines += ["", "Reproduce (`WORK` = any folder):", "", "```bash"]
    for ours in result["ours"]:
        lines += ours["commands"]
    lines += [result["peer_command"], "```", ""]
    return lines


def split_summary(results: list[dict]) -> list[str]:
    rows = [r for r in results if r["entry"].mode == "split" and r["entry"].data in ("r8", "r52", "webkb")]
    if not rows:
        return []
    lines = ["## Split datasets: ours vs scikit-learn MultinomialNB and LinearSVC", "",
             "Accuracy on the standard test splits. RER = 1 − (1 − acc_ours) / (1 − acc_peer): the share of the "
             "peer's errors that ours removes (negative: ours makes more errors). \"dev α\": MultinomialNB with "
             "the alpha chosen on the same dev data as ours; \"best α on test\": the best of its three alphas on "
             "the test set itself (how published figures such as r8 0.9603 / r52 0.9065 are usually obtained; "
             "optimistic for the peer). \"ours\" = our dev-chosen candidate; \"MNB\" = the dev-chosen one among our "
             "MNB candidates (TDM left out); the `uc_pd_dp_tXiX_ps` columns show the thesis's extended MNB alone.", "",
             "| dataset | ours (dev-chosen) | acc. | uc_pd_dp_tXiX_ps acc. | MNB dev α | MNB best α on test | "
             "RER ours vs dev α | RER ours vs best α | RER MNB vs best α | RER tXiX vs best α | LinearSVC | "
             "RER ours vs LinearSVC |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    columns: dict[str, list[float]] = {"dev": [], "test": [], "mnb": [], "txix": [], "svc": []}
    for result in rows:
        ours = result["best"]["tuned"]["accuracy"]
        txix = next((o["tuned"]["accuracy"] for o in result["ours"] if o["candidate"].spec == "uc_pd_dp_tXiX_ps"), None)
        mnb_only = [o for o in result["ours"] if o["summary"] and not o["candidate"].spec.startswith("tdm")
                    and not o["candidate"].bases]
        best_mnb = max(mnb_only, key=dev_of)["tuned"]["accuracy"] if mnb_only else None
        peers = {r["peer"]: r for r in result["peers"] if "skipped" not in r}
        mnb = peers["sklearn_mnb"]
        mnb_dev = mnb["accuracy"]
        mnb_test = max(s["accuracy"] for s in mnb["test_by_setting"])
        svc = peers["linear_svc"]["accuracy"]
        rer = {"dev": relative_error_reduction(ours, mnb_dev), "test": relative_error_reduction(ours, mnb_test),
               "mnb": relative_error_reduction(best_mnb, mnb_test) if best_mnb is not None else None,
               "txix": relative_error_reduction(txix, mnb_test) if txix is not None else None,
               "svc": relative_error_reduction(ours, svc)}
        for key, value in rer.items():
            if value is not None:
                columns[key].append(value)
        lines.append(f"| {result['entry'].data} | {shown_label(result['best'])} | {ours:.4f} | {fmt(txix)} | "
                     f"{mnb_dev:.4f} (α={mnb['setting']['alpha']:g}) | {mnb_test:.4f} | {pct(rer['dev'])} | "
                     f"{pct(rer['test'])} | {pct(rer['mnb'])} | {pct(rer['txix'])} | {svc:.4f} | {pct(rer['svc'])} |")
    mean = {k: (sum(v) / len(v) if v else None) for k, v in columns.items()}
    lines.append(f"| **mean** | | | | | | **{pct(mean['dev'])}** | **{pct(mean['test'])}** | "
                 f"**{pct(mean['mnb'])}** | **{pct(mean['txix'])}** | | **{pct(mean['svc'])}** |")

    def verdict(value):
        return "–" if value is None else ("**reached**" if value >= 0.075 else "**not reached**")

    lines += ["", "Target (issue 5; the thesis's 7.50% RER of `uc_pd_dp_tXiX_ps` over `c_pd_dp`): mean RER ≥ +7.5% "
              f"over scikit-learn MultinomialNB. Ours vs dev-chosen α: {pct(mean['dev'])}, {verdict(mean['dev'])}; "
              f"ours vs best-on-test α: {pct(mean['test'])}, {verdict(mean['test'])}; dev-chosen MNB (no TDM) vs "
              f"best-on-test α: {pct(mean['mnb'])}, {verdict(mean['mnb'])}; `uc_pd_dp_tXiX_ps` alone vs "
              f"best-on-test α: {pct(mean['txix'])}, {verdict(mean['txix'])}.", ""]
    return lines


def is_fw(ours: dict) -> bool:
    return "_fw" in ours["candidate"].spec


def peer_summary(results: list[dict]) -> list[str]:
    """Issue 19: the dev-chosen configuration against every tuned peer, and against the dev-chosen one among
    the candidates without fw (today's model before the issue), with what each costs."""
    rows = [r for r in results if r["entry"].mode == "split"]
    if not rows or not any(is_fw(o) for r in rows for o in r["ours"]):
        return []
    names = (("linear_svc", "LinearSVC"), ("logistic_regression", "LogReg"), ("vw_oaa", "VW"))
    lines = ["## Topic sets: ours vs every tuned peer (issue 19)", "",
             "Accuracy (Micro-F1 on reuters21578, one-vs-rest for the linear peers) on the test splits. \"ours\" = the "
             "dev-chosen candidate among all (fw included); \"before fw\" = the dev-chosen one among the candidates "
             "without fw (the model before issue 19); where a dev cell shows \"CV\", both were chosen by that "
             "cross-validated score of the tuned configurations (see the dataset's section). RER against each peer, "
             "as above.", "",
             "| dataset | ours (dev-chosen) | dev | test | before fw | test | "
             + " | ".join(f"{label} | RER" for _, label in names) + " |",
             "|" + "---|" * (6 + 2 * len(names))]
    mean: dict[str, list[float]] = {}
    cost = []
    for result in rows:
        data = result["entry"].data
        measure = "micro_f1" if data == "reuters21578" else "accuracy"
        best = result["best"]
        old = [o for o in result["ours"] if o["summary"] and not is_fw(o) and not o["candidate"].bases]
        before = max(old, key=choice_of) if old else None
        peers = {r["peer"]: r for r in result["peers"] if "skipped" not in r}
        ours = best["tuned"][measure]
        cells = [data, shown_label(best),
                 fmt(dev_of(best)) + (f" (CV {fmt(best['cv'])})" if best.get("cv") is not None else ""), fmt(ours),
                 before["candidate"].label if before else "–", fmt(before["tuned"][measure]) if before else "–"]
        for key, _ in names:
            peer = peers.get(key, {}).get(measure)
            rer = relative_error_reduction(ours, peer) if peer is not None else None
            cells += [fmt(peer), pct(rer)]
            if data != "reuters21578" and rer is not None:
                mean.setdefault(key, []).append(rer)
        if data != "reuters21578":
            mean.setdefault("acc", []).append(ours)
            for key, _ in names:
                if key in peers:
                    mean.setdefault("acc_" + key, []).append(peers[key][measure])
        lines.append("| " + " | ".join(cells) + " |")
        if before is not None:
            cost.append(f"| {data} | {shown_label(best)} | {fmt(best['tuned']['learn_docs_per_s'], 0)} | "
                        f"{fmt(best['tuned']['score_docs_per_s'], 0)} | {before['candidate'].label} | "
                        f"{fmt(before['tuned']['learn_docs_per_s'], 0)} | {fmt(before['tuned']['score_docs_per_s'], 0)} |")

    def avg(values):
        return sum(values) / len(values) if values else None

    lines.append("| **mean r8, r52, webkb** | | | " + f"**{fmt(avg(mean.get('acc', [])))}** | | | "
                 + " | ".join(f"{fmt(avg(mean.get('acc_' + key, [])))} | **{pct(avg(mean.get(key, [])))}**"
                              for key, _ in names) + " |")
    svc = avg(mean.get("linear_svc", []))
    lines += ["", "Goal (issue 19): ahead of LinearSVC on the mean over r8, r52, webkb (mean RER > 0): "
              + ("–" if svc is None else f"{pct(svc)}, **{'reached' if svc > 0 else 'not reached'}**") + ".", "",
              "Cost of the choice (single-core docs/s inside the model's learn and score calls, each from its own `sgm eval` "
              "step: after a `--resume` the two may come from runs at different loads; "
              "learn: the training split in one batch, score: the test split):", "",
              "| dataset | ours | learn docs/s | score docs/s | before fw | learn docs/s | score docs/s |",
              "|---|---|---|---|---|---|---|", *cost, ""]
    return lines


def shown_label(ours: dict) -> str:
    """The candidate's label, for a pool with the number of bases its fit kept (``ensemble (2 of 5 bases)``)."""
    candidate, chosen = ours["candidate"], (ours.get("summary") or ours).get("chosen") or {}
    kept = chosen.get("bases")
    if candidate.bases and kept is not None and len(kept) < len(candidate.bases):
        return f"{candidate.spec} ({len(kept)} of {len(candidate.bases)} bases)"
    return candidate.label


def pool_choice(chosen: dict, candidate: Candidate) -> str:
    """The pool variant ``sgm ensemble`` chose on dev (a single base, or meta-features / bias / L2 weight; under
    ``--dev-folds`` also its bases)."""
    if chosen.get("base") is not None:
        return f"`{candidate.bases[chosen['base']]}` alone"
    kept = chosen.get("bases")  # the bases the fit chose (stream and CV fits; older fits pool every base)
    names = ", ".join(f"`{candidate.bases[j]}`" for j in kept or ())
    if kept is not None and chosen.get("reg") is None:  # the CV fit kept one base, unpooled
        return f"{names} alone"
    return ((f"pool of {names}: " if kept else "pool: ")
            + f"meta={chosen['meta']}, bias={chosen['bias']}, reg={chosen['reg']:g}"
            + (f", floor={chosen['floor']:g}" if chosen.get("floor") is not None else ""))


def ensemble_summary(results: list[dict]) -> list[str]:
    """Issue 19: the dev-fitted ensemble against the dev-chosen single model (today's best) and every tuned
    peer, with what each costs (must-show 3)."""
    rows = [(r, next(o for o in r["ours"] if o["candidate"].bases)) for r in results
            if r["entry"].mode == "split" and any(o["candidate"].bases for o in r["ours"])]
    if not rows:
        return []
    names = (("linear_svc", "LinearSVC"), ("logistic_regression", "LogReg"), ("vw_oaa", "VW"))
    lines = ["## Ensembles: a log-linear pool of our tuned candidates (issue 19)", "",
             "`sgm ensemble` fits the pool of the listed candidates' dev-tuned configurations on the training side "
             "only (out-of-fold posteriors inside dev-train, the pool's variant chosen by cross-validation there) and "
             "scores dev-test with the bases fitted on dev-train: the same dev data as every candidate's dev score. "
             "Where the entry chooses by K-fold cross-validation (`choose_folds`), the pool's bases and variant are "
             "chosen and fitted per fold on the other folds (`sgm ensemble --dev-folds K`, "
             "`consumers/evaluation/ensemble_cv.py`), and the dev columns are both candidates' cross-validated "
             "scores on the same folds. "
             "\"single\" = the dev-chosen one among the other candidates. RER of the ensemble against each peer.", "",
             "| dataset | bases | pool (dev-chosen) | dev | test | single (dev-chosen) | dev | test | "
             + " | ".join(f"{label} | RER" for _, label in names) + " |", "|" + "---|" * (8 + 2 * len(names))]
    cost, mean = [], {}
    for result, ens in rows:
        measure = "micro_f1" if result["entry"].data == "reuters21578" else "accuracy"
        singles = [o for o in result["ours"] if o["summary"] and not o["candidate"].bases]
        single = max(singles, key=choice_of)
        peers = {r["peer"]: r for r in result["peers"] if "skipped" not in r}
        chosen = ens["summary"]["chosen"]
        cells = [result["entry"].data, ", ".join(f"`{b}`" for b in ens["candidate"].bases),
                 pool_choice(chosen, ens["candidate"]), fmt(choice_of(ens)),
                 fmt(ens["tuned"][measure]), single["candidate"].label, fmt(choice_of(single)),
                 fmt(single["tuned"][measure])]
        for key, _ in names:
            peer = peers.get(key, {}).get(measure)
            rer = relative_error_reduction(ens["tuned"][measure], peer) if peer is not None else None
            cells += [fmt(peer), pct(rer)]
            if rer is not None and measure == "accuracy":  # the topic sets' mean, as in the table above
                mean.setdefault(key, []).append(rer)
        lines.append("| " + " | ".join(cells) + " |")
        cost.append(f"| {result['entry'].data} | {fmt(ens['tuned']['learn_docs_per_s'], 0)} | "
                    f"{fmt(ens['tuned']['score_docs_per_s'], 0)} | {single['candidate'].label} | "
                    f"{fmt(single['tuned']['learn_docs_per_s'], 0)} | {fmt(single['tuned']['score_docs_per_s'], 0)} | "
                    f"{ens['summary']['search_seconds']:.0f} s |")
    lines += ["| **mean r8, r52, webkb** | | | | | | | | " + " | ".join(
        f"| **{pct(sum(mean[key]) / len(mean[key])) if mean.get(key) else '–'}**" for key, _ in names) + " |", "",
              "Cost (single-core docs/s inside learn and score calls, each from its own `sgm eval` step as above; the "
              "ensemble learns and scores with "
              "every base) and the pool's fit (`sgm ensemble`, on top of the bases' own searches):", "",
              "| dataset | ensemble learn docs/s | score docs/s | single (dev-chosen) | learn docs/s | score docs/s | "
              "pool fit |", "|---|---|---|---|---|---|---|", *cost, ""]
    return lines


def transfer_notes(results: list[dict]) -> list[str]:
    """Candidates whose tuned numbers scored better on dev but worse on the evaluation data than the defaults."""
    notes = []
    for result in results:
        entry = result["entry"]
        measure = "micro_f1" if entry.data == "reuters21578" else "accuracy"
        auc = entry.objective == "roc_auc"
        for ours in result["ours"]:
            s = ours["summary"]
            if not (s and ours["default"]):
                continue
            if auc and ours["tuned"]["roc_auc"] < ours["default"]["roc_auc"]:
                notes.append(f"- {entry.data} ({entry.mode}) `{ours['candidate'].label}`: dev 1-ROCA% "
                             f"{dev_text(entry, s['dev_default'])} → {dev_text(entry, s['dev_tuned'])}, but stream "
                             f"{ours['default']['one_minus_roca_pct']:.3f} → {ours['tuned']['one_minus_roca_pct']:.3f}")
            elif not auc and ours["tuned"][measure] < ours["default"][measure]:
                notes.append(f"- {entry.data} ({entry.mode}) `{ours['candidate'].label}`: dev {s['dev_default']:.4f} → "
                             f"{s['dev_tuned']:.4f}, but {'test' if entry.mode == 'split' else 'stream'} "
                             f"{ours['default'][measure]:.4f} → {ours['tuned'][measure]:.4f}")
    if not notes:
        return []
    return ["## Where tuning did not carry over", "",
            "The search improved the dev score of every candidate; for these the tuned numbers nevertheless do "
            "worse on the evaluation data than the defaults (dev data carved from the training side does not "
            "always behave like the later test split):", "", *notes, ""]


def roca_rer(ours: float | None, peer: float | None) -> float | None:
    """Relative error reduction on 1-ROCA%: the share of the peer's ranking errors (area above its ROC curve)
    that ours removes.

    >>> round(roca_rer(0.2, 0.25), 3)
    0.2
    """
    return None if ours is None or not peer else 1.0 - ours / peer


def stream_summary(results: list[dict]) -> list[str]:
    rows = [r for r in results if r["entry"].mode == "prequential" and r["best"]["tuned"].get("roc_auc") is not None]
    if not rows:
        return []
    lines = ["## Spam streams: ours vs online logistic regression (Vowpal Wabbit, words + bigrams)", "",
             "Prequential (test-then-train, every label fed back at once). 1-ROCA% is the TREC spam track's "
             "100·(1 − ROC AUC): lower is better. Every system ranks by its spam log-odds (ours: log p(spam) − "
             "log p(ham); VW: its raw margin; River: the difference of its joint log-likelihoods), so confident "
             "messages do not tie at p = 1.0. \"dev\" = the first part of the stream, where every choice is made: "
             "each candidate of ours is tuned for dev ROC AUC and ours is the candidate with the best dev 1-ROCA; "
             "each peer's learning rate / alpha is chosen the same way. RER = 1 − ours / peer on 1-ROCA% (the share "
             "of the peer's ranking errors ours removes; negative: ours makes more). Accuracy is the arg-max decision of "
             "a model tuned for ranking (a filter reads its log-odds against a threshold instead: `--preset spam`, "
             "docs/EVALUATION.md).", "",
             "| stream | ours (dev-chosen) | dev 1-ROCA% | accuracy | 1-ROCA% | VW logistic bigrams dev 1-ROCA% | "
             "1-ROCA% | RER vs VW | River MNB dev 1-ROCA% | 1-ROCA% | RER vs River |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for result in rows:
        entry = result["entry"]
        tuned = result["best"]["tuned"]
        peers = {r["peer"]: r for r in result["peers"] if "skipped" not in r}
        cells = [f"{entry.data} ({'shuffled' if entry.shuffle is not None else 'ts order'})",
                 shown_label(result["best"]), dev_text(entry, dev_of(result["best"])), fmt(tuned["accuracy"]),
                 fmt(tuned["one_minus_roca_pct"], 3)]
        for key in ("vw_logistic_bigrams", "river_mnb"):
            peer = peers.get(key, {})
            dev = (peer.get("dev_measures") or {}).get("one_minus_roca_pct")
            cells += [fmt(dev, 3), fmt(peer.get("one_minus_roca_pct"), 3),
                      pct(roca_rer(tuned["one_minus_roca_pct"], peer.get("one_minus_roca_pct")))]
        lines.append("| " + " | ".join(cells) + " |")
    pooled = [r for r in rows if r["best"]["candidate"].bases]
    if pooled:  # must-show 3 of issue 19: what the chosen pool costs beside the best single model, same run
        lines += ["", "Where ours is a pool (`sgm ensemble --mode prequential`: weights fitted on the dev prefix by "
                  "blocked cross-validation, then fixed while every base learns online), its cost beside the "
                  "dev-chosen single model (single-core docs/s inside learn and score calls, each from its own `sgm "
                  "eval` step: after a `--resume` the two may come from runs at different loads):", "",
                  "| stream | pool (dev-chosen) | dev 1-ROCA% | 1-ROCA% | learn docs/s | score docs/s | single "
                  "(dev-chosen) | dev 1-ROCA% | 1-ROCA% | learn docs/s | score docs/s |", "|" + "---|" * 11]
        for result in pooled:
            ens, entry = result["best"], result["entry"]
            single = max((o for o in result["ours"] if o["summary"] and not o["candidate"].bases), key=dev_of)
            lines.append("| " + " | ".join([entry.data, pool_choice(ens["summary"]["chosen"], ens["candidate"])] + [
                cell for o in (ens, single) for cell in (
                    *([] if o is ens else [o["candidate"].label]), dev_text(entry, dev_of(o)),
                    fmt(o["tuned"]["one_minus_roca_pct"], 3), fmt(o["tuned"]["learn_docs_per_s"], 0),
                    fmt(o["tuned"]["score_docs_per_s"], 0))]) + " |")
    return lines + [""]


def search_sizes(results: list[dict]) -> str:
    """One sentence on the search sizes actually run (read from the tune reports; the thesis's is 40x40)."""
    sizes: dict[str, dict[str, set[str]]] = {}  # dataset -> "MNB"/"TDM" -> sizes run
    for result in results:
        for ours in result["ours"]:
            if ours["summary"] and not ours["candidate"].bases:
                kind = "TDM" if ours["candidate"].spec.startswith("tdm") else "MNB"
                if kind == "TDM" or not ours["candidate"].search:  # MNB ones with their own search: named apart
                    sizes.setdefault(result["entry"].data, {}).setdefault(kind, set()).add(ours["summary"]["search"])
    full = [data for data, kinds in sizes.items() if "40x40" in kinds.get("MNB", set())]
    if not full:
        return ("Searches are smaller than the thesis's 40x40 (sizes per dataset below) to keep the whole run "
                "short on two cores.")
    tdm = sorted(set().union(*(sizes[data].get("TDM", set()) for data in full)))
    own = sorted({f"`{o['candidate'].label}` {o['summary']['search']}" for r in results for o in r["ours"]
                  if o["summary"] and o["candidate"].search and not o["candidate"].spec.startswith("tdm")
                  and r["entry"].data in full})
    return (f"{', '.join(full)}: the thesis's 40x40 search for every MNB candidate"
            + (f" except {', '.join(own)} (slower to learn)" if own else "")
            + ((f" (TDM: {', '.join(tdm)})" if tdm != ["40x40"] else " and for TDM") if tdm else "")
            + "; the other datasets smaller searches to keep the whole run short on two cores (sizes per "
            "dataset below).")


KEPT_START, KEPT_END = "<!-- kept section:", "<!-- /kept section -->"


def kept_sections(page: str) -> list[str]:
    """Sections of an existing page that another command writes (between the kept-section markers, markers
    included): a regeneration keeps them as they are, after the spam streams.

    >>> kept_sections("# R\\n<!-- kept section: mail -->\\n## Mail\\nx\\n<!-- /kept section -->\\n## Per dataset")
    ['<!-- kept section: mail -->', '## Mail', 'x', '<!-- /kept section -->', '']
    """
    out, inside = [], False
    for line in page.splitlines():
        inside = inside or line.startswith(KEPT_START)
        if inside:
            out.append(line)
        if line.startswith(KEPT_END):
            inside = False
            out.append("")
    return out


def write_page(results: list[dict], out: Path, step_seconds: float | None, search: tuple[int, int] | None) -> None:
    import numpy
    import sklearn

    versions = f"Python {platform.python_version()}, numpy {numpy.__version__}, scikit-learn {sklearn.__version__}"
    try:
        import river

        versions += f", river {river.__version__}"
    except ImportError:
        pass
    try:
        from importlib.metadata import version

        versions += f", vowpalwabbit {version('vowpalwabbit')}"
    except Exception:
        pass
    lines = [
        "# Results",
        "",
        "<!-- generated by `python -m bench.results`; do not edit by hand -->",
        "",
        f"Generated {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')} by `python -m bench.results"
        f"{'' if search is None else f' --search {search[0]}x{search[1]}'}` on {os.cpu_count()} cores "
        f"({platform.machine()}); "
        + (f"the steps behind it take {step_seconds / 60:.0f} min in all (one after another, each using both "
           f"cores)" if step_seconds is not None else "step times not recorded (a --resume of an older run)")
        + f". {versions}. Throughput columns are single-core and depend on the machine's load at the time.",
        "",
        "How to read it: `docs/EVALUATION.md` defines the protocols and measures. Every score of ours is of a "
        "configuration tuned on development data carved from the training side (or the first quarter of a "
        "stream) by `sgm tune`; every peer chooses its settings on the same development data. The test "
        "data never chooses anything, except in the one column labelled \"best on test\". "
        "All systems read the same tokens (`model.text.Tokenizer`).",
        "",
        search_sizes(results)
        + " Every step is deterministic (seeded searches, dev partitions, shuffles and peers): a rerun "
        "reproduces every score; only the throughput columns change.",
        "",
    ]
    lines += split_summary(results)
    lines += peer_summary(results)
    lines += ensemble_summary(results)
    lines += stream_summary(results)
    lines += kept_sections(out.read_text(encoding="utf-8")) if out.is_file() else []
    lines += transfer_notes(results)
    lines += ["## Per dataset", ""]
    for result in results:
        lines += dataset_section(result)
    if not tdm_available():
        lines += ["TDM (`tdm_uc_jm_dp_kpd_kdp`) is not in this build yet (`model.tdm` does not import); "
                  "`python -m bench.results` adds it as a candidate automatically once it does.", ""]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.results", description="generate docs/RESULTS.md")
    parser.add_argument("--out", default=str(REPO / "docs" / "RESULTS.md"))
    parser.add_argument("--work", default=os.environ.get("WORK", "/tmp/sgm-results"),
                        help="folder for configs and JSON reports (default /tmp/sgm-results, or $WORK)")
    parser.add_argument("--resume", action="store_true", help="reuse outputs already in the work folder")
    parser.add_argument("--only", default=None, help="comma-separated dataset names")
    parser.add_argument("--search", default=None, metavar="ITERSxPOINTS", help="one search size for all, e.g. 4x8")
    parser.add_argument("--merge", action="store_true",
                        help="with --only: merge the datasets' rows and sections into --out (bench/results_merge.py)")
    args = parser.parse_args(argv)
    search = tuple(int(x) for x in args.search.lower().split("x")) if args.search else None
    only = set(args.only.split(",")) if args.only else None
    if args.merge:
        try:
            check_mergeable(only)
            if not Path(args.out).is_file():
                raise MergeError(f"{args.out} does not exist: there is no page to merge into")
        except MergeError as exc:
            print(f"python -m bench.results: --merge: {exc}", file=sys.stderr)
            return 2
    runner = Runner(Path(args.work), args.resume)
    started = time.perf_counter()
    results, done = [], {}
    for entry in PLAN:
        if only and entry.data not in only:
            continue
        print(f"== {entry.key}", file=sys.stderr, flush=True)
        done[entry.key] = run_entry(entry, runner, search, done)
        results.append(done[entry.key])
    if args.merge:  # the partial page beside the work, then its parts into the page
        part = runner.path("partial-page.md")
        write_page(results, part, runner.step_seconds(), search)
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        out = Path(args.out)
        try:
            merged = merge_page(out.read_text(encoding="utf-8"), part.read_text(encoding="utf-8"), only, when)
        except MergeError as exc:  # the run's outputs stay in --work: a full page can --resume from them
            print(f"python -m bench.results: --merge: {exc} (the partial page is {part})", file=sys.stderr)
            return 1
        out.write_text(merged, encoding="utf-8")
    else:
        write_page(results, Path(args.out), runner.step_seconds(), search)
    print(f"wrote {args.out} ({(time.perf_counter() - started) / 60:.1f} min)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
