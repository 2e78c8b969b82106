"""The synthetic stream: determinism, rates, malformed records, drift, new labels, feedback order."""
from __future__ import annotations

import itertools
import math
from collections import Counter

import pytest

from sgm.stream.records import InvalidRecord, Limits, Op, Reason, parse_score, parse_train
from sgm.stream.synthetic import (
    Event,
    SyntheticConfig,
    SyntheticStream,
    reference_training_set,
    scoring_ids,
    valid_training_records,
)

# Small limits keep the deliberately oversized records small, so tests stay fast.
SMALL_LIMITS = Limits(max_text_chars=2_000, max_terms=300, max_labels=8, max_label_chars=40, max_id_chars=64)


def events_of(**changes) -> list[Event]:
    return list(SyntheticStream(SyntheticConfig(**changes)).events())


def within(observed: int, n: int, rate: float, sigmas: float = 5.0) -> bool:
    """Binomial count within ``sigmas`` standard deviations of its mean."""
    mean = n * rate
    return abs(observed - mean) <= sigmas * math.sqrt(n * rate * (1 - rate)) + 1


@pytest.fixture(scope="module")
def news_events() -> list[Event]:
    return events_of(seed=11, n_docs=6_000, malformed_rate=0.05, limits=SMALL_LIMITS, ts_format="mixed",
                     terms_rate=0.1, label_noise_rate=0.02, forget_rate=0.01)  # fmt: skip


def test_same_seed_same_stream_different_seed_different_stream():
    config = dict(n_docs=800, malformed_rate=0.05, limits=SMALL_LIMITS, profiles=("news", "spam"), ts_format="mixed")
    a, b = events_of(seed=5, **config), events_of(seed=5, **config)
    assert [(e.kind, e.key, e.value, e.expected_reason) for e in a] == [(e.kind, e.key, e.value, e.expected_reason) for e in b]
    c = events_of(seed=6, **config)
    assert [e.value for e in a] != [e.value for e in c]


def test_every_event_validates_as_tagged(news_events):
    reasons = Counter()
    for event in news_events:
        parser = parse_train if event.kind == "train" else parse_score
        if event.valid:
            record = parser(event.value, SMALL_LIMITS)
            assert record.id == event.id and event.key == event.id.encode()
        else:
            with pytest.raises(InvalidRecord) as info:
                parser(event.value, SMALL_LIMITS)
            assert info.value.reason is event.expected_reason, (event, info.value.detail)
            reasons[event.expected_reason] += 1
    assert set(reasons) == set(Reason)  # every defect kind was produced


def test_malformed_with_default_limits_too():
    events = events_of(seed=2, n_docs=400, malformed_rate=0.5, malformed_reasons=tuple(Reason))
    bad = [e for e in events if not e.valid]
    assert len(bad) > 100
    for event in bad:
        parser = parse_train if event.kind == "train" else parse_score
        with pytest.raises(InvalidRecord) as info:
            parser(event.value)
        assert info.value.reason is event.expected_reason


def test_malformed_reasons_can_be_restricted():
    events = events_of(seed=3, n_docs=500, malformed_rate=0.2, malformed_reasons=(Reason.INVALID_JSON, Reason.BAD_ID))
    assert {e.expected_reason for e in events if not e.valid} == {Reason.INVALID_JSON, Reason.BAD_ID}
    assert all(e.valid for e in events_of(seed=3, n_docs=500, malformed_rate=0.0))


def test_rates_roughly_as_configured(news_events):
    valid = [e for e in news_events if e.valid]
    bad = [e for e in news_events if not e.valid]
    assert within(len(bad), len(valid), 0.05)
    train = list(valid_training_records(news_events, SMALL_LIMITS))
    learns = [r for r in train if r.op is Op.LEARN]
    unlearns = [r for r in train if r.op is Op.UNLEARN]
    forgets = [r for r in train if r.op is Op.FORGET]
    first_learns = len(learns) - len(unlearns)  # each correction re-learns once
    assert first_learns == 6_000  # feedback_rate 1.0: every document is trained once
    assert within(len(unlearns), first_learns, 0.02)
    assert within(len(forgets), first_learns, 0.98 * 0.01)  # forget is drawn only for non-noisy labels
    with_terms = sum(r.terms is not None for r in learns)
    assert within(with_terms, len(learns), 0.1)
    scores = [e for e in valid if e.kind == "score"]
    assert len(scores) == 6_000 - 100  # all but the warm-up documents are scored first


