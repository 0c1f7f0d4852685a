"""The analysis behind advice: graphs per rank, and which input dimensions varied between them.

The findings (``recompiles.py``, ``buckets.py``, ``limits.py``) word them; this module only
counts and compares events. A merged log holds every rank's events, so counts are taken per rank.
Every input dimension becomes a ``Series`` of the values it took, completed from the
guard-failure reasons where the recorder saw no shapes; dimensions one cause moved together form
one group (the prompt length: input_ids, position_ids, the mask, the cache length sized from it),
led by the input the user controls, each with a role: the batch size, a KV-cache length or a
sequence length.
"""
from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain
from operator import attrgetter, itemgetter
from typing import Iterable

from neuronkit.events.event import GRAPH_KINDS, CompileEvent
from neuronkit.events.facts import of_kind, shape_key
from neuronkit.sources.torch_text import (
    CACHE_NAME,
    input_name,
    limit_value_in,
    names_size_mismatch,
    scalar_guard,
    size_mismatches,
    sole_mismatch_at,
)

__all__ = ["DECODE", "PREFILL", "USER_INPUTS", "Series", "consecutive", "graphs_of",
           "graphs_per_rank", "groups", "is_generation", "leader_rank", "limit_value", "offset",
           "per_rank", "scalar_guards", "series"]


def graphs_per_rank(events: list[CompileEvent]) -> int:
    """Graphs of one function: the most on any rank (a merged log repeats them once per rank)."""
    return max(Counter(map(attrgetter("rank"), of_kind(events, *GRAPH_KINDS))).values(), default=0)


def graphs_of(events: list[CompileEvent]) -> int:
    """Distinct graphs of one function over all ranks (by input shapes), at least any rank's count."""
    shapes = set(map(shape_key, of_kind(events, *GRAPH_KINDS)))
    return max(len(shapes), graphs_per_rank(events))


def per_rank(events: list[CompileEvent], ranks: Iterable[int] = ()) -> dict[int, int]:
    """Events per rank (``ranks`` listed even where they have none)."""
    counts = {r: 0 for r in ranks}
    for e in events:
        counts[e.rank] = counts.get(e.rank, 0) + 1
    return dict(sorted(counts.items()))


def limit_value(hits: list[CompileEvent]) -> int | None:
    """The recompile limit in force: the recorder's note, else torch's message."""
    for e in hits:
        note = e.metrics.get("limit")
        if isinstance(note, dict) and isinstance(note.get("value"), int):
            return note["value"]
        value = limit_value_in(" ".join(e.reasons) + json.dumps(e.metrics, default=str))
        if value is not None:
            return value
    return None


@dataclass
class Series:
    """The values one input dimension took, in event order."""

    name: str
    dim: int
    ndim: int | None
    values: list[tuple[int, int]] = field(default_factory=list)  # (event index, value)

    @cached_property  # read once the series is built
    def distinct(self) -> list[int]:
        return sorted(set(map(itemgetter(1), self.values)))

    @property
    def role(self) -> str:
        """``batch`` (dim 0 of a 2-D+ tensor), ``cache`` (a KV-cache length) or ``length``."""
        is_1d = self.ndim == 1 or (self.ndim is None and "position" in self.name)
        if self.dim == 0 and not is_1d:
            return "batch"
        return "cache" if CACHE_NAME.search(self.name) else "length"


def series(events: list[CompileEvent]) -> dict[tuple[str, int], Series]:
    """Input dimensions from the recorded shapes, completed from the guard-failure reasons."""
    found = _from_shapes(events)
    found.update(_from_reasons(events, found))
    return found


def _from_shapes(events: list[CompileEvent]) -> dict[tuple[str, int], Series]:
    """A Series per (input, dim) of the recorded input shapes (int dims only)."""
    out: dict[tuple[str, int], Series] = {}
    columns: dict[str, list[Series | None]] = {}  # raw source -> its Series per dim, once seen
    for i, e in enumerate(events):
        for raw, dims in (e.input_shapes or {}).items():
            if not dims:
                continue
            column = columns.get(raw)
            if column is None:
                column = columns[raw] = []
            if len(column) < len(dims):
                column += [None] * (len(dims) - len(column))
            for d, v in enumerate(dims):
                if isinstance(v, int):
                    found = column[d]
                    if found is None:
                        name = input_name(raw)
                        found = column[d] = out.setdefault((name, d), Series(name, d, len(dims)))
                    found.values.append((i, v))
    return out


