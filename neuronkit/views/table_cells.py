"""How the event table shows an event: its columns and their labels, and one plain-text cell per
column (numbers formatted whatever an event holds, kinds named, the first reason shortened); the
short function names of the text views (``forward[prefill]``) and the legend that names their
class once."""
from __future__ import annotations

import os
from collections import defaultdict
from typing import Any, Callable, Iterable, Mapping

from neuronkit.advice.excerpts import cut_long
from neuronkit.events.event import CompileEvent
from neuronkit.events.facts import number, text_of
from neuronkit.log.shared_cache import wait_text
from neuronkit.sources.torch_text import short_reason
from neuronkit.views.text_layout import ELLIPSIS

__all__ = ["CELLS", "COLUMN_LABELS", "KIND_LABELS", "LEGEND_PLACES", "NEURON_COLUMNS",
           "OPTIONAL_COLUMNS", "REASON_WIDTH", "UNKNOWN", "as_text", "fit_label", "is_number",
           "kind_label", "name_legend", "number_text", "reason_list", "reason_text", "short_names"]

COLUMN_LABELS: dict[str, str] = {
    "seq": "#", "time": "time", "function": "function", "changed": "changed", "reason": "reason",
    "duration_s": "seconds", "kind": "kind", "rank": "rank", "graph_count": "graphs",
    "neff_compile_s": "NEFF s", "neff_cache": "NEFF cache", "kernels": "kernels",
    "context": "context"}
NEURON_COLUMNS: tuple[str, ...] = ("neff_compile_s", "neff_cache", "kernels")
OPTIONAL_COLUMNS: frozenset[str] = frozenset({"rank", *NEURON_COLUMNS})  # shown when they say something
KIND_LABELS: dict[str, str] = {
    "first": "first", "recompile": "recompile", "limit_hit": "LIMIT HIT: runs eager",
    "failed": "failed", "eager_fallback": "RAN EAGER", "kernels": "eager kernels",
    "graph_break": "graph break", "backward": "backward", "cpu_fallback": "CPU FALLBACK"}
REASON_WIDTH = 90


UNKNOWN = "?"  # a number field that holds no number


def is_number(value: Any) -> bool:
    """A finite int or float (not a bool): :func:`~neuronkit.events.facts.number`."""
    return number(value) is not None


def number_text(value: Any, spec: str) -> str:
    """``value`` formatted with ``spec`` when it is a number (:func:`number`), "" for None,
    else :data:`UNKNOWN`: what cannot be read as a number is never shown as one."""
    n = number(value)
    if n is None:
        return "" if value is None else UNKNOWN
    if isinstance(n, float) and spec.endswith("d"):
        return format(n, "g")    # a float where an int was expected (seq 1.5)
    return format(n, spec)


def reason_list(value: Any) -> list[str]:
    """An event's reasons as a list of strings, whatever an event holds there."""
    if isinstance(value, (list, tuple)):
        return [str(r) for r in value]
    return [str(value)] if value not in (None, "") else []


def as_text(value: Any) -> str:
    """A kind or rank as a hashable, comparable option value."""
    return value if isinstance(value, str) else str(value)


def kind_label(kind: Any) -> str:
    """A kind's label; an unknown kind as given."""
    return KIND_LABELS[kind] if isinstance(kind, str) and kind in KIND_LABELS else as_text(kind)


def reason_text(event: CompileEvent) -> str:
    """The first reason shortened, and how many more there are."""
    reasons = reason_list(event.reasons)
    more = f" (+{len(reasons) - 1} more)" if len(reasons) > 1 else ""
    return (short_reason(cut_long(reasons[0]), width=REASON_WIDTH) if reasons else "") + more


def _split(label: str) -> tuple[str, str]:
    """A function label's name and what follows it, its phase and place:
    ``Qwen3ForCausalLM.forward[prefill] (m.py:9)`` -> ``Qwen3ForCausalLM.forward``,
    ``[prefill] (m.py:9)``."""
    name, sep, where = label.partition(" (")
    bracket = name.rfind("[") if name.endswith("]") else -1
    if bracket > 0:
        return name[:bracket], name[bracket:] + sep + where
    return name, sep + where


