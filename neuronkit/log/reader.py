"""Reading a compile log file: every line checked against the schema (``events/schema.py``), bad
ones skipped and named.

A log is untrusted input (logs travel between machines and people). Each line must be the header,
an event, an update line or a wall-time line; what fails is skipped, and an event with a value
out of bounds is kept with that value dropped (``schema.repair_event``; a start time out of
bounds becomes the start of the event before it), with one warning per file (``LogWarning``)
that names the lines, the events and the fields; every good line is kept. A line no parser can
hold (brackets nested 100k deep) is one more bad line; such a header is a ``LogFormatError``.
The warning and the errors name the file without its control characters.

Speed: a file is read 4 MB at a time; the event lines neuronkit writes are decoded and checked
against the schema together, in C (msgspec); only a block with a doubt in it is read line by
line, which names what is wrong.
"""
from __future__ import annotations

import json
import os
import sys
import warnings
from dataclasses import dataclass
from itertools import compress, starmap
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec

from neuronkit.events.event import FIELDS, UPDATABLE, CompileEvent
from neuronkit.events.schema import (
    EVENT_LINE_START,
    FORMAT,
    FORMAT_VERSION,
    MAX_COUNT,
    EventLine,
    LogFolderError,
    LogFormatError,
    LogWarning,
    clock_problem,
    decode_event_lines,
    event_problem,
    repair_event,
    show,
    update_problem,
    wall_problem,
)
from neuronkit.log.gc_pause import paused_gc
from neuronkit.log.key_parts import KeyParts, key_parts_problem
from neuronkit.safe import strip_control

__all__ = ["LogReader", "LogState", "read_log"]


def read_log(path: Path) -> tuple[dict[str, Any], list[CompileEvent], float | None, LogState]:
    """The header, the good events (update lines applied), the wall time and the state (closed,
    clock) of a log file; one warning names the lines skipped."""
    name = strip_control(path, keep_newlines=False)
    if path.is_dir():
        raise LogFolderError(f"{name} is a folder, not a compile log: pass a .jsonl file "
                             "(per-rank logs in a folder: nk.merge_logs(folder))")
    if not path.is_file():
        raise FileNotFoundError(f"compile log not found: {name}")
    reader = LogReader(path)
    with paused_gc(keep=True), open(path, "rb") as fh:
        header = reader.header(fh.readline())
        number, tail = 2, b""
        while block := fh.read(_BLOCK):
            block = tail + block
            cut = block.rfind(b"\n")
            if cut < 0:  # one line longer than a block: read on
                tail = block
                continue
            tail = block[cut + 1:]
            reader.lines(number, block[:cut])
            number += block.count(b"\n", 0, cut) + 1
        if tail:
            reader.line(number, tail, terminated=False)
    wall = reader.finish()
    return header, reader.events, wall, LogState(reader.closed, reader.clock, reader.key_parts)


@dataclass(frozen=True)
class LogState:
    """What a log's lines say of its writer: ``closed`` (its recorder stopped after its last
    event: a wall-time line came last; False for a writer killed or still running) and
    ``clock`` (``{"barrier_at": t, ...}``: this host's wall time at a point all ranks passed),
    ``key_parts`` (what each cache key is made of)."""

    closed: bool = True
    clock: dict[str, Any] | None = None
    key_parts: KeyParts | None = None  # what each cache key is made of (``key_parts`` lines)


_SHOWN = 10  # bad lines named in the warning; the rest are counted
_BLOCK = 4 << 20  # bytes read (and lines parsed) at a time
_ALL_FIELDS = attrgetter(*FIELDS)
_TOO_DEEP = "lists or objects nested too deep to read"
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # neuronkit/
_WHAT_A_LOG_IS = ("A compile log is the JSONL file a recorder writes: `neuronkit record -- python "
                  "script.py` (one per process), or nk.CompileRecorder(log_path=...)")


def _long_int(digits: str) -> int | float:
    """An integer literal; one longer than ``int()`` reads (4300 digits) as +-infinity."""
    try:
        return int(digits)
    except ValueError:
        return float(digits)


