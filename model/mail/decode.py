"""Bytes to text for mail: transfer encodings, charsets and RFC 2047 encoded words.

Every function here is total: hostile input gives the text that can be read
plus flag names (see :data:`sgm.model.mail.flags.FLAGS`), never an exception.
Work is linear in the input: each decoder is one pass of a C-level primitive
(``binascii``, ``bytes.decode``, a regular expression whose pattern cannot
backtrack beyond a bounded window).

Charsets are resolved through a fixed table built at import time from the
codecs that decode text (no ``punycode`` or ``idna`` whose decoders are
quadratic, no ``*_escape``, and no bytes-to-bytes codecs such as ``zlib_codec``
or ``bz2_codec``: decompression is never reachable from a message). The table
is also why :func:`codecs.lookup` is never called with a name taken from a
message: the standard library's search function caches every name it is asked
for, so a stream of invented charset names would grow process memory without
bound.
"""
from __future__ import annotations

import binascii
import re
from encodings.aliases import aliases as _ALIASES

__all__ = ["charset_codec", "decode_base64", "decode_header_text", "decode_quoted_printable", "decode_text",
           "sanitize"]

# Codecs a message may select. Single-byte codecs never fail to decode, so a body that is valid UTF-8
# under one of them is taken as mislabeled UTF-8 (see decode_text).
_SINGLE_BYTE = {
    "ascii", "latin_1", "cp037", "cp1026", "cp1125", "cp1140", "cp273", "cp424", "cp437", "cp500", "cp720", "cp737",
    "cp775", "cp850", "cp852", "cp855", "cp856", "cp857", "cp858", "cp860", "cp861", "cp862", "cp863", "cp864",
    "cp865", "cp866", "cp869", "cp874", "cp875", "hp_roman8", "koi8_r", "koi8_t", "koi8_u", "kz1048",
    "mac_cyrillic", "mac_greek", "mac_iceland", "mac_latin2", "mac_roman", "mac_turkish", "ptcp154", "tis_620",
    *(f"cp125{i}" for i in range(9)), *(f"iso8859_{i}" for i in range(1, 17) if i != 12),
}
_MULTI_BYTE = {
    "utf_8", "utf_7", "utf_16", "utf_16_be", "utf_16_le", "utf_32", "utf_32_be", "utf_32_le", "big5", "big5hkscs",
    "cp932", "cp949", "cp950", "euc_jis_2004", "euc_jisx0213", "euc_jp", "euc_kr", "gb18030", "gb2312", "gbk", "hz",
    "iso2022_jp", "iso2022_jp_1", "iso2022_jp_2", "iso2022_jp_2004", "iso2022_jp_3", "iso2022_jp_ext", "iso2022_kr",
    "johab", "shift_jis", "shift_jis_2004", "shift_jisx0213",
}


def _key(name: str) -> str:
    return "".join(c for c in name.lower() if c.isascii() and c.isalnum())


def _build_table() -> dict[str, str]:
    table = {_key(codec): codec for codec in _SINGLE_BYTE | _MULTI_BYTE}
    for alias, codec in _ALIASES.items():
        if codec in _SINGLE_BYTE or codec in _MULTI_BYTE:
            table.setdefault(_key(alias), codec)
    # names seen in mail that the aliases lack
    table.update({"windows1252": "cp1252", "xsjis": "shift_jis", "sjis": "shift_jis", "xeuckr": "euc_kr",
                  "ksc5601": "cp949", "ksc56011987": "cp949", "iso88598i": "iso8859_8", "iso88596i": "iso8859_6", "xmacroman": "mac_roman",
                  "xmaccyrillic": "mac_cyrillic", "cp1252": "cp1252", "xgbk": "gbk", "gb231280": "gb2312",
                  "xeucjp": "euc_jp", "xunicode20utf8": "utf_8", "unicode11utf8": "utf_8", "xuserdefined": "cp1252"})
    return table


_CHARSETS = _build_table()
_CHARSET_NAME_MAX = 40

# C0 and C1 controls (tab, newline and carriage return kept) and lone surrogates (utf_7 and utf_16 can
# produce them): terms may not hold control characters and must encode as UTF-8.
_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
_B64_KEEP = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_B64_DELETE = bytes(b for b in range(256) if b not in _B64_KEEP)
_B64_NOISE = bytes(b for b in _B64_DELETE if b not in b" \t\r\n=")
_QP_BAD = re.compile(rb"=(?![0-9A-Fa-f]{2}|[ \t]*(?:\r?\n|$))")
_ENCODED_WORD = re.compile(r"=\?([^?\s]{1,40})\?([bBqQ])\?([^?\s]{0,2000})\?=")
_BETWEEN_WORDS = re.compile(r"\?=[ \t\r\n]+=\?")


def sanitize(text: str) -> str:
    """Replace control characters and lone surrogates by spaces.

    >>> sanitize("a\\x00b\\u0085c\\ud800d\\te")
    'a b c d\\te'
    """
    return _UNSAFE.sub(" ", text)


def charset_codec(name: str | None) -> str | None:
    """The codec a declared charset name selects, or ``None`` (absent, unknown or not allowed).

    >>> charset_codec('"ISO-8859-1"'), charset_codec("Windows-1252"), charset_codec("utf8")
    ('iso8859_1', 'cp1252', 'utf_8')
    >>> charset_codec("zlib"), charset_codec("punycode"), charset_codec("x-nonsense")
    (None, None, None)
    """
    if not name:
        return None
    return _CHARSETS.get(_key(name[:_CHARSET_NAME_MAX]))


