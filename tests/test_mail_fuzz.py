"""Property and fuzz tests of the mail reader: hostile MIME never raises, stays inside its
work bounds, and gives the same terms for the same bytes.

* hypothesis builds MIME trees (nested multiparts, message/rfc822, random boundaries,
  transfer encodings, charsets valid, invalid and hostile, 8-bit and enormous header
  fields) and then damages them (truncation, cut-out ranges, inserted junk, repeated
  slices, NUL bytes), under the default limits and under small ones;
* a fixed hostile corpus pushes each bound far past its limit (thousands of nesting
  levels and parts, megabyte header lines and parts, pathological boundaries and HTML);
* every prefix of a real-looking message is read (truncation at every byte);
* atheris fuzzes ``MailFeatures.extract`` with coverage feedback for a few seconds
  (``python tests/test_mail_fuzz.py -atheris_runs=N`` runs it alone).

The bounds are checked on the counters the reader exposes (``WorkStats``), never on time.
"""
from __future__ import annotations

import base64
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

if __name__ == "__main__":  # run as the atheris harness: make the project importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sgm.model.mail import FLAGS, GROUPS, MailFeatures, MailLimits, MailOptions

DEFAULT = MailLimits()
SMALL = MailLimits(max_bytes=4_000, max_header_bytes=300, max_headers=6, max_header_chars=80, max_parts=5,
                   max_depth=2, max_text_chars=500, max_html_tags=10, max_urls=3, max_terms=60)
_UNSAFE_TERM = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
#: Each nesting level scans an entity's bytes a bounded number of times (header lines, the blank-line
#: search, the boundary search, decoding); the bound below is that, with room, per level.
SCANS_PER_LEVEL = 6


def check(raw: bytes, limits: MailLimits = DEFAULT, groups=GROUPS):
    """Extract twice; check determinism, term hygiene, flags and every work bound; return the extraction."""
    extractor = MailFeatures(MailOptions(limits=limits, groups=groups))
    first = extractor.extract(raw)
    again = extractor.extract(bytes(raw))
    assert list(first.terms.items()) == list(again.terms.items()) and first.flags == again.flags
    stats = first.stats
    assert stats.input_bytes == len(raw)
    assert stats.bytes_read <= min(len(raw), limits.max_bytes)
    assert 1 <= stats.parts <= limits.max_parts
    assert 0 <= stats.depth <= limits.max_depth
    assert stats.text_chars <= limits.max_text_chars
    assert stats.header_fields <= limits.max_headers * stats.parts
    assert stats.html_tags <= limits.max_html_tags
    assert stats.urls <= limits.max_urls
    assert stats.terms == len(first.terms) <= limits.max_terms
    read = min(len(raw), limits.max_bytes)
    assert stats.bytes_scanned <= SCANS_PER_LEVEL * (limits.max_depth + 2) * (read + 1) + 4096 * stats.parts, stats
    assert set(first.flags) <= set(FLAGS)
    for term, count in first.terms.items():
        assert isinstance(term, str) and 0 < len(term) <= 128 and not _UNSAFE_TERM.search(term), repr(term)
        assert term == term.strip() and "\n" not in term and "\t" not in term
        assert isinstance(count, (int, float)) and math.isfinite(count) and count > 0
        term.encode("utf-8")  # no lone surrogates
    return first


# ---------------------------------------------------------------- MIME trees from hypothesis
NAMES = ["Subject", "From", "To", "Cc", "Reply-To", "Return-Path", "Received", "Message-ID", "Date", "X-Mailer",
         "List-Id", "Content-Type", "Content-Disposition", "X-Spam-Status", "Sender", "User-Agent", "MIME-Version"]
CHARSETS = ["utf-8", "iso-8859-1", "us-ascii", "windows-1252", "gb2312", "koi8-r", "shift_jis", "utf-16", "utf-7",
            "x-unknown", "zlib", "punycode", "idna", "rot13", "bz2", "\"utf-8\"", "", "utf-8\x00", "é"]
