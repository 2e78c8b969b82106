"""``sgm eval`` and ``sgm tune`` end to end: on tiny generated JSON Lines files, and on r8 when present."""
from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest

from sgm.consumers.cli import main

REPORT_KEYS = {"accuracy", "micro_f1", "macro_f1", "log_loss", "roc_auc", "one_minus_roca_pct", "docs",
               "learn_docs_per_s", "score_docs_per_s", "config"}

TOPIC_WORDS = {
    "spam": "cheap pills winner prize free cash offer click viagra loan".split(),
    "ham": "meeting agenda report project lunch monday schedule review notes team".split(),
    "sport": "match goal team score league coach season player win cup".split(),
}
COMMON = "the a of and to in is for on with".split()


def make_docs(labels, n, seed, split=None, start_ts=1_000_000_000, multilabel=False):
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        label = rng.choice(labels)
        doc_labels = [label]
        if multilabel and rng.random() < 0.3:
            doc_labels = sorted({label, rng.choice(labels)})
        words = [rng.choice(TOPIC_WORDS[lab]) for lab in doc_labels for _ in range(rng.randint(3, 6))]
        words += [rng.choice(COMMON) for _ in range(rng.randint(2, 8))]
        if rng.random() < 0.1:  # some noise
            words.append(rng.choice(TOPIC_WORDS[rng.choice(labels)]))
        rng.shuffle(words)
        docs.append({"id": f"d{i}", "text": " ".join(words), "labels": doc_labels,
                     "ts": start_ts + 3600 * i if split is None else None,
                     "split": split(i) if callable(split) else split})
    return docs


def write_jsonl(path: Path, docs, compress=False) -> Path:
    text = "\n".join(json.dumps(d) for d in docs) + "\n"
    if compress:
        with gzip.open(path, "wt", encoding="utf-8") as out:
            out.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture()
def three_class_split(tmp_path):
    docs = make_docs(["spam", "ham", "sport"], 240, seed=1, split=lambda i: "train" if i < 180 else "test")
    return write_jsonl(tmp_path / "topics.jsonl.gz", docs, compress=True)


@pytest.fixture()
def spam_stream(tmp_path):
    docs = make_docs(["spam", "ham"], 300, seed=2)
    docs.append({"id": "empty", "text": "", "labels": ["ham"], "ts": docs[-1]["ts"] + 1, "split": None})
    return write_jsonl(tmp_path / "stream.jsonl", docs)


def test_eval_split_json_fields(three_class_split, tmp_path, capsys):
    out = tmp_path / "report.json"
    code = main(["eval", "--data", str(three_class_split), "--model", "uc_pd_dp_ps", "--param", "mu=10",
                 "--param", "delta=0.5", "--json", str(out)])
    assert code == 0
    report = json.loads(out.read_text())
    assert REPORT_KEYS <= set(report)
    assert report["mode"] == "split" and report["docs"] == 60 and report["train_docs"] == 180
    assert report["accuracy"] > 0.9 and report["micro_f1"] == pytest.approx(report["accuracy"])
    assert 0 < report["macro_f1"] <= 1 and report["log_loss"] > 0
    assert report["roc_auc"] is None and report["one_minus_roca_pct"] is None  # three labels
    assert report["config"]["model"] == "mnb_uc_pd_dp_ps" and report["config"]["params"]["mu"] == 10.0
    assert report["learn_docs_per_s"] > 0 and report["score_docs_per_s"] > 0
    table = capsys.readouterr().out
    assert f"accuracy {report['accuracy']:.4f}" in table and "confusion matrix (rows: true label" in table
    per_class = {row["label"]: row for row in report["per_class"]}
    assert set(per_class) == {"spam", "ham", "sport"} and sum(r["support"] for r in per_class.values()) == 60
    counts = report["confusion"]["counts"]
    assert sum(map(sum, counts)) == 60 and sum(counts[i][i] for i in range(3)) == round(60 * report["accuracy"])
    for i, label in enumerate(report["confusion"]["labels"]):  # the table's numbers follow from the matrix
        assert per_class[label]["support"] == sum(counts[i])
        assert per_class[label]["predicted"] == sum(row[i] for row in counts)
        assert per_class[label]["recall"] == pytest.approx(counts[i][i] / sum(counts[i]))
        line = next(l for l in table.splitlines() if l.startswith(label + " "))
        assert f"{per_class[label]['recall']:.4f}" in line and f"{sum(counts[i]):,}" in line


