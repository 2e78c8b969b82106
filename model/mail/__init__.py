"""Reading email for spam filtering: raw RFC 5322 / MIME bytes -> term counts.

The classifier's first use is spam filtering, and the evidence filters such as
SpamAssassin's Bayes, rspamd, SpamBayes and bogofilter learn most from is in
the parts of a message a Subject-plus-body text drops: header fields, the MIME
structure, URLs, HTML markup and attachments. This package reads them within
fixed work bounds, never raises on malformed input (it flags it), and emits a
term -> count mapping that :class:`~sgm.model.MNB` and :class:`~sgm.model.TDM`
accept as they are.

==================  ====================================================================
module              job
==================  ====================================================================
``parse``           bounded MIME reader: header fields, entities, decoded text, counters
``decode``          transfer encodings, charsets (fixed table), RFC 2047 encoded words
``html``            HTML to visible text plus markup evidence and links
``headers``         header evidence (headers, addresses, received, subject groups)
``content``         body evidence (html, urls, mime, attachments groups), the text to tokenize
``features``        :class:`MailOptions`, :class:`MailFeatures`: all of it as term counts
``flags``           the flag names and what each means
``message``         :class:`Message`: a raw message as a document every model accepts
==================  ====================================================================

Examples
--------
>>> from sgm.model.mail import MailFeatures, MailOptions
>>> extract = MailFeatures(MailOptions(ngrams=1, meta_weight=1.0))
>>> terms = extract(b"From: a@example.org\\nSubject: hello\\n\\nsee http://example.net/x")
>>> terms["hello"], terms["from.dom:example.org"], terms["url.host:example.net"]
(1, 1.0, 1.0)
"""
from .features import GROUPS, MAIL_CONFIG, MailExtraction, MailFeatures, MailOptions, mail_features, with_meta_weight
from .flags import FLAGS
from .headers import IGNORED_HEADERS
from .html import HtmlText, html_to_text
from .message import Message
from .parse import MailLimits, ParsedMessage, WorkStats, Part, parse_message

__all__ = ["FLAGS", "GROUPS", "IGNORED_HEADERS", "MAIL_CONFIG", "HtmlText", "MailExtraction", "MailFeatures", "MailLimits",
           "MailOptions", "Message", "WorkStats", "ParsedMessage", "Part", "html_to_text", "mail_features",
           "parse_message", "with_meta_weight"]
