"""`neuronkit watch DIR`: the frame drawn from a follower (ranks, counts, reasons, advice, hostile
text kept literal), the live run in a pseudo-terminal that ends by itself with the final report,
Ctrl-C, --once and a missing folder."""
from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from rich.console import Console

import neuronkit as nk
from neuronkit.advice.diagnose import diagnose
from neuronkit.apps import watch as watch_module
from neuronkit.apps.cli import main
from neuronkit.events.event import CompileEvent
from neuronkit.events.schema import FORMAT, FORMAT_VERSION
from neuronkit.log.compile_log import CompileLog

REASON = "0/{i}: tensor 'input_ids' size mismatch at index 1. expected {a}, actual {b}"


def rank_log(folder: Path, rank: int, host: str = "node") -> CompileLog:
    """A log as `neuronkit record` names and heads it, written as events are appended."""
    return CompileLog(header={"format": FORMAT, "version": FORMAT_VERSION, "rank": rank,
                              "host": host, "device": "cpu", "backend": "eager"},
                      path=folder / f"{host}.rank{rank}.jsonl")


def event(i: int, rank: int, *, function: str = "forward", start: float = 1000.0,
          lengths: tuple[int, int] = (16, 16)) -> CompileEvent:
    """The i-th compile of ``function`` on ``rank``: the first one, or a recompile for a new
    sequence length (its reason as torch words it)."""
    old, new = lengths
    return CompileEvent(function=function, location="model.py:10", compile_id=f"0/{i}",
                        started_at=start, duration_s=1.5, input_shapes={"input_ids": [2, new]},
                        kind="first" if i == 0 else "recompile", rank=rank,
                        changed="" if i == 0 else f"input_ids dim 1: {old} -> {new}",
                        reasons=[] if i == 0 else [REASON.format(i=i - 1, a=old, b=new)])


def two_ranks(folder: Path) -> tuple[CompileLog, CompileLog]:
    """Rank 0: three graphs (two recompiles), its log closed; rank 1: one graph, still open."""
    zero, one = rank_log(folder, 0), rank_log(folder, 1)
    for i, (old, new) in enumerate([(16, 16), (16, 48), (48, 80)]):
        zero.append(event(i, 0, start=1000.0 + i, lengths=(old, new)))
    one.append(event(0, 1, start=1000.5))
    zero.set_wall_time(20.0)
    return zero, one


def frame_text(follower, width: int = 120, **options) -> str:
    console = Console(record=True, width=width, file=io.StringIO())
    console.print(watch_module.render(follower, **options))
    return console.export_text()


def table_rows(text: str) -> dict[str, list[str]]:
    """The ranks table's body rows, by their first cell."""
    block = text.split("Ranks", 1)[1].split("Latest events", 1)[0]
    rows = [[c.strip() for c in line.strip().strip("│").split("│")]
            for line in block.splitlines() if line.startswith("│")]
    return {row[0]: row for row in rows}


def test_frame_shows_each_rank_its_counts_the_reasons_and_the_advice(tmp_path):
    two_ranks(tmp_path)
    follower = nk.follow(tmp_path)
    assert len(follower.poll()) == 4
    now = 1000.5 + 1.5 + 7.0  # 7 s after rank 1's event ended
    text = frame_text(follower, now=now)
    rows = table_rows(text)
    #            rank graphs recompiles compile s events last event   log
    assert rows["0"] == ["0", "3", "2", "4.5", "3", "5.5 s ago", "closed"]
    assert rows["1"] == ["1", "1", "0", "1.5", "1", "7.0 s ago", "open"]
    assert "2 log(s), 1 open, 2 rank(s), 4 events, 4 graphs, 6.0 s Dynamo compile" in text
    assert "Latest events (4 of 4)" in text
    assert "input_ids dim 1: 48 -> 80" in text      # the reason, as the event table words it
    assert "recompile" in text and "forward" in text
    top = diagnose(follower.log)[0]
    assert top.severity == "warning" and top.title[:40] in text
    assert watch_module.OPEN_NOTE[:40] in text      # rank 1's log is open
    assert "waiting for logs" not in text


def test_frame_limits_the_latest_events_and_waits_for_logs(tmp_path):
    follower = nk.follow(tmp_path)
    follower.poll()
    assert frame_text(follower).strip() == f"waiting for logs in {tmp_path} (Ctrl-C stops)"
    two_ranks(tmp_path)
    follower.poll()
    text = frame_text(follower, events=1)
    assert "Latest events (1 of 4)" in text
    assert "16 -> 48" not in text and "48 -> 80" in text  # only the latest
    assert "Latest events" not in frame_text(follower, events=0)


def test_hostile_log_text_is_shown_literally_without_escapes(tmp_path):
    folder = tmp_path / "run[bold]dir"
    folder.mkdir()
    log = rank_log(folder, 0)
    hostile = event(1, 0, function="[bold]x\x1b]0;t\x07", lengths=(16, 48))
    hostile.reasons = ["[red]why\x1b[2J\x9b31m"]
    hostile.context = "[link=http://e.x]step\x1b]8;;http://e.x\x07"
    log.append(hostile)
    follower = nk.follow(folder)
    follower.poll()
    out = io.StringIO()
    Console(file=out, force_terminal=True, color_system="truecolor", width=160).print(
        watch_module.render(follower))
    text = out.getvalue()
    assert "[bold]x" in text and "[red]why" in text   # no markup read in log text
    assert "run[bold]dir" in text                     # nor in the folder's name
    for escape in ("\x1b]", "\x07", "\x1b[2J", "\x9b"):
        assert escape not in text, repr(escape)
    assert "\x1b[" in text  # the console does draw styles: the checks above are not vacuous


