"""Body evidence: the text to tokenize, and tokens for the ``html``, ``urls``, ``mime`` and
``attachments`` feature groups.

:func:`read_bodies` walks the parsed parts once: text parts become readable
text (HTML through :func:`sgm.model.mail.html.html_to_text`, also when a part
labelled ``text/plain`` is plainly HTML), and markup evidence and links are
collected on the way. In a ``multipart/alternative`` the HTML alternative's
words are left out when a plain-text alternative exists (the same words twice
would double their weight), but its markup and links are kept.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from .headers import shape, suffixes_of
from .html import html_to_text
from .parse import ParsedMessage, Part

__all__ = ["Bodies", "attachment_tokens", "mime_tokens", "read_bodies", "url_tokens"]

Emit = Callable[[str], None]

_LOOKS_HTML = re.compile(r"<(?:html|body|head|br|p|div|font|table|a\s+href|img\s)\b", re.I)
# URLs in text: what r"(?:\b(?:https?|ftp)://|\bwww\d{0,3}\.|\bmailto:)[^\s<>\"'\x7f]{1,500}" with re.I finds,
# written so that the engine can skip to the next h, f, w or m in C (a pattern that starts with \b or
# re.I's case-folded letters cannot): the letters as the classes re.I matches them by (the long s and the
# dotted and dotless i too), the \b before the first letter as "the character before it is no word
# character". tests/test_mail_features.py checks it against the pattern above.
_URL = re.compile("[HhFfWwMm](?<!\\w.)(?:(?<=[Hh])[Tt][Tt][Pp][Ss\u017f]?://|(?<=[Ff])[Tt][Pp]://"
                  "|(?<=[Ww])[Ww][Ww]\\d{0,3}\\.|(?<=[Mm])[Aa][Ii\u0130\u0131][Ll][Tt][Oo]:)[^\\s<>\"'\x7f]{1,500}")
_URL_TRAILING = ".,;:!?)'\"]}>"
_SCHEME = re.compile(r"([a-z][a-z0-9+.-]{0,15}):", re.I)
_PATH_PIECE = re.compile(r"[A-Za-z0-9]{2,20}")
_EXTENSION = re.compile(r"\.([A-Za-z0-9]{1,10})$")
_DOUBLE_EXTENSION = re.compile(r"\.[A-Za-z0-9]{2,4}\.(?:exe|scr|pif|com|bat|vbs|js|cmd|lnk|hta|cpl)$", re.I)
# A uuencoded file's first line, r"^begin [0-7]{3,4} ([^\n]{1,200})$" with re.M written to start with its
# literal 'b' (the engine then skips to the next 'b' in C): a 'b' with no character but a newline before it.
_UUENCODE = re.compile(r"b(?<![^\n]b)egin [0-7]{3,4} ([^\n]{1,200})$", re.M)
_DECIMAL_HOST = re.compile(r"(?:0x[0-9a-f]{1,8}|\d{6,10})")
_IPV4_HOST = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}")


@dataclass
class Bodies:
    """The readable text of a message's text parts and what their markup showed."""

    text: str = ""
    markup: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    html_parts: int = 0
    plain_parts: int = 0
    html_tags: int = 0
    uuencoded: list[str] = field(default_factory=list)


def read_bodies(msg: ParsedMessage, max_tags: int, max_links: int) -> Bodies:
    """Readable text, markup evidence and links of ``msg``'s text parts, in document order.

    >>> from sgm.model.mail.parse import parse_message
    >>> raw = (b"Content-Type: multipart/alternative; boundary=x\\n\\n--x\\n\\nHi Bob\\n"
    ...        b"--x\\nContent-Type: text/html\\n\\n<p>Hi <b>Bob</b> <a href='http://a.example/'>go</a></p>\\n--x--\\n")
    >>> bodies = read_bodies(parse_message(raw), 100, 10)
    >>> bodies.text, bodies.links, bodies.markup
    ('Hi Bob', ['http://a.example/'], ['tag:p', 'tag:b', 'tag:a', 'attr:a.href'])
    """
    out = Bodies()
    texts: list[str] = []
    markup: dict[str, None] = {}
    has_plain_sibling = _plain_alternatives(msg.parts)
    for part in msg.parts:
        if part.text is None:
            continue
        ctype = part.content_type
        is_html = ctype == "text/html" or (ctype in ("text/plain", "text/enriched") and _LOOKS_HTML.search(part.text))
        if is_html:
            out.html_parts += 1
            page = html_to_text(part.text, max(0, max_tags - out.html_tags), max_links - len(out.links))
            out.html_tags += page.tags
            for token in page.markup:
                markup[token] = None
            if ctype != "text/html":
                markup["html:as-" + ctype.split("/")[1]] = None
            out.links.extend(page.links)
            out.flags.extend(page.flags)
            if not (ctype == "text/html" and part.parent in has_plain_sibling):
                texts.append(page.text)
        else:
            out.plain_parts += 1
            texts.append(part.text)
            for name in _UUENCODE.findall(part.text)[:8]:
                out.uuencoded.append(name.strip())
    out.text = "\n".join(texts)
    out.markup = list(markup)
    return out


