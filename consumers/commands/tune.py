"""``sgm tune``: Gaussian random search of model numbers on a development split.

Example (see ``docs/EVALUATION.md``)::

    sgm tune --data r8 --model uc_pd_dp_tXiX_ps --iters 40 --points 40 --out r8.json
    sgm eval --data r8 --config r8.json
    sgm tune --data spamassassin-raw --preset spam --objective roc_auc --iters 8 --points 12 --out mail.json

On data carrying whole messages the mail option ``meta_weight`` is searched too
(``--params`` names it like a model number); the messages are extracted once.

The development data comes from the training data only: in split mode a
seeded random ``--dev-fraction`` of the training documents is the dev-test
set and the rest dev-train (the test split is never read for tuning); in
prequential mode the first ``--dev-fraction`` of the stream. Every point fits
a fresh model on dev-train and scores dev-test (or runs prequentially over
the dev stream); points of one iteration run in parallel worker processes.

The search starts from the configuration's numbers (``--config``/``--param``,
else the defaults of ``model.spec.PARAMS``), so the printed "default" dev
score is the starting point's. The best configuration is written to
``--out`` in the ``model_config`` format that ``sgm eval --config`` and
``sgm serve --config`` read. Unless ``--no-test``, the default and tuned
configurations are then evaluated on the real test protocol and both are
reported (the test result is reported, never used to choose).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from sgm.model import build_model, model_config
from sgm.consumers.evaluation.documents import TUNABLE_MAIL_PARAMS, uses_mail
from sgm.consumers.evaluation.search import Dimension, dimensions_for, gaussian_random_search
from sgm.model.mail import MailOptions
from sgm.model.spec import PARAMS, SpecError, parse_spec

from .eval import MEASURES, TWO_LABEL_MEASURES, add_data_arguments, config_from_args, format_summary, setup_from_args
from .dev_partition import DEV_DEFAULTS, add_dev_partition_arguments, with_defaults
from .outputs import check_output_paths


def dev_partition_options(args: argparse.Namespace, mode: str) -> argparse.Namespace:
    """``args`` with :data:`DEV_DEFAULTS` where absent; ValueError where one is given that ``mode`` and
    ``--dev-folds`` do not read (an operator's typo would otherwise be ignored without a word)."""
    if args.dev_folds > 1 and args.dev_fraction is not None:
        raise ValueError(f"--dev-fraction applies to one dev partition (--dev-folds 1) or a stream, not to "
                         f"--dev-folds {args.dev_folds} (each fold is held out once)")
    if mode == "prequential" and args.dev_seed is not None:
        raise ValueError("--dev-seed applies to --mode split (a stream's dev part is its first --dev-fraction)")
    return with_defaults(args, DEV_DEFAULTS)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_data_arguments(parser)
    search = parser.add_argument_group("search")
    search.add_argument("--params", default=None, metavar="NAMES",
                        help="comma-separated numbers to search (default: every number the spec reads, and "
                             "meta_weight on whole messages)")
    search.add_argument("--range", action="append", default=[], metavar="NAME=LOW:HIGH",
                        help="override a searched range (default: the tuning range in model.spec.PARAMS)")
    search.add_argument("--iters", type=int, default=40, help="iterations (default 40)")
    search.add_argument("--points", type=int, default=40, help="points per iteration (default 40)")
    search.add_argument("--spread", type=int, default=4, help="tied best points kept (X, default 4)")
    search.add_argument("--seed", type=int, default=0, help="seed of the search steps (default 0)")
    search.add_argument("--objective", default=None,
                        choices=("accuracy", "micro_f1", "macro_f1", "roc_auc", "neg_log_loss"),
                        help="dev measure to maximize (default: accuracy; micro_f1 for multi-label data)")
    add_dev_partition_arguments(search)
    search.add_argument("--dev-folds", type=int, default=1, metavar="K",
                        help="split mode: K-fold cross-validation over the training data instead of one dev "
                             "partition (each point fits K models; less noisy, K times slower; default 1)")
    search.add_argument("--choose-label-threshold", action="store_true",
                        help="multi-label data in powerset mode (split): after the search, choose on the dev data "
                             "between the arg-max label set and a threshold on label marginals (cross-fitted over "
                             "two halves of dev-test; docs/EVALUATION.md) and write the choice into --out")
    search.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                        help="parallel processes evaluating points (default: the machine's cores)")
    parser.add_argument("--out", required=True, metavar="CONFIG", help="write the best configuration here (JSON)")
    parser.add_argument("--json", default=None, metavar="REPORT", help="write the search report (all points) as JSON")
    parser.add_argument("--plot", default=None, metavar="OUT.png",
                        help="plot the search: every point's dev score, and the score against each searched number "
                             "(needs matplotlib: pip install 'sgm-stream[plot]')")
    parser.add_argument("--test", action=argparse.BooleanOptionalAction, default=True,
                        help="also evaluate default and tuned configurations on the test protocol (default on)")