def test_eval_prequential_two_labels_delay_and_plot(spam_stream, tmp_path):
    out, plot = tmp_path / "report.json", tmp_path / "plot.png"
    code = main(["eval", "--data", str(spam_stream), "--model", "uc_jm", "--delay", "5", "--window", "50",
                 "--json", str(out), "--plot", str(plot)])
    assert code == 0
    report = json.loads(out.read_text())
    assert REPORT_KEYS <= set(report)
    assert report["mode"] == "prequential"  # no split: the default
    assert report["unscored"] == 6 and report["docs"] == 301 - 6  # the first 5 + 1 come before any label
    assert report["positive_label"] == "spam"
    assert 0.9 < report["roc_auc"] <= 1.0
    assert report["one_minus_roca_pct"] == pytest.approx(100 * (1 - report["roc_auc"]))
    windows = report["windows"]
    assert [w["docs"] for w in windows] == [50] * 5 + [45]
    assert windows[0]["ts_start"].startswith("2001-09-09")
    assert plot.stat().st_size > 10_000


def test_eval_time_windows_and_stdout_json(spam_stream, capsys):
    assert main(["eval", "--data", str(spam_stream), "--model", "u_jm", "--window", "1d", "--json", "-"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert sum(w["docs"] for w in report["windows"]) == report["docs"]
    assert all(w["ts_end"] > w["ts_start"] for w in report["windows"])


def test_eval_multilabel_powerset_and_per_label(tmp_path):
    docs = make_docs(["spam", "ham", "sport"], 300, seed=3, split=lambda i: "train" if i < 220 else "test",
                     multilabel=True)
    docs.append({"id": "nolabel", "text": "cheap", "labels": [], "ts": None, "split": "test"})
    data = write_jsonl(tmp_path / "multi.jsonl", docs)
    powerset, per_label = tmp_path / "p.json", tmp_path / "l.json"
    assert main(["eval", "--data", str(data), "--model", "u_jm", "--json", str(powerset)]) == 0
    assert main(["eval", "--data", str(data), "--model", "u_jm", "--multilabel", "per_label", "--threshold", "0.25",
                 "--json", str(per_label)]) == 0
    p, lab = json.loads(powerset.read_text()), json.loads(per_label.read_text())
    assert p["multilabel"] == "powerset" and p["dropped_unlabelled"] == 1 and p["docs"] == 80
    assert p["micro_f1"] > 0.8 and p["log_loss"] is not None
    assert lab["multilabel"] == "per_label" and lab["threshold"] == 0.25 and lab["log_loss"] is None
    assert lab["micro_f1"] > 0.8


def test_eval_rejects_bad_input(three_class_split, capsys):
    assert main(["eval", "--data", str(three_class_split), "--model", "u_jm", "--param", "mu=3"]) == 2
    assert "not used by" in capsys.readouterr().err
    assert main(["eval", "--data", "no-such-file.jsonl", "--model", "u_jm"]) == 2
    assert main(["eval", "--data", str(three_class_split)]) == 2  # neither --model nor --config


@pytest.mark.parametrize("workers", [1, 2])
def test_tune_writes_a_config_that_eval_accepts(three_class_split, tmp_path, capsys, workers):
    config, search = tmp_path / "best.json", tmp_path / "search.json"
    code = main(["tune", "--data", str(three_class_split), "--model", "uc_pd_dp_ps", "--params", "mu,delta,theta",
                 "--param", "ups=0.5", "--iters", "3", "--points", "4", "--workers", str(workers),
                 "--out", str(config), "--json", str(search)])
    assert code == 0
    best = json.loads(config.read_text())
    assert best["model"] == "mnb_uc_pd_dp_ps" and best["params"]["ups"] == 0.5
    summary = json.loads(search.read_text())
    assert summary["dev_tuned"] >= summary["dev_default"]
    assert summary["dev"]["train_docs"] + summary["dev"]["test_docs"] == 180  # carved from train only
    assert summary["evaluations"] == 1 + 3 * 4 and len(summary["trials"]) == 13
    assert summary["test_tuned"]["docs"] == 60
    assert "dev accuracy: default" in capsys.readouterr().out
    report = tmp_path / "eval.json"
    assert main(["eval", "--data", str(three_class_split), "--config", str(config), "--json", str(report)]) == 0
    assert json.loads(report.read_text())["config"]["params"] == best["params"]


def test_tune_is_deterministic_and_prequential(spam_stream, tmp_path):
    outs = []
    for name in ("a", "b"):
        out = tmp_path / f"{name}.json"
        assert main(["tune", "--data", str(spam_stream), "--model", "uc_jm", "--iters", "2", "--points", "3",
                     "--workers", "1", "--seed", "5", "--no-test", "--out", str(out), "--json", str(out) + ".s"]) == 0
        outs.append(out.read_text())
    assert outs[0] == outs[1]
    summary = json.loads((tmp_path / "a.json.s").read_text())
    assert summary["mode"] == "prequential" and summary["dev"]["stream_docs"] == round(301 * 0.25)


def test_tune_rejects_parameters_the_spec_does_not_read(three_class_split, tmp_path, capsys):
    assert main(["tune", "--data", str(three_class_split), "--model", "u_jm", "--params", "mu",
                 "--out", str(tmp_path / "x.json")]) == 2
    assert "does not read" in capsys.readouterr().err


# ---------------------------------------------------------------- real data
def test_eval_and_tune_on_r8(data_dir, tmp_path):
    r8 = data_dir / "r8.jsonl.gz"
    if not r8.is_file():
        pytest.skip("r8 not present")
    out = tmp_path / "r8.json"
    assert main(["eval", "--data", str(r8), "--model", "u_jm", "--param", "beta=0.5", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["docs"] == 2189 and report["train_docs"] == 5485
    assert report["accuracy"] > 0.95  # plain Jelinek-Mercer MNB on r8 is about 0.96
    config, search = tmp_path / "r8-best.json", tmp_path / "r8-search.json"
    assert main(["tune", "--data", str(r8), "--model", "uc_pd_dp_tXiX_ps", "--iters", "2", "--points", "4",
                 "--out", str(config), "--json", str(search), "--no-test"]) == 0
    summary = json.loads(search.read_text())
    assert summary["dev_tuned"] > summary["dev_default"]  # the defaults (mu=100, theta=1) are poor with TF-IDF


# ---------------------------------------------------------------- peers
def test_peers_on_the_same_split_and_stream(three_class_split, spam_stream):
    from bench import peers
    from sgm.consumers.evaluation.harness import EvalSetup, load_examples

    docs = load_examples(three_class_split)
    rows = peers.run_split(docs, EvalSetup(), ["sklearn_mnb", "linear_svc", "river_mnb"])
    by_name = {r["peer"]: r for r in rows}
    assert by_name["sklearn_mnb"]["docs"] == 60 and by_name["sklearn_mnb"]["accuracy"] > 0.9
    assert [s["setting"]["alpha"] for s in by_name["sklearn_mnb"]["test_by_setting"]] == [1.0, 0.1, 0.01]
    assert by_name["linear_svc"]["log_loss"] is None  # no probabilities
    assert by_name["river_mnb"]["setting"]["alpha"] in peers.NB_ALPHAS

    stream = load_examples(spam_stream)
    online = ["river_mnb", "vw_logistic_bigrams"] if peers.vw_available() else ["river_mnb"]
    rows = peers.run_prequential(stream, EvalSetup(mode="prequential", delay=3), online)
    for row in rows:
        assert row["docs"] + row["unscored"] == 301 and row["unscored"] == 4
        assert row["roc_auc"] > 0.9


def test_plots_without_matplotlib_say_how_to_get_it(spam_stream, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "matplotlib", None)  # as if the plot extra were not installed
    assert main(["eval", "--data", str(spam_stream), "--model", "u_jm", "--plot", str(tmp_path / "p.png")]) == 2
    assert main(["tune", "--data", str(spam_stream), "--model", "u_jm", "--iters", "1", "--points", "2",
                 "--out", str(tmp_path / "c.json"), "--plot", str(tmp_path / "s.png")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == ["sgm eval: --plot needs matplotlib: pip install 'sgm-stream[plot]'",
                   "sgm tune: --plot needs matplotlib: pip install 'sgm-stream[plot]'"]
    assert not (tmp_path / "c.json").exists()


def test_tune_plot_and_progress_inside_an_iteration(spam_stream, tmp_path, capsys):
    plot = tmp_path / "search.png"
    assert main(["tune", "--data", str(spam_stream), "--model", "u_jm", "--iters", "2", "--points", "3", "--workers", "1",
                 "--out", str(tmp_path / "c.json"), "--no-test", "--progress", "--plot", str(plot)]) == 0
    err = capsys.readouterr().err
    assert plot.stat().st_size > 10_000
    frames = err.split("\r")
    assert any("iteration 1/2: [" in f and "3 points" in f for f in frames)  # the line moves point by point
    assert any("iteration 2/2: [" in f and "100.0%" in f for f in frames)


# ---------------------------------------------------------------- whole messages (raw_b64) and the spam preset
@pytest.fixture()
def mail_stream_file(tmp_path):
    import base64

    docs = make_docs(["spam", "ham"], 160, seed=4)
    for i, doc in enumerate(docs):
        sender = "deals@bulk.example" if doc["labels"] == ["spam"] else "ann@example.org"
        raw = (f"From: {sender}\nSubject: {' '.join(doc['text'].split()[:3])}\nMessage-ID: <{i}@x>\n"
               f"Content-Type: text/plain\n\n{doc['text']}\n").encode()
        if i % 25 == 0:  # malformed MIME is read, not refused
            raw = b"Content-Type: multipart/mixed\n\n" + raw
        doc["raw_b64"] = base64.b64encode(raw).decode()
        del doc["text"]
    return write_jsonl(tmp_path / "mail.jsonl", docs)


def test_eval_reads_whole_messages_with_the_spam_preset(mail_stream_file, tmp_path, capsys):
    out = tmp_path / "report.json"
    assert main(["eval", "--data", str(mail_stream_file), "--preset", "spam", "--spam-threshold", "0.6",
                 "--min-ham", "3", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["mode"] == "prequential" and report["config"]["mail"]["meta_weight"] == 4.48755
    assert report["decision"]["threshold"] == 0.6 and report["decision"]["min_ham"] == 3
    assert report["decision"]["not_ready"] >= 1 and report["one_minus_roca_pct"] is not None
    assert set(report["fn_at_fp_pct"]) == {"0.1", "1"} and 0 <= report["fp_rate_pct"] <= 100
    text = capsys.readouterr().out
    assert "FP rate " in text and "threshold 0.6, min_spam 0, min_ham 3, prior weight 1.1" in text
    assert report["decision"]["prior_weight"] == 1.1  # the preset's, kept under --spam-threshold
    # --spam-prior-weight at the model's theta: its own posterior, so 0.5 is the arg-max's verdict
    assert main(["eval", "--data", str(mail_stream_file), "--preset", "spam", "--spam-threshold", "0.5",
                 "--spam-prior-weight", "2", "--json", str(out)]) == 0
    own = json.loads(out.read_text())
    assert main(["eval", "--data", str(mail_stream_file), "--preset", "spam", "--spam-threshold", "0.5",
                 "--spam-prior-weight", "1", "--json", str(out)]) == 0
    bayes = json.loads(out.read_text())
    assert own["decision"]["prior_weight"] == 2.0 and bayes["decision"]["prior_weight"] == 1.0
    assert own["one_minus_roca_pct"] == bayes["one_minus_roca_pct"]  # the ranking is the model's either way
    # mail numbers on the command line land in the configuration's mail options
    assert main(["eval", "--data", str(mail_stream_file), "--preset", "spam", "--param", "meta_weight=2",
                 "--json", str(out)]) == 0
    assert json.loads(out.read_text())["config"]["mail"]["meta_weight"] == 2.0
    assert main(["eval", "--data", str(mail_stream_file), "--preset", "spam", "--no-mail"]) == 2
    assert main(["eval", "--data", str(mail_stream_file), "--model", "u_jm", "--positive", "ham",
                 "--spam-threshold", "0.9", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["decision"]["label"] == "ham"


def test_tune_searches_meta_weight_exactly_as_eval_reads_messages(mail_stream_file, tmp_path):
    from sgm.consumers.evaluation.dev_task import development_task
    from sgm.consumers.evaluation.harness import EvalSetup, evaluate_prequential, load_examples

    docs = load_examples(mail_stream_file)
    setup = EvalSetup(mode="prequential")
    task = development_task(docs, {"model": "uc_jm_dp_ps", "mail": {"ngrams": 2}}, setup, "roc_auc", 0.5)
    point = {"beta": 0.7, "meta_weight": 2.5}
    config = task.config_for(point)
    assert config["mail"] == {"ngrams": 2, "meta_weight": 2.5} and "meta_weight" not in config["params"]
    fast = task.run(point)  # extracted once at weight 1, re-weighed
    direct = evaluate_prequential(config, task.dev_stream, setup)  # the model reads each Message itself
    assert {k: fast[k] for k in ("accuracy", "roc_auc", "log_loss")} == \
        {k: direct[k] for k in ("accuracy", "roc_auc", "log_loss")}
    best = tmp_path / "best.json"
    assert main(["tune", "--data", str(mail_stream_file), "--preset", "spam", "--params", "beta,meta_weight",
                 "--iters", "1", "--points", "3", "--workers", "1", "--no-test", "--out", str(best)]) == 0
    tuned = json.loads(best.read_text())
    assert 0.05 <= tuned["mail"]["meta_weight"] <= 20 and tuned["mail"]["ngrams"] == 3
    assert main(["eval", "--data", str(mail_stream_file), "--config", str(best)]) == 0


def test_a_config_or_base_that_is_a_folder_is_one_line(three_class_split, tmp_path, capsys):
    # an IsADirectoryError (or PermissionError) from --config / --base was a traceback
    cases = [["eval", "--data", str(three_class_split), "--config", str(tmp_path)],
             ["tune", "--data", str(three_class_split), "--config", str(tmp_path), "--out", str(tmp_path / "t.json")],
             ["ensemble", "--data", str(three_class_split), "--base", str(tmp_path), "--base", str(tmp_path),
              "--out", str(tmp_path / "e.json")]]
    for argv in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "Is a directory" in err and len(err.strip().splitlines()) == 1, (argv, err)
