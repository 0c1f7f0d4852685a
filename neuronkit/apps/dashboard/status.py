"""The dashboard's status line: what the last action said, and the error it ended with."""
from __future__ import annotations

import traceback

from traitlets import Enum, HasTraits, Unicode

from neuronkit.apps.dashboard.inputs import describe_error

__all__ = ["StatusLine"]


class StatusLine(HasTraits):
    """One message and its level; a failure keeps its 'Type: message' and its traceback."""

    status = Unicode()
    status_kind = Enum(("info", "busy", "ok", "error"), default_value="info")
    error = Unicode(help="'Type: message' of the last failed action, '' after a success")
    error_detail = Unicode(help="traceback of the last failed action")

    def say(self, text: str, kind: str = "info") -> None:
        self.status_kind = kind
        self.status = text

    def fail(self, exc: BaseException) -> None:
        """Show ``exc`` (type and message, traceback kept in error_detail)."""
        self.error = describe_error(exc)
        self.error_detail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        self.say(self.error, "error")

    def clear_error(self) -> None:
        self.error = self.error_detail = ""
