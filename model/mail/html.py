"""HTML to text plus markup evidence, in one bounded linear scan.

The text keeps what a reader sees: tags that break lines become newlines,
inline tags and comments vanish without a space, so the classic ``FR<b></b>EE``
and ``V<!-- x -->iagra`` come out as ``FREE`` and ``Viagra`` (SpamBayes found
the same); ``<script>`` and ``<style>`` contents are dropped; entities are
decoded. The markup itself becomes evidence: which known tags and attributes
occur, a few attribute values that spam tools favour (font colours and sizes,
zero-sized images, hidden styles), comments inside words, numeric entities.

Every pattern is anchored at a ``<`` and stops at the next ``<`` or ``>`` or a
fixed window, and attribute values are read with optional closing quotes, so
no pattern can backtrack over more than a bounded window: work is linear in
the input. At most ``max_tags`` ``<`` are examined one by one; the rest of the
document is stripped by one regular-expression pass (``html_too_many_tags``).

>>> page = html_to_text('<p>FR<b></b>EE <font color="#FF0000" size=1>m&amp;ms</font><br>'
...                     '<a href="http://x.example/a?b=1">click</a><!-- zz --></p>')
>>> page.text
'\\nFREE m&ms\\nclick\\n'
>>> page.links, page.markup
(['http://x.example/a?b=1'], ['tag:p', 'tag:b', 'tag:font', 'attr:font.color', 'val:font.color=#ff0000', \
'attr:font.size', 'val:font.size=1', 'tag:br', 'tag:a', 'attr:a.href', 'html:comment'])
"""
from __future__ import annotations

import html as _html
import re
from dataclasses import dataclass, field
from functools import lru_cache

__all__ = ["HtmlText", "html_to_text"]

_KNOWN_TAGS = frozenset("""
a abbr address applet area b base basefont bgsound big blink blockquote body br button caption center cite code col
colgroup dd del dfn dir div dl dt em embed fieldset font form frame frameset h1 h2 h3 h4 h5 h6 head hr html i iframe
ilayer img input ins isindex kbd label layer legend li link map marquee menu meta multicol nobr noembed noframes
noscript object ol optgroup option p param plaintext pre q s samp script select small spacer span strike strong style
sub sup table tbody td textarea tfoot th thead title tr tt u ul var wbr xml o:p st1:place
""".split())
_LINE_BREAKING = frozenset("""
address blockquote body br center dd div dl dt form frame h1 h2 h3 h4 h5 h6 head hr html iframe img li map ol option
p pre table tbody td tfoot th thead title tr ul
""".split())
_DROPPED_CONTENT = ("script", "style")
_LINK_ATTRS = {"href": ("a", "area", "base", "link"), "src": ("img", "frame", "iframe", "script", "embed", "input"),
               "action": ("form",), "background": ("body", "table", "td", "th", "tr")}
_VALUE_ATTRS = {("font", "color"), ("font", "size"), ("font", "face"), ("body", "bgcolor"), ("body", "text"),
                ("table", "bgcolor"), ("td", "bgcolor"), ("a", "target"), ("table", "border"), ("img", "border"),
                ("meta", "http-equiv"), ("form", "method")}

# At a '<': a comment's start, a tag (closing mark, name, the rest), a declaration, or nothing (a stray '<').
_NEXT = re.compile(r"<(?:(!--)|(/?)([A-Za-z][A-Za-z0-9:]{0,31})([^<>]{0,2048})>|[!?][^<>]{0,2048}>)?")
_ATTR = re.compile(r"([A-Za-z_:][-A-Za-z0-9_:.]{0,40})(?:\s*=\s*(\"[^\"]{0,256}\"?|'[^']{0,256}'?|[^\s\"'>]{1,256}))?")
_ANY_TAG = re.compile(r"<[!?/]?[A-Za-z][^<>]{0,2048}>|<!--|-->")
_VALUE_JUNK = re.compile(r"[^a-z0-9#.,+-]")
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden|font-size\s*:\s*[0-2](?:px|pt)?\b", re.I)
_NUMERIC_ENTITY = re.compile(r"&#x?[0-9a-fA-F]{1,6};?")
_END_OF = {name: re.compile(rf"</{name}\s*>", re.I) for name in _DROPPED_CONTENT}


@dataclass
class HtmlText:
    """What :func:`html_to_text` read: visible ``text``, ``markup`` evidence tokens (in order of first
    occurrence, each once), ``links`` (URL-bearing attribute values, at most ``max_links``), ``flags``, and
    ``tags``: how many ``<`` were examined (tags, comments, declarations and stray ``<`` alike).

    Examples
    --------
    >>> read = html_to_text("<p>Buy <b>now</b> <a href='http://x.example/a'>here</a></p>")
    >>> read.text.split(), read.markup, read.links, read.tags
    (['Buy', 'now', 'here'], ['tag:p', 'tag:b', 'tag:a', 'attr:a.href'], ['http://x.example/a'], 6)
    """

    text: str
    markup: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    tags: int = 0