def test_document_rates():
    config = SyntheticConfig(seed=4, n_docs=20_000, profiles=("news", "spam"), profile_weights=(0.25, 0.75),
                             spam_rate=0.4, multi_label_rate=0.1, empty_rate=0.01)  # fmt: skip
    docs = list(SyntheticStream(config).documents())
    news = [d for d in docs if d.profile == "news"]
    messages = [d for d in docs if d.profile == "spam"]
    assert within(len(news), len(docs), 0.25)
    assert within(sum(d.labels == ("spam",) for d in messages), len(messages), 0.4)
    assert within(sum(len(d.labels) == 2 for d in news), len(news), 0.1)
    assert all(len(d.labels) == 1 for d in messages)
    assert within(sum(d.text == "" for d in docs), len(docs), 0.01)
    news_lengths = [len(d.text.split()) for d in news if d.text]
    message_lengths = [len(d.text.split()) for d in messages if d.text]
    assert 70 < sum(news_lengths) / len(news_lengths) < 90
    assert 16 < sum(message_lengths) / len(message_lengths) < 24


def test_spam_has_its_markers():
    docs = list(SyntheticStream(SyntheticConfig(seed=1, n_docs=3_000, profiles=("spam",))).documents())

    def marker_rate(label: str) -> float:
        tokens = [t for d in docs if d.labels == (label,) for t in d.text.split()]
        return sum(t.startswith("http://") or "$" in t or t in {"free", "urgent", "win", "cash"} for t in tokens) / len(tokens)

    assert marker_rate("spam") > 5 * marker_rate("ham")


def _word_distribution(docs, label) -> Counter:
    return Counter(t for d in docs if d.labels == (label,) for t in d.text.split())


def _total_variation(p: Counter, q: Counter) -> float:
    np_, nq = sum(p.values()), sum(q.values())
    return 0.5 * sum(abs(p[w] / np_ - q[w] / nq) for w in set(p) | set(q))


@pytest.mark.parametrize("profile, label", [("news", "business"), ("spam", "spam")])
def test_drift_changes_the_word_distribution(profile, label):
    def early_late(drift: float) -> float:
        config = SyntheticConfig(seed=8, n_docs=12_000, profiles=(profile,), drift_per_1k=drift, new_label_every=None)
        docs = list(SyntheticStream(config).documents())
        return _total_variation(_word_distribution(docs[:3_000], label), _word_distribution(docs[-3_000:], label))

    still, drifting = early_late(0.0), early_late(30.0)
    assert drifting > still + 0.15, (still, drifting)


def test_new_labels_appear_mid_stream():
    # 700 is not a multiple of the generator's batch size: births must not wait for a batch boundary
    stream = SyntheticStream(SyntheticConfig(seed=9, n_docs=2_000, new_label_every=700, max_new_labels=3))
    births = stream.new_labels()
    assert births == [(700, "weather"), (1_400, "energy")]  # the third would be at 2,100
    assert set(stream.initial_labels()).isdisjoint(label for _, label in births)
    first_seen: dict[str, int] = {}
    for doc in stream.documents():
        for label in doc.labels:
            first_seen.setdefault(label, doc.index)
    assert set(first_seen) == set(stream.initial_labels()) | {"weather", "energy"}
    for at, label in births:  # a new topic gets the mean prior, about 1 in 9 documents
        assert at <= first_seen[label] < at + 60
    assert SyntheticStream(SyntheticConfig(n_docs=10, new_label_every=None)).new_labels() == []


def test_timestamps_increase_at_the_configured_rate():
    config = SyntheticConfig(seed=1, n_docs=5_000, start_ts=1e9, docs_per_second=20.0, ts_jitter=0.9)
    stamps = [d.ts for d in SyntheticStream(config).documents()]
    assert stamps[0] == 1e9
    assert all(b > a for a, b in zip(stamps, stamps[1:]))
    assert stamps[-1] - stamps[0] == pytest.approx(4_999 / 20.0, rel=0.05)


