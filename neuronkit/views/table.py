"""The event table as a pure model: filters, search, sort and pages of compile events.

:class:`EventTable` keeps a sorted index of the events that pass its filters, so a live event is
placed with one binary search (:meth:`EventTable.append`) and a page is rendered from its own rows
only. Display values are plain text (``table_cells.py``): the HTML view escapes them
(``views.html``), the exports make them safe for spreadsheets and Markdown (``table_export.py``).
"""
from __future__ import annotations

import bisect
import math
from typing import Any, Iterable, Sequence

from neuronkit.advice.excerpts import LONG_CHARS
from neuronkit.events.event import KINDS, CompileEvent
from neuronkit.events.facts import as_events, function_labels, readable, text_of
from neuronkit.log.compile_log import CompileLog
from neuronkit.views.table_cells import (
    CELLS,
    COLUMN_LABELS,
    OPTIONAL_COLUMNS,
    UNKNOWN,
    as_text,
    is_number,
    reason_list,
)

__all__ = ["ARRIVAL", "SORT_COLUMNS", "TABLE_ROWS", "EventTable", "sort_key"]

TABLE_ROWS = 200            # rows per page; the table keeps every event
ARRIVAL = "arrival"         # the order events came in (the default sort, newest first)
SORT_COLUMNS: tuple[str, ...] = (ARRIVAL, *COLUMN_LABELS)

SortKey = tuple[Any, ...]


def _distinct(values: list[Any]) -> Iterable[Any]:
    """The values without repeats (a value of another type is another value: 1, 1.0, True);
    all of them when one cannot be hashed."""
    try:
        if len(set(map(type, values))) == 1:
            return set(values)
        return [value for _, value in {(type(v), v) for v in values}]
    except TypeError:
        return values


def _earliest(values: list[Any]) -> float | None:
    """The least finite number of ``values`` (None when there is none)."""
    if set(map(type, values)) == {float} and math.isfinite(sum(values)):
        return min(values)                               # the usual case, without a call per value
    return min((float(v) for v in values if is_number(v)), default=None)


def _rank(value: Any) -> int | str:
    """A rank option: the rank, or "?" for one that is not an int."""
    return value if type(value) is int else UNKNOWN


def sort_key(value: Any, missing_last: bool = True) -> tuple[int, float, str]:
    """A key that orders any values: numbers, then text (case-insensitive, by its first
    ``LONG_CHARS`` characters), then missing ones (first instead with ``missing_last=False``, so
    a descending order still ends with them)."""
    if is_number(value):
        return (1, float(value), "")
    if value is None or value == "":
        return (3 if missing_last else 0, 0.0, "")
    return (2, 0.0, str(value)[:LONG_CHARS].casefold())