CTES = ["7bit", "8bit", "binary", "base64", "quoted-printable", "x-uuencode", "gzip", ""]
SUBTYPES = ["mixed", "alternative", "related", "digest", "signed", "report"]
LEAF_TYPES = ["text/plain", "text/html", "text/enriched", "image/gif", "application/octet-stream",
              "application/x-msdownload", "message/rfc822", "text", "/", "multipart/mixed"]
HOSTILE_VALUES = [b"=?utf-8?B?!!!?=", b"=?x-bogus?Q?caf=E9?=", b"=?utf-8?q?" + b"=FF" * 50 + b"?=",
                  b"<a@b>, \"Name, Inc\" <c@d.example>, (comment) e@f", b"from [1.2.3.4] (helo=[5.6.7.8]) by x",
                  b"<<<<@@@@>>>>", b"\xff\xfe\xfd", b"\x00\x01\x02", b"a" * 3000, b"http://[::1]:99999/%zz",
                  b"=?utf-8?b?" + base64.b64encode("\ud7ff".encode("utf-8", "surrogatepass")) + b"?="]

header_value = st.one_of(st.binary(max_size=120), st.text(max_size=80).map(lambda t: t.encode("utf-8", "replace")),
                         st.sampled_from(HOSTILE_VALUES))
header_name = st.one_of(st.sampled_from(NAMES), st.from_regex(r"[!-9;-~]{1,30}", fullmatch=True),
                        st.binary(min_size=1, max_size=20))
html_fragment = st.lists(st.sampled_from([
    "<p>", "</p>", "<br>", "<a href=\"http://x.example/a?b=c\">", "</a>", "<!--", "-->", "<script>", "</script>",
    "<style>", "<font color=#ff0000 size=1>", "<img src='cid:x' width=0>", "&#65;&amp;&nbsp;", "<", ">", "<<a",
    "<div style=\"display:none\">", "FR", "EE", " word ", "www.example.com/x", "mailto:a@b.example", "\u4e2d",
]), max_size=40).map("".join)
body_text = st.one_of(st.text(max_size=300), html_fragment, st.binary(max_size=300).map(lambda b: b.decode("latin-1")))


@st.composite
def leaf_part(draw):
    ctype = draw(st.sampled_from(LEAF_TYPES))
    charset = draw(st.sampled_from(CHARSETS))
    cte = draw(st.sampled_from(CTES))
    text = draw(body_text)
    codec = {"utf-16": "utf-16", "gb2312": "gb2312", "koi8-r": "koi8-r", "shift_jis": "shift_jis"}.get(charset, "utf-8")
    payload = text.encode(codec, "replace")
    if cte == "base64" and draw(st.booleans()):
        payload = base64.encodebytes(payload)
    elif cte == "quoted-printable" and draw(st.booleans()):
        import quopri
        payload = quopri.encodestring(payload)
    headers = f"Content-Type: {ctype}; charset=\"{charset}\"".encode("utf-8", "replace")
    if draw(st.booleans()):
        headers += b"; name=\"" + draw(st.sampled_from([b"a.pdf.exe", b"x.gif", b"\xe9t\xe9.doc", b"=?utf-8?q?a?="]))
        headers += b"\"\nContent-Disposition: attachment"
    return headers + f"\nContent-Transfer-Encoding: {cte}\n\n".encode() + payload


def render(node) -> bytes:
    if isinstance(node, bytes):
        return node
    subtype, boundary, children, close, preamble = node
    out = f"Content-Type: multipart/{subtype}; boundary=\"{boundary}\"\n\n".encode("utf-8", "replace") + preamble
    for child in children:
        out += b"\n--" + boundary.encode("utf-8", "replace") + b"\n" + render(child)
    if close:
        out += b"\n--" + boundary.encode("utf-8", "replace") + b"--\n"
    return out


