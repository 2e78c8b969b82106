"""Memory bound: resident memory of ``sgm serve`` on an endless stream with growing vocabulary and labels.

The process under test is a real ``sgm serve --role all`` (trainer and
classifier around one model) on an embedded broker, started with the memory
bound on: ``--max-documents D`` together with ``--half-life`` and
``--prune-below``. A feeder produces an endless generated stream, in order,
each document scored first and learned right after:

* the synthetic news + spam stream with fast drift (``drift_per_1k``): words
  keep entering and leaving every label's vocabulary;
* plus ``--unique-terms`` never-seen tokens per document (ids, URLs,
  hashes in real text): the vocabulary grows without end;
* labels carry an epoch suffix (``sport-e17``) that changes every
  ``--label-epoch`` documents: the label set grows without end too.

Event time advances at ``--docs-per-second`` (the generator's rate), so
``--docs`` documents span ``docs / docs_per_second`` seconds of stream time,
at least 10 minutes by default by a wide margin. The feeder stays at most
``--backlog`` records ahead of the trainer.

The process's RSS (``/proc/PID/status``) is sampled every ``--sample`` seconds
together with its metrics (live documents, labels, terms, postings, the
model's own byte estimate ``sgm_model_bytes``).

**The bound.** The configured bound is a document budget, ``max_documents``
(D). In bytes it is what the process needs to hold D documents of this stream
plus its fixed costs (interpreter, libraries, client buffers, the cache of
recent predictions, snapshot serialization), which no formula gives exactly.
The benchmark measures it: the budget fills up (the first sample with
``sgm_model_documents >= D``), then for ``--warmup-hours`` of stream time
every bounded structure reaches its working size and several snapshots are
written (their serialization is the largest transient); the kernel's
high-water mark of resident memory (VmHWM) at the end of that window, plus
``--headroom`` (default 10%), is the bound. The rest of the run -- hours of
stream time with new terms and labels arriving all the time, at least 10
minutes and by default about 4 hours -- must stay under it: every RSS sample
and the high-water mark at the end, which catches spikes between samples. The
per-document cost ``(bound - RSS_empty) / D`` is reported for sizing
(docs/SCALING.md). With ``--control`` a second run without
``--max-documents``/``--prune-below`` (same stream, same half-life) shows
what the bound prevents.

Usage::

    .venv/bin/python bench/memory_bound.py                          # D = 20,000; 200,000 documents; ~5.5 h stream time
    .venv/bin/python bench/memory_bound.py --docs 60000 --max-documents 5000 --warmup-hours 0.3 --control --json out.json --plot rss.png
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sgm.consumers.chaos import die_with_parent  # noqa: E402  (the service dies with the benchmark)
from sgm.consumers.logs import metrics_port_in_log  # noqa: E402
from sgm.stream.broker import EmbeddedBroker  # noqa: E402
from sgm.stream.synthetic import SyntheticConfig, SyntheticStream  # noqa: E402
from sgm.stream.kafka import KafkaConfig, open_client  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GAUGES = ("sgm_training_offset", "sgm_model_documents", "sgm_model_labels", "sgm_model_terms", "sgm_model_postings",
          "sgm_model_bytes", "sgm_model_pruned_documents", "sgm_model_expired_documents")


def rss_bytes(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process in bytes."""
    text = Path(f"/proc/{pid}/status").read_text()
    rss = int(re.search(r"^VmRSS:\s+(\d+) kB", text, re.M).group(1)) * 1024
    hwm = int(re.search(r"^VmHWM:\s+(\d+) kB", text, re.M).group(1)) * 1024
    return rss, hwm


def scrape(port: int | None) -> dict[str, float]:
    if port is None:
        return {}
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2.0) as response:
            text = response.read().decode()
    except OSError:
        return {}
    out = {}
    for name in GAUGES:
        found = re.search(rf"^{name}(?:\{{[^}}]*\}})? ([0-9.e+-]+)$", text, re.M)
        if found:
            out[name] = float(found.group(1))
    return out


def metrics_port(log_path: Path) -> int | None:
    return metrics_port_in_log(log_path.read_bytes().splitlines()) if log_path.exists() else None


