"""Dense integer ids for names (terms, classes), with a change log a follower can read."""
from __future__ import annotations

import numpy as np


class _NameIds(dict):
    """An :class:`Interner`'s name -> id table.

    While the interner is interning a batch (:meth:`Interner.ids_of`), looking
    up a missing name adds it, so one C-level ``map`` over a batch both finds
    and adds ids; at any other time a missing name raises ``KeyError`` as in a
    plain dict.
    """

    __slots__ = ("owner",)

    def __missing__(self, name):
        owner = self.owner
        new = owner.interning
        if new is None:
            raise KeyError(name)
        if type(name) is not str and not isinstance(name, str):
            raise TypeError("terms must be strings")
        new.append(name)
        return owner._add_absent(name)


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

    __slots__ = ("ids", "names", "free", "changes", "interning")

    def __init__(self, names: list[str | None] | None = None, free: list[int] | None = None) -> None:
        self.ids = _NameIds()
        self.ids.owner = self
        self.names: list[str | None] = [] if names is None else names
        self.ids.update((name, i) for i, name in enumerate(self.names) if name is not None)
        self.free: list[int] = [] if free is None else free
        #: Ids added or removed, in order, once a follower (``model.lexicon.TermLexicon``) asked for them;
        #: ``None`` when nobody follows, or the log grew so long unread that rebuilding is cheaper.
        self.changes: list[int] | None = None
        #: Names added by the :meth:`ids_of` call in progress (``None`` outside one).
        self.interning: list[str] | None = None

    def ids_of(self, names: list[str], added: list[str] | None = None) -> np.ndarray:
        """Ids of ``names``, adding the new ones in first-seen order (and listing them in ``added``).

        All or nothing: if a new name is not a string, ``TypeError`` is raised
        and the interner is exactly as before the call.
        """
        before = (len(self.names), None if self.changes is None else len(self.changes))
        self.interning = new = []
        try:
            ids = np.fromiter(map(self.ids.__getitem__, names), dtype=np.int64, count=len(names))
        except BaseException:
            self._undo(new, *before)
            raise
        finally:
            self.interning = None
        if added is not None:
            added.extend(new)
        return ids

    def _undo(self, new: list[str], n_names: int, n_changes: int | None) -> None:
        reused = []  # ids taken from the free list, in the order they were popped
        for name in new:
            index = self.ids.pop(name)
            self.names[index] = None
            if index < n_names:
                reused.append(index)
        del self.names[n_names:]
        self.free.extend(reversed(reused))
        if self.changes is not None and n_changes is not None:
            del self.changes[n_changes:]

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
        if self.changes is not None:
            self._log_change(index)
        return index

    def _log_change(self, index: int) -> None:
        changes = self.changes
        changes.append(index)
        if len(changes) > 65536 and len(changes) > 2 * len(self.names):
            self.changes = None  # nobody has read it for long: the follower rebuilds instead

    def add_new(self, new_names: list[str]) -> None:
        """Add names known to be absent and distinct, in order (the batch form of :meth:`add`)."""
        free = self.free
        ids = self.ids
        if free:
            for name in new_names:
                self.add(name)
            return
        start = len(self.names)
        self.names.extend(new_names)
        ids.update(zip(new_names, range(start, start + len(new_names))))
        if self.changes is not None:
            for index in range(start, start + len(new_names)):
                self._log_change(index)

    def remove(self, index: int) -> None:
        name = self.names[index]
        if name is None:
            return
        del self.ids[name]
        self.names[index] = None
        self.free.append(index)
        if self.changes is not None:
            self._log_change(index)
