"""The bounded MIME reader on hand-written messages: what it reads, what it flags, where it stops.

Each test builds a small message that exercises one rule of ``sgm.model.mail.parse`` /
``sgm.model.mail.decode`` and checks the parts, texts, flags and counters against what the rule
says. The property and fuzz tests are in ``tests/test_mail_fuzz.py``.
"""
from __future__ import annotations

import base64

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sgm.model.mail import FLAGS, MailLimits, parse_message
from sgm.model.mail.parse import WorkStats, _Reader
from sgm.model.mail.decode import charset_codec, decode_base64, decode_header_text, decode_text


def multipart(subtype: str, boundary: str, *bodies: bytes, close: bool = True, headers: bytes = b"") -> bytes:
    out = headers + f"Content-Type: multipart/{subtype}; boundary=\"{boundary}\"\n\npreamble text\n".encode()
    for body in bodies:
        out += f"--{boundary}\n".encode() + body + b"\n"
    if close:
        out += f"--{boundary}--\nepilogue text\n".encode()
    return out


def leaf(ctype: str, body: bytes, *extra: str) -> bytes:
    head = f"Content-Type: {ctype}\n" + "".join(e + "\n" for e in extra)
    return head.encode() + b"\n" + body


# ---------------------------------------------------------------- header blocks
def test_folded_fields_mbox_line_and_case_insensitive_lookup():
    raw = (b"From sender@example.org  Mon Jun 25 13:11:28 2001\n"
           b"Subject: a long\n\tfolded\n   subject\nX-Thing:value:with:colons\n\nbody\n")
    msg = parse_message(raw)
    assert [name for name, _ in msg.headers] == ["Subject", "X-Thing"]
    assert msg.header("SUBJECT") == ["a long folded subject"]
    assert msg.header("x-thing") == ["value:with:colons"]
    assert msg.parts[0].text == "body\n" and msg.flags == ()


def test_crlf_line_ends_read_like_lf():
    lf = b"Subject: hi\nContent-Type: text/plain\n\nline one\nline two\n"
    crlf = lf.replace(b"\n", b"\r\n")
    a, b = parse_message(lf), parse_message(crlf)
    assert a.header("subject") == b.header("subject") and a.parts[0].text == b.parts[0].text


def test_eight_bit_and_encoded_word_headers():
    raw = "Subject: caf\u00e9 =?iso-8859-1?q?na=EFve?= =?utf-8?b?8J+SsA==?=\n\nx".encode("utf-8")
    msg = parse_message(raw)
    assert msg.header("subject") == ["caf\u00e9 na\u00efve\U0001f4b0"]
    latin = parse_message(b"Subject: caf\xe9\n\nx")
    assert latin.header("subject") == ["caf\u00e9"]  # not UTF-8: read as Windows-1252


def test_bad_encoded_word_is_flagged_and_kept_readable():
    flags: list[str] = []
    text = decode_header_text(b"=?utf-8?B?aGVsbG8*?= world", flags)
    assert text == "hello world" and "bad_encoded_word" in flags


def test_header_line_that_is_not_a_field_starts_the_body():
    msg = parse_message(b"Subject: x\nthis is not a header\nmore\n")
    assert "bad_header_line" in msg.flags
    assert msg.header("subject") == ["x"]
    assert msg.parts[0].text == "this is not a header\nmore\n"


def test_headers_without_a_body():
    msg = parse_message(b"Subject: only headers\nFrom: a@b.org")
    assert "no_body" in msg.flags
    assert msg.header("from") == ["a@b.org"] and msg.parts[0].text == ""


