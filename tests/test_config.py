"""ServiceConfig: flags beat SGM_* environment variables, which beat defaults; docs/CONFIG.md is current."""
from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import pytest

from sgm.consumers import config as service_config
from sgm.model import build_model

ROOT = Path(__file__).resolve().parents[1]


def parse(argv, environ=None, **overrides):
    parser = argparse.ArgumentParser()
    service_config.add_arguments(parser)
    return service_config.from_args(parser.parse_args(argv), environ or {}, **overrides)


def test_defaults_env_and_flags_in_that_order():
    assert parse([]).train_topic == "sgm-train"
    assert parse([], {"SGM_TRAIN_TOPIC": "from-env"}).train_topic == "from-env"
    assert parse(["--train-topic", "from-flag"], {"SGM_TRAIN_TOPIC": "from-env"}).train_topic == "from-flag"
    cfg = parse(["--snapshot-every-seconds", "2.5", "--create-topics", "false", "--half-life", "none"],
                {"SGM_MAX_POLL_RECORDS": "77", "SGM_HALF_LIFE": "60"})
    assert cfg.snapshot_every_seconds == 2.5 and cfg.create_topics is False and cfg.max_poll_records == 77
    assert cfg.half_life is None  # the flag wins over the environment, even to say "none"


def test_model_params_from_flags_env_and_config_file(tmp_path):
    cfg = parse(["--param", "beta=0.3", "--param", "mu=20"], {"SGM_PARAM": "beta=0.9,delta=0.4"})
    assert cfg.param == {"beta": 0.3, "delta": 0.4, "mu": 20.0}
    path = tmp_path / "tuned.json"
    path.write_text(json.dumps({"model": "u_jm_ps", "params": {"beta": 0.2, "theta": 0.5}, "half_life": 100.0}))
    built = parse(["--config", str(path), "--param", "theta=0.7"]).model_config()
    assert built["model"] == "u_jm_ps" and built["params"] == {"beta": 0.2, "theta": 0.7}
    assert built["half_life"] == 100.0
    # a tuned powerset configuration keeps its output rule (sgm tune --choose-label-threshold) in the service
    path.write_text(json.dumps({"model": "u_jm_ps", "multilabel": "powerset", "label_threshold": 0.35}))
    served = build_model(parse(["--config", str(path)]).model_config())
    assert served.multilabel == "powerset" and served.label_threshold == 0.35


def test_every_model_key_of_a_config_file_reaches_the_model(tmp_path):
    # sgm tune writes TDM kernel options too; the service used to keep only the keys it listed, so a tuned
    # TDM was served with the default kernel and a misspelt key vanished without a word
    path = tmp_path / "tdm.json"
    path.write_text(json.dumps({"model": "tdm_uc_jm_dp_kpd_kdp", "kernel_sum": "binned", "kernel_bin_width": 0.5,
                                "node_pruning": False}))
    served = build_model(parse(["--config", str(path)]).model_config())
    assert served.config()["kernel_sum"] == "binned" and served.config()["kernel_bin_width"] == 0.5
    assert served.node_pruning is False
    path.write_text(json.dumps({"model": "u_jm", "half_lfe": 60}))
    with pytest.raises(ValueError, match="half_lfe"):
        build_model(parse(["--config", str(path)]).model_config())
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="JSON object"):
        parse(["--config", str(path)]).model_config()


def test_bad_values_are_refused():
    with pytest.raises(SystemExit):
        parse(["--role", "janitor"])
    with pytest.raises(ValueError):
        parse([], {"SGM_TOP_K": "0"})
    for bad in ("0", "1", "-0.1", "nan"):
        with pytest.raises(ValueError, match="posterior-tolerance"):
            parse(["--posterior-tolerance", bad])
    for bad in ("0", "1.5", "-0.2", "nan"):  # an operator's typo would output every label or none
        with pytest.raises(ValueError, match="label-threshold"):
            parse(["--label-threshold", bad])
    assert parse(["--label-threshold", "1"]).label_threshold == 1.0


def test_posterior_tolerance_from_flag_and_environment():
    assert parse([]).posterior_tolerance is None  # the default: exact to e^-40
    assert parse(["--posterior-tolerance", "1e-6"]).posterior_tolerance == 1e-6
    assert parse([], {"SGM_POSTERIOR_TOLERANCE": "0.001"}).posterior_tolerance == 0.001


def test_secrets_are_redacted():
    assert parse(["--sasl-password", "hunter2"]).redacted()["sasl_password"] == "***"


def test_docs_config_table_is_generated_from_the_code():
    documented = (ROOT / "docs" / "CONFIG.md").read_text()
    assert service_config.markdown_table() in documented, "regenerate: python -m sgm.consumers.config > docs/CONFIG.md"


