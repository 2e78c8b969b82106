"""Reader for the shared public datasets (``shared/data/*.jsonl.gz``).

Each file is (gzip-compressed) JSON Lines, one document per line:
``{"id", "text", "labels", "ts", "split"}`` -- see ``shared/data/README.md``; a
whole-message dataset (``spamassassin-raw``) carries ``raw_b64`` (the standard
base64 of the message bytes) instead of, or beside, ``text``. The data stays
where it is: it is never copied into the repository (the corpora's terms allow
research use, not redistribution); :func:`find_dataset` locates it through
``$SGM_DATA_DIR``, else ``shared/data`` or ``../shared/data`` from the current
directory or beside the source tree (:func:`data_dirs`), and returns None where
it is absent, so callers (and tests) can skip cleanly and commands can say what
to pass (:func:`missing_dataset_message`).

Examples
--------
>>> import json, tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> lines = [{"id": "a", "text": "oil up", "labels": ["crude"], "ts": "1987-03-02", "split": "train"},
...          {"id": "b", "text": "", "labels": ["earn"], "ts": None, "split": "test"}]
>>> _ = (folder / "tiny.jsonl").write_text("\\n".join(json.dumps(d) for d in lines))
>>> docs = list(load_jsonl(folder / "tiny.jsonl"))
>>> docs[0]
LabelledDoc(id='a', text='oil up', labels=('crude',), ts=541641600.0, split='train')
>>> [len(part) for part in split(docs)]
[1, 1, 0]
"""
from __future__ import annotations

import base64
import binascii
import gzip
import io
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, NamedTuple

from sgm.model.mail import Message
from sgm.stream.records import MAX_TS, InvalidRecord, Limits, Op, ScoreRecord, TrainRecord, parse_timestamp

__all__ = ["DATASETS", "LabelledDoc", "Split", "data_dir", "data_dirs", "find_dataset", "load_jsonl",
           "missing_dataset_message", "split", "time_ordered"]

#: The shared datasets by name (``find_dataset(name)``).
DATASETS = ("r8", "r52", "webkb", "reuters21578", "sms-spam", "spamassassin", "enron-spam", "spamassassin-raw")

# Datasets are curated history, not live input: allow times before 1970.
_DATASET_TS_LIMITS = Limits(min_ts=-(2.0**40), max_ts=MAX_TS)
_GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True, slots=True)
class LabelledDoc:
    """One document of a shared dataset.

    Parameters
    ----------
    id : str
        Unique within its file.
    text : str or None
        The document; may be empty (some source documents are); ``None`` when the
        record carries only a whole message (``raw``).
    labels : tuple of str
        Class labels, de-duplicated keeping first occurrences (two reuters21578
        stories repeat a topic); may be empty (reuters21578 stories without topics).
    ts : float or None
        Event time, epoch seconds (ISO strings without offset are taken as UTC).
    split : {"train", "test"} or None
        The dataset's standard split, if it has one.
    raw : bytes or None
        The whole message (decoded ``raw_b64``), in whole-message datasets.

    Examples
    --------
    >>> doc = LabelledDoc("sms-1", "free prize", ("spam",), None, None)
    >>> doc.to_train_record()
    TrainRecord(id='sms-1', op=<Op.LEARN: 'learn'>, labels=('spam',), text='free prize', terms=None, ts=None)
    >>> doc.to_score_record()
    ScoreRecord(id='sms-1', text='free prize', terms=None, ts=None)
    >>> LabelledDoc("m-1", None, ("spam",), None, None, raw=b"Subject: hi").document
    Message(11 bytes, blake2b 82084e977c66...)
    """

    id: str
    text: str | None
    labels: tuple[str, ...]
    ts: float | None
    split: str | None
    raw: bytes | None = field(default=None, repr=False)  # can be large

    @property
    def document(self) -> str | Message:
        """What a model reads: the whole message when there is one, else the text."""
        return Message(self.raw) if self.raw is not None else self.text

    def to_train_record(self, op: Op = Op.LEARN) -> TrainRecord:
        """This document as a training record (note: a record without labels is not valid);
        a whole message goes as ``raw_b64``."""
        text = self.text if self.raw is None else None
        return TrainRecord(id=self.id, op=op, labels=self.labels, text=text, ts=self.ts, raw=self.raw)

    def to_score_record(self) -> ScoreRecord:
        """This document as a scoring record."""
        return ScoreRecord(id=self.id, text=self.text if self.raw is None else None, ts=self.ts, raw=self.raw)


