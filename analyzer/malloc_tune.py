"""Keep big freed blocks in the process instead of handing them back to the kernel.

glibc's malloc serves every block over its mmap threshold (128 KiB, adapting up to
32 MiB) with a fresh ``mmap`` and returns it with ``munmap`` when freed; the parsers
allocate and free blocks of 8–16 MiB for every chunk of a big file, so each chunk's
buffers are faulted in page by page again. On the reference VM a page fault costs ~10 µs:
a day of 128-CPU ``mpstat`` took 96 k faults and 1.25 s of system time, 35 k and 0.7 s
with the thresholds below (docs/performance.md). The peak is unchanged: the blocks are
reused, not added.
"""

from __future__ import annotations

import ctypes
import sys

M_TRIM_THRESHOLD = -1  # glibc <malloc.h>
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 64 << 20  # blocks up to this size come from the heap and are reused
TRIM_THRESHOLD_BYTES = 256 << 20  # free memory at the heap's top kept up to this much

_tuned = False


def keep_big_blocks() -> bool:
    """Raise glibc's mmap and trim thresholds once per process; False where not glibc."""
    global _tuned
    if _tuned or not sys.platform.startswith("linux"):
        return _tuned
    try:
        mallopt = ctypes.CDLL(None).mallopt
        mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
        _tuned = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
            mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
        )
    except (OSError, AttributeError):  # not glibc (musl has no such knobs)
        _tuned = False
    return _tuned
