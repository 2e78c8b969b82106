"""Reading email for spam filtering: raw RFC 5322 / MIME bytes within fixed work bounds.

>>> from sgm.model.mail import parse_message
>>> parse_message(b"Subject: hi\\n\\nhello").parts[0].text
'hello'
"""
from .flags import FLAGS
from .html import HtmlText, html_to_text
from .parse import MailLimits, ParsedMessage, Part, WorkStats, parse_message

__all__ = ["FLAGS", "HtmlText", "MailLimits", "ParsedMessage", "Part", "WorkStats", "html_to_text", "parse_message"]
