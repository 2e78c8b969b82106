"""Ensemble: base models that learn together, scored by a log-linear pool of their posteriors.

Every base model (an MNB or TDM with its own smoothing, weighting and features)
learns, unlearns, forgets and decays the same documents; a scored document's
posterior is the normalized product of the bases' posteriors, each raised to a
weight (a product of experts, the log-linear pool of LSHTC4-style ensembles):

    score(l | d) = sum_j alpha_j(d) max(log p_j(l | d), floor) + b_l
    p(l | d)     = exp(score(l | d)) / sum_k exp(score(k | d))

with ``alpha_j(d) = sum_f v[j, f] m_f(d)``: a constant weight per base, or (``meta``)
weights that move with meta-features of the document (feature-weighted linear
stacking, Sill et al. 2009): ``m(d) = [1, log1p(length) / 5, max_l p_j(l | d) and
H(p_j(. | d)) / log K for each base j, the share of base pairs whose arg-max agree]``
(``length``: word tokens of a text, the count sum of a mapping). ``b_l`` is an
optional per-class bias. The pool is fitted elsewhere (on development data:
``sgm.consumers.evaluation.ensemble_fit``); here it is applied. The floor keeps a
base's confident zero (``log p = -inf`` or thousands below) from vetoing a class.

Learning is exact because each base's is: the ensemble adds nothing to learn, so
it streams as its bases do (one document at a time, unlearning, decay). The pool
(weights, meta flag, biases, floor) is fixed configuration: served, it does not
learn; only the bases do, each exactly as it would alone.

The service serves an ensemble as any model (docs/ARCHITECTURE.md): its
:meth:`rank_many` is the shared one over :meth:`predict_log_proba_many` (the
bases' own posterior passes, then the pool), its snapshot holds each base's own
snapshot (:data:`model.persistence.COMPOSITE_FORMAT`), and its size gauges add
up the bases'.
"""
from __future__ import annotations

import hashlib
import io
import json
import math
import zipfile
from typing import Any, BinaryIO, Iterable, Mapping, NamedTuple, Sequence

import numpy as np

from .base import POWERSET_SEPARATOR, GenerativeTextModel
from .factory import build_model, model_config, register_family
from .mail import MailExtraction, Message
from .persistence import COMPOSITE_FORMAT, SnapshotError, loads, zip_member
from .predictions import PosteriorPredictions
from .text import Tokenizer, words_of_tokens

#: Default floor of a base's log posterior in the pool.
FLOOR = -50.0
_WORDS = Tokenizer()
_LARGEST = np.finfo(np.float64).max


def meta_feature_count(n_bases: int, meta: bool) -> int:
    """Columns of ``m(d)``: 1 (the constant), or ``3 + 2 n_bases`` with meta-features.

    >>> meta_feature_count(3, False), meta_feature_count(3, True)
    (1, 9)
    """
    return 3 + 2 * n_bases if meta else 1


def meta_features(log_posts: np.ndarray, lengths: np.ndarray, meta: bool) -> np.ndarray:
    """``m(d)`` for a batch: ``log_posts`` of shape (bases, docs, classes) (floored), ``lengths`` per document.

    >>> lp = np.log(np.array([[[0.5, 0.5]], [[0.9, 0.1]]]))
    >>> meta_features(lp, np.array([3.0]), True).round(4).tolist()
    [[1.0, 0.2773, 0.5, 1.0, 0.9, 0.469, 1.0]]
    """
    n_bases, n_docs, n_classes = log_posts.shape
    # columns written in place (no np.stack), the agreement as a count over n_bases**2 (what .mean divides):
    # the same values as building the column list, with fewer numpy calls (a served pool scores one at a time)
    out = np.empty((n_docs, meta_feature_count(n_bases, meta)))
    out[:, 0] = 1.0
    if meta:
        out[:, 1] = np.log1p(lengths) / 5.0
        norm = math.log(n_classes) if n_classes > 1 else 1.0
        for j, lp in enumerate(log_posts):
            p = np.exp(lp)
            out[:, 2 + 2 * j] = p.max(axis=1)
            out[:, 3 + 2 * j] = -(p * lp).sum(axis=1) / norm
        top = log_posts.argmax(axis=2)
        out[:, -1] = (top[:, None, :] == top[None, :, :]).sum(axis=(0, 1), dtype=np.float64) / (n_bases * n_bases)
    return out


