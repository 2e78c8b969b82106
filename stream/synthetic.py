"""The project's own generated stream: labelled documents with drift, feedback and bad records.

A deterministic (seeded) generator used by ``sgm demo``, the tests and the
benchmarks. It needs no external data:

* **profiles** -- ``"news"``: documents over topics (8 at start), each topic with its
  own vocabulary of pronounceable pseudo-words plus a shared vocabulary of English
  function words, Zipf-like word frequencies, log-normal lengths, a few multi-label
  documents; ``"spam"``: short ``spam``/``ham`` messages, spam carrying money and
  urgency words, URLs and odd tokens. A stream uses one profile or a weighted mix.
* **drift** -- each vocabulary is a sliding window over an endless pool of words, so
  words slowly enter and leave every label's distribution; new news topics (new
  labels) are born mid-stream; event times advance monotonically at a set rate with
  jitter.
* **test-then-train** -- :meth:`SyntheticStream.events` yields each document to the
  scoring topic first and to the training topic ``feedback_delay`` documents later,
  with its true labels, so a consumer can measure prequential accuracy. A few labels
  arrive wrong and are corrected later (``unlearn`` the wrong label, ``learn`` the
  right one); a few documents are ``forget``-ed.
* **bad records** -- at ``malformed_rate``, records that the validator must reject,
  each tagged with the :class:`~stream.records.Reason` it must give.

This module assembles documents and the event stream; the words come from
``synthetic_words.py`` (word lists, drifting Zipf vocabularies) and the bad
records from ``synthetic_defects.py``.

Examples
--------
>>> stream = SyntheticStream(SyntheticConfig(seed=7, n_docs=300))
>>> events = list(stream.events())
>>> first = events[0]
>>> first.kind, first.id, first.truth_labels
('train', 'syn-0000000', ('science',))
>>> len(scoring_ids(events)) == 300 - stream.config.warmup_docs
True
>>> bad = [e for e in events if not e.valid]
>>> [(e.kind, e.expected_reason.value) for e in bad]
[('train', 'too_many_labels'), ('train', 'too_many_labels'), ('train', 'bad_label'), ('train', 'invalid_utf8')]
"""
from __future__ import annotations

import heapq
import itertools
import json
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Literal

import numpy as np

from sgm.stream.records import DEFAULT_LIMITS, Limits, Op, Reason, TrainRecord, parse_train
from sgm.stream.synthetic_defects import Kind, MalformedRecords
from sgm.stream.synthetic_words import FUNCTION_WORDS, NEWS_TOPICS, SPAM_MARKERS, Lexicon, Vocabulary, lognormal_lengths

__all__ = [
    "Event",
    "SyntheticConfig",
    "SyntheticDoc",
    "SyntheticStream",
    "reference_training_set",
    "scoring_ids",
    "valid_training_records",
]


