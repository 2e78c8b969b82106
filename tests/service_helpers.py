"""Helpers for service tests: run a Service in a thread, feed events, read outputs and dead letters."""
from __future__ import annotations

import json
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from sgm.consumers.config import ServiceConfig
from sgm.consumers.service import Service
from sgm.consumers.service.kernels import prepare_kernels
from sgm.model import LearnGuardError, build_model
from sgm.stream.records import Op, parse_dead_letter, parse_output, parse_train
from sgm.stream.kafka import Client, TopicPartition


@dataclass
class Running:
    service: Service
    stop: threading.Event
    thread: threading.Thread
    errors: list = field(default_factory=list)
    steps: int = 0  # loop steps the service finished (start_service counts them)

    def wait_for_step(self, timeout: float = 30.0) -> None:
        """Wait until the service's loop finishes the step it is in (or, between steps, the next one).

        The service's thread changes its counters and state all through a step: a scoring batch is counted
        only after its outputs and dead letters were acknowledged and its offsets committed, so a test that
        has just read them must wait here before it reads the counters.
        """
        seen = self.steps
        deadline = time.monotonic() + timeout
        while self.steps == seen and self.thread.is_alive():
            assert time.monotonic() < deadline, f"the service finished no step within {timeout} s"
            time.sleep(0.01)

    def halt(self, timeout: float = 60.0) -> None:
        self.stop.set()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "service did not stop"
        if self.errors:
            raise self.errors[0]


#: Model configurations whose kernels this test process has compiled or loaded (see compile_kernels_for).
_KERNELS_READY: set[str] = set()


def compile_kernels_for(config: ServiceConfig) -> None:
    """Compile (or load from numba's cache) the kernels of ``config``'s model, once per test process.

    Done before a service starts, so that the tests' timed waits ("17 documents scored within 30 s") time the
    service and not numba: on a fresh checkout (CI) the first scoring batch compiled for 30+ s, two xdist
    workers compiling at once on 2 cores. A configuration the service will refuse is left for the service
    to refuse (its error is what those tests check).
    """
    try:
        model_config = config.model_config()
        key = json.dumps(model_config, sort_keys=True, default=str)
        if key not in _KERNELS_READY:
            prepare_kernels(model_config, many_labels=False)
            _KERNELS_READY.add(key)
    except Exception:  # noqa: BLE001 - see the docstring: the service reports a bad configuration itself
        return


def run_until_idle(service: Service) -> None:
    """Step a started in-process service until three steps in a row find nothing to do."""
    idle = 0
    while idle < 3:
        idle = 0 if service.step() else idle + 1


def wait_for_documents(service: Service, count: int, timeout: float = 30.0) -> None:
    """Wait until a running service's model holds ``count`` documents, or ``timeout`` passes (the caller asserts)."""
    deadline = time.monotonic() + timeout
    while len(service.model) < count and time.monotonic() < deadline:
        time.sleep(0.05)


def start_service(config: ServiceConfig, client: Client) -> Running:
    """Start a Service in a thread; its start() creates the topics before anything is produced.

    The model's kernels are compiled first (:func:`compile_kernels_for`), outside the callers' timed waits.
    """
    compile_kernels_for(config)
    service = Service(config, client=client)
    stop = threading.Event()
    running = Running(service, stop, None)  # type: ignore[arg-type]
    step = service.step

    def counted_step() -> bool:
        try:
            return step()
        finally:
            running.steps += 1

    service.step = counted_step  # run() calls it through the instance: Running.wait_for_step counts on it

    def target() -> None:
        try:
            service.run(stop)
        except BaseException as exc:  # noqa: BLE001 - re-raised by halt()
            running.errors.append(exc)
            service.started.set()

    running.thread = threading.Thread(target=target, daemon=True)
    running.thread.start()
    assert service.started.wait(60), "service did not start"
    if running.errors:
        raise running.errors[0]
    return running


def feed(client: Client, config: ServiceConfig, events, chunk: int = 500) -> None:
    producer = client.producer()
    for start in range(0, len(events), chunk):
        for event in events[start : start + chunk]:
            topic = config.train_topic if event.kind == "train" else config.score_topic
            producer.send(topic, event.value, key=event.key)
        producer.flush()
    producer.close()


def read_topic(client: Client, topic: str, until, timeout: float = 60.0) -> list:
    """Records of ``topic`` from the start until ``until(records)`` holds or the timeout passes."""
    consumer = client.consumer(None)
    consumer.assign([TopicPartition(topic, p) for p in consumer.partitions_for(topic)])
    records: list = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not until(records):
        records.extend(consumer.poll(5000, 0.2))
    consumer.close()
    return records


def outputs_by_id(records) -> dict[str, list]:
    out: dict[str, list] = {}
    for record in records:
        parsed = parse_output(record.value)
        out.setdefault(parsed.id, []).append(parsed)
    return out


def dead_letters(records) -> list:
    return [parse_dead_letter(r.value) for r in records]


def reference_model(config: ServiceConfig, events):
    """A model trained in-process on the valid training records, in order, as the service applies them."""
    model = build_model(config.model_config())
    for event in events:
        if event.kind != "train" or not event.valid:
            continue
        parsed = parse_train(event.value)
        doc = parsed.text if parsed.text is not None else parsed.terms
        if parsed.op is Op.LEARN:
            model.learn_one(doc, parsed.labels, ts=parsed.ts, id=parsed.id)
        elif parsed.op is Op.FORGET:
            model.forget(parsed.id)
        else:
            try:
                model.unlearn_one(doc, parsed.labels, ts=parsed.ts, id=parsed.id)
            except LearnGuardError:
                pass
    return model


def expected_reasons(events) -> Counter:
    return Counter((e.kind, e.expected_reason.value) for e in events if e.expected_reason is not None)
