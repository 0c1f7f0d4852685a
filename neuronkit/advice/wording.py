"""How findings word their numbers: a count with its noun, a span of values, a shortened list,
the input dimensions that varied together."""
from __future__ import annotations

from typing import Any

from neuronkit.advice.shapes import Series, leader_rank, offset
from neuronkit.sources.assemble import with_others

__all__ = ["cause", "count", "dims", "listed", "named", "span"]


def count(n: int, noun: str) -> str:
    """``1 graph``, ``3 graphs``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def span(values: list[int]) -> str:
    """``64..512``."""
    return f"{min(values)}..{max(values)}"


def listed(values: list[Any], most: int = 12) -> str:
    """The first ``most`` values, then how many more: ``1, 2, 3 and 9 more``."""
    shown = ", ".join(str(v) for v in values[:most])
    return shown + (f" and {len(values) - most} more" if len(values) > most else "")


def _same(group: list[Series]) -> list[str]:
    """The dims that took the leader's values, each ``name dim d``."""
    return [f"{s.name} dim {s.dim}" for s in group[1:] if offset(group[0], s) == 0]


def dims(group: list[Series]) -> str:
    """A group of input dimensions one cause moved: ``input_ids dim 1 (with position_ids dim 1
    and attention_mask dim 2); attention_mask dim 3 (+32) follows it``: those with the leader's
    values named with it (counted past two), those sized from it (a cache length) after it."""
    head = group[0]
    derived = []
    for s in group[1:]:
        k = offset(head, s)
        if k != 0:
            derived.append(f"{s.name} dim {s.dim}" + (f" ({k:+d})" if k is not None else ""))
    if len(derived) > 2:
        derived = [derived[0], f"{len(derived) - 1} more"]
    text = f"{head.name} dim {head.dim}{with_others(_same(group))}"
    return text + (f"; {' and '.join(derived)} follow{'s' if len(derived) == 1 else ''} it"
                   if derived else "")


def named(group: list[Series], generation: bool) -> str:
    """The cause with the dims it is seen in: ``the prompt length (input_ids dim 1)``, or the
    dims alone where no cause has a name: ``x dim 1 (with mask dim 1)``."""
    what = cause(group, generation)
    head = group[0]
    if what != f"{head.name} dim {head.dim}":
        return f"{what} ({head.name} dim {head.dim})"
    return what + with_others(_same(group))


def cause(group: list[Series], generation: bool) -> str:
    """What the user controls behind a group: ``the prompt length`` (generation) or ``the
    sequence length`` for dim 1 of input_ids, ``the cache length`` for a KV cache, else the dim."""
    head = group[0]
    if leader_rank(head)[0] == 0 and head.dim == 1:
        return "the prompt length" if generation else "the sequence length"
    if head.role == "cache":
        return "the cache length"
    return f"{head.name} dim {head.dim}"
