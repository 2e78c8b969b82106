"""``sgm eval``: evaluate a model configuration on a JSON Lines dataset.

Examples (see ``docs/EVALUATION.md``)::

    sgm eval --data r8 --model uc_pd_dp_tXiX_ps --param mu=20 --json r8.json
    sgm eval --data spamassassin --config tuned.json --mode prequential --plot spam.png
    sgm eval --data sms-spam --model uc_jm --mode prequential --shuffle 0 --delay 100
    sgm eval --data spamassassin-raw --preset spam --plot spam.png   # whole emails, the tuned mail default

``--data`` takes a file path or a shared dataset name (``r8``, ``spamassassin``...).
The default mode is ``split`` when the data has ``train`` and ``test``
documents, else ``prequential``. ``--json`` writes ``accuracy``, ``micro_f1``,
``macro_f1``, ``log_loss``, ``roc_auc``, ``one_minus_roca_pct`` (null where
they do not apply), ``docs``, ``learn_docs_per_s``, ``score_docs_per_s``, the
full ``config``, ``per_class`` (precision, recall, F1, support per label),
``confusion`` (where each document has one output class) and, in prequential
mode, ``windows`` (accuracy per window). Two-label data adds ``fp_rate_pct`` /
``fn_rate_pct`` (of the decisions: the arg-max, or the spam threshold and learn
guards of ``--preset spam`` / ``--spam-threshold`` / ``--min-spam`` /
``--min-ham``), ``fn_at_fp_pct`` (FN% at 0.1% and 1% FP) and ``decision``. Data
carrying whole messages (``raw_b64``) is read as messages (``--no-mail``: the
text). The terminal gets the same as a table
(:mod:`sgm.consumers.evaluation.tables`). ``--plot`` needs matplotlib, the
``plot`` extra.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from sgm.consumers.config import read_configuration
from sgm.consumers.decision import SpamDecision
from sgm.consumers.evaluation.documents import route_mail_params
from sgm.consumers.presets import PRESETS, preset as find_preset
from sgm.model import build_model, model_config
from sgm.model.spec import SpecError

from .outputs import check_output_paths

MEASURES = ("accuracy", "micro_f1", "macro_f1", "log_loss", "roc_auc", "one_minus_roca_pct")
#: Measures of two-label data: error rates of the decisions, FN% at fixed FP%, the decision itself.
TWO_LABEL_MEASURES = ("fp_rate_pct", "fn_rate_pct", "fn_at_fp_pct", "decision")


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments shared by ``eval`` and ``tune``: data, model configuration, protocol."""
    data = parser.add_argument_group("data and protocol")
    data.add_argument("--data", required=True, help="dataset file (.jsonl or .jsonl.gz) or shared dataset name (r8, ...)")
    data.add_argument("--mode", choices=("split", "prequential"), default=None,
                      help="split: learn train, score test; prequential: test-then-train in stream order "
                           "(default: split when the data has a train/test split, else prequential)")
    data.add_argument("--delay", type=int, default=0, metavar="N",
                      help="prequential: a label is learned after the next N documents are scored (default 0)")
    data.add_argument("--shuffle", type=int, default=None, metavar="SEED",
                      help="prequential: seeded shuffle instead of ts order (for sets without a usable order)")
    data.add_argument("--test-fraction", type=float, default=0.2,
                      help="split mode on data without a split: seeded random test share (default 0.2)")
    data.add_argument("--split-seed", type=int, default=0, help="seed of that random split (default 0)")
    data.add_argument("--threshold", type=float, default=None,
                      help="per-label multi-label output: labels with posterior >= this (default 0.3)")
    data.add_argument("--positive", default=None, help="positive label of a two-label task (default: spam, "
                      "else the second label in sort order)")
    data.add_argument("--limit", type=int, default=None, metavar="N", help="read only the first N documents")
    data.add_argument("--mail", action=argparse.BooleanOptionalAction, default=None,
                      help="read whole messages (raw_b64) with the model's mail extractor; --no-mail: the text field "
                           "(default: messages when the data carries them)")

    model = parser.add_argument_group("model configuration")
    model.add_argument("--preset", default=None, choices=sorted(PRESETS),
                       help="a tuned default: 'spam' = the mail model, features, spam threshold and learn guards "
                            "(docs/EVALUATION.md); --config, --model, --param and the decision flags override it")
    model.add_argument("--config", default=None, help="configuration JSON (as written by sgm tune)")
    model.add_argument("--model", default=None, metavar="SPEC", help="affix string, e.g. uc_pd_jm_dp_tXiX_ps "
                       "(replaces the config's model)")
    model.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                       help="set one model number (repeatable), e.g. --param mu=20; mail options too: meta_weight, "
                            "received_hops, mail_ngrams")
    model.add_argument("--half-life", type=float, default=None, metavar="SECONDS", help="time decay half-life")
    model.add_argument("--multilabel", choices=("per_label", "powerset"), default=None,
                       help="label sets: per label or as one class each (default for multi-label data: powerset)")
    model.add_argument("--label-threshold", type=float, default=None, metavar="P",
                       help="powerset mode: output the labels whose marginal probability is >= P (the top one when "
                            "none is) instead of the arg-max label set (sgm tune --choose-label-threshold picks P)")
    model.add_argument("--ngrams", type=int, default=None, help="tokenizer: longest word n-gram (1-3)")
    model.add_argument("--binary", action=argparse.BooleanOptionalAction, default=None,
                       help="tokenizer: presence features (each distinct term of a document counts 1)")
    model.add_argument("--char-ngrams", default=None, metavar="LOW-HIGH",
                       help="tokenizer: character n-grams of these lengths (e.g. 3-5) instead of words, a feature set "
                            "for an ensemble base (docs/EVALUATION.md); 'none' turns them off")

    decision = parser.add_argument_group("spam decision (two-label data; the label is --positive, default spam)")
    decision.add_argument("--spam-threshold", type=float, default=None, metavar="P",
                          help="spam verdict when the spam posterior is >= P (default: the preset's; else arg-max)")
    decision.add_argument("--spam-prior-weight", type=float, default=None, metavar="W",
                          help="weight of the class prior in the posterior the threshold applies to (default: the "
                               "preset's; else the model's theta: its own posterior)")
    decision.add_argument("--min-spam", type=int, default=None, metavar="N",
                          help="no spam verdict before N spams are learned (SpamAssassin's bayes_min_spam_num)")
    decision.add_argument("--min-ham", type=int, default=None, metavar="N",
                          help="no spam verdict before N hams are learned (bayes_min_ham_num)")

    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="progress bar on stderr (default: when stderr is a terminal)")


