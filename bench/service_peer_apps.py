"""The scoring service written as a Quix Streams application and as a Faust agent (run by ``bench/service_layers.py``).

    python -m bench.service_peer_apps {quix,faust} --bootstrap-servers HOST:PORT --score-topic T
        --output-topic O --group G --state-dir DIR [--batch 2000]

Each app loads the newest snapshot in ``--state-dir`` (the model ``sgm serve`` restores from the same
directory), consumes the scoring topic from the earliest offset and writes one output record per valid
scoring record, keyed by its id, to the output topic: the same bytes the service writes, made by the
same public calls it makes (``parse_score``, ``documents_to_score``, ``model.rank_many``,
``encode_outputs``; :func:`score_batch`). What the apps leave out is what a peer app leaves out unless
someone writes it: an invalid record is counted and dropped (no dead-letter topic), and the model never
learns (no training topic, no snapshots).

* **quix** (``quixstreams``): ``Application`` -> ``StreamingDataFrame.apply`` -> ``to_topic``, the
  library's own idiom; ``apply`` gets one message at a time, so each is ranked alone
  (``rank_many([doc])``). Commits follow Quix's checkpoints (every 5 s by default: flush the producer,
  then commit the consumed offsets; at least once).
* **faust** (``faust-streaming``, aiokafka underneath): an agent over the scoring topic takes up to
  ``--batch`` events at a time (``stream.take_events(batch, within=0.05)``) and ranks them in one call,
  then sends the outputs with ``topic.send``; Faust acks each event as the agent moves past it and
  commits the acked offsets on its own schedule.

Both apps are given the settings the service's clients get where they matter: a 6 s session timeout
(Tansu completes a JoinGroup after about half of it: 22.5 s with librdkafka's 45 s default), acks from
all replicas, and for Faust's aiokafka producer the batching the project gives kafka-python (5 ms linger,
256 KB batches; aiokafka's defaults are no linger and 16 KB). Quix's librdkafka producer keeps its own
defaults (5 ms linger, batches up to 10,000 records / 1 MB, as the service's).
"""
from __future__ import annotations

import argparse
import logging
import sys
import time

from sgm.consumers.config import ServiceConfig
from sgm.consumers.service.checkpoint import ModelState
from sgm.consumers.service.scoring import documents_to_score
from sgm.consumers.userdata.snapshots import load_saved_model
from sgm.stream.records import InvalidRecord, encode_outputs, parse_score

SESSION_TIMEOUT_MS = 6000


class Scorer:
    """The model of a state directory and the service's output settings: scores a batch of scoring records."""

    def __init__(self, state_dir: str) -> None:
        saved = load_saved_model(state_dir)
        self.model = saved.model
        self.info = ModelState(saved.model, saved.train_offsets).info()  # the "model" object of every output
        config = ServiceConfig()
        self.top_k, self.threshold, self.tolerance = config.top_k, config.label_threshold, config.posterior_tolerance
        self.invalid = 0

    def score_batch(self, values: list[bytes], timestamps_ms: list[int | None]) -> list[tuple[bytes, bytes]]:
        """``(key, output value)`` of each valid record of ``values``, in order; invalid records are counted."""
        parsed, stamps = [], []
        for value, stamp in zip(values, timestamps_ms):
            try:
                parsed.append(parse_score(value))
                stamps.append(stamp)
            except InvalidRecord:
                self.invalid += 1
        if not parsed:
            return []
        docs, mail = documents_to_score(self.model, [(p.raw, p.document) for p in parsed])
        top_labels, top_p, labels = self.model.rank_many(docs, self.top_k, self.threshold, self.tolerance)
        now = time.time()
        latencies = [max(now - stamp / 1000.0, 0.0) * 1000.0 if stamp else 0.0 for stamp in stamps]
        ids = [p.id for p in parsed]
        values_out = encode_outputs(ids, top_labels, top_p, labels, model=self.info, scored_at=now,
                                    latency_ms=latencies, ts=[p.ts for p in parsed], mail=mail)
        return [(doc_id.encode("utf-8"), value) for doc_id, value in zip(ids, values_out)]


def run_quix(args: argparse.Namespace) -> int:
    from quixstreams import Application
    from quixstreams.models.serializers import Serializer

    class Second(Serializer):
        """The output value of a ``(key, value)`` pair (the key goes through ``to_topic(key=...)``)."""

        def __call__(self, value, ctx) -> bytes:
            return value[1]

    scorer = Scorer(args.state_dir)
    app = Application(broker_address=args.bootstrap_servers, consumer_group=args.group,
                      auto_offset_reset="earliest", loglevel="WARNING", auto_create_topics=False,
                      consumer_extra_config={"session.timeout.ms": SESSION_TIMEOUT_MS,
                                             "heartbeat.interval.ms": SESSION_TIMEOUT_MS // 6},
                      producer_extra_config={"acks": "all"})
    source = app.topic(args.score_topic, value_deserializer="bytes", key_deserializer="bytes")
    sink = app.topic(args.output_topic, value_serializer=Second(), key_serializer="bytes")

    def score(value: bytes, key, timestamp: int, headers):
        out = scorer.score_batch([value], [timestamp])
        return out[0] if out else None

    sdf = app.dataframe(source)
    sdf = sdf.apply(score, metadata=True).filter(lambda pair: pair is not None)
    sdf.to_topic(sink, key=lambda pair: pair[0])
    app.run()
    return 0


def run_faust(args: argparse.Namespace) -> int:
    import faust

    scorer = Scorer(args.state_dir)
    app = faust.App(args.group, broker=f"kafka://{args.bootstrap_servers}", store="memory://", web_enabled=False,
                    topic_partitions=4, consumer_auto_offset_reset="earliest", producer_acks=-1,
                    broker_session_timeout=SESSION_TIMEOUT_MS / 1000, broker_heartbeat_interval=1.0,
                    producer_linger=0.005, producer_max_batch_size=262_144,
                    topic_allow_declare=False, topic_disable_leader=True)
    source = app.topic(args.score_topic, key_type=bytes, value_type=bytes, key_serializer="raw",
                       value_serializer="raw")
    sink = app.topic(args.output_topic, key_type=bytes, value_type=bytes, key_serializer="raw",
                     value_serializer="raw")

    @app.agent(source)
    async def score(stream):
        async for events in stream.take_events(args.batch, within=0.05):
            outputs = scorer.score_batch([event.value for event in events],
                                         [int(event.message.timestamp * 1000) for event in events])
            for key, value in outputs:
                await sink.send(key=key, value=value)

    worker = faust.Worker(app, loglevel="WARNING", quiet=True)
    worker.execute_from_commandline()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("layer", choices=("quix", "faust"))
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--score-topic", required=True)
    parser.add_argument("--output-topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--batch", type=int, default=2000, help="faust: events ranked in one call")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    return run_quix(args) if args.layer == "quix" else run_faust(args)


if __name__ == "__main__":
    sys.exit(main())
