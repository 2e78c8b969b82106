"""A user's own documents, read from the files they have: JSON Lines, text folders, maildir, mbox, ``.eml``.

What ``sgm learn``, ``sgm forget`` and ``sgm score`` read. Every reader is a
generator of :class:`SourceDoc` (a document with a stable id, labels if the
input carries them, and its origin) and :class:`Skipped` (what could not be a
document, with a reason code); readers never raise on bad content, so one
broken file costs only itself. Records are then built with
:meth:`SourceDoc.record` and checked by the service's own validator
(:mod:`sgm.stream.records`) before they are sent.

==================  ===============================================================
module              job
==================  ===============================================================
``documents``       :class:`SourceDoc`, :class:`Skipped`, the skip reasons
``ids``             stable ids from content (default) or path
``files``           walking files and folders, choosing each file's reader, text files
``jsonl``           JSON Lines records (plain or gzip)
``mail``            maildir, mbox, ``.eml`` (whole messages, for ``raw_b64``)
==================  ===============================================================
"""
from .documents import SKIP_REASONS, SourceDoc, Skipped
from .files import FORMATS, read_paths
from .ids import ID_SCHEMES, content_id

__all__ = ["FORMATS", "ID_SCHEMES", "SKIP_REASONS", "SourceDoc", "Skipped", "content_id", "read_paths"]
