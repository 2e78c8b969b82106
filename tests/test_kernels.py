"""Cold start: the service says when it waits for numba, and ``sgm warm`` fills the cache ahead.

The subprocess test starts from an empty numba cache (its own ``NUMBA_CACHE_DIR``):
``sgm warm`` compiles, then a service process on that cache compiles nothing at all,
neither while it starts nor while it learns, unlearns, forgets and scores text and
term-count records -- what a container built with ``RUN sgm warm`` does.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import logging

from sgm.consumers.service.kernels import COMPILING, CompileLog, _CompileWatch

SERVICE_RUN = textwrap.dedent("""
    import io, json, logging, sys, tempfile
    from numba.core import event
    from sgm.consumers.config import ServiceConfig
    from sgm.consumers.logs import setup_logging
    from sgm.consumers.service import Service
    from sgm.stream.kafka import KafkaConfig, open_client

    compiled = []
    class Watch(event.Listener):
        def on_start(self, e): compiled.append(e.data["dispatcher"].py_func.__qualname__)
        def on_end(self, e): pass
    event.register("numba:compile", Watch())
    setup_logging("json", "DEBUG")
    cfg = ServiceConfig(bootstrap_servers="memory://k", client="memory", train_topic="t", score_topic="s",
                        output_topic="o", dlq_topic="d", state_dir=tempfile.mkdtemp(), metrics_address="",
                        model=sys.argv[1])
    client = open_client("memory", KafkaConfig(bootstrap_servers=cfg.bootstrap_servers))
    service = Service(cfg, client=client)
    service.start()
    at_start = len(compiled)
    p = client.producer()
    for value in [b'{"id": "a", "labels": ["spam"], "text": "cheap pills now"}',
                  b'{"id": "b", "labels": ["ham"], "terms": {"meeting": 2, "notes": 1}}',
                  b'{"id": "c", "labels": ["ham"], "text": "agenda for monday"}',
                  b'{"id": "a", "op": "unlearn", "labels": ["spam"], "text": "cheap pills now"}',
                  b'{"id": "b", "op": "forget"}']:
        p.send("t", value)
    for value in [b'{"id": "q1", "text": "pills for monday"}', b'{"id": "q2", "terms": {"agenda": 1}}']:
        p.send("s", value)
    p.flush()
    while service.step():
        pass
    service.close()
    print(json.dumps({"at_start": at_start, "after_start": compiled[at_start:], "documents": len(service.model)}))
""")


def test_compile_watch_announces_the_first_compilation_once():
    calls = []
    watch = _CompileWatch(lambda: calls.append(1))
    for _ in range(3):
        watch.on_start(None)
        watch.on_end(None)
    assert calls == [1] and watch.compiled == 3


def test_compile_log_says_what_the_service_waits_for(caplog):
    compile_log = CompileLog()
    try:
        with caplog.at_level(logging.INFO, logger="sgm.service"):
            compile_log.report()  # nothing compiled: nothing said
            assert caplog.messages == []
            for _ in range(2):  # what numba's compile events do on two cache misses in one batch
                compile_log.watch.on_start(None)
                compile_log.watch.on_end(None)
            compile_log.report()
            compile_log.report()
        assert caplog.messages == [COMPILING, "kernels compiled"]
        assert caplog.records[1].functions == 2
    finally:
        compile_log.close()


PREPARED_RUN = textwrap.dedent("""
    import json, sys
    import numba
    from sgm.consumers.service.kernels import prepare_kernels
    from sgm.model import build_model

    def signatures():  # every numba kernel of the package that this process holds a compiled form of
        held = {}
        for name, module in list(sys.modules.items()):
            if name.startswith("sgm.") and module is not None:
                for attr, value in vars(module).items():
                    if isinstance(value, numba.core.registry.CPUDispatcher) and value.signatures:
                        held[value.py_func.__module__ + "." + value.py_func.__qualname__] = len(value.signatures)
        return held

    before = signatures()
    prepare_kernels({"model": sys.argv[1]}, scores=True)
    prepared = signatures()
    model = build_model({"model": sys.argv[1]})
    model.learn_one("the cat sat on the mat", ["pets"], ts=1.0, id="a")
    model.learn_one("stocks fell sharply on monday", ["markets"], ts=2.0, id="b")
    model.predict_proba_one("the cat fell")
    model.rank_many(["stocks sat", {"cat": 2}], 2)
    after = signatures()
    print(json.dumps({"before": before, "prepared": prepared, "after": after}))
""")


@pytest.mark.parametrize("spec", ["u_jm", "tdm_uc_jm_dp_kpd_kdp"])
def test_prepare_kernels_readies_every_kernel_a_learn_and_score_uses(spec):
    """In a fresh process (kernels loaded from the cache or compiled; either way a signature per kernel):
    ``prepare_kernels`` leaves the process holding kernels it did not hold before, and learning and scoring
    a new model afterwards needs no kernel or signature it did not prepare."""
    run = subprocess.run([sys.executable, "-c", PREPARED_RUN, spec], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    held = json.loads(run.stdout.strip().splitlines()[-1])
    assert held["before"] == {}, held["before"]  # nothing was ready before: the counts below are prepare's
    assert len(held["prepared"]) >= 5, held["prepared"]
    assert held["after"] == held["prepared"]


@pytest.mark.slow
def test_warm_cache_service_compiles_nothing(tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    warm = subprocess.run([sys.executable, "-m", "sgm.consumers.cli", "warm", "--model", "u_jm"], env=env,
                          capture_output=True, text=True, timeout=600)
    assert warm.returncode == 0, warm.stderr
    assert "compiled" in warm.stdout and "nothing to compile" not in warm.stdout, warm.stdout  # an empty cache
    served = subprocess.run([sys.executable, "-c", SERVICE_RUN, "u_jm"], env=env, capture_output=True, text=True,
                            timeout=600)
    assert served.returncode == 0, served.stderr
    result = json.loads(served.stdout.strip().splitlines()[-1])
    assert result == {"at_start": 0, "after_start": [], "documents": 1}, result
    assert COMPILING not in served.stderr and "kernels compiled" not in served.stderr


def test_warm_takes_an_explicit_model_over_the_preset_even_when_it_is_the_default():
    """``sgm warm --preset spam --model uc_pd_jm_dp`` warms what ``sgm serve`` with the same flags serves."""
    import argparse

    from sgm.consumers.commands.warm import add_arguments, configurations
    from sgm.consumers.config import ServiceConfig

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    default_model = ServiceConfig().model
    (name, cfg), = configurations(parser.parse_args(["--preset", "spam", "--model", default_model]))
    assert cfg["model"] == default_model != ServiceConfig(preset="spam").model_config()["model"]