def _plain_alternatives(parts: list[Part]) -> set[int]:
    """Indices of multipart/alternative entities that hold a text/plain child."""
    alternatives = {i for i, p in enumerate(parts) if p.content_type == "multipart/alternative"}
    return {p.parent for p in parts if p.parent in alternatives and p.content_type == "text/plain"}


# ---------------------------------------------------------------- urls group
def url_tokens(text: str, links: list[str], emit: Emit, max_urls: int) -> int:
    """URLs of the text and of HTML links: scheme, host tails, IP or numeric hosts, ports,
    user-info tricks, path pieces, and how many URLs and hosts there are; returns how many
    distinct URLs were read (at most ``max_urls``).

    >>> out = []
    >>> url_tokens("see http://www.paypal.com@203.0.113.5:8080/login.php?x=1 now", [], out.append, 10)
    1
    >>> out  # doctest: +NORMALIZE_WHITESPACE
    ['url.scheme:http', 'url:userinfo', 'url:ip', 'url:port', 'url.path:login', 'url.path:php', 'url.n:1',
     'url.hosts:1']
    """
    seen: dict[str, None] = {}
    for match in _URL.finditer(text):
        if len(seen) >= max_urls:
            break
        seen[match.group(0).rstrip(_URL_TRAILING)] = None
    for link in links:
        if len(seen) >= max_urls:
            break
        seen[link.strip()[:500]] = None
    hosts: dict[str, None] = {}
    for url in seen:
        host = _url(url, emit)
        if host:
            hosts[host] = None
    if seen:
        emit("url.n:" + _bucket(len(seen)))
        emit("url.hosts:" + _bucket(len(hosts)))
    return len(seen)


def _url(url: str, emit: Emit) -> str:
    scheme_match = _SCHEME.match(url)
    scheme = scheme_match.group(1).lower() if scheme_match else ""
    if scheme == "mailto":
        address = url[7:].split("?", 1)[0]
        emit("url.scheme:mailto")
        if "@" in address:
            for suffix in suffixes_of(address.rsplit("@", 1)[1])[:2]:
                emit("mailto.dom:" + suffix)
        return ""
    if scheme and not url[len(scheme) + 1:].startswith("//"):
        emit("url.scheme:" + scheme[:16])  # javascript:, cid:, data: ...
        return ""
    emit("url.scheme:" + (scheme or "none"))
    rest = url[len(scheme) + 3:] if scheme else url
    authority, path = (rest.split("/", 1) + [""])[:2] if "/" in rest else (rest, "")
    if "?" in authority or "#" in authority:
        authority, tail = re.split(r"[?#]", authority, maxsplit=1)
        path = "?" + tail + path
    if "@" in authority:
        emit("url:userinfo")
        authority = authority.rsplit("@", 1)[1]
    host, _, port = authority.partition(":")
    host = host.strip(".").lower()
    if "%" in host:
        emit("url:encoded-host")
    if _IPV4_HOST.fullmatch(host) or _DECIMAL_HOST.fullmatch(host):
        emit("url:ip")
    else:
        suffixes = suffixes_of(host)
        if not suffixes:
            emit("url:bad-host")
        for suffix in suffixes:
            emit("url.host:" + suffix)
        if suffixes:
            emit("url.tld:" + suffixes[0].rsplit(".", 1)[-1])
    if port and port not in ("80", "443"):
        emit("url:port")
    for piece in _PATH_PIECE.findall(path)[:12]:
        emit("url.path:" + piece.lower())
    return host


def _bucket(n: int) -> str:
    """Powers of two: 1, 2, 3-4, 5-8, ...

    >>> [_bucket(n) for n in (0, 1, 2, 3, 5, 100)]
    ['0', '1', '2', '3-4', '5-8', '65-128']
    """
    if n <= 2:
        return str(n)
    high = 1 << (n - 1).bit_length()
    return f"{high // 2 + 1}-{high}"