def html_to_text(source: str, max_tags: int = 20_000, max_links: int = 256) -> HtmlText:
    """Visible text and markup evidence of an HTML document or fragment.

    Parameters
    ----------
    source : str
        HTML (already decoded to text).
    max_tags : int
        ``<`` examined (tags, comments, declarations, stray ``<``); the rest of the document is
        stripped of tags by one regular-expression pass, without evidence (``html_too_many_tags``).
    max_links : int
        URL-bearing attribute values kept.

    Returns
    -------
    HtmlText

    Examples
    --------
    >>> html_to_text("V<!-- x -->iagra <b>cheap</b>").text
    'Viagra cheap'
    >>> r = html_to_text("<style>p {color: red}</style>ok <script>alert(1)")
    >>> r.text, r.flags
    ('ok ', ['html_unterminated'])
    """
    out: list[str] = []
    markup: dict[str, None] = {}
    links: list[str] = []
    flags: list[str] = []
    pos, n, tags = 0, len(source), 0
    find, search = source.find, _NEXT.search
    while pos < n:
        match = search(source, pos)  # the next '<' and what it starts, in one call
        if match is None:
            out.append(source[pos:])
            break
        lt, after = match.span()
        out.append(source[pos:lt])
        if tags >= max_tags:
            flags.append("html_too_many_tags")
            out.append(_ANY_TAG.sub("", source[lt:]))
            break
        tags += 1  # every '<' examined counts, tag or not: the Python-level work is bounded by max_tags
        comment, closing, raw_name, rest = match.groups()
        if comment:  # "<!--"
            end = find("-->", lt + 4)
            markup["html:comment"] = None
            if lt > 0 and end >= 0 and source[lt - 1].isalnum() and source[end + 3:end + 4].isalnum():
                markup["html:comment-in-word"] = None
            if end < 0:
                flags.append("html_unterminated")
                break
            pos = end + 3
            continue
        if raw_name is None:
            if after > lt + 1:  # a declaration or processing instruction
                pos = after
                continue
            out.append("<")
            pos = lt + 1
            continue
        pos = after
        if closing:
            if raw_name.lower() in _LINE_BREAKING:
                out.append("\n")
            continue
        name, breaks, tokens, tag_links = (_cached_tag(raw_name, rest) if len(rest) <= _CACHED_REST
                                           else _open_tag(raw_name, rest))
        if breaks:
            out.append("\n")
        for token in tokens:
            markup[token] = None
        for link in tag_links:
            if len(links) < max_links:
                links.append(link)
        if name in _DROPPED_CONTENT:
            end_match = _END_OF[name].search(source, pos)
            if end_match is None:
                flags.append("html_unterminated")
                break
            pos = end_match.end()
    text = "".join(out)
    if "&" in text:
        if _NUMERIC_ENTITY.search(text):
            markup["html:numeric-entity"] = None
        text = _html.unescape(text)
    return HtmlText(text, list(markup), links, flags, tags)


def _open_tag(raw_name: str, rest: str) -> tuple[str, bool, tuple[str, ...], tuple[str, ...]]:
    """An opening tag's name, whether it breaks the line, its markup tokens and its links, in order."""
    name = raw_name.lower()
    known = name in _KNOWN_TAGS
    tokens = [f"tag:{name}" if known else "tag:?"]
    links: list[str] = []
    if known and rest.strip():
        _attributes(name, rest, tokens, links)
    return name, name in _LINE_BREAKING, tuple(tokens), tuple(links)


# The same tags recur within a page and across pages (47,428 tags, 5,936 distinct, in the HTML parts
# of every 6th SpamAssassin message): their evidence is a pure function of the tag's text, kept for the
# short ones (at most 4,096 entries of at most 256 characters).
_CACHED_REST = 256
_cached_tag = lru_cache(maxsize=4096)(_open_tag)


def _attributes(tag: str, rest: str, tokens: list[str], links: list[str]) -> None:
    for count, match in enumerate(_ATTR.finditer(rest)):
        if count >= 16:
            break
        attr = match.group(1).lower()
        raw = match.group(2) or ""
        if raw[:1] in ("'", '"'):
            raw = raw[1:-1] if len(raw) > 1 and raw[-1] == raw[0] else raw[1:]
        tokens.append(f"attr:{tag}.{attr}"[:60])
        if tag in _LINK_ATTRS.get(attr, ()) and raw:
            links.append(_html.unescape(raw.strip()))
        if (tag, attr) in _VALUE_ATTRS and raw:
            tokens.append(f"val:{tag}.{attr}={_VALUE_JUNK.sub('', raw.lower())[:24]}")
        elif attr in ("width", "height") and raw.strip() in ("0", "1"):
            tokens.append(f"val:{tag}.tiny")
        elif attr == "style" and _HIDDEN_STYLE.search(raw):
            tokens.append("html:hidden-style")
