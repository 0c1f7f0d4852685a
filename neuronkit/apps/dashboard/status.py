"""The dashboard's status line: what the last action said, the error it ended with, and a note
on the log shown that stays in front of every message (a synthetic log says so)."""
from __future__ import annotations

import traceback
from typing import Any

from traitlets import Enum, HasTraits, Unicode, observe

from neuronkit.apps.dashboard.inputs import describe_error
from neuronkit.events.facts import synthetic_reason

__all__ = ["StatusLine", "synthetic_note"]


def synthetic_note(header: Any) -> str:
    """What the status line says first of a log with this header: ``SYNTHETIC log, not
    measured (why)`` for one that is no measurement (``synthetic_reason``), else ""."""
    reason = synthetic_reason(header)
    return f"SYNTHETIC log, not measured ({reason})" if reason else ""


class StatusLine(HasTraits):
    """One message and its level, after the ``log_note`` on the log shown (an error is shown
    alone); a failure keeps its 'Type: message' and its traceback."""

    status = Unicode()
    status_kind = Enum(("info", "busy", "ok", "error"), default_value="info")
    error = Unicode(help="'Type: message' of the last failed action, '' after a success")
    error_detail = Unicode(help="traceback of the last failed action")
    log_note = Unicode(help="said in front of every message: the log shown is synthetic")
    said = Unicode(help="the last message, without the note")

    def say(self, text: str, kind: str = "info") -> None:
        self.status_kind = kind
        self.said = text
        self.status = f"{self.log_note} · {text}" if self.log_note and kind != "error" else text

    @observe("log_note")
    def _note_changed(self, change: Any) -> None:
        if self.status_kind != "error":
            self.status = f"{self.log_note} · {self.said}" if self.log_note else self.said

    def fail(self, exc: BaseException) -> None:
        """Show ``exc`` (type and message, traceback kept in error_detail)."""
        self.error = describe_error(exc)
        self.error_detail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        self.say(self.error, "error")

    def clear_error(self) -> None:
        self.error = self.error_detail = ""