class Split(NamedTuple):
    """Documents by standard split, each list in input order."""

    train: list[LabelledDoc]
    test: list[LabelledDoc]
    unsplit: list[LabelledDoc]


def data_dirs() -> list[Path]:
    """Where shared datasets are looked for, in order: ``$SGM_DATA_DIR`` alone when it is set; else
    ``shared/data`` and ``../shared/data`` from the current directory (a clone beside the data, run from
    its root), then ``../shared/data`` beside the source tree (an editable install)."""
    configured = os.environ.get("SGM_DATA_DIR")
    if configured:
        return [Path(configured)]
    here = Path.cwd()
    found = [here / "shared" / "data", here.parent / "shared" / "data",
             Path(__file__).resolve().parents[1].parent / "shared" / "data"]
    return list(dict.fromkeys(path.resolve() for path in found))


def data_dir() -> Path | None:
    """The first of :func:`data_dirs` that exists; None if none does."""
    return next((folder for folder in data_dirs() if folder.is_dir()), None)


def missing_dataset_message(name: str) -> str:
    """What to do when ``name`` is neither a file nor a shared dataset found in :func:`data_dirs`.

    >>> print(missing_dataset_message("r8").splitlines()[0])
    no dataset file or shared dataset named 'r8'
    """
    looked = ", ".join(str(folder) for folder in data_dirs())
    known = f" (shared datasets: {', '.join(DATASETS)})" if name in DATASETS or not Path(name).suffix else ""
    return (f"no dataset file or shared dataset named {name!r}\n"
            f"  looked for {name}.jsonl.gz in: {looked}{known}\n"
            f"  pass a file (--data path/to/{Path(name).name if Path(name).suffix else name + '.jsonl.gz'}) or set "
            "SGM_DATA_DIR to the folder that holds the shared datasets")


def find_dataset(name: str) -> Path | None:
    """Path of the dataset called ``name`` (``"r8"``, ``"r8.jsonl.gz"``...), or None if absent.

    ``name`` may also be a path to an existing file, which is returned as is.

    Examples
    --------
    >>> find_dataset("no-such-dataset") is None
    True
    """
    as_path = Path(name)
    if as_path.is_file():
        return as_path
    folder = data_dir()
    if folder is None:
        return None
    for candidate in (name, f"{name}.jsonl.gz", f"{name}.jsonl"):
        path = folder / candidate
        if path.is_file():
            return path
    return None


def _open_text(path: Path) -> io.TextIOBase:
    with open(path, "rb") as probe:
        compressed = probe.read(2) == _GZIP_MAGIC  # by content, not by name
    # surrogateescape: bytes that are not UTF-8 reach the line they are on (load_jsonl names it), instead of
    # failing the read of a whole buffer with no line number
    if compressed:
        return gzip.open(path, "rt", encoding="utf-8", errors="surrogateescape")
    return open(path, encoding="utf-8", errors="surrogateescape")


def _field_error(path: Path, line_no: int, message: str) -> ValueError:
    return ValueError(f"{path}:{line_no}: {message}")


