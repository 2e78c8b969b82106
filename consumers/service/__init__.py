"""The trainer and classifier consumers (``sgm serve``), one small part per job.

=================  ==================================================================
``loop``           :class:`Service`: connects, steps, retries; wires the parts below
``connections``    the producer, the training consumer, the scoring consumer
``training``       learn / unlearn / forget in log order, gaps, training dead letters
``scoring``        parse, rank, encode, produce, acknowledge, commit one batch
``checkpoint``     the model with its offsets: restore, snapshot schedule; scoring commits
``dead_letters``   dead letters to the DLQ topic, cut to fit; training ones re-sent
``prequential``    predictions remembered until their labels arrive
``gauges``         gauges that cost a model walk or a broker request
``retry``          the stage of a Kafka error, how it is reported, the backoff
``housekeeping``   gc freeze and malloc_trim of a long-running process
=================  ==================================================================
"""
from sgm.model.persistence import SnapshotError

from .checkpoint import ConfigMismatch
from .dead_letters import fit_dead_letter
from .loop import Service, StartupError

#: What :meth:`Service.prepare` and the start of :meth:`Service.run` raise for a start-up mistake (a snapshot, a
#: configuration, a model parameter, a state directory, an address, Kafka past --connect-timeout): one line, exit 2.
STARTUP_ERRORS = (SnapshotError, ConfigMismatch, StartupError, ValueError, OSError)

__all__ = ["ConfigMismatch", "STARTUP_ERRORS", "Service", "StartupError", "fit_dead_letter"]