# ---------------------------------------------------------------- mime group
def mime_tokens(msg: ParsedMessage, bodies: Bodies, emit: Emit) -> None:
    """Content types, charsets, transfer encodings and dispositions of every part, the
    structure's signature, counts, the top boundary's shape and the text's size.

    >>> from sgm.model.mail.parse import parse_message
    >>> raw = (b"Content-Type: multipart/mixed; boundary=\\"----=_NextPart_000_0012_01C2\\"\\n\\n"
    ...        b"------=_NextPart_000_0012_01C2\\nContent-Type: text/html; charset=us-ascii\\n\\n<p>x</p>\\n"
    ...        b"------=_NextPart_000_0012_01C2--\\n")
    >>> msg = parse_message(raw)
    >>> out = []
    >>> mime_tokens(msg, read_bodies(msg, 10, 10), out.append)
    >>> out  # doctest: +NORMALIZE_WHITESPACE
    ['ct:multipart/mixed', 'ct:text/html', 'charset:us-ascii', 'mime.shape:multipart/mixed(text/html)',
     'mime.parts:2', 'mime.depth:1', 'boundary.shape:-=_AaAa_9_9_9A9', 'html:only', 'text.len:1']
    """
    for part in msg.parts:
        emit("ct:" + part.content_type[:60])
        charset = part.params.get("charset")
        if charset:
            emit("charset:" + re.sub(r"[^a-z0-9_.:-]", "", charset.lower())[:24])
        if part.cte:
            emit("cte:" + re.sub(r"[^a-z0-9_-]", "", part.cte)[:24])
        if part.disposition:
            emit("cd:" + re.sub(r"[^a-z0-9_-]", "", part.disposition)[:24])
    emit("mime.shape:" + _signature(msg.parts)[:120])
    emit("mime.parts:" + _bucket(len(msg.parts)))
    emit("mime.depth:" + str(msg.stats.depth))
    root = msg.parts[0] if msg.parts else None
    if root is not None and root.content_type.startswith("multipart/") and root.params.get("boundary"):
        emit("boundary.shape:" + shape(root.params["boundary"], 32))
    if bodies.html_parts and not bodies.plain_parts:
        emit("html:only")
    emit("text.len:" + _bucket(len(bodies.text.split())))


def _signature(parts: list[Part]) -> str:
    """The MIME tree as ``type(child,child)`` (two levels)."""
    children: dict[int, list[int]] = {}
    for i, part in enumerate(parts):
        children.setdefault(part.parent, []).append(i)

    def render(i: int, level: int) -> str:
        kids = children.get(i, [])
        if not kids or level >= 2:
            return parts[i].content_type
        return parts[i].content_type + "(" + ",".join(render(k, level + 1) for k in kids[:8]) + ")"

    return render(0, 0) if parts else "none"


# ---------------------------------------------------------------- attachments group
def attachment_tokens(msg: ParsedMessage, bodies: Bodies, emit: Emit) -> None:
    """Non-text parts and named text attachments: type, file name, extension, double
    extensions, encoded size; uuencoded files in text; the attachment count.

    >>> from sgm.model.mail.parse import parse_message
    >>> raw = (b"Content-Type: multipart/mixed; boundary=b\\n\\n--b\\n\\nsee file\\n--b\\n"
    ...        b"Content-Type: application/octet-stream; name=\\"invoice.pdf.exe\\"\\n"
    ...        b"Content-Transfer-Encoding: base64\\n\\nTVqQAAMAAAAEAAAA\\n--b--\\n")
    >>> msg = parse_message(raw)
    >>> out = []
    >>> attachment_tokens(msg, read_bodies(msg, 10, 10), out.append)
    >>> out  # doctest: +NORMALIZE_WHITESPACE
    ['att.ct:application/octet-stream', 'att.name:invoice.pdf.exe', 'att.ext:exe', 'att:double-ext',
     'att.size:9-16', 'att.n:1']
    """
    count = 0
    for part in msg.parts:
        ctype = part.content_type
        if ctype.startswith("multipart/") or ctype == "message/rfc822" or (
                part.text is not None and not (part.filename and part.disposition == "attachment")):
            continue
        count += 1
        emit("att.ct:" + ctype[:60])
        _file_tokens(part.filename, emit)
        emit("att.size:" + _bucket(part.size))
    for name in bodies.uuencoded:
        count += 1
        emit("att:uuencoded")
        _file_tokens(name, emit)
    emit("att.n:" + _bucket(count))


def _file_tokens(name: str, emit: Emit) -> None:
    name = " ".join(name.lower().split())
    if not name:
        return
    emit("att.name:" + name[:60])
    extension = _EXTENSION.search(name)
    if extension:
        emit("att.ext:" + extension.group(1))
    if _DOUBLE_EXTENSION.search(name):
        emit("att:double-ext")
