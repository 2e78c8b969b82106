"""A bounded RFC 5322 / MIME reader that never raises.

:func:`parse_message` turns raw message bytes into header fields, a flat list
of MIME entities in document order and their decoded text, plus the flags of
whatever was malformed (:data:`sgm.model.mail.flags.FLAGS`) and counters of the
work done (:class:`WorkStats`).

Why not the standard library's ``email`` package: its parser reads the whole
tree before a caller sees anything, so a part-count or nesting bound could only
be checked after the work it is meant to bound; it recurses over nesting; and
hostile input can make its header helpers raise (``HeaderParseError``,
``LookupError`` from an invented charset, ``binascii.Error``) or spend
quadratic time. Here every bound is enforced while reading:

============================  ==================================================
bound (:class:`MailLimits`)   effect
============================  ==================================================
``max_bytes``                 input beyond is ignored (``truncated_input``)
``max_header_bytes``          per header block (``header_too_long``)
``max_headers``               fields per header block (``too_many_headers``)
``max_header_chars``          one field's unfolded value (``long_header``)
``max_parts``                 MIME entities in all (``too_many_parts``)
``max_depth``                 nesting of multipart / message entities (``too_deep``)
``max_text_chars``            decoded text of all text parts (``text_truncated``)
============================  ==================================================

Work is linear in the input: each nesting level scans its entities' bytes a
bounded number of times with C-level ``bytes.find`` and the walk keeps an
explicit stack (no recursion); :class:`WorkStats` counts the bytes scanned so
that tests can check the bound. Nothing is decompressed and binary attachments
are never decoded (only measured).

Examples
--------
>>> raw = (b"From: Ann <ann@example.org>\\nSubject: hi\\nContent-Type: multipart/alternative; boundary=b1\\n\\n"
...        b"--b1\\nContent-Type: text/plain\\n\\nHello there\\n--b1\\nContent-Type: text/html\\n\\n<p>Hello</p>\\n--b1--\\n")
>>> msg = parse_message(raw)
>>> [(p.content_type, p.depth, p.text) for p in msg.parts]
[('multipart/alternative', 0, None), ('text/plain', 1, 'Hello there'), ('text/html', 1, '<p>Hello</p>')]
>>> msg.header("subject"), msg.flags
(['hi'], ())
>>> parse_message(b"Subject: x\\nContent-Type: multipart/mixed\\n\\nbody").flags
('multipart_without_boundary',)
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Mapping

from .decode import decode_base64, decode_header_text, decode_quoted_printable, decode_text, sanitize

__all__ = ["MailLimits", "WorkStats", "ParsedMessage", "Part", "parse_message"]


@dataclass(frozen=True)
class MailLimits:
    """Work bounds for one message (all inclusive, all positive integers).

    The defaults leave room above every message of the SpamAssassin corpus
    (largest 300,734 bytes, at most 23 MIME entities, nesting 3) and keep the
    output within the service's record limits (``docs/SCHEMAS.md``: 50,000
    distinct terms, 500,000 text characters).

    Examples
    --------
    >>> MailLimits(max_parts=8).max_parts
    8
    >>> MailLimits.from_dict({"max_depth": 3}) == MailLimits(max_depth=3)
    True
    """

    max_bytes: int = 1_000_000
    max_header_bytes: int = 65_536
    max_headers: int = 256
    max_header_chars: int = 4_096
    max_parts: int = 64
    max_depth: int = 8
    max_text_chars: int = 500_000
    max_html_tags: int = 20_000
    max_urls: int = 256
    max_terms: int = 20_000

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
                raise ValueError(f"{f.name} must be a positive integer, got {value!r}")

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "MailLimits":
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown mail limits: {sorted(unknown)}")
        return cls(**{k: int(v) for k, v in data.items()})


@dataclass
class WorkStats:
    """Counters of the work one message took (for bounds checks and metrics).

    Filled by :func:`parse_message`: ``input_bytes`` (as given), ``bytes_read``
    (after the ``max_bytes`` cut and CRLF -> LF), ``bytes_scanned`` (bytes that
    searches and decoders passed over, each pass counted), ``header_fields``,
    ``parts``, ``depth`` (deepest entity read; the root is 0), ``text_chars``
    (decoded text of the text parts). Filled by
    :meth:`sgm.model.mail.MailFeatures.extract`: ``html_tags`` (tags
    interpreted), ``urls`` (distinct URLs read) and ``terms`` (distinct terms out).

    Examples
    --------
    >>> stats = parse_message(b"Subject: hi\\n\\nhello").stats
    >>> stats.input_bytes, stats.header_fields, stats.parts, stats.depth, stats.text_chars
    (18, 1, 1, 0, 5)
    """

    input_bytes: int = 0
    bytes_read: int = 0
    bytes_scanned: int = 0
    header_fields: int = 0
    parts: int = 0
    depth: int = 0
    text_chars: int = 0
    html_tags: int = 0
    urls: int = 0
    terms: int = 0


@dataclass
class Part:
    """One MIME entity, in document order.

    ``content_type`` is lower-case ``type/subtype``; ``params`` its parameters
    (lower-case names); ``fields`` the entity's own header fields as
    ``(name as written, raw unfolded value)``; ``body`` the ``(start, end)``
    range of its body in :attr:`ParsedMessage.data`; ``text`` the decoded text
    of a text part (``None`` for containers and attachments); ``parent`` the
    index of the enclosing entity (-1 for the root).

    Examples
    --------
    >>> parsed = parse_message(b"Content-Type: multipart/mixed; boundary=b\\n\\n--b\\n"
    ...                        b"Content-Type: text/plain\\n\\nhello\\n--b--\\n")
    >>> [(part.content_type, part.depth, part.parent, part.text) for part in parsed.parts]
    [('multipart/mixed', 0, -1, None), ('text/plain', 1, 0, 'hello')]
    """

    content_type: str
    params: dict[str, str]
    cte: str
    disposition: str
    filename: str
    depth: int
    parent: int
    body: tuple[int, int]
    fields: list[tuple[str, bytes]] = field(repr=False, default_factory=list)
    text: str | None = None

    @property
    def size(self) -> int:
        """Encoded body size in bytes."""
        return self.body[1] - self.body[0]

    @property
    def is_text(self) -> bool:
        return self.text is not None


@dataclass
class ParsedMessage:
    """What :func:`parse_message` read: ``data`` is the input as parsed (cut at ``max_bytes``,
    CRLF turned into LF), ``headers`` the top-level fields, ``parts`` every entity read (the root
    first), ``flags`` the sorted flag names, ``stats`` the work counters.

    Examples
    --------
    >>> parsed = parse_message(b"Subject: =?utf-8?q?caf=C3=A9?=\\nX-Note: a\\n\\nbody")
    >>> parsed.header("subject"), parsed.raw_header("x-note"), parsed.flags, len(parsed.parts)
    (['café'], [b'a'], (), 1)
    """

    data: bytes = field(repr=False)
    headers: list[tuple[str, bytes]]
    parts: list[Part]
    flags: tuple[str, ...]
    stats: WorkStats

    def raw_header(self, name: str) -> list[bytes]:
        """Raw unfolded values of the top-level fields called ``name`` (case-insensitive), in order."""
        lower = name.lower()
        return [value for key, value in self.headers if key.lower() == lower]

    def header(self, name: str) -> list[str]:
        """Decoded values (RFC 2047 decoded, control characters removed) of the fields called ``name``."""
        return [decode_header_text(value, []) for value in self.raw_header(name)]


_FIELD = re.compile(rb"([!-9;-~]{1,200})[ \t]*:")
_FIELD_LINES = re.compile(rb"([!-9;-~]{1,200})([ \t]*):([^\n]*)\n((?:[ \t][^\n]*\n)*)")  # field, continuations
_TYPE = re.compile(r"\s*([^\s;/\"]{1,100})\s*/\s*([^\s;\"]{1,100})")
_PARAM = re.compile(r";\s*([^\s=;\"]{1,100})\s*=\s*(\"(?:[^\"\\]|\\.){0,512}\"|[^\s;\"]{0,512})")
_PARAM_VALUE_CHARS = 1024
_MAX_PARAMS = 32
_CONTINUATION = re.compile(r"([^*]+)\*(\d{1,2})(\*?)$")
_PERCENT = re.compile(rb"%([0-9A-Fa-f]{2})")
_PADDING = re.compile(rb"[ \t\r]{0,256}")
_SLACK = 257  # bytes read past a field's limit so that leading and trailing whitespace does not hide a cut
_IDENTITY_CTES = ("", "7bit", "8bit", "binary")


class _Reader:
    """State of one parse: the input, the limits, the flags and counters."""

    def __init__(self, data: bytes, limits: MailLimits, stats: WorkStats) -> None:
        self.data, self.limits, self.stats = data, limits, stats
        self.flags: dict[str, None] = {}

    def flag(self, name: str) -> None:
        self.flags[name] = None

    def flags_from(self, names: list[str]) -> None:
        for name in names:
            self.flags[name] = None

    # ------------------------------------------------------------ header blocks
    def header_block(self, start: int, end: int) -> tuple[list[tuple[str, bytes]], int]:
        """Fields of the header block at ``start`` and where the body begins."""
        plain = self.plain_header_block(start, end)
        if plain is not None:
            return plain
        data, limits = self.data, self.limits
        limit = min(end, start + limits.max_header_bytes)
        fields_: list[tuple[str, list[bytes], int]] = []
        pos = start
        while True:
            if pos >= end:
                if fields_:
                    self.flag("no_body")
                body = end
                break
            if pos >= limit:
                self.flag("header_too_long")
                blank = data.find(b"\n\n", pos - 1, end)
                self.stats.bytes_scanned += (end if blank < 0 else blank) - pos
                body = end if blank < 0 else blank + 2
                break
            newline = data.find(b"\n", pos, end)
            line_end = end if newline < 0 else newline
            self.stats.bytes_scanned += line_end - pos + 1
            next_pos = line_end + 1
            cut = min(line_end, limit)
            if cut == pos or (cut == pos + 1 and data[pos] == 0x0D):
                body = next_pos
                break
            first = data[pos]
            if first in (0x20, 0x09):
                if not fields_:
                    self.flag("bad_header_line")
                    body = pos
                    break
                name, pieces, size = fields_[-1]
                if size < limits.max_header_chars:
                    piece = data[pos:min(cut, pos + limits.max_header_chars - size + _SLACK)].strip()
                    pieces.append(piece)
                    fields_[-1] = (name, pieces, size + len(piece) + 1)
                else:
                    self.flag("long_header")
            else:
                match = _FIELD.match(data, pos, min(line_end, pos + 256))  # a line may cross the block's limit
                if match is None:
                    self.flag("bad_header_line")
                    body = pos
                    break
                if len(fields_) >= limits.max_headers:
                    self.flag("too_many_headers")
                else:
                    value = data[match.end():min(cut, match.end() + limits.max_header_chars + _SLACK)].strip()
                    fields_.append((match.group(1).decode("ascii"), [value], len(value)))
            pos = next_pos
        out = []
        for name, pieces, _size in fields_:
            value = b" ".join(p for p in pieces if p)
            if len(value) > limits.max_header_chars:
                self.flag("long_header")
                value = value[: limits.max_header_chars]
            out.append((name, value))
        self.stats.header_fields += len(out)
        return out, body

    def plain_header_block(self, start: int, end: int) -> tuple[list[tuple[str, bytes]], int] | None:
        """:meth:`header_block`'s result for the usual block, ``None`` (and nothing done) for any other.

        Usual: a blank line ends the block within ``max_header_bytes``, every line before it is a field
        or a continuation of one (a lone CR, which ends a block too, is neither), no line is longer than
        ``max_header_chars``, no continuation would be cut, no field's value is longer than that limit and
        there are at most ``max_headers`` fields. Then the line-by-line reader raises no flag, cuts
        nothing, and reads the same fields as this one, which finds them with one regular expression.
        """
        data, limits = self.data, self.limits
        if data[start:start + 1] == b"\n":
            return None
        blank = data.find(b"\n\n", start, min(end, start + limits.max_header_bytes))
        if blank < 0:
            return None
        block = data[start:blank + 1]
        max_chars = limits.max_header_chars
        found = _FIELD_LINES.findall(block)  # the block as fields, each with its continuation lines
        if len(found) > limits.max_headers:
            return None
        out = []
        covered = 0
        for name, spaces, rest, more in found:
            head = len(name) + len(spaces) + 1
            if head > 256:  # the line reader looks for the colon within a line's first 256 bytes
                return None
            covered += head + len(rest) + 1 + len(more)
            if head + len(rest) > max_chars:
                return None
            value = rest.strip()
            if more:
                pieces, size = [value], len(value)
                for line in more[:-1].split(b"\n"):
                    if len(line) > max_chars or size >= max_chars or len(line) > max_chars - size + _SLACK:
                        return None
                    piece = line.strip()
                    pieces.append(piece)
                    size += len(piece) + 1
                value = b" ".join(p for p in pieces if p)
            if len(value) > max_chars:
                return None
            out.append((name.decode("ascii"), value))
        if covered != len(block):  # a line that is neither a field nor a continuation (or one before any field)
            return None
        self.stats.bytes_scanned += blank + 2 - start
        self.stats.header_fields += len(out)
        return out, blank + 2

    # ------------------------------------------------------------ one entity
    def entity(self, start: int, end: int, depth: int, parent: int, default_type: str) -> tuple[Part, list]:
        """Read the entity at ``[start, end)``; its part and the child ranges to read next."""
        fields_, body = self.header_block(start, end)
        ctype, params = self.content_type(_last(fields_, "content-type"), default_type)
        cte = _last(fields_, "content-transfer-encoding").decode("latin-1").strip().lower()[:40]
        disposition_raw = _last(fields_, "content-disposition").decode("latin-1")
        disposition = disposition_raw.split(";", 1)[0].strip().lower()[:40]
        disposition_params = _params(disposition_raw, self) if ";" in disposition_raw else {}
        filename = _filename(disposition_params.get("filename") or params.get("name") or "")
        part = Part(ctype, params, cte, disposition, filename, depth, parent, (body, end), fields_)
        children: list[tuple[int, int, str]] = []
        nests = ctype.startswith("multipart/") or (ctype == "message/rfc822" and cte in _IDENTITY_CTES)
        if nests and depth >= self.limits.max_depth:
            self.flag("too_deep")  # not split nor read: the work stops at this level
        elif ctype.startswith("multipart/"):
            boundary = params.get("boundary", "")
            if not boundary:
                self.flag("multipart_without_boundary")
                part.content_type = "text/plain"
            else:
                child_type = "message/rfc822" if ctype == "multipart/digest" else "text/plain"
                ranges = self.split(body, end, boundary.encode("latin-1", "replace"))
                if ranges is None:
                    self.flag("boundary_not_found")
                    part.content_type = "text/plain"
                else:
                    children = [(s, e, child_type) for s, e in ranges]
        elif nests:
            if self.reserved < self.limits.max_parts:
                children = [(body, end, "text/plain")]
            else:
                self.flag("too_many_parts")
        return part, children

    def content_type(self, raw: bytes, default_type: str) -> tuple[str, dict[str, str]]:
        if not raw:
            return default_type, {}
        value = raw.decode("latin-1")
        match = _TYPE.match(value)
        params = _params(value, self)
        if match is None:
            self.flag("bad_content_type")
            return "text/plain", params
        return f"{match.group(1)}/{match.group(2)}".lower(), params

    # ------------------------------------------------------------ multipart bodies
    def split(self, start: int, end: int, boundary: bytes) -> list[tuple[int, int]] | None:
        """Body ranges of a multipart's parts (``None``: the boundary never occurs)."""
        data, stats = self.data, self.stats
        delimiter = b"--" + boundary
        budget = self.limits.max_parts - self.reserved
        ranges: list[tuple[int, int]] = []
        pos, current, found, closed = start, -1, False, False
        while True:
            at = data.find(delimiter, pos, end)
            stats.bytes_scanned += (end if at < 0 else at + len(delimiter)) - pos
            if at < 0:
                break
            if at > start and data[at - 1] != 0x0A:
                pos = self.next_line(at, end)  # delimiters start lines: skip the rest of this one
                continue
            after = at + len(delimiter)
            is_close = data.startswith(b"--", after, end)
            rest = after + 2 if is_close else after
            padding_end = _PADDING.match(data, rest, end).end()  # transport padding, then the line's end
            stats.bytes_scanned += padding_end - rest
            if padding_end < end and data[padding_end] != 0x0A:
                pos = self.next_line(padding_end, end)  # text follows the boundary: not a delimiter line
                continue
            line_end = padding_end
            found = True
            if current >= 0:
                if len(ranges) >= budget:
                    self.flag("too_many_parts")
                    return ranges
                ranges.append((current, max(current, at - 1)))
            if is_close:
                closed = True
                break
            current = min(line_end + 1, end)
            pos = current
        if not found:
            return None
        if not closed and current >= 0:
            self.flag("unterminated_multipart")
            if len(ranges) < budget:
                ranges.append((current, end))
            else:
                self.flag("too_many_parts")
        return ranges

    reserved = 0  # entities read or waiting to be read (the part budget's use)

    def next_line(self, pos: int, end: int) -> int:
        newline = self.data.find(b"\n", pos, end)
        stop = end if newline < 0 else newline + 1
        self.stats.bytes_scanned += stop - pos
        return stop

    # ------------------------------------------------------------ text
    def decode_part_text(self, part: Part, remaining: int) -> str:
        start, end = part.body
        data = self.data
        cte = part.cte
        local: list[str] = []
        if cte == "base64":
            encoded = data[start:min(end, start + 2 * remaining + 16)]
            raw = decode_base64(encoded, local)
        elif cte == "quoted-printable":
            encoded = data[start:min(end, start + 4 * remaining + 16)]
            raw = decode_quoted_printable(encoded, local)
        else:
            if cte not in _IDENTITY_CTES and not cte.startswith(("x-uue", "uue")):
                local.append("unknown_cte")
            encoded = data[start:min(end, start + 4 * remaining + 16)]
            raw = encoded
        self.stats.bytes_scanned += 2 * len(encoded)
        text = decode_text(raw, part.params.get("charset"), local)
        self.flags_from(local)
        if len(text) > remaining or len(encoded) < end - start:
            self.flag("text_truncated")
            text = text[:remaining]
        return text


