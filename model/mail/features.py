"""Raw email bytes -> the term -> count mapping every model accepts.

:class:`MailFeatures` (or the one-shot :func:`mail_features`) parses a
message within :class:`~sgm.model.mail.parse.MailLimits` and emits terms by
feature group:

===============  ======================================================  =====================
group            terms                                                   example
===============  ======================================================  =====================
``body``         words (and n-grams) of the Subject and the readable     ``cheap``, ``buy now``
                 text, by :class:`sgm.model.text.Tokenizer`, counted
``subject``      Subject words with case kept, punctuation runs,         ``subj:FREE``
                 encoded-word charsets
``headers``      field names as written, mailer, Message-ID and Date     ``hdr:X-Mailer``,
                 shapes, words of the other fields                       ``h.list-id:fans``
``addresses``    From/Reply-To/Return-Path/Sender/To/Cc domains, sender  ``from.dom:example.biz``
                 local parts and shapes, display names, relations
``received``     HELO, reverse DNS, IP prefixes of the earliest hops     ``rcvd.ip:203.0``
``html``         known tags and attributes, chosen attribute values,     ``val:font.color=#ff0000``
                 hidden styles, comments inside words
``urls``         URL schemes, host tails, IP hosts, path pieces, counts  ``url.host:example.com``
``mime``         content types, charsets, encodings, tree signature      ``mime.shape:...``
``attachments``  types, file names, extensions, sizes                    ``att.ext:exe``
``flags``        what was malformed (:data:`sgm.model.mail.flags.FLAGS`)  ``flag:bad_base64``
===============  ======================================================  =====================

Body words count as often as they occur (as for text documents); every other
term counts ``meta_weight`` once per message, whatever its repetitions (1,000
``<br>`` tags are one piece of evidence). Body words are exactly what
:class:`~sgm.model.text.Tokenizer` makes of the Subject, a blank line and the
text, so a model trained on the ``text`` form of a dataset shares their
vocabulary. Every other term has a ``prefix:`` no word token can contain.
Terms hold no control characters and are at most 128 characters long; at most
``max_terms`` distinct terms are kept (the others are dropped, ``too_many_terms``).

Pure and deterministic: the same bytes and options give the same mapping, in
the same order, in any process.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, Mapping

from ..text import Tokenizer
from .decode import sanitize
from .content import attachment_tokens, mime_tokens, read_bodies, url_tokens
from .flags import FLAGS
from .headers import address_tokens, field_index, header_tokens, received_tokens, subject_tokens
from .parse import MailLimits, WorkStats, parse_message

__all__ = ["GROUPS", "MAIL_CONFIG", "MailExtraction", "MailFeatures", "MailOptions", "mail_features",
           "with_meta_weight"]

#: Feature groups, in the order their terms are emitted.
GROUPS: tuple[str, ...] = ("flags", "subject", "headers", "addresses", "received", "mime", "attachments", "html",
                           "urls", "body")
_MAX_TERM_CHARS = 128


@dataclass(frozen=True)
class MailOptions:
    """What :class:`MailFeatures` extracts; a model configuration can carry it (``to_dict``).

    The defaults are the feature options of :data:`MAIL_CONFIG`, chosen on the
    development part of the SpamAssassin stream (``bench/mail_stream.py``).

    Parameters
    ----------
    ngrams : int
        Longest word n-gram of the body (1-3), as :class:`~sgm.model.text.Tokenizer`.
    groups : iterable of str
        Feature groups to emit (:data:`GROUPS`); kept in canonical order.
    meta_weight : float
        Count given to each non-body term (> 0).
    received_hops : int
        How many of the earliest ``Received`` hops to read (0 = all).
    limits : MailLimits
        Work bounds per message.

    Examples
    --------
    >>> opts = MailOptions(ngrams=1, groups=["body", "urls"])
    >>> opts.groups
    ('urls', 'body')
    >>> MailOptions.from_dict(opts.to_dict()) == opts
    True
    >>> MailOptions(groups=["bodies"])
    Traceback (most recent call last):
    ...
    ValueError: unknown feature groups ['bodies']; known: flags, subject, headers, addresses, received, mime, \
