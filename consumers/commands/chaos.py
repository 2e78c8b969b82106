"""``sgm chaos``: the fault campaign (see consumers/chaos/ and docs/RELIABILITY.md).

Runs trainer and classifier processes (``sgm serve``) against a private
embedded broker, feeds them a generated stream of at least ``--records``
training and ``--records`` scoring records, SIGKILLs a random process at
``--kills`` random moments (restarting it on its state directory), freezes
the broker with SIGSTOP for ``--freeze-seconds``, then audits: the model of
every process against the uninterrupted reference (snapshot checksum), every
scoring id answered, duplicates within what was in flight, every bad input in
the dead-letter topic, no process exiting on its own.

Field faults (issue #15), on by default: the broker is down for
``--down-at-start`` seconds while the processes start; a prelude is learned and
then the cluster is wiped and the topics recreated (``--no-recreate``); learns
from a clock-skewed producer every ``--skewed-every`` records; one record too
large to fetch (``--no-poison``). Their outcomes are under ``field_faults``.

Progress goes to stderr. The LAST line on stdout is one JSON object with
``faults``, ``lost``, ``double_counted``, ``unanswered``, ``bad_inputs``,
``crashes`` and the details; the exit status is 0 when every check passed.

Examples::

    sgm chaos                                  # the full campaign: 50,000 + 50,000 records, 20 kills, 20 s freeze
    sgm chaos --records 3000 --kills 4 --freeze-seconds 6 --rate 600   # the reduced form of the test suite
"""
from __future__ import annotations

import argparse
import json
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from sgm.stream.kafka import broker_client_kinds

    from ..chaos import CampaignConfig

    d = CampaignConfig()
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.description = __doc__
    parser.add_argument("--records", type=int, default=d.records,
                        help=f"at least this many training and this many scoring records (default {d.records})")
    parser.add_argument("--kills", type=int, default=d.kills, help=f"SIGKILLs of random processes (default {d.kills})")
    parser.add_argument("--freezes", type=int, default=d.freezes, help=f"broker SIGSTOP/SIGCONT cycles (default {d.freezes})")
    parser.add_argument("--freeze-seconds", type=float, default=d.freeze_seconds,
                        help=f"seconds the broker stays frozen (default {d.freeze_seconds:g})")
    parser.add_argument("--trainers", type=int, default=d.trainers, help=f"trainer processes (default {d.trainers})")
    parser.add_argument("--classifiers", type=int, default=d.classifiers,
                        help=f"classifier processes in one group (default {d.classifiers})")
    parser.add_argument("--score-partitions", type=int, default=d.score_partitions,
                        help=f"partitions of the scoring and output topics (default {d.score_partitions})")
    parser.add_argument("--rate", type=float, default=d.rate,
                        help=f"records per second fed, training and scoring together (default {d.rate:g})")
    parser.add_argument("--seed", type=int, default=d.seed, help="seed of the stream and of the fault schedule")
    parser.add_argument("--malformed-rate", type=float, default=d.malformed_rate,
                        help=f"share of malformed records after each valid one (default {d.malformed_rate:g})")
    parser.add_argument("--max-poll-records", type=int, default=d.max_poll_records,
                        help=f"batch size of the served processes (default {d.max_poll_records})")
    parser.add_argument("--client", default=d.client, choices=broker_client_kinds(),
                        help=f"Kafka client of the processes and the campaign (default {d.client})")
    parser.add_argument("--timeout", type=float, default=d.timeout,
                        help=f"seconds allowed after the feed for everything to catch up (default {d.timeout:g})")
    parser.add_argument("--work-dir", default=None, help="state directories and process logs (default: a new temporary directory)")
    parser.add_argument("--down-at-start", type=float, default=d.down_at_start,
                        help=f"seconds the broker is down while the processes start (default {d.down_at_start:g}; 0: none)")
    parser.add_argument("--no-recreate", dest="recreate_topic", action="store_false",
                        help="skip the prelude and the wiped cluster (recreated training topic)")
    parser.add_argument("--skewed-every", type=int, default=d.skewed_every,
                        help=f"a learn stamped ten years ahead every this many records (default {d.skewed_every}; 0: none)")
    parser.add_argument("--no-poison", dest="poison", action="store_false",
                        help="no training record too large to fetch")
    parser.add_argument("--poison-timeout", type=float, default=d.poison_timeout,
                        help=f"the processes' --poison-timeout (default {d.poison_timeout:g})")
    parser.add_argument("--json", dest="json_path", default=None, help="also write the result to this file")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")


def run(args: argparse.Namespace) -> int:
    from ..chaos import CampaignConfig, run_campaign

    config = CampaignConfig(records=args.records, kills=args.kills, freezes=args.freezes,
                            freeze_seconds=args.freeze_seconds, trainers=args.trainers, classifiers=args.classifiers,
                            score_partitions=args.score_partitions, rate=args.rate, seed=args.seed,
                            malformed_rate=args.malformed_rate, max_poll_records=args.max_poll_records,
                            client=args.client, timeout=args.timeout, work_dir=args.work_dir,
                            down_at_start=args.down_at_start, recreate_topic=args.recreate_topic,
                            skewed_every=args.skewed_every, poison=args.poison, poison_timeout=args.poison_timeout)
    say = (lambda *a: None) if args.quiet else (lambda *a: print(*a, file=sys.stderr, flush=True))
    result = run_campaign(config, say=say)
    line = json.dumps(result, default=str, sort_keys=False)
    if args.json_path:
        with open(args.json_path, "w") as handle:
            handle.write(json.dumps(result, default=str, indent=2) + "\n")
    say(f"chaos: faults {result['faults']}, lost {result['lost']}, double counted {result['double_counted']}, "
        f"unanswered {result['unanswered']}, bad inputs {result['bad_inputs']} (dead letters missing "
        f"{result['dead_letters_missing']}), crashes {result['crashes']}, silent deaths {result['silent_deaths']}, duplicates {result['duplicates']} "
        f"<= {result['duplicate_bound']}, field faults {'handled' if result['field_faults']['ok'] else 'NOT handled'}: "
        f"{'OK' if result['ok'] else 'FAILED'}")
    print(line, flush=True)
    return 0 if result["ok"] else 1
