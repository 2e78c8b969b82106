"""Process housekeeping of a long-running service: the garbage collector and glibc's free memory."""
from __future__ import annotations

import gc

_malloc_trim = None


def freeze_long_lived_heap() -> None:
    """Take every object alive now out of the cyclic garbage collector's view (``gc.freeze``).

    A service keeps a large heap that lives as long as the process (imported
    modules, the model's document records). Each full collection walks all of
    it although none of it is garbage: measured on the scoring path, that was
    ~7 of 32 us of CPU per document (``bench/service_bench.py``). Collecting
    first means no garbage is frozen. Frozen objects released later are still
    freed by reference counting; only reference cycles among them would wait,
    and the model makes none.
    """
    gc.collect()
    gc.freeze()


def release_free_memory() -> None:
    """Return freed heap memory to the operating system (glibc's ``malloc_trim``; a no-op elsewhere).

    glibc keeps the pages of large freed blocks (such as a snapshot's
    serialization buffers) and, after the first, stops using mmap for blocks
    of that size, so without this the resident size creeps up between
    snapshots to well above what the live data needs (measured in
    bench/memory_bound.py: about 120 MB at 20,000 documents).
    """
    global _malloc_trim
    if _malloc_trim is None:
        _malloc_trim = False
        try:
            import ctypes
            import ctypes.util

            _malloc_trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
        except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to do
            pass
    if _malloc_trim:
        _malloc_trim(0)