def test_a_misspelt_variable_is_a_warning_in_the_serve_log(tmp_path, monkeypatch, capsys):
    # SGM_MODLE was ignored without a word: the service ran the default model
    from sgm.consumers.cli import main

    monkeypatch.setenv("SGM_MODLE", "u_jm")
    root = logging.getLogger()  # sgm serve sets up its log handler on the root logger: undone after the test
    monkeypatch.setattr(root, "handlers", list(root.handlers))
    monkeypatch.setattr(root, "level", root.level)
    monkeypatch.setenv("SGM_DATA_DIR", str(tmp_path))  # a variable of sgm eval, not a typo
    code = main(["serve", "--client", "memory", "--bootstrap-servers", "memory://typo", "--metrics-address", "",
                 "--state-dir", str(tmp_path), "--log-format", "json", "--model", "uc_zz_jm"])  # stops at the model
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    assert code == 2
    warnings = [line for line in lines if line["level"] == "warning"]
    assert len(warnings) == 1 and "SGM_MODLE (did you mean SGM_MODEL?)" in warnings[0]["variables"]
    assert not [name for name in warnings[0]["variables"] if name.startswith("SGM_DATA_DIR")]
    assert service_config.unknown_variables({"SGM_BOOTSTRAP_SERVER": "x", "SGM_TOP_K": "3"}) == [
        "SGM_BOOTSTRAP_SERVER (did you mean SGM_BOOTSTRAP_SERVERS?)"]


def test_a_flag_equal_to_its_default_still_beats_the_config_file_and_the_preset(tmp_path):
    # --half-life none, --multilabel per_label and --model uc_pd_jm_dp (the defaults) were dropped in favour of
    # the file's or the preset's values without a word: only values other than the defaults counted as given
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"model": "u_jm", "half_life": 3600, "multilabel": "powerset", "max_documents": 10}))
    cfg = parse(["--config", str(path), "--half-life", "none", "--multilabel", "per_label"]).model_config()
    assert cfg.get("half_life") is None and cfg["multilabel"] == "per_label" and cfg["max_documents"] == 10
    cfg = parse(["--config", str(path)], {"SGM_HALF_LIFE": "none", "SGM_MAX_DOCUMENTS": "none"}).model_config()
    assert cfg.get("half_life") is None and cfg.get("max_documents") is None and cfg["multilabel"] == "powerset"
    assert parse(["--config", str(path)]).model_config()["half_life"] == 3600  # nothing given: the file's
    assert parse(["--preset", "spam", "--model", "uc_pd_jm_dp"]).model_config()["model"] == "uc_pd_jm_dp"
    assert parse(["--preset", "spam"]).model_config()["model"] != "uc_pd_jm_dp"
    assert build_model(parse(["--config", str(path), "--half-life", "none"]).model_config()).half_life is None


def test_a_topic_named_for_two_jobs_or_not_a_kafka_name_is_refused_before_kafka(tmp_path, capsys):
    # Session 6 by hand on Tansu: `--dlq-topic sgm-train` made CreateTopics fail for ever (a request naming
    # one topic twice; with the topics already there, dead letters would be read back as training records);
    # `--train-topic "sgm train"` or `a/b` ran (Tansu takes any name; Apache Kafka refuses them)
    for argv, says in ((["--dlq-topic", "sgm-train"], "--train-topic and --dlq-topic are both 'sgm-train'"),
                       (["--output-topic", "sgm-score"], "--score-topic and --output-topic are both 'sgm-score'"),
                       (["--train-topic", "sgm train"], "--train-topic 'sgm train' is not a Kafka topic name"),
                       (["--dlq-topic", "a/b"], "--dlq-topic 'a/b' is not a Kafka topic name"),
                       (["--score-topic", "x" * 250], "is not a Kafka topic name"),
                       (["--output-topic", ".."], "--output-topic '..' is not a Kafka topic name")):
        with pytest.raises(ValueError, match=says.replace(".", r"\.")):
            parse(argv)
    assert parse(["--train-topic", "t.1_a-B", "--score-topic", "x" * 249]).train_topic == "t.1_a-B"
    from sgm.consumers.cli import main

    (tmp_path / "a.txt").write_text("hello")
    assert main(["learn", "--dry-run", "--label", "x", "--train-topic", "sgm train", str(tmp_path / "a.txt")]) == 2
    err = capsys.readouterr().err
    assert "sgm learn: --train-topic 'sgm train' is not a Kafka topic name" in err and "Traceback" not in err, err


def test_a_broker_list_no_client_can_reach_is_refused_before_kafka():
    # Session 6 by hand: `sgm serve --bootstrap-servers http://127.0.0.1:19092` (or port 190920, or two
    # addresses separated by a space, or '') retried 'kafka error; retrying' for ever
    for bad in ("http://127.0.0.1:19092", "127.0.0.1:190920", "127.0.0.1:19092 127.0.0.1:19093", "", " , ",
                "host:0", "host:port"):
        with pytest.raises(ValueError, match="--bootstrap-servers"):
            parse(["--bootstrap-servers", bad])
    for good in ("127.0.0.1:19092,", "localhost", "kafka-1:9092, kafka-2:9092", "[::1]:9092", "SASL_SSL://b:9093"):
        assert parse(["--bootstrap-servers", good]).bootstrap_servers == good
    assert parse(["--client", "memory", "--bootstrap-servers", "memory://any name"]).client == "memory"