attachments, html, urls, body
    """

    ngrams: int = 3
    groups: tuple[str, ...] = GROUPS
    meta_weight: float = 4.48755
    received_hops: int = 2
    limits: MailLimits = field(default_factory=MailLimits)

    def __post_init__(self) -> None:
        groups = tuple(self.groups) if not isinstance(self.groups, str) else (self.groups,)
        unknown = sorted(set(groups) - set(GROUPS))
        if unknown:
            raise ValueError(f"unknown feature groups {unknown}; known: {', '.join(GROUPS)}")
        object.__setattr__(self, "groups", tuple(g for g in GROUPS if g in groups))
        if not (isinstance(self.ngrams, int) and 1 <= self.ngrams <= 3):
            raise ValueError(f"ngrams must be 1, 2 or 3, got {self.ngrams!r}")
        if not (isinstance(self.meta_weight, (int, float)) and 0 < self.meta_weight < float("inf")):
            raise ValueError(f"meta_weight must be a positive number, got {self.meta_weight!r}")
        if not (isinstance(self.received_hops, int) and 0 <= self.received_hops <= 100):
            raise ValueError(f"received_hops must be 0..100, got {self.received_hops!r}")
        if not isinstance(self.limits, MailLimits):
            raise ValueError("limits must be a MailLimits")

    def to_dict(self) -> dict[str, Any]:
        return {"ngrams": self.ngrams, "groups": list(self.groups), "meta_weight": self.meta_weight,
                "received_hops": self.received_hops, "limits": self.limits.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "MailOptions":
        unknown = set(data) - {"ngrams", "groups", "meta_weight", "received_hops", "limits"}
        if unknown:
            raise ValueError(f"unknown mail options: {sorted(unknown)}")
        return cls(ngrams=int(data.get("ngrams", cls.ngrams)), groups=tuple(data.get("groups", GROUPS)),
                   meta_weight=float(data.get("meta_weight", cls.meta_weight)),
                   received_hops=int(data.get("received_hops", cls.received_hops)),
                   limits=MailLimits.from_dict(data.get("limits") or {}))


#: The default mail configuration (the ``build_model`` dict plus the feature options under ``"mail"``),
#: chosen for 1-ROCA% on the first 25% of the SpamAssassin stream; numbers and protocol in
#: ``bench/mail_stream.py``. The heavy smoothing (beta near 1, large mu) and the meta_weight belong
#: together: change one and the others need searching again.
MAIL_CONFIG: dict[str, Any] = {
    "model": "uc_jm_dp_ps",
    "params": {"beta": 0.985104, "mu": 8635.77, "theta": 2.0, "ups": 0.0},
    "mail": {"ngrams": 3, "groups": list(GROUPS), "meta_weight": 4.48755, "received_hops": 2},
}


@dataclass
class MailExtraction:
    """One message's terms, flags (sorted names, :data:`~sgm.model.mail.flags.FLAGS`) and work counters.

    Examples
    --------
    >>> read = MailFeatures(MailOptions(ngrams=1)).extract(b"Subject: hi\\n\\nhello there")
    >>> read.terms["hello"], read.terms["subj:hi"], read.flags, read.stats.terms
    (1, 4.48755, (), 19)
    """

    terms: dict[str, float]
    flags: tuple[str, ...]
    stats: WorkStats


class MailFeatures:
    """A reusable extractor: ``MailFeatures(options)(raw_bytes) -> {term: count}``.

    Examples
    --------
    >>> raw = (b"From: Deals <deals@shop.example>\\nTo: you@example.org\\nSubject: FREE offer\\n"
    ...        b"Content-Type: text/html\\n\\n<p>Buy <b>now</b> at <a href=http://shop.example/x>shop</a></p>")
    >>> terms = MailFeatures(MailOptions(ngrams=1))(raw)
    >>> [t for t in terms if ":" not in t]  # body words, as the text tokenizer makes them
    ['free', 'offer', 'buy', 'now', 'at', 'shop']
    >>> terms["subj:FREE"], terms["from.dom:shop.example"], terms["url.host:shop.example"], terms["tag:b"]  # meta_weight
    (4.48755, 4.48755, 4.48755, 4.48755)
    >>> MailFeatures(MailOptions(groups=["body"], ngrams=2))(raw)
    {'free': 1, 'offer': 1, 'buy': 1, 'now': 1, 'at': 1, 'shop': 1, 'free offer': 1, 'offer buy': 1, \
'buy now': 1, 'now at': 1, 'at shop': 1}
    >>> MailFeatures().extract(b"Content-Type: multipart/mixed\\n\\n\\x00").flags
    ('multipart_without_boundary', 'nul_bytes')
    """

    def __init__(self, options: MailOptions | None = None) -> None:
        self.options = options or MailOptions()
        self.tokenizer = Tokenizer(ngrams=self.options.ngrams)

    def __repr__(self) -> str:
        return f"MailFeatures({self.options!r})"

    def __call__(self, raw: bytes) -> dict[str, float]:
        return self.extract(raw).terms

    def extract(self, raw: bytes) -> MailExtraction:
        """Terms, flags and work counters of one message; never raises on any ``bytes``."""
        opts = self.options
        limits = opts.limits
        groups = set(opts.groups)
        msg = parse_message(raw, limits)
        flags = list(msg.flags)
        weight = float(opts.meta_weight)
        max_terms = limits.max_terms
        dropped = False

        capacity = max(0, max_terms - len(FLAGS)) if "flags" in groups else max_terms  # room for the flags
        emitted: list[str] = []
        emit = emitted.append  # the groups' terms in order; cleaned, deduplicated and capped once below

        fields = msg.headers
        index = field_index(fields)
        header_flags: list[str] = []
        sink = emit if "subject" in groups else _ignore
        subject = subject_tokens(fields, sink, header_flags, index)
        if "headers" in groups:
            header_tokens(fields, emit, header_flags, index)
        if "addresses" in groups:
            address_tokens(fields, emit, header_flags, index)
        if "received" in groups:
            received_tokens(fields, emit, opts.received_hops, index)
        bodies = read_bodies(msg, limits.max_html_tags, limits.max_urls)
        if "mime" in groups:
            mime_tokens(msg, bodies, emit)
        if "attachments" in groups:
            attachment_tokens(msg, bodies, emit)
        if "html" in groups:
            for token in bodies.markup:
                emit(token)
        if "urls" in groups:
            msg.stats.urls = url_tokens(bodies.text, bodies.links, emit, limits.max_urls)
        msg.stats.html_tags = bodies.html_tags
        terms = dict.fromkeys(clean_terms(emitted), weight)  # first occurrence kept, as one by one
        if len(terms) > capacity:  # a new term arrived when the mapping was full: it and the later ones dropped
            dropped = True
            terms = dict(islice(terms.items(), capacity))
        flags = sorted(set(flags) | set(header_flags) | set(bodies.flags))
        if "body" in groups:
            words = self.tokenizer.tokens(subject + "\n\n" + bodies.text if subject else bodies.text)
            counted = Counter(words)  # first-occurrence order, as the word-by-word loop inserts them
            if len(terms) + len(counted) <= capacity:
                if terms.keys().isdisjoint(counted.keys()):  # always: body words hold no ':', other terms do
                    terms.update(counted)
                else:
                    for word, count in counted.items():
                        if word in terms:  # a header term's float weight: add 1 per occurrence, as the loop does
                            for _ in range(count):
                                terms[word] += 1
                        else:
                            terms[word] = count
            else:
                for word in words:
                    if word in terms:
                        terms[word] += 1
                    elif len(terms) < capacity:
                        terms[word] = 1
                    else:
                        dropped = True
        if dropped:
            flags = sorted(set(flags) | {"too_many_terms"})
        if "flags" in groups:  # first in the mapping: they are few and bounded
            flagged = {f"flag:{name}": weight for name in flags if name != "too_many_terms"}
            if flagged:
                terms = {**dict(list(flagged.items())[: max_terms - len(terms)]), **terms}
        msg.stats.terms = len(terms)
        return MailExtraction(terms, tuple(flags), msg.stats)


def clean_term(term: str) -> str:
    """``term`` as a feature: controls blanked, whitespace runs one space, at most 128 characters.

    >>> clean_term(" from.name:\\tcheap\\x00  meds "), clean_term("hdr:X-Mailer")
    ('from.name: cheap meds', 'hdr:X-Mailer')
    """
    # Printable text holds no control character nor lone surrogate (sanitize's targets) and no whitespace
    # but the ASCII space (split's separators): nothing below changes such a term when it is short and
    # single-spaced, and this test is much cheaper (every code point checked, tests/test_mail_features.py).
    if (len(term) <= _MAX_TERM_CHARS and term.isprintable() and "  " not in term
            and term[:1] != " " and term[-1:] != " "):
        return term
    return " ".join(sanitize(term[: 2 * _MAX_TERM_CHARS]).split())[:_MAX_TERM_CHARS].rstrip()


def clean_terms(terms: list[str]) -> list[str]:
    """``[clean_term(t) for t in terms]``, with one test of them all joined for the usual case where
    none changes: joined by ``|`` (printable, not a space), they are all printable iff the join is, no
    term holds two spaces iff the join does not, none starts (ends) with a space iff the join does not
    and holds no ``"| "`` (``" |"``).

    >>> clean_terms(["hdr:X-Mailer", "subj:FREE"]), clean_terms(["a:x", "b: \\x00y"])
    (['hdr:X-Mailer', 'subj:FREE'], ['a:x', 'b: y'])
    """
    if not terms:
        return terms
    joined = "|".join(terms)
    if (joined.isprintable() and "  " not in joined and "| " not in joined and " |" not in joined
            and joined[:1] != " " and joined[-1:] != " " and max(map(len, terms)) <= _MAX_TERM_CHARS):
        return terms
    return list(map(clean_term, terms))


def _ignore(term: str) -> None:
    return None


def with_meta_weight(unit_terms: Mapping[str, float], meta_weight: float) -> dict[str, float]:
    """Terms extracted with ``meta_weight=1.0``, as extraction with ``meta_weight`` gives them.

    Every non-body term counts ``meta_weight`` once and has a ``prefix:`` no body word has, so
    re-weighing is exact: tuning ``meta_weight`` extracts each message once, not once per point.

    >>> raw = b"Subject: FREE\\n\\nfree"
    >>> unit = MailFeatures(MailOptions(ngrams=1, meta_weight=1.0))(raw)
    >>> with_meta_weight(unit, 2.5) == MailFeatures(MailOptions(ngrams=1, meta_weight=2.5))(raw)
    True
    """
    weight = float(meta_weight)
    return {term: (weight if ":" in term else count) for term, count in unit_terms.items()}


def mail_features(raw: bytes, options: MailOptions | None = None) -> dict[str, float]:
    """The term -> count mapping of one raw message (a one-off :class:`MailFeatures`).

    Parameters
    ----------
    raw : bytes
        The message as received.
    options : MailOptions, optional

    Returns
    -------
    dict
        Term -> count, ready for ``MNB.learn_one(mapping, labels)`` / ``predict_proba_one(mapping)``.

    Examples
    --------
    >>> from sgm.model import MNB
    >>> m = MNB("uc_jm_dp_ps")
    >>> _ = m.learn_one(mail_features(b"Subject: cheap pills\\n\\nbuy now"), ["spam"])
    >>> _ = m.learn_one(mail_features(b"Subject: lunch\\nIn-Reply-To: <a@b.org>\\n\\nsee you at noon"), ["ham"])
    >>> max(m.predict_proba_one(mail_features(b"Subject: pills\\n\\nbuy")).items(), key=lambda kv: kv[1])[0]
    'spam'
    """
    return MailFeatures(options).extract(raw).terms
