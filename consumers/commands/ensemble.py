"""``sgm ensemble``: fit a log-linear pool of tuned base configurations on development data.

Example (see ``docs/EVALUATION.md``)::

    sgm tune --data webkb --model uc_pd_jm_dp_fw_ps --ngrams 2 --binary --out binary.json
    sgm tune --data webkb --model tdm_uc_jm_dp_kpd_kdp --out tdm.json
    sgm ensemble --data webkb --base binary.json --base tdm.json --out ensemble.json --json fit.json
    sgm eval --data webkb --config ensemble.json
    sgm serve --config ensemble.json ...
    sgm ensemble --data spamassassin --mode prequential --base tdm.json --base mnb.json --out spam.json
    sgm eval --data spamassassin --config spam.json                                # replays the stream

Split mode: only the training side is read (``sgm.consumers.evaluation.ensemble_fit``): out-of-fold posteriors of the
bases inside dev-train, the pool fitted and its variant chosen there, the dev score on the dev-test part
``sgm tune`` scores. The written configuration is a model configuration like any other
(``{"model": "ensemble", "bases": [...], "weights": ..., "bias": ..., "meta": ...}``): ``sgm eval
--config`` evaluates it on the test split, ``sgm serve --config`` serves it (the bases learn online, the
pool stays as fitted; docs/ARCHITECTURE.md, "An ensemble").

Prequential mode (``sgm.consumers.evaluation.ensemble_stream``): only the stream's dev prefix (the first
``--dev-fraction``, what ``sgm tune --mode prequential`` reads) is read; the bases replay it test-then-train, the
pool's variant and the bases it pools (greedy forward selection: a base is added only where it improves the dev
score) are chosen by blocked cross-validation over their prequential posteriors, the written pool holds only the
chosen bases, and a single base is written instead where no pool beats it on dev.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..config import read_configuration
from .dev_partition import DEV_DEFAULTS, add_dev_partition_arguments, with_defaults
from .outputs import check_output_paths

#: The values of the options that apply only to some protocols, where absent. Their parser defaults are None, so
#: an option given where it does not apply is refused (one line, exit 2) rather than silently ignored.
#: ``--dev-fraction`` and ``--dev-seed`` keep ``sgm tune``'s defaults: the dev scores compare like with like.
DEFAULTS = {**DEV_DEFAULTS, "folds": 4, "shuffle": None, "delay": 0, "test_fraction": 0.2,
            "split_seed": 0}
#: The protocols of ``sgm ensemble`` and the options of :data:`DEFAULTS` each one reads.
PROTOCOLS = {"--mode prequential": ("dev_fraction", "folds", "shuffle", "delay"),
             "--dev-folds 1": ("dev_fraction", "dev_seed", "folds", "test_fraction", "split_seed"),
             "--dev-folds K >= 3": ("dev_seed", "test_fraction", "split_seed")}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", required=True, help="dataset file or shared dataset name (r8, ...)")
    parser.add_argument("--mode", choices=("split", "prequential"), default="split",
                        help="the protocol: split (default) or prequential (fit on the stream's dev prefix)")
    parser.add_argument("--base", action="append", required=True, metavar="CONFIG",
                        help="a base model's configuration JSON (as sgm tune writes it); repeat for each base")
    parser.add_argument("--objective", choices=("accuracy", "micro_f1", "roc_auc"), default=None,
                        help="dev measure (default: accuracy; micro_f1 for multi-label data; roc_auc for a "
                             "two-label stream, prequential only)")
    add_dev_partition_arguments(parser)
    parser.add_argument("--dev-folds", type=int, default=1, metavar="K",
                        help="split: K >= 3 scores the pool by K-fold cross-validation over the training side, on "
                             "sgm tune --dev-folds K's folds (seeded by --dev-seed), and writes the pool the same "
                             "procedure fits on the whole training side (its bases chosen there too; issue 19)")
    parser.add_argument("--folds", type=int, default=None,
                        help="--dev-folds 1: folds of the out-of-fold posteriors (prequential: consecutive blocks of "
                             "the dev stream; default 4)")
    parser.add_argument("--shuffle", type=int, default=None, metavar="SEED",
                        help="prequential: seeded shuffle instead of ts order (as sgm tune / sgm eval)")
    parser.add_argument("--delay", type=int, default=None, metavar="N",
                        help="prequential: learn each label after N more documents are scored (default 0)")
    parser.add_argument("--test-fraction", type=float, default=None,
                        help="split: data without a split: seeded random test share (default 0.2)")
    parser.add_argument("--split-seed", type=int, default=None, help="split: seed of that random split (default 0)")
    parser.add_argument("--out", required=True, metavar="CONFIG", help="write the ensemble's configuration here")
    parser.add_argument("--json", default=None, metavar="REPORT", help="write the fit's report as JSON")


def protocol_options(args: argparse.Namespace) -> argparse.Namespace:
    """``args`` with :data:`DEFAULTS` for the absent protocol options; ValueError naming those given where the
    protocol does not read them (``--folds`` with ``--dev-folds 5``, ``--dev-seed`` on a stream, ...)."""
    protocol = ("--mode prequential" if args.mode == "prequential" else
                "--dev-folds 1" if args.dev_folds == 1 else "--dev-folds K >= 3")
    given = [name for name in DEFAULTS if getattr(args, name) is not None and name not in PROTOCOLS[protocol]]
    if given:
        readers = [p for p, names in PROTOCOLS.items() if all(n in names for n in given)]
        here = "--mode prequential" if args.mode == "prequential" else f"--dev-folds {args.dev_folds}"
        raise ValueError(f"{' and '.join('--' + n.replace('_', '-') for n in given)} "
                         f"{'apply' if len(given) > 1 else 'applies'} to {' or '.join(readers) or 'other protocols'}"
                         f", not to {here} (where {'they are' if len(given) > 1 else 'it is'} not read)")
    return with_defaults(args, DEFAULTS)


def run(args: argparse.Namespace) -> int:
    from sgm.consumers.evaluation.ensemble_cv import cross_validate_ensemble
    from sgm.consumers.evaluation.ensemble_fit import fit_ensemble
    from sgm.consumers.evaluation.ensemble_stream import fit_stream_ensemble
    from sgm.consumers.evaluation.harness import EvalSetup, load_examples

    try:
        check_output_paths(args.out, args.json)
        if args.dev_folds < 1:
            raise ValueError(f"--dev-folds {args.dev_folds}: K is at least 1 (1: one dev partition; split: K >= 3 "
                             "cross-validates the pool)")
        if args.mode == "prequential" and args.dev_folds > 1:
            raise ValueError("--dev-folds applies to --mode split")
        args = protocol_options(args)
        configs = []
        for path in args.base:
            loaded = read_configuration(path, path)
            if "model" not in loaded:
                raise ValueError(f"{path}: a configuration is a JSON object with a 'model'")
            configs.append(loaded)
        docs = load_examples(args.data)
        say = lambda message: print(message, file=sys.stderr)  # noqa: E731
        if args.mode == "prequential":
            setup = EvalSetup(mode="prequential", delay=args.delay, shuffle_seed=args.shuffle)
            summary = fit_stream_ensemble(docs, configs, setup, args.objective, args.dev_fraction, args.folds, log=say)
        else:
            if args.objective == "roc_auc":
                raise ValueError("--objective roc_auc applies to --mode prequential")
            setup = EvalSetup(mode="split", test_fraction=args.test_fraction, split_seed=args.split_seed)
            if args.dev_folds > 1:
                summary = cross_validate_ensemble(docs, configs, setup, args.objective, args.dev_folds, args.dev_seed,
                                                  log=say)
            else:
                summary = fit_ensemble(docs, configs, setup, args.objective, args.dev_fraction, args.dev_seed,
                                       args.folds, log=say)
    except (ValueError, OSError, json.JSONDecodeError) as exc:  # OSError: a folder, no permission
        print(f"sgm ensemble: {exc}", file=sys.stderr)
        return 2
    summary["data"] = str(args.data)
    Path(args.out).write_text(json.dumps(summary["tuned_config"], indent=2, sort_keys=True) + "\n", encoding="utf-8")
    chosen = summary["chosen"]
    how = (f"base {chosen['base']} alone" if "base" in chosen else
           (f"bases {chosen['bases']} of {len(configs)}, " if "bases" in chosen else "")
           + f"meta={chosen['meta']}, bias={chosen['bias']}, "
           + (f"reg={chosen['reg']:g}" if chosen.get("reg") is not None else "unpooled")
           + (f", floor={chosen['floor']:g}" if chosen.get("floor") is not None else ""))
    kind = f"{args.dev_folds}-fold cross-validated" if args.dev_folds > 1 else "dev"
    print(f"{kind} {summary['objective']}: best base {summary['dev_default']:.6f}, equal weights "
          f"{summary['dev_uniform']:.6f} -> fitted pool {summary['dev_tuned']:.6f} ({how}; "
          f"{summary['search_seconds']:.1f}s); written to {args.out}")
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return 0