def test_timestamp_formats_parse_back_exactly(news_events):
    for event in news_events:
        if event.valid and event.kind == "score":
            parsed = parse_score(event.value)
            assert parsed.ts == event.ts
    iso = [e for e in news_events if e.valid and b'"ts":"' in e.value]
    assert 0.5 < len(iso) / len([e for e in news_events if e.valid]) < 0.95  # mixed: mostly strings


def test_test_then_train_order():
    delay = 30
    events = events_of(seed=12, n_docs=2_000, feedback_delay=delay, label_noise_rate=0.0, forget_rate=0.0,
                       malformed_rate=0.0, warmup_docs=50)  # fmt: skip
    scored_at: dict[str, int] = {}
    trained_at: dict[str, int] = {}
    doc_position = {}
    for event in events:
        if event.kind == "score":
            scored_at[event.id] = len(doc_position)  # scored documents before this one
            doc_position[event.id] = len(doc_position)
        else:
            assert event.id not in trained_at
            trained_at[event.id] = len(doc_position)
            record = parse_train(event.value)
            assert record.labels == event.truth_labels  # no noise: the training label is the truth
    assert len(trained_at) == 2_000 and len(scored_at) == 1_950
    for doc_id, position in scored_at.items():
        # trained once `delay` more documents have been seen (or at the end of the stream)
        assert trained_at[doc_id] - position == delay or trained_at[doc_id] == len(doc_position)
    warmup = [i for i in trained_at if i not in scored_at]
    assert warmup == [f"syn-{i:07d}" for i in range(50)]


def test_corrections_and_forgets_in_the_reference_set():
    events = events_of(seed=13, n_docs=3_000, label_noise_rate=0.05, forget_rate=0.03, malformed_rate=0.01)
    truth = {}
    for event in events:
        if event.valid and event.op is Op.LEARN:
            truth.setdefault(event.id, event.truth_labels)
    records = list(valid_training_records(events))
    noisy = {r.id for r in records if r.op is Op.UNLEARN}
    forgotten = {r.id for r in records if r.op is Op.FORGET}
    assert noisy and forgotten and not noisy & forgotten
    # a noisy learn is wrong, and its correction unlearns exactly that and learns the truth
    for doc_id in noisy:
        ops = [r for r in records if r.id == doc_id]
        assert [r.op for r in ops] == [Op.LEARN, Op.UNLEARN, Op.LEARN]
        assert ops[0].labels == ops[1].labels != truth[doc_id] == ops[2].labels
        assert ops[0].text == ops[1].text == ops[2].text
    final = reference_training_set(events)
    final_ids = [r.id for r in final]
    assert len(final_ids) == len(set(final_ids)) == 3_000 - len(forgotten)
    assert all(r.labels == truth[r.id] for r in final)
    assert not forgotten & set(final_ids)


def test_scoring_ids_and_truth():
    events = events_of(seed=14, n_docs=300, malformed_rate=0.1, warmup_docs=20)
    ids = scoring_ids(events)
    assert ids == [f"syn-{i:07d}" for i in range(20, 300)]
    assert all(e.truth_labels for e in events if e.kind == "score" and e.valid)


def test_endless_stream():
    stream = SyntheticStream(SyntheticConfig(seed=1, n_docs=None, new_label_every=100, max_new_labels=1))
    events = list(itertools.islice(stream.events(), 2_000))
    assert len(events) == 2_000
    assert stream.new_labels() == [(100, "weather")]


@pytest.mark.parametrize(
    "changes",
    [
        {"profiles": ("tweets",)},
        {"profiles": ()},
        {"profile_weights": (1.0, 2.0)},
        {"ts_jitter": 1.0},
        {"docs_per_second": 0},
        {"topic_share": 0.9, "general_share": 0.2},
        {"feedback_delay": -1},
        {"ts_format": "rfc2822"},
    ],
)
def test_bad_config_is_rejected(changes):
    with pytest.raises(ValueError):
        list(itertools.islice(SyntheticStream(SyntheticConfig(**changes)).events(), 200))
