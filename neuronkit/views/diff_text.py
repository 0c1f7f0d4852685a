"""Two runs compared (``advice/run_diff.RunDiff``) as text, JSON data and an HTML fragment.

    print(diff_text(d))        # one screen for the common case (each list: first N, "and N more")
    diff_data(d)               # {"format": "neuronkit-diff", "version": 1, ...} for --json
    diff_html(d)               # an escaped fragment for report_page(extra_sections=...)

Every value from a log passes through ``safe`` on output: terminal_safe in text (each line cut to
the width), html_text in HTML; JSON is escaped by its writer.
"""
from __future__ import annotations

import textwrap
from typing import Any

from neuronkit.advice.excerpts import ELLIPSIS
from neuronkit.advice.key_diff import build_state
from neuronkit.advice.run_diff import GraphPair, Rebuild, RunDiff, graph_words
from neuronkit.events.event import CompileEvent
from neuronkit.safe import html_text, terminal_safe

__all__ = ["DIFF_FORMAT", "DIFF_VERSION", "diff_data", "diff_html", "diff_text"]

DIFF_FORMAT, DIFF_VERSION = "neuronkit-diff", 1
SHOWN = 3  # entries of a list shown in text before "and N more"
HTML_SHOWN = 50  # ... and in HTML
WIDTH = 100


def _s(seconds: float) -> str:
    return f"{seconds:.2f}"


def _moved(a: float, b: float) -> str:
    return f"{_s(a)} -> {_s(b)} ({b - a:+.2f})"


def _pair_words(p: GraphPair) -> str:
    return (f"{graph_words(p.label, p.b)}: compile s {_moved(p.a.duration_s, p.b.duration_s)}"
            + (f", NEFF s {_moved(p.a.neff_s, p.b.neff_s)}" if p.a.neff_s or p.b.neff_s else ""))


def _rebuild_words(r: Rebuild) -> str:
    """The graph, then each part of its key that differs on a line of its own."""
    if len(r.words) == 1:
        return f"{graph_words(r.label, r.b)} ({r.how}): {r.words[0]}"
    return "\n".join([f"{graph_words(r.label, r.b)} ({r.how}):", *r.words])


def _event_words(item: tuple[str, CompileEvent]) -> str:
    label, e = item
    return f"{graph_words(label, e)}, {_s(e.total_s)} s"


def _sections(d: RunDiff) -> list[tuple[str, list[str], bool]]:
    """(heading, entries, shown when empty) in the order they are printed."""
    na, nb = d.names
    return [
        (f"new in {nb}", [_event_words(x) for x in d.new], False),
        (f"gone from {nb}", [_event_words(x) for x in d.gone], False),
        (f"built in {nb}, loaded in {na}", [graph_words(p.label, p.b) for p in d.built_in_b], False),
        (f"loaded in {nb}, built in {na}", [graph_words(p.label, p.b) for p in d.loaded_in_b], False),
        ("seconds moved", [_pair_words(p) for p in d.moved], False),
        ("why rebuilt", [_rebuild_words(r) for r in d.rebuilt], False),
        (f"new recompile reasons in {nb}", [f"{f}: {r}" for f, r in d.new_reasons], True),
        (f"new graph breaks in {nb}", [f"{f}: {r}" for f, r in d.new_breaks], True),
    ]


def _counts_line(d: RunDiff) -> str:
    return (f"graphs: {len(d.same)} the same, {len(d.new)} new in {d.names[1]}, "
            f"{len(d.gone)} gone from {d.names[1]}")


def _seconds_line(d: RunDiff) -> str:
    text = f"compile s {_moved(*d.compile_s)}"
    return text + (f"; NEFF s {_moved(*d.neff_s)}" if any(d.neff_s) else "")


def _causes(d: RunDiff, most: int = SHOWN) -> str:
    shown = [f"{f} {a} -> {b}" for f, a, b in d.per_function[:most]]
    more = len(d.per_function) - most
    return "; ".join(shown) + (f"; and {more} more" if more > 0 else "")


def _fit(text: str, width: int, indent: str = "") -> str:
    """One terminal-safe line of at most ``width`` characters."""
    line = indent + " ".join(terminal_safe(text).split())
    return line if len(line) <= width else line[: width - 1] + ELLIPSIS


