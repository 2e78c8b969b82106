"""A user's own data in and answers out: what ``sgm learn``, ``forget``, ``score`` and ``stats`` share.

==================  ===============================================================
module              job
==================  ===============================================================
``inputs``          the input arguments (paths, ``--label``, ``--format``, ``--ids``)
``records``         a document's record, checked by the service's validator
``connection``      the service's Kafka settings; topics made ready; a one-line error
``sending``         records to a topic, flushed, counted only when acknowledged
``training``        ``learn`` / ``forget``: read, check, send, summarize
``answers``         outputs and dead letters of this run's scoring records, by id
``scoring``         ``score``: through the service, or locally from a snapshot
``snapshots``       the newest snapshot of a state directory, read without a broker
``tally``           handled and skipped counts, and the summary
==================  ===============================================================
"""