class EventTable:
    """Compile events filtered (kinds, function labels, ranks, text), sorted and paged.

    Options for the controls: :meth:`kinds`, :meth:`functions`, :meth:`ranks`. A live event goes
    in with :meth:`append`; an event whose fields changed afterwards (a NEFF build resolved by
    ``CompileLog.update``) is re-placed with :meth:`refresh`.
    """

    def __init__(self, source: CompileLog | Sequence[CompileEvent] = (), *,
                 page_size: int = TABLE_ROWS) -> None:
        events = as_events(source)
        self._events: list[CompileEvent] = events
        self._position: dict[int, int] | None = None     # id(event) -> place; made by refresh
        self._keys: list[SortKey | None] = []             # per place; None: filtered out
        self._index: list[SortKey] = []                   # keys of the shown events, ascending
        self._labels: dict[tuple[str, str], str] = function_labels(readable(events))
        self._kinds: set[str] = set()
        self._ranks: set[int | str] = set()
        self._shown_columns: set[str] = set()
        self._t0: float | None = None
        self._kind_filter: frozenset[str] | None = None
        self._function_filter: frozenset[str] | None = None
        self._rank_filter: frozenset[int | str] | None = None
        self._search = ""
        self._sort_column = ARRIVAL
        self._descending = True
        self._page = 0
        self._page_size = TABLE_ROWS
        self.page_size = page_size
        self._note(events)
        self._rebuild()

    # -- filters and sort --------------------------------------------------------------
    def set_filters(self, *, kinds: Iterable[str] | None = None,
                    functions: Iterable[str] | None = None, ranks: Iterable[int] | None = None,
                    search: str = "") -> None:
        """Show only events of these kinds, function labels and ranks (None: any) whose reasons,
        changed text or function contain ``search`` (any case). Goes back to the first page."""
        self._kind_filter = None if kinds is None else frozenset(kinds)
        self._function_filter = None if functions is None else frozenset(functions)
        self._rank_filter = None if ranks is None else frozenset(ranks)
        self._search = (search or "").casefold()
        self._page = 0
        self._rebuild()

    def sort_by(self, column: str, descending: bool | None = None) -> None:
        """Sort by a column of :data:`SORT_COLUMNS`; ``descending`` None flips it when the
        column is already the sort column, else sorts descending. Ties keep arrival order."""
        if column not in SORT_COLUMNS:
            raise ValueError(f"cannot sort by {column!r}; choose one of {SORT_COLUMNS}")
        if descending is None:
            descending = not self._descending if column == self._sort_column else True
        self._sort_column, self._descending = column, descending
        self._page = 0
        self._rebuild()

    @property
    def sort_column(self) -> str:
        return self._sort_column

    @property
    def descending(self) -> bool:
        return self._descending

    # -- pages -------------------------------------------------------------------------
    @property
    def page_size(self) -> int:
        return self._page_size

    @page_size.setter
    def page_size(self, size: int) -> None:
        if not isinstance(size, int) or size < 1:
            raise ValueError(f"page_size must be an int >= 1, got {size!r}")
        self._page_size = size
        self._page = min(self._page, self.page_count - 1)

    @property
    def page(self) -> int:
        """The index of the page shown (0 first), kept within ``page_count``."""
        return min(self._page, self.page_count - 1)

    @page.setter
    def page(self, index: int) -> None:
        self._page = max(0, min(int(index), self.page_count - 1))

    @property
    def page_count(self) -> int:
        return max(1, -(-len(self._index) // self._page_size))

    @property
    def row_count(self) -> int:
        """Rows that pass the filters (all pages)."""
        return len(self._index)

    @property
    def total(self) -> int:
        """Every event of the table, filtered out or not."""
        return len(self._events)

    @property
    def range_text(self) -> str:
        """Which rows the page shows: ``rows 201–400 of 10,000``."""
        count, total = len(self._index), len(self._events)
        if not total:
            return "no events"
        if not count:
            return f"no matching rows of {total:,} events"
        start = self.page * self._page_size
        text = f"rows {start + 1:,}–{min(start + self._page_size, count):,} of {count:,}"
        return text + (f" (filtered from {total:,} events)" if count < total else "")

    # -- columns and options -----------------------------------------------------------
    @property
    def columns(self) -> tuple[str, ...]:
        """The columns shown: rank with several ranks, the Neuron columns where some event
        has them (a NEFF build time, a NEFF cache state, eager kernels)."""
        return tuple(c for c in COLUMN_LABELS
                     if c not in OPTIONAL_COLUMNS or c in self._shown_columns)

    def kinds(self) -> list[str]:
        """The kinds present, in :data:`~neuronkit.events.event.KINDS` order, unknown ones last."""
        return [k for k in KINDS if k in self._kinds] + sorted(self._kinds - set(KINDS))

    def functions(self) -> list[str]:
        """The function labels present (``forward (layers.py:10)`` where names repeat)."""
        return sorted(set(self._labels.values()), key=str.casefold)

    def ranks(self) -> list[int | str]:
        return sorted(self._ranks, key=sort_key)

    # -- rows --------------------------------------------------------------------------
    def page_events(self) -> list[CompileEvent]:
        """The events of the current page, in table order."""
        start = self.page * self._page_size
        return [self._events[key[-1]] for key in self._slice(start, start + self._page_size)]

    def rows(self) -> list[dict[str, str]]:
        """The current page as display values, one dict per row keyed by :attr:`columns`."""
        columns = self.columns
        return [self.row(event, columns) for event in self.page_events()]

    def all_rows(self) -> list[dict[str, str]]:
        """Every row that passes the filters, in table order (for exports)."""
        columns = self.columns
        return [self.row(self._events[key[-1]], columns) for key in self._slice(0, len(self._index))]

    def row(self, event: CompileEvent, columns: Sequence[str] | None = None) -> dict[str, str]:
        """One event's display values (plain text, not escaped)."""
        label, t0 = self.label(event), self._t0 or 0.0
        return {c: CELLS[c](event, label, t0) for c in (self.columns if columns is None else columns)}

    def label(self, event: CompileEvent) -> str:
        """The event's function label, as the chart, counts and advice name it."""
        name = text_of(event.function)
        return self._labels.get((name, text_of(event.location)), name)

    # -- live updates ------------------------------------------------------------------
    def append(self, event: CompileEvent) -> None:
        """Add a live event: one binary search puts it where the sort says (at the end of the
        index in the default order); labels and the index are rebuilt only when a known
        function name shows up at a new place (its label gains the place)."""
        key = (text_of(event.function), text_of(event.location))
        relabel = key not in self._labels and any(f == key[0] for f, _ in self._labels)
        if relabel:
            self._labels = function_labels(readable([*self._events, event]))
        elif key not in self._labels:
            self._labels[key] = key[0]
        position = len(self._events)
        self._events.append(event)
        self._keys.append(None)
        if self._position is not None:
            self._position[id(event)] = position
        self._note([event])
        if relabel and (self._function_filter is not None or self._search
                        or self._sort_column == "function"):
            self._rebuild()                               # labels decide rows or their order
        else:
            self._place(position)

    def refresh(self, event: CompileEvent) -> None:
        """Re-place an event of the table whose fields changed (filters, sort, columns);
        KeyError for an event the table does not hold."""
        if self._position is None:
            self._position = {id(e): place for place, e in enumerate(self._events)}
        position = self._position[id(event)]
        old = self._keys[position]
        if old is not None:
            del self._index[bisect.bisect_left(self._index, old)]
        self._note([event])
        self._place(position)

    # -- internals ---------------------------------------------------------------------
    def _note(self, events: list[CompileEvent]) -> None:
        """Record what events add to the options, the shown columns and the start time (one
        pass per field over their distinct values: a 10k-event log is read once, quickly)."""
        self._kinds.update(map(as_text, _distinct([e.kind for e in events])))
        self._ranks.update(map(_rank, _distinct([e.rank for e in events])))
        shown = self._shown_columns
        if len(self._ranks) > 1:
            shown.add("rank")
        for column in ("neff_compile_s", "neff_cache"):
            values = [getattr(e, column) for e in events]
            if values.count(None) < len(values):
                shown.add(column)
        if any(is_number(k) and k > 0 for k in _distinct([e.kernels for e in events])):
            shown.add("kernels")
        start = _earliest([e.started_at for e in events])
        if start is not None:
            self._t0 = start if self._t0 is None else min(self._t0, start)

    def _passes(self, event: CompileEvent) -> bool:
        if self._kind_filter is not None and as_text(event.kind) not in self._kind_filter:
            return False
        if self._rank_filter is not None and _rank(event.rank) not in self._rank_filter:
            return False
        if self._function_filter is not None and self.label(event) not in self._function_filter:
            return False
        if self._search:  # each text up to LONG_CHARS: a 20 MB reason costs what a long one does
            haystack = "\n".join(text[:LONG_CHARS] for text in (
                self.label(event), text_of(event.function), text_of(event.changed),
                *reason_list(event.reasons)))
            return self._search in haystack.casefold()
        return True

    def _sort_value(self, event: CompileEvent) -> Any:
        column = self._sort_column
        if column == "time":
            return event.started_at
        if column == "function":
            return self.label(event)
        if column == "reason":
            reasons = reason_list(event.reasons)
            return reasons[0] if reasons else None
        if column == "kind":
            return KINDS.index(event.kind) if event.kind in KINDS else as_text(event.kind)
        return getattr(event, column)

    def _key(self, position: int) -> SortKey:
        if self._sort_column == ARRIVAL:
            return (position,)
        value = self._sort_value(self._events[position])
        return (*sort_key(value, missing_last=not self._descending), position)

    def _place(self, position: int) -> None:
        """Put the event at ``position`` into the index if it passes the filters."""
        if not self._passes(self._events[position]):
            self._keys[position] = None
            return
        key = self._keys[position] = self._key(position)
        bisect.insort(self._index, key)

    def _rebuild(self) -> None:
        """The index from scratch: after a filter or sort change."""
        events = self._events
        filtering = self._search or any(f is not None for f in (
            self._kind_filter, self._function_filter, self._rank_filter))
        shown: Iterable[int] = ([p for p, e in enumerate(events) if self._passes(e)] if filtering
                                else range(len(events)))
        if self._sort_column == ARRIVAL:
            index: list[SortKey] = [(p,) for p in shown]     # in order already
        else:
            index = sorted(self._key(p) for p in shown)
        keys: list[SortKey | None] = [None] * len(events)
        for key in index:
            keys[key[-1]] = key
        self._keys, self._index = keys, index

    def _slice(self, start: int, stop: int) -> list[SortKey]:
        """Index keys from ``start`` to ``stop`` in display order (descending: from the end)."""
        if not self._descending:
            return self._index[start:stop]
        count = len(self._index)
        return self._index[max(count - stop, 0):max(count - start, 0)][::-1]
