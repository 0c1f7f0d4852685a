"""One finding of the advice: a title, what was seen, the fix, a severity and the numbers behind
it. Every family of advice returns these; the type sits below them all."""
from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Advice", "SEVERITIES", "Severity"]

Severity = Literal["info", "warning", "critical"]
SEVERITIES: tuple[str, ...] = ("critical", "warning", "info")


@dataclass
class Advice:
    """One finding: a title, what was seen, the fix, a severity and the numbers behind it."""

    title: str
    detail: str
    fix: str = ""
    severity: Severity = "info"
    numbers: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"Advice severity must be one of {SEVERITIES}, got {self.severity!r}")

    def __str__(self) -> str:
        lines = [f"[{self.severity}] {self.title}"]
        if self.detail:
            lines += textwrap.wrap(self.detail, 100, initial_indent="  ", subsequent_indent="  ")
        if self.fix:
            lines += textwrap.wrap(self.fix, 100, initial_indent="  fix: ",
                                   subsequent_indent="       ")
        return "\n".join(lines)
