"""What a model reads of a dataset's documents in ``sgm eval`` / ``sgm tune``: the text, or the whole message.

A dataset whose records carry ``raw_b64`` (``spamassassin-raw``) is read as
messages (:class:`sgm.model.mail.Message`) by default, so the model's own mail
extractor runs exactly as in the service; ``--no-mail`` reads the ``text``
field instead (where the records have one), ``--mail`` insists on messages.

Mail numbers on the command line: ``--param meta_weight=2`` (and
``received_hops``, ``mail_ngrams``) set the configuration's ``"mail"`` options,
so ``sgm tune --params beta,mu,meta_weight`` searches them with the model's
numbers. Tuning ``meta_weight`` extracts every message once (with weight 1)
and re-weighs per point (:func:`sgm.model.mail.with_meta_weight`, exact);
other mail options need one extraction per configuration.

Examples
--------
>>> config = route_mail_params({"model": "uc_jm", "params": {"beta": 0.5, "meta_weight": 2.0, "mail_ngrams": 2}})
>>> config["params"], config["mail"]
({'beta': 0.5}, {'meta_weight': 2.0, 'ngrams': 2})
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from sgm.model.mail import MailFeatures, MailOptions, Message, with_meta_weight
from sgm.model.text import Tokenizer
from sgm.stream.datasets import LabelledDoc

__all__ = ["MAIL_PARAMS", "TUNABLE_MAIL_PARAMS", "ReadDocuments", "documents", "route_mail_params", "uses_mail"]

#: Mail options settable as ``--param NAME=VALUE`` (name -> the MailOptions field and its type).
MAIL_PARAMS: dict[str, tuple[str, type]] = {"meta_weight": ("meta_weight", float),
                                            "received_hops": ("received_hops", int), "mail_ngrams": ("ngrams", int)}
#: The mail numbers ``sgm tune`` can search (re-weighed exactly, without a new extraction per point), with their
#: tuning range ``(low, high, log scale)`` (bench/mail_stream.py searched the same range).
TUNABLE_MAIL_PARAMS: dict[str, tuple[float, float, bool]] = {"meta_weight": (0.05, 20.0, True)}


def route_mail_params(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with the mail numbers among its ``params`` moved into its ``"mail"`` options."""
    out = dict(config)
    params = dict(out.get("params") or {})
    moved = {MAIL_PARAMS[name][0]: MAIL_PARAMS[name][1](params.pop(name)) for name in list(params) if name in MAIL_PARAMS}
    if moved:
        out["mail"] = {**dict(out.get("mail") or {}), **moved}
    out["params"] = params
    return out


def uses_mail(docs: Sequence[LabelledDoc], mail: bool | None) -> bool:
    """Whether the model reads whole messages: ``mail`` when given (checked against the data), else when the
    data carries them."""
    has_raw = any(d.raw is not None for d in docs)
    if mail is None:
        return has_raw
    if mail and not has_raw:
        raise ValueError("--mail: the data has no whole messages (raw_b64)")
    if not mail and any(d.text is None for d in docs):
        raise ValueError("--no-mail: some documents carry only a whole message (raw_b64), no text")
    return bool(mail)


def documents(docs: Sequence[LabelledDoc], mail: bool) -> list:
    """What the model reads of each document: its :class:`Message` or its text."""
    return [Message(d.raw) if mail and d.raw is not None else d.text for d in docs]


class ReadDocuments:
    """Documents read once for many fits of a search: term counts that every point re-uses.

    Texts are tokenized with the configuration's tokenizer; messages are extracted with its mail
    options at ``meta_weight`` 1 and re-weighed for each point's ``meta_weight``.
    """

    def __init__(self, docs: Sequence[LabelledDoc], config: Mapping[str, Any], mail: bool) -> None:
        self.mail = mail
        tokenizer = Tokenizer.from_dict(config["tokenizer"]) if config.get("tokenizer") else Tokenizer()
        if config.get("model") == "ensemble":  # each base reads the documents with its own tokenizer or mail options
            self.mail, self.counts = False, documents(docs, mail)
        elif mail:
            read = MailFeatures(MailOptions.from_dict({**dict(config.get("mail") or {}), "meta_weight": 1.0}))
            self.counts = [read(d.raw) if d.raw is not None else tokenizer(d.text) for d in docs]
        else:
            self.counts = [tokenizer(d.text) for d in docs]

    def for_config(self, config: Mapping[str, Any], indices: Sequence[int] | None = None) -> list[dict]:
        """The counts as a model built from ``config`` reads them (its ``meta_weight``), optionally a subset."""
        chosen = self.counts if indices is None else [self.counts[i] for i in indices]
        if not self.mail:
            return chosen
        weight = MailOptions.from_dict(config.get("mail") or {}).meta_weight
        return [with_meta_weight(terms, weight) for terms in chosen]
