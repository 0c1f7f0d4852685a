"""Run-wide test report: how much of the test time the notebooks took (CI prints it)."""
from __future__ import annotations

import time

import pytest

_seconds: dict[str, float] = {"notebooks": 0.0, "tests": 0.0}
_files: dict[str, set[str]] = {"notebooks": set(), "tests": set()}
_started = time.monotonic()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Add up each test's setup, call and teardown time by where it lives (works under xdist:
    the reports reach the controlling process)."""
    part = "notebooks" if report.nodeid.startswith("notebooks/") else "tests"
    _seconds[part] += report.duration
    _files[part].add(report.nodeid.split("::")[0])


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    total = sum(_seconds.values())
    if not total:
        return
    wall = time.monotonic() - _started
    notebooks = _seconds["notebooks"]
    terminalreporter.write_line(
        f"test time: notebooks {notebooks:.0f} s ({len(_files['notebooks'])} notebooks, "
        f"{notebooks / total:.0%}), other tests {_seconds['tests']:.0f} s "
        f"({len(_files['tests'])} files); {total:.0f} s summed over workers, {wall:.0f} s wall")
