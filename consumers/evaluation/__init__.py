"""Offline evaluation behind ``sgm eval`` and ``sgm tune``.

``harness`` runs split and prequential evaluations, ``measures`` holds the
evaluation measures, ``search`` the Gaussian random search of parameters.
"""
