"""Text for the compile cache reports: sizes, durations, and paths from disk made printable."""
from __future__ import annotations

__all__ = ["ago", "human_size", "printable"]


def printable(value: object) -> str:
    """``str(value)`` with control and other non-printable characters escaped (``\\x1b``)."""
    text = str(value)
    return text if text.isprintable() else \
        "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def human_size(nbytes: int) -> str:
    size = float(nbytes)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"  # pragma: no cover


def ago(seconds: float) -> str:
    """``90`` -> ``"2 min"``: a readable duration."""
    seconds = max(0.0, seconds)
    for unit, span in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= span:
            return f"{seconds / span:.0f} {unit}"
    return f"{seconds:.0f} s"