def endless_stream(args):
    """(kind, key, value, ts) records: score then train per document, forever (or ``--docs``)."""
    stream = SyntheticStream(SyntheticConfig(seed=args.seed, n_docs=None, profiles=("news", "spam"),
                                             docs_per_second=args.docs_per_second, drift_per_1k=args.drift_per_1k,
                                             new_label_every=2000, max_new_labels=20, malformed_rate=0.0))
    for doc in stream.documents():
        epoch = doc.index // args.label_epoch
        labels = [f"{label}-e{epoch}" for label in doc.labels]
        fresh = " ".join(f"u{doc.index:x}x{j}" for j in range(args.unique_terms))
        text = f"{doc.text} {fresh}".strip()
        score = json.dumps({"id": doc.id, "text": text, "ts": doc.ts}).encode()
        train = json.dumps({"id": doc.id, "labels": labels, "text": text, "ts": doc.ts}).encode()
        yield doc.index, doc.ts, score, train


def run(args, bounded: bool, work: Path, say) -> dict:
    name = "bounded" if bounded else "control"
    broker = EmbeddedBroker(log_path=work / f"tansu-{name}.log")
    broker.start()
    process = None
    try:
        client = open_client("confluent", KafkaConfig(bootstrap_servers=broker.bootstrap_servers, client_id="membound"))
        topics = {"train": f"mb-{name}-train", "score": f"mb-{name}-score", "output": f"mb-{name}-out",
                  "dlq": f"mb-{name}-dlq"}
        with client.admin() as admin:
            admin.create_topics([(topics["train"], 1, 1), (topics["score"], 2, 1), (topics["output"], 2, 1),
                                 (topics["dlq"], 1, 1)])
        log_path = work / f"serve-{name}.log"
        cmd = [sys.executable, "-m", "sgm.consumers.cli", "serve", "--role", "all",
               "--bootstrap-servers", broker.bootstrap_servers, "--train-topic", topics["train"],
               "--score-topic", topics["score"], "--output-topic", topics["output"], "--dlq-topic", topics["dlq"],
               "--group", f"mb-{name}", "--state-dir", str(work / f"state-{name}"), "--create-topics", "false",
               "--half-life", str(args.half_life), "--snapshot-every-seconds", str(args.snapshot_every_seconds),
               "--snapshot-every-records", "100000000", "--metrics-address", "127.0.0.1:0", "--log-level", "INFO"]
        if bounded:
            cmd += ["--max-documents", str(args.max_documents), "--prune-below", str(args.prune_below)]
        process = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=open(log_path, "wb"),
                                   preexec_fn=die_with_parent)
        deadline = time.monotonic() + 60
        while metrics_port(log_path) is None and time.monotonic() < deadline:
            time.sleep(0.2)
        port = metrics_port(log_path)
        if port is None:
            raise RuntimeError(f"sgm serve did not start; see {log_path}")
        time.sleep(1.0)
        empty_rss, _ = rss_bytes(process.pid)
        samples: list[dict] = []
        ts_of_offset: list[float] = []
        lock = threading.Lock()
        stop = threading.Event()
        started = time.monotonic()

        def sampler() -> None:
            while not stop.wait(args.sample):
                try:
                    rss, hwm = rss_bytes(process.pid)
                except (OSError, AttributeError):
                    return
                gauges = scrape(port)
                offset = int(gauges.get("sgm_training_offset", 0))
                with lock:
                    event_ts = ts_of_offset[offset - 1] if 0 < offset <= len(ts_of_offset) else None
                samples.append({"t": round(time.monotonic() - started, 2), "rss": rss, "hwm": hwm,
                                "event_ts": event_ts, **gauges})

        thread = threading.Thread(target=sampler, daemon=True)
        thread.start()
        producer = client.producer()
        fed = 0
        last_say = 0.0
        for index, ts, score, train in endless_stream(args):
            if index >= args.docs:
                break
            producer.send(topics["score"], score, key=str(index).encode())
            producer.send(topics["train"], train, key=str(index).encode())
            with lock:
                ts_of_offset.append(ts)
            fed += 1
            if fed % 1000 == 0:
                producer.flush()
                while samples and fed - samples[-1].get("sgm_training_offset", 0) > args.backlog and process.poll() is None:
                    time.sleep(0.05)
                if time.monotonic() - last_say > 15 and samples:
                    last_say = time.monotonic()
                    s = samples[-1]
                    say(f"  [{name}] fed {fed:,} docs; applied {int(s.get('sgm_training_offset', 0)):,}; model "
                        f"{int(s.get('sgm_model_documents', 0)):,} docs, {int(s.get('sgm_model_labels', 0))} labels, "
                        f"{int(s.get('sgm_model_terms', 0)):,} terms; RSS {s['rss'] / 2**20:.0f} MB")
        producer.flush()
        first_ts = ts_of_offset[0]
        while process.poll() is None and (not samples or samples[-1].get("sgm_training_offset", 0) < fed):
            time.sleep(0.2)
        time.sleep(args.sample * 2)
        stop.set()
        thread.join()
        if process.poll() is not None:
            raise RuntimeError(f"sgm serve exited with {process.returncode}; see {log_path}")
        _, final_hwm = rss_bytes(process.pid)
        for s in samples:
            s["stream_hours"] = None if s["event_ts"] is None else round((s["event_ts"] - first_ts) / 3600.0, 3)
        result = {"run": name, "docs": fed, "stream_hours": round((ts_of_offset[-1] - first_ts) / 3600.0, 2),
                  "seconds": round(time.monotonic() - started, 1), "empty_rss_mb": round(empty_rss / 2**20, 1),
                  "final_rss_mb": round(samples[-1]["rss"] / 2**20, 1), "peak_rss_mb": round(final_hwm / 2**20, 1),
                  "final": {k: samples[-1].get(k) for k in GAUGES}, "samples": samples}
        if bounded:
            fill = next((i for i, s in enumerate(samples) if s.get("sgm_model_documents", 0) >= args.max_documents), None)
            if fill is None:
                raise RuntimeError("the document budget never filled: feed more documents")
            fill_hours = samples[fill]["stream_hours"] or 0.0
            test = next((i for i, s in enumerate(samples)
                         if (s["stream_hours"] or 0.0) >= fill_hours + args.warmup_hours), None)
            if test is None or test == len(samples) - 1:
                raise RuntimeError("no stream time left after the warm-up window: feed more documents")
            reference = samples[test - 1]["hwm"]  # the peak so far, spikes between samples included
            bound = reference * (1 + args.headroom)
            after = samples[test:]
            worst = max(after, key=lambda s: s["rss"])
            result.update(
                fill_stream_hours=fill_hours, rss_at_fill_mb=round(samples[fill]["rss"] / 2**20, 1),
                warmup_until_stream_hours=samples[test]["stream_hours"],
                warmup_peak_rss_mb=round(reference / 2**20, 1), bound_mb=round(bound / 2**20, 1),
                max_rss_after_warmup_mb=round(worst["rss"] / 2**20, 1),
                stream_hours_checked=round((samples[-1]["stream_hours"] or 0) - (samples[test]["stream_hours"] or 0), 2),
                bytes_per_document=round((bound - empty_rss) / args.max_documents),
                model_bytes_per_document=round(samples[test].get("sgm_model_bytes", 0) / args.max_documents),
                max_labels=max(s.get("sgm_model_labels", 0) for s in samples),
                held=all(s["rss"] <= bound for s in after) and final_hwm <= bound,
            )
        return result
    finally:
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
        broker.stop()


