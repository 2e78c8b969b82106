"""Dense integer ids for names (terms, classes), with a change log a follower can read."""
from __future__ import annotations

import numpy as np


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

    __slots__ = ("ids", "names", "free", "changes", "version")

    def __init__(self, names: list[str | None] | None = None, free: list[int] | None = None) -> None:
        self.ids = _NameIds()
        self.names: list[str | None] = [] if names is None else names
        self.ids.update((name, i) for i, name in enumerate(self.names) if name is not None)
        self.free: list[int] = [] if free is None else free
        #: Ids added or removed, in order, once a follower (``model.lexicon.TermLexicon``) asked for them;
        #: ``None`` when nobody follows, or the log grew so long unread that rebuilding is cheaper.
        self.changes: list[int] | None = None
        #: Bumped by every addition or removal: a result computed at one version holds while it stays.
        self.version = 0

    def ids_of(self, names: list[str], added: list[str] | None = None) -> np.ndarray:
        """Ids of ``names``, adding the new ones in first-seen order (and listing them in ``added``).

        All or nothing: if a new name is not a string, ``TypeError`` is raised
        and the interner is exactly as before the call. The lookups and the
        additions run as C-level passes over the batch (a dict lookup per name,
        one bulk insert of the new ones), not a Python call per new name.
        """
        found = list(map(self.ids.get, names))
        if None in found:
            new = list(dict.fromkeys([name for name, i in zip(names, found) if i is None]))
            if set(map(type, new)) != {str} and not all(isinstance(name, str) for name in new):
                raise TypeError("terms must be strings")
            self.add_new(new)
            if added is not None:
                added.extend(new)
            found = list(map(self.ids.__getitem__, names))
        return np.array(found, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def capacity(self) -> int:
        return len(self.names)

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
        if self.changes is not None:
            self._log_change(index)
        return index

    def _log_change(self, index: int) -> None:
        changes = self.changes
        changes.append(index)
        if len(changes) > 65536 and len(changes) > 2 * len(self.names):
            self.changes = None  # nobody has read it for long: the follower rebuilds instead

    def add_new(self, new_names: list[str]) -> np.ndarray:
        """Add names known to be absent and distinct, in order: as :meth:`add` one by one (freed ids first,
        last freed first), in bulk. Returns their ids."""
        free, names, ids = self.free, self.names, self.ids
        reused = min(len(free), len(new_names))
        taken = []
        if reused:
            taken = free[len(free) - reused:][::-1]  # the order pop() would give them
            del free[len(free) - reused:]
            for index, name in zip(taken, new_names):
                names[index] = name
        start = len(names)
        names.extend(new_names[reused:])
        fresh = range(start, len(names))
        ids.update(zip(new_names, taken))
        ids.update(zip(new_names[reused:], fresh))
        self.version += 1
        if self.changes is not None:
            self.changes.extend(taken)
            self.changes.extend(fresh)
            if len(self.changes) > 65536 and len(self.changes) > 2 * len(names):
                self.changes = None  # nobody has read it for long: the follower rebuilds instead
        given = np.empty(len(new_names), dtype=np.int64)
        given[:reused] = taken
        given[reused:] = np.arange(start, len(names))
        return given

    def remove(self, index: int) -> None:
        name = self.names[index]
        if name is None:
            return
        del self.ids[name]
        self.names[index] = None
        self.free.append(index)
        self.version += 1
        if self.changes is not None:
            self._log_change(index)