def test_header_limits_cut_and_flag():
    limits = MailLimits(max_headers=3, max_header_chars=20, max_header_bytes=200)
    many = b"".join(f"X-{i}: v\n".encode() for i in range(10)) + b"\nbody"
    msg = parse_message(many, limits)
    assert len(msg.headers) == 3 and "too_many_headers" in msg.flags and msg.parts[0].text == "body"
    long_value = b"Subject: " + b"a" * 100 + b"\n\nbody"
    msg = parse_message(long_value, limits)
    assert msg.header("subject") == ["a" * 20] and "long_header" in msg.flags
    huge_block = b"X-A: 1\n" + b"X-B: " + b"b" * 5000 + b"\n\nbody"
    msg = parse_message(huge_block, limits)
    assert "header_too_long" in msg.flags and msg.parts[0].text == "body"


# ---------------------------------------------------------------- MIME structure
def test_nested_multiparts_in_document_order_without_preamble_and_epilogue():
    inner = multipart("alternative", "in", leaf("text/plain", b"plain words"), leaf("text/html", b"<p>html</p>"))
    outer = multipart("mixed", "out", inner, leaf("application/pdf; name=a.pdf", b"%PDF-1.4"))
    msg = parse_message(outer)
    assert [(p.content_type, p.depth, p.parent) for p in msg.parts] == [
        ("multipart/mixed", 0, -1), ("multipart/alternative", 1, 0), ("text/plain", 2, 1), ("text/html", 2, 1),
        ("application/pdf", 1, 0)]
    assert [p.text for p in msg.parts] == [None, None, "plain words", "<p>html</p>", None]
    assert msg.parts[4].filename == "a.pdf"
    assert msg.stats.parts == 5 and msg.stats.depth == 2 and msg.flags == ()


def test_boundary_prefix_of_other_text_is_not_a_delimiter():
    body = multipart("mixed", "b", leaf("text/plain", b"--b is how it starts\n--bx not a boundary either"))
    msg = parse_message(body)
    assert msg.parts[1].text == "--b is how it starts\n--bx not a boundary either"
    assert msg.flags == ()


def test_transport_padding_after_a_boundary_is_allowed():
    raw = b"Content-Type: multipart/mixed; boundary=b\n\n--b  \t\n\nfirst\n--b--   \n"
    msg = parse_message(raw)
    assert [p.text for p in msg.parts] == [None, "first"] and msg.flags == ()


@pytest.mark.parametrize("raw, flag, texts", [
    (multipart("mixed", "b", leaf("text/plain", b"one"), close=False), "unterminated_multipart", [None, "one\n"]),
    (b"Content-Type: multipart/mixed; boundary=zz\n\nno delimiter here\n", "boundary_not_found",
     ["no delimiter here\n"]),
    (b"Content-Type: multipart/mixed\n\n--x\n\ntext\n", "multipart_without_boundary", ["--x\n\ntext\n"]),
    (b"Content-Type: garbage\n\nhello", "bad_content_type", ["hello"]),
])
def test_broken_structure_reads_what_it_can(raw, flag, texts):
    msg = parse_message(raw)
    assert flag in msg.flags
    assert [p.text for p in msg.parts] == texts


def test_digest_parts_default_to_message_rfc822_and_nested_messages_are_read():
    digest = multipart("digest", "d", b"\nSubject: inner\nContent-Type: text/plain\n\ninner text")
    msg = parse_message(digest)
    assert [p.content_type for p in msg.parts] == ["multipart/digest", "message/rfc822", "text/plain"]
    assert msg.parts[2].text == "inner text" and msg.parts[2].depth == 2


def test_part_and_depth_limits():
    many = multipart("mixed", "b", *[leaf("text/plain", f"part {i}".encode()) for i in range(20)])
    msg = parse_message(many, MailLimits(max_parts=5))
    assert msg.stats.parts == 5 and "too_many_parts" in msg.flags
    deep = leaf("text/plain", b"deepest")
    for level in range(12):
        deep = multipart("mixed", f"level{level}", deep)
    msg = parse_message(deep, MailLimits(max_depth=4))
    assert msg.stats.depth == 4 and "too_deep" in msg.flags
    assert not any(p.text == "deepest" for p in msg.parts)
    msg = parse_message(deep)
    assert msg.stats.depth == 8 and "too_deep" in msg.flags  # default max_depth


