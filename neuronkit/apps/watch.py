"""``neuronkit watch DIR``: a live terminal view of a run's logs (``neuronkit record``'s folder),
drawn with rich from ``nk.follow(DIR)`` about once a second.

Per rank: graphs built, recompiles, compile seconds (Dynamo + NEFF), the time since its last
event, whether its log is still open; then the latest events with their reasons, and the top
advice. It ends with the final report (the text ``neuronkit report DIR`` prints) once every log
found has been closed by its writer, or at Ctrl-C: stopping a watch is no error (exit 0), the
report then covers what was written so far. ``--once`` draws one frame and exits. Where stdout is
no terminal (a pipe, a file), rich draws no live frames: the last frame and the report are printed.

A log holds finished compiles only: compiles in progress (``CompileStart``) reach the recorder's
in-process subscribers, never the file. So what a rank does now is shown as a log can tell it:
for a rank whose log is open, the time since its last event. Every text read from a log reaches
the terminal as a rich ``Text`` (no markup read in it) without control characters.
"""
from __future__ import annotations

import dataclasses
import signal
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from neuronkit.advice.diagnose import diagnose
from neuronkit.advice.finding import Advice
from neuronkit.events.event import CompileEvent
from neuronkit.events.facts import function_labels, graphs, number, of_kind, readable, total_seconds
from neuronkit.log.follow import Follower, follow
from neuronkit.log.open import open_log
from neuronkit.safe import strip_control
from neuronkit.views.report_facts import DEFAULT_LIMIT
from neuronkit.views.table_cells import (
    CELLS,
    COLUMN_LABELS,
    UNKNOWN,
    fit_label,
    name_legend,
    number_text,
    short_names,
)
from neuronkit.views.text import format_report, why_text
from neuronkit.views.text_layout import NARROWEST, WIDTH, bounded

__all__ = ["DEFAULT_EVENTS", "RankRow", "final_report", "rank_rows", "render", "watch"]

DEFAULT_EVENTS = 10   # latest events shown
TOP_ADVICE = 3        # findings shown, most severe first
MAX_RANK_ROWS = 16    # more ranks: the open ones and those that built most, then a count
SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}
EVENT_COLUMNS = ("time", "rank", "function", "kind", "reason")  # reason: also what changed
FUNCTION_WIDTH = 24   # the widest function name shown whole; a longer one keeps its [phase]
OPEN_NOTE = ("a log holds finished compiles only: for an open log, 'last event' is how long its "
             "rank has run (compiling or not) since its last compile ended")


def _text(value: Any, style: str = "") -> Text:
    """A value from a log as one line of rich text: no markup read, no control characters."""
    return Text(strip_control(value, keep_newlines=False), style=style)


@dataclasses.dataclass
class RankRow:
    """What the ranks table shows of one rank."""

    rank: Any
    graphs: int = 0
    recompiles: int = 0
    compile_s: float = 0.0
    events: int = 0
    last_at: float | None = None  # when its last event ended (its start + Dynamo seconds)
    open: bool = False            # its log has no close after its last line


def _rank_key(rank: Any) -> tuple[int, Any]:
    return (0, rank) if isinstance(rank, int) else (1, str(rank))


def rank_rows(follower: Follower, events: Sequence[CompileEvent] | None = None) -> list[RankRow]:
    """One row per rank with a log (events or not), by rank."""
    events = readable(follower.log.events) if events is None else events
    by_rank: dict[Any, list[CompileEvent]] = defaultdict(list)
    for event in events:
        by_rank[event.rank].append(event)
    unclosed = set(follower.unclosed_ranks)
    ranks = set(follower.log.header.get("ranks") or ()) | set(by_rank) | unclosed
    rows = []
    for rank in sorted(ranks, key=_rank_key):
        mine = by_rank.get(rank, [])
        ends = [s + float(d or 0.0) for e in mine
                if (s := number(e.started_at)) is not None and (d := number(e.duration_s)) is not None]
        rows.append(RankRow(rank, graphs(mine), len(of_kind(mine, "recompile")),
                            total_seconds(mine), len(mine), max(ends, default=None),
                            rank in unclosed))
    return rows


def _ago(at: float | None, now: float) -> str:
    return "-" if at is None else f"{max(now - at, 0.0):.1f} s ago"