def test_once_prints_one_frame_and_a_missing_folder_exits_2(tmp_path, capsys):
    two_ranks(tmp_path)
    assert main(["watch", str(tmp_path), "--once"]) == 0
    out = capsys.readouterr().out
    assert "Ranks" in out and "Advice" in out and "neuronkit compile report" not in out
    assert main(["watch", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert f"neuronkit watch: error: no folder or log at {tmp_path / 'nope'}" in err


def write_run(folder: Path, started: threading.Event, pause: float = 0.3) -> None:
    """Two ranks start, compile while the watch runs, then close their logs."""
    started.wait(10)
    logs = [rank_log(folder, 0), rank_log(folder, 1)]
    for i, (old, new) in enumerate([(16, 16), (16, 48), (48, 80)]):
        time.sleep(pause)
        for rank, log in enumerate(logs):
            log.append(event(i, rank, start=time.time(), lengths=(old, new)))
    time.sleep(pause)
    for log in logs:
        log.set_wall_time(5.0)


def test_watch_follows_a_run_and_ends_with_the_report_when_every_log_closes(tmp_path, capsys):
    started, codes = threading.Event(), []
    watcher = threading.Thread(target=lambda: codes.append(main(["watch", str(tmp_path),
                                                                  "--interval", "0.1"])),
                               daemon=True)  # left behind, should it never end
    writer = threading.Thread(target=write_run, args=(tmp_path, started))
    watcher.start()
    writer.start()
    started.set()
    writer.join(20)
    watcher.join(20)
    assert not watcher.is_alive(), "the watch did not end once every log was closed"
    assert codes == [0]
    out = capsys.readouterr().out
    assert main(["report", str(tmp_path)]) == 0
    report = capsys.readouterr().out
    assert report.startswith("neuronkit compile report:") and "ranks 0,1" in report
    frame, _, rest = out.partition(report.splitlines()[0])
    assert report.splitlines()[0] + rest == report     # what `neuronkit report DIR` prints
    assert "every log closed" in frame and "6 events" in frame  # the last frame before it


# -- in a pseudo-terminal --------------------------------------------------------------------------

class Terminal:
    """`python -m neuronkit ARGS` in a pseudo-terminal, its output read as it comes."""

    def __init__(self, *args: str) -> None:
        import pty

        master, slave = pty.openpty()
        env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "150", "LINES": "60",
               "PYTHONIOENCODING": "utf-8"}
        for name in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
            env.pop(name, None)
        self.proc = subprocess.Popen([sys.executable, "-m", "neuronkit", *args], stdin=slave,
                                     stdout=slave, stderr=slave, env=env, close_fds=True)
        os.close(slave)
        self.master, self.chunks = master, bytearray()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:  # EIO: the child's side closed
                return
            if not data:
                return
            self.chunks += data

    @property
    def text(self) -> str:
        return bytes(self.chunks).decode("utf-8", "replace")

    def wait_for(self, needle: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while needle not in self.text:
            assert self.proc.poll() is None, f"exited {self.proc.returncode}: {self.text[-3000:]}"
            assert time.monotonic() < deadline, f"no {needle!r} in: {self.text[-3000:]}"
            time.sleep(0.05)

    def finish(self, timeout: float = 30.0) -> int:
        try:
            code = self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self.reader.join(5)
            os.close(self.master)
        return code


@pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")
def test_watch_renders_live_in_a_terminal_and_ends_with_the_report(tmp_path):
    term = Terminal("watch", str(tmp_path), "--interval", "0.2")
    try:
        term.wait_for("waiting for logs in")
        logs = [rank_log(tmp_path, 0), rank_log(tmp_path, 1)]
        logs[0].append(event(0, 0, function="live_one", start=time.time()))
        term.wait_for("live_one")                # drawn while both logs are open
        assert "2 log(s), 2 open" in term.text
        logs[1].append(event(0, 1, function="live_two", start=time.time()))
        logs[1].append(event(1, 1, function="live_two", start=time.time(), lengths=(16, 48)))
        term.wait_for("16 -> 48")               # a later frame: rank 1's recompile and its reason
        for log in logs:
            log.set_wall_time(3.0)
    finally:
        code = term.finish()
    text = term.text
    assert code == 0, text[-3000:]
    assert "\x1b[1A" in text                       # frames drawn over each other, in place
    report = text.split("neuronkit compile report:", 1)[1]
    assert "Per function" in report and "Advice" in report and "ranks 0,1" in report


@pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")
def test_ctrl_c_stops_the_watch_with_the_report_so_far_and_exit_0(tmp_path):
    log = rank_log(tmp_path, 3)
    log.append(event(0, 3, function="stuck_fn", start=time.time()))
    term = Terminal("watch", str(tmp_path), "--interval", "0.2")
    try:
        term.wait_for("stuck_fn")
        term.proc.send_signal(signal.SIGINT)
    finally:
        code = term.finish()
    text = term.text
    assert code == 0, text[-3000:]
    assert "Traceback" not in text
    assert "neuronkit compile report:" in text.split("stuck_fn", 1)[1]
    assert "neuronkit watch: stopped (Ctrl-C)" in text and "open logs: rank(s) 3" in text
