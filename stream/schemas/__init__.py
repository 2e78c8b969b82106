"""The record schemas of the service's topics, one module per job (docs/SCHEMAS.md).

Import them from :mod:`sgm.stream.records`, their public face:

==================  ===========================================================
``reasons.py``      ``Reason``, ``ApplyReason``, ``InvalidRecord``
``limits.py``       ``Limits`` and ``DEFAULT_LIMITS``
``json_values.py``  strict JSON in and out, shared by every schema
``timestamps.py``   ``parse_timestamp``: event times to epoch seconds
``inputs.py``       training and scoring records: parse, validate, encode
``outputs.py``      output records: the one encoder, the parser, ``model_version``
``dead_letters.py`` the dead-letter envelope
==================  ===========================================================
"""