def char_lengths(text: str) -> list[int] | None:
    """``--char-ngrams LOW-HIGH`` (or one length N, or ``none``) as the tokenizer's ``char_ngrams``.

    >>> char_lengths("3-5"), char_lengths("4"), char_lengths("none")
    ([3, 5], [4, 4], None)
    """
    if text.strip().lower() == "none":
        return None
    low, sep, high = text.partition("-")
    try:
        return [int(low), int(high if sep else low)]
    except ValueError:
        raise SpecError(f"--char-ngrams takes LOW-HIGH (e.g. 3-5), got {text!r}") from None


def config_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The configuration dict from ``--config``, ``--model``, ``--param`` and the options;
    raises :class:`SpecError` when it does not describe a valid model."""
    config: dict[str, Any] = find_preset(args.preset).model_config() if getattr(args, "preset", None) else {}
    if args.config:
        try:
            config.update(read_configuration(args.config, args.config))
        except ValueError as exc:
            raise SpecError(str(exc)) from None
    if args.model:
        config["model"] = args.model
    if "model" not in config:
        raise SpecError("give --model SPEC or --config FILE")
    params = dict(config.get("params") or {})
    for item in args.param:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise SpecError(f"--param takes NAME=VALUE, got {item!r}")
        value = value.strip()
        try:
            params[name.strip()] = value if value.lower() == "kn" else float(value)
        except ValueError:  # the model's check says which number and what it takes
            params[name.strip()] = value
    config["params"] = params
    if args.half_life is not None:
        config["half_life"] = args.half_life
    if args.multilabel is not None:
        config["multilabel"] = args.multilabel
    if args.label_threshold is not None:  # a threshold on label marginals: powerset output by definition
        config["label_threshold"] = args.label_threshold
        config.setdefault("multilabel", "powerset")
    if args.ngrams is not None:
        config["tokenizer"] = {**dict(config.get("tokenizer") or {}), "ngrams": args.ngrams}
    if args.binary is not None:
        config["tokenizer"] = {**dict(config.get("tokenizer") or {}), "binary": args.binary}
    if getattr(args, "char_ngrams", None) is not None:
        config["tokenizer"] = {**dict(config.get("tokenizer") or {}), "char_ngrams": char_lengths(args.char_ngrams)}
    explicit = route_mail_params({k: v for k, v in config.items() if v is not None})
    model_config(build_model(explicit))  # validates every field now, with the model's own messages
    return explicit


def decision_from_args(args: argparse.Namespace) -> SpamDecision | None:
    """The spam decision: the preset's, with the flags given on top; ``None`` when neither sets one."""
    base = find_preset(args.preset).decision if getattr(args, "preset", None) else None
    given = {"threshold": args.spam_threshold, "min_spam": args.min_spam, "min_ham": args.min_ham,
             "prior_weight": args.spam_prior_weight}
    if base is None and all(v is None for v in given.values()):
        return None
    settings = (base or SpamDecision()).to_dict()
    if args.positive is not None:
        settings["label"] = args.positive
    settings.update({k: v for k, v in given.items() if v is not None})
    return SpamDecision.from_dict(settings)