def test_rfc2231_filename_and_encoded_word_filename():
    part = (b"Content-Type: application/octet-stream\n"
            b"Content-Disposition: attachment; filename*=utf-8''r%C3%A9sum%C3%A9.doc\n\nxx")
    assert parse_message(part).parts[0].filename == "r\u00e9sum\u00e9.doc"
    split = b"Content-Type: image/gif; name*0=\"very\"; name*1=\"long.gif\"\n\nGIF89a"
    assert parse_message(split).parts[0].filename == "verylong.gif"
    encoded = b"Content-Type: image/gif; name=\"=?utf-8?q?caf=C3=A9.gif?=\"\n\nGIF89a"
    assert parse_message(encoded).parts[0].filename == "caf\u00e9.gif"


# ---------------------------------------------------------------- transfer encodings and charsets
def test_base64_quoted_printable_and_identity_bodies():
    text = "caf\u00e9 cr\u00e8me".encode("utf-8")
    b64 = leaf("text/plain; charset=utf-8", base64.encodebytes(text), "Content-Transfer-Encoding: base64")
    qp = leaf("text/plain; charset=utf-8", b"caf=C3=A9 cr=C3=A8me=\n", "Content-Transfer-Encoding: quoted-printable")
    for raw in (b64, qp):
        msg = parse_message(raw)
        assert msg.parts[0].text.strip() == "caf\u00e9 cr\u00e8me" and msg.flags == ()
    odd = parse_message(leaf("text/plain", b"x", "Content-Transfer-Encoding: x-gzip64"))
    assert odd.parts[0].text == "x" and "unknown_cte" in odd.flags


def test_broken_base64_is_decoded_leniently():
    flags: list[str] = []
    assert decode_base64(b"aGVsbG8gd29y!!bGQ=\n=\n", flags) == b"hello world" and flags == ["bad_base64"]
    flags = []
    assert decode_base64(b"aGVsbG8gd29ybGQ", flags) == b"hello world" and flags == []  # padding missing: fine
    flags = []
    assert decode_base64(b"aGVsbG8gd29ybGQhx", flags) == b"hello world!" and flags == ["bad_base64"]


@pytest.mark.parametrize("data, declared, text, flag", [
    ("caf\u00e9".encode("utf-8"), "us-ascii", "caf\u00e9", "charset_mismatch"),
    (b"caf\xe9", "us-ascii", "caf\u00e9", "charset_mismatch"),
    (b"caf\xe9", None, "caf\u00e9", "eight_bit_undeclared"),
    (b"caf\xe9", "x-bogus-charset", "caf\u00e9", "charset_unknown"),
    (b"\x93quoted\x94", "iso-8859-1", "\x93quoted\x94".replace("\x93", " ").replace("\x94", " "), None),
    ("\u4e2d\u6587".encode("gb2312"), "gb2312", "\u4e2d\u6587", None),
    ("\u4e2d\u6587".encode("utf-8"), "gb2312", "\u4e2d\u6587", "charset_mismatch"),
    (b"plain ascii", "zlib", "plain ascii", "charset_unknown"),
])
def test_declared_and_mislabeled_charsets(data, declared, text, flag):
    flags: list[str] = []
    assert decode_text(data, declared, flags) == text
    assert flags == ([flag] if flag else [])


def test_codecs_that_decompress_or_run_quadratic_are_never_selected():
    for name in ("zlib", "zlib_codec", "bz2", "base64", "hex", "uu", "rot13", "punycode", "idna", "unicode_escape",
                 "raw_unicode_escape", "quopri", "mbcs", "undefined"):
        assert charset_codec(name) is None, name
    assert charset_codec("UTF-8") == "utf_8" and charset_codec("ks_c_5601-1987") == "cp949"


