"""How findings and views read a log's text fields: a field longer than any recorder writes
(``LONG_CHARS``: a broken or hostile log, a 20 MB reason) as its start and its length, so the
work on a field (a regex, an escape, a wrap) and what is shown of it stay bounded whatever the
log holds. The log keeps every value whole (``neuronkit report --json`` prints them).

    cut_long("x" * 20_000_000)   # 'xxx…x… (20,000,000 chars)': HEAD_CHARS characters in all
"""
from __future__ import annotations

import dataclasses
from typing import Any

from neuronkit.events.event import CompileEvent

__all__ = ["ELLIPSIS", "HEAD_CHARS", "LONG_CHARS", "bounded_event", "bounded_events", "cut_long",
           "excerpt"]

ELLIPSIS = "…"
# longer than any recorded field (torch's guard reasons, names, places: a few kB at most); a
# field past it is read as its start (HEAD_CHARS characters, its length said)
LONG_CHARS = 10_000
HEAD_CHARS = 200  # fits a table cell (600 characters) twice: a cell shows where and how it was cut
_TEXT_FIELDS = ("compile_id", "function", "location", "backend", "device", "changed", "kind",
                "context", "neff_cache")


def excerpt(text: str, most: int = HEAD_CHARS, whole: int | None = None) -> str:
    """``text`` when it fits in ``most`` characters, else its start, an ellipsis and the
    length of the whole (``whole``: of the value ``text`` was read from), ``most`` characters
    in all: ``L['x'].size()[0] == 8 or… (20,000,000 chars)``."""
    whole = len(text) if whole is None else whole
    if len(text) <= most and whole <= len(text):
        return text
    mark = f"{ELLIPSIS} ({whole:,} chars)"
    return text[:max(most - len(mark), 1)].rstrip() + mark


def cut_long(value: Any) -> Any:
    """A text longer than ``LONG_CHARS`` as its :func:`excerpt`; anything else as it is."""
    return excerpt(value) if _is_long(value) else value


def _long(e: CompileEvent) -> bool:
    """Whether some text field of ``e`` may be longer than ``LONG_CHARS`` (a quick test of the
    sums: False for every event a recorder writes)."""
    try:
        return (len(e.function) + len(e.location) + len(e.changed) + len(e.context)
                + len(e.compile_id) + len(e.backend) + len(e.device) + len(e.kind)
                + len(e.neff_cache or "") > LONG_CHARS or sum(map(len, e.reasons)) > LONG_CHARS
                or sum(map(len, e.input_shapes)) > LONG_CHARS or sum(map(len, e.ops)) > LONG_CHARS)
    except TypeError:  # an event built in memory may hold anything: looked at field by field
        return True


def _is_long(value: Any) -> bool:
    return type(value) is str and len(value) > LONG_CHARS


def bounded_event(e: CompileEvent) -> CompileEvent:
    """``e`` itself, or a copy whose text fields, reasons, input and op names longer than
    ``LONG_CHARS`` are cut (:func:`cut_long`); numbers and metrics as they are."""
    changes: dict[str, Any] = {name: excerpt(getattr(e, name)) for name in _TEXT_FIELDS
                               if _is_long(getattr(e, name))}
    if isinstance(e.reasons, list) and any(map(_is_long, e.reasons)):
        changes["reasons"] = list(map(cut_long, e.reasons))
    for name in ("input_shapes", "ops"):
        value = getattr(e, name)
        if isinstance(value, dict) and any(map(_is_long, value)):
            changes[name] = {cut_long(k): v for k, v in value.items()}
    return dataclasses.replace(e, **changes) if changes else e


def bounded_events(events: list[CompileEvent]) -> list[CompileEvent]:
    """``events`` itself when no text field is longer than ``LONG_CHARS`` (one quick pass),
    else a list with those events copied by :func:`bounded_event`."""
    if not any(map(_long, events)):
        return events
    return [bounded_event(e) if _long(e) else e for e in events]