def short_names(labels: Iterable[str]) -> dict[str, str]:
    """Each function label with the qualifier of its name left out (the class:
    ``Qwen3ForCausalLM.forward[prefill]`` -> ``forward[prefill]``) as far as one short name
    stands for one name (``LlamaModel.forward`` and ``LlamaForCausalLM.forward`` stay whole)."""
    split = {label: _split(label) for label in dict.fromkeys(labels)}
    kept = dict.fromkeys((name for name, _ in split.values()), 1)  # trailing parts kept

    def short(name: str) -> str:
        return ".".join(name.split(".")[-kept[name]:])

    while True:
        named: dict[str, list[str]] = defaultdict(list)
        for name in kept:
            named[short(name)].append(name)
        grow = [n for same in named.values() if len(same) > 1 for n in same
                if short(n) != n]
        if not grow:
            break
        for name in grow:
            kept[name] += 1
    return {label: short(name) + tail for label, (name, tail) in split.items()}


def fit_label(label: str, width: int) -> str:
    """A (short) function label in about ``width`` characters, its phase always whole:
    ``torch_dynamo_resume_in_fo…[decode]``; its place kept where the name keeps 8 characters."""
    if len(label) <= width:
        return label
    name, tail = _split(label)
    phase, sep, place = tail.partition(" (")
    if len(phase) > width - 3:  # no room for the name: cut as one text
        return label[:max(width - 1, 1)] + ELLIPSIS
    where = sep + place
    room = width - len(phase)
    if room - len(where) < min(len(name), 8) + 1:
        where = ""
    if len(name) > room - len(where):
        name = name[:max(room - len(where) - 1, 1)] + ELLIPSIS
    return name + phase + where


LEGEND_PLACES = 3  # places named per function in the legend; more are counted


def name_legend(labels: Mapping[tuple[str, str], str], shorts: Mapping[str, str]) -> list[str]:
    """What each short name stands for, once per name: ``forward = Qwen3ForCausalLM.forward
    (modeling_qwen3.py:440)``. ``labels``: (function, location) -> label, as
    :func:`~neuronkit.events.facts.function_labels` gives them (plain text, not made
    terminal-safe here)."""
    places: dict[tuple[str, str], list[str]] = {}
    for (_, location), label in labels.items():
        short = shorts.get(label, label)
        if short == label:
            continue
        name, short_name = _split(label)[0], _split(short)[0]
        seen = places.setdefault((short_name, name), [])
        place = os.path.basename(str(location).replace("\\", "/"))
        if place and place not in seen:
            seen.append(place)
    out = []
    for (short_name, name), where in places.items():
        more = len(where) - LEGEND_PLACES
        where = where[:LEGEND_PLACES] + ([f"{more} more"] if more > 0 else [])
        out.append(f"{short_name} = {cut_long(name)}"
                   + (f" ({', '.join(map(cut_long, where))})" if where else ""))
    return out


def _time(started_at: Any, t0: float) -> str:
    start = number(started_at)
    return UNKNOWN if start is None else f"{start - t0:.1f} s"


# how each column shows an event (plain text), given its function label and the table's start; a
# text longer than any recorder writes as its start and length (``cut_long``: a hostile log)
CELLS: dict[str, Callable[[CompileEvent, str, float], str]] = {
    "seq": lambda e, label, t0: number_text(e.seq, "d"),
    "time": lambda e, label, t0: _time(e.started_at, t0),
    "function": lambda e, label, t0: cut_long(label),
    "changed": lambda e, label, t0: cut_long(text_of(e.changed)) or "—",
    "reason": lambda e, label, t0: reason_text(e),
    "duration_s": lambda e, label, t0: number_text(e.duration_s, ".2f"),
    "kind": lambda e, label, t0: cut_long(kind_label(e.kind)),
    "rank": lambda e, label, t0: number_text(e.rank, "d"),
    "graph_count": lambda e, label, t0: number_text(e.graph_count, "d"),
    "neff_compile_s": lambda e, label, t0: number_text(e.neff_compile_s, ".1f"),
    "neff_cache": lambda e, label, t0: " ".join(filter(None, (cut_long(text_of(e.neff_cache)),
                                                           wait_text(e)))),
    "kernels": lambda e, label, t0: number_text(e.kernels, "d") if e.kernels else "",
    "context": lambda e, label, t0: cut_long(text_of(e.context)),
}
