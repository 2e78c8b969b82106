"""Generalized smoothing (MODEL.md sections 1-2, thesis table 4.1): one class per method.

- :mod:`.contract`: what a method declares and computes (backgrounds, discounts, masses);
- one file per method: :mod:`.jelinek_mercer` (jm), :mod:`.dirichlet` (dp),
  :mod:`.absolute` (ad), :mod:`.power_law` (pd), :mod:`.backgrounds` (u, c, uc);
- :mod:`.registry`: every method by affix (the spec grammar reads it);
- :mod:`.composite`: a configuration's methods put together, and the formulas of
  ``a_l`` and the posting weights ``w(l, n)``.
"""
from .composite import (DiscountChain, Smoothing, kernel_smoothing, label_smoothing, log_smoothing_weight,
                        posting_weight)

__all__ = ["DiscountChain", "Smoothing", "kernel_smoothing", "label_smoothing", "log_smoothing_weight",
           "posting_weight"]