def _from_reasons(events: list[CompileEvent],
                  known: dict[tuple[str, int], Series]) -> dict[tuple[str, int], Series]:
    """A Series per (input, dim) that guard failures name as a size mismatch and ``known`` (the
    recorded shapes) lacks: the first graph's value is what the first recompile expected."""
    out: dict[tuple[str, int], Series] = {}
    parsed: dict[str, list[tuple[str, int, int, int]]] = {}  # a merged log repeats each reason
    for i, e in enumerate(events):
        for reason in e.reasons:
            if not names_size_mismatch(reason):
                continue
            if sole_mismatch_at(reason) in known:  # one mismatch, of a dim the shapes gave
                continue
            mismatches = parsed.get(reason)
            if mismatches is None:
                mismatches = parsed[reason] = size_mismatches(reason)
            for name, dim, expected, actual in mismatches:
                key = (name, dim)
                if key in known:
                    continue
                s = out.setdefault(key, Series(key[0], key[1], None))
                if not s.values:  # the first graph's value is what the first recompile expected
                    s.values.append((-1, expected))
                if s.values[-1][0] != i:
                    s.values.append((i, actual))
    return out


def groups(found: dict[tuple[str, int], Series], graph_at: set[int]) -> list[list[Series]]:
    """Varying dimensions grouped by the cause that moved them: dims whose values changed at the
    same graphs, each value of one always with the same value of the other (input_ids dim 1 and
    the mask sized to prompt + max_new_tokens), are one group. The batch size stays apart. The
    input the user controls leads its group (:func:`leader_rank`); the rest follow it.

    Only graph events decide the grouping: a limit hit's shapes may be known only in part.
    """
    grouped: dict[tuple[bool, tuple], list[Series]] = {}
    for s in found.values():
        if len(s.distinct) > 1:
            at = [(i, v) for i, v in s.values if i in graph_at or i < 0]  # -1: from a reason
            grouped.setdefault((s.role == "batch", _pattern(at)), []).append(s)
    return [sorted(g, key=leader_rank) for g in grouped.values()]


def _pattern(values: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Where a dim changed, as (event index, the order its value was first seen in): two dims
    with one pattern move together, whatever their values."""
    seen: dict[int, int] = {}
    return tuple((i, seen.setdefault(v, len(seen))) for i, v in values)


PREFILL, DECODE = "[prefill]", "[decode]"  # the phases of a function label (sources/assemble.py)
USER_INPUTS = ("input_ids", "inputs_embeds", "input_features", "input_values", "pixel_values")


def leader_rank(s: Series) -> tuple[int, int]:
    """How a dim ranks as its group's cause: an input the user passes (input_ids) first, then a
    KV cache, then other inputs, and masks and positions (sized from the others) last."""
    name = s.name.rsplit(".", 1)[-1]
    if name in USER_INPUTS or s.name in USER_INPUTS:
        return 0, s.dim
    if s.role == "cache":
        return 1, s.dim
    follows = "mask" in s.name or "position" in s.name
    return 2 + follows, s.dim


def offset(leader: Series, follower: Series) -> int | None:
    """``follower = leader + k`` at every graph: k, else None."""
    theirs = dict(follower.values)
    gaps = {theirs[i] - v for i, v in leader.values if i in theirs}
    return gaps.pop() if len(gaps) == 1 else None


def is_generation(function: str, events: list[CompileEvent],
                  found: dict[tuple[str, int], Series]) -> bool:
    """Whether the events come from ``generate()``: a decoding wrapper or a KV cache."""
    return (function == "wrapper"
            or any(CACHE_NAME.search(n) or "cache_position" in n for n, _ in found)
            or "past_key_values" in "\n".join(chain.from_iterable(map(attrgetter("reasons"),
                                                                      events))))


def scalar_guards(events: list[CompileEvent]) -> dict[str, list[int]]:
    """Per guarded name, the values of failed ``name == <int>`` guards, in event order (the
    first reason of each event: the guard of the graph used last)."""
    found: dict[str, list[int]] = defaultdict(list)
    if " == " not in "\n".join(chain.from_iterable(map(attrgetter("reasons"), events))):
        return {}  # no guard of that form at all (one pass in C)
    for e in events:
        # a scalar guard reads "name == <int>": a reason without " == " has none
        guard = scalar_guard(e.reasons[0]) if e.reasons and " == " in e.reasons[0] else None
        if guard:
            found[guard[0]].append(guard[1])
    return dict(found)


def consecutive(values: list[int]) -> bool:
    """Four or more values one apart: what a cache growing by one token per step leaves."""
    return len(values) >= 4 and all(b - a == 1 for a, b in zip(values, values[1:], strict=False))
