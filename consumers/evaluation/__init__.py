"""Offline evaluation behind ``sgm eval`` and ``sgm tune``.

``harness`` runs split and prequential evaluations, ``dev_task`` the development
data a tuning run scores, ``measures`` holds the evaluation measures, ``search``
the Gaussian random search of parameters.
"""