def _ranks_table(rows: list[RankRow], now: float) -> Table:
    """The ranks table; past ``MAX_RANK_ROWS`` ranks, the open ones and the busiest are kept."""
    shown = rows
    if len(rows) > MAX_RANK_ROWS:
        kept = sorted(rows, key=lambda r: (not r.open, -r.graphs, _rank_key(r.rank)))
        shown = sorted(kept[:MAX_RANK_ROWS], key=lambda r: _rank_key(r.rank))
    table = Table(title=Text("Ranks", style="bold"), title_justify="left", expand=False)
    for name in ("rank", "graphs", "recompiles", "compile s", "events"):
        table.add_column(Text(name), justify="right")
    table.add_column(Text("last event"), justify="right")
    table.add_column(Text("log"))
    for r in shown:
        table.add_row(_text(number_text(r.rank, "d") or UNKNOWN), Text(str(r.graphs)),
                      Text(str(r.recompiles), style="yellow" if r.recompiles else ""),
                      Text(f"{r.compile_s:.1f}"), Text(str(r.events)), Text(_ago(r.last_at, now)),
                      Text("open", style="green") if r.open else Text("closed", style="dim"))
    if len(shown) < len(rows):
        table.caption = Text(f"{len(rows) - len(shown)} more rank(s) not shown "
                             f"({sum(r.open for r in rows)} of {len(rows)} open)")
    return table


def _cell(key: str, event: CompileEvent, label: str, t0: float) -> str:
    """A cell as the event table words it; the reason column as the text report's
    (:func:`~neuronkit.views.text.why_text`: what changed against the variant's last graph)."""
    return why_text(event) if key == "reason" else CELLS[key](event, label, t0)


def _events_table(events: list[CompileEvent], limit: int) -> Table:
    """The latest ``limit`` events, described as the event table describes them: short function
    names (``forward[prefill]``, the class named once under the table) kept whole up to
    ``FUNCTION_WIDTH`` characters, a longer one cut before its ``[phase]``; the changed /
    reason column takes the rest of the width, cut with an ellipsis."""
    latest = events[-limit:] if limit else []
    starts = [n for e in events if (n := number(e.started_at)) is not None]
    t0 = min(starts, default=0.0)
    labels = function_labels(latest)
    shorts = {label: fit_label(short, FUNCTION_WIDTH)
              for label, short in short_names(labels.values()).items()}
    legend = name_legend(labels, shorts)
    table = Table(title=Text(f"Latest events ({len(latest)} of {len(events)})", style="bold"),
                  title_justify="left", expand=True,
                  caption=_text("functions: " + "; ".join(legend)) if legend else None,
                  caption_justify="left")
    named = max(map(len, shorts.values()), default=8)
    for key in EVENT_COLUMNS:
        label = "changed / reason" if key == "reason" else COLUMN_LABELS[key]
        table.add_column(Text(label), no_wrap=True, overflow="ellipsis",
                         ratio=1 if key == "reason" else None,
                         min_width=named if key == "function" else None,
                         justify="right" if key in ("time", "rank") else "left")
    table.add_column(Text("compile s"), justify="right", no_wrap=True)
    for e in latest:
        label = labels.get((e.function, e.location), e.function)
        cells = [_text(bounded(_cell(key, e, shorts.get(label, label), t0)))
                 for key in EVENT_COLUMNS]
        if e.kind != "first":
            cells[EVENT_COLUMNS.index("kind")].stylize("yellow")
        table.add_row(*cells, Text(number_text(e.total_s, ".2f")))
    return table


def _advice_view(advice: Sequence[Advice], top: int = TOP_ADVICE) -> Group:
    """The ``top`` findings: severity and title, then the fix (or the detail) dimmed."""
    lines: list[RenderableType] = [Text(f"Advice ({min(top, len(advice))} of {len(advice)})",
                                        style="bold")]
    for finding in advice[:top]:
        severity = strip_control(finding.severity, keep_newlines=False)
        lines.append(_one_line(Text(f"{severity:<9}", SEVERITY_STYLE.get(severity, "")),
                               _text(finding.title)))
        more = f"fix: {finding.fix}" if finding.fix else finding.detail
        if more:
            lines.append(_one_line(Text(" " * 9), _text(more, "dim")))
    return Group(*lines)


def _one_line(*parts: Text) -> Text:
    """Parts joined into one line, cut with an ellipsis at the console's width."""
    line = Text.assemble(*parts)
    line.no_wrap, line.overflow = True, "ellipsis"
    return line


def _seconds(events: list[CompileEvent]) -> str:
    """The compile seconds by source: Dynamo's, and the NEFF builds where there are any."""
    total = total_seconds(events)
    neff = sum(e.neff_s for e in events)
    return f"{total - neff:.1f} s Dynamo compile" + (f" + {neff:.1f} s NEFF builds" if neff else "")