def pool(log_posts: np.ndarray, meta_columns: np.ndarray, weights: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """Normalized log posteriors of the pool: ``log_posts`` (bases, docs, classes) floored, ``meta_columns``
    (docs, F), ``weights`` (bases, F), ``bias`` (classes,).

    >>> lp = np.log(np.array([[[0.8, 0.2]], [[0.4, 0.6]]]))
    >>> np.exp(pool(lp, np.ones((1, 1)), np.array([[1.0], [1.0]]), np.zeros(2))).round(4).tolist()
    [[0.7273, 0.2727]]
    """
    alpha = meta_columns @ weights.T  # (docs, bases)
    scores = np.einsum("dj,jdl->dl", alpha, log_posts) + bias[None, :]
    top = scores.max(axis=1, keepdims=True)
    return scores - (top + np.log(np.exp(scores - top).sum(axis=1, keepdims=True)))


def class_key(name) -> str:
    """A class name as the bias is keyed (label-powerset tuples joined by the unit separator)."""
    return POWERSET_SEPARATOR.join(name) if isinstance(name, tuple) else str(name)


class EnsembleSpec(NamedTuple):
    """Where a single model has its parsed affix string: the name the service writes into outputs and logs
    (``ensemble(`` the bases' affix strings ``)``)."""

    name: str


class Ensemble(PosteriorPredictions):
    """Base models learning the same documents, scored by a log-linear pool (module docstring).

    Parameters
    ----------
    bases : sequence of GenerativeTextModel
        The base models (empty or having learned the same documents).
    weights : array-like, shape (n_bases,) or (n_bases, F)
        Pool weights ``v``: one per base, or per base and meta-feature (``F`` = :func:`meta_feature_count`).
    bias : mapping class key -> float, optional
        Per-class bias ``b_l`` (:func:`class_key` names; absent classes 0).
    meta : bool
        Weights move with the meta-features of each document.
    floor : float
        Floor of each base's log posterior.

    Examples
    --------
    >>> from sgm.model import MNB
    >>> e = Ensemble([MNB("u_jm", beta=0.5), MNB("uc_pd_jm_dp", tokenizer=Tokenizer(binary=True))], [0.6, 0.4])
    >>> e.learn_many(["cheap pills now", "lunch at noon", "cheap cheap offer"], ["spam", "ham", "spam"], ids=["a", "b", "c"])
    3
    >>> e.predict_one("cheap lunch offer")
    'spam'
    >>> e.forget("c"), len(e)
    (True, 2)
    >>> clone = Ensemble.from_bytes(e.to_bytes())
    >>> bool(np.allclose(clone.predict_log_proba_many(["noon pills"])[1], e.predict_log_proba_many(["noon pills"])[1]))
    True
    """

    family = "ensemble"

    def __init__(self, bases: Sequence[GenerativeTextModel], weights, bias: Mapping[str, float] | None = None,
                 meta: bool = False, floor: float = FLOOR) -> None:
        self.bases = list(bases)
        if not self.bases:
            raise ValueError("an ensemble needs at least one base model")
        if len({b.multilabel for b in self.bases}) != 1:
            raise ValueError("the base models must share one multilabel mode")
        v = np.asarray(weights, dtype=np.float64)
        if v.ndim == 1:
            v = v[:, None]
        self.meta = bool(meta)
        expected = (len(self.bases), meta_feature_count(len(self.bases), self.meta))
        if v.shape != expected:
            raise ValueError(f"weights must have shape {expected}, got {v.shape}")
        if not np.isfinite(v).all():
            raise ValueError("weights must be finite")
        self.weights = v
        self.bias = {str(k): float(b) for k, b in (bias or {}).items()}
        if not all(math.isfinite(b) for b in self.bias.values()):
            raise ValueError("biases must be finite")
        if not (math.isfinite(floor) and floor < 0):
            raise ValueError("floor must be a negative number")
        self.floor = float(floor)
        for base in self.bases:  # new bases' vocabularies traced, so bases with one tokenizer share its pass
            base.state.terms.follow_lineage()

    # ------------------------------------------------------------ config
    @property
    def multilabel(self) -> str:
        return self.bases[0].multilabel

    @property
    def label_threshold(self) -> float | None:
        """Powerset output rule of :meth:`rank_many` (the bases share it: :meth:`from_config`)."""
        return self.bases[0].label_threshold

    @property
    def spec(self) -> EnsembleSpec:
        return EnsembleSpec("ensemble(" + ",".join(base.spec.name for base in self.bases) + ")")

    def model_config(self) -> dict[str, Any]:
        """The configuration :func:`model.factory.build_model` rebuilds an empty ensemble from."""
        out = {"model": "ensemble", "params": {}, "bases": [model_config(b) for b in self.bases],
               "weights": self.weights.tolist(), "bias": dict(self.bias), "meta": self.meta, "floor": self.floor,
               "multilabel": self.multilabel}
        if self.label_threshold is not None:
            out["label_threshold"] = self.label_threshold
        return out

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> "Ensemble":
        unknown = set(config) - {"model", "bases", "weights", "bias", "meta", "floor", "multilabel", "label_threshold",
                                 "params"}
        if unknown:
            raise ValueError(f"unknown ensemble configuration keys: {sorted(unknown)}")
        if config.get("params"):
            raise ValueError("an ensemble takes no params: its numbers are the bases' and the pool's")
        bases = []
        for base in config.get("bases") or []:
            base = dict(base)
            for shared in ("multilabel", "label_threshold"):  # the data's mode (e.g. powerset) applies to every base
                if config.get(shared) is not None:
                    base[shared] = config[shared]
            bases.append(build_model(base))
        return cls(bases, config.get("weights", [1.0 / max(len(bases), 1)] * len(bases)), config.get("bias"),
                   bool(config.get("meta", False)), float(config.get("floor", FLOOR)))

    def __repr__(self) -> str:
        return f"Ensemble({len(self.bases)} bases, meta={self.meta})"

    # ------------------------------------------------------------ learning
    def learn_one(self, doc, labels, ts: float | None = None, id: str | None = None) -> bool:
        """Learn one document in every base; ``True`` if it changed them."""
        changed = [base.learn_one(doc, labels, ts=ts, id=id) for base in self.bases]
        return any(changed)

    def learn_many(self, docs: Iterable, labels: Iterable, ts: Iterable | None = None, ids: Iterable | None = None,
                   *, sequential: bool = False) -> int:
        """Learn a batch in every base; how many documents changed the first base."""
        docs, labels = list(docs), list(labels)
        ts, ids = (None if ts is None else list(ts)), (None if ids is None else list(ids))
        counts = [base.learn_many(docs, labels, ts=ts, ids=ids, sequential=sequential) for base in self.bases]
        return counts[0]

    def unlearn_one(self, doc, labels=None, ts: float | None = None, id: str | None = None) -> bool:
        """Unlearn a document from every base (the first base checks the labels before any changes)."""
        changed = [self.bases[0].unlearn_one(doc, labels, ts=ts, id=id)]
        changed += [base.unlearn_one(doc, None, ts=ts, id=id) for base in self.bases[1:]]
        return changed[0]

    def forget(self, id: str) -> bool:
        return [base.forget(id) for base in self.bases][0]

    def check_labels(self, labels) -> tuple[str, ...]:
        return self.bases[0].check_labels(labels)

    def invalidate_derived(self) -> None:
        for base in self.bases:
            base.invalidate_derived()

    def __len__(self) -> int:
        return len(self.bases[0])

    def __contains__(self, id: str) -> bool:
        return id in self.bases[0]

    def learned_classes(self, id: str) -> frozenset[str] | None:
        return self.bases[0].learned_classes(id)

    @property
    def classes_(self) -> list:
        return self.bases[0].classes_

    def class_names(self) -> tuple[np.ndarray, list]:
        """The first base's active class ids and names: the pool's class order (:meth:`base_log_posteriors`)."""
        return self.bases[0].class_names()

    def documents_per_class(self) -> dict:
        return self.bases[0].documents_per_class()

    def document_ids(self) -> set[str]:
        return self.bases[0].document_ids()

    def tokenizers(self) -> tuple:
        """The distinct tokenizers of the bases, in base order (the service caps a text's terms under each)."""
        return tuple(dict.fromkeys(base.tokenizer for base in self.bases))

    @property
    def reads_messages_one_way(self) -> bool:
        """Every base reads a whole email with the same mail options (so :meth:`read_message` is theirs)."""
        return all(base.mail == self.bases[0].mail for base in self.bases[1:])

    def read_message(self, message: Message) -> MailExtraction:
        """What every base learns and scores of ``message`` (:meth:`GenerativeTextModel.read_message`).

        Defined only when the bases read messages one way (:attr:`reads_messages_one_way`): the service reads a
        message once and passes its terms on; bases with other mail options would each need their own terms.
        """
        if not self.reads_messages_one_way:
            raise ValueError("the bases read whole emails with different mail options: pass the Message itself")
        return self.bases[0].read_message(message)

    # ------------------------------------------------------------ scoring
    def base_log_posteriors(self, docs: Sequence) -> tuple[list, np.ndarray]:
        """``(classes, array (bases, docs, classes))``: every base's log posteriors in the first base's class
        order, floored."""
        classes, first = self.bases[0].predict_log_proba_many(docs)
        out = np.empty((len(self.bases), len(docs), len(classes)))
        out[0] = first
        column = {c: i for i, c in enumerate(classes)}
        text = docs[0] if len(docs) == 1 and type(docs[0]) is str else None
        for j, base in enumerate(self.bases[1:], start=1):
            if text is not None:
                self._share_token_pass(text, j)
            names, lp = base.predict_log_proba_many(docs)
            if names == classes:
                out[j] = lp
            else:  # same documents, other class ids (e.g. freed and reused in another order): by name
                out[j][:, [column[c] for c in names]] = lp
        # what np.maximum(np.nan_to_num(out, nan=floor, neginf=floor), floor) gives, in two ufunc calls: NaN and
        # -inf become the floor (fmax), +inf the largest float (as nan_to_num makes it)
        floored = np.fmax(out, self.floor, out=out)
        return classes, np.minimum(floored, _LARGEST, out=floored)

    def _share_token_pass(self, text: str, j: int) -> None:
        """Before base ``j`` scores ``text`` (alone): hand it the token pass an earlier base with the same tokenizer
        remembers, when their vocabularies are in lockstep (:meth:`model.lexicon.TermLexicon.share_pass`; the
        pass it would make itself, then reused by its learn as its own). One pass per tokenizer instead of one
        per base; a base whose lexicon is not built yet (its first text, or one that scores without it) is left
        to its own."""
        base = self.bases[j]
        lexicon = base.built_lexicon()
        if lexicon is None:
            return
        for earlier in self.bases[:j]:
            source = earlier.built_lexicon()
            if source is not None and earlier.tokenizer == base.tokenizer and source.share_pass(text, base.tokenizer,
                                                                                                 lexicon):
                return

    def lengths(self, docs: Sequence) -> np.ndarray:
        """The length meta-feature's input: word tokens of a text, the count sum of a mapping or message.

        A text just scored alone is not tokenized again: its word count is read from a base's remembered
        token pass (:meth:`model.lexicon.TermLexicon.remembered_token_count`; a raw-count base that splits words as
        ``Tokenizer()`` does, with any n-grams), the same whole number.
        """
        out = []
        counters = self._word_counters() if len(docs) == 1 else []
        for doc in docs:
            if isinstance(doc, str):
                for base in counters:
                    tokens = base.term_lexicon().remembered_token_count(doc, base.tokenizer)
                    if tokens is not None:
                        out.append(words_of_tokens(tokens, base.tokenizer.ngrams))
                        break
                else:
                    out.append(len(_WORDS.tokens(doc)))
            elif isinstance(doc, Message):
                out.append(sum(self.bases[0].read_message(doc).terms.values()))
            else:
                out.append(sum(doc.values()))
        return np.asarray(out, dtype=np.float64)

    def _word_counters(self) -> list:
        """The bases whose tokens give the word count of :data:`_WORDS` (same words, any n-grams, counts).

        Any weighting: TF-IDF bases score text through their lexicon too (since session 12), so they remember
        the pass as raw-count bases do.
        """
        return [base for base in self.bases if base.tokenizer.compiled and not base.tokenizer.binary  # words, not chars
                and (base.tokenizer.lowercase, base.tokenizer.max_token_length) == (_WORDS.lowercase,
                                                                                    _WORDS.max_token_length)]

    def predict_log_proba_many(self, docs: Iterable) -> tuple[list, np.ndarray]:
        """Log posteriors of the pool: ``(classes, array (docs, classes))``."""
        docs = list(docs)
        classes, log_posts = self.base_log_posteriors(docs)
        lengths = self.lengths(docs) if self.meta else np.zeros(len(docs))
        bias = np.array([self.bias.get(class_key(c), 0.0) for c in classes])
        return classes, pool(log_posts, meta_features(log_posts, lengths, self.meta), self.weights, bias)

    # ------------------------------------------------------------ snapshots
    def write_snapshot(self, handle: BinaryIO, extra: dict[str, Any] | None = None) -> None:
        """A ZIP (:data:`model.persistence.COMPOSITE_FORMAT`) of the configuration, :meth:`checksum` and ``extra``
        (JSON-able, e.g. the service's offsets) in ``meta.json``, and each base's own snapshot; ``handle`` as
        :meth:`GenerativeTextModel.write_snapshot`'s. Holds one base's snapshot bytes at a time."""
        header = {"format": COMPOSITE_FORMAT, "version": 1, "config": self.model_config(), "parts": len(self.bases),
                  "extra": extra or {}, "checksum": self.checksum()}
        with zipfile.ZipFile(handle, "w", zipfile.ZIP_STORED) as archive:
            for j, base in enumerate(self.bases):
                archive.writestr(zip_member(f"base-{j}.sgm"), base.to_bytes())
            archive.writestr(zip_member("meta.json"), json.dumps(header, sort_keys=True))

    def to_bytes(self, extra: dict[str, Any] | None = None) -> bytes:
        buffer = io.BytesIO()
        self.write_snapshot(buffer, extra)
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, **limits: Any) -> "Ensemble":
        """Rebuild an ensemble from :meth:`to_bytes` (:func:`model.persistence.loads`: each base checked as its
        own snapshot is)."""
        model = loads(data, **limits)[0]
        if not isinstance(model, cls):
            raise SnapshotError("not an ensemble snapshot")
        return model

    @classmethod
    def load_parts(cls, archive: zipfile.ZipFile, meta: dict, max_bytes: int) -> tuple["Ensemble", dict]:
        """``(ensemble, extra)`` of an opened composite snapshot (:func:`model.persistence.load` calls it)."""
        config, parts = meta["config"], meta.get("parts")
        if not isinstance(parts, int) or isinstance(parts, bool) or not 1 <= parts <= len(archive.namelist()):
            raise SnapshotError("ensemble snapshot: bad number of parts")
        bases = [loads(archive.read(f"base-{j}.sgm"), max_bytes=max_bytes)[0] for j in range(parts)]
        if not all(isinstance(base, GenerativeTextModel) for base in bases):
            raise SnapshotError("ensemble snapshot: a part is not a single model")
        model = cls(bases, config["weights"], config.get("bias"), bool(config.get("meta", False)),
                    float(config.get("floor", FLOOR)))
        if model.model_config() != config or model.checksum() != meta.get("checksum"):  # e.g. a pool edited
            raise SnapshotError("ensemble snapshot: its parts and configuration do not match its checksum")
        return model, meta.get("extra", {})

    def checksum(self) -> str:
        """SHA-256 over the pool's configuration and each base's :meth:`GenerativeTextModel.checksum`."""
        content = {"config": self.model_config(), "bases": [base.checksum() for base in self.bases]}
        return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()

    # ------------------------------------------------------------ service gauges
    def resum_totals(self) -> int:
        """Every base's :meth:`GenerativeTextModel.resum_totals`: how many totals had drifted in all."""
        return sum(base.resum_totals() for base in self.bases)

    def memory_bytes(self) -> int:
        return sum(base.memory_bytes() for base in self.bases)

    def stats(self) -> dict[str, Any]:
        """Documents, classes and clock of the first base (all learned the same documents); sizes summed over
        the bases (what the model holds); ``"bases"``: each base's own stats."""
        each = [base.stats() for base in self.bases]
        out = dict(each[0])
        for key in ("terms", "vocabulary", "entries", "pruned_entries", "stale_postings_recomputed"):
            if any(key in s for s in each):
                out[key] = sum(s.get(key, 0) for s in each)
        out["bases"] = each
        return out


register_family(Ensemble.family, Ensemble)
