"""How findings word their numbers: a count with its noun, a span of values, a shortened list,
the input dimensions that varied together."""
from __future__ import annotations

from typing import Any

from neuronkit.advice.shapes import Series

__all__ = ["count", "dims", "listed", "span"]


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


def dims(group: list[Series]) -> str:
    """A group of input dimensions that varied together: ``input_ids dim 1 (with
    attention_mask dim 1)``, the first named, the rest counted past two."""
    head = f"{group[0].name} dim {group[0].dim}"
    rest = [f"{s.name} dim {s.dim}" for s in group[1:]]
    if len(rest) > 2:
        rest = [rest[0], f"{len(rest) - 1} more alike"]
    return head + (f" (with {' and '.join(rest)})" if rest else "")
