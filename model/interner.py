"""Dense integer ids for names (terms, classes), with a change log a follower can read.

Names can also arrive as UTF-8 bytes (:meth:`Interner.add_new_encoded`, the compiled
tokenizer's new terms): their ids are given at once, their strings are built when first
asked for (``names``, or any other change), and their name -> id entries when ``ids`` is
(a snapshot reads the names only), each in one pass.
"""
from __future__ import annotations

import hashlib
from itertools import compress, repeat
from operator import is_

import numpy as np

#: The lineage of an interner built empty (:attr:`Interner.lineage`).
_EMPTY_LINEAGE = b"empty"


class _NameIds(dict):
    """An :class:`Interner`'s name -> id table (a plain dict: a missing name raises ``KeyError``)."""

    __slots__ = ()


class Interner:
    """Dense integer ids for names (terms or classes), reusing freed ids.

    >>> names = Interner()
    >>> names.add("spam"), names.add("ham"), names.add("spam")
    (0, 1, 0)
    >>> names.remove(0); names.add("eggs")
    0
    >>> names.ids_of(["ham", "toast", "eggs"]).tolist()
    [1, 2, 0]
    """

    __slots__ = ("_ids", "_names", "free", "changes", "version", "_pending", "_pending_count",
                 "_pending_fresh", "_unindexed", "_unindexed_count", "lineage")

    def __init__(self, names: list[str | None] | None = None, free: list[int] | None = None) -> None:
        self._ids = _NameIds()
        self._names: list[str | None] = [] if names is None else names
        self._ids.update((name, i) for i, name in enumerate(self._names) if name is not None)
        #: Names given as bytes and not yet built: ``(reused ids, first fresh id, blob, bounds)`` in order.
        self._pending: list[tuple] = []
        self._pending_count = self._pending_fresh = 0  # names pending; of them, names with new ids
        #: Names built but not yet in ``ids``: ``(names, reused ids, first fresh id)`` in order.
        self._unindexed: list[tuple] = []
        self._unindexed_count = 0
        self.free: list[int] = [] if free is None else free
        #: Ids added or removed, in order, once a follower (``model.lexicon.TermLexicon``) asked for them;
        #: ``None`` when nobody follows, or the log grew so long unread that rebuilding is cheaper.
        self.changes: list[int] | None = None
        #: Bumped by every addition or removal: a result computed at one version holds while it stays.
        self.version = 0
        #: Once followed (:meth:`follow_lineage`): a digest of what the interner held then and of every addition
        #: (the names, in order) and removal (the id) since: two interners with equal lineages hold the same names
        #: at the same ids and the same free ids in the same order, so they give the same ids to the same new
        #: names (what lets two models of one pool share a token pass, :meth:`model.lexicon.TermLexicon.share_pass`).
        #: ``None``: not followed (the default: a model alone pays nothing for it), equal to nothing.
        self.lineage: bytes | None = None

    def follow_lineage(self) -> None:
        """Start :attr:`lineage` (a pool does, for its bases): from the empty interner's when it never held a name,
        else from a digest of its names by id and its free ids in order (O(names), once: e.g. a restored pool)."""
        if self.lineage is not None:
            return
        if self.version == 0 and not self._names and not self._pending and not self.free:
            self.lineage = _EMPTY_LINEAGE
            return
        names = self.names
        held = [b"" if name is None else name.encode("utf-8", "surrogatepass") for name in names]
        self.lineage = _EMPTY_LINEAGE
        self._trace(b"held", b"".join(held), np.array([len(h) for h in held], dtype=np.int64).tobytes(),
                    bytes(name is not None for name in names), np.array(self.free, dtype=np.int64).tobytes())

    @property
    def ids(self) -> _NameIds:
        """name -> id of every name held."""
        if self._pending:
            self._build_pending()
        if self._unindexed:
            self._index_built()
        return self._ids

    @property
    def names(self) -> list[str | None]:
        """id -> name (``None`` for a free id)."""
        if self._pending:
            self._build_pending()
        return self._names

    def _build_pending(self) -> None:
        """Build the strings of the names given as bytes, in the order they came (``ids`` indexes them)."""
        pending, self._pending, self._pending_count, self._pending_fresh = self._pending, [], 0, 0
        names = self._names
        for taken, start, blob, bounds in pending:
            new = decode_names(blob, bounds)
            for index, name in zip(taken, new):
                names[index] = name
            assert len(names) == start, "names built out of order"
            names.extend(new[len(taken):])
            self._unindexed.append((new, taken, start))
            self._unindexed_count += len(new)

    def _index_built(self) -> None:
        """Add the built names' name -> id entries, in the order they came."""
        unindexed, self._unindexed, self._unindexed_count = self._unindexed, [], 0
        ids = self._ids
        for new, taken, start in unindexed:
            ids.update(zip(new, taken))
            ids.update(zip(new[len(taken):], range(start, start + len(new) - len(taken))))

    def ids_of(self, names: list[str], added: list[str] | None = None, added_ids: list[int] | None = None) -> np.ndarray:
        """Ids of ``names``, adding the new ones in first-seen order (listing them in ``added``, their ids in
        ``added_ids``).

        All or nothing: if a new name is not a string, ``TypeError`` is raised
        and the interner is exactly as before the call. The lookups and the
        additions run as C-level passes over the batch (a dict lookup per name,
        one bulk insert of the new ones), not a Python call per new name.
        """
        found = list(map(self.ids.get, names))
        if None in found:
            new = list(dict.fromkeys(compress(names, map(is_, found, repeat(None)))))
            if set(map(type, new)) != {str} and not all(isinstance(name, str) for name in new):
                raise TypeError("terms must be strings")
            given = self.add_new(new).tolist()
            if added is not None:
                added.extend(new)
            if added_ids is not None:
                added_ids.extend(given)
            # The new names' ids from a small table of their own, not a second pass over the whole
            # vocabulary's (a random read of a large dict per name: ~80 us per 1,000-term email).
            found = list(map(dict(zip(new, given)).get, names, found))
        return np.array(found, dtype=np.int64)

    def __len__(self) -> int:
        return len(self._ids) + self._pending_count + self._unindexed_count

    @property
    def capacity(self) -> int:
        return len(self._names) + self._pending_fresh

    def get(self, name: str) -> int | None:
        return self.ids.get(name)

    def add(self, name: str) -> int:
        index = self.ids.get(name)
        return self._add_absent(name) if index is None else index

    def _add_absent(self, name: str) -> int:
        """Give ``name`` (not interned) a freed id, last freed first, or the next new one."""
        if self.free:
            index = self.free.pop()
            self.names[index] = name
        else:
            index = len(self.names)
            self.names.append(name)
        self.ids[name] = index
        self.version += 1
        if self.lineage is not None:
            self._trace_names([name])
        if self.changes is not None:
            self._log_change(index)
        return index

    def _trace(self, kind: bytes, *parts: bytes) -> None:
        """Fold one change into :attr:`lineage`."""
        digest = hashlib.blake2b(self.lineage, digest_size=16)
        digest.update(kind)
        for part in parts:
            digest.update(len(part).to_bytes(8, "little"))
            digest.update(part)
        self.lineage = digest.digest()

    def _trace_names(self, names: list[str]) -> None:
        """An addition of ``names`` (in order) to :attr:`lineage`, as :meth:`_trace_encoded` traces the same names
        given side by side as UTF-8 (``surrogatepass``) bytes."""
        encoded = [name.encode("utf-8", "surrogatepass") for name in names]
        lengths = np.array([len(e) for e in encoded], dtype=np.int64)
        self._trace(b"add", b"".join(encoded), np.stack([np.cumsum(lengths) - lengths, lengths], axis=1).tobytes())

    def _trace_encoded(self, blob: np.ndarray, bounds: np.ndarray) -> None:
        """An addition of the names ``bounds`` cut from ``blob``: the bytes and the bounds as they are (the same
        names laid out otherwise give another lineage, which only refuses a share)."""
        self._trace(b"add", np.ascontiguousarray(blob).tobytes(), np.ascontiguousarray(bounds, dtype=np.int64).tobytes())

    def _log_change(self, index: int) -> None:
        changes = self.changes
        changes.append(index)
        if len(changes) > 65536 and len(changes) > 2 * len(self.names):
            self.changes = None  # nobody has read it for long: the follower rebuilds instead

    def add_new(self, new_names: list[str]) -> np.ndarray:
        """Add names known to be absent and distinct, in order: as :meth:`add` one by one (freed ids first,
        last freed first), in bulk. Returns their ids."""
        names, ids = self.names, self.ids  # (pending names built first: ids stay in order)
        taken = self._take_freed(len(new_names))
        for index, name in zip(taken, new_names):
            names[index] = name
        start = len(names)
        names.extend(new_names[len(taken):])
        fresh = range(start, len(names))
        ids.update(zip(new_names, taken))
        ids.update(zip(new_names[len(taken):], fresh))
        if new_names and self.lineage is not None:
            self._trace_names(new_names)
        return self._added(taken, fresh)

    def _take_freed(self, count: int) -> list[int]:
        """Up to ``count`` freed ids for new names, in the order ``pop()`` would give them (last freed first)."""
        free = self.free
        reused = min(len(free), count)
        if not reused:
            return []
        taken = free[len(free) - reused:][::-1]
        del free[len(free) - reused:]
        return taken

    def _added(self, taken: list[int], fresh: range) -> np.ndarray:
        """Log an addition of the ids ``taken`` then ``fresh`` (one version step); returns them in that order."""
        self.version += 1
        if self.changes is not None:
            self.changes.extend(taken)
            self.changes.extend(fresh)
            if len(self.changes) > 65536 and len(self.changes) > 2 * fresh.stop:
                self.changes = None  # nobody has read it for long: the follower rebuilds instead
        if not taken:
            return np.arange(fresh.start, fresh.stop, dtype=np.int64)
        given = np.empty(len(taken) + len(fresh), dtype=np.int64)
        given[:len(taken)] = taken
        given[len(taken):] = np.arange(fresh.start, fresh.stop, dtype=np.int64)
        return given

    def add_new_encoded(self, blob: np.ndarray, bounds: np.ndarray) -> np.ndarray:
        """:meth:`add_new` for names given as UTF-8 (``surrogatepass``): name ``k`` is
        ``blob[start : start + length]`` with ``(start, length) = bounds[k]``. The ids are given now,
        the same as :meth:`add_new` would; the strings are built when first asked for.

        >>> names = Interner(["spam"])
        >>> names.add_new_encoded(np.frombuffer("eggscafé".encode(), dtype=np.uint8),
        ...                       np.array([[0, 4], [4, 5]])).tolist(), len(names)
        ([1, 2], 3)
        >>> names.names, names.ids["café"]
        (['spam', 'eggs', 'café'], 2)
        """
        count = len(bounds)
        taken = self._take_freed(count)
        start = self.capacity
        if count:
            if self.lineage is not None:
                self._trace_encoded(blob, bounds)
            # a copy: the tokenizer's blob is a view of a larger scratch buffer, which must not stay alive with it
            self._pending.append((taken, start, blob.copy(), bounds))
            self._pending_count += count
            self._pending_fresh += count - len(taken)
        return self._added(taken, range(start, start + count - len(taken)))

    def remove(self, index: int) -> None:
        name = self.names[index]
        if name is None:
            return
        del self.ids[name]
        self.names[index] = None
        self.free.append(index)
        self.version += 1
        if self.lineage is not None:
            self._trace(b"remove", int(index).to_bytes(8, "little"))
        if self.changes is not None:
            self._log_change(index)


def decode_names(blob: np.ndarray, bounds: np.ndarray) -> list[str]:
    """The strings ``blob[start : start + length]`` (UTF-8, ``surrogatepass``), ``(start, length) = bounds[k]``."""
    raw = blob.tobytes()
    ranges = zip(bounds[:, 0].tolist(), (bounds[:, 0] + bounds[:, 1]).tolist())
    if raw.isascii():
        text = raw.decode("ascii")
        return [text[start:end] for start, end in ranges]
    return [raw[start:end].decode("utf-8", "surrogatepass") for start, end in ranges]


def encoded_characters(blob: np.ndarray) -> int:
    """Characters of the UTF-8 bytes ``blob`` (as ``len`` of the decoded strings): bytes that are not continuations."""
    if blob.tobytes().isascii():
        return len(blob)
    return len(blob) - int(np.count_nonzero((blob & 0xC0) == 0x80))
