"""Whole messages as a document type of the models: ``sgm.model.mail.Message`` is accepted wherever a
document is, read by the model's own ``MailFeatures`` (its ``mail`` options), keyed by a hash of its
bytes when learned without an id, and carried in configurations and snapshots.

The scoring kernel is the one every document reaches: a message and its extracted term counts give
bit-identical posteriors and models (property-tested with hypothesis over MNB and TDM, batches of
any size, anonymous and explicit ids, unlearning), so the exactness tests of the kernel against the
dense references (tests/test_mnb_exact.py, tests/test_tdm_exact.py) cover messages too.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sgm.model import MNB, TDM, build_model, model_config
from sgm.model.mail import MAIL_CONFIG, MailFeatures, MailOptions, Message
from sgm.model.persistence import read_meta

from .test_mail_features import HAM, SPAM

OPTIONS = MailOptions(ngrams=2, meta_weight=0.7, received_hops=1)

PIECES = [SPAM, HAM, b"Subject: cheap pills\n\nbuy now http://pills.example/x",
          b"Subject: lunch\nIn-Reply-To: <a@b.org>\n\nsee you at noon",
          b"Content-Type: multipart/mixed\n\n\x00free", b"From: x@y.example\nSubject: =?bogus?q?=FF?=\n\nhi",
          b"Content-Type: text/html\n\n<p>Buy <b>now</b> <a href=http://shop.example/x>shop</a>"]

messages = st.builds(lambda parts, cut: Message(b"".join(parts)[:cut]),
                     st.lists(st.sampled_from(PIECES), min_size=1, max_size=2), st.integers(20, 3000))
labelled = st.lists(st.tuples(messages, st.sampled_from(["spam", "ham"]), st.booleans()), min_size=2, max_size=10)


def models(family: str, mail: MailOptions | None = OPTIONS):
    if family == "tdm":
        return TDM("tdm_uc_jm_dp_kpd_kdp", mail=mail)
    return MNB("uc_jm_dp_ps", beta=0.6, mu=50.0, theta=1.0, ups=0.0, mail=mail)


@pytest.mark.parametrize("family", ["mnb", "tdm"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=labelled, queries=st.lists(messages, min_size=1, max_size=4), batch=st.integers(1, 4))
def test_a_message_is_its_extracted_terms_everywhere(family, stream, queries, batch):
    read = MailFeatures(OPTIONS)
    by_message, by_terms = models(family), models(family)
    for start in range(0, len(stream), batch):
        chunk = stream[start : start + batch]
        ids = [None if anonymous else f"d{start + i}" for i, (_, _, anonymous) in enumerate(chunk)]
        by_message.learn_many([m for m, _, _ in chunk], [l for _, l, _ in chunk], ids=ids, sequential=True)
        term_ids = [m.anonymous_id() if i is None else i for (m, _, _), i in zip(chunk, ids)]
        by_terms.learn_many([read(m.raw) for m, _, _ in chunk], [l for _, l, _ in chunk], ids=term_ids,
                            sequential=True)
    assert by_message.checksum() == by_terms.checksum()
    if not len(by_message):
        return
    names, log_post = by_message.predict_log_proba_many(queries)
    names_t, log_post_t = by_terms.predict_log_proba_many([read(q.raw) for q in queries])
    assert names == names_t and np.array_equal(log_post, log_post_t)
    assert by_message.predict_topk(queries[0], 2) == by_terms.predict_topk(read(queries[0].raw), 2)
    ranking = by_message.rank_many(queries, 2)
    assert ranking.names == by_terms.rank_many([read(q.raw) for q in queries], 2).names
    # one-by-one equals the batch (a message scored alone is a batch of one)
    for row, query in enumerate(queries):
        assert np.array_equal(by_message.predict_log_proba_many([query])[1][0], log_post[row])
    # unlearning a message by its content removes what learning it added
    first = stream[0][0]
    if first.anonymous_id() in by_message:
        learned = by_message.document(first.anonymous_id()).labels
        assert by_message.unlearn_one(first, learned) is True
        assert first.anonymous_id() not in by_message


def test_anonymous_messages_are_keyed_by_their_bytes():
    model = MNB("u_jm")
    assert model.learn_one(Message(SPAM), "spam") is True
    assert model.learn_one(Message(bytearray(SPAM)), "spam") is False  # the same bytes: already learned
    assert model.anonymous_id(Message(SPAM)) == Message(SPAM).anonymous_id() in model
    assert model.learn_many([Message(HAM), Message(HAM)], ["ham", "ham"]) == 1
    assert Message(HAM).anonymous_id() != Message(HAM + b" ").anonymous_id()
    # relabelled by content: unlearns the old label first
    assert model.learn_one(Message(SPAM), "ham") is True and model.classes_ == ["ham"]


def test_texts_mappings_and_messages_mix_in_one_batch():
    model = MNB("uc_jm_dp_ps", beta=0.5, mu=10.0, theta=1.0, ups=0.0, mail={"ngrams": 1})
    model.learn_many([Message(SPAM), "lunch at noon", {"deal": 2}], ["spam", "ham", "spam"], ids=["a", "b", "c"])
    mixed = model.predict_proba_many([Message(HAM), "cheap deal", {"noon": 1}])
    alone = [model.predict_proba_one(Message(HAM)), model.predict_proba_one("cheap deal"),
             model.predict_proba_one({"noon": 1})]
    assert mixed == alone


def test_mail_options_live_in_the_configuration_and_the_snapshot():
    model = build_model(MAIL_CONFIG)
    assert model.mail == MailOptions.from_dict(MAIL_CONFIG["mail"])
    assert model_config(model)["mail"] == model.mail.to_dict()
    model.learn_one(Message(SPAM), "spam", id="s")
    model.learn_one(Message(HAM), "ham", id="h")
    data = model.to_bytes()
    assert read_meta(data)["config"]["mail"] == model.mail.to_dict()
    restored = MNB.from_bytes(data)
    assert restored.mail == model.mail and restored.checksum() == model.checksum()
    query = Message(SPAM.replace(b"Viagra", b"Cialis"))
    assert restored.predict_proba_one(query) == model.predict_proba_one(query)
    assert restored.read_message(query).terms == model.read_message(query).terms
    # other options read the same bytes differently: the configuration is what replicas must share
    other = build_model({**MAIL_CONFIG, "mail": {**MAIL_CONFIG["mail"], "meta_weight": 1.0}})
    assert other.read_message(query).terms != model.read_message(query).terms


def test_text_models_keep_their_configuration_and_read_messages_with_the_defaults():
    model = MNB("u_jm")
    assert "mail" not in model.config() and "mail" not in model_config(model)
    assert model.read_message(Message(SPAM)).terms == MailFeatures(MailOptions())(SPAM)
    with pytest.raises(ValueError):
        MNB("u_jm", mail="ngrams=2")
    with pytest.raises(ValueError):
        build_model({"model": "u_jm", "mail": {"ngram": 2}})


def test_read_message_reports_the_flags_and_never_raises():
    model = MNB("u_jm", mail=OPTIONS)
    broken = model.read_message(Message(b"Content-Type: multipart/mixed; boundary=b\n\n--b\n"
                                        b"Content-Transfer-Encoding: base64\n\nSGk*\n"))
    assert broken.flags == ("bad_base64", "unterminated_multipart")
    assert model.read_message(Message(b"\xff" * 5000)).terms is not None
    with pytest.raises(TypeError):
        Message("text, not bytes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not standard base64"):
        Message.from_base64("U3ViamVjdDogaGk")  # missing padding
    assert Message.from_base64(Message(SPAM).to_base64()) == Message(SPAM)
