"""Where each ``synchronize`` of the fake came from (tests assert on them)."""
from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_HERE = str(Path(__file__).resolve().parent)


@dataclass
class SyncCall:
    """Where one ``synchronize`` happened: thread, ``via`` (the outermost fake function on the
    stack, e.g. ``get_dynamo_metrics``), ``caller`` and ``stack`` (``module:function:line``,
    innermost first, fake and ``torch._dynamo`` frames skipped)."""

    index: int
    device: int
    thread: str
    thread_id: int
    via: str
    caller: str
    stack: tuple[str, ...]
    pending: int
    raised: str | None = None



def sync_record(calls: list, queue: Any, device: int) -> SyncCall:
    """Note one ``synchronize``: where it came from, skipping fake and Dynamo frames."""
    frame, via = sys._getframe(2), ""
    dynamo = f"{os.sep}torch{os.sep}_dynamo{os.sep}"  # torch._dynamo.disable wrappers
    while frame is not None and (frame.f_code.co_filename.startswith(_HERE)
                                 or dynamo in frame.f_code.co_filename):
        if frame.f_code.co_filename.startswith(_HERE):
            via = frame.f_code.co_name
        frame = frame.f_back
    stack = []
    while frame is not None and len(stack) < 16:
        stack.append(f"{frame.f_globals.get('__name__', '?')}:{frame.f_code.co_name}:"
                     f"{frame.f_lineno}")
        frame = frame.f_back
    thread = threading.current_thread()
    call = SyncCall(len(calls), device, thread.name, threading.get_ident(), via,
                    stack[0] if stack else "", tuple(stack), len(queue))
    calls.append(call)
    return call

