"""The contract every model here shares: learning by document id, and scoring.

A model keeps a :class:`model.state.CountState` (the count tables and the
live documents) and implements one method, :meth:`GenerativeTextModel._log_posteriors`,
the scoring kernel: normalized log posteriors of a batch of prepared
documents over the active classes. Every public entry point (one document, a
batch, top-k, arg-max, labels) goes through that kernel. A family registers
itself by naming its ``family`` (the spec prefix): :func:`model.factory.build_model`
and snapshots find it there.

Learning is idempotent per document id, as the spam filters' learn caches
are: learning an id again with the same labels is a no-op, with other labels
it first unlearns the old ones, and :meth:`forget` unlearns it. Documents
learned without an id are keyed by a hash of their content.

A document is text (turned into terms by the model's tokenizer), a mapping
term -> count, or a whole email, :class:`sgm.model.mail.Message` (turned into
terms by the model's :class:`~sgm.model.mail.MailFeatures`, built from the
``mail`` options of its configuration; a message without an id is keyed by a
hash of its bytes). Messages become term counts on entry, so every entry point
reaches the same scoring kernel.
"""
from __future__ import annotations

import hashlib
import json
import math
from itertools import repeat
from typing import Any, Iterable, NamedTuple, Sequence

import numpy as np

from . import weighting
from .batch import PreparedBatch
from .factory import register_family
from .feedback import FeedbackDocument, ModelFeedback
from .label_marginals import check_label_threshold
from .lexicon import TermLexicon
from .mail import MailExtraction, MailFeatures, MailOptions, Message
from .loops.scoring import keep_seen_terms
from .persistence import ExtraState, SnapshotError, dump, dumps, loads, state_checksum
from .predictions import PosteriorPredictions, Ranking, top_k_indices  # noqa: F401 - the last two: old import path
from .spec import ModelSpec, check_half_life, parse_spec, resolve_params
from .state import CountState
from .term_class_weights import term_class_weights
from .text import Document, Tokenizer, batch_term_counts, check_term_types, term_counts
from .tied_weights import TiedTermWeights

Labels = str | Sequence[str]

#: Separator of labels inside a label-powerset class key (never part of a label).
POWERSET_SEPARATOR = "\x1f"
MULTILABEL_MODES = ("per_label", "powerset")


class LearnGuardError(ValueError):
    """An unlearn asked to remove a document under labels it was not learned with.

    Examples
    --------
    >>> from sgm.model import MNB
    >>> m = MNB("u_jm"); m.learn_one("a b", ["x"], id="d1")
    True
    >>> m.unlearn_one(None, ["y"], id="d1")
    Traceback (most recent call last):
    ...
    sgm.model.base.LearnGuardError: document 'd1' was learned with ['x'], not ['y']
    """


class LearnedDocument(NamedTuple):
    """A live document as the model holds it: ``terms`` are ``(term, raw count)`` pairs, sorted;
    ``seq`` orders documents by when they were learned."""

    labels: list[str]
    ts: float
    terms: list[tuple[str, float]]
    seq: int