def _last(fields_: list[tuple[str, bytes]], name: str) -> bytes:
    for key, value in reversed(fields_):
        if key.lower() == name:
            return value
    return b""


def _params(value: str, reader: _Reader) -> dict[str, str]:
    """MIME parameters of a header value (RFC 2045, with RFC 2231 continuations and charsets)."""
    params: dict[str, str] = {}
    pieces: dict[str, dict[int, tuple[str, bool]]] = {}
    for count, match in enumerate(_PARAM.finditer(value[:_PARAM_VALUE_CHARS])):
        if count >= _MAX_PARAMS:
            break
        name, raw = match.group(1).lower(), match.group(2)
        if raw.startswith('"'):
            raw = re.sub(r"\\(.)", r"\1", raw[1:-1])
        split = _CONTINUATION.match(name)
        if split:
            pieces.setdefault(split.group(1), {})[int(split.group(2))] = (raw, bool(split.group(3)))
        elif name.endswith("*"):
            params.setdefault(name[:-1], _rfc2231([(raw, True)], reader))
        else:
            params.setdefault(name, raw)
    for name, numbered in pieces.items():
        params.setdefault(name, _rfc2231([numbered[i] for i in sorted(numbered)], reader))
    return params


def _rfc2231(segments: list[tuple[str, bool]], reader: _Reader) -> str:
    """Join RFC 2231 segments; percent-encoded ones are decoded with the charset the first names."""
    charset, chunks = None, []
    for index, (raw, extended) in enumerate(segments):
        if not extended:
            chunks.append(raw.encode("latin-1", "replace"))
            continue
        if index == 0 and raw.count("'") >= 2:
            charset, _language, raw = raw.split("'", 2)
        chunks.append(_PERCENT.sub(lambda m: bytes([int(m.group(1), 16)]), raw.encode("latin-1", "replace")))
    local: list[str] = []
    text = decode_text(b"".join(chunks), charset or None, local)
    reader.flags_from([f for f in local if f == "charset_unknown"])
    return text