def _title(follower: Follower, events: list[CompileEvent], rows: list[RankRow]) -> Text:
    logs = follower.logs
    still = sum(not closed for closed in logs.values())
    state = "every log closed" if follower.finished else f"{still} open"
    title = Text.assemble(Text("neuronkit watch ", style="bold"), _text(follower.path),
                          Text(f"\n{len(logs)} log(s), {state}, {len(rows)} rank(s), "
                               f"{len(events)} events, {graphs(events)} graphs, "
                               f"{_seconds(events)}"))
    if follower.offsets:
        shifts = ", ".join(f"{strip_control(h, keep_newlines=False)} {s:+.3f} s"
                           for h, s in list(follower.offsets.items())[:8])
        title.append_text(_text(f"\nclocks aligned at the first barrier: {shifts} taken off"))
    return title


def render(follower: Follower, *, events: int = DEFAULT_EVENTS,
           advice: Sequence[Advice] | None = None, now: float | None = None) -> RenderableType:
    """One frame of the view of what ``follower`` has read so far (it is not polled here).
    ``advice``: ``diagnose(follower.log)`` if already made; ``now``: the time "ago" counts from."""
    if not follower.logs:
        return Text.assemble("waiting for logs in ", _text(follower.path), " (Ctrl-C stops)")
    now = time.time() if now is None else now
    shown = readable(follower.log.events)
    rows = rank_rows(follower, shown)
    advice = diagnose(follower.log) if advice is None else advice
    parts: list[RenderableType] = [_title(follower, shown, rows), _ranks_table(rows, now)]
    if events:
        parts.append(_events_table(shown, events))
    parts.append(_advice_view(advice))
    if follower.unclosed_ranks:
        parts.append(Text(OPEN_NOTE, style="dim"))
    return Group(*parts)


class _Frames:
    """The follower polled for each frame; the advice made again only when the events changed."""

    def __init__(self, follower: Follower, events: int) -> None:
        self.follower, self.events = follower, events
        self._memo: dict = {}
        self._key: tuple[int, float] | None = None
        self._advice: list[Advice] = []

    def next(self) -> RenderableType:
        self.follower.poll()
        log = self.follower.log
        key = (len(log.events), total_seconds(readable(log.events)))
        if key != self._key:
            self._key, self._advice = key, diagnose(log, memo=self._memo)
        return render(self.follower, events=self.events, advice=self._advice)


def final_report(follower: Follower, width: int = WIDTH) -> str:
    """What ``neuronkit report PATH`` prints for the watched path (the follower reads the files
    ``open_log`` reads: ``log.runs``); where it cannot be opened whole now, the report of what
    the follower read. ``width``: its event table's."""
    try:
        log = open_log(follower.path)
    except (OSError, ValueError):
        log = follower.log
        if follower.unclosed_ranks:
            log.header["unclosed_ranks"] = follower.unclosed_ranks
    return format_report(log, limit=DEFAULT_LIMIT, advice=diagnose(log), summary=log.summary(),
                         width=width)


def _live(frames: _Frames, console: Console, interval: float) -> bool:
    """Draw frames until every log is closed (False) or Ctrl-C (True). In the main thread, Ctrl-C
    sets a flag the loop reads between frames, so it never lands inside rich's drawing (where a
    KeyboardInterrupt could leave its console locked); elsewhere it is caught as raised."""
    stop = threading.Event()
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, lambda signum, frame: stop.set()) if in_main else None
    try:
        with Live(frames.next(), console=console, auto_refresh=False) as live:
            while not frames.follower.finished and not stop.wait(interval):
                live.update(frames.next(), refresh=True)
    except KeyboardInterrupt:
        return True
    finally:
        if in_main:
            signal.signal(signal.SIGINT, previous if previous is not None
                          else signal.default_int_handler)
    return stop.is_set()


def watch(path: str | Path, *, console: Console | None = None, interval: float = 1.0,
          once: bool = False, events: int = DEFAULT_EVENTS) -> int:
    """Follow ``path`` (a run folder, or one log) live on ``console``, then print the final
    report; ``once``: draw one frame only. Returns the exit code (0; Ctrl-C included)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no folder or log at {path}: give the folder a run writes its "
                                "logs to (neuronkit record --log-dir DIR)")
    console = Console() if console is None else console
    frames = _Frames(follow(path), events)
    if once:
        console.print(frames.next())
        return 0
    stopped = _live(frames, console, interval)
    width = max(NARROWEST, min(WIDTH, console.width)) if console.is_terminal else WIDTH
    console.out(final_report(frames.follower, width), highlight=False)
    if stopped:
        unclosed = frames.follower.unclosed_ranks
        print(strip_control(f"neuronkit watch: stopped (Ctrl-C); the report covers what was "
                            f"written so far{'; open logs: rank(s) ' if unclosed else ''}"
                            f"{', '.join(map(str, unclosed))}"), file=sys.stderr)
    return 0