class GenerativeTextModel(PosteriorPredictions):
    """Shared learning, bookkeeping and prediction API (see module docstring); :class:`~sgm.model.MNB` and
    :class:`~sgm.model.TDM` are its families, built with their spec, options and numbers.

    Examples
    --------
    >>> from sgm.model import MNB
    >>> m = MNB("u_jm", beta=0.5)
    >>> m.learn_one("cheap pills", "spam", id="m1"), m.learn_one("cheap pills", "spam", id="m1")  # once per id
    (True, False)
    >>> m.learn_one("team meeting", "ham", id="m2"), m.predict_one("pills")
    (True, 'spam')
    >>> m.learn_one("cheap pills", "ham", id="m1"), m.predict_one("pills")  # other labels: relearned
    (True, 'ham')
    >>> m.forget("m1"), len(m)
    (True, 1)
    """

    #: The spec prefix naming the family ("mnb", "tdm"); set by each family class.
    family: str

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "family" in cls.__dict__:
            register_family(cls.family, cls)

    def __init__(self, spec: str = "uc_pd_jm_dp", *, multilabel: str = "per_label",
                 tokenizer: Tokenizer | None = None, half_life: float | None = None,
                 prune_below: float | None = None, max_documents: int | None = None,
                 max_bytes: int | None = None, mail: MailOptions | dict | None = None,
                 label_threshold: float | None = None, **params: Any) -> None:
        parsed = parse_spec(spec)
        if parsed.family != self.family:
            raise ValueError(f"{spec!r} is a {parsed.family.upper()} spec; use {parsed.family.upper()}(...)")
        if multilabel not in MULTILABEL_MODES:
            raise ValueError(f"multilabel must be one of {MULTILABEL_MODES}, got {multilabel!r}")
        if prune_below is not None and not (prune_below > 0 and math.isfinite(prune_below)):
            raise ValueError("prune_below must be a positive weight")
        if max_documents is not None and int(max_documents) < 1:
            raise ValueError("max_documents must be at least 1")
        if max_bytes is not None and int(max_bytes) < 1:
            raise ValueError("max_bytes must be a positive number of bytes")
        self.spec: ModelSpec = parsed
        self.params: dict[str, Any] = resolve_params(parsed, params)
        self.multilabel = multilabel
        # powerset mode: output the labels whose marginal reaches it (model.label_marginals); None: the arg-max set
        self.label_threshold = check_label_threshold(label_threshold)
        if self.label_threshold is not None and multilabel != "powerset":
            raise ValueError("label_threshold applies to multilabel='powerset' (per-label output takes a threshold "
                             "when scoring)")
        self.tokenizer = tokenizer or Tokenizer()
        # None: messages are read with the MailOptions defaults, and the configuration does not name them
        self.mail: MailOptions | None = MailOptions.from_dict(mail) if isinstance(mail, dict) else mail
        if self.mail is not None and not isinstance(self.mail, MailOptions):
            raise ValueError(f"mail must be MailOptions or their dict, got {type(mail).__name__}")
        self._mail_features: MailFeatures | None = None
        self.state = CountState(check_half_life(half_life), prune_below=prune_below,
                                max_documents=None if max_documents is None else int(max_documents),
                                max_bytes=None if max_bytes is None else int(max_bytes))
        self._lexicon: TermLexicon | None = None  # built on the first text scored
        self.rebuild_caches()

    def tokenizers(self) -> tuple[Tokenizer, ...]:
        """The tokenizers that read this model's texts (one; an ensemble has one per distinct base reading)."""
        return (self.tokenizer,)

    def rebuild_caches(self) -> None:
        """(Re)create what derives from the state; called after construction, restore, or a new ``state``."""
        self._names: tuple | None = None
        #: fb: the second scoring pass (model.feedback); None without the affix
        self.feedback: ModelFeedback | None = ModelFeedback.of(self.spec, self.params)
        #: tw: the tied term weights (model.tied_weights), fresh for this state; None without the affix
        self.tied = TiedTermWeights.following(self.state, self.params["tw_eta"]) if self.spec.tied_weights else None

    # ------------------------------------------------------------ config
    @property
    def half_life(self) -> float | None:
        return self.state.clock.half_life

    def config(self) -> dict[str, Any]:
        """Everything needed to rebuild an empty model with the same settings.

        ``"mail"`` (the :class:`~sgm.model.mail.MailOptions` as a dict) is present only when the
        model was given mail options, so configurations and snapshots of text models are unchanged.
        """
        out = {
            "family": self.family,
            "spec": self.spec.name,
            "params": dict(self.params),
            "multilabel": self.multilabel,
            "tokenizer": self.tokenizer.to_dict(),
            "half_life": self.state.clock.half_life,
            "prune_below": self.state.prune_below,
            "max_documents": self.state.max_documents,
            "max_bytes": self.state.max_bytes,
        }
        if self.mail is not None:
            out["mail"] = self.mail.to_dict()
        if self.label_threshold is not None:  # only when set: configurations and checksums without it are unchanged
            out["label_threshold"] = self.label_threshold
        return out

    # ------------------------------------------------------------ messages
    def read_message(self, message: Message) -> MailExtraction:
        """What this model learns and scores of ``message``: its terms, flags and work counters.

        The model's own :class:`~sgm.model.mail.MailFeatures` (its ``mail`` options, else
        the defaults); never raises on any bytes. A caller that wants the flags too (the
        service) reads once here and passes ``.terms`` on: the same document as the message.

        >>> from sgm.model import MNB
        >>> from sgm.model.mail import Message
        >>> read = MNB("u_jm", mail={"groups": ["body", "flags"], "ngrams": 1}).read_message
        >>> read(Message(b"Content-Type: multipart/mixed\\n\\nfree pills")).terms
        {'flag:multipart_without_boundary': 4.48755, 'free': 1, 'pills': 1}
        """
        return self._mail_reader().extract(message.raw)

    def _mail_reader(self) -> MailFeatures:
        if self._mail_features is None:
            self._mail_features = MailFeatures(self.mail or MailOptions())
        return self._mail_features

    def _readable(self, docs: list) -> list:
        """``docs`` with every :class:`Message` replaced by its term counts (others as they are)."""
        if not any(isinstance(doc, Message) for doc in docs):
            return docs
        read = self._mail_reader()
        return [read(doc.raw) if isinstance(doc, Message) else doc for doc in docs]

    def __repr__(self) -> str:
        extras = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}({self.spec.name!r}{', ' if extras else ''}{extras})"

    # ------------------------------------------------------------ labels
    def check_labels(self, labels: Labels) -> tuple[str, ...]:
        """The class keys ``labels`` are learned under; ``ValueError`` if they are not valid labels.

        Lets a caller refuse a training record before it joins a batch.

        >>> from sgm.model import MNB
        >>> MNB("u_jm").check_labels(["spam", "spam", "phish"])
        ('spam', 'phish')
        """
        return self._class_keys(labels)

    def _class_keys(self, labels: Labels) -> tuple[str, ...]:
        if type(labels) is str and labels and POWERSET_SEPARATOR not in labels:  # one label: nothing to merge
            return (labels,)
        if isinstance(labels, str):
            labels = [labels]
        seen: list[str] = []
        for label in labels:
            if not isinstance(label, str) or not label:
                raise ValueError(f"labels are non-empty strings, got {label!r}")
            if POWERSET_SEPARATOR in label:
                raise ValueError("labels may not contain the unit separator character")
            if label not in seen:
                seen.append(label)
        if not seen:
            raise ValueError("a training document needs at least one label")
        if self.multilabel == "powerset":
            return (POWERSET_SEPARATOR.join(sorted(seen)),)
        return tuple(seen)

    def _class_name(self, key: str) -> str | tuple[str, ...]:
        if self.multilabel == "powerset":
            return tuple(key.split(POWERSET_SEPARATOR))
        return key

    @property
    def classes_(self) -> list:
        """Classes with live documents (labels; label tuples in powerset mode)."""
        names = self.state.classes.names
        return [self._class_name(names[i]) for i in self.state.active_classes().tolist()]

    # ------------------------------------------------------------ learning
    def anonymous_id(self, doc: Document | Message) -> str:
        """The id a document learned without one gets: a hash of its term counts (of its bytes for a message)."""
        if isinstance(doc, Message):
            return doc.anonymous_id()
        return self._anonymous_id(*term_counts(doc, self.tokenizer))

    @staticmethod
    def _anonymous_id(terms: list[str], raw: np.ndarray) -> str:
        canonical = json.dumps(sorted(zip(terms, raw.tolist())), separators=(",", ":"), ensure_ascii=False)
        return "anon:" + hashlib.blake2b(canonical.encode("utf-8"), digest_size=16).hexdigest()

    def _learns_with_idf(self) -> bool:
        """Training weights depend on the IDF of earlier documents (learn-time TF-IDF)."""
        kind = self.spec.weighting
        return kind is not None and not kind.startswith("qidf")

    def _training_weigher(self):
        kind = self.spec.weighting
        if kind is None or kind.startswith("qidf"):
            return None  # training documents keep raw counts
        state, phi, ups_idf = self.state, self.params.get("phi", 0.0), self.params.get("ups_idf", 0.0)

        def weigh(terms: np.ndarray, raw: np.ndarray, distinct: np.ndarray) -> np.ndarray:
            idf_values = weighting.idf(state.total_docs.value, state.term_df.get(terms), ups_idf)
            return weighting.tf(raw, distinct, phi) * idf_values

        return weigh

    def learn_one(self, doc: Document | Message, labels: Labels, ts: float | None = None,
                  id: str | None = None) -> bool:
        """Learn one document under ``labels`` at event time ``ts``.

        Returns ``False`` when nothing changed (the id is already learned with
        these labels). Learning a known id with other labels replaces it.

        With ``half_life`` set, ``ts`` is taken at its word: a ``ts`` later than
        the model time moves the model time to it, and every document learned
        before decays at once (one stamped years ahead leaves a model of one
        document). The model has no clock, so it cannot tell a wrong stamp from
        a real jump: callers with untrusted timestamps refuse those too far ahead
        of their own clock first, as the service does (``--max-event-skew``;
        docs/MODEL_NOTES.md, "Decisions"). Older ``ts`` are always valid.
        """
        classes = self._class_keys(labels)
        if isinstance(doc, Message):
            id = doc.anonymous_id() if id is None else id
            doc = self._mail_reader()(doc.raw)
        state = self.state
        if id is not None and type(doc) is str and self.tokenizer.compiled and not state.clock.would_rebase(ts):
            # text with an id (the service's case): tokenized and looked up in compiled code, new terms
            # interned in bulk; a rebase (which may release term ids) takes the general path below
            doc_id = str(id)
            record = state.docs.get(doc_id)
            if record is not None:
                if self._record_classes(record) == set(classes):
                    return False
                state.remove_document(doc_id)  # before interning: it may release terms of its own
            if self.tied is not None:
                self._tied_step(doc, classes)
            added: list[int] = []
            _, terms, raw = self.term_lexicon().learn_terms(
                [doc], self.tokenizer, lambda blob, bounds: state.intern_encoded(blob, bounds, added))
            if state.add_document(doc_id, classes, terms, raw, _ts(ts), self._training_weigher()) is None and added:
                with state.holding_term_ids() as held:  # too old to weigh anything: its new terms leave again
                    held.extend(added)
            return True
        terms, raw = term_counts(doc, self.tokenizer)
        doc_id = self._anonymous_id(terms, raw) if id is None else str(id)
        record = state.docs.get(doc_id)
        if record is not None:
            if self._record_classes(record) == set(classes):
                return False
            state.remove_document(doc_id)
        if self.tied is not None:
            self._tied_step(dict(zip(terms, raw.tolist())), classes)
        state.add_document(doc_id, classes, terms, raw, _ts(ts), self._training_weigher())
        return True

    def learn_many(self, docs: Iterable[Document | Message], labels: Iterable[Labels],
                   ts: Iterable[float | None] | None = None,
                   ids: Iterable[str | None] | None = None, *, sequential: bool = False) -> int:
        """Learn a batch; returns how many documents changed the model.

        By default TF-IDF weighting counts the whole batch before weighting it
        (batch TF-IDF, MODEL.md section 3). With ``sequential=True`` the result
        is bitwise identical to calling :meth:`learn_one` on each document in
        order, whatever the batch boundaries: the streaming service relies on
        this so that replicas and restarted processes agree exactly. Without
        learn-time IDF and without a memory bound both modes are the same.
        """
        docs, labels = list(docs), list(labels)
        if len(docs) != len(labels):
            raise ValueError("docs and labels differ in length")
        ts_list = [None] * len(docs) if ts is None else list(ts)
        id_list = [None] * len(docs) if ids is None else list(ids)
        if not (len(ts_list) == len(id_list) == len(docs)):
            raise ValueError("ts and ids must match docs in length")
        if any(isinstance(doc, Message) for doc in docs):  # keyed by their bytes, learned as their terms
            id_list = [doc.anonymous_id() if i is None and isinstance(doc, Message) else i
                       for doc, i in zip(docs, id_list)]
            docs = self._readable(docs)
        if self.tied is not None or (sequential and (self._learns_with_idf() or self.state.tracks_expiry())):
            # learn-time IDF and pruning depend on every earlier document, a tied weights' step on the model
            # before it (model.tied_weights): no batching
            return sum(self.learn_one(d, l, t, i) for d, l, t, i in zip(docs, labels, ts_list, id_list))
        changed = 0
        batch: list[tuple] = []
        in_batch: set[str] = set()
        # Interned once for the whole batch: documents then carry id slices, valid while held.
        with self.state.holding_term_ids() as added:
            all_terms, all_ids, all_counts, lengths = self._batch_terms(docs, None not in id_list, added)
            ends = np.cumsum(lengths).tolist()
            begins = [0] + ends[:-1]
            if None not in id_list:
                keys = list(map(str, id_list))
                if len(set(keys)) == len(keys) and self.state.docs.keys().isdisjoint(keys):
                    # every id new and distinct (the common case): one batch, nothing to resolve first
                    batch = list(zip(keys, map(self._class_keys, labels),
                                     [all_ids[b:e] for b, e in zip(begins, ends)],
                                     [all_counts[b:e] for b, e in zip(begins, ends)], map(_ts, ts_list)))
                    return self._flush(batch)
            for doc_label_ts_id, begin, end in zip(zip(labels, ts_list, id_list), begins, ends):
                label, t, doc_id = doc_label_ts_id
                classes = self._class_keys(label)
                raw = all_counts[begin:end]
                key = self._anonymous_id(all_terms[begin:end], raw) if doc_id is None else str(doc_id)
                record = self.state.docs.get(key)
                if key in in_batch or record is not None:
                    # a repeated or known id: flush first so it is handled where it occurs
                    changed += self._flush(batch)
                    batch, in_batch = [], set()
                    record = self.state.docs.get(key)
                    if record is not None:
                        if self._record_classes(record) == set(classes):
                            if all_terms is not None:  # (compiled text has string terms by construction)
                                check_term_types(all_terms[begin:end])  # not interned, so checked here
                            continue
                        self.state.remove_document(key)
                batch.append((key, classes, all_ids[begin:end], raw, _ts(t)))
                in_batch.add(key)
            changed += self._flush(batch)
        return changed

    def _batch_terms(self, docs: list, with_ids: bool, added: list[int]):
        """``(terms, term ids, counts, distinct terms per document)`` of a batch, new terms interned.

        Texts of documents with ids (the service's case) are tokenized and
        looked up in compiled code and ``terms`` is ``None``; otherwise (the
        content hash of a document without an id needs its terms as strings)
        the terms are strings. New terms are type-checked when interned.
        """
        if docs and with_ids and self.tokenizer.compiled and all(type(doc) is str for doc in docs):
            owner, ids, counts = self.term_lexicon().learn_terms(docs, self.tokenizer,
                                                                  lambda blob, bounds: self.state.intern_encoded(blob, bounds, added))
            return None, ids, counts, np.bincount(owner, minlength=len(docs))
        terms, counts, lengths = batch_term_counts(docs, self.tokenizer, check_terms=False)
        return terms, self.state.intern_terms(terms, added), counts, lengths

    def _flush(self, batch: list[tuple]) -> int:
        if not batch:
            return 0
        records = self.state.add_documents(batch, self._training_weigher())
        return sum(r is not None for r in records)

    def _record_classes(self, record) -> set[str]:
        names = self.state.classes.names
        return {names[c] for c in record.classes}

    def unlearn_one(self, doc: Document | Message | None, labels: Labels | None = None, ts: float | None = None,
                    id: str | None = None) -> bool:
        """Unlearn a document learned earlier: by ``id``, or by its content if it was learned without an id.

        ``labels``, when given, must be the labels it was learned with, else
        :class:`LearnGuardError` is raised and nothing changes (the spam
        filters' guard against unlearning what was never learned that way).
        Returns ``False`` if the document is not known to the model.
        """
        if id is None:
            if doc is None:
                raise ValueError("unlearn needs the document or its id")
            doc_id = self.anonymous_id(doc)
        else:
            doc_id = str(id)
        record = self.state.docs.get(doc_id)
        if record is None:
            return False
        if labels is not None and self._record_classes(record) != set(self._class_keys(labels)):
            learned = sorted(label for key in self._record_classes(record) for label in key.split(POWERSET_SEPARATOR))
            raise LearnGuardError(f"document {doc_id!r} was learned with {learned}, not {labels!r}")
        self.state.remove_document(doc_id)
        return True

    def forget(self, id: str) -> bool:
        """Unlearn the document with this id; ``False`` if it is not live."""
        return self.state.remove_document(str(id)) is not None

    def __contains__(self, id: str) -> bool:
        return str(id) in self.state.docs

    def learned_classes(self, id: str) -> frozenset[str] | None:
        """The class keys the live document ``id`` is learned under (as :meth:`check_labels` gives them), or ``None``.

        >>> from sgm.model import MNB
        >>> m = MNB("u_jm"); m.learn_one("cheap pills", ["spam", "phish"], id="m1")
        True
        >>> m.learned_classes("m1") == frozenset(m.check_labels(["phish", "spam"])), m.learned_classes("m2")
        (True, None)
        """
        record = self.state.docs.get(str(id))
        return None if record is None else frozenset(self._record_classes(record))

    def invalidate_derived(self) -> None:
        """Every cache is keyed by the state's epoch, the kept discount totals by the state's journal: a new epoch
        and no journal reader make them all recompute from the counts."""
        self.state.epoch += 1
        self.state.journal_reader = None

    def __len__(self) -> int:
        """Number of live documents."""
        return self.state.n_docs

    def document(self, id: str) -> "LearnedDocument | None":
        """What the live document ``id`` contributed (labels, event time, raw term counts), or ``None``."""
        record = self.state.docs.get(str(id))
        if record is None:
            return None
        state = self.state
        class_names, term_names = state.classes.names, state.terms.names
        terms = sorted(zip((term_names[t] for t in record.terms.tolist()), record.raw.tolist()))
        return LearnedDocument(sorted(class_names[c] for c in record.classes), record.ts, terms, record.seq)

    def documents_per_class(self) -> dict:
        """Live documents per class (labels; label tuples in powerset mode), as learn guards count them.

        >>> from sgm.model import MNB
        >>> m = MNB("u_jm"); m.learn_many(["a", "b", "c"], ["spam", "ham", "spam"])
        3
        >>> m.documents_per_class()
        {'spam': 2, 'ham': 1}
        """
        state = self.state
        names, active = state.classes.names, state.active_classes().tolist()
        return {self._class_name(names[i]): int(state.cls_refs[i]) for i in active}

    def document_ids(self) -> set[str]:
        """Ids of the live documents."""
        return set(self.state.docs)

    def memory_bytes(self) -> int:
        """Approximate bytes the model holds: its arrays, caches, dictionaries and document records."""
        state = self.state
        arrays = 0
        for value in vars(state).values():
            if isinstance(value, np.ndarray):
                arrays += value.nbytes
            elif hasattr(value, "hi") and isinstance(value.hi, np.ndarray):  # compensated sums
                arrays += value.hi.nbytes + value.lo.nbytes
        arrays += state.arena.slot.nbytes + state.arena.cls.nbytes + state.arena.start.nbytes * 3
        per_entry_dict = 100  # a Python int key and value in a dict
        per_doc = 250  # record object, id string, array headers
        doc_arrays = 24 * int(state.term_refs.sum())  # term id, weight and raw count per (document, term)
        arrays += self.cache_bytes()  # posting weights and the compiled vocabulary, rebuilt from the counts
        return int(arrays + per_entry_dict * state.n_entries + per_doc * state.n_docs + doc_arrays)

    def cache_bytes(self) -> int:
        """Bytes of the arrays kept only to score fast (derived from the counts, not in snapshots)."""
        arrays = list(vars(self._lexicon).values()) if self._lexicon is not None else []
        arrays += self._scoring_cache_arrays() + (self.feedback.cache_arrays() if self.feedback is not None else [])
        return sum(value.nbytes for value in arrays if isinstance(value, np.ndarray))

    def _scoring_cache_arrays(self) -> list[np.ndarray]:
        """The family's score caches (posting weights and the like) for :meth:`cache_bytes`."""
        return []

    def built_lexicon(self) -> TermLexicon | None:
        """:meth:`term_lexicon` when it is built and follows the vocabulary, else ``None`` (building none)."""
        lexicon = self._lexicon
        return lexicon if lexicon is not None and lexicon.interner is self.state.terms else None

    def term_lexicon(self) -> TermLexicon:
        """The compiled lookup table of the vocabulary (built on first use, then kept in step)."""
        if self._lexicon is None or self._lexicon.interner is not self.state.terms:
            self._lexicon = TermLexicon(self.state.terms)
        return self._lexicon

    # ------------------------------------------------------------ scoring
    def _prepare(self, docs: Sequence[Document]) -> PreparedBatch:
        """Known terms of each document and their weights, times the ``fw`` weights when the spec has them."""
        return self._query_weighted(self._prepare_weights(docs))

    def _query_weighted(self, batch: PreparedBatch, tied: bool = True) -> PreparedBatch:
        """``batch`` with the query term weights (``fw``) applied, when the spec has them, then (``tied``) the
        tied term weights' averaged factors (``tw``)."""
        if self.spec.class_weights and len(batch.terms):
            params = self.params
            weights = batch.weights * term_class_weights(self.state, batch.terms, params["gamma"], params["kappa"],
                                                         params["eps"])
            batch = PreparedBatch(batch.terms, weights, batch.owner, batch.n_docs)
        if tied and self.tied is not None:
            return self.tied.scaled(batch)
        return batch

    def _tied_step(self, doc, classes: Sequence[str]) -> None:
        """The tied term weights' step for a document about to be learned under ``classes`` (model.tied_weights)."""
        raise NotImplementedError(f"{type(self).__name__} has no tied term weights")

    def tied_term_weights(self, terms: Iterable[str] | None = None) -> dict[str, float]:
        """The averaged factor of each of ``terms`` (default: every term the model holds) (``tw``).

        A term the model does not hold has the factor 1. See :mod:`model.tied_weights`.
        """
        if self.tied is None:
            raise ValueError(f"{self.spec.name!r} has no tied term weights (the tw affix)")
        return self.tied.by_name(self.state, terms)

    @property
    def tied_steps(self) -> int:
        """How many learned documents moved the tied term weights (``tw``); 0 without them."""
        return 0 if self.tied is None else self.tied.steps

    def _scored(self, docs: Sequence[Document], active: np.ndarray) -> np.ndarray:
        """The scoring kernel's log posteriors of ``docs``; with feedback (``fb``), its second pass."""
        feedback = self.feedback
        if feedback is None or not feedback.active:
            return self._log_posteriors(self._prepare(docs), active)
        second, _, _ = self._feedback_pass(self._prepare_weights(docs), active)
        return self._log_posteriors(self._query_weighted(second), active)

    def _feedback_pass(self, batch: PreparedBatch, active: np.ndarray):
        """The first pass over ``batch`` (weights before ``fw``), and from it the second pass's documents with
        each document's top labels and their weights (:meth:`model.feedback.ModelFeedback.documents`)."""
        first = self._log_posteriors(self._query_weighted(batch), active)
        return self.feedback.documents(self.state, batch, first, active)

    def feedback_documents(self, docs: Iterable[Document]) -> list[FeedbackDocument]:
        """What the feedback's second pass scores (``fb``, :mod:`model.feedback`): per document its top labels
        with their weights and its mixed term weights (before ``fw``)."""
        if self.feedback is None:
            raise ValueError(f"{self.spec.name!r} has no feedback (the fb affix)")
        active, names = self.class_names()
        if not len(active):
            raise RuntimeError("the model has not learned any document yet")
        second, label_ids, label_weights = self._feedback_pass(self._prepare_weights(list(docs)), active)
        name_of, terms = dict(zip(active.tolist(), names)), self.state.terms.names
        out = []
        for d in range(second.n_docs):
            mine = second.owner == d
            labels = [(name_of[c], p) for c, p in zip(label_ids[d].tolist(), label_weights[d].tolist())]
            out.append(FeedbackDocument(labels, dict(zip((terms[t] for t in second.terms[mine].tolist()),
                                                         second.weights[mine].tolist()))))
        return out

    def _prepare_weights(self, docs: Sequence[Document]) -> PreparedBatch:
        """Known terms of each document and their weights (unseen terms are skipped).

        One vocabulary lookup and one set of array operations for the whole
        batch: a single document is a batch of one.
        """
        docs = self._readable(docs)
        state = self.state
        kind = self.spec.weighting
        if docs and self.tokenizer.compiled and set(map(type, docs)) == {str}:
            # Text: tokens are looked up in compiled code, only seen terms kept (= with counts under some class)
            if kind is None:  # raw counts: unknown tokens need not be counted
                owner, terms, raw = self.term_lexicon().known_terms(docs, self.tokenizer, state.arena.length)
                return PreparedBatch(terms, raw, owner, len(docs))
            owner, terms, raw, lengths = self.term_lexicon().known_terms_and_lengths(docs, self.tokenizer,
                                                                                     state.arena.length)
            distinct, n_docs = lengths.astype(np.float64)[owner], len(docs)
        else:
            all_keys, raw, lengths = batch_term_counts(docs, self.tokenizer)
            n_docs = len(lengths)
            terms = np.array(list(map(state.terms.ids.get, all_keys, repeat(-1))), dtype=np.int64)  # faster than fromiter
            owner = np.repeat(np.arange(n_docs), lengths) if n_docs > 1 else np.zeros(len(terms), dtype=np.int64)
            if kind is None:  # compiled, one pass (the arrays are this call's own: batch_term_counts makes new ones)
                n_seen = keep_seen_terms(terms, raw, owner, state.arena.length)
                return PreparedBatch(terms[:n_seen], raw[:n_seen], owner[:n_seen], n_docs)
            distinct = np.asarray(lengths, dtype=np.float64)[owner]
            keep = terms >= 0
            keep[keep] = state.arena.length[terms[keep]] > 0  # seen = has counts under some class
            terms, raw, owner, distinct = terms[keep], raw[keep], owner[keep], distinct[keep]
        if not len(terms):
            return PreparedBatch(terms, raw, owner, n_docs)
        idf_values = weighting.idf(state.total_docs.value, state.term_df.get(terms), self.params.get("ups_idf", 0.0))
        weights = weighting.weigh(raw, distinct, idf_values, kind, self.params.get("phi", 0.0))
        positive = weights > 0
        if not positive.all():
            terms, weights, owner = terms[positive], weights[positive], owner[positive]
        return PreparedBatch(terms, weights, owner, n_docs)

    def class_names(self) -> tuple[np.ndarray, list]:
        """Active class ids (ascending) and their public names, cached per class set."""
        state = self.state
        cached = self._names
        if cached is None or cached[0] != state.class_version:
            active = state.active_classes()
            names = state.classes.names
            cached = self._names = (state.class_version, active, [self._class_name(names[i]) for i in active.tolist()])
        return cached[1], cached[2]

    @property
    def prior_scale(self) -> float:
        """``theta``: the weight of :meth:`class_log_prior` in every label score (1 without prior scaling)."""
        return float(self.params.get("theta", 1.0))

    def class_log_prior(self) -> tuple[list, np.ndarray]:
        """Active classes (as :meth:`class_names`) and their unscaled log prior ``log p(l)``: the class's
        (decayed) document count over the sum of them. The scoring kernel adds :attr:`prior_scale` times it."""
        active, names = self.class_names()
        if not len(active):
            return names, np.empty(0)
        docs = self.state.cls_docs.get(active)
        return names, np.log(docs) - math.log(self.state.class_docs_total.value)

    def predict_log_proba_many(self, docs: Iterable[Document]) -> tuple[list, np.ndarray]:
        """Log posteriors of a batch: ``(classes, array of shape (n_docs, n_classes))``."""
        active, names = self.class_names()
        if not len(active):
            raise RuntimeError("the model has not learned any document yet")
        return names, self._scored(list(docs), active)

    def _log_posteriors(self, batch: PreparedBatch, active: np.ndarray) -> np.ndarray:
        """The scoring kernel: normalized log posteriors of ``batch`` over the ``active`` class ids.

        Shape ``(batch.n_docs, len(active))``.
        """
        raise NotImplementedError

    def predict_labels_many(self, docs: Iterable[Document], k: int | None = None,
                            threshold: float | None = None) -> list[list[str]]:
        """Output label lists: in powerset mode the arg-max label set (or the labels of
        ``label_threshold``, as :meth:`rank_many`); in per-label mode the labels with posterior
        at least ``threshold`` and/or the top ``k`` (default: the top label)."""
        docs = list(docs)
        if self.multilabel == "powerset" and self.label_threshold is not None:
            return self._marginal_labels(*self.predict_log_proba_many(docs), self.label_threshold)
        if self.multilabel == "powerset":
            return [list(best) for best in self.predict_many(docs)]
        if threshold is None and k is None:
            k = 1
        classes, log_post = self.predict_log_proba_many(docs)
        out = []
        for row in np.exp(log_post):
            order = np.lexsort((np.arange(len(row)), -row))
            if k is not None:
                order = order[:k]
            if threshold is not None:
                order = order[row[order] >= threshold]
            out.append([classes[i] for i in order.tolist()])
        return out

    def predict_labels(self, doc: Document, k: int | None = None, threshold: float | None = None) -> list[str]:
        return self.predict_labels_many([doc], k, threshold)[0]

    # ------------------------------------------------------------ snapshots
    def to_bytes(self, extra: dict[str, Any] | None = None) -> bytes:
        """A versioned, pickle-free snapshot of the whole model (see :mod:`model.persistence`)."""
        return dumps(self, extra)

    def write_snapshot(self, handle, extra: dict[str, Any] | None = None) -> None:
        """Write :meth:`to_bytes`'s snapshot to a seekable binary file object, without a copy in memory."""
        dump(self, handle, extra)

    @staticmethod
    def from_bytes(data: bytes, **limits: Any) -> "GenerativeTextModel":
        """Rebuild a model from :meth:`to_bytes`; it scores identically and keeps learning."""
        return loads(data, **limits)[0]

    def checksum(self) -> str:
        """SHA-256 of the model's content, independent of internal layout."""
        return state_checksum(self)

    def extra_state(self) -> ExtraState:
        """The state this family keeps beyond the :class:`CountState` and :meth:`config` (none here).

        The one persistence hook of every family: snapshots store it, the
        checksum covers it, and :meth:`restore_extra_state` takes it back.
        """
        return ExtraState({}, {}) if self.tied is None else self.tied.extra_state(ExtraState({}, {}), self.state)

    def restore_extra_state(self, extra: ExtraState) -> None:
        """Take :meth:`extra_state` back once the state was replaced (a restore); caches are already rebuilt."""
        self._restore_tied(extra)

    def _restore_tied(self, extra: ExtraState) -> None:
        """The tied term weights' part of :meth:`restore_extra_state` (refuses per-term arrays without them)."""
        if self.tied is not None:
            self.tied.restore_extra_state(extra, self.state)
        elif extra.per_term:
            raise SnapshotError(f"per-term arrays {sorted(extra.per_term)} for a model without tied term weights")

    # ------------------------------------------------------------ stats
    def resum_totals(self) -> int:
        """Re-sum every total of the count tables from the live documents; how many had drifted (repaired).

        The service calls it before each snapshot (``CountState.resum_totals``)."""
        return self.state.resum_totals()

    def stats(self) -> dict[str, Any]:
        state = self.state
        return {
            "documents": state.n_docs,
            "classes": len(state.classes),
            "terms": len(state.terms),
            "vocabulary": state.n_vocab,
            "entries": state.n_entries,
            "epoch": state.epoch,
            "model_time": state.clock.now,
            "pruned_documents": state.pruned_documents,
            "pruned_entries": state.pruned_entries,
            "expired_documents": state.expired_documents,
            "learned_total": state.seq,  # documents learned since the model began (a learn sequence number)
        }


def _ts(ts: float | None) -> float | None:
    if ts is None:
        return None
    value = float(ts)
    if not math.isfinite(value):
        raise ValueError(f"ts must be finite, got {ts!r}")
    return value
