"""Compiled inner loops (numba), for what numpy cannot vectorize without Python-level rounds.

Split by job: :mod:`.sums` (compensated additions), :mod:`.entries` (count-table updates),
:mod:`.scoring` (the scoring path), :mod:`.topk` (the sparse top-k), :mod:`.validation`
(caller-supplied counts). Each loop is plain code with IEEE semantics (no fastmath: no
reordering of floating-point operations), so results are bit for bit those of the same loop
in Python. Compiled once per machine and cached next to the files.
"""
