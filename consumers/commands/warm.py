"""``sgm warm``: compile the model's kernels into numba's cache now, so that later processes start warm.

Run where an image or an installation is built (deploy/Dockerfile does), with
the same ``NUMBA_CACHE_DIR`` (and ``NUMBA_CPU_NAME``, if set) as the processes
that will serve. Without flags it warms every kernel family: the service's
default configuration, ``--preset spam`` (whole emails), absolute discounting,
TF-IDF weighting with fw, tw and prior scaling, and TDM; with ``--model``/``--preset``/
``--config`` only that configuration. A cached kernel is loaded, not compiled
again, so running it twice is cheap.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

#: Configurations whose kernels together are every kernel a service can use (each family's own paths).
FAMILIES: tuple[dict[str, Any], ...] = (
    {"model": "u_ad"},
    {"model": "uc_pd_jm_dp_tXiX_fw_tw_ps", "half_life": 3600.0},  # fw: its compiled loop; tw: a step per learn
    {"model": "tdm_uc_pd_jm_dp_kjm_kdp_kpd"},
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", help="model spec (default: the service's default and every kernel family)")
    parser.add_argument("--preset", help="a preset's configuration (e.g. spam)")
    parser.add_argument("--config", help="JSON model configuration file (as written by sgm tune)")
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help="model parameter")
    parser.add_argument("--role", default="all", choices=("all", "trainer", "classifier"),
                        help="a trainer compiles no scoring kernels (default all)")


def configurations(args: argparse.Namespace) -> list[tuple[str, dict[str, Any]]]:
    """(name, model configuration) pairs to warm."""
    from ..config import ServiceConfig, parse_param

    if args.model or args.preset or args.config:
        given = {"preset": args.preset, "config": args.config, "param": dict(parse_param(p) for p in args.param)}
        if args.model:
            given["model"] = args.model
        service = ServiceConfig(**given)
        service.explicit = frozenset(given) - {"param"}  # a --model equal to the default still beats the preset
        cfg = service.model_config()
        return [(cfg["model"], cfg)]
    return default_configurations()


def default_configurations() -> list[tuple[str, dict[str, Any]]]:
    """What ``sgm warm`` without flags warms: the service's default, the spam preset and every kernel family.

    The test session warms the same list before its workers start (tests/conftest.py).
    """
    from ..config import ServiceConfig

    out = [("default " + ServiceConfig().model_config()["model"], ServiceConfig().model_config()),
           ("preset spam", ServiceConfig(preset="spam").model_config())]
    return out + [(cfg["model"], dict(cfg)) for cfg in FAMILIES]


def run(args: argparse.Namespace) -> int:
    from ..service.kernels import cache_location, prepare_kernels

    from sgm.model import build_model

    try:  # an operator's typo (a spec, a --param, a --config file) is one line before anything compiles
        chosen = configurations(args)
        for _, cfg in chosen:
            build_model(dict(cfg))
    except (ValueError, OSError) as exc:  # SpecError and JSONDecodeError are ValueErrors
        print(f"sgm warm: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    print(f"sgm warm: numba cache in {cache_location()}", flush=True)
    total = 0.0
    for name, cfg in chosen:
        ready = prepare_kernels(cfg, scores=args.role != "trainer")
        total += ready.seconds
        what = f"compiled {ready.compiled} functions" if ready.compiled else "nothing to compile"
        print(f"  {name:<32} {what} in {ready.seconds:.1f} s", flush=True)
    print(f"sgm warm: done in {total:.1f} s", flush=True)
    return 0


if __name__ == "__main__":  # pragma: no cover
    parser = argparse.ArgumentParser(prog="sgm warm")
    add_arguments(parser)
    sys.exit(run(parser.parse_args()))
