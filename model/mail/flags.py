"""The flags a message can raise: what was malformed, cut or repaired while reading it.

A flag never stops reading: the parser keeps what it can read and records the
flag. Flags are also features (``flag:<name>``, feature group ``flags``):
malformed MIME is itself evidence. Names are stable lower-case identifiers,
usable as metric label values.

>>> sorted(FLAGS)[:3]
['bad_base64', 'bad_content_type', 'bad_encoded_word']
>>> FLAGS["too_deep"]
'multipart or message/rfc822 nesting deeper than max_depth; deeper entities are not read'
"""
from __future__ import annotations

FLAGS: dict[str, str] = {
    # input and header blocks
    "truncated_input": "message longer than max_bytes; the rest is ignored",
    "nul_bytes": "NUL bytes in the message",
    "header_too_long": "a header block longer than max_header_bytes; its later fields are ignored",
    "too_many_headers": "more than max_headers fields in one header block; the rest are ignored",
    "long_header": "a field value longer than max_header_chars; it is cut there",
    "bad_header_line": "a header-block line that is neither a field nor a continuation; the body starts there",
    "eight_bit_header": "raw 8-bit bytes in a header field (read as UTF-8, else Windows-1252)",
    "no_body": "no blank line after the header block: a message or part of headers only",
    "bad_encoded_word": "an RFC 2047 encoded word that does not decode cleanly",
    # MIME structure
    "bad_content_type": "a Content-Type without a type/subtype (read as text/plain)",
    "multipart_without_boundary": "a multipart entity without a boundary parameter (read as text/plain)",
    "boundary_not_found": "a multipart entity whose boundary never occurs (its body is read as text/plain)",
    "unterminated_multipart": "a multipart entity without its closing boundary (the last part runs to the end)",
    "too_many_parts": "more MIME entities than max_parts; the rest are not read",
    "too_deep": "multipart or message/rfc822 nesting deeper than max_depth; deeper entities are not read",
    # transfer encodings and charsets
    "bad_base64": "base64 with characters outside the alphabet or a dangling bit group",
    "bad_quoted_printable": "quoted-printable with an '=' that starts no escape",
    "unknown_cte": "a Content-Transfer-Encoding other than 7bit, 8bit, binary, base64, quoted-printable",
    "charset_unknown": "a declared charset that is unknown or not allowed (UTF-8, else Windows-1252, is used)",
    "charset_mismatch": "text that does not fit its declared charset (mislabeled; repaired as documented)",
    "eight_bit_undeclared": "8-bit text without a declared charset",
    "text_truncated": "decoded text reached max_text_chars; the rest is not tokenized",
    # HTML
    "html_unterminated": "an HTML comment, script or style that never ends (the rest of the part is dropped)",
    "html_too_many_tags": "more HTML tags than max_html_tags; the rest are stripped without markup features",
    # output
    "too_many_terms": "more distinct terms than max_terms; the later ones are dropped",
    "empty": "nothing readable: no header field and no text",
}
