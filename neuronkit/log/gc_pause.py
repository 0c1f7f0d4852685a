"""Pausing Python's cyclic garbage collector around work on a long compile log.

Reading or analysing 100k events makes millions of containers and no reference cycle, so the
collector's passes free nothing; each full pass scans every object of the process (a loaded log
is about a million), and they came several times a second. Reference counting still frees
everything as usual while the collector is paused.
"""
from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator

__all__ = ["paused_gc"]


@contextmanager
def paused_gc(keep: bool = False) -> Iterator[None]:
    """No collector passes inside the block (unless it was already off). ``keep``: what the
    block made stays alive (a loaded log): it goes straight to the oldest generation, instead
    of being scanned once per generation on its way there. ``gc.freeze()`` + ``unfreeze()`` do
    that move without a scan; skipped when the process froze objects of its own."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
        if keep and gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
    finally:
        gc.enable()
