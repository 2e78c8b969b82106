"""Header evidence: field-prefixed tokens for the ``headers``, ``addresses``, ``received``
and ``subject`` feature groups.

Each function takes the top-level fields of a parsed message and an ``emit``
callback, and emits tokens of the form ``prefix:value``. Word tokens never
contain ``:`` (the body tokenizer splits on punctuation), so these can never
collide with body words.

What is left out, and why (after SpamAssassin's Bayes ``IGNORED_HDRS`` and
SpamBayes's notes on header clues that only reflect how a corpus was
collected):

* :data:`IGNORED_HEADERS`: mailbox state written after delivery (``Status``,
  ``X-Keywords``, ``X-UID``...), the verdicts of other filters (``X-Spam-*``,
  ``X-SpamCop-*``...) and the delivery envelope of the receiving mailbox
  (``Delivered-To``, ``X-Original-To``...). None of these exists when a service
  sees a message arrive, and in a collected corpus they record how ham and spam
  were filed;
* in ``Received`` fields, the ``by`` host and the ``for`` recipient: they name
  the receiving side's own servers and mailbox, not the sender;
* values of date-like and identifier-like fields, and of mailing-list management
  fields (``List-*``, ``X-Mailman-Version``, ``X-BeenThere``, ``X-Loop``...): only
  their presence counts. A list carries spam and ham alike, and its words, present
  in every message it delivers, outweighed the content on the development stream
  (SpamAssassin's Bayes ignores these fields for the same reason).
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Callable

from ..text import Tokenizer
from .decode import decode_header_text

__all__ = ["IGNORED_HEADERS", "address_tokens", "domain_suffixes", "field_index", "header_tokens", "received_tokens",
           "shape", "subject_tokens"]

Emit = Callable[[str], None]
Fields = list[tuple[str, bytes]]

#: Field names (lower-case) never read; a trailing ``*`` matches any name with that prefix.
IGNORED_HEADERS: tuple[str, ...] = (
    # mailbox state written by the reader's mail programs
    "status", "x-status", "x-keywords", "x-uid", "x-uidl", "x-flags", "lines", "content-length", "replied",
    "forwarded", "x-vm-*", "x-mozilla-status*", "x-evolution*", "x-gmail-labels",
    # verdicts of other filters and scanners
    "x-spam*", "spam", "x-bogosity", "x-dspam*", "x-rspamd*", "x-spamcop*", "x-mailscanner*", "x-virus*",
    "x-antispam*", "x-antivirus*", "x-pyzor*", "x-dcc-*", "x-razor*", "x-mass-check-id", "x-rbl-warning",
    "x-perlmx-spam", "x-ms-exchange-organization-scl", "x-filtered-by", "x-scanned-by", "x-scanner",
    # the receiving mailbox's delivery envelope
    "delivered-to", "delivery-date", "x-original-to", "envelope-to", "x-envelope-to", "x-rcpt-to", "x-apparently-to",
)
_IGNORED_EXACT = frozenset(n for n in IGNORED_HEADERS if not n.endswith("*"))
_IGNORED_PREFIXES = tuple(n[:-1] for n in IGNORED_HEADERS if n.endswith("*"))

ADDRESS_FIELDS = {"from": "from", "reply-to": "replyto", "sender": "sender", "return-path": "retpath",
                  "errors-to": "errorsto", "to": "to", "cc": "cc"}
_RECIPIENT_FIELDS = ("to", "cc")
_NONE_WHEN_ABSENT = ("from", "to", "cc", "reply-to", "return-path")
_MAILER_FIELDS = ("x-mailer", "user-agent", "x-mimeole", "x-newsreader")
_OWN_GROUP = frozenset(ADDRESS_FIELDS) | {"subject", "received", "message-id", "date", "content-type",
                                          "content-transfer-encoding", "content-disposition", *_MAILER_FIELDS}
_PRESENCE_ONLY = re.compile(r"date|signature|fingerprint|face|index|correlator|references|in-reply-to|"
                            r"message-id|^x-uidl|thread-|^x-ms-has-attach|^dkim|^arc-|^x-google-|"
                            # mailing-list management: its words name the list a message came through, ham or spam
                            r"^list-|^x-list|mailing-list|^x-mailman|^x-beenthere|^x-loop|^x-egroups|mail-followup-to",
                            re.I)

_WORDS = Tokenizer()
_CASED_WORDS = Tokenizer(lowercase=False)
_ADDRESS = re.compile(r"([\w.+=!#$%&'*/?^`{|}~-]{1,64})@([A-Za-z0-9][A-Za-z0-9.-]{0,252})")
_NAME_JUNK = re.compile(r"<[^<>]{0,400}>|[\w.+=!#$%&'*/?^`{|}~-]{1,64}@[A-Za-z0-9.-]{1,253}|[\"()<>]")
_HOST = re.compile(r"[a-z0-9_-]{1,63}(?:\.[a-z0-9_-]{1,63}){0,10}")
# Written to start with a digit, which the engine skips to in C (a pattern that starts with a lookbehind, \b or
# re.I's case-folded letters is tried at every character): _IPV4 is r"(?<![\d.])(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.
# (\d{1,3})(?![\d.])", _BY r"\bby\s" and _WITH r"\bwith\s+([A-Za-z0-9-]{1,20})", both with re.I (its letter
# classes spelt out: the dotted and dotless i, the long s, the Kelvin sign); tests/test_mail_features.py checks.
_IPV4 = re.compile(r"(\d(?<![\d.]\d)\d{0,2})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?![\d.])")
_RECEIVED_FROM = re.compile(r"\s*from\s+(\S{1,255})(?:\s+\(([^()]{0,512})\))?", re.I)
_BY = re.compile(r"[Bb](?<!\w.)[Yy]\s")
_WITH = re.compile("[Ww](?<!\\w.)[Ii\u0130\u0131][Tt][Hh]\\s+([A-Za-z0-9\u0130\u0131\u017f\u212a-]{1,20})")
_MESSAGE_ID = re.compile(r"\s*<?([^<>@\s]{0,200})@([^<>@\s]{1,200})>")
_PUNCT_RUN = re.compile(r"[^\w\s]{2,8}")
_TZ = re.compile(r"(?:[+-]\d{4}|\b[A-Z]{1,5})\s*(?:\([^()]{0,40}\))?\s*$")
_SHAPE = [("A" if chr(c).isupper() else "a") if chr(c).isalpha() else ("9" if chr(c).isdigit() else chr(c))
          for c in range(128)]
_VERSION = re.compile(r"[\d.]+")
_NOT_NAME = re.compile(r"[^a-z0-9-]")
_NOT_TOKEN = re.compile(r"[^a-z0-9_-]")
_MAX_WORDS_PER_FIELD = 16
_MAX_ADDRESSES = 16


def shape(text: str, limit: int = 24) -> str:
    """Character-class shape with runs collapsed: upper ``A``, lower ``a``, digit ``9``, others kept.

    >>> shape("0000104257bd$00001f24$00007177"), shape("Sun, 24 Jun 2001 20:45:01 -0700")
    ('9a$9a9$9', 'Aa, 9 Aa 9 9:9:9 -9')
    """
    out: list[str] = []
    for ch in text:
        code = ord(ch)
        symbol = _SHAPE[code] if code < 128 else "u"
        if not out or out[-1] != symbol:
            out.append(symbol)
            if len(out) >= limit:
                break
    return "".join(out)


def domain_suffixes(host: str) -> list[str]:
    """The registrable-looking tails of a host (last two and three labels) and the host itself.

    >>> domain_suffixes("Mail.Example.co.UK."), domain_suffixes("localhost"), domain_suffixes("bad host")
    (['co.uk', 'example.co.uk', 'mail.example.co.uk'], ['localhost'], [])
    """
    return list(suffixes_of(host))


@lru_cache(maxsize=4096)  # hosts recur within and across messages (relays, senders, links)
def suffixes_of(host: str) -> tuple[str, ...]:
    """:func:`domain_suffixes` as a tuple, memoized."""
    host = host.strip().strip(".").lower()
    if not _HOST.fullmatch(host):
        return ()
    labels = host.split(".")
    out = [".".join(labels[-k:]) for k in (2, 3) if len(labels) >= k]
    if not out or out[-1] != host:
        out.append(host)
    return tuple(out)


def is_ignored(name: str) -> bool:
    """Whether a field is never read (:data:`IGNORED_HEADERS`).

    >>> is_ignored("X-Spam-Status"), is_ignored("Delivered-To"), is_ignored("X-Mailer")
    (True, True, False)
    """
    lower = name.lower()
    return lower in _IGNORED_EXACT or lower.startswith(_IGNORED_PREFIXES)


def field_index(fields: Fields) -> dict[str, list[bytes]]:
    """The raw values of ``fields`` by lower-case name, in order (what the groups look fields up in).

    >>> field_index([("To", b"a"), ("Subject", b"s"), ("to", b"b")])
    {'to': [b'a', b'b'], 'subject': [b's']}
    """
    index: dict[str, list[bytes]] = {}
    for name, value in fields:
        lower = name.lower()
        if lower in index:
            index[lower].append(value)
        else:
            index[lower] = [value]
    return index


_NAME_INFO_MAX = 4096  # field names as written whose decisions are kept (bounded: names can be invented)


@lru_cache(maxsize=_NAME_INFO_MAX)
def _name_info(name: str) -> tuple[bool, str | None]:
    """Whether a field is ignored, and the ``h.<name>:`` prefix of its words (``None``: its words are not read)."""
    lower = name.lower()
    ignored = is_ignored(lower)
    key = (None if lower in _OWN_GROUP or ignored or _PRESENCE_ONLY.search(lower)
           else "h." + _NOT_NAME.sub("", lower)[:40] + ":")
    return ignored, key


def _size_bucket(n: int) -> str:
    return str(n) if n <= 4 else "5-8" if n <= 8 else "9-16" if n <= 16 else "17+"


# ---------------------------------------------------------------- headers group
def header_tokens(fields: Fields, emit: Emit, flags: list[str], index: dict[str, list[bytes]] | None = None) -> None:
    """Field names as written (case kept), Message-ID host and shape, Date shape and zone,
    the mailer, and the words of every other field not ignored, as ``h.<name>:<word>``.

    >>> out = []
    >>> header_tokens([("X-Mailer", b"Foo Mail 2.1"), ("Message-Id", b"<1a2$b@mx.example.com>"),
    ...                ("List-Id", b"Fans <fans.example.org>"), ("Organization", b"Fans of Example"),
    ...                ("X-Spam-Status", b"No")], out.append, [])
    >>> out  # doctest: +NORMALIZE_WHITESPACE
    ['hdr:X-Mailer', 'hdr:Message-Id', 'hdr:List-Id', 'hdr:Organization', 'mailer:foo mail 2.1',
     'mailer.name:foo mail N', 'msgid.dom:example.com', 'msgid.dom:mx.example.com', 'msgid.shape:9a9$a', 'date:none',
     'h.organization:fans', 'h.organization:of', 'h.organization:example']
    """
    index = field_index(fields) if index is None else index
    infos = [_name_info(name) for name, _value in fields]
    for (name, _value), (ignored, _key) in zip(fields, infos):
        if not ignored:
            emit("hdr:" + name[:40])
    for field in _MAILER_FIELDS:
        for value in index.get(field, ())[:1]:
            text = " ".join(decode_header_text(value, flags).lower().split())[:60]
            if text:
                emit("mailer:" + text)
                emit("mailer.name:" + _VERSION.sub("N", text))
    ids = index.get("message-id", ())
    if not ids:
        emit("msgid:none")
    for value in ids[:1]:
        text = value.decode("latin-1").strip()
        match = _MESSAGE_ID.match(text)
        if match is None:
            emit("msgid:invalid")
            emit("msgid.shape:" + shape(text.strip("<>").split("@", 1)[0]))
        else:
            for suffix in suffixes_of(match.group(2)) or ("invalid",):
                emit("msgid.dom:" + suffix)
            emit("msgid.shape:" + shape(match.group(1)))
    dates = index.get("date", ())
    if not dates:
        emit("date:none")
    for value in dates[:1]:
        text = value.decode("latin-1").strip()
        emit("date.shape:" + shape(text, 32))
        zone = _TZ.search(text)
        emit("date.tz:" + (zone.group(0).split("(")[0].strip()[:8] if zone else "none"))
    for (_name, value), (_ignored, key) in zip(fields, infos):
        if key is None:
            continue
        for word in _WORDS.tokens(decode_header_text(value, flags))[:_MAX_WORDS_PER_FIELD]:
            emit(key + word)


# ---------------------------------------------------------------- addresses group
def address_tokens(fields: Fields, emit: Emit, flags: list[str], index: dict[str, list[bytes]] | None = None) -> None:
    """Sender and recipient addresses: domains (``from.dom:``), sender local parts and their
    shapes, display-name words, counts of recipients, absence, and whether Reply-To, Return-Path
    and Message-ID share the From domain.

    >>> out = []
    >>> address_tokens([("From", b'"Cheap Meds" <sales77@pharma.example.biz>'), ("To", b"a@x.org, b@x.org"),
    ...                 ("Reply-To", b"<drop@other.example.net>")], out.append, [])
    >>> out  # doctest: +NORMALIZE_WHITESPACE
    ['from.dom:example.biz', 'from.dom:pharma.example.biz', 'from.user:sales77', 'from.ushape:a9', 'from.name:cheap',
     'from.name:meds', 'replyto.dom:example.net', 'replyto.dom:other.example.net', 'replyto.user:drop',
     'replyto.ushape:a', 'replyto:noname', 'retpath:none', 'to.dom:x.org', 'to.dom:x.org', 'to.n:2', 'to:noname',
     'cc:none', 'rel.replyto:diff']
    """
    index = field_index(fields) if index is None else index
    first_domain: dict[str, str] = {}
    for field, prefix in ADDRESS_FIELDS.items():
        values = index.get(field, ())
        if not values:
            if field in _NONE_WHEN_ABSENT:
                emit(prefix + ":none")
            continue
        text = " , ".join(decode_header_text(v, flags) for v in values[:4])
        addresses = _ADDRESS.findall(text)[:_MAX_ADDRESSES]
        if field == "return-path" and not addresses and "<>" in text:
            emit("retpath:null")
        elif not addresses:
            emit(prefix + ":noaddr")
        for local, domain in addresses:
            domain = domain.rstrip(".-")
            suffixes = suffixes_of(domain)
            for suffix in suffixes:
                emit(f"{prefix}.dom:{suffix}")
            if suffixes:
                first_domain.setdefault(field, suffixes[0])
            if field not in _RECIPIENT_FIELDS:
                emit(f"{prefix}.user:{local.lower()[:32]}")
                emit(f"{prefix}.ushape:{shape(local)}")
        if field in _RECIPIENT_FIELDS:
            emit(f"{prefix}.n:{_size_bucket(len(addresses))}")
        name_words = _WORDS.tokens(_NAME_JUNK.sub(" ", text))[:8]
        for word in name_words:
            emit(f"{prefix}.name:{word}")
        if not name_words:
            emit(prefix + ":noname")
    ids = index.get("message-id", ())
    if ids:
        match = _MESSAGE_ID.match(ids[0].decode("latin-1"))
        suffixes = suffixes_of(match.group(2)) if match else ()
        if suffixes:
            first_domain["message-id"] = suffixes[0]
    sender = first_domain.get("from")
    if sender:
        for field, name in (("reply-to", "replyto"), ("return-path", "retpath"), ("message-id", "msgid")):
            if field in first_domain:
                emit(f"rel.{name}:{'same' if first_domain[field] == sender else 'diff'}")


# ---------------------------------------------------------------- received group
def received_tokens(fields: Fields, emit: Emit, hops: int = 2, index: dict[str, list[bytes]] | None = None) -> None:
    """Sender-side evidence of the ``Received`` chain: of the ``hops`` earliest hops (0 = all),
    the HELO name, reverse-DNS name and IP prefixes (/8 to /32) of the sending host, the protocol,
    "unknown" reverse DNS, HELO/reverse-DNS disagreement and sendmail's "may be forged"; plus
    the chain length. ``by`` hosts and ``for`` recipients are left out (the receiving side).

    >>> out = []
    >>> received_tokens([("Received", b"from mail.example.com (unknown [203.0.113.9]) by mx.local with ESMTP id 1"),
    ...                  ("Received", b"from helo.spam.example (host.isp.example [198.51.100.7]) by relay with SMTP")],
    ...                 out.append)
    >>> out  # doctest: +NORMALIZE_WHITESPACE
    ['rcvd.n:2', 'rcvd.helo:example.com', 'rcvd.helo:mail.example.com', 'rcvd.rdns:unknown', 'rcvd.ip:203',
     'rcvd.ip:203.0', 'rcvd.ip:203.0.113', 'rcvd.ip:203.0.113.9', 'rcvd.with:esmtp', 'rcvd.helo:spam.example',
     'rcvd.helo:helo.spam.example', 'rcvd.rdns:isp.example', 'rcvd.rdns:host.isp.example', 'rcvd.helo-rdns:diff',
     'rcvd.ip:198', 'rcvd.ip:198.51', 'rcvd.ip:198.51.100', 'rcvd.ip:198.51.100.7', 'rcvd.with:smtp']
    """
    chain = (field_index(fields) if index is None else index).get("received", [])
    emit("rcvd.n:" + _size_bucket(len(chain)))
    chosen = chain[-hops:] if hops > 0 else chain
    for value in chosen:
        text = value.decode("latin-1")[:1024]
        by = _BY.search(text)
        sender_side = text[: by.start()] if by else text
        match = _RECEIVED_FROM.match(sender_side)
        helo_suffixes: tuple[str, ...] = ()
        rdns_suffixes: tuple[str, ...] = ()
        if match:
            helo = match.group(1).strip("[]()")
            if _IPV4.fullmatch(helo):
                emit("rcvd.helo:ip")
            else:
                helo_suffixes = suffixes_of(helo)
                for suffix in helo_suffixes:
                    emit("rcvd.helo:" + suffix)
            inside = (match.group(2) or "").strip()
            rdns = inside.split("[", 1)[0].strip().split(" ", 1)[0] if inside else ""
            if rdns.lower() == "unknown":
                emit("rcvd.rdns:unknown")
            elif rdns and not _IPV4.fullmatch(rdns) and "." in rdns:
                rdns_suffixes = suffixes_of(rdns)
                for suffix in rdns_suffixes:
                    emit("rcvd.rdns:" + suffix)
        if helo_suffixes and rdns_suffixes:
            emit("rcvd.helo-rdns:" + ("same" if helo_suffixes[0] == rdns_suffixes[0] else "diff"))
        for ip in _IPV4.findall(sender_side)[:2]:
            if all(int(octet) <= 255 for octet in ip):
                for k in range(1, 5):
                    emit("rcvd.ip:" + ".".join(ip[:k]))
        protocol = _WITH.search(text)
        if protocol:
            emit("rcvd.with:" + protocol.group(1).lower())
        if "may be forged" in text.lower():
            emit("rcvd:forged")


# ---------------------------------------------------------------- subject group
def subject_tokens(fields: Fields, emit: Emit, flags: list[str], index: dict[str, list[bytes]] | None = None) -> str:
    """Subject words with case kept (``FREE`` is not ``free`` here), runs of punctuation
    (``!!!``, ``$$``), encoded-word charsets; returns the decoded subject.

    >>> out = []
    >>> subject_tokens([("Subject", b"=?iso-8859-1?q?FREE_cash!!!?=")], out.append, [])
    'FREE cash!!!'
    >>> out
    ['subj:FREE', 'subj:cash', 'subj.punct:!!!', 'subj.cs:iso-8859-1']
    """
    values = (field_index(fields) if index is None else index).get("subject", ())
    if not values:
        emit("subj:none")
        return ""
    charsets: list[str] = []
    subject = decode_header_text(values[0], flags, charsets)
    words = _CASED_WORDS.tokens(subject)[:64]
    if not words:
        emit("subj:empty")
    for word in words:
        emit("subj:" + word)
    for run in _PUNCT_RUN.findall(subject)[:8]:
        emit("subj.punct:" + run)
    for charset in charsets[:4]:
        emit("subj.cs:" + _NOT_TOKEN.sub("", charset)[:24])
    return subject