def setup_from_args(args: argparse.Namespace, docs) -> "EvalSetup":
    from sgm.consumers.evaluation.harness import DEFAULT_THRESHOLD, EvalSetup, has_standard_split

    from sgm.consumers.evaluation.documents import uses_mail

    mode = args.mode or ("split" if has_standard_split(docs) else "prequential")
    uses_mail(docs, args.mail)  # --mail / --no-mail must fit the data
    decision = decision_from_args(args)
    labels = {label for d in docs for label in d.labels}
    if decision is not None and (decision.label not in labels or len(labels) != 2):
        raise ValueError(f"a spam decision needs two-label data with the label {decision.label!r} "
                         f"(the data has {len(labels)} labels)")
    return EvalSetup(mode=mode, delay=args.delay, shuffle_seed=args.shuffle, test_fraction=args.test_fraction,
                     split_seed=args.split_seed,
                     threshold=DEFAULT_THRESHOLD if args.threshold is None else args.threshold,
                     window=getattr(args, "window", None), positive=args.positive,
                     decision=decision, mail=args.mail)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_data_arguments(parser)
    out = parser.add_argument_group("output")
    out.add_argument("--json", default=None, metavar="OUT", help="write the report as JSON ('-' for stdout)")
    out.add_argument("--plot", default=None, metavar="OUT.png", help="plot accuracy over the stream (and the ROC curve); "
                     "needs matplotlib: pip install 'sgm-stream[plot]'")
    out.add_argument("--window", default=None, help="prequential windows: N documents, or a duration like 7d, 12h "
                     "(default: 20 windows of equal size)")