@dataclass(frozen=True, slots=True)
class SyntheticConfig:
    """Knobs of the generated stream; every default is a documented choice.

    Parameters
    ----------
    seed : int
        Same seed and config give the same stream, byte for byte.
    n_docs : int or None
        Documents to generate; ``None`` for an endless stream.
    profiles, profile_weights
        ``("news",)``, ``("spam",)`` or both; weights default to equal.
    n_topics : int
        News topics at the start (the first 16 have names such as ``business``).
    topic_vocab : int
        Active words per news topic at any time.
    topic_skew : float
        Topic prior ``~ 1/(rank+1)**topic_skew``: 0 is balanced, 1 is very skewed.
    topic_share, general_share, noise_share : float
        Fraction of a news document's tokens drawn from its topic(s), from a general
        vocabulary shared by all topics, and from one random other topic; the rest
        are English function words. Lower ``topic_share`` / higher ``noise_share`` =
        harder: with the defaults, multinomial naive Bayes trained on 8,000 documents
        classifies the next 1,000 about 94% right (spam profile: about 98%).
    general_vocab : int
        Words of the shared general vocabulary.
    multi_label_rate : float
        Fraction of news documents with two topics.
    news_length, message_length : float
        Mean tokens of a news document / a spam-or-ham message (log-normal lengths).
    spam_rate : float
        Fraction of ``spam`` among spam-profile messages.
    zipf_s, zipf_q : float
        Word frequencies within a content vocabulary follow Zipf-Mandelbrot,
        ``p(rank) ~ 1/(rank + zipf_q)**zipf_s`` (``zipf_q`` > 0 flattens the head).
    empty_rate : float
        Fraction of documents with empty text (valid; real datasets have them).
    drift_per_1k : float
        Words of every vocabulary replaced per 1,000 documents (0 = no drift). The
        default, 4, turns a 400-word topic vocabulary over in 100,000 documents.
    new_label_every, max_new_labels
        A new news topic is born every ``new_label_every`` documents, at most
        ``max_new_labels`` of them (``new_label_every=None``: never).
    start_ts, docs_per_second, ts_jitter
        Event time of the first document (epoch seconds), mean documents per second
        of event time, and relative jitter of inter-arrival times (< 1 keeps the
        times strictly increasing).
    ts_format : {"epoch", "iso", "mixed"}
        How ``ts`` is written: epoch seconds, ISO-8601 with offset, or a mix of
        epoch, ``Z``, ``+hh:mm`` and naive (UTC) forms.
    terms_rate : float
        Fraction of documents sent as ``terms`` (whitespace-split counts) instead of ``text``.
    warmup_docs : int
        First documents sent to training only, so the model is not empty when scoring starts.
    feedback_delay : int
        Documents between a document's scoring record and its training record.
    feedback_rate : float
        Fraction of scored documents whose labels come back for training.
    label_noise_rate, correction_delay
        Fraction of training records sent with a wrong label, and documents later the
        correction (``unlearn`` wrong + ``learn`` right) follows.
    forget_rate, forget_delay
        Fraction of trained documents later ``forget``-ed, and how many documents later.
    malformed_rate : float
        Probability, after each valid record, of one malformed record.
    malformed_reasons : tuple of Reason
        Which defects to inject (default: all). ``too_large`` and ``too_many_terms``
        records are big (about ``limits.max_text_chars`` bytes) and drawn 5x less often.
    limits : Limits
        The validator's limits: malformed records are built to break them, valid
        ones to respect them (long texts are cut at ``max_text_chars``).
    id_prefix : str
        Document ids are ``<id_prefix>-<7 digits>``, malformed ones ``<id_prefix>-bad-<7 digits>``.
    """

    seed: int = 0
    n_docs: int | None = 10_000
    profiles: tuple[str, ...] = ("news",)
    profile_weights: tuple[float, ...] | None = None
    n_topics: int = 8
    topic_vocab: int = 400
    topic_skew: float = 0.5
    topic_share: float = 0.15
    general_share: float = 0.25
    noise_share: float = 0.05
    general_vocab: int = 2_000
    multi_label_rate: float = 0.05
    news_length: float = 80.0
    message_length: float = 20.0
    spam_rate: float = 0.3
    zipf_s: float = 1.07
    zipf_q: float = 2.7
    empty_rate: float = 0.002
    drift_per_1k: float = 4.0
    new_label_every: int | None = 5_000
    max_new_labels: int = 4
    start_ts: float = 1_700_000_000.0
    docs_per_second: float = 50.0
    ts_jitter: float = 0.5
    ts_format: Literal["epoch", "iso", "mixed"] = "epoch"
    terms_rate: float = 0.0
    warmup_docs: int = 100
    feedback_delay: int = 50
    feedback_rate: float = 1.0
    label_noise_rate: float = 0.01
    correction_delay: int = 200
    forget_rate: float = 0.002
    forget_delay: int = 300
    malformed_rate: float = 0.005
    malformed_reasons: tuple[Reason, ...] = tuple(Reason)
    limits: Limits = field(default=DEFAULT_LIMITS)
    id_prefix: str = "syn"

    def __post_init__(self) -> None:
        unknown = set(self.profiles) - {"news", "spam"}
        if unknown or not self.profiles:
            raise ValueError(f"profiles must be a non-empty subset of ('news', 'spam'), got {self.profiles}")
        if self.profile_weights is not None and len(self.profile_weights) != len(self.profiles):
            raise ValueError("profile_weights must match profiles")
        if not 0 <= self.ts_jitter < 1:
            raise ValueError("ts_jitter must be in [0, 1) so that event times keep increasing")
        if self.docs_per_second <= 0:
            raise ValueError("docs_per_second must be > 0")
        if self.n_topics < 2 or self.n_topics + self.max_new_labels > 100:
            raise ValueError("need 2 <= n_topics and n_topics + max_new_labels <= 100")
        if min(self.topic_share, self.general_share, self.noise_share) < 0 or (
            self.topic_share + self.general_share + self.noise_share > 1
        ):
            raise ValueError("topic_share, general_share, noise_share must be >= 0 and sum to <= 1")
        for name in ("feedback_delay", "correction_delay", "forget_delay", "warmup_docs"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")


@dataclass(frozen=True, slots=True)
class SyntheticDoc:
    """One generated document with its true labels.

    Examples
    --------
    >>> doc = next(SyntheticStream(SyntheticConfig(seed=1, n_docs=1)).documents())
    >>> doc.id, doc.labels, doc.profile, doc.ts
    ('syn-0000000', ('politics',), 'news', 1700000000.0)
    >>> doc.text.split()[:3]
    ['this', 'miotriveas', 'be']
    """

    index: int
    id: str
    text: str
    labels: tuple[str, ...]
    ts: float
    profile: str
    as_terms: bool = False  # sent as a bag of words instead of text

    def terms(self) -> dict[str, int]:
        """Whitespace-split counts of :attr:`text` (the form used when ``as_terms``)."""
        return dict(Counter(self.text.split()))


@dataclass(frozen=True, slots=True)
class Event:
    """One record of the generated stream, in stream order.

    Parameters
    ----------
    seq : int
        Position in the stream (0, 1, 2, ...).
    kind : {"train", "score"}
        The topic the record goes to.
    value, key : bytes
        The Kafka value and key (the key is the document id).
    id : str
        Document id (for malformed records, the id the generator gave it).
    op : Op or None
        For valid training records, the operation.
    truth_labels : tuple of str
        The document's true labels (for a noisy ``learn`` they differ from the labels
        in ``value``; empty for ``forget`` and malformed records).
    expected_reason : Reason or None
        ``None`` for a valid record, else the reason the validator must reject it with.
    ts : float or None
        Event time carried by the record, epoch seconds.

    Examples
    --------
    >>> e = Event(seq=0, kind="score", value=b'{"id":"a","text":""}', key=b"a", id="a")
    >>> e.valid
    True
    """

    seq: int
    kind: Kind
    value: bytes
    key: bytes
    id: str
    op: Op | None = None
    truth_labels: tuple[str, ...] = ()
    expected_reason: Reason | None = None
    ts: float | None = None

    @property
    def valid(self) -> bool:
        return self.expected_reason is None


# ------------------------------------------------------------------ the generator


class SyntheticStream:
    """A seeded generator of labelled documents and of the event stream built on them.

    Parameters
    ----------
    config : SyntheticConfig
        The knobs; see :class:`SyntheticConfig`.

    Examples
    --------
    >>> s = SyntheticStream(SyntheticConfig(seed=3, n_docs=2000, profiles=("spam",), spam_rate=0.5))
    >>> sorted(Counter(d.labels[0] for d in s.documents()).items())
    [('ham', 1006), ('spam', 994)]
    >>> s.initial_labels()
    ('ham', 'spam')
    """

    BATCH = 512  # documents generated per numpy batch

    def __init__(self, config: SyntheticConfig | None = None) -> None:
        self.config = config or SyntheticConfig()

    # -- labels ---------------------------------------------------------------

    def topic_name(self, k: int) -> str:
        return NEWS_TOPICS[k] if k < len(NEWS_TOPICS) else f"topic-{k:02d}"

    def initial_labels(self) -> tuple[str, ...]:
        """Labels that exist from the first document on (sorted)."""
        labels: list[str] = []
        if "news" in self.config.profiles:
            labels += [self.topic_name(k) for k in range(self.config.n_topics)]
        if "spam" in self.config.profiles:
            labels += ["ham", "spam"]
        return tuple(sorted(labels))

    def new_labels(self) -> list[tuple[int, str]]:
        """``(document index, label)`` of every news topic born mid-stream."""
        c = self.config
        if "news" not in c.profiles or not c.new_label_every:
            return []
        births = [((j + 1) * c.new_label_every, self.topic_name(c.n_topics + j)) for j in range(c.max_new_labels)]
        return [(at, name) for at, name in births if c.n_docs is None or at < c.n_docs]

    # -- documents ------------------------------------------------------------

    def documents(self) -> Iterator[SyntheticDoc]:
        """The labelled documents, in event-time order."""
        c = self.config
        rng = np.random.default_rng([c.seed, 1])
        lexicon = Lexicon(c.seed)
        common = Vocabulary(lexicon, 0, len(FUNCTION_WORDS), 1.0, fixed=FUNCTION_WORDS)
        n_all_topics = c.n_topics + (c.max_new_labels if c.new_label_every else 0)
        general = Vocabulary(lexicon, 5, c.general_vocab, 1.0)
        topics = [Vocabulary(lexicon, 10 + k, c.topic_vocab, c.zipf_s, c.zipf_q) for k in range(n_all_topics)]
        ham = Vocabulary(lexicon, 1, 2 * c.topic_vocab, c.zipf_s, c.zipf_q)
        spam = Vocabulary(lexicon, 2, c.topic_vocab, c.zipf_s, c.zipf_q)
        markers = Vocabulary(lexicon, 3, len(SPAM_MARKERS), 0.8, fixed=SPAM_MARKERS)
        links = Vocabulary(lexicon, 4, 200, 0.6, make_word="odd")
        # vocabulary slots: 0 function words, 1 ham, 2 spam, 3 markers, 4 links, 5 general, 10+k topic k
        slots = {0: common, 1: ham, 2: spam, 3: markers, 4: links, 5: general}
        slots |= {10 + k: v for k, v in enumerate(topics)}
        prior = 1.0 / np.arange(1, c.n_topics + 1) ** c.topic_skew
        topic_prior = np.concatenate([prior, np.full(n_all_topics - c.n_topics, prior.mean())])
        profile_p = np.array(c.profile_weights or [1.0] * len(c.profiles), dtype=float)
        profile_p /= profile_p.sum()
        births = [at for at, _ in self.new_labels()]

        ts_us = int(round(c.start_ts * 1e6))
        step_us = 1e6 / c.docs_per_second
        index = 0
        while c.n_docs is None or index < c.n_docs:
            end = index + self.BATCH if c.n_docs is None else min(index + self.BATCH, c.n_docs)
            for at in births:  # the active topic set is constant within a batch
                if index < at < end:
                    end = at
            n = end - index
            n_active = c.n_topics + sum(at <= index for at in births)
            offset = int(index * c.drift_per_1k / 1000)

            profile = rng.choice(len(c.profiles), size=n, p=profile_p)
            is_news = np.array([c.profiles[p] == "news" for p in profile])
            p_active = topic_prior[:n_active] / topic_prior[:n_active].sum()
            first = rng.choice(n_active, size=n, p=p_active)
            second = (first + rng.integers(1, n_active, size=n)) % n_active  # always a different topic
            multi = is_news & (rng.random(n) < c.multi_label_rate)
            noise_topic = (first + rng.integers(1, n_active, size=n)) % n_active
            is_spam = ~is_news & (rng.random(n) < c.spam_rate)
            lengths = np.where(
                is_news, lognormal_lengths(rng, c.news_length, n), lognormal_lengths(rng, c.message_length, n)
            )
            lengths[rng.random(n) < c.empty_rate] = 0
            as_terms = rng.random(n) < c.terms_rate
            # integer microseconds: every ts format parses back to exactly the same float
            gaps = np.rint(step_us * (1.0 + c.ts_jitter * rng.uniform(-1.0, 1.0, n))).astype(np.int64).clip(min=1)
            if index == 0:
                gaps[0] = 0  # the first document is at start_ts
            stamps = ts_us + np.cumsum(gaps)
            ts_us = int(stamps[-1])

            # Per-document token mixture: up to 5 (vocabulary slot, share) components.
            comp_slot = np.zeros((n, 5), dtype=np.int64)
            comp_cum = np.ones((n, 5))
            topic_a = 10 + first
            topic_b = np.where(multi, 10 + second, topic_a)  # a single-topic document has topic_a == topic_b
            news_rows = np.flatnonzero(is_news)
            comp_slot[news_rows] = np.stack(
                [np.zeros_like(topic_a), np.full_like(topic_a, 5), topic_a, topic_b, 10 + noise_topic], axis=1
            )[news_rows]
            share_function = 1.0 - c.topic_share - c.general_share - c.noise_share
            comp_cum[news_rows] = np.cumsum(
                [share_function, c.general_share, c.topic_share / 2, c.topic_share / 2, c.noise_share]
            )
            ham_rows = np.flatnonzero(~is_news & ~is_spam)
            # ham and spam share the conversational vocabulary; ham borrows a few markers ("free", "call")
            comp_slot[ham_rows] = [0, 5, 1, 3, 3]
            comp_cum[ham_rows] = np.cumsum([0.45, 0.2, 0.33, 0.02, 0.0])
            spam_rows = np.flatnonzero(is_spam)
            comp_slot[spam_rows] = [0, 1, 2, 3, 4]
            comp_cum[spam_rows] = np.cumsum([0.38, 0.35, 0.13, 0.09, 0.05])
            comp_cum[:, -1] = 1.0  # guard against rounding

            doc_of_token = np.repeat(np.arange(n), lengths)
            u = rng.random(doc_of_token.size)
            component = (u[:, None] > comp_cum[doc_of_token]).sum(axis=1)
            token_slot = comp_slot[doc_of_token, component]
            word_u = rng.random(doc_of_token.size)
            token_word = np.empty(doc_of_token.size, dtype=np.int64)
            for slot in np.unique(token_slot):
                mask = token_slot == slot
                token_word[mask] = slots[int(slot)].sample(offset, word_u[mask])
            words = lexicon.lookup()[token_word].tolist()

            bounds = np.concatenate([[0], np.cumsum(lengths)]).tolist()
            first_l, second_l, multi_l, news_l, spam_l = (a.tolist() for a in (first, second, multi, is_news, is_spam))
            terms_l, stamps_l = as_terms.tolist(), stamps.tolist()
            max_chars = c.limits.max_text_chars
            for i in range(n):
                text = " ".join(words[bounds[i] : bounds[i + 1]])
                if len(text) > max_chars:  # valid documents must stay valid under the configured limits
                    text = text[: max_chars + 1].rsplit(" ", 1)[0][:max_chars]
                if news_l[i]:
                    labels = (self.topic_name(first_l[i]),)
                    if multi_l[i]:
                        labels += (self.topic_name(second_l[i]),)
                    profile_name = "news"
                else:
                    labels = ("spam",) if spam_l[i] else ("ham",)
                    profile_name = "spam"
                doc_index = index + i
                yield SyntheticDoc(
                    index=doc_index,
                    id=f"{c.id_prefix}-{doc_index:07d}",
                    text=text,
                    labels=labels,
                    ts=stamps_l[i] / 1e6,
                    profile=profile_name,
                    as_terms=terms_l[i],
                )
            index = end

    # -- events -----------------------------------------------------------------

    def events(self) -> Iterator[Event]:
        """The test-then-train event stream (see the module docstring).

        Per document, in order: training events that have come due are released;
        then the document goes to scoring (or, during warm-up, straight to
        training). After each valid record a malformed one may follow.
        """
        c = self.config
        rng = np.random.default_rng([c.seed, 2])
        seq = itertools.count()
        bad_ids = itertools.count()
        pending: list[tuple[int, int, str, SyntheticDoc, tuple[str, ...]]] = []  # (due, order, what, doc, labels)
        order = itertools.count()
        ts_writer = _TimestampWriter(c.ts_format, rng)
        active_topics = c.n_topics
        births = dict(self.new_labels())
        malformed = MalformedRecords(c.limits, c.malformed_reasons, rng)
        now = c.start_ts

        def emit(event_kind: Kind, doc: SyntheticDoc, op: Op | None, labels: tuple[str, ...] = (),
                 ts: float | None = None) -> Iterator[Event]:  # fmt: skip
            # The same field order as records.encode_train/encode_score, but ts in the configured format.
            obj: dict = {"id": doc.id}
            if op is not None:
                obj["op"] = op.value
            if op is not Op.FORGET:
                if op is not None:
                    obj["labels"] = list(labels)
                if doc.as_terms and len(terms := doc.terms()) <= c.limits.max_terms:
                    obj["terms"] = terms
                else:  # text always fits the limits
                    obj["text"] = doc.text
            ts = doc.ts if ts is None else ts
            obj["ts"] = ts_writer(ts)
            value = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
            truth = () if op is Op.FORGET else doc.labels
            yield Event(next(seq), event_kind, value, doc.id.encode(), doc.id, op, truth, None, ts)
            if c.malformed_rate and rng.random() < c.malformed_rate:
                bad_id = f"{c.id_prefix}-bad-{next(bad_ids):07d}"
                bad_kind, bad_value, reason = malformed.make(bad_id, obj, now)
                yield Event(next(seq), bad_kind, bad_value, bad_id.encode(), bad_id, None, (), reason, None)

        def wrong_labels(doc: SyntheticDoc) -> tuple[str, ...]:
            if doc.profile == "spam":
                return ("ham",) if doc.labels == ("spam",) else ("spam",)
            names = [self.topic_name(k) for k in range(active_topics)]
            choices = [name for name in names if name not in doc.labels]
            return (choices[int(rng.integers(len(choices)))],)

        def train(doc: SyntheticDoc, now_index: int) -> Iterator[Event]:
            labels = doc.labels
            if rng.random() < c.label_noise_rate:
                labels = wrong_labels(doc)
                heapq.heappush(pending, (now_index + c.correction_delay, next(order), "correct", doc, labels))
            elif rng.random() < c.forget_rate:
                heapq.heappush(pending, (now_index + c.forget_delay, next(order), "forget", doc, ()))
            yield from emit("train", doc, Op.LEARN, labels)

        def release(what: str, doc: SyntheticDoc, labels: tuple[str, ...], now_index: int) -> Iterator[Event]:
            if what == "learn":
                yield from train(doc, now_index)
            elif what == "correct":
                yield from emit("train", doc, Op.UNLEARN, labels)
                yield from emit("train", doc, Op.LEARN, doc.labels)
            else:  # forget: sent "now", so it carries the stream's current time
                yield from emit("train", doc, Op.FORGET, ts=now)

        last_index = -1
        for doc in self.documents():
            last_index = doc.index
            now = doc.ts
            if doc.index in births:
                active_topics += 1
            while pending and pending[0][0] <= doc.index:
                _, _, what, old, labels = heapq.heappop(pending)
                yield from release(what, old, labels, doc.index)
            if doc.index < c.warmup_docs:
                yield from train(doc, doc.index)
                continue
            yield from emit("score", doc, None)
            if rng.random() < c.feedback_rate:
                heapq.heappush(pending, (doc.index + c.feedback_delay, next(order), "learn", doc, ()))
        # Finite stream: deliver everything still pending, in due order, as if time went on.
        while pending:
            due, _, what, old, labels = heapq.heappop(pending)
            yield from release(what, old, labels, max(due, last_index + 1))


class _TimestampWriter:
    """Writes a float epoch time in the configured ``ts`` format."""

    def __init__(self, ts_format: str, rng: np.random.Generator) -> None:
        if ts_format not in ("epoch", "iso", "mixed"):
            raise ValueError(f"ts_format must be epoch, iso or mixed, got {ts_format!r}")
        self.ts_format = ts_format
        self.rng = rng

    def __call__(self, ts: float) -> float | str:  # type: ignore[return]
        style = self.ts_format
        if style == "mixed":
            style = ("epoch", "iso", "z", "offset", "naive")[int(self.rng.integers(5))]
        if style == "epoch":
            return ts
        moment = datetime.fromtimestamp(ts, timezone.utc)
        if style == "iso":
            return moment.isoformat()
        if style == "z":
            return moment.isoformat().replace("+00:00", "Z")
        if style == "naive":
            return moment.replace(tzinfo=None).isoformat()
        hours = int(self.rng.integers(-11, 13))
        return moment.astimezone(timezone(timedelta(hours=hours))).isoformat()


# ------------------------------------------------------------------------ helpers


def valid_training_records(events: Iterable[Event], limits: Limits = DEFAULT_LIMITS) -> Iterator[TrainRecord]:
    """The valid training records of ``events``, parsed, in stream order (all ops)."""
    for event in events:
        if event.kind == "train" and event.valid:
            yield parse_train(event.value, limits)


def reference_training_set(events: Iterable[Event], limits: Limits = DEFAULT_LIMITS) -> list[TrainRecord]:
    """What a model should have learnt once the whole stream is applied.

    ``learn`` adds a record under its id, ``unlearn`` removes the learnt record with
    the same labels, ``forget`` removes everything under the id. The result -- the
    surviving ``learn`` records, in the order they were last learnt -- is what a
    reference (batch) model is trained on to check the streaming one.

    Examples
    --------
    >>> events = list(SyntheticStream(SyntheticConfig(seed=0, n_docs=500, label_noise_rate=0.1)).events())
    >>> final = reference_training_set(events)
    >>> all(r.op is Op.LEARN for r in final)
    True
    >>> truth = {e.id: e.truth_labels for e in events if e.kind == "score"}
    >>> all(r.labels == truth[r.id] for r in final if r.id in truth)  # corrections applied
    True
    """
    learnt: dict[str, list[tuple[int, TrainRecord]]] = {}
    for position, record in enumerate(valid_training_records(events, limits)):
        if record.op is Op.LEARN:
            learnt.setdefault(record.id, []).append((position, record))
        elif record.op is Op.UNLEARN:
            kept = learnt.get(record.id, [])
            for i, (_, old) in enumerate(kept):
                if old.labels == record.labels and old.text == record.text and old.terms == record.terms:
                    del kept[i]
                    break
        else:
            learnt.pop(record.id, None)
    return [record for _, record in sorted(pair for pairs in learnt.values() for pair in pairs)]


def scoring_ids(events: Iterable[Event]) -> list[str]:
    """Ids of the valid scoring records, in stream order."""
    return [e.id for e in events if e.kind == "score" and e.valid]