def test_control_characters_never_reach_the_text():
    msg = parse_message(b"Subject: a\x01b\n\nnul\x00here \x1b[31mred\x7f\n")
    assert msg.header("subject") == ["a b"]
    assert msg.parts[0].text == "nul here  [31mred \n" and "nul_bytes" in msg.flags


def test_text_budget_is_shared_by_all_text_parts():
    raw = multipart("mixed", "b", leaf("text/plain", b"a" * 60), leaf("text/plain", b"b" * 60),
                    leaf("text/plain", b"c" * 60))
    msg = parse_message(raw, MailLimits(max_text_chars=100))
    assert [len(p.text) for p in msg.parts[1:]] == [60, 40, 0]
    assert msg.stats.text_chars == 100 and "text_truncated" in msg.flags


def test_input_cut_at_max_bytes():
    msg = parse_message(b"Subject: x\n\n" + b"y" * 1000, MailLimits(max_bytes=100))
    assert msg.stats.input_bytes == 1012 and msg.stats.bytes_read == 100
    assert "truncated_input" in msg.flags and len(msg.parts[0].text) == 88


def test_every_flag_raised_here_is_documented():
    assert {"truncated_input", "too_deep", "too_many_parts", "charset_mismatch"} <= set(FLAGS)
    assert all(FLAGS[name] for name in FLAGS)


def test_non_bytes_input_is_a_type_error():
    with pytest.raises(TypeError):
        parse_message("a str is not a message")  # type: ignore[arg-type]


_HEADER_LINES = st.sampled_from([b"Subject: hi", b"X-A:b", b"From : a@b.org", b" folded", b"\tmore  ", b"   ",
                                 b"\r", b"", b"no field here", b"X-Long: " + b"y" * 40, b" " + b"z" * 30,
                                 b"Bad Name: v", b"K:\r", b"X-" + b"n" * 250 + b": v",
                                 b"X-Big: " + b"v" * 280, b" " * 290 + b"x", b" " + b"w" * 290,
                                 b"X-Lead:" + b" " * 400 + b"q" * 200, b"X-Pad" + b" " * 260 + b": v"])


@settings(max_examples=300, deadline=None)
@example([b"X-Big: " + b"v" * 280, b" " * 290 + b"x"], b"\n\nbody", 300, 6, 2000)  # a continuation cut
@example([b"X-A:b", b" folded", b"\tmore  "], b"\n\nbody", 12, 6, 2000)  # a folded value too long
@example([b"X-Lead:" + b" " * 400 + b"q" * 200], b"\n\nbody", 300, 6, 2000)  # a field line cut
@example([b"X-A:b", b"X-A:b", b"X-A:b"], b"\n\nbody", 80, 2, 2000)  # too many fields
@example([b"X-A:b", b"X-Pad" + b" " * 260 + b": v"], b"\n\nbody", 600, 6, 2000)  # a colon past 256 bytes
@given(st.lists(_HEADER_LINES, max_size=12), st.sampled_from([b"", b"\n", b"\n\nbody", b"\nbody\n\nmore"]),
       st.sampled_from([4, 10, 12, 40, 80, 300, 600]), st.integers(1, 6), st.integers(20, 2000))
def test_plain_header_block_reads_what_the_line_reader_reads(lines, tail, max_chars, max_headers, max_bytes):
    """The shortcut for usual header blocks answers only where it gives the line-by-line reader's fields,
    body start, flags and counters (every limit near the lines' sizes, lone CR lines, bad lines, no body)."""
    data = b"\n".join(lines) + tail
    limits = MailLimits(max_header_chars=max_chars, max_headers=max_headers, max_header_bytes=max_bytes)
    fast, slow = _Reader(data, limits, WorkStats()), _Reader(data, limits, WorkStats())
    slow.plain_header_block = lambda start, end: None  # the line-by-line reader alone
    assert (fast.header_block(0, len(data)), fast.flags, fast.stats) == \
           (slow.header_block(0, len(data)), slow.flags, slow.stats)