def diff_text(d: RunDiff, width: int = WIDTH, shown: int = SHOWN) -> str:
    """The diff as plain, terminal-safe text, each line at most ``width`` characters: the
    headline and its causes, seconds, graph counts, then each non-empty list (first ``shown``
    entries), new reasons and breaks, and what it cannot tell."""
    width = max(width, 40)
    lines = [_fit(f"{d.names[0]} -> {d.names[1]}", width), _fit(d.headline, width)]
    if d.per_function:
        lines.append(_fit(_causes(d), width, "  "))
    lines += [_fit(_seconds_line(d), width), _fit(_counts_line(d), width)]
    for heading, entries, always in _sections(d):
        if not entries:
            if always:
                lines.append(_fit(f"{heading}: none", width))
            continue
        lines.append(_fit(f"{heading} ({len(entries)}):", width))
        for entry in entries[:shown]:  # an entry's later lines are its details, indented more
            first, *details = entry.split("\n")
            lines += [_fit(first, width, "  "), *(_fit(x, width, "    ") for x in details)]
        if len(entries) > shown:
            lines.append(f"  and {len(entries) - shown} more")
    for note in d.notes:  # what it cannot tell is said whole, wrapped
        lines += textwrap.wrap(" ".join(terminal_safe(note).split()), width, subsequent_indent="  ")
    return "\n".join(lines)


def _graph(label: str, e: CompileEvent, state: str | None = None) -> dict[str, Any]:
    dtypes = e.metrics.get("input_dtypes") if isinstance(e.metrics, dict) else None
    out = {"function": label, "location": e.location, "rank": e.rank, "kind": e.kind,
           "seq": e.seq, "input_shapes": e.input_shapes,
           "input_dtypes": dtypes if isinstance(dtypes, dict) else None,
           "compile_s": e.duration_s, "neff_s": e.neff_s}
    return out if state is None else {**out, "state": state}


def _pair(p: GraphPair) -> dict[str, Any]:
    return {"a": _graph(p.label, p.a, p.state_a), "b": _graph(p.label, p.b, p.state_b),
            "compile_s_moved": p.compile_delta, "neff_s_moved": p.neff_delta}


def diff_data(d: RunDiff) -> dict[str, Any]:
    """The diff as JSON-ready data (``format`` "neuronkit-diff", ``version`` 1)."""
    return {
        "format": DIFF_FORMAT, "version": DIFF_VERSION, "names": list(d.names),
        "headline": d.headline, "graphs": {"a": d.graphs[0], "b": d.graphs[1]},
        "per_function": [{"function": f, "a": a, "b": b} for f, a, b in d.per_function],
        "seconds": {"compile_a": d.compile_s[0], "compile_b": d.compile_s[1],
                    "neff_a": d.neff_s[0], "neff_b": d.neff_s[1],
                    "total_a": d.total_s[0], "total_b": d.total_s[1]},
        "records_lookups": {"a": d.lookups[0], "b": d.lookups[1]},
        "same": [_pair(p) for p in d.same],
        "new": [_graph(label, e, build_state(e)) for label, e in d.new],
        "gone": [_graph(label, e, build_state(e)) for label, e in d.gone],
        "built_in_b_loaded_in_a": [_pair(p) for p in d.built_in_b],
        "loaded_in_b_built_in_a": [_pair(p) for p in d.loaded_in_b],
        "moved": [_pair(p) for p in d.moved],
        "rebuilt": [{"b": _graph(r.label, r.b), "a": _graph(r.label, r.a), "how": r.how,
                     "differs": list(r.words)} for r in d.rebuilt],
        "new_reasons": [{"function": f, "reason": r} for f, r in d.new_reasons],
        "new_breaks": [{"function": f, "reason": r} for f, r in d.new_breaks],
        "notes": list(d.notes),
    }


def diff_html(d: RunDiff, shown: int = HTML_SHOWN) -> str:
    """The diff as an HTML fragment; every value is escaped, class names are fixed."""
    parts = ['<div class="nk-diff">',
             f'<p class="nk-diff-headline"><b>{html_text(d.headline)}</b>'
             + (f"<br>{html_text(_causes(d, shown))}" if d.per_function else "")
             + f"<br>{html_text(_seconds_line(d))}<br>{html_text(_counts_line(d))}</p>",
             '<ul class="nk-diff-lists">']
    for heading, entries, always in _sections(d):
        if not entries:
            if always:
                parts.append(f"<li>{html_text(heading)}: none</li>")
            continue
        items = "".join(f"<li><code>{html_text(x)}</code></li>" for x in entries[:shown])
        more = f"<li>and {len(entries) - shown} more</li>" if len(entries) > shown else ""
        parts.append(f"<li>{html_text(heading)} ({len(entries)}):<ul>{items}{more}</ul></li>")
    parts.append("</ul>")
    parts += [f'<p class="nk-muted">{html_text(note)}</p>' for note in d.notes]
    parts.append("</div>")
    return "".join(parts)
