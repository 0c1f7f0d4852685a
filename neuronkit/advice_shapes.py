"""The analysis behind advice: graphs per rank, and which input dimensions varied between them.

``diagnose()`` (advice.py) words the findings; this module only counts and compares events. A
merged log holds every rank's events, so counts are taken per rank. Every input
dimension becomes a ``_Series`` of the values it took, completed from the guard-failure reasons
where the recorder saw no shapes; dimensions that changed together form one group (input_ids
and attention_mask), each with a role: the batch size, a KV-cache length or a sequence length.
"""
from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable

from .events import CompileEvent

GRAPH_KINDS = ("first", "recompile")

MISMATCH = re.compile(r"tensor '(?P<name>.+?)' size mismatch at index (?P<dim>\d+)\. "
                      r"expected (?P<expected>\d+), actual (?P<actual>\d+)")
_SOURCE = re.compile(r"\b(?:L|G|kwargs|args)\[['\"]([^'\"]+)['\"]\]")
_CACHE_NAME = re.compile(r"past_key_values|key_cache|value_cache|layers\[\d+\]\.(keys|values)")
_LIMIT = re.compile(r"recompile_limit\W*\(?(\d+)|currently set to (\d+)")


def clean_name(text: str) -> str:
    """``L['input_ids']`` / ``kwargs['cache'].layers[0].keys`` -> ``input_ids`` / ``cache.layers[0].keys``."""
    return _SOURCE.sub(r"\1", text.strip())


def graphs_per_rank(events: list[CompileEvent]) -> int:
    """Graphs of one function: the most on any rank (a merged log repeats them once per rank)."""
    counts: dict[int, int] = defaultdict(int)
    for e in events:
        counts[e.rank] += e.kind in GRAPH_KINDS
    return max(counts.values(), default=0)


def graphs_of(events: list[CompileEvent]) -> int:
    """Distinct graphs of one function over all ranks (by input shapes), at least any rank's count."""
    shapes = {json.dumps(e.input_shapes, sort_keys=True) for e in events
              if e.kind in GRAPH_KINDS}
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
        m = _LIMIT.search(" ".join(e.reasons) + json.dumps(e.metrics, default=str))
        if m:
            return int(m[1] or m[2])
    return None


@dataclass
class _Series:
    """The values one input dimension took, in event order."""

    name: str
    dim: int
    ndim: int | None
    values: list[tuple[int, int]] = field(default_factory=list)  # (event index, value)

    @property
    def distinct(self) -> list[int]:
        return sorted({v for _, v in self.values})

    @property
    def role(self) -> str:
        """``batch`` (dim 0 of a 2-D+ tensor), ``cache`` (a KV-cache length) or ``length``."""
        is_1d = self.ndim == 1 or (self.ndim is None and "position" in self.name)
        if self.dim == 0 and not is_1d:
            return "batch"
        return "cache" if _CACHE_NAME.search(self.name) else "length"


def series(events: list[CompileEvent]) -> dict[tuple[str, int], _Series]:
    """Input dimensions from the recorded shapes, completed from the guard-failure reasons."""
    out: dict[tuple[str, int], _Series] = {}
    for i, e in enumerate(events):
        for raw, dims in (e.input_shapes or {}).items():
            for d, v in enumerate(dims or []):
                if isinstance(v, int):
                    name = clean_name(raw)
                    out.setdefault((name, d), _Series(name, d, len(dims))).values.append((i, v))
    from_reasons: dict[tuple[str, int], _Series] = {}
    for i, e in enumerate(events):
        for reason in e.reasons:
            for m in MISMATCH.finditer(reason):
                key = (clean_name(m["name"]), int(m["dim"]))
                if key in out:
                    continue
                s = from_reasons.setdefault(key, _Series(key[0], key[1], None))
                if not s.values:  # the first graph's value is what the first recompile expected
                    s.values.append((-1, int(m["expected"])))
                if s.values[-1][0] != i:
                    s.values.append((i, int(m["actual"])))
    out.update(from_reasons)
    return out


def groups(found: dict[tuple[str, int], _Series], graph_at: set[int]) -> list[list[_Series]]:
    """Varying dimensions grouped when they changed together (input_ids and attention_mask).

    Only graph events decide the grouping: a limit hit's shapes may be known only in part.
    """
    grouped: dict[tuple[bool, tuple], list[_Series]] = {}
    for s in found.values():
        if len(s.distinct) > 1:
            together = tuple((i, v) for i, v in s.values if i in graph_at or i < 0)
            grouped.setdefault((s.role == "batch", together), []).append(s)
    # a cache tensor leads its group: the masks sized to the cache follow it
    return [sorted(g, key=lambda s: s.role != "cache") for g in grouped.values()]


def is_generation(function: str, events: list[CompileEvent],
                  found: dict[tuple[str, int], _Series]) -> bool:
    """Whether the events come from ``generate()``: a decoding wrapper or a KV cache."""
    text = " ".join(r for e in events for r in e.reasons)
    return (function == "wrapper" or "past_key_values" in text
            or any(_CACHE_NAME.search(n) or "cache_position" in n for n, _ in found))


def consecutive(values: list[int]) -> bool:
    """Four or more values one apart: what a cache growing by one token per step leaves."""
    return len(values) >= 4 and all(b - a == 1 for a, b in zip(values, values[1:]))


def plan(values: list[int]) -> tuple[list[int], str]:
    """Bucket boundaries for observed lengths, via shapes.plan_buckets or powers of two."""
    try:
        from .shapes import plan_buckets

        return [int(b) for b in plan_buckets(sorted(values)).boundaries], "plan_buckets"
    except Exception as exc:  # missing module or a refusal: say so and still suggest something
        powers = sorted({1 << max(int(v) - 1, 0).bit_length() for v in values})
        return powers, f"powers of two (plan_buckets unavailable: {type(exc).__name__}: {exc})"
