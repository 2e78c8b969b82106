"""The model's compiled kernels: compiled on first use, said so in the log; warmed ahead by ``sgm warm``.

The model's inner loops (``model/loops/``, the compiled tokenizer, the power-law
discounts) are compiled by numba the first time a process calls them -- only
those it calls: a trainer compiles no scoring kernel, a service of whole emails
no text tokenizer -- and cached on disk (in ``NUMBA_CACHE_DIR`` when set, else
next to the installed files). On a fresh install that compilation is most of a
start: 10-30 s before the first scored document on this 2-core machine; with a
warm cache loading the kernels takes well under a second (bench/cold_start.py).

:class:`CompileLog` makes the wait visible: the service logs "compiling the
scoring kernels (first start only ...)" when numba starts compiling and, after
the batch, how many functions took how long. :func:`prepare_kernels` runs what a
process may run -- learning, unlearning, forgetting and scoring text and term
counts -- on a throwaway model of one configuration, so that later processes
find every kernel cached: ``sgm warm`` does it where images are built
(deploy/Dockerfile), ``sgm demo`` before its stream starts.
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from numba.core import event

from sgm.model import build_model
from sgm.model.mnb import PRUNED_TOPK_MIN_CLASSES

log = logging.getLogger("sgm.service")

#: What the service logs when a kernel has to be compiled (the demo prints it too).
COMPILING = "compiling the scoring kernels (first start only; numba caches them for the next start) ..."

# Small documents that reach every path of learning and scoring: text (the compiled tokenizer) and term counts
# (the dictionary path), two labels, an unlearn and a forget.
_TEXTS = ["cheap pills buy now limited offer", "meeting on monday about the quarterly agenda"]
_TERMS = [{"cheap": 2, "offer": 1, "winner": 1}, {"agenda": 1, "monday": 2, "notes": 1}]
_LABELS = [("spam",), ("ham",)]


@dataclass(frozen=True)
class KernelsReady:
    """What :func:`prepare_kernels` did: its wall time and how many functions numba compiled (0: all cached)."""

    seconds: float
    compiled: int

    @property
    def cached(self) -> bool:
        return self.compiled == 0


class _CompileWatch(event.Listener):
    """Counts numba compilations (cache misses only: a cache hit raises no event); calls ``on_first`` once."""

    def __init__(self, on_first: Callable[[], None] | None) -> None:
        self.on_first = on_first
        self.compiled = 0

    def on_start(self, _event) -> None:
        if self.compiled == 0 and self.on_first is not None:
            on_first, self.on_first = self.on_first, None
            on_first()

    def on_end(self, _event) -> None:
        self.compiled += 1


def cache_location() -> str:
    """Where numba keeps the compiled kernels of this process."""
    return os.environ.get("NUMBA_CACHE_DIR") or "__pycache__ next to the installed sgm/model files"


def exercise(model: Any, *, scores: bool, many_labels: bool = True) -> None:
    """Learn, score, unlearn and forget a few tiny documents on ``model`` (a throwaway one).

    Scoring takes a batch of texts, one of term counts and a mixed one: each form has its own path.
    ``many_labels`` also compiles the pruned top-k that MNB takes from PRUNED_TOPK_MIN_CLASSES labels on
    (an image's cache should hold it; a demo with a handful of labels never runs it).
    """
    ids = [f"warm-{i}" for i in range(len(_TEXTS) + len(_TERMS))]
    ts = [1.0 + i for i in range(len(ids))]
    model.learn_many(_TEXTS, _LABELS, ts[:2], ids[:2], sequential=True)
    model.learn_many(_TERMS, _LABELS, ts[2:], ids[2:], sequential=True)
    if scores:
        for docs in (_TEXTS, _TERMS, _TEXTS + _TERMS):
            model.rank_many(docs, 3)
    model.unlearn_one(_TEXTS[0], _LABELS[0], ts=ts[-1], id=ids[0])
    model.forget(ids[2])
    if scores:
        model.rank_many(_TEXTS, 3)
    if scores and many_labels and hasattr(model, "uses_pruned_topk"):  # many labels: the pruned top-k's kernels (MNB)
        n = PRUNED_TOPK_MIN_CLASSES
        model.learn_many([{"warm": 1, f"warm{i}": 1} for i in range(n)], [(f"warm-{i}",) for i in range(n)],
                         [ts[-1]] * n, [f"warm-many-{i}" for i in range(n)], sequential=False)
        if model.uses_pruned_topk(3):
            model.rank_many([{"warm1": 2, "warm2": 1}], 3)


def prepare_kernels(model_config: Mapping[str, Any], *, scores: bool = True, many_labels: bool = True,
                    on_compile: Callable[[], None] | None = None) -> KernelsReady:
    """Compile (or load from numba's cache) the kernels a process of this configuration uses.

    Parameters
    ----------
    model_config : mapping
        The process's model configuration (:func:`sgm.model.build_model`'s input).
    scores : bool
        Also the scoring path (a classifier); learning is always prepared (every role trains).
    many_labels : bool
        Also the pruned top-k for models with many labels (see :func:`exercise`).
    on_compile : callable, optional
        Called once, when the first kernel has to be compiled (not when everything is cached).

    Examples
    --------
    >>> ready = prepare_kernels({"model": "u_jm"})
    >>> ready.seconds >= 0 and ready.compiled >= 0
    True
    """
    watch = _CompileWatch(on_compile)
    started = time.perf_counter()
    with event.install_listener("numba:compile", watch):
        exercise(build_model(dict(model_config)), scores=scores, many_labels=many_labels)
    return KernelsReady(time.perf_counter() - started, watch.compiled)


class CompileLog:
    """Logs, for the service, when numba compiles and what it cost (no event, no line: a warm cache is silent).

    Registered while the service runs; :meth:`report` after each step writes one line per round of
    compilation. Compile events come only on a cache miss, so the listener costs nothing afterwards.
    """

    def __init__(self) -> None:
        self.watch = _CompileWatch(self._first)
        self.reported = 0
        self.since: float | None = None
        event.register("numba:compile", self.watch)

    def _first(self) -> None:
        self.since = time.perf_counter()
        message = COMPILING if self.reported == 0 else "compiling a kernel on its first use (cached for the next start) ..."
        log.info(message, extra={"numba_cache": cache_location()})

    def report(self) -> None:
        """After a step: if something was compiled, say how much and how long the step waited for it."""
        watch = self.watch
        if watch.compiled != self.reported:
            seconds = time.perf_counter() - self.since if self.since is not None else 0.0
            log.info("kernels compiled", extra={"functions": watch.compiled - self.reported,
                                                "seconds": round(seconds, 2), "numba_cache": cache_location()})
            self.reported = watch.compiled
            watch.on_first = self._first  # the next compilation is announced again

    def close(self) -> None:
        event.unregister("numba:compile", self.watch)
