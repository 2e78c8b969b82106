"""The processes around the model: the service, the fault campaign, offline evaluation, and the CLI.

``cli`` and ``commands/`` (one module per ``sgm`` sub-command), ``config``
(every service setting), ``service/`` (the trainer and classifier consumers),
``chaos/`` (the fault campaign), ``evaluation/`` (split and prequential
evaluation, measures, parameter search), ``prometheus`` (the metrics),
``logs`` (structured log lines).
"""
