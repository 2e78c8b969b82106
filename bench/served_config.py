"""A model configuration served: learn a dataset's train split through the service, score its test split.

    python -m bench.served_config --data r8 CONFIG.json [CONFIG.json ...] [--rounds 2]

Each configuration (as ``sgm tune`` or ``sgm ensemble`` write them) is served by an in-process
service over the memory transport (consumers/service; no broker, so the numbers are the service's
own work: parsing, the model, encoding): every training record is produced, the service steps
until idle (learn docs/s), then every test record is produced and scored (score docs/s). The
accuracy of the outputs' top label against the first true label shows that what is served is what
``sgm eval --config`` evaluated (the same learning order and kernel, so the same number). Rounds
alternate the configurations; the first round of a process includes loading the compiled kernels.

Measured on the 2-core VM at load 6.6-7.9 (2026-11-26), ``python -m bench.served_config --data r8
SINGLE.json ENSEMBLE.json``: r8, the dev-chosen ensemble of docs/RESULTS.md (five bases, two of them
TDM; ``sgm eval`` test accuracy 0.969849) against its best single model ``uc_pd_jm_dp_fw_ps``
(0.971677). Round 2: the served ensemble 0.969849, learn 584 docs/s, score 777 docs/s; the single
model 0.971677, learn 13,447 docs/s, score 16,070 docs/s (23x and 21x the ensemble). Served one
at a time the five bases took 5.3 + 2.4 + 1.2 + 4.9 + 1.7 s to learn and 0.5 + 0.7 + 1.3 + 0.9 +
0.3 s to score (first rounds): the ensemble costs about the sum of its bases.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
import uuid

from sgm.consumers.config import ServiceConfig
from sgm.consumers.evaluation.harness import load_examples, train_test
from sgm.consumers.service import Service
from sgm.stream.kafka import KafkaConfig, TopicPartition, open_client
from sgm.stream.records import parse_output


def serve(config_path: str, train: list, test: list) -> dict:
    """Learn ``train`` and score ``test`` through a fresh in-process service of ``config_path``."""
    name = f"served-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as state_dir:
        cfg = ServiceConfig(bootstrap_servers=f"memory://{name}", client="memory", train_topic=f"{name}-train",
                            score_topic=f"{name}-score", output_topic=f"{name}-out", dlq_topic=f"{name}-dlq",
                            group=f"{name}-g", state_dir=state_dir, metrics_address="", config=config_path,
                            poll_timeout=0.0, snapshot_every_records=10**9, snapshot_every_seconds=10**9)
        client = open_client("memory", KafkaConfig(bootstrap_servers=cfg.bootstrap_servers))
        service = Service(cfg, client=client)
        service.start()
        producer = client.producer()

        def until_idle() -> float:
            started, idle = time.perf_counter(), 0
            while idle < 3:
                idle = 0 if service.step() else idle + 1
            return time.perf_counter() - started

        try:
            for doc in train:
                producer.send(cfg.train_topic, json.dumps({"id": doc.id, "labels": list(doc.labels),
                                                           "text": doc.text}).encode())
            producer.flush()
            learn = until_idle()
            for doc in test:
                producer.send(cfg.score_topic, json.dumps({"id": doc.id, "text": doc.text}).encode(),
                              key=doc.id.encode())
            producer.flush()
            score = until_idle()
        finally:
            producer.close()
            service.close()
        reader = client.consumer(None)
        reader.assign([TopicPartition(cfg.output_topic, p) for p in reader.partitions_for(cfg.output_topic)])
        outputs = {out.id: out for out in (parse_output(r.value) for r in reader.poll(10**6, 1.0))}
        reader.close()
    correct = sum(bool(outputs[d.id].labels) and outputs[d.id].labels[0] == d.labels[0] for d in test if d.id in outputs)
    return {"config": config_path, "outputs": len(outputs), "accuracy": correct / len(test),
            "learn_docs_per_s": len(train) / learn, "score_docs_per_s": len(test) / score}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("configs", nargs="+", metavar="CONFIG", help="model configuration files")
    parser.add_argument("--data", default="r8", help="dataset with a train/test split (default r8)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds over the configurations (default 2)")
    args = parser.parse_args(argv)
    train, test = train_test(load_examples(args.data))
    for round_ in range(1, args.rounds + 1):
        for path in args.configs:
            r = serve(path, train, test)
            print(f"round {round_} {path}: {r['outputs']}/{len(test)} outputs, accuracy {r['accuracy']:.6f}, "
                  f"learn {r['learn_docs_per_s']:,.0f} docs/s, score {r['score_docs_per_s']:,.0f} docs/s", flush=True)


if __name__ == "__main__":
    main()