def format_summary(report: dict[str, Any], label: str = "") -> str:
    """A few human-readable lines of a report."""
    def show(value):
        return "n/a" if value is None else f"{value:.6g}" if isinstance(value, float) else str(value)

    head = f"{label}mode={report['mode']} docs={report['docs']}"
    if report["mode"] == "split":
        head += f" (train {report['train_docs']}, test {report['test_docs']}, split {report.get('split', '?')})"
    else:
        head += f" (unscored {report['unscored']}, delay {report['delay']}, order {report['order']})"
    if report.get("label_threshold") is not None:
        head += f" label_threshold={report['label_threshold']:g}"
    lines = [head, "  " + "  ".join(f"{m}={show(report.get(m))}" for m in MEASURES)]
    if report.get("fp_rate_pct") is not None or report.get("fn_rate_pct") is not None:
        at_fp = "  ".join(f"fn_pct_at_fp_{target}pct={show(value)}"
                          for target, value in (report.get("fn_at_fp_pct") or {}).items())
        decision = report.get("decision")
        weight = f", prior weight {decision['prior_weight']:g}" if decision and "prior_weight" in decision else ""
        rule = (f"threshold {decision['threshold']:g}, min_spam {decision['min_spam']}, min_ham "
                f"{decision['min_ham']}{weight}: not_ready {decision['not_ready']}" if decision else "arg-max")
        lines.append(f"  fp_rate_pct={show(report['fp_rate_pct'])}  fn_rate_pct={show(report['fn_rate_pct'])} ({rule})"
                     f"  {at_fp}")
    lines.append(f"  learn {show(report['learn_docs_per_s'])} docs/s, score {show(report['score_docs_per_s'])} docs/s; "
                 f"model {report['config']['model']} {json.dumps(report['config']['params'])}"
                 + (f" mail {json.dumps({k: v for k, v in report['config']['mail'].items() if k != 'limits'})}"
                    if report["config"].get("mail") else ""))
    return "\n".join(lines)


def plotting_missing(command: str) -> str | None:
    """The one-line hint when ``--plot`` cannot work here (matplotlib is the ``plot`` extra), else None."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return f"sgm {command}: --plot needs matplotlib: pip install 'sgm-stream[plot]'"
    return None


def run(args: argparse.Namespace) -> int:
    from sgm.consumers.evaluation.harness import evaluate, load_examples, plot_report
    from sgm.consumers.evaluation.tables import MAX_JSON_LABELS, confusion, format_report, per_class

    if args.plot and plotting_missing("eval"):
        print(plotting_missing("eval"), file=sys.stderr)
        return 2
    try:
        check_output_paths(args.json, args.plot)
        config = config_from_args(args)
        docs = load_examples(args.data, limit=args.limit)
        setup = setup_from_args(args, docs)
    except (SpecError, ValueError, OSError, json.JSONDecodeError) as exc:  # OSError: a folder, no permission
        print(f"sgm eval: {exc}", file=sys.stderr)
        return 2
    report = evaluate(config, docs, setup, progress=args.progress, keep_outcomes=True)
    outcomes = report.pop("_outcomes")
    report["data"] = str(args.data)
    report["per_class"] = per_class(outcomes.true_sets, outcomes.predicted_sets)
    matrix = confusion(outcomes.true_sets, outcomes.predicted_sets, powerset=report.get("multilabel") == "powerset")
    if matrix is not None and len(matrix[0]) <= MAX_JSON_LABELS:
        report["confusion"] = {"labels": matrix[0], "counts": matrix[1]}
    if args.plot:
        from sgm.consumers.evaluation.harness import resolve_data

        plot_report(report, outcomes, args.plot, title=resolve_data(args.data).name.split(".")[0])
    text = json.dumps(report, indent=2, sort_keys=True)
    table = format_report(report, outcomes.true_sets, outcomes.predicted_sets)
    if args.json == "-":
        sys.stdout.write(text + "\n")
        print(table, file=sys.stderr)
    else:
        if args.json:
            Path(args.json).write_text(text + "\n", encoding="utf-8")
        print(table)
    return 0
