"""``sgm score``: answers for documents from files, through a running service or from a saved model.

Both ways check each document's scoring record with the service's validator
first (a record the service would dead-letter is skipped here with the same
reason) and produce the same answer per document: its id, the output labels
and the top-k posteriors.

* :func:`score_through_service` sends the records to the scoring topic and
  waits, up to a timeout, for the outputs (or dead letters) with their ids.
* :func:`score_locally` scores with the newest snapshot of a state directory,
  exactly as the service's classifier does (``rank_many`` with the same top-k
  and threshold, the model's own mail reader, the same spam decision when one
  is given), with no broker at all.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable

from sgm.stream.sources import SourceDoc, Skipped

from ..decision import SpamDecision
from ..service.scoring import documents_to_score
from ..progress import ProgressLine
from .records import checked_record
from .tally import Tally

__all__ = ["Answer", "Entry", "prepare", "score_locally", "score_through_service"]

#: Documents per model call when scoring locally.
LOCAL_BATCH = 256


@dataclass
class Entry:
    """One input document and, once known, its answer."""

    doc: SourceDoc
    value: bytes
    answer: "Answer | None" = None


@dataclass
class Answer:
    """Output labels and top-k ``(label, p)`` of one document, which model gave them, and, as in the
    service's outputs (docs/SCHEMAS.md), the spam ``decision`` and the ``mail`` flags where there are any."""

    labels: list[str]
    top_k: list[tuple[str, float]]
    model: dict[str, Any] = field(default_factory=dict)
    decision: dict[str, Any] | None = None
    mail: dict[str, Any] | None = None

    def to_dict(self, doc: SourceDoc) -> dict[str, Any]:
        out = {"id": doc.id, "origin": doc.origin, "labels": self.labels,
               "top_k": [{"label": label, "p": p} for label, p in self.top_k], "model": self.model}
        for name in ("decision", "mail"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out


def prepare(items: Iterable[SourceDoc | Skipped], tally: Tally, progress: ProgressLine) -> list[Entry]:
    """The documents whose scoring records pass the validator; the rest are counted as skipped."""
    entries = []
    for item in items:
        if isinstance(item, SourceDoc):
            value = checked_record(item, "score")
            if not isinstance(value, Skipped):
                entries.append(Entry(item, value))
                progress.update(read=1)
                continue
            item = value
        tally.skip(item)
        progress.update(read=0, skipped=1)
    return entries


def score_locally(saved, entries: list[Entry], top_k: int, threshold: float | None,
                  progress: ProgressLine, tally: Tally, decision: SpamDecision | None = None) -> None:
    """Score ``entries`` with ``saved.model`` (a :class:`~.snapshots.SavedModel`), filling their answers,
    as the service's classifier does (``consumers/service/scoring.py``): a whole message is read by the
    model's own extractor (its flags go into ``mail``), and with a ``decision`` every class is ranked, the
    labels follow the verdict, and the top ``top_k`` are kept."""
    model = saved.model
    info = {"kind": model.family, "spec": model.spec.name, "documents": len(model), "version": saved.version,
            "train_offsets": {str(p): o for p, o in sorted(saved.train_offsets.items())}}
    k = top_k if decision is None else max(top_k, len(model.class_names()[1]))
    for start in range(0, len(entries), LOCAL_BATCH):
        batch = entries[start : start + LOCAL_BATCH]
        docs, mail = documents_to_score(model, [(entry.doc.raw, entry.doc.terms if entry.doc.terms is not None
                                                 else entry.doc.text) for entry in batch])
        ranking = model.rank_many(docs, k, threshold)
        probabilities = ranking.probabilities.tolist()
        if decision is None:
            made, labels = [None] * len(batch), ranking.labels
        else:
            made, labels = decision.decide(model, ranking.names, probabilities)
        for entry, names, row, row_labels, row_made, read in zip(batch, ranking.names, probabilities, labels, made,
                                                                 mail):
            entry.answer = Answer(list(row_labels), list(zip(names[:top_k], row[:top_k])), info, row_made, read)
            tally.handled(list(row_labels)[:1])
        progress.update(scored=len(batch))


def score_through_service(client, config, entries: list[Entry], timeout: float, progress: ProgressLine,
                          tally: Tally) -> tuple[set[str], list[str]]:
    """Send ``entries`` to the scoring topic and collect the answers; returns ``(unanswered ids, send errors)``."""
    from .answers import AnswerReader
    from .sending import TopicSender

    reader = AnswerReader(client, config.output_topic, config.dlq_topic, config.score_topic,
                          fetch_wait_ms=config.fetch_wait_ms)
    by_id: dict[str, list[Entry]] = {}
    try:
        sender = TopicSender(client.producer(), config.score_topic)
        for entry in entries:
            if entry.doc.id not in by_id:
                sender.send(entry.doc.id, entry.value)
            by_id.setdefault(entry.doc.id, []).append(entry)
            progress.update(sent=1)
        sender.close()
        if sender.failed:
            return set(), sender.errors

        def on_answer(doc_id: str) -> None:
            progress.update(sent=0, answered=len(by_id[doc_id]))

        waiting = reader.wait(set(by_id), timeout, on_answer)
    finally:
        reader.close()
    for doc_id, group in by_id.items():
        output = reader.outputs.get(doc_id)
        for entry in group:
            if output is not None:
                entry.answer = Answer(list(output.labels), [(label, p) for label, p in output.top_k],
                                      dict(output.model), None if output.decision is None else dict(output.decision),
                                      None if output.mail is None else dict(output.mail))
                tally.handled(list(output.labels)[:1])
            elif doc_id in reader.dead:
                reason, detail = reader.dead[doc_id]
                tally.skip(Skipped(entry.doc.origin, reason, f"dead-lettered by the service: {detail}"))
    return waiting, []


def format_answer(doc: SourceDoc, answer: Answer | None, as_json: bool) -> str:
    """One output line: JSON, or ``id<TAB>labels<TAB>label=p ...<TAB>origin``."""
    if as_json:
        if answer is None:
            return json.dumps({"id": doc.id, "origin": doc.origin, "labels": None, "top_k": None,
                               "error": "no answer"}, ensure_ascii=False)
        return json.dumps(answer.to_dict(doc), ensure_ascii=False)
    if answer is None:
        return f"{doc.id}\t-\tno answer\t{doc.origin}"
    top = " ".join(f"{label}={p:.4f}" for label, p in answer.top_k)
    labels = ",".join(answer.labels) or "-"
    if answer.decision is not None and answer.decision.get("verdict") == "not_ready":
        labels += " (not_ready: learn guards not met)"
    return f"{doc.id}\t{labels}\t{top}\t{doc.origin}"
