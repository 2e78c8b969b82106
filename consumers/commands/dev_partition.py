"""The development-partition options ``sgm tune`` and ``sgm ensemble`` share, and their defaults.

The options parse as None where absent, so that a command can refuse one its protocol does not read (an
operator's typo would otherwise be ignored without a word); :func:`with_defaults` then fills in the documented
values. Kept apart from the commands so that ``sgm ensemble`` reads the same defaults without importing
``sgm tune``'s model stack at start.
"""
from __future__ import annotations

import argparse
from typing import Any, Mapping

#: The development partition's defaults, where the options are absent: the same in both commands, so that
#: their dev scores compare like with like.
DEV_DEFAULTS = {"dev_fraction": 0.25, "dev_seed": 0}


def add_dev_partition_arguments(group) -> None:
    """``--dev-fraction`` and ``--dev-seed`` (None where absent; :data:`DEV_DEFAULTS` documents their values)."""
    group.add_argument("--dev-fraction", type=float, default=None,
                       help="dev-test share of the training data, or dev share of the stream (default 0.25)")
    group.add_argument("--dev-seed", type=int, default=None, help="seed of the dev partition (split; default 0)")


def with_defaults(args: argparse.Namespace, defaults: Mapping[str, Any]) -> argparse.Namespace:
    """``args`` with ``defaults`` for the options left absent (None).

    >>> with_defaults(argparse.Namespace(dev_fraction=None, dev_seed=3), DEV_DEFAULTS)
    Namespace(dev_fraction=0.25, dev_seed=3)
    """
    return argparse.Namespace(**{**vars(args), **{n: v for n, v in defaults.items() if getattr(args, n) is None}})