def curve(result: dict, points: int = 12) -> list[str]:
    samples = result["samples"]
    step = max(1, len(samples) // points)
    rows = ["| wall s | stream h | docs applied | live docs | labels | terms | postings | model bytes (est.) | RSS MB |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for s in samples[::step] + ([samples[-1]] if (len(samples) - 1) % step else []):
        rows.append(f"| {s['t']:.0f} | {s['stream_hours'] or 0:.2f} | {int(s.get('sgm_training_offset', 0)):,} | "
                    f"{int(s.get('sgm_model_documents', 0)):,} | {int(s.get('sgm_model_labels', 0))} | "
                    f"{int(s.get('sgm_model_terms', 0)):,} | {int(s.get('sgm_model_postings', 0)):,} | "
                    f"{s.get('sgm_model_bytes', 0) / 2**20:.0f} MB | {s['rss'] / 2**20:.0f} |")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=200_000, help="documents fed (default 200000)")
    parser.add_argument("--max-documents", type=int, default=20_000, help="the memory bound, in documents (default 20000)")
    parser.add_argument("--half-life", type=float, default=600.0, help="decay half-life, seconds of event time (default 600)")
    parser.add_argument("--prune-below", type=float, default=0.01, help="drop documents lighter than this (default 0.01)")
    parser.add_argument("--docs-per-second", type=float, default=10.0, help="event-time rate of the generator (default 10)")
    parser.add_argument("--drift-per-1k", type=float, default=40.0, help="vocabulary drift per 1000 documents (default 40)")
    parser.add_argument("--unique-terms", type=int, default=2, help="never-seen tokens per document (default 2)")
    parser.add_argument("--label-epoch", type=int, default=5_000, help="documents per label generation (default 5000)")
    parser.add_argument("--backlog", type=int, default=20_000, help="most documents fed ahead of the trainer")
    parser.add_argument("--warmup-hours", type=float, default=1.0,
                        help="stream time after the budget fills whose largest RSS sets the bound (default 1)")
    parser.add_argument("--headroom", type=float, default=0.10, help="slack on top of the warm-up's largest RSS (default 0.10)")
    parser.add_argument("--sample", type=float, default=1.0, help="seconds between RSS samples")
    parser.add_argument("--snapshot-every-seconds", type=float, default=10.0,
                        help="snapshot interval of the service, wall seconds (default 10: several per warm-up window)")
    parser.add_argument("--control", action="store_true", help="also run without the bound, for contrast")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--json", dest="json_path", default=None)
    parser.add_argument("--plot", default=None, help="write the RSS curve to this PNG (needs matplotlib)")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="sgm-memory-bound-"))
    say = lambda *a: print(*a, flush=True)  # noqa: E731
    hours = args.docs / args.docs_per_second / 3600
    say(f"memory bound: {args.docs:,} documents = {hours:.1f} h of stream time at {args.docs_per_second:g} docs/s; "
        f"--max-documents {args.max_documents} --half-life {args.half_life:g} --prune-below {args.prune_below:g}; "
        f"work dir {work}")
    results = [run(args, True, work, say)]
    if args.control:
        results.append(run(args, False, work, say))
    bounded = results[0]
    say("\nRSS curve, bounded run:")
    for row in curve(bounded):
        say(row)
    say(f"\nthe budget of {args.max_documents:,} documents filled after {bounded['fill_stream_hours']} h of stream time "
        f"(RSS {bounded['rss_at_fill_mb']} MB); peak RSS (VmHWM) by the end of the next {args.warmup_hours:g} h: "
        f"{bounded['warmup_peak_rss_mb']} MB; bound = that + {args.headroom:.0%} = {bounded['bound_mb']} MB")
    say(f"checked over the remaining {bounded['stream_hours_checked']} h of stream time: max RSS "
        f"{bounded['max_rss_after_warmup_mb']} MB, peak of the whole run (VmHWM) {bounded['peak_rss_mb']} MB, final "
        f"{bounded['final_rss_mb']} MB -> "
        f"{'HELD' if bounded['held'] else 'EXCEEDED'}; labels seen at once: up to {bounded['max_labels']:.0f}; "
        f"empty process {bounded['empty_rss_mb']} MB; (bound - empty) / D = {bounded['bytes_per_document']:,} bytes "
        f"per live document, of which the model's own estimate is {bounded['model_bytes_per_document']:,}")
    if args.control:
        control = results[1]
        say(f"control (no bound): final RSS {control['final_rss_mb']} MB, peak {control['peak_rss_mb']} MB, "
            f"{int(control['final'].get('sgm_model_documents') or 0):,} live documents, "
            f"{int(control['final'].get('sgm_model_terms') or 0):,} terms")
    if args.json_path:
        Path(args.json_path).write_text(json.dumps({"args": vars(args), "results": results}, indent=1) + "\n")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(8, 4.5))
        for result in results:
            xs = [s["stream_hours"] or 0 for s in result["samples"]]
            ax.plot(xs, [s["rss"] / 2**20 for s in result["samples"]], label=f"RSS, {result['run']}")
        ax.axhline(bounded["bound_mb"], color="red", linestyle="--", label=f"bound {bounded['bound_mb']} MB")
        ax.set_xlabel("stream time (hours of event time)")
        ax.set_ylabel("resident memory (MB)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.plot, dpi=100)
    return 0 if bounded["held"] else 1


if __name__ == "__main__":
    sys.exit(main())
