"""Where clients are registered: :func:`open_client` finds a :class:`Client` by its kind.

A client's module is imported the first time a client of that kind is opened,
so a process loads only the client library it uses (the memory client needs
neither). Adding a client: write its module (a :class:`Client` and what it
makes, on ``base.py``), its option mapping in ``config.py``, and one loader here;
the ``--client`` choices of ``sgm serve``, ``sgm demo`` and ``sgm chaos`` follow.

Examples
--------
>>> {"confluent", "kafka-python", "memory"} <= set(client_kinds())
True
>>> "memory" in broker_client_kinds()
False
>>> open_client("memory").config.bootstrap_servers
'memory://default'
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Literal, TypeAlias

from .config import KafkaConfig
from .interfaces import Client

__all__ = ["ClientKind", "broker_client_kinds", "client_kinds", "open_client", "register_client"]

#: The kinds registered here; :func:`register_client` may add others at run time.
ClientKind: TypeAlias = Literal["kafka-python", "confluent", "memory"]


def _confluent() -> type[Client]:
    from .confluent import ConfluentClient

    return ConfluentClient


def _kafka_python() -> type[Client]:
    from .kafka_python import KafkaPythonClient

    return KafkaPythonClient


def _memory() -> type[Client]:
    from .memory import MemoryClient

    return MemoryClient


#: kind -> a function returning the client class (importing its module then).
_LOADERS: dict[str, Callable[[], type[Client]]] = {
    "confluent": _confluent,
    "kafka-python": _kafka_python,
    "memory": _memory,
}

#: The kinds whose broker lives inside the process that opened them (no other process can reach it).
_IN_PROCESS: set[str] = {"memory"}


def register_client(kind: str, loader: Callable[[], type[Client]], in_process: bool = False) -> None:
    """Make ``open_client(kind, ...)`` open the client class ``loader()`` returns; ``in_process``: its broker
    lives in the opening process (as the memory client's), so :func:`broker_client_kinds` leaves it out."""
    _LOADERS[kind] = loader
    if in_process:
        _IN_PROCESS.add(kind)
    else:
        _IN_PROCESS.discard(kind)


def client_kinds() -> tuple[str, ...]:
    """The kinds :func:`open_client` accepts."""
    return tuple(_LOADERS)


def broker_client_kinds() -> tuple[str, ...]:
    """The kinds that reach a broker other processes can reach too: what ``sgm demo`` (the service beside an
    embedded broker) and ``sgm chaos`` (served processes) offer as ``--client``."""
    return tuple(kind for kind in _LOADERS if kind not in _IN_PROCESS)


def open_client(kind: ClientKind, config: KafkaConfig | None = None) -> Client:
    """Return the :class:`Client` implementation named ``kind`` for ``config``.

    Parameters
    ----------
    kind : {"confluent", "kafka-python", "memory"}
    config : KafkaConfig, optional
        Default: the client's :meth:`Client.default_config` (``localhost:9092``,
        or ``memory://default`` for ``kind="memory"``).
    """
    loader = _LOADERS.get(kind)
    if loader is None:
        expected = ", ".join(repr(k) for k in _LOADERS)
        raise ValueError(f"unknown client kind {kind!r}; expected one of {expected}")
    client_class = loader()
    return client_class(config or client_class.default_config())