def _doc_from(obj: object, path: Path, line_no: int) -> LabelledDoc:
    if not isinstance(obj, dict):
        raise _field_error(path, line_no, "expected a JSON object")
    doc_id, text, labels, split_name = obj.get("id"), obj.get("text"), obj.get("labels"), obj.get("split")
    raw_b64, raw = obj.get("raw_b64"), None
    if not isinstance(doc_id, str) or not doc_id:
        raise _field_error(path, line_no, "id must be a non-empty string")
    if raw_b64 is not None:
        try:
            raw = base64.b64decode(raw_b64, validate=True)
        except (binascii.Error, ValueError, TypeError):
            raise _field_error(path, line_no, f"{doc_id}: raw_b64 must be standard base64") from None
    if not isinstance(text, str) and not (text is None and raw is not None):
        raise _field_error(path, line_no, f"{doc_id}: text must be a string (or raw_b64 given)")
    if not isinstance(labels, list) or not all(isinstance(label, str) for label in labels):
        raise _field_error(path, line_no, f"{doc_id}: labels must be a list of strings")
    if split_name is not None and not isinstance(split_name, str):
        raise _field_error(path, line_no, f"{doc_id}: split must be a string or null")
    try:
        ts = parse_timestamp(obj.get("ts"), _DATASET_TS_LIMITS)
    except InvalidRecord as exc:
        raise _field_error(path, line_no, f"{doc_id}: {exc.detail}") from None
    return LabelledDoc(id=doc_id, text=text, labels=tuple(dict.fromkeys(labels)), ts=ts, split=split_name, raw=raw)


def load_jsonl(path: str | os.PathLike[str], *, limit: int | None = None) -> Iterator[LabelledDoc]:
    """Stream the documents of a dataset file, gzip-compressed or plain.

    Parameters
    ----------
    path : path-like
        A ``.jsonl`` or ``.jsonl.gz`` file (compression is detected from content).
    limit : int, optional
        Stop after this many documents.

    Yields
    ------
    LabelledDoc
        In file order. Blank lines are skipped.

    Raises
    ------
    ValueError
        On a line that is not a document of the documented format, naming file and line.
    """
    path = Path(path)
    count = 0
    with _open_text(path) as lines:
        for line_no, line in enumerate(lines, start=1):
            if limit is not None and count >= limit:
                return
            if not line.strip():
                continue
            if not line.isascii():
                try:
                    line.encode("utf-8")
                except UnicodeEncodeError:  # an escaped byte that is not UTF-8
                    raise _field_error(path, line_no, "not UTF-8") from None
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise _field_error(path, line_no, f"invalid JSON: {exc.msg}") from None
            yield _doc_from(obj, path, line_no)
            count += 1


def split(docs: Iterable[LabelledDoc]) -> Split:
    """Partition documents by their ``split`` field (``train``, ``test``, anything else).

    Examples
    --------
    >>> docs = [LabelledDoc(str(i), "", ("x",), None, s) for i, s in enumerate(["train", "test", None, "train"])]
    >>> [[d.id for d in part] for part in split(docs)]
    [['0', '3'], ['1'], ['2']]
    """
    parts = Split([], [], [])
    for doc in docs:
        (parts.train if doc.split == "train" else parts.test if doc.split == "test" else parts.unsplit).append(doc)
    return parts


def time_ordered(
    docs: Iterable[LabelledDoc], *, undated: Literal["last", "drop", "error"] = "last"
) -> list[LabelledDoc]:
    """Documents sorted by ``ts``; ties keep their input order (the sort is stable).

    Parameters
    ----------
    undated : {"last", "drop", "error"}
        Documents without ``ts``: appended after the dated ones in input order,
        left out, or a ``ValueError``.

    Examples
    --------
    >>> docs = [LabelledDoc("a", "", (), 3.0, None), LabelledDoc("b", "", (), None, None),
    ...         LabelledDoc("c", "", (), 1.0, None), LabelledDoc("d", "", (), 3.0, None)]
    >>> [d.id for d in time_ordered(docs)], [d.id for d in time_ordered(docs, undated="drop")]
    (['c', 'a', 'd', 'b'], ['c', 'a', 'd'])
    """
    if undated not in ("last", "drop", "error"):
        raise ValueError(f"undated must be 'last', 'drop' or 'error', got {undated!r}")
    dated: list[LabelledDoc] = []
    rest: list[LabelledDoc] = []
    for doc in docs:
        if doc.ts is not None:
            dated.append(doc)
        elif undated == "error":
            raise ValueError(f"document {doc.id!r} has no ts")
        else:
            rest.append(doc)
    dated.sort(key=lambda d: d.ts)
    return dated + rest if undated == "last" else dated