def _loads(text: str) -> Any:
    """``json.loads``, but an integer too long for ``int()`` reads as infinity, which every field
    rejects, and an unknown field drops unread (as the C decoder drops it), not the line."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except ValueError:  # Python's limit on the digits of an int
        return json.loads(text, parse_int=_long_int)


class LogReader:
    """Reads one log file line by line: the header, events, update and wall-time lines; keeps
    the good lines and notes the bad ones for one warning."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = strip_control(path, keep_newlines=False)  # as messages show it
        self.events: list[CompileEvent] = []
        self.updates: list[tuple[int, dict[str, Any]]] = []
        self.wall_time_s: float | None = None
        self.bad: list[tuple[int, str]] = []
        self.dropped: list[tuple[int, int, str]] = []  # (line, seq, why): values out of bounds
        self._unplaced: list[CompileEvent] = []  # kept events whose start time was dropped
        self.replaced: list[int] = []  # lines with invalid UTF-8, read with U+FFFD
        self._checked: set[tuple] = set()
        self.open = True   # no wall-time line after the last event or update (yet)
        self.saved = False
        self.clock: dict[str, Any] | None = None
        self.key_parts = KeyParts()
        self._strings: dict[str, str] = {}  # one copy of each repeated name, place and label

    def _text(self, number: int, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.replaced.append(number)
            return raw.decode("utf-8", errors="replace")

    def header(self, raw: bytes) -> dict[str, Any]:
        path = self.name
        if not raw:
            raise LogFormatError(f"{path} is empty: not a neuronkit compile log")
        try:
            header = json.loads(self._text(1, raw))
        except json.JSONDecodeError:
            what = ("it is not text (an image, an archive or another binary file)"
                    if self.replaced or b"\0" in raw else "its first line is not JSON")
            raise LogFormatError(f"{path} is not a neuronkit compile log: {what}. "
                                 f"{_WHAT_A_LOG_IS}") from None
        except (ValueError, RecursionError) as exc:  # 4300+ digits, nested past the recursion limit
            why = _TOO_DEEP if isinstance(exc, RecursionError) else "an integer too long to read"
            raise LogFormatError(f"{path}: its header line holds {why}: a damaged header, not a "
                                 "log neuronkit can read") from None
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            raise LogFormatError(
                f"{path} is not a neuronkit compile log: its first line is JSON but no neuronkit "
                f"header (no \"format\": \"{FORMAT}\"). {_WHAT_A_LOG_IS}")
        expected = f"(neuronkit writes \"version\": {FORMAT_VERSION} on the first line)"
        if "version" not in header:
            raise LogFormatError(f"{path}: its header line has no \"version\": a damaged header, "
                                 f"not a log neuronkit can read {expected}")
        version = header["version"]
        if type(version) is not int or version < 1:
            raise LogFormatError(f"{path}: its header names log format version {version!r}, not a "
                                 f"version number: a damaged header {expected}")
        if version > FORMAT_VERSION:
            raise LogFormatError(
                f"{path} uses log format version {version!r}; this neuronkit reads up to "
                f"{FORMAT_VERSION}. Upgrade neuronkit (pip install -U neuronkit) to read it.")
        if "wall_time_s" in header:
            problem = wall_problem(header["wall_time_s"])
            if problem:
                self.bad.append((1, f"header {problem}"))
                del header["wall_time_s"]
            else:
                self.wall_time_s = header["wall_time_s"]
                self.saved = True  # a saved log: written whole, closed
        ranks = header.get("ranks", [])
        if type(ranks) is not list or any(type(r) is not int or not 0 <= r <= MAX_COUNT
                                          for r in ranks):
            self.bad.append((1, f"header ranks: expected a list of ranks, got {show(ranks)}"))
            del header["ranks"]
        return header

    def lines(self, first: int, text: bytes) -> None:
        """Whole lines from ``first`` (``text``: them without the last newline). The event lines
        neuronkit writes are decoded and checked against the schema together (:class:`EventLine`);
        update and wall-time lines one by one. Any doubt (an event line that fails, a count that
        does not match, an event in another layout) and every line is read on its own, which
        names what is wrong."""
        rows = text.split(b"\n")
        is_event = [row.startswith(EVENT_LINE_START) and row.endswith(b"}") for row in rows]
        others = [k for k, event in enumerate(is_event) if not event]
        events: list[EventLine] | None = None
        if not any(b'"seq"' in rows[k] for k in others):  # else events would change order
            try:
                events = decode_event_lines(b"[" + b",".join(compress(rows, is_event)) + b"]")
            except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
                events = None
        if events is None or len(events) != len(rows) - len(others):
            for number, raw in enumerate(rows, start=first):
                self.line(number, raw)
            return
        self.events.extend(starmap(CompileEvent, map(_ALL_FIELDS, events)))
        if self._unplaced and events:
            self._place(events[0].started_at)
        for k in others:
            self.line(first + k, rows[k])
        last = next((k for k in range(len(rows) - 1, -1, -1) if rows[k].strip()), None)
        if last is not None and is_event[last]:  # read out of order above: the last line decides
            self.open = True

    def line(self, number: int, raw: bytes, terminated: bool = True) -> None:
        text = self._text(number, raw)
        if not text or text.isspace():
            return
        try:
            data = _loads(text)
        except json.JSONDecodeError as exc:
            if not terminated:
                self.bad.append((number, "truncated last line: the writer stopped mid-line"))
            else:
                self.bad.append((number, f"not JSON: {exc.msg} at column {exc.colno}"))
            return
        except RecursionError:
            self.bad.append((number, _TOO_DEEP))
            return
        if type(data) is not dict:
            self.bad.append((number, f"expected a JSON object, got {type(data).__name__}"))
            return
        self.item(number, data)

    def item(self, number: int, data: dict[str, Any]) -> None:
        """One line's object: an event, an update or a wall time, kept if it fits the schema."""
        if "seq" in data:
            self._event(number, data)
        else:
            self._not_event(number, data)

    def _not_event(self, number: int, data: dict[str, Any]) -> None:
        """An update, wall-time or clock line, kept if it fits the schema."""
        if "update" in data:
            problem = update_problem(data)
            if problem is None:
                self.updates.append((number, data))
                self.open = True
                return
        elif "wall_time_s" in data:
            problem = wall_problem(data["wall_time_s"])
            if problem is None:
                self.wall_time_s = data["wall_time_s"]
                self.open = False
                return
        elif "clock" in data:
            problem = clock_problem(data["clock"])
            if problem is None:
                self.clock = data["clock"]
                return
        elif "key_parts" in data:
            problem = key_parts_problem(data["key_parts"])
            if problem is None:
                self.key_parts.take_line(data["key_parts"])
                return
        elif "format" in data:
            problem = "a second header line: two writers shared this file"
        else:
            problem = event_problem(data, self._checked)
        self.bad.append((number, problem or "not an event, update or wall-time line"))

    def _event(self, number: int, data: dict[str, Any]) -> None:
        """An event line, kept if it is an event (its values out of bounds dropped)."""
        problem = event_problem(data, self._checked)
        dropped: list[tuple[str, str]] = []
        if problem is not None:
            problem, dropped = repair_event(data)  # one value out of bounds: the event stays
            if problem is not None:
                self.bad.append((number, problem))
                return
            self.dropped.extend((number, data["seq"], why) for _, why in dropped)
        strings = self._strings  # one copy of each name, place and label a long log repeats
        for name in ("function", "location", "backend", "device", "kind", "context"):
            if name in data:
                value = data[name]
                data[name] = strings.setdefault(value, value)
        event = CompileEvent.from_dict(data)
        if any(name == "started_at" for name, _ in dropped):
            if self.events and not self._unplaced:
                event.started_at = self.events[-1].started_at
            else:  # the first events: placed at the next start read
                self._unplaced.append(event)
        elif self._unplaced:
            self._place(event.started_at)
        self.events.append(event)
        self.open = True

    def _place(self, started_at: float) -> None:
        """The events read before any start time, theirs dropped: placed at the first one."""
        for event in self._unplaced:
            event.started_at = started_at
        self._unplaced.clear()

    @property
    def closed(self) -> bool:
        """Its writer stopped after its last line: a saved log, or a wall-time line came last."""
        return self.saved or not self.open

    def apply_updates(self, updates: list[tuple[int, dict[str, Any]]],
                      by_seq: dict[int, CompileEvent]) -> None:
        """Set the fields of update lines on the events they name (``by_seq``); an update of an
        event the log does not hold is a bad line."""
        for number, data in updates:
            target = by_seq.get(data["update"])
            if target is None:
                self.bad.append((number, f"updates event {data['update']}, which the log does "
                                 "not hold"))
                continue
            for name in UPDATABLE:
                if name in data:
                    setattr(target, name, data[name])

    def finish(self) -> float | None:
        """Apply the update lines, say what was skipped (one warning), return the wall time."""
        self.apply_updates(self.updates, {e.seq: e for e in self.events})
        notes = []
        if self.bad:
            self.bad.sort()
            shown = ", ".join(f"line {n} ({why})" for n, why in self.bad[:_SHOWN])
            more = f", and {len(self.bad) - _SHOWN} more" if len(self.bad) > _SHOWN else ""
            notes.append(f"skipped {len(self.bad)} bad line{'s' if len(self.bad) > 1 else ''}: "
                         f"{shown}{more}")
        if self.dropped:
            notes.append(self._dropped_note())
        if self.replaced:
            lines = ", ".join(str(n) for n in self.replaced[:_SHOWN])
            more = f" and {len(self.replaced) - _SHOWN} more" if len(self.replaced) > _SHOWN else ""
            notes.append(f"invalid UTF-8 read as U+FFFD on line {lines}{more}")
        if notes:  # one line, nothing a terminal acts on: the file name and keys are anyone's
            n = len(self.events)
            message = f"{self.path}: " + "; ".join(notes) + f"; kept {n} event{'' if n == 1 else 's'}"
            warnings.warn(strip_control(message, keep_newlines=False), LogWarning,
                          stacklevel=_caller_level())
        return self.wall_time_s

    def _dropped_note(self) -> str:
        """The values out of bounds dropped from events that were kept, named."""
        n, events = len(self.dropped), len({line for line, _, _ in self.dropped})
        shown = ", ".join(f"line {line} event {seq} ({why})" for line, seq, why in
                          self.dropped[:_SHOWN])
        more = f", and {n - _SHOWN} more" if n > _SHOWN else ""
        return (f"dropped {n} bad field value{'s' if n > 1 else ''} of {events} event"
                f"{'s' if events > 1 else ''} and kept {'them' if events > 1 else 'it'} (a number "
                f"reset to its default, a start time to the previous event's, a size shown as ?): "
                f"{shown}{more}")


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside neuronkit (its caller's line, not one of
    neuronkit's own; ``warnings.warn(skip_file_prefixes=...)`` does this from Python 3.12)."""
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level