mime_tree = st.recursive(
    leaf_part(),
    lambda children: st.tuples(st.sampled_from(SUBTYPES),
                               st.one_of(st.sampled_from(["b", "=_x", "----=_NextPart_000", "-", "a b", "\u00e9"]),
                                         st.text(min_size=1, max_size=12)),
                               st.lists(children, max_size=4), st.booleans(), st.binary(max_size=20)),
    max_leaves=10)


@st.composite
def message(draw):
    fields = draw(st.lists(st.tuples(header_name, header_value), max_size=12))
    head = b""
    for name, value in fields:
        name = name.encode("utf-8", "replace") if isinstance(name, str) else name
        fold = b"\n\t" if draw(st.booleans()) else b""
        head += name + b": " + value[: len(value) // 2] + fold + value[len(value) // 2:] + b"\n"
    if draw(st.booleans()):
        head = b"From someone@example.org Mon Jun 25 13:11:28 2001\n" + head
    raw = head + render(draw(mime_tree))
    for _ in range(draw(st.integers(0, 3))):  # damage
        op = draw(st.sampled_from(["truncate", "cut", "insert", "repeat", "crlf", "nul"]))
        at = draw(st.integers(0, max(0, len(raw))))
        if op == "truncate":
            raw = raw[:at]
        elif op == "cut":
            raw = raw[:at] + raw[at + draw(st.integers(1, 50)):]
        elif op == "insert":
            raw = raw[:at] + draw(st.binary(max_size=30)) + raw[at:]
        elif op == "repeat":
            raw = raw[:at] + raw[at:at + 40] * draw(st.integers(2, 20)) + raw[at:]
        elif op == "crlf":
            raw = raw.replace(b"\n", b"\r\n")
        else:
            raw = raw[:at] + b"\x00" + raw[at:]
    return raw


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(message())
def test_hostile_mime_never_raises_and_stays_bounded(raw):
    check(raw)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(message())
def test_hostile_mime_under_small_limits(raw):
    check(raw, SMALL)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=4000))
def test_random_bytes(raw):
    check(raw)
    check(raw, SMALL)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(message(), st.lists(st.sampled_from(GROUPS), max_size=4))
def test_groups_only_remove_terms(raw, dropped):
    """A subset of groups gives a subset of the terms with the same counts (groups are independent)."""
    everything = check(raw).terms
    fewer = check(raw, groups=[g for g in GROUPS if g not in dropped]).terms
    assert all(everything[t] == c for t, c in fewer.items())


# ---------------------------------------------------------------- a fixed hostile corpus
def nested_multipart(levels: int) -> bytes:
    raw = b"Content-Type: text/plain\n\ninnermost"
    for level in range(levels):
        raw = f"Content-Type: multipart/mixed; boundary=L{level}\n\n--L{level}\n".encode() + raw + \
            f"\n--L{level}--\n".encode()
    return raw


def nested_messages(levels: int) -> bytes:
    raw = b"Subject: innermost\n\ntext"
    for _ in range(levels):
        raw = b"Content-Type: message/rfc822\n\n" + raw
    return raw