def _ranges(items: list[str]) -> dict[str, tuple[float, float]]:
    out = {}
    for item in items:
        name, _, span = item.partition("=")
        low, sep, high = span.partition(":")
        if not sep:
            raise SpecError(f"--range takes NAME=LOW:HIGH, got {item!r}")
        out[name.strip()] = (float(low), float(high))
    return out


def run(args: argparse.Namespace) -> int:
    from sgm.consumers.evaluation.dev_task import development_task, parallel_map
    from sgm.consumers.evaluation.harness import evaluate, load_examples

    from ..progress import ProgressLine
    from .eval import plotting_missing

    if args.plot and plotting_missing("tune"):
        print(plotting_missing("tune"), file=sys.stderr)
        return 2
    try:
        check_output_paths(args.out, args.json, args.plot)
        config = config_from_args(args)
        spec = parse_spec(config["model"])
        docs = load_examples(args.data, limit=args.limit)
        setup = setup_from_args(args, docs)
        args = dev_partition_options(args, setup.mode)
        mail = uses_mail(docs, setup.mail)
        free = sorted(spec.free_params)
        tunable = free + (list(TUNABLE_MAIL_PARAMS) if mail else [])
        names = [n.strip() for n in args.params.split(",") if n.strip()] if args.params else tunable
        not_read = [n for n in names if n not in tunable]
        if not_read:
            raise SpecError(f"{spec.name} does not read {not_read} (it reads: {', '.join(tunable) or 'nothing'})")
        if not names:
            raise SpecError(f"{spec.name} has no numbers to tune")
        ranges = _ranges(args.range)
        dimensions = dimensions_for([n for n in names if n not in TUNABLE_MAIL_PARAMS], ranges)
        for name in (n for n in names if n in TUNABLE_MAIL_PARAMS):
            low, high, log_scale = TUNABLE_MAIL_PARAMS[name]
            dimensions.append(Dimension(name, *ranges.get(name, (low, high)), log_scale=log_scale))
        if args.iters < 0 or args.points < 1:
            raise ValueError("need --iters >= 0 and --points >= 1")
        if args.choose_label_threshold:
            from sgm.consumers.evaluation.harness import is_multilabel, prepare_config

            if setup.mode != "split" or not is_multilabel(docs) or \
                    prepare_config(config, docs).get("multilabel") != "powerset":
                raise ValueError("--choose-label-threshold needs multi-label data in split mode and powerset output")
    except (SpecError, ValueError, OSError, json.JSONDecodeError) as exc:  # OSError: a folder, no permission
        print(f"sgm tune: {exc}", file=sys.stderr)
        return 2

    # The starting point: the configuration's numbers where given, else the documented defaults.
    probe = build_model(config)
    start_params = {**probe.params, "meta_weight": (probe.mail or MailOptions()).meta_weight}
    start = {n: float(start_params[n]) if start_params[n] != "kn" else PARAMS[n].default for n in names}
    task = development_task(docs, config, setup, args.objective, args.dev_fraction, args.dev_seed, args.dev_folds)
    dev_size = (f"dev-train {len(task.dev_train)}, dev-test {len(task.dev_test)}" if setup.mode == "split"
                else f"dev stream {len(task.dev_stream)}")
    if len(task.folds) > 1:
        dev_size += f", {len(task.folds)} folds"
    verbose = sys.stderr.isatty() if args.progress is None else args.progress
    print(f"sgm tune: {spec.name} on {args.data} ({setup.mode}; {dev_size}); searching {', '.join(names)} "
          f"{args.iters}x{args.points} with {args.workers} worker(s), objective {task.objective}", file=sys.stderr)

    started = time.perf_counter()

    def report_iteration(iteration: int, result) -> None:
        if verbose:
            print(f"  iteration {iteration}/{args.iters}: best dev {task.objective} {result.best_score:.6f} "
                  f"({result.evaluations} points, {time.perf_counter() - started:.1f}s) {result.best_point}",
                  file=sys.stderr)

    pool_map, close = parallel_map(task, args.workers)
    calls = iter(range(args.iters + 1))

    def map_fn(fn, points):
        """The pool's map, with a progress line inside the iteration (points done, rate)."""
        iteration = next(calls, args.iters)
        label = "start point" if iteration == 0 else f"iteration {iteration}/{args.iters}"
        line = ProgressLine(f"  {label}", total=len(points), enabled=verbose)
        for done, score in enumerate(pool_map(fn, points), start=1):
            line.update(points=1)
            if done == len(points):  # the search stops pulling after the last score: erase the line now
                line.close(keep=False)
            yield score

    try:
        result = gaussian_random_search(task, dimensions, start=start, iterations=args.iters, points=args.points,
                                        spread=args.spread, seed=args.seed, map_fn=map_fn,
                                        on_iteration=report_iteration)
    finally:
        close()
    search_seconds = time.perf_counter() - started

    tuned_config = model_config(build_model(task.config_for(result.best_point)))
    default_config = model_config(build_model(task.config_for(result.start_point)))
    label_choice = None
    if args.choose_label_threshold:
        from sgm.consumers.evaluation.label_thresholds import choose_label_threshold, dev_marginals

        label_choice = choose_label_threshold(dev_marginals(task, tuned_config), seed=args.dev_seed)
        tuned_config.pop("label_threshold", None)
        if label_choice["label_threshold"] is not None:
            tuned_config["label_threshold"] = label_choice["label_threshold"]
    Path(args.out).write_text(json.dumps(tuned_config, indent=2, sort_keys=True) + "\n", encoding="utf-8")

    summary: dict[str, Any] = {
        "data": str(args.data),
        "mode": setup.mode,
        "objective": task.objective,
        "searched": names,
        "ranges": {d.name: [d.low, d.high] for d in dimensions},
        "search": f"{args.iters}x{args.points}",
        "seed": args.seed,
        "dev": {"fraction": args.dev_fraction, "seed": args.dev_seed, "folds": len(task.folds) or None,
                "train_docs": len(task.dev_train),
                "test_docs": len(task.dev_test), "stream_docs": len(task.dev_stream)},
        "dev_default": result.start_score,
        "dev_tuned": result.best_score,
        "evaluations": result.evaluations,
        "search_seconds": round(search_seconds, 1),
        "default_config": default_config,
        "tuned_config": tuned_config,
        "label_threshold": label_choice,
    }
    print(f"dev {task.objective}: default {result.start_score:.6f} -> tuned {result.best_score:.6f} "
          f"({result.evaluations} points, {search_seconds:.1f}s); best config written to {args.out}")
    print(f"  tuned params: {json.dumps(tuned_config['params'], sort_keys=True)}"
          + (f", meta_weight {tuned_config['mail']['meta_weight']:g}" if "meta_weight" in names else ""))
    if label_choice is not None:
        crossed = label_choice["cross_fitted"]
        print(f"  label rule on dev (Micro-F1 cross-fitted over two halves of {label_choice['docs']} dev-test docs): "
              f"arg-max {crossed['arg-max']:.6f}, threshold {crossed['threshold']:.6f}, per-label "
              f"{crossed['per-label']:.6f} -> {label_choice['rule']}"
              + (f" (label_threshold {label_choice['label_threshold']:g})" if label_choice["label_threshold"] else ""))
    if args.test:
        for name, cfg in (("default", default_config), ("tuned", tuned_config)):
            report = evaluate(cfg, docs, setup, progress=args.progress)
            summary[f"test_{name}"] = {k: report.get(k) for k in (*MEASURES, *TWO_LABEL_MEASURES, "docs", "mode",
                                                                   "split", "order")}
            print(format_summary(report, label=f"test ({name}): "))
    if args.json:
        summary["trials"] = result.to_dict()["trials"]
        Path(args.json).write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    if args.plot:
        from sgm.consumers.evaluation.search_plot import plot_search

        plot_search(result.to_dict()["trials"], names, task.objective, args.plot,
                    title=f"{spec.name}: {args.iters}x{args.points}", log_scale=[d.name for d in dimensions if d.log_scale])
        print(f"  search plot written to {args.plot}")
    return 0