def _filename(value: str) -> str:
    """A file name parameter as text: raw bytes (kept as latin-1 code points) and encoded words decoded."""
    if not value:
        return ""
    try:
        raw = value.encode("latin-1")
    except UnicodeEncodeError:  # already decoded (RFC 2231)
        return sanitize(value)[:200]
    return decode_header_text(raw, [])[:200]


def parse_message(raw: bytes, limits: MailLimits | None = None) -> ParsedMessage:
    """Read a message within ``limits``; never raises on any ``bytes`` input.

    Parameters
    ----------
    raw : bytes
        The message as received (RFC 5322; an mbox ``From`` line first is skipped).
    limits : MailLimits, optional
        Work bounds (:class:`MailLimits` defaults).

    Returns
    -------
    ParsedMessage

    Examples
    --------
    >>> msg = parse_message(b"Subject: =?utf-8?q?caf=C3=A9?=\\nContent-Transfer-Encoding: base64\\n\\nSGVsbG8h\\n")
    >>> msg.header("Subject"), msg.parts[0].text, msg.stats.parts
    (['café'], 'Hello!', 1)
    >>> parse_message(b"\\x00\\xff garbage").flags
    ('bad_header_line', 'eight_bit_undeclared', 'nul_bytes')
    """
    limits = limits or MailLimits()
    if not isinstance(raw, (bytes, bytearray, memoryview)):
        raise TypeError(f"a message is bytes, got {type(raw).__name__}")
    raw = bytes(raw)
    stats = WorkStats(input_bytes=len(raw))
    cut = raw[: limits.max_bytes]
    data = cut.replace(b"\r\n", b"\n")
    stats.bytes_read = len(data)
    stats.bytes_scanned += 2 * len(cut)
    reader = _Reader(data, limits, stats)
    if len(raw) > limits.max_bytes:
        reader.flag("truncated_input")
    if b"\x00" in data:
        reader.flag("nul_bytes")
    stats.bytes_scanned += len(data)
    start = 0
    if data.startswith(b"From "):  # mbox separator line, not a header field
        newline = data.find(b"\n")
        start = len(data) if newline < 0 else newline + 1
        stats.bytes_scanned += start

    parts: list[Part] = []
    stack = [(start, len(data), 0, -1, "text/plain")]
    reader.reserved = 1
    while stack:
        s, e, depth, parent, default_type = stack.pop()
        part, children = reader.entity(s, e, depth, parent, default_type)
        index = len(parts)
        parts.append(part)
        stats.depth = max(stats.depth, depth)
        reader.reserved += len(children)
        for cs, ce, ctype in reversed(children):
            stack.append((cs, ce, depth + 1, index, ctype))
    stats.parts = len(parts)

    remaining = limits.max_text_chars
    for part in parts:
        if part.content_type.startswith("text/"):
            if remaining <= 0:
                reader.flag("text_truncated")
                part.text = ""
                continue
            part.text = reader.decode_part_text(part, remaining)
            remaining -= len(part.text)
            stats.text_chars += len(part.text)
    headers = parts[0].fields if parts else []
    if not headers and not any(p.text and p.text.strip() for p in parts):
        reader.flag("empty")
    return ParsedMessage(data, headers, parts, tuple(sorted(reader.flags)), stats)