HOSTILE = {
    "empty": b"",
    "blank lines": b"\n\n\n",
    "crlf only": b"\r\n\r\n",
    "headers only": b"Subject: x\nFrom: a@b",
    "2000 nested multiparts": nested_multipart(2000),
    "3000 nested messages": nested_messages(3000),
    "20000 parts": b"Content-Type: multipart/mixed; boundary=b\n\n" + b"--b\n\nx\n" * 20000,
    "delimiters only": b"Content-Type: multipart/mixed; boundary=b\n\n" + b"--b\n" * 100000,
    "dash boundary over dashes": b"Content-Type: multipart/mixed; boundary=\"-\"\n\n" + b"-" * 300000,
    "long boundary prefix storm": (b"Content-Type: multipart/mixed; boundary=\"" + b"=" * 70 + b"\"\n\n"
                                   + (b"--" + b"=" * 69 + b"x\n") * 5000),
    "3 MB part": b"Subject: big\n\n" + b"word " * 600000,
    "2 MB header line": b"Subject: " + b"s" * 2_000_000 + b"\n\nbody",
    "2 MB header, no newline": b"X-Junk: " + b"j" * 2_000_000,
    "100k continuation lines": b"Subject: a\n" + b" b\n" * 100000 + b"\nbody",
    "100k fields": b"".join(b"X-%d: v\n" % i for i in range(100000)) + b"\nbody",
    "nul bytes": b"Sub\x00ject: \x00\x00\n\n\x00" * 1000,
    "8-bit everything": bytes(range(128, 256)) * 2000,
    "broken base64": b"Content-Transfer-Encoding: base64\n\n" + b"!@#$%^&*()" * 50000 + b"QUJD=",
    "broken quoted-printable": b"Content-Transfer-Encoding: quoted-printable\n\n" + b"=Z=\n=" * 100000,
    "hostile charsets": b"".join(b"Content-Type: text/plain; charset=%s\n" % c for c in
                                 (b"zlib", b"bz2_codec", b"punycode", b"idna", b"unicode_escape", b"x" * 5000))
    + b"\n\xff\xfe" * 1000,
    "charset per message": b"Content-Type: text/plain; charset=invented-%d\n\n\xe9" % 12345,
    "200k angle brackets": b"Content-Type: text/html\n\n" + b"<" * 200000,
    "100k open comments": b"Content-Type: text/html\n\n" + b"<!--" * 100000,
    "100k unclosed tags": b"Content-Type: text/html\n\n" + b"<a href=x " * 100000,
    "50k tags": b"Content-Type: text/html\n\n" + b"<b>w</b>" * 50000,
    "script never ends": b"Content-Type: text/html\n\n<p>hi<script>" + b"x" * 100000,
    "100k urls": b"Subject: u\n\n" + b"".join(b"http://h%d.example/p " % i for i in range(100000)),
    "html as text/plain": b"Subject: x\n\n<html><body><font size=1>hidden</font></body></html>",
    "huge filename": b"Content-Type: application/x; name=\"" + b"n" * 100000 + b"\"\n\nx",
    "many params": b"Content-Type: text/plain" + b"; a=\"" * 5000 + b"\n\nx",
    "received storm": b"".join(b"Received: from [%d.%d.1.1] (x [1.2.3.4]) by y\n" % (i % 256, i % 7)
                               for i in range(5000)) + b"\nx",
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_corpus(name):
    raw = HOSTILE[name]
    for limits in (DEFAULT, SMALL):
        check(raw, limits)


def test_the_hostile_corpus_hits_each_bound():
    """The corpus reaches every limit (so the bound checks above are exercised, not vacuous)."""
    flags = {name: set(MailFeatures().extract(raw).flags) for name, raw in HOSTILE.items()}
    assert "too_deep" in flags["2000 nested multiparts"] and "too_deep" in flags["3000 nested messages"]
    assert "too_many_parts" in flags["20000 parts"] and "too_many_parts" in flags["delimiters only"]
    assert "truncated_input" in flags["3 MB part"] and "text_truncated" in flags["3 MB part"]
    assert {"header_too_long", "long_header"} & flags["2 MB header line"]
    assert "too_many_headers" in flags["100k fields"] and "long_header" in flags["100k continuation lines"]
    assert "html_too_many_tags" in flags["50k tags"] and "html_unterminated" in flags["script never ends"]
    assert "nul_bytes" in flags["nul bytes"] and "bad_base64" in flags["broken base64"]
    assert "charset_unknown" in flags["hostile charsets"] and "no_body" in flags["headers only"]
    stats = MailFeatures().extract(HOSTILE["100k urls"]).stats
    assert stats.urls == DEFAULT.max_urls
    many_words = b"Subject: w\n\n" + b" ".join(b"w%d" % i for i in range(5000))
    for limits in (SMALL, MailLimits(max_terms=1000)):
        capped = MailFeatures(MailOptions(limits=limits)).extract(many_words)
        assert "too_many_terms" in capped.flags and len(capped.terms) <= limits.max_terms
        assert len(capped.terms) >= limits.max_terms - len(FLAGS)  # the room kept for flags is all it loses


def test_invented_charset_names_do_not_grow_the_codec_cache():
    """Charset names from messages never reach codecs.lookup (its search cache keeps every name)."""
    import encodings

    before = len(encodings._cache)
    for i in range(300):
        MailFeatures().extract(b"Content-Type: text/plain; charset=made-up-%d\n\n\xe9" % i)
    assert len(encodings._cache) == before


SAMPLE = (b"From: \"Shop\" <deals@shop.example>\nTo: you@example.org\nSubject: =?utf-8?q?Caf=C3=A9?= deals\n"
          b"Received: from mx.shop.example (mx.shop.example [198.51.100.4]) by in.example.org with ESMTP\n"
          b"Content-Type: multipart/alternative; boundary=\"==b\"\n\n--==b\n"
          b"Content-Type: text/plain; charset=iso-8859-1\nContent-Transfer-Encoding: quoted-printable\n\n"
          b"Buy now at http://shop.example/x?y=1 caf=E9\n--==b\nContent-Type: text/html\n"
          b"Content-Transfer-Encoding: base64\n\n" + base64.encodebytes(b"<p>Buy <b>now</b></p>") + b"--==b--\n")


def test_every_prefix_of_a_message():
    for end in range(len(SAMPLE) + 1):
        check(SAMPLE[:end])


# ---------------------------------------------------------------- atheris (coverage-guided)
FUZZ_SECONDS = 10


@pytest.mark.slow
def test_atheris_fuzz_of_the_mail_reader():
    pytest.importorskip("atheris")
    result = subprocess.run([sys.executable, __file__, f"-max_total_time={FUZZ_SECONDS}", "-atheris_runs=500000"],
                            capture_output=True, text=True, timeout=FUZZ_SECONDS + 120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Done" in result.stderr or "fuzz runs" in result.stdout + result.stderr


def _fuzz_main() -> None:  # pragma: no cover - runs in a subprocess under atheris
    import importlib

    import atheris

    for name in ("parse", "decode", "html", "headers", "content", "features"):  # coverage feedback from the reader
        module = importlib.import_module(f"sgm.model.mail.{name}")
        for value in list(vars(module).values()):
            if getattr(value, "__module__", None) != module.__name__:
                continue
            if isinstance(value, type):
                for attr, member in list(vars(value).items()):
                    if hasattr(member, "__code__"):
                        setattr(value, attr, atheris.instrument_func(member))
            elif hasattr(value, "__code__"):
                setattr(module, value.__name__, atheris.instrument_func(value))
    for name in ("parse", "decode", "html", "headers", "content", "features"):  # rebind imported names
        module = importlib.import_module(f"sgm.model.mail.{name}")
        for attr, value in list(vars(module).items()):
            source = getattr(value, "__module__", "")
            if source.startswith("sgm.model.mail.") and source != module.__name__ and hasattr(value, "__name__"):
                setattr(module, attr, getattr(importlib.import_module(source), value.__name__, value))
    corpus_seed = [SAMPLE, *list(HOSTILE.values())[:6]]

    def one_input(data: bytes) -> None:
        if data[:1] == b"\x01":  # splice a seed message with the fuzzer's bytes
            seed = corpus_seed[data[1] % len(corpus_seed)] if len(data) > 1 else SAMPLE
            at = int.from_bytes(data[2:4] or b"\0", "little") % (len(seed) + 1)
            data = seed[:at] + data[4:] + seed[at:]
        check(data, SMALL if data[-1:] == b"s" else DEFAULT)

    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    _fuzz_main()
