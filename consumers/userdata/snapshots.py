"""The model a service saved in its state directory, read without a broker (``sgm score``, ``sgm stats``).

A running service writes snapshots atomically (``stream/snapshot_store.py``),
so the newest file is always whole; it may trail the live model by up to the
service's snapshot interval. A directory that does not exist or holds no
snapshot is a :class:`NoSnapshot` with a one-line message.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sgm.model import GenerativeTextModel
from sgm.model.persistence import SnapshotError, loads
from sgm.stream.records import model_version
from sgm.stream.snapshot_store import SnapshotStore

__all__ = ["NoSnapshot", "SavedModel", "load_saved_model"]


class NoSnapshot(RuntimeError):
    """No readable snapshot where one was expected."""


@dataclass
class SavedModel:
    """A model read from a snapshot file, with what the file says about it."""

    model: GenerativeTextModel
    path: Path
    bytes: int
    extra: dict[str, Any]

    @property
    def train_offsets(self) -> dict[int, int]:
        return {int(p): int(o) for p, o in (self.extra.get("train_offsets") or {}).items()}

    @property
    def version(self) -> int:
        """The model's position in the training log (as ``model.version`` in outputs)."""
        return model_version(self.train_offsets)

    @property
    def age_seconds(self) -> float | None:
        written = self.extra.get("written_at")
        return None if written is None else max(time.time() - float(written), 0.0)


def load_saved_model(state_dir: str | os.PathLike, max_bytes: int = 8 * 1024**3) -> SavedModel:
    """The newest snapshot in ``state_dir`` (retried once if a service deletes it while it is read)."""
    folder = Path(state_dir)
    if not folder.is_dir():
        raise NoSnapshot(f"no state directory {str(folder)!r} (sgm serve --state-dir DIR writes snapshots there)")
    for attempt in range(2):
        try:
            store = SnapshotStore(folder, max_bytes=max_bytes)
            found = store.latest()
            if found is None:
                raise NoSnapshot(f"no snapshot in {str(folder)!r} yet (a service writes one --snapshot-every-seconds "
                                 "(30 s) after its first training records, every --snapshot-every-records, and when "
                                 "it stops)")
            path, data = found
            model, extra = loads(data, max_bytes=max_bytes)
            return SavedModel(model, path, len(data), dict(extra))
        except FileNotFoundError:
            if attempt:
                raise NoSnapshot(f"the snapshots in {str(folder)!r} keep changing; try again") from None
        except PermissionError as exc:
            raise NoSnapshot(f"cannot read {str(folder)!r}: {exc.strerror}") from None
        except SnapshotError as exc:
            raise NoSnapshot(f"{str(folder)!r}: unreadable snapshot: {exc}") from None
    raise AssertionError("unreachable")
