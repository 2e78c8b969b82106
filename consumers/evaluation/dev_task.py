"""The development task of ``sgm tune`` (and of ``sgm ensemble``'s bases): the numbers a search point gives,
scored on development data carved from the training data only.

:func:`development_task` builds a :class:`DevTask` from a dataset and an :class:`EvalSetup`: in split mode one
dev-train / dev-test partition or K cross-validation folds of the training side, in prequential mode the
stream's first share; the dev documents are read once (:class:`ReadDocuments`) for every point. A point is
scored by the protocols of :mod:`sgm.consumers.evaluation.harness` (``evaluate_split``, ``evaluate_prequential``),
pooled over folds. :func:`parallel_map` scores points in forked worker processes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from sgm.consumers.evaluation.documents import ReadDocuments, route_mail_params, uses_mail
from sgm.consumers.evaluation.harness import (EvalSetup, Outcomes, cross_validation_folds, evaluate_prequential,
                                              evaluate_split, is_multilabel, labelled, measures, objective_value,
                                              prepare_config, random_partition, stream_order, train_test)
from sgm.stream.datasets import LabelledDoc


@dataclass
class DevTask:
    """A development task: the configuration minus the searched numbers, and the dev data.

    Split mode holds one or more folds ``(dev_train, dev_test, (train_index, test_index))``
    (positions in the documents ``read``); with several folds the objective is measured on
    the pooled outcomes of all folds (cross-validation over the training side). Prequential
    mode holds one dev stream. ``read`` holds the dev documents tokenized (or their messages
    extracted) once for every point.
    """

    base_config: dict[str, Any]
    setup: EvalSetup
    objective: str
    folds: list[tuple[list, list, tuple]] = field(default_factory=list)
    dev_stream: list[LabelledDoc] = field(default_factory=list)
    read: ReadDocuments | None = None

    @property
    def dev_train(self) -> list[LabelledDoc]:
        return self.folds[0][0] if self.folds else []

    @property
    def dev_test(self) -> list[LabelledDoc]:
        return self.folds[0][1] if self.folds else []

    def config_for(self, point: Mapping[str, float]) -> dict[str, Any]:
        """The configuration of a search point (mail numbers such as ``meta_weight`` go to ``"mail"``)."""
        config = dict(self.base_config)
        config["params"] = {**dict(config.get("params") or {}), **point}
        return route_mail_params(config)

    def run(self, point: Mapping[str, float]) -> dict[str, Any]:
        config = self.config_for(point)
        assert self.read is not None
        if self.setup.mode == "prequential":
            return evaluate_prequential(config, self.dev_stream, self.setup, documents=self.read.for_config(config))
        fold_reports = []
        for train, test, (train_index, test_index) in self.folds:
            documents = (self.read.for_config(config, train_index), self.read.for_config(config, test_index))
            fold_reports.append(evaluate_split(config, train, test, self.setup, documents=documents,
                                               keep_outcomes=len(self.folds) > 1))
        if len(fold_reports) == 1:
            return fold_reports[0]
        pooled, positive = Outcomes(), None
        for report in fold_reports:
            part: Outcomes = report.pop("_outcomes")
            positive = report["positive_label"]
            for name in ("true_sets", "predicted_sets", "p_true", "p_positive", "ts", "positive_odds", "verdicts"):
                getattr(pooled, name).extend(getattr(part, name))
        return {**measures(pooled, positive, self.setup.decision), "docs": len(pooled), "folds": len(self.folds)}

    def __call__(self, point: Mapping[str, float]) -> float:
        return objective_value(self.run(point), self.objective)


def development_task(docs: Sequence[LabelledDoc], base_config: Mapping[str, Any], setup: EvalSetup,
                     objective: str | None = None, dev_fraction: float = 0.25, dev_seed: int = 0,
                     dev_folds: int = 1) -> DevTask:
    """The development data of ``docs``, carved from the training data only.

    Split mode: the training part (standard ``train`` documents, or the
    training side of the seeded split) is partitioned at random (seed
    ``dev_seed``) into dev-train and a dev-test share of ``dev_fraction``;
    with ``dev_folds = K > 1`` instead into K folds, each the dev-test set of
    one fit (K-fold cross-validation). The test documents are never touched.
    Prequential mode: the first ``dev_fraction`` of the stream (in evaluation order).
    """
    config = prepare_config(base_config, docs)
    if objective is None:
        objective = "micro_f1" if is_multilabel(docs) else "accuracy"
    if dev_folds < 1:
        raise ValueError("dev_folds must be at least 1")
    task = DevTask(config, setup, objective)
    if setup.mode == "split":
        train, _ = train_test(docs, setup.test_fraction, setup.split_seed)
        train = labelled(train)
        task.read = ReadDocuments(train, config, uses_mail(train, setup.mail))
        if dev_folds == 1:
            parts = [random_partition(list(range(len(train))), dev_fraction, dev_seed)]
        else:
            parts = cross_validation_folds(len(train), dev_folds, dev_seed)
        for fit_index, held_index in parts:
            task.folds.append(([train[i] for i in fit_index], [train[i] for i in held_index], (fit_index, held_index)))
    else:
        stream = labelled(stream_order(docs, setup.shuffle_seed))
        task.dev_stream = stream[: max(2, round(len(stream) * dev_fraction))]
        task.read = ReadDocuments(task.dev_stream, config, uses_mail(task.dev_stream, setup.mail))
    return task


# The task a worker process evaluates: set in the parent before the pool forks, so each worker
# inherits the (tokenized) dev data once instead of receiving it with every point. Each point
# builds and fits its own model inside the worker: no model state is shared between processes.
_WORKER_TASK: DevTask | None = None


def _worker_objective(point: dict[str, float]) -> float:
    assert _WORKER_TASK is not None
    return _WORKER_TASK(point)


def parallel_map(task: DevTask, workers: int) -> tuple[Callable, Callable[[], None]]:
    """``(map_fn, close)`` evaluating points of ``task`` in ``workers`` forked processes
    (in-process when ``workers <= 1`` or fork is unavailable); ``map_fn`` yields the scores in order, lazily."""
    import multiprocessing

    global _WORKER_TASK
    if workers <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        return (lambda fn, points: (task(p) for p in points)), (lambda: None)
    _WORKER_TASK = task
    pool = multiprocessing.get_context("fork").Pool(workers)

    def map_fn(_fn, points):  # results in order, each as soon as it is ready (a caller can show progress)
        return pool.imap(_worker_objective, points, chunksize=1)

    def close() -> None:
        global _WORKER_TASK
        pool.close()
        pool.join()
        _WORKER_TASK = None

    return map_fn, close