def decode_text(data: bytes, declared: str | None, flags: list[str]) -> str:
    """Decode ``data`` with its declared charset, repairing the usual mislabels.

    ASCII is ASCII whatever the label. Otherwise: an absent, unknown or
    ``us-ascii`` label, or a single-byte label on bytes that are valid UTF-8,
    means UTF-8 if the bytes are valid UTF-8 and Windows-1252 (the superset of
    Latin-1 that mailers actually send) if not; a UTF-8 label on bytes that are
    not UTF-8 means Windows-1252; another multi-byte label that does not fit the
    bytes falls back to UTF-8, then to the label with replacement characters. Appends ``charset_unknown``, ``eight_bit_undeclared`` or
    ``charset_mismatch`` to ``flags``. Control characters become spaces.

    >>> flags = []
    >>> decode_text("café".encode("utf-8"), "iso-8859-1", flags), flags
    ('café', ['charset_mismatch'])
    >>> decode_text(b"caf\\xe9", "utf-8", flags), flags
    ('café', ['charset_mismatch', 'charset_mismatch'])
    >>> decode_text("привет".encode("koi8_r"), "koi8-r", [])
    'привет'
    """
    if data.isascii():
        if declared and charset_codec(declared) is None:
            flags.append("charset_unknown")
        return sanitize(data.decode("ascii"))
    codec = charset_codec(declared)
    if codec is None:
        flags.append("charset_unknown" if declared else "eight_bit_undeclared")
        return sanitize(_utf8_or_cp1252(data))
    if codec == "ascii":
        flags.append("charset_mismatch")
        return sanitize(_utf8_or_cp1252(data))
    if codec in _SINGLE_BYTE:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return sanitize(data.decode(codec, "replace"))
        flags.append("charset_mismatch")  # valid multi-byte UTF-8 under a single-byte label
        return sanitize(text)
    try:
        return sanitize(data.decode(codec))
    except UnicodeDecodeError:
        flags.append("charset_mismatch")
    if codec == "utf_8":  # 8-bit text sent as UTF-8 without being UTF-8: Latin-1 or Windows-1252
        return sanitize(data.decode("cp1252", "replace"))
    try:
        return sanitize(data.decode("utf-8"))
    except UnicodeDecodeError:
        return sanitize(data.decode(codec, "replace"))


def _utf8_or_cp1252(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("cp1252", "replace")


def decode_base64(data: bytes, flags: list[str]) -> bytes:
    """Lenient base64: characters outside the alphabet are dropped (``bad_base64`` if any
    besides whitespace and padding), a dangling sixth bit group is ignored.

    >>> flags = []
    >>> decode_base64(b"aGVs\\nbG8=", flags), flags
    (b'hello', [])
    >>> decode_base64(b"aGVs*bG8", flags), flags
    (b'hello', ['bad_base64'])
    """
    if len(data.translate(None, _B64_NOISE)) != len(data) and "bad_base64" not in flags:
        flags.append("bad_base64")
    clean = data.translate(None, _B64_DELETE)
    usable = len(clean) - len(clean) % 4
    tail = clean[usable:]
    if len(tail) == 1:
        if "bad_base64" not in flags:
            flags.append("bad_base64")
        tail = b""
    try:
        return binascii.a2b_base64(clean[:usable] + tail + b"=" * (-len(tail) % 4))
    except (binascii.Error, ValueError):  # not expected after the cleaning above; never fatal
        flags.append("bad_base64")
        return b""


def decode_quoted_printable(data: bytes, flags: list[str], header: bool = False) -> bytes:
    """Quoted-printable (``binascii.a2b_qp``, which keeps malformed escapes as they are);
    ``bad_quoted_printable`` when an ``=`` starts neither an escape nor a soft line break.

    >>> decode_quoted_printable(b"caf=C3=A9 =\\nok", [])
    b'caf\\xc3\\xa9 ok'
    >>> flags = []
    >>> decode_quoted_printable(b"100=% sure", flags), flags
    (b'100=% sure', ['bad_quoted_printable'])
    """
    if _QP_BAD.search(data) and "bad_quoted_printable" not in flags:
        flags.append("bad_quoted_printable")
    return binascii.a2b_qp(data, header=header)


def decode_header_text(raw: bytes, flags: list[str], charsets: list[str] | None = None) -> str:
    """A header field's value as text: raw bytes as UTF-8 (else Windows-1252, ``eight_bit_header``),
    then RFC 2047 encoded words decoded (``bad_encoded_word`` when one cannot be). Declared charsets
    of encoded words are appended to ``charsets`` when given.

    >>> cs = []
    >>> decode_header_text(b"=?utf-8?B?8J+SsCBmcmVl?= =?iso-8859-1?q?caf=E9?= now", [], cs), cs
    ('💰 freecafé now', ['utf-8', 'iso-8859-1'])
    """
    if raw.isascii():
        text = raw.decode("ascii")
    else:
        if "eight_bit_header" not in flags:
            flags.append("eight_bit_header")
        text = _utf8_or_cp1252(raw)
    if "=?" in text:
        text = _BETWEEN_WORDS.sub("?==?", text)  # whitespace between adjacent encoded words is not text
        text = _ENCODED_WORD.sub(lambda m: _encoded_word(m, flags, charsets), text)
    return sanitize(text)


def _encoded_word(match: re.Match, flags: list[str], charsets: list[str] | None) -> str:
    charset, encoding, payload = match.group(1), match.group(2), match.group(3)
    charset = charset.split("*", 1)[0]  # RFC 2231 language suffix
    if charsets is not None:
        charsets.append(charset.lower())
    data = payload.encode("latin-1", "replace")
    if encoding in "bB":
        local: list[str] = []
        raw = decode_base64(data, local)
        if local:
            flags.append("bad_encoded_word")
    else:
        raw = binascii.a2b_qp(data, header=True)
    return decode_text(raw, charset, flags)
